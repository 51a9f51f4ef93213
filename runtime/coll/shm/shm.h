/*
 * shm.h - intra-node collectives through one shared-memory segment per
 * node-local group: ranks reduce straight from the segment instead of
 * paying transport copies (see doc/design.md for the algorithm).
 *
 * Contract between the collective layer (coll_*.c) and shm.c.  Large
 * buffers are handled inside (chunked, pipelined); every call is made by
 * all members of the group, in the same order.  A dead member is detected
 * (no progress within HOROVOD_PEER_TIMEOUT seconds and its pid gone) and
 * reported as HVD_ERR_PEER_FAILED instead of hanging.
 */
#ifndef HVD_SHM_H
#define HVD_SHM_H

#include "base/base.h"

#pragma GCC visibility push(hidden)

typedef struct shm_group shm_group_t;

/* Called by every member during set-up, over the group, through the
 * bootstrap or the transport: a broadcast of bytes from local rank 0
 * (after it made the segment: the random part of its name), then a
 * barrier (after the others attached). */
typedef hvd_status_t (*shm_bcast_fn)(void *arg, void *buf, size_t bytes);
typedef hvd_status_t (*shm_barrier_fn)(void *arg);

/* key: unique per job, node and group (e.g. "<nspace>-n<node>-c<ctx>"),
 * part of the name for the admin's eyes; local_rank/local_size: the
 * caller's place in the node-local group; arg is passed to both
 * callbacks. */
hvd_status_t shm_group_create(const char *key, int local_rank, int local_size,
			      shm_barrier_fn barrier, shm_bcast_fn bcast,
			      void *arg, shm_group_t **out);
void shm_group_destroy(shm_group_t *g);
/* The machine runs more of the job's ranks than it has cores, though not
 * necessarily this group (nodes that are one machine): spin as little
 * as when the group itself outnumbers the cores (unless HOROVOD_SHM_SPIN
 * says otherwise). */
void shm_group_oversubscribed(shm_group_t *g);

/* A failure elsewhere in the job, for waiters that sleep: every 20 ms a
 * sleeping waiter also asks this (besides its peers' pids); a status
 * other than HVD_OK ends the wait with it and the reason written into
 * why[len] (HVD_ERR_PEER_FAILED, or HVD_ERR_MISMATCH: a call another
 * rank refused).  A member may wait on a live node-mate that itself left
 * the collective because a rank on another node died, as in the
 * hierarchical allreduce.  NULL (the default): only the group's own
 * members count. */
typedef hvd_status_t (*shm_check_fn)(void *arg, char *why, size_t len);
void shm_group_set_check(shm_group_t *g, shm_check_fn fn, void *arg);
/* This member waits on the network (1: an inter-node step of a
 * hierarchical collective, which has its own HOROVOD_PEER_TIMEOUT) or is
 * back (0).  While a member that is alive is away, its node-mates'
 * waits do not count time towards their timeout: it comes back with a
 * status of its own (a peer that failed, named), where their timeout
 * would blame it ("made no progress") for the network's silence, or for
 * a long transfer. */
void shm_away(shm_group_t *g, int away);

/* AVERAGE is reduced as SUM; the result is multiplied by scale (1.0:
 * not at all) inside the pipeline, while each step is still in the cache,
 * instead of in a pass of its own over the whole output. */
hvd_status_t shm_allreduce(shm_group_t *g, const void *sendbuf, void *recvbuf,
			   size_t count, hvd_dtype_t dtype, hvd_op_t op,
			   double scale);
/* Reduce all members' count elements; member r ends with the reduced
 * slice [hvd_reducescatter_offset(count, r, n), +count(r)) written at the
 * same offset of its recvbuf (recvbuf holds count elements). AVERAGE is
 * reduced as SUM (the caller scales). */
hvd_status_t shm_reduce_scatter(shm_group_t *g, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dtype,
				hvd_op_t op);
/* The same, but recvslice holds only this member's slice
 * (hvd_reducescatter_count(count, rank, n) elements, as hvd_reducescatter
 * returns it): no full-size scratch buffer.  sendbuf must be a separate
 * buffer of count elements (not HVD_IN_PLACE). */
hvd_status_t shm_reduce_scatter_slice(shm_group_t *g, const void *sendbuf,
				      void *recvslice, size_t count,
				      hvd_dtype_t dtype, hvd_op_t op);
/* Every member holds its slice (same split as above) in buf; afterwards
 * all members hold all count elements. */
hvd_status_t shm_allgather_slices(shm_group_t *g, void *buf, size_t count,
				  hvd_dtype_t dtype);
hvd_status_t shm_broadcast(shm_group_t *g, void *buf, size_t bytes, int root);
/* Alltoall of equal blocks of block bytes (sendbuf and recvbuf hold n
 * blocks in rank order; HVD_IN_PLACE or sendbuf == recvbuf allowed): one
 * exchange through the members' small buffers for block <=
 * shm_alltoall_small_max(g), the pipeline buffers for larger ones.
 * Members with different block sizes all get HVD_ERR_MISMATCH. */
hvd_status_t shm_alltoall(shm_group_t *g, const void *sendbuf, void *recvbuf,
			  size_t block);
size_t shm_alltoall_small_max(const shm_group_t *g);
hvd_status_t shm_barrier(shm_group_t *g);

#pragma GCC visibility pop

#endif /* HVD_SHM_H */

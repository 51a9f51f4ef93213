/*
 * coll/coll.h - the collectives' front door: what the engine, the public
 * API and the checkpointer call.
 *
 * One place routes by memory type (a buffer of the GPU path's memory goes
 * to its table, comm/backend.h; everything else to the host algorithms),
 * answers a communicator broken by an earlier failure, and does the calls
 * with nothing to do; the algorithms below never test any of it again.
 *
 * Collectives: sendbuf may equal recvbuf or be HVD_IN_PLACE (in place);
 * count 0 is valid.  On a failure every member returns an error (a dead
 * peer is detected within HOROVOD_PEER_TIMEOUT seconds, default 60).
 */
#ifndef HVD_COLL_H
#define HVD_COLL_H

#include "comm/backend.h"
#include "comm/comm.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* hvd_init, before the world communicator: the tuning knobs, the
 * backends' hooks, the GPU path's table when it is built in. */
void coll_init(void);
/* hvd_finalize: the GPU path's communicators and buffers go. */
void coll_finalize(void);

/* The checks of an allreduce (Adasum's) and of a reducescatter that only
 * the collective layer can make, for the API to make before the call is
 * let go (net/refusal.h); the collectives make them again. */
hvd_status_t coll_allreduce_args(const hvd_comm_t *comm, const void *recvbuf,
				 hvd_dtype_t dt, hvd_op_t op);
hvd_status_t coll_reducescatter_args(hvd_op_t op);
hvd_status_t coll_allreduce(hvd_comm_t *comm, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dtype,
			    hvd_op_t op);
hvd_status_t coll_allgatherv(hvd_comm_t *comm, const void *sendbuf,
			     size_t sendcount, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     hvd_dtype_t dtype);
hvd_status_t coll_broadcast(hvd_comm_t *comm, void *buf, size_t count,
			    hvd_dtype_t dtype, int root);
hvd_status_t coll_alltoallv(hvd_comm_t *comm, const void *sendbuf,
			    const size_t *sendcounts, const size_t *sdispls,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *rdispls, hvd_dtype_t dtype);
/* count elements from every member to every member, packed in rank
 * order, count the same on every member (the algorithms for equal blocks
 * count on it; a member that passes another count gets
 * HVD_ERR_MISMATCH).  An alltoallv whose blocks happen to be equal on
 * this member is not one: the others may not be. */
hvd_status_t coll_alltoall(hvd_comm_t *comm, const void *sendbuf,
			   void *recvbuf, size_t count, hvd_dtype_t dtype);
/* Horovod's even split (hvd_reducescatter_count/offset). */
hvd_status_t coll_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				void *recvbuf, size_t count,
				hvd_dtype_t dtype, hvd_op_t op);
hvd_status_t coll_barrier(hvd_comm_t *comm);

/* The engine's fusion of n device allreduces of one type into one
 * (HVD_ERR_UNSUPPORTED without the GPU path).  Host tensors are fused by
 * the engine itself into its fusion buffer and reduced by
 * coll_allreduce. */
hvd_status_t coll_fused_allreduce(hvd_comm_t *comm,
				  const struct comm_fusion_entry *entries,
				  int n, hvd_dtype_t dtype, hvd_op_t op,
				  double prescale, double postscale,
				  int compress_fp16);

/* Memory: 1 when p is device memory (0 without the GPU path, for NULL
 * and HVD_IN_PLACE); 1 when the GPU path is built in; copies between
 * device and host memory and page-locked host buffers (all three
 * HVD_ERR_UNSUPPORTED without the GPU path). */
int coll_is_device(const void *p);
int coll_has_device(void);
hvd_status_t coll_to_host(void *dst, const void *src, size_t bytes);
hvd_status_t coll_to_device(void *dst, const void *src, size_t bytes);
hvd_status_t coll_host_alloc(void **p, size_t bytes);
void coll_host_free(void *p);

/* A caller's stream (hvd_stream_set, comm/backend.h): an event on it
 * (HVD_ERR_UNSUPPORTED without the GPU path), the next device collective
 * of this thread ordered after ev and before follow, an event released. */
hvd_status_t coll_stream_mark(void *stream, void **ev);
void coll_stream_order(void *ev, void *follow);
void coll_event_release(void *ev);

#pragma GCC visibility pop

#endif /* HVD_COLL_H */

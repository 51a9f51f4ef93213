/*
 * coll_impl.h - what the host collective algorithms share: the tuning
 * table, algorithm selection (pure, unit-tested), placement, the
 * shared-memory group and hierarchy of a communicator, and the building
 * blocks one algorithm borrows from another.  Private to coll/.
 */
#ifndef HVD_COLL_IMPL_H
#define HVD_COLL_IMPL_H

#include "coll/shm/shm.h"
#include "comm/comm_impl.h"
#include "net/transport.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

enum coll_kind {
	CK_ALLREDUCE = 0,
	CK_ALLGATHER,
	CK_BROADCAST,
	CK_ALLTOALL,
	CK_REDUCESCATTER,
	CK_BARRIER,
	CK_COUNT
};

enum coll_algo {
	ALGO_AUTO = 0,
	ALGO_RD,       /* recursive doubling (allreduce, reducescatter)     */
	ALGO_RING,     /* ring (segmented, pipelined)                       */
	ALGO_SHM,      /* intra-node shared memory (shm.h)                  */
	ALGO_HIER,     /* shm reduce-scatter, cross-node UCX, shm allgather */
	ALGO_BINOMIAL, /* binomial tree (broadcast)                         */
	ALGO_CHAIN,    /* segmented pipeline along a chain (broadcast)      */
	ALGO_DIRECT,   /* everyone to everyone at once (allgather, rs)      */
	ALGO_PAIRWISE, /* n-1 exchange steps (alltoall)                     */
	ALGO_DISSEM,   /* dissemination (barrier)                           */
	ALGO_BRUCK,    /* log2(p) rounds of doubling blocks (allgather)     */
	ALGO_HALVING,  /* recursive halving (and doubling), 2^k ranks       */
	ALGO_COUNT
};

const char *coll_algo_name(enum coll_algo a);
const char *coll_kind_name(enum coll_kind k);

struct coll_tuning {
	enum coll_algo algo[CK_COUNT]; /* HVD_<KIND>_ALGO, or ALGO_AUTO   */
	size_t allreduce_small_max;    /* HVD_ALLREDUCE_SMALL_MAX          */
	size_t allreduce_pair_max;     /* HVD_ALLREDUCE_PAIR_MAX (2 ranks) */
	size_t reducescatter_small_max; /* HVD_REDUCESCATTER_SMALL_MAX     */
	size_t bcast_small_max;        /* HVD_BCAST_SMALL_MAX              */
	size_t allgather_small_max;    /* HVD_ALLGATHER_SMALL_MAX          */
	size_t alltoall_small_max;     /* HVD_ALLTOALL_SMALL_MAX           */
	size_t hier_leader_max;        /* HVD_HIER_LEADER_MAX              */
	size_t segment;                /* HVD_RING_SEGMENT (bytes)         */
	int segment_auto;              /* HVD_RING_SEGMENT unset           */
	int window;                    /* HVD_RING_WINDOW (segments)       */
	int steps;                     /* HVD_ALLTOALL_WINDOW (0: auto)    */
	int shm;                       /* HVD_SHM (1)                      */
	int hier;                      /* HOROVOD_HIERARCHICAL_ALLREDUCE:
					  -1 unset (auto), 0 off, 1 on    */
};

/* Where a collective runs, as far as selection cares. */
struct coll_place {
	int size;        /* members                                       */
	int nodes;       /* distinct nodes                                */
	int uniform;     /* same number of members on every node          */
	int local_size;  /* members on this node                          */
	int shm;         /* shared-memory collectives built in and on     */
	int crowded;     /* a machine of the job has more ranks than cores
			  * (transport_job_crowded: agreed)              */
};

/* Pure: fill t from an environment lookup (getenv, or a table in unit
 * tests).  Malformed values are reported through warn (may be NULL) and
 * replaced by the default. */
void coll_tuning_parse(struct coll_tuning *t,
		       const char *(*lookup)(const char *name),
		       void (*warn)(const char *msg));
/* Pure: the algorithm for a collective of 'bytes' bytes (per rank for
 * allreduce/reducescatter/broadcast, total for allgather/alltoall). */
enum coll_algo coll_select(const struct coll_tuning *t, enum coll_kind k,
			   size_t bytes, size_t count,
			   const struct coll_place *p);

/* Pure: coll_select's choice where the shared-memory group or the
 * hierarchy turned out unusable on the communicator (its members agree on
 * that): the same rules without them, so that the fallback is the
 * algorithm a job without shared memory gets, not a rule of its own. */
enum coll_algo coll_select_flat(const struct coll_tuning *t,
				enum coll_kind k, size_t bytes, size_t count,
				const struct coll_place *p);

/* Pure: whether a flat allreduce of 'bytes' ('count' elements) among
 * 'size' ranks goes by recursive doubling rather than the ring (the
 * rule of coll_select, and of the hierarchy's step between nodes). */
int coll_allreduce_rd(const struct coll_tuning *t, size_t bytes,
		      size_t count, int size);
/* Pure: whether it goes by recursive halving and doubling instead (a
 * power of two of ranks from four, past recursive doubling's sizes; other
 * numbers of ranks folded onto a power of two, where that pays). */
int coll_allreduce_halving(const struct coll_tuning *t, size_t bytes,
			   size_t count, int size);

/* Pure: a reducescatter or allgather of 'bytes' (allgather: the total)
 * that the allreduce through the node leaders does, or an alltoall of
 * 'bytes' a rank that goes through them (coll_select's rule; the hosts
 * ask it again for a forced ALGO_HIER). */
int coll_leaders(const struct coll_tuning *t, enum coll_kind k,
		 size_t bytes, const struct coll_place *p);

/* The process's tuning (read from the environment at hvd_init). */
const struct coll_tuning *coll_tuning(void);
void coll_tuning_load(void);
/* Placement facts of comm. */
void coll_place_of(hvd_comm_t *comm, struct coll_place *p);

/* The shared-memory group over comm when its members are all on one node
 * (created on first use, collectively); NULL when unavailable. */
shm_group_t *coll_shm(hvd_comm_t *comm);
/* Hierarchy (node and cross communicators, shared memory on the node)
 * usable on every member; agreed once per communicator. */
int coll_hier_ready(hvd_comm_t *comm);
/* The hierarchical allreduce through the node leaders (coll_allreduce.c):
 * every member of comm calls it with the same count; AVERAGE comes in as
 * SUM with its scale.  Small reducescatters and allgathers across nodes
 * are made of it too. */
hvd_status_t hier_allreduce_small(hvd_comm_t *comm, const void *src,
				  void *dst, size_t count, hvd_dtype_t dt,
				  hvd_op_t op, double scale);
/* coll_init: the shared-memory backend's hooks (coll_topo.c). */
void coll_topo_init(void);
/* What ends a wait outside the transport's transfers (shared memory, the
 * GPU path's NCCL waits): HVD_ERR_PEER_FAILED for a rank that failed
 * anywhere in the job, HVD_ERR_MISMATCH (on the public calls' thread)
 * for another rank's refusal of this call, why[len] saying which;
 * otherwise HVD_OK. */
hvd_status_t coll_world_check(char *why, size_t len);

/* The host algorithms behind the front door (dispatch.c has routed,
 * answered a broken communicator and the calls with nothing to do). */
hvd_status_t host_allreduce(hvd_comm_t *comm, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dtype,
			    hvd_op_t op);
hvd_status_t host_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				void *recvbuf, size_t count,
				hvd_dtype_t dtype, hvd_op_t op);
hvd_status_t host_broadcast(hvd_comm_t *comm, void *buf, size_t bytes,
			    int root);
hvd_status_t host_barrier(hvd_comm_t *comm);
hvd_status_t host_allgatherv(hvd_comm_t *comm, const void *sendbuf,
			     size_t sendcount, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     hvd_dtype_t dtype);
/* even: coll_alltoall's call, the same count from and to every member
 * on every member. */
hvd_status_t host_alltoallv(hvd_comm_t *comm, const void *sendbuf,
			    const size_t *sendcounts, const size_t *sdispls,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *rdispls, hvd_dtype_t dtype, int even);

/* Adasum (coll_adasum.c): comm's size a power of two, dt one of
 * adasum_type_ok's; src may equal dst. */
hvd_status_t host_adasum(hvd_comm_t *comm, const void *src, void *dst,
			 size_t count, hvd_dtype_t dt);
int adasum_type_ok(hvd_dtype_t dt);

/* Allreduce over the transport only (rd or ring by size); op must not be
 * AVERAGE (callers scale). */
hvd_status_t coll_allreduce_flat(hvd_comm_t *comm, const void *sendbuf,
				 void *recvbuf, size_t count,
				 hvd_dtype_t dtype, hvd_op_t op);

/* Ring reduce-scatter (coll_ring.c): the even split of count elements;
 * afterwards block r (comm rank r) holds the reduction, in dst or, where
 * mine is not NULL, in mine (block r's size; dst's block r is left
 * alone).  src may equal dst.  op must not be AVERAGE. */
hvd_status_t ring_reduce_scatter(struct xfer *x, const void *src, void *dst,
				 void *mine, size_t count, hvd_dtype_t dtype,
				 hvd_op_t op);
/* Ring allgather of n byte blocks (offset off[b], length len[b]) of buf;
 * block r is present on entry. */
hvd_status_t ring_allgather(struct xfer *x, void *buf, const size_t *off,
			    const size_t *len);

/* A reducescatter's call as a rank made it, carried behind its blocks
 * (xfer_send_tail), so that ranks whose counts differ while every
 * message has the size its receiver expects still fail, all of them. */
struct rs_call {
	uint64_t count;
	uint32_t dt, op;
};
static inline struct rs_call rs_call_of(size_t count, hvd_dtype_t dt,
					hvd_op_t op)
{
	return (struct rs_call){count, (uint32_t)dt, (uint32_t)op};
}
/* 1, with HVD_ERR_MISMATCH on x, when group rank peer's call c is not
 * this rank's (me). */
int rs_call_apart(struct xfer *x, int peer, const struct rs_call *c,
		  const struct rs_call *me);

/* Error exit of a collective: marks comm broken after a peer failure,
 * names the failed world rank, prefixes what was running. */
hvd_status_t coll_fail(hvd_comm_t *comm, hvd_status_t st, const char *fmt,
		       ...) HVD_PRINTF(3, 4);
/* The error for a collective on a communicator an earlier failure broke. */
hvd_status_t coll_broken(hvd_comm_t *comm, const char *what);

/* The error of a step a node-mate made and passed on through shared
 * memory: world rank 'failed' (< 0: none found) is marked failed here too
 * (for the reason why, unless this rank knows one) and named; without a
 * rank, "what: why". */
hvd_status_t coll_mate_failed(hvd_status_t st, int failed, const char *why,
			      const char *what);
/* What a node leader broadcasts in front of the result of its inter-node
 * step (the allreduce and the alltoall through the leaders): its status,
 * the world rank it found dead and why, so that a node-mate whose leader
 * failed gets the same error, never the leader's stale buffer. */
struct leader_hdr {
	int32_t status;
	int32_t failed; /* world rank found dead, or -1 */
	char why[120];
};
/* The leader: h from its step's status st over cross. */
void leader_hdr_set(struct leader_hdr *h, hvd_status_t st,
		    hvd_comm_t *cross);
/* Everyone, after the broadcast: the status in h, as an error named for
 * what ("hierarchical allreduce") on the leader and its node-mates. */
hvd_status_t leader_hdr_status(struct leader_hdr *h, int leader,
			       const char *what);
/* bytes of scratch kept on comm between calls (grown as needed, freed
 * with comm); one user at a time: a collective does not nest another on
 * the same comm while it holds it.  NULL: out of memory. */
void *coll_scratch(hvd_comm_t *comm, size_t bytes);
/* n is a power of two (1, 2, 4, ...): the ranks recursive halving and
 * doubling pair off by rank ^ m. */
static inline int coll_pow2(int n)
{
	return n > 0 && (n & (n - 1)) == 0;
}
static inline const void *coll_src(const void *sendbuf, void *recvbuf)
{
	return sendbuf == HVD_IN_PLACE ? recvbuf : sendbuf;
}

#pragma GCC visibility pop

#endif /* HVD_COLL_IMPL_H */

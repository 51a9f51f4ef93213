/*
 * comm.h - communicators and the internal collective interface.
 *
 * A communicator is an ordered group of world ranks with its own context
 * id, so that traffic of different communicators (the world, the engine's
 * private duplicate of it, process sets, node-local and cross-node groups)
 * never mixes even when they run concurrently on different threads.  All
 * collectives on one communicator must be called in the same order on
 * every member, from one thread at a time.
 *
 * The public blocking API (hvd_allreduce, ...) runs on the world
 * communicator; the engine runs on its own duplicate; the checkpointer
 * uses the public API.
 */
#ifndef HVD_COMM_H
#define HVD_COMM_H

#include "base/base.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

typedef struct hvd_comm hvd_comm_t;

/* Process-wide facts, filled in by hvd_init() from PMIx. */
struct hvd_world {
	int rank, size;
	int local_rank, local_size;
	int cross_rank, cross_size;
	int node_id, num_nodes;
	int *node_of;        /* [size] node id of each world rank          */
	int *local_rank_of;  /* [size] local rank of each world rank       */
	char nspace[256];    /* PMIx namespace                             */
	char hostname[256];  /* PMIx hostname of this rank's node          */
};

/* NULL before hvd_init(). */
const struct hvd_world *hvd_world(void);

/* The world communicator (all ranks, rank order); NULL before init. */
hvd_comm_t *comm_world(void);
/* A communicator over the given world ranks (in that order).  Collective
 * over the members only: every member must call it with the same list;
 * non-members must not call it.  Gets a fresh context id. */
hvd_status_t comm_create(const int *world_ranks, int n, hvd_comm_t **out);
/* Same group, new context id (collective over the members). */
hvd_status_t comm_dup(hvd_comm_t *comm, hvd_comm_t **out);
void comm_destroy(hvd_comm_t *comm);
int comm_rank(const hvd_comm_t *comm);
int comm_size(const hvd_comm_t *comm);
/* World rank of comm rank r. */
int comm_world_rank(const hvd_comm_t *comm, int r);

/* Collectives on host memory.  sendbuf may equal recvbuf (in place);
 * count 0 is valid.  On a failure every member returns an error (a dead
 * peer is detected within HOROVOD_PEER_TIMEOUT seconds, default 60). */
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
/* Horovod's even split (hvd_reducescatter_count/offset). */
hvd_status_t coll_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				void *recvbuf, size_t count,
				hvd_dtype_t dtype, hvd_op_t op);
hvd_status_t coll_barrier(hvd_comm_t *comm);

/* Reduction kernels (reduce.c): dst[i] = dst[i] OP src[i] for n elements.
 * float16/bfloat16 are computed in float32.  AVERAGE reduces as SUM; the
 * caller divides (reduce_scale) once at the end. */
void reduce_apply(void *dst, const void *src, size_t n, hvd_dtype_t dtype,
		  hvd_op_t op);
/* dst[i] = a[i] OP b[i] (three-operand form, dst may alias a or b). */
void reduce_apply3(void *dst, const void *a, const void *b, size_t n,
		   hvd_dtype_t dtype, hvd_op_t op);
/* buf[i] *= factor (integers: rounded toward zero after the multiply). */
void reduce_scale(void *buf, size_t n, hvd_dtype_t dtype, double factor);
/* memcpy with non-temporal stores: the copy goes to memory without reading
 * the destination's lines first or evicting the caches' contents; not
 * ordered with other stores until hvd_stream_fence(). */
void hvd_copy_stream(void *dst, const void *src, size_t n);
void hvd_stream_fence(void);
/* memcpy for the data paths' steps, into memory that may not be cached
 * (copy_stream.c says why not glibc's). */
void hvd_copy(void *dst, const void *src, size_t n);
/* float32 <-> float16 / bfloat16 conversions (round to nearest even). */
uint16_t hvd_float_to_half(float f);
float hvd_half_to_float(uint16_t h);
uint16_t hvd_float_to_bf16(float f);
float hvd_bf16_to_float(uint16_t h);

#pragma GCC visibility pop

#endif /* HVD_COMM_H */

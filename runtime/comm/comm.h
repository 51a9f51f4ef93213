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

#pragma GCC visibility pop

#endif /* HVD_COMM_H */

/*
 * comm_impl.h - the communicator structure, shared by comm.c, the
 * transport and the collective algorithms (opaque to everyone else).
 */
#ifndef HVD_COMM_IMPL_H
#define HVD_COMM_IMPL_H

#include "comm/comm.h"
#include "coll/shm/shm.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Context ids: 0 is the channel comm_create agrees on new ids over, 1 the
 * world; others are allocated by agreement (comm.c). */
#define COMM_CTX_CREATE 0u
#define COMM_CTX_WORLD 1u

struct hvd_comm {
	int rank, size;
	int *world_ranks;   /* [size]                                  */
	uint32_t ctx;
	uint32_t seq;       /* next collective (one thread at a time)  */
	int node_count;     /* distinct nodes among the members        */
	int uniform;        /* same number of members on every node    */
	int local_rank, local_size; /* among members on this node      */

	/* Built on first use, by all members at the same collective. */
	int hier_state;     /* 0 not yet, 1 built, -1 failed           */
	hvd_comm_t *node;   /* members on this node                    */
	hvd_comm_t *cross;  /* members with the same local rank        */
	int shm_state;      /* 0 not yet, 1 up, -1 unavailable         */
	shm_group_t *shm;   /* over all members (single-node comms)    */
	hvd_status_t broken; /* sticky error after a peer failure      */
};

/* Shared-memory group over comm when its members are all on one node
 * (created on first use); NULL when unavailable. */
shm_group_t *comm_shm(hvd_comm_t *comm);
/* Node and cross sub-communicators for hierarchical algorithms; HVD_OK
 * with *ok=0 when the comm is not hierarchical (one node, one rank per
 * node, or uneven nodes). */
hvd_status_t comm_hier(hvd_comm_t *comm, int *ok);
/* The library's world state, writable (init.c). */
struct hvd_world *hvd_world_mut(void);

/* init.c/comm.c: create and destroy the world communicator. */
hvd_status_t comm_world_create(const struct hvd_world *w);
void comm_world_destroy(void);

#pragma GCC visibility pop

#endif /* HVD_COMM_IMPL_H */

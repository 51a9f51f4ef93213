/*
 * comm/comm_impl.h - the communicator structure, shared by comm.c and the
 * collective layers above it (opaque to the engine and the API).
 */
#ifndef HVD_COMM_IMPL_H
#define HVD_COMM_IMPL_H

#include "comm/backend.h"
#include "comm/comm.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Context ids: 0 is the channel comm_create agrees on new ids over, 1 the
 * world; others are allocated by agreement (comm.c). */
#define COMM_CTX_CREATE 0u
#define COMM_CTX_WORLD 1u

struct hvd_comm {
	struct net_group net; /* rank, size, world ranks, context id,
				 sequence, broken: what the transport sees */
	int node_count;     /* distinct nodes among the members        */
	int uniform;        /* same number of members on every node    */
	int local_rank, local_size; /* among members on this node      */

	/* Built on first use, by all members at the same collective. */
	int hier_state;     /* 0 not yet, 1 built, -1 failed           */
	hvd_comm_t *node;   /* members on this node                    */
	hvd_comm_t *cross;  /* members with the same local rank        */
	/* Built with them, per member i (comm order), in one allocation:
	 * local_index[i], its position among the members on its node (the
	 * cross group of local index j is the members with j, in comm
	 * order); cross_index[i], its rank in that cross group;
	 * node_index[i], its node, numbered in the order of the nodes'
	 * first members (local index 0's cross group: node j's first member
	 * is its cross rank j); member_at[node * local_size + local index],
	 * the member there. */
	int *local_index, *cross_index, *node_index, *member_at;
	/* Scratch of the hierarchical algorithms (coll_scratch), kept
	 * between calls: a freed one goes back to the kernel and every
	 * call would fault its pages in again. */
	void *scratch;
	size_t scratch_cap;
	/* What each registered backend keeps for this communicator. */
	struct comm_slot slot[COMM_MAX_BACKENDS];
};

/* Node and cross sub-communicators for hierarchical algorithms; HVD_OK
 * with *ok=0 when the comm is not hierarchical (one node, one rank per
 * node, or uneven nodes). */
hvd_status_t comm_hier(hvd_comm_t *comm, int *ok);

#pragma GCC visibility pop

#endif /* HVD_COMM_IMPL_H */

/*
 * engine/pset.h - the table of process sets (pset.c): each set's sorted
 * world ranks, this rank's place in it, and the member-only communicator.
 * Set 0 is the world on the engine's communicator.
 */
#ifndef HVD_ENGINE_PSET_H
#define HVD_ENGINE_PSET_H

#include "comm/comm.h"
#include "engine/core/pset_spec.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

struct pset {
	int32_t id;
	int n;
	int *ranks;	  /* world ranks, ascending */
	int my_rank;	  /* -1: not a member */
	hvd_comm_t *comm; /* members only */
};

struct pset_table {
	struct pset **sets; /* by id; NULL for free ids */
	int cap;
	int32_t next_id;
	int dynamic; /* HOROVOD_DYNAMIC_PROCESS_SETS */
};

struct pset *pset_get(const struct pset_table *t, int32_t id);
/* Adds a set under id (creating its communicator on members). */
hvd_status_t pset_table_add(struct pset_table *t, int32_t id, const int *ranks,
			    int n, int world_rank, hvd_comm_t *engine_comm);
void pset_table_remove(struct pset_table *t, int32_t id);
void pset_table_free(struct pset_table *t);
int pset_is_member(const struct pset_table *t, int32_t id, int world_rank);
/* Some set leaves out some rank (the same on every rank: sets are agreed). */
int pset_table_partial(const struct pset_table *t);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_PSET_H */

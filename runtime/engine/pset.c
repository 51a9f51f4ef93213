/*
 * pset.c - process sets: the table of sets with their member-only
 * communicators (the spec parser and rank-list checks are
 * core/pset_spec.c).
 *
 * Set 0 is the world (the engine's own communicator).  Static sets get ids
 * 1..n in the order of the spec; dynamic sets get the next free id when
 * their add is executed, which happens in the same cycle on every rank, so
 * ids agree without being sent.  Every rank takes part in making a set's
 * communicator (comm_split is collective over the engine's: a GPU job's
 * NCCL communicator is split from the engine's); only members get one,
 * non-members keep the membership list so that the coordinator can tell
 * when an op is ready.
 */
#include "config.h"

#include "engine/pset.h"

#include <stdlib.h>
#include <string.h>

struct pset *pset_get(const struct pset_table *t, int32_t id)
{
	return id >= 0 && id < t->cap ? t->sets[id] : NULL;
}

int pset_is_member(const struct pset_table *t, int32_t id, int world_rank)
{
	const struct pset *p = pset_get(t, id);
	int lo = 0, hi;

	if (!p)
		return 0;
	hi = p->n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if (p->ranks[mid] == world_rank)
			return 1;
		if (p->ranks[mid] < world_rank)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return 0;
}

hvd_status_t pset_table_add(struct pset_table *t, int32_t id, const int *ranks,
			    int n, int world_rank, hvd_comm_t *engine_comm)
{
	struct pset *p;
	hvd_status_t st;

	if (id >= t->cap) {
		int cap = t->cap ? t->cap : 8;
		struct pset **v;

		while (cap <= id)
			cap *= 2;
		v = realloc(t->sets, (size_t)cap * sizeof(*v));
		if (!v)
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
		memset(v + t->cap, 0, (size_t)(cap - t->cap) * sizeof(*v));
		t->sets = v;
		t->cap = cap;
	}
	if (t->sets[id])
		return hvd_error(HVD_ERR_INTERNAL,
				 "hvd: process set %d exists already", id);
	p = calloc(1, sizeof(*p));
	if (!p)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	p->ranks = malloc((size_t)n * sizeof(*p->ranks));
	if (!p->ranks) {
		free(p);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	memcpy(p->ranks, ranks, (size_t)n * sizeof(*ranks));
	p->id = id;
	p->n = n;
	p->my_rank = -1;
	for (int i = 0; i < n; i++)
		if (ranks[i] == world_rank)
			p->my_rank = i;
	if (id == HVD_PSET_GLOBAL) {
		p->comm = engine_comm;
	} else if (engine_comm) {
		/* Collective over all ranks, which holds here since every
		 * rank adds every set, in one order. */
		st = comm_split(engine_comm, ranks, n, &p->comm);
		if (st != HVD_OK) {
			free(p->ranks);
			free(p);
			return hvd_error_prefix(st, "hvd: process set %d", id);
		}
	}
	t->sets[id] = p;
	if (id >= t->next_id)
		t->next_id = id + 1;
	return HVD_OK;
}

void pset_table_remove(struct pset_table *t, int32_t id)
{
	struct pset *p = pset_get(t, id);

	if (!p)
		return;
	if (p->comm && id != HVD_PSET_GLOBAL)
		comm_destroy(p->comm);
	free(p->ranks);
	free(p);
	t->sets[id] = NULL;
}

int pset_table_partial(const struct pset_table *t)
{
	const struct pset *all = pset_get(t, HVD_PSET_GLOBAL);

	for (int i = 0; all && i < t->cap; i++)
		if (t->sets[i] && t->sets[i]->n < all->n)
			return 1;
	return 0;
}

void pset_table_free(struct pset_table *t)
{
	for (int i = 0; i < t->cap; i++)
		pset_table_remove(t, i);
	free(t->sets);
	memset(t, 0, sizeof(*t));
}

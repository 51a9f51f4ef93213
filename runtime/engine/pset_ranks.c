/*
 * pset_ranks.c - hvd_pset_ranks(): the members of a process set, for
 * bindings that report a set's ranks (Horovod's ProcessSet.ranks) without
 * keeping their own copy of every set added.
 *
 * Reads the set table under the engine lock, as hvd_pset_size() does: the
 * engine thread changes the table only under that lock.
 */
#include "config.h"

#include "engine/engine.h"

#include <string.h>

hvd_status_t hvd_pset_ranks(hvd_pset_t id, int *ranks, int max, int *n)
{
	struct engine *e = hvd_engine;
	struct pset *p;

	if (!e)
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd_pset_ranks: the engine is not running; "
				 "call hvd_init() first");
	if (!n || (max > 0 && !ranks))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_pset_ranks: NULL argument");
	pthread_mutex_lock(&e->lock);
	p = pset_get(&e->psets, id);
	if (!p) {
		pthread_mutex_unlock(&e->lock);
		return hvd_error(HVD_ERR_PROCESS_SET,
				 "hvd_pset_ranks: process set %d does not "
				 "exist",
				 id);
	}
	*n = p->n;
	if (max > 0)
		memcpy(ranks, p->ranks,
		       (size_t)(max < p->n ? max : p->n) * sizeof(*ranks));
	pthread_mutex_unlock(&e->lock);
	return HVD_OK;
}

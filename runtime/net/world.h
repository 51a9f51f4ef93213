/*
 * net/world.h - the process-wide facts of the job: this rank, the size,
 * the node layout.  Filled in once by the bootstrap (PMIx) during
 * hvd_init, read by every layer above; hvd_world() returns NULL until the
 * bootstrap has published them and after finalize.  An elastic
 * re-forming (api/elastic.c) fills it again, from the agreement on the
 * next world instead of PMIx, while no collective runs.
 */
#ifndef HVD_NET_WORLD_H
#define HVD_NET_WORLD_H

#include "base/base.h"

#pragma GCC visibility push(hidden)

struct hvd_world {
	int rank, size;
	int local_rank, local_size;
	int cross_rank, cross_size;
	int node_id, num_nodes;
	int *node_of;        /* [size] node id of each world rank          */
	int *local_rank_of;  /* [size] local rank of each world rank       */
	char nspace[256];    /* PMIx namespace; after an elastic re-forming
				the world's name (first namespace@epoch)  */
	char hostname[256];  /* PMIx hostname of this rank's node          */
	unsigned epoch;      /* elastic re-formings so far (0: the world
				PMIx made; api/elastic.c)                 */
};

/* NULL before world_publish() and after world_clear(). */
const struct hvd_world *hvd_world(void);
/* The storage the bootstrap fills: zeroed, not yet visible. */
struct hvd_world *world_begin(void);
/* Makes the filled world visible to hvd_world(). */
void world_publish(void);
/* Frees the node tables and hides the world again. */
void world_clear(void);

#pragma GCC visibility pop

#endif /* HVD_NET_WORLD_H */

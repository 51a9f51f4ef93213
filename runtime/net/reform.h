/*
 * net/reform.h - the transport side of an elastic re-forming: the next
 * world's worker, the switch to it, and the PMIx ranks of death events
 * translated into the current world's ranks.
 *
 * api/elastic.c runs a re-forming as: reform_prepare (the next worker's
 * address goes into the agreement, net/membership.h), then, with the
 * decision, reform_transport (the old worker and everything on it goes,
 * the peer table, failure notices and endpoints start afresh for the new
 * world's ranks).  Between the two nothing else may use the transport.
 */
#ifndef HVD_NET_REFORM_H
#define HVD_NET_REFORM_H

#include "net/bootstrap.h"
#include "net/world.h"

#pragma GCC visibility push(hidden)

/* The next world's worker (made once; *addr valid until the switch). */
hvd_status_t reform_prepare(void **addr, size_t *addr_len);
/* The current worker's address. */
void reform_current_addr(void **addr, size_t *addr_len);
/* Drop the next worker (an agreement that failed). */
void reform_discard(void);
/* Switch to the next worker for the world w (rank, size, layout filled);
 * bp[w->size] are its members' next-worker addresses and pids (taken).
 * HVD_ERR_PEER_FAILED when a member did not answer the connection: the
 * table is up all the same, so a new agreement can run over it. */
hvd_status_t reform_transport(const struct hvd_world *w,
			      struct bootstrap_peer *bp);

/* pmix_of[r]: world rank r's rank in this process's PMIx namespace, -1
 * for ranks from another namespace (newcomers).  NULL: identity (the
 * first world). */
hvd_status_t reform_set_pmix_map(const int *pmix_of, int n);
/* A death event of the bootstrap (PMIx rank, or -1 for the launcher):
 * marked on the world rank it is now, if it is still a member. */
void reform_pmix_failed(int pmix_rank, const char *why);

#pragma GCC visibility pop

#endif /* HVD_NET_REFORM_H */

/*
 * reform.c - the transport of a new elastic world (net/reform.h): the
 * switch from the old worker to the one the agreement carried the address
 * of, and the map that turns PMIx ranks of death events into world ranks
 * once ranks have been renumbered.
 *
 * The switch and the death events of PMIx's thread meet at the peer
 * table, which the switch frees and rebuilds: both hold map_lock, so an
 * event never marks a rank in a table being replaced.
 */
#include "config.h"

#include "net/lane.h"
#include "net/membership.h"
#include "net/notice.h"
#include "net/peers.h"
#include "net/reform.h"
#include "net/refusal.h"
#include "net/transport.h"
#include "net/ucx.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static int *pmix_of; /* [npmix]; NULL: identity */
static int npmix;

hvd_status_t reform_prepare(void **addr, size_t *addr_len)
{
	return ucx_worker_prepare(addr, addr_len);
}

void reform_current_addr(void **addr, size_t *addr_len)
{
	ucx_worker_address(addr, addr_len);
}

void reform_discard(void)
{
	ucx_worker_discard();
}

hvd_status_t reform_transport(const struct hvd_world *w,
			      struct bootstrap_peer *bp)
{
	hvd_status_t st;

	if (!ucx_worker_next())
		return hvd_error(HVD_ERR_INTERNAL,
				 "hvd: elastic: switching worlds without a "
				 "next worker");
	pthread_mutex_lock(&map_lock);
	lane_park();  /* a rank left behind must not think this one dead */
	lane_close(); /* opened again below, among the new ranks */
	notice_cancel();
	ucx_worker_switch();
	memb_release_sends();
	notice_free();
	refusal_free();
	peers_free();
	st = peers_init(w, bp);
	if (st == HVD_OK)
		st = notice_start();
	refusal_start();
	pthread_mutex_unlock(&map_lock);
	if (st != HVD_OK)
		return st;
	st = ucx_set_peers(w);
	if (st != HVD_OK)
		return st;
	/* As at hvd_init: who shares a machine now, and the lane among the
	 * new world's ranks (a member gone since the decision fails it, with
	 * HVD_ERR_PEER_FAILED, and the world re-forms again). */
	return transport_agree_world(w);
}

hvd_status_t reform_set_pmix_map(const int *map, int n)
{
	int *copy = NULL;

	if (map) {
		copy = malloc((size_t)(n ? n : 1) * sizeof(*copy));
		if (!copy)
			return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		memcpy(copy, map, (size_t)n * sizeof(*copy));
	}
	pthread_mutex_lock(&map_lock);
	free(pmix_of);
	pmix_of = copy;
	npmix = map ? n : 0;
	pthread_mutex_unlock(&map_lock);
	return HVD_OK;
}

void reform_pmix_failed(int pmix_rank, const char *why)
{
	pthread_mutex_lock(&map_lock);
	if (pmix_rank < 0 || !pmix_of) {
		transport_mark_failed(pmix_rank, why);
	} else {
		for (int r = 0; r < npmix; r++)
			if (pmix_of[r] == pmix_rank)
				transport_mark_failed(r, why);
	}
	pthread_mutex_unlock(&map_lock);
}

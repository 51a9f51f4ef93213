/*
 * watch.c - one round of the transport's failure checks for waits outside
 * its transfers (net/watch.h).
 */
#include "config.h"

#include "net/notice.h"
#include "net/peers.h"
#include "net/ucx.h"
#include "net/watch.h"

#include <stdio.h>
#include <stdlib.h>

int transport_watch(char *why, size_t len)
{
	struct net_group all;
	int n = peers_count(), f;

	if (n <= 0 || !ucx_worker)
		return -1;
	ucp_worker_progress(ucx_worker);
	notice_poll();
	all.world_ranks = malloc((size_t)n * sizeof(int));
	if (all.world_ranks) {
		for (int r = 0; r < n; r++)
			all.world_ranks[r] = r;
		all.size = n;
		all.rank = peers_self();
		peers_check_local_pids(&all);
		free(all.world_ranks);
	}
	f = transport_any_failed();
	if (f >= 0)
		snprintf(why, len, "rank %d failed: %s", f,
			 transport_fail_reason(f));
	return f;
}

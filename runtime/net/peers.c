/*
 * peers.c - the peer table and the failed set.
 *
 * A failure is recorded once, with the first reason given, unless a
 * surer kind of evidence comes later (a rank that went silent is then
 * found dead): the kind and reason are replaced, never weakened.  Flags
 * are atomics so that any thread (PMIx's event thread, UCX's error callback,
 * a waiting collective) may read one without a lock.  The table is built
 * in hvd_init before any collective and freed in hvd_finalize after the
 * last one (and swapped when an elastic world re-forms); recording takes
 * table_lock, which the build and the free take too, because PMIx's
 * thread may deliver a failure at any time until its handler is gone.
 */
#include "config.h"

#include "net/peers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct peer {
	void *addr;          /* UCX worker address (owned)            */
	pid_t pid;
	int local;           /* node and pid namespace: pid checks   */
	atomic_int failed;
	atomic_int kind;     /* enum peer_gone, once failed          */
	atomic_int announce; /* to tell the other ranks              */
	char why[320];
};

static struct peer *peers;
static int npeers = -1, my_rank = -1;
static atomic_int launcher_failed;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

hvd_status_t peers_init(const struct hvd_world *w, struct bootstrap_peer *bp)
{
	struct peer *t = calloc((size_t)w->size, sizeof(*t));
	int apart = 0;

	if (!t)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory for %d peers", w->size);
	pthread_mutex_lock(&table_lock);
	peers = t;
	for (int r = 0; r < w->size; r++) {
		int mate = w->node_of[r] == w->node_id;

		atomic_init(&peers[r].failed, 0);
		atomic_init(&peers[r].kind, PEER_DEAD);
		atomic_init(&peers[r].announce, 0);
		peers[r].addr = bp[r].addr;
		bp[r].addr = NULL;
		/* A rank of this node in another pid namespace (a container
		 * of its own) cannot be watched by its pid, and UCX's
		 * shared-memory transports do not reach it: it counts as a
		 * rank of another node for failures and endpoints, while the
		 * layout (local ranks, the node's shared-memory group) still
		 * puts it on this node. */
		peers[r].pid = hvd_pid_here(bp[r].pid, bp[r].pidns);
		peers[r].local = mate && peers[r].pid > 0;
		apart += mate && !peers[r].pid;
	}
	npeers = w->size;
	my_rank = w->rank;
	pthread_mutex_unlock(&table_lock);
	if (apart)
		hvd_log(HVD_LOG_DEBUG,
			"%d rank(s) of this node run in another pid namespace: "
			"watched through the network, not their pids",
			apart);
	return HVD_OK;
}

void peers_free(void)
{
	struct peer *t;
	int n;

	pthread_mutex_lock(&table_lock);
	t = peers;
	n = npeers;
	peers = NULL;
	npeers = -1;
	my_rank = -1;
	atomic_store(&launcher_failed, 0);
	pthread_mutex_unlock(&table_lock);
	for (int r = 0; t && r < n; r++)
		free(t[r].addr);
	free(t);
}

int peers_count(void)
{
	return npeers;
}

int peers_self(void)
{
	return my_rank;
}

const void *peers_addr(int r)
{
	return peers && r >= 0 && r < npeers ? peers[r].addr : NULL;
}

int peers_local(int r)
{
	return peers && r >= 0 && r < npeers && peers[r].local;
}

static void mark_locked(int rank, const char *why, int announce,
			enum peer_gone kind)
{
	if (rank < 0) {
		atomic_store(&launcher_failed, 1);
		return;
	}
	if (!peers || rank >= npeers || rank == my_rank)
		return;
	if (atomic_load(&peers[rank].failed)) {
		/* Surer evidence replaces the record; the reason is written
		 * by the one caller that raises the kind (a racing reader may
		 * see the old text, never a torn flag). */
		int was = atomic_load(&peers[rank].kind);

		while ((int)kind > was &&
		       !atomic_compare_exchange_weak(&peers[rank].kind, &was,
						     (int)kind))
			;
		if ((int)kind <= was)
			return;
		snprintf(peers[rank].why, sizeof(peers[rank].why), "%s", why);
		hvd_log(HVD_LOG_DEBUG, "rank %d failed: %s", rank, why);
		return;
	}
	snprintf(peers[rank].why, sizeof(peers[rank].why), "%s", why);
	atomic_store(&peers[rank].kind, (int)kind);
	atomic_store(&peers[rank].failed, 1);
	if (announce)
		atomic_store(&peers[rank].announce, 1);
	hvd_log(HVD_LOG_DEBUG, "rank %d failed: %s", rank, why);
}

void peers_mark(int rank, const char *why, int announce, enum peer_gone kind)
{
	pthread_mutex_lock(&table_lock);
	mark_locked(rank, why, announce, kind);
	pthread_mutex_unlock(&table_lock);
}

void peers_mark_failed(int rank, const char *why, int announce)
{
	peers_mark(rank, why, announce, PEER_DEAD);
}

enum peer_gone peers_gone_kind(int rank)
{
	if (!peers_failed(rank))
		return PEER_DEAD;
	return (enum peer_gone)atomic_load(&peers[rank].kind);
}

void transport_mark_failed(int rank, const char *why)
{
	peers_mark_failed(rank, why, 1);
}

int peers_failed(int rank)
{
	return peers && rank >= 0 && rank < npeers &&
	       atomic_load_explicit(&peers[rank].failed, memory_order_relaxed);
}

int peers_take_announce(void)
{
	for (int f = 0; peers && f < npeers; f++)
		if (atomic_exchange(&peers[f].announce, 0))
			return f;
	return -1;
}

int peers_launcher_failed(void)
{
	return atomic_load(&launcher_failed);
}

const char *transport_fail_reason(int rank)
{
	if (!peers || rank < 0 || rank >= npeers)
		return "unknown";
	return peers[rank].why;
}

int transport_group_failed(const struct net_group *g)
{
	for (int i = 0; peers && i < g->size; i++)
		if (peers_failed(g->world_ranks[i]))
			return g->world_ranks[i];
	return -1;
}

int transport_any_failed(void)
{
	for (int w = 0; peers && w < npeers; w++)
		if (peers_failed(w))
			return w;
	return -1;
}

void peers_check_local_pids(const struct net_group *g)
{
	for (int i = 0; peers && i < g->size; i++) {
		int w = g->world_ranks[i];

		if (w == my_rank || !peers[w].local ||
		    atomic_load(&peers[w].failed))
			continue;
		if (hvd_pid_dead(peers[w].pid)) {
			char why[96];

			snprintf(why, sizeof(why),
				 "its process (pid %d on this node) is gone",
				 (int)peers[w].pid);
			transport_mark_failed(w, why);
		}
	}
}

int transport_check_failed(const struct net_group *g)
{
	peers_check_local_pids(g);
	return transport_group_failed(g);
}

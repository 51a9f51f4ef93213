/*
 * init.c - hvd_init / hvd_finalize and the rank queries.
 *
 * Order of hvd_init, bottom layer up: PMIx (ranks, HOROVOD_RANK/SIZE
 * check, death events) -> UCX context and worker -> address exchange
 * through PMIx (fence) -> the world published (net/world.h) -> the
 * collectives (tuning, backends) -> world communicator -> the engine.
 * hvd_finalize undoes it in reverse: engine, GPU side, communicators,
 * endpoints (closed while progressing, fenced), PMIx.
 */
#include "config.h"

#include "api/elastic.h"
#include "coll/coll.h"
#include "engine/engine.h"
#include "net/bootstrap.h"
#include "net/reform.h"
#include "net/transport.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct hvd_world *world;
static int initialized;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

int hvd_is_initialized(void)
{
	return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE);
}

static void teardown(int fence)
{
	comm_world_destroy();
	transport_finalize(fence);
	bootstrap_finalize();
	world_clear();
	world = NULL;
	hvd_log_set_rank(-1);
}

static void on_peer_failed(int rank, const char *why)
{
	/* PMIx names ranks of the first world; after an elastic re-forming
	 * they are renumbered (net/reform.h). */
	reform_pmix_failed(rank, why);
}

hvd_status_t hvd_init(void)
{
	struct bootstrap_peer *peers = NULL;
	void *addr;
	size_t addr_len;
	hvd_status_t st;

	pthread_mutex_lock(&init_lock);
	if (initialized) {
		pthread_mutex_unlock(&init_lock);
		return HVD_OK;
	}
	world = world_begin();
	st = bootstrap_init(world, on_peer_failed);
	if (st != HVD_OK)
		goto out;
	st = transport_init(&addr, &addr_len);
	if (st != HVD_OK) {
		bootstrap_finalize();
		goto out;
	}
	st = bootstrap_exchange(world, addr, addr_len, &peers);
	if (st == HVD_OK)
		st = transport_set_peers(world, peers);
	bootstrap_peers_free(peers, world->size);
	if (st != HVD_OK) {
		transport_finalize(0);
		bootstrap_finalize();
		world_clear();
		goto out;
	}
	world_publish();
	hvd_log_set_rank(world->rank);
	coll_init();
	st = comm_world_create(world);
	if (st != HVD_OK) {
		teardown(0);
		goto out;
	}
	hvd_log(HVD_LOG_INFO,
		"rank %d of %d, node %d of %d (%s), local %d of %d, cross "
		"%d of %d",
		world->rank, world->size, world->node_id, world->num_nodes,
		world->hostname, world->local_rank, world->local_size,
		world->cross_rank, world->cross_size);
	__atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
	st = engine_start();
	if (st != HVD_OK) {
		__atomic_store_n(&initialized, 0, __ATOMIC_RELEASE);
		hvd_error_prefix(st, "hvd_init: starting the engine");
		teardown(0);
		goto out;
	}
	/* HOROVOD_ELASTIC=1: a later step of the job joins the running world
	 * here; rank 0 of a new world publishes where it is. */
	st = elastic_init();
	if (st != HVD_OK) {
		__atomic_store_n(&initialized, 0, __ATOMIC_RELEASE);
		engine_stop();
		coll_finalize();
		teardown(0);
		goto out;
	}
out:
	pthread_mutex_unlock(&init_lock);
	return st;
}

hvd_status_t hvd_finalize(void)
{
	int fence;

	pthread_mutex_lock(&init_lock);
	if (!initialized) {
		pthread_mutex_unlock(&init_lock);
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd: hvd_finalize() without a successful "
				 "hvd_init()");
	}
	/* After an elastic re-forming the PMIx namespace no longer matches
	 * the world: a barrier over the world replaces the fence. */
	fence = elastic_finalize();
	engine_stop();
	coll_finalize();
	__atomic_store_n(&initialized, 0, __ATOMIC_RELEASE);
	/* With a dead peer the fence would never complete. */
	fence = fence && comm_world() && comm_failed(comm_world()) < 0;
	teardown(fence);
	pthread_mutex_unlock(&init_lock);
	return HVD_OK;
}

int hvd_rank(void)
{
	return hvd_is_initialized() ? world->rank : -1;
}

int hvd_size(void)
{
	return hvd_is_initialized() ? world->size : -1;
}

int hvd_local_rank(void)
{
	return hvd_is_initialized() ? world->local_rank : -1;
}

int hvd_local_size(void)
{
	return hvd_is_initialized() ? world->local_size : -1;
}

int hvd_cross_rank(void)
{
	return hvd_is_initialized() ? world->cross_rank : -1;
}

int hvd_cross_size(void)
{
	return hvd_is_initialized() ? world->cross_size : -1;
}

int hvd_node_id(void)
{
	return hvd_is_initialized() ? world->node_id : -1;
}

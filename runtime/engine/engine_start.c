/*
 * engine_start.c - the engine's life: engine_start (called at the end of
 * hvd_init) reads the knobs, agrees on rank 0's values, creates the
 * engine's communicator and the static process sets, opens the timeline
 * and starts the background thread; engine_stop (called at the start of
 * hvd_finalize) asks the thread to stop - every rank leaves in the same
 * cycle, since a stop request is OR-ed across ranks - and frees it all.
 *
 * The thread sleeps until the next cycle is due (HOROVOD_CYCLE_TIME) but
 * wakes at once when an op is submitted, so a lone op never waits for a
 * cycle boundary.  After a cycle that ran ops it first polls for the next
 * submission for HVD_ENGINE_SPIN_US (50): a caller that submits again
 * within microseconds (a Python loop, a backward pass) then costs no
 * futex wake-up, which on a 2-core machine measured 3-4 us an op.
 *
 * An idle engine (nothing queued or pending here) skips a due cycle, for
 * up to ENGINE_DEFER_CYCLES in a row, while a blocking collective of the
 * caller's runs over the transport (transport_foreground_busy): the
 * cycle's posts and progress would take the UCX worker's lock from under
 * that collective.  Measured across two netns nodes, 16 MiB allreduce of
 * the C API, 1 ms cycles: 28,577 context switches and 25,889 futex calls
 * in 200 calls, against 716 and 408 with the cycles 1 s apart, and 13.3
 * against 11.8 ms a call.  A peer that has work waits for the skipped
 * cycle at most until this collective ends or the deferral runs out.
 *
 * While it defers, the engine looks again every ENGINE_DEFER_STEP cycle
 * times, not at every one: each look is a wake-up that takes the CPU from
 * the caller's thread when they share one.  Two netns nodes x 1 rank, a
 * CPU each, the C API back to back, three alternations: 8 B allreduce
 * 10.1-10.3 -> 9.8-10.6 us, 32 KiB 23.1-23.4 -> 21.7-22.3 us (OpenMPI's
 * time over ours 0.95-0.98 -> 0.97-1.06 at 8-512 B).  A peer that has work
 * may then wait up to ENGINE_DEFER_STEP cycle times past the end of this
 * rank's collectives (a submission here still wakes the engine at once).
 */
#include "config.h"

#include "engine/engine.h"
#include "net/transport.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Polls (lock not held) until a submission after `seen` or the spin time
 * is up, yielding the CPU every few microseconds: with a CPU per rank the
 * caller that is about to submit may need this one. */
static void spin_for_work(struct engine *e, unsigned seen)
{
	unsigned long long t0 = hvd_now_ns();
	int i = 0;

	while (__atomic_load_n(&e->submits, __ATOMIC_ACQUIRE) == seen) {
		if (++i < 64) {
			hvd_cpu_relax();
			continue;
		}
		i = 0;
		if (hvd_now_ns() - t0 > e->idle_spin_ns)
			return;
		sched_yield();
	}
}

/* Due cycles an idle engine may skip in a row, and how many cycle times
 * apart it looks whether it still may (see the top). */
#define ENGINE_DEFER_CYCLES 50
#define ENGINE_DEFER_STEP 10

/*
 * An idle job's cycles thin out.  Once the negotiations have found nothing
 * on any rank for a while (e->quiet since e->quiet_since: every rank saw
 * the same vectors), the next cycle comes a fiftieth of that time after
 * the last instead of HOROVOD_CYCLE_TIME after it, at most
 * HVD_ENGINE_IDLE_MAX_MS (20 ms; 0: never) after it.  Each cycle is a
 * negotiation on every rank, a thousand a second at 1 ms, and an idle job
 * (data loading, evaluation, a checkpoint) paid for them in CPU taken
 * from whatever else runs on a shared node: two netns nodes x 1 rank,
 * 10 s of nothing after hvd_init, 0.24-0.42 CPU seconds a rank with the
 * cycles every 1 ms, 0.04-0.09 thinned out (2 x 2: 0.21-0.51 and
 * 0.03-0.12; 30 s: 0.87-1.52 and 0.12-0.29).
 *
 * A submission still wakes this rank's engine at once, and an operation
 * that every rank submits wakes every rank's: nothing waits longer.  One
 * that some rank takes no part in would wait for that rank's next cycle,
 * or the one after where the others' cycle had begun before their
 * submission: the set {0,1} of 3 ranks on two netns nodes, its first op
 * after 2-5 s of nothing, took 27-28 ms against 0.2-2.6.  So the cycles
 * keep their pace while a process set leaves out some rank
 * (pset_table_partial: the sets are the same on every rank).  No rank
 * need agree on the spacing: a cycle waits for the slowest peer's anyway.
 */
#define ENGINE_IDLE_RATIO 50.0

static double next_cycle(const struct engine *e, double now)
{
	double base = e->cycle_ms / 1000.0, t;

	if (!e->quiet || e->idle_max_s <= 0 || pset_table_partial(&e->psets))
		return now + base;
	t = (now - e->quiet_since) / ENGINE_IDLE_RATIO;
	if (t > e->idle_max_s)
		t = e->idle_max_s;
	return now + (t > base ? t : base);
}

/* Nothing of this rank's waits on the next cycle, and the caller's thread
 * is in a collective over the transport.  Engine thread, lock held. */
static int may_defer(const struct engine *e)
{
	return engine_nothing_waits(e) && !e->stall_shutdown_pending &&
	       transport_foreground_busy();
}

static void *engine_main(void *arg)
{
	struct engine *e = arg;
	double next = hvd_now();
	int deferred = 0;

	transport_set_background();
	for (;;) {
		struct timespec ts;
		double now;
		int spin = e->worked && e->idle_spin_ns;

		pthread_mutex_lock(&e->lock);
		for (;;) {
			now = hvd_now();
			if (e->q_head || e->stop_requested || e->tl_cmd ||
			    e->hot)
				break;
			if (now >= next) {
				if (deferred >= ENGINE_DEFER_CYCLES ||
				    !may_defer(e))
					break;
				deferred += ENGINE_DEFER_STEP;
				next = now +
				       ENGINE_DEFER_STEP * e->cycle_ms / 1000.0;
				continue;
			}
			if (spin) {
				unsigned seen = __atomic_load_n(
				    &e->submits, __ATOMIC_ACQUIRE);

				spin = 0;
				pthread_mutex_unlock(&e->lock);
				spin_for_work(e, seen);
				pthread_mutex_lock(&e->lock);
				continue;
			}
			ts.tv_sec = (time_t)next;
			ts.tv_nsec = (long)((next - (double)ts.tv_sec) * 1e9);
			e->sleeping = 1;
			pthread_cond_timedwait(&e->wake, &e->lock, &ts);
			e->sleeping = 0;
		}
		pthread_mutex_unlock(&e->lock);
		deferred = 0;
		if (e->hot)
			sched_yield(); /* polling: let the callers run */
		if (cycle_run(e))
			break;
		next = next_cycle(e, now);
	}
	return NULL;
}

/* The knobs every rank must share: rank 0's values win. */
struct shared_knobs {
	uint64_t fusion, direct;
	double cycle_ms;
	int64_t cache;
	double stall_warn, stall_shutdown;
	int64_t stall_disable;
	uint64_t pset_hash;
};

static hvd_status_t agree(struct engine *e, uint64_t my_hash)
{
	struct shared_knobs k = {
	    .fusion = e->fusion_threshold,
	    .direct = e->fusion_direct,
	    .cycle_ms = e->cycle_ms,
	    .cache = e->cache_capacity,
	    .stall_warn = e->stall_warn,
	    .stall_shutdown = e->stall_shutdown,
	    .stall_disable = e->stall_disable,
	    .pset_hash = my_hash,
	};
	struct shared_knobs mine = k;
	int64_t h = (int64_t)(my_hash >> 1), lo = h, hi = h;
	hvd_status_t st;

	if (e->size == 1)
		return HVD_OK;
	st = coll_broadcast(e->comm, &k, sizeof(k), HVD_UINT8, 0);
	if (st != HVD_OK)
		return st;
	if (memcmp(&k, &mine, sizeof(k) - sizeof(k.pset_hash)) != 0)
		hvd_log(HVD_LOG_WARNING,
			"engine knobs differ from rank 0's (HOROVOD_FUSION_"
			"THRESHOLD, HOROVOD_CYCLE_TIME, HOROVOD_CACHE_CAPACITY,"
			" HOROVOD_STALL_*): using rank 0's");
	e->fusion_threshold = k.fusion;
	e->fusion_direct = k.direct;
	e->cycle_ms = k.cycle_ms;
	e->cache_capacity = (int)k.cache;
	e->stall_warn = k.stall_warn;
	e->stall_shutdown = k.stall_shutdown;
	e->stall_disable = (int)k.stall_disable;
	st = coll_allreduce(e->comm, &h, &lo, 1, HVD_INT64, HVD_MIN);
	if (st == HVD_OK)
		st = coll_allreduce(e->comm, &h, &hi, 1, HVD_INT64, HVD_MAX);
	if (st != HVD_OK)
		return st;
	if (lo != hi)
		return hvd_error(HVD_ERR_PROCESS_SET,
				 "hvd: HOROVOD_PROCESS_SETS differs between "
				 "ranks (this rank: \"%s\"); every rank must "
				 "get the same value",
				 getenv("HOROVOD_PROCESS_SETS")
				     ? getenv("HOROVOD_PROCESS_SETS")
				     : "");
	return HVD_OK;
}

static int coord_is_member(void *arg, int32_t pset, int rank)
{
	return pset_is_member(&((struct engine *)arg)->psets, pset, rank);
}

static int coord_set_size(void *arg, int32_t pset)
{
	struct pset *p = pset_get(&((struct engine *)arg)->psets, pset);

	return p ? p->n : 0;
}

static void tl_first(void *arg, const char *name, int kind, double t)
{
	struct engine *e = arg;
	char what[64];

	snprintf(what, sizeof(what), "NEGOTIATE_%s", eng_kind_name(kind));
	timeline_begin(&e->tl, name, what);
	(void)t;
}

static void tl_rank(void *arg, const char *name, int rank, double t)
{
	struct engine *e = arg;
	char what[16];

	snprintf(what, sizeof(what), "%d", rank);
	timeline_instant(&e->tl, name, what);
	(void)t;
}

static void tl_ready(void *arg, const char *name, double t)
{
	struct engine *e = arg;

	timeline_end(&e->tl, name, NULL, 0);
	(void)t;
}

static void engine_free(struct engine *e)
{
	struct hvd_handle *h, *next;

	for (h = e->q_head; h; h = next) {
		next = h->next;
		engine_complete(h, HVD_ERR_SHUTDOWN,
				"hvd: the engine shut down before this "
				"operation ran");
	}
	pset_table_free(&e->psets);
	if (e->comm)
		comm_destroy(e->comm);
	rc_free(&e->cache);
	coord_free(&e->coord);
	timeline_close(&e->tl);
	autotune_free(&e->at);
	namemap_free(&e->inflight);
	namemap_free(&e->pending_names);
	free(e->pending);
	free(e->fusion_buf);
	free(e->zero_buf);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->wake);
	pthread_cond_destroy(&e->done_cond);
	free(e);
}

static hvd_status_t add_static_sets(struct engine *e, int first_world,
				    uint64_t *hash)
{
	/* HOROVOD_PROCESS_SETS names ranks of the world PMIx made; after an
	 * elastic re-forming those numbers are other processes, so then only
	 * the global set is made again (doc/elastic.md). */
	const char *spec = first_world ? getenv("HOROVOD_PROCESS_SETS") : NULL;
	int **sets = NULL, *sizes = NULL, nsets = 0;
	char err[512];
	hvd_status_t st;

	*hash = 0;
	st = pset_parse(spec, e->size, &sets, &sizes, &nsets, err, sizeof(err));
	if (st != HVD_OK)
		return hvd_error(st, "hvd: %s", err);
	for (int i = 0; i < nsets; i++)
		*hash = *hash * 1000003ULL ^ pset_hash(sets[i], sizes[i]);
	st = agree(e, *hash);
	for (int i = 0; i < nsets && st == HVD_OK; i++)
		st = pset_table_add(&e->psets, i + 1, sets[i], sizes[i],
				    e->rank, e->comm);
	for (int i = 0; i < nsets; i++)
		free(sets[i]);
	free(sets);
	free(sizes);
	return st;
}

static struct engine *engine_alloc(const struct hvd_world *w)
{
	pthread_condattr_t ca;
	struct engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	pthread_mutex_init(&e->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&e->done_cond, NULL);
	e->tl.fd = -1;
	e->rank = w->rank;
	e->size = w->size;
	namemap_init(&e->inflight);
	namemap_init(&e->pending_names);
	return e;
}

/* This rank's knobs (agree() then makes rank 0's win). */
static void read_knobs(struct engine *e)
{
	long spin_us, idle_ms;

	e->fusion_threshold =
	    hvd_env_size("HOROVOD_FUSION_THRESHOLD", 128u << 20);
	e->fusion_direct =
	    hvd_env_size("HOROVOD_FUSION_DIRECT_BYTES", 64u << 10);
	e->cycle_ms = hvd_env_double("HOROVOD_CYCLE_TIME", 1.0);
	if (e->cycle_ms < 0)
		e->cycle_ms = 0;
	e->cache_capacity = (int)hvd_env_long("HOROVOD_CACHE_CAPACITY", 1024);
	if (e->cache_capacity < 0)
		e->cache_capacity = 0;
	e->stall_warn = hvd_env_double("HOROVOD_STALL_CHECK_TIME_SECONDS", 60);
	e->stall_shutdown =
	    hvd_env_double("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", 0);
	e->stall_disable = hvd_env_bool("HOROVOD_STALL_CHECK_DISABLE", 0);
	if (e->stall_shutdown > 0 && e->stall_shutdown < e->stall_warn) {
		hvd_log(HVD_LOG_WARNING,
			"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=%g is less than "
			"HOROVOD_STALL_CHECK_TIME_SECONDS=%g: stalls will not "
			"shut down",
			e->stall_shutdown, e->stall_warn);
		e->stall_shutdown = 0;
	}
	e->psets.dynamic = hvd_env_bool("HOROVOD_DYNAMIC_PROCESS_SETS", 0);
	e->elastic = hvd_env_bool("HOROVOD_ELASTIC", 0);
	spin_us = hvd_env_long("HVD_ENGINE_SPIN_US", 50);
	e->idle_spin_ns = spin_us > 0 ? (unsigned long long)spin_us * 1000 : 0;
	idle_ms = hvd_env_long("HVD_ENGINE_IDLE_MAX_MS", 20);
	e->idle_max_s = idle_ms > 0 ? (double)idle_ms / 1000.0 : 0;
}

/* Set 0: every rank, on the engine's communicator. */
static hvd_status_t add_global_set(struct engine *e)
{
	int *all = malloc((size_t)e->size * sizeof(*all));
	hvd_status_t st;

	if (!all)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int i = 0; i < e->size; i++)
		all[i] = i;
	st = pset_table_add(&e->psets, HVD_PSET_GLOBAL, all, e->size, e->rank,
			    e->comm);
	free(all);
	return st;
}

/* The coordinator, with membership and the timeline handed in. */
static hvd_status_t start_coordinator(struct engine *e)
{
	HVD_CHECK(coord_init(&e->coord, e->size));
	e->coord.is_member = coord_is_member;
	e->coord.set_size = coord_set_size;
	e->coord.member_arg = e;
	e->coord.on_first = tl_first;
	e->coord.on_rank = tl_rank;
	e->coord.on_ready = tl_ready;
	e->coord.tl_arg = e;
	return HVD_OK;
}

/* Rank 0: HOROVOD_TIMELINE (DYNAMIC: only hvd_timeline_start writes) and
 * HOROVOD_AUTOTUNE. */
static hvd_status_t start_observers(struct engine *e)
{
	const char *tl = getenv("HOROVOD_TIMELINE");

	if (e->rank != 0)
		return HVD_OK;
	if (tl && *tl && strcmp(tl, "DYNAMIC") != 0)
		HVD_CHECK(timeline_open(
		    &e->tl, tl,
		    hvd_env_bool("HOROVOD_TIMELINE_MARK_CYCLES", 0)));
	if (hvd_env_bool("HOROVOD_AUTOTUNE", 0)) {
		const char *log = getenv("HOROVOD_AUTOTUNE_LOG");
		FILE *f = NULL;

		if (log && *log && !(f = fopen(log, "w")))
			hvd_log(HVD_LOG_WARNING,
				"cannot open HOROVOD_AUTOTUNE_LOG=%s: %s", log,
				strerror(errno));
		autotune_init(&e->at, e->fusion_threshold, e->cycle_ms,
			      !getenv("HOROVOD_FUSION_THRESHOLD"),
			      !getenv("HOROVOD_CYCLE_TIME"), f);
	}
	return HVD_OK;
}

/* Spinning waiters only help when the engine thread has a CPU of its own
 * next to them. */
static int count_spinners(const struct hvd_world *w)
{
	cpu_set_t cs;
	int ncpu = 1;

	if (sched_getaffinity(0, sizeof(cs), &cs) == 0)
		ncpu = CPU_COUNT(&cs);
	return ncpu >= 2 * (w->local_size > 0 ? w->local_size : 1) ? 2 : 0;
}

static hvd_status_t start_thread(struct engine *e)
{
	hvd_engine = e;
	if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
		hvd_engine = NULL;
		return hvd_error(HVD_ERR_INTERNAL,
				 "hvd: cannot start the engine thread: %s",
				 strerror(errno));
	}
	e->thread_started = 1;
	return HVD_OK;
}

hvd_status_t engine_start(void)
{
	const struct hvd_world *w = hvd_world();
	struct engine *e;
	uint64_t hash;
	hvd_status_t st;

	if (!w || !comm_world())
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd: engine_start before the world exists");
	e = engine_alloc(w);
	if (!e)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	read_knobs(e);
	HVD_CHECK_GOTO(comm_dup(comm_world(), &e->comm), st, err_free);
	HVD_CHECK_GOTO(add_global_set(e), st, err_free);
	HVD_CHECK_GOTO(add_static_sets(e, w->epoch == 0, &hash), st, err_free);
	HVD_CHECK_GOTO(rc_init(&e->cache, e->cache_capacity), st, err_free);
	HVD_CHECK_GOTO(start_coordinator(e), st, err_free);
	HVD_CHECK_GOTO(start_observers(e), st, err_free);
	e->max_spinners = count_spinners(w);
	e->last_stall_check = hvd_now();
	HVD_CHECK_GOTO(start_thread(e), st, err_free);
	hvd_log(HVD_LOG_INFO,
		"engine: HOROVOD_FUSION_THRESHOLD=%zu "
		"HOROVOD_FUSION_DIRECT_BYTES=%zu HOROVOD_CYCLE_TIME=%g "
		"HOROVOD_CACHE_CAPACITY=%d HOROVOD_STALL_CHECK_TIME_SECONDS=%g"
		" HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=%g",
		e->fusion_threshold, e->fusion_direct, e->cycle_ms,
		e->cache_capacity, e->stall_warn, e->stall_shutdown);
	return HVD_OK;
err_free:
	engine_free(e);
	return st;
}

void engine_stop(void)
{
	struct engine *e = hvd_engine;

	if (!e)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop_requested = 1;
	pthread_cond_signal(&e->wake);
	pthread_mutex_unlock(&e->lock);
	if (e->thread_started)
		pthread_join(e->thread, NULL);
	hvd_engine = NULL;
	engine_free(e);
}

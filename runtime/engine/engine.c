/*
 * engine.c - the engine's public face: asynchronous named operations,
 * handles and their completion, groups, join, process-set calls, timeline
 * control.  The background thread's life (engine_start/engine_stop,
 * called by hvd_init and hvd_finalize) is engine_start.c.
 *
 * Caller threads never touch the engine's state: they validate their
 * arguments, build a handle and append it to one queue under one mutex
 * (held for a few pointer writes), waking the engine thread if it sleeps.
 * The engine thread (cycle.c) drains the queue, negotiates and executes,
 * and completes handles: status and results are written, the callback
 * runs, then `done` is released; hvd_wait spins briefly (an op on a warm
 * cache completes in tens of microseconds) and then sleeps on a condition
 * variable.  All engine traffic runs on the engine's own duplicate of the
 * world communicator, so it never mixes with the caller's blocking
 * collectives.
 */
#include "config.h"

#include "coll/coll.h"
#include "engine/engine.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct engine *hvd_engine;

/* Completion wake-ups: global, because a handle may outlive the engine. */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int nwaiters;

static int next_group_id = 1;
static _Thread_local struct {
	int id;
	struct hvd_handle *head, *tail;
	int n;
} open_group;

static int pset_seq_counter;

void hvd_opts_init(hvd_opts_t *opts)
{
	if (!opts)
		return;
	memset(opts, 0, sizeof(*opts));
	opts->pset = HVD_PSET_GLOBAL;
	opts->prescale = 1.0;
	opts->postscale = 1.0;
}

static void handle_free(struct hvd_handle *h)
{
	coll_event_release(h->dev_event);
	free(h->name);
	free(h->group);
	free(h->ranks);
	free(h->dims);
	free(h->message);
	free(h);
}

/* The dimensions the ranks must agree on: all of them, or all but the
 * first for the ops whose first dimension is each rank's own. */
static hvd_status_t set_shape(struct hvd_handle *h, int kind,
			      const hvd_opts_t *opts, const char *what,
			      const char *name)
{
	int skip = kind == EK_ALLGATHER || kind == EK_ALLTOALL;
	uint64_t d = 1469598103934665603ULL; /* FNV-1a */
	int n;

	if (opts->ndims <= 0)
		return HVD_OK;
	if (opts->ndims > HVD_MAX_DIMS || !opts->shape)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s '%s': a shape of %d dimensions%s "
				 "(at most %d, with its array)",
				 what, name, opts->ndims,
				 opts->shape ? "" : " but no array",
				 HVD_MAX_DIMS);
	n = opts->ndims - skip;
	/* ndims is part of the digest: [6] and [6, 1] differ */
	for (int i = -1; i < n; i++) {
		uint64_t v = i < 0 ? (uint64_t)opts->ndims
				   : (uint64_t)opts->shape[skip + i];

		for (int b = 0; b < 8; b++) {
			d ^= (v >> (8 * b)) & 0xff;
			d *= 1099511628211ULL;
		}
	}
	h->p.shape = d | 1; /* never 0 */
	h->dims = malloc((size_t)opts->ndims * sizeof(*h->dims));
	if (!h->dims)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	memcpy(h->dims, opts->shape, (size_t)opts->ndims * sizeof(*h->dims));
	h->ndims = (uint32_t)opts->ndims;
	return HVD_OK;
}

/* Completions while the engine thread executes a cycle's responses on a
 * rank with a single CPU: waking each waiter as its op finishes would
 * switch that CPU to the waiter and back once per op (a ResNet-50 step is
 * 161 ops), so the wake-ups are gathered into one at the end of the cycle
 * (engine_wake_flush).  The waiter would only have taken the CPU from
 * the engine thread; callbacks still run at each completion. */
static __thread int wake_defer, wake_pending;

void engine_wake_defer(int on) { wake_defer = on; }

static void wake_waiters(void)
{
	if (__atomic_load_n(&nwaiters, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&done_mu);
		pthread_cond_broadcast(&done_cv);
		pthread_mutex_unlock(&done_mu);
	}
}

void engine_wake_flush(void)
{
	wake_defer = 0;
	if (wake_pending) {
		wake_pending = 0;
		wake_waiters();
	}
}

void engine_complete(struct hvd_handle *h, hvd_status_t st, const char *msg)
{
	struct engine *e = hvd_engine;

	if (e) {
		pthread_mutex_lock(&e->lock);
		if (namemap_get(&e->inflight, h->name) == h)
			namemap_del(&e->inflight, h->name);
		pthread_mutex_unlock(&e->lock);
	}
	h->status = st;
	if (st != HVD_OK && msg && *msg)
		h->message = strdup(msg);
	if (h->cb)
		h->cb(h, st, h->cb_arg);
	__atomic_store_n(&h->done, 1, __ATOMIC_SEQ_CST);
	if (wake_defer)
		wake_pending = 1;
	else
		wake_waiters();
}

/* Spinning first: a warm-cache op completes in tens of microseconds, less
 * than a futex sleep and wake-up costs.  Only a couple of threads spin at
 * a time (with 8 threads of a backward pass waiting, spinning would only
 * steal the engine thread's CPU), and none when the node has fewer than
 * two CPUs per rank: the engine thread would then wait for the spinner's
 * time slice (engine_start.c sets max_spinners). */
#define WAIT_SPIN_NS 100000ULL

static int nspinners;

static void wait_done(struct hvd_handle *h)
{
	unsigned long long t0;
	int i = 0;

	if (__atomic_load_n(&h->done, __ATOMIC_ACQUIRE))
		return;
	if (__atomic_add_fetch(&nspinners, 1, __ATOMIC_RELAXED) <=
	    (hvd_engine ? hvd_engine->max_spinners : 0)) {
		t0 = hvd_now_ns();
		while (!__atomic_load_n(&h->done, __ATOMIC_ACQUIRE)) {
			if (++i < 64) {
				hvd_cpu_relax();
				continue;
			}
			i = 0;
			if (hvd_now_ns() - t0 > WAIT_SPIN_NS)
				break;
			sched_yield();
		}
	}
	__atomic_sub_fetch(&nspinners, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&h->done, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&done_mu);
	__atomic_add_fetch(&nwaiters, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&h->done, __ATOMIC_SEQ_CST))
		pthread_cond_wait(&done_cv, &done_mu);
	__atomic_sub_fetch(&nwaiters, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&done_mu);
}

hvd_status_t hvd_wait(hvd_handle_t h)
{
	hvd_status_t st;

	if (!h)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_wait: NULL handle");
	wait_done(h);
	st = h->status;
	if (st != HVD_OK)
		hvd_error(st, "%s",
			  h->message ? h->message : hvd_status_name(st));
	handle_free(h);
	return st;
}

hvd_status_t hvd_test(hvd_handle_t h)
{
	if (!h)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_test: NULL handle");
	if (!__atomic_load_n(&h->done, __ATOMIC_ACQUIRE))
		return HVD_IN_PROGRESS;
	if (h->status != HVD_OK)
		hvd_error(h->status, "%s",
			  h->message ? h->message : hvd_status_name(h->status));
	return h->status;
}

size_t hvd_handle_count(hvd_handle_t h)
{
	if (!h || !__atomic_load_n(&h->done, __ATOMIC_ACQUIRE))
		return 0;
	return h->result_count;
}

/* ------------------------------------------------------------ enqueue */

static hvd_status_t engine_ready(struct engine **out)
{
	struct engine *e = hvd_engine;

	if (!e)
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd: the engine is not running; call "
				 "hvd_init() first");
	*out = e;
	return HVD_OK;
}

/* Appends handles to the queue (caller holds e->lock). */
static void queue_append(struct engine *e, struct hvd_handle *h)
{
	h->next = NULL;
	if (e->q_tail)
		e->q_tail->next = h;
	else
		e->q_head = h;
	e->q_tail = h;
}

static hvd_status_t dead_status(struct engine *e)
{
	return hvd_error(
	    e->dead_status ? e->dead_status : HVD_ERR_SHUTDOWN, "%s",
	    e->dead_message[0] ? e->dead_message
			       : "hvd: the engine has shut down (a rank "
				 "called hvd_finalize or failed); no more "
				 "operations can run");
}

/* Submits a list of handles atomically. */
static hvd_status_t submit(struct engine *e, struct hvd_handle *list, int n)
{
	struct hvd_handle *h, *next;

	pthread_mutex_lock(&e->lock);
	if (e->dead || e->stop_requested) {
		hvd_status_t st = dead_status(e);

		pthread_mutex_unlock(&e->lock);
		return st;
	}
	for (h = list; h; h = h->next)
		if (namemap_get(&e->inflight, h->name)) {
			pthread_mutex_unlock(&e->lock);
			return hvd_error(
			    HVD_ERR_DUPLICATE_NAME,
			    "hvd: an operation named '%s' is already in "
			    "flight on this rank; wait for it or use "
			    "another name",
			    h->name);
		}
	for (h = list; h; h = next) {
		next = h->next;
		if (namemap_put(&e->inflight, h->name, h) != HVD_OK) {
			/* undo the names put so far */
			for (struct hvd_handle *u = list; u != h; u = u->next)
				namemap_del(&e->inflight, u->name);
			pthread_mutex_unlock(&e->lock);
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
		}
	}
	for (h = list; h; h = next) {
		next = h->next;
		queue_append(e, h);
	}
	__atomic_add_fetch(&e->submits, 1, __ATOMIC_RELEASE);
	if (e->sleeping)
		pthread_cond_signal(&e->wake);
	pthread_mutex_unlock(&e->lock);
	(void)n;
	return HVD_OK;
}

static hvd_status_t check_pset(struct engine *e, hvd_pset_t id, int root,
			       int kind)
{
	struct pset *p;
	hvd_status_t st = HVD_OK;

	pthread_mutex_lock(&e->lock);
	p = pset_get(&e->psets, id);
	if (!p)
		st = hvd_error(HVD_ERR_PROCESS_SET,
			       "hvd: process set %d does not exist (see "
			       "hvd_pset_list; static sets come from "
			       "HOROVOD_PROCESS_SETS)",
			       id);
	else if (p->my_rank < 0)
		st = hvd_error(HVD_ERR_NOT_MEMBER,
			       "hvd: rank %d is not a member of process set "
			       "%d; only members may submit its operations",
			       e->rank, id);
	else if (kind == EK_BROADCAST && !pset_is_member(&e->psets, id, root))
		st = hvd_error(HVD_ERR_INVALID_ARG,
			       "hvd: broadcast root %d is not a member of "
			       "process set %d (roots are world ranks)",
			       root, id);
	pthread_mutex_unlock(&e->lock);
	return st;
}

static hvd_status_t enqueue(const char *name, int kind, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dtype,
			    hvd_op_t op, int root, const hvd_opts_t *opts,
			    hvd_handle_t *out)
{
	hvd_opts_t def;
	struct engine *e = NULL;
	struct hvd_handle *h;
	hvd_status_t st;
	const char *what = eng_kind_name(kind);

	if (!out)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s: handle pointer is NULL", what);
	*out = NULL;
	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	if (!opts) {
		hvd_opts_init(&def);
		opts = &def;
	}
	if (!name || !*name || strlen(name) > 1000)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s: a name of 1 to 1000 characters is "
				 "required",
				 what);
	if (strncmp(name, "__hvd_", 6) == 0)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s '%s': names starting with __hvd_ are "
				 "reserved",
				 what, name);
	if (!hvd_dtype_size(dtype))
		return hvd_error(HVD_ERR_BAD_TYPE,
				 "hvd: %s '%s': unknown type %d", what, name,
				 (int)dtype);
	if ((kind == EK_ALLREDUCE || kind == EK_REDUCESCATTER) &&
	    !hvd_op_name(op))
		return hvd_error(HVD_ERR_BAD_OP,
				 "hvd: %s '%s': unknown reduction %d", what,
				 name, (int)op);
	if (kind == EK_REDUCESCATTER && op == HVD_ADASUM)
		return hvd_error(HVD_ERR_BAD_OP,
				 "hvd: %s '%s': Adasum is an allreduce only",
				 what, name);
	if (count && (!recvbuf || !sendbuf))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s '%s': NULL buffer for %zu elements",
				 what, name, count);
	if (sendbuf == HVD_IN_PLACE && kind != EK_ALLREDUCE &&
	    kind != EK_BROADCAST)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s '%s': HVD_IN_PLACE works for "
				 "allreduce only",
				 what, name);
	if (opts->group > 0 && opts->group != open_group.id)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s '%s': group %d is not open on this "
				 "thread (hvd_group_begin)",
				 what, name, opts->group);
	st = check_pset(e, opts->pset, root, kind);
	if (st != HVD_OK)
		return st;
	h = calloc(1, sizeof(*h));
	if (!h || !(h->name = strdup(name))) {
		free(h);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	h->p.kind = (uint8_t)kind;
	h->p.dtype = (uint8_t)dtype;
	h->p.op =
	    kind == EK_ALLREDUCE || kind == EK_REDUCESCATTER ? (uint8_t)op : 0;
	h->p.root = kind == EK_BROADCAST ? root : 0;
	h->p.pset = opts->pset;
	h->p.priority = opts->priority;
	h->p.count = count;
	h->p.prescale = kind == EK_ALLREDUCE || kind == EK_REDUCESCATTER
			    ? opts->prescale
			    : 1.0;
	h->p.postscale = kind == EK_ALLREDUCE || kind == EK_REDUCESCATTER
			     ? opts->postscale
			     : 1.0;
	if (opts->compress_fp16 && dtype == HVD_FLOAT32 &&
	    (kind == EK_ALLREDUCE))
		h->p.flags |= EF_COMPRESS;
	st = set_shape(h, kind, opts, what, name);
	if (st != HVD_OK) {
		handle_free(h);
		return st;
	}
	if (coll_is_device(recvbuf) || coll_is_device(sendbuf)) {
		h->p.flags |= EF_DEVICE;
		st = engine_stream_mark(h);
		if (st != HVD_OK) {
			handle_free(h);
			return st;
		}
	}
	h->sendbuf = sendbuf;
	h->recvbuf = recvbuf;
	h->cb = opts->callback;
	h->cb_arg = opts->callback_arg;
	h->group_size = 1;
	h->bit = -1;
	h->t_enqueue = hvd_now();
	if (opts->group > 0) {
		/* Held back until hvd_group_end: the group enters the queue
		 * as one. */
		for (struct hvd_handle *g = open_group.head; g; g = g->next)
			if (strcmp(g->name, name) == 0) {
				handle_free(h);
				return hvd_error(HVD_ERR_DUPLICATE_NAME,
						 "hvd: '%s' twice in group %d",
						 name, opts->group);
			}
		if (open_group.tail)
			open_group.tail->next = h;
		else
			open_group.head = h;
		open_group.tail = h;
		open_group.n++;
		*out = h;
		return HVD_OK;
	}
	st = submit(e, h, 1);
	if (st != HVD_OK) {
		handle_free(h);
		return st;
	}
	*out = h;
	return HVD_OK;
}

hvd_status_t hvd_allreduce_async(const char *name, const void *sendbuf,
				 void *recvbuf, size_t count, hvd_dtype_t dtype,
				 hvd_op_t op, const hvd_opts_t *opts,
				 hvd_handle_t *handle)
{
	return enqueue(name, EK_ALLREDUCE, sendbuf, recvbuf, count, dtype, op,
		       0, opts, handle);
}

hvd_status_t hvd_allgather_async(const char *name, const void *sendbuf,
				 void *recvbuf, size_t count, hvd_dtype_t dtype,
				 const hvd_opts_t *opts, hvd_handle_t *handle)
{
	return enqueue(name, EK_ALLGATHER, sendbuf, recvbuf, count, dtype,
		       HVD_SUM, 0, opts, handle);
}

hvd_status_t hvd_broadcast_async(const char *name, void *buf, size_t count,
				 hvd_dtype_t dtype, int root,
				 const hvd_opts_t *opts, hvd_handle_t *handle)
{
	return enqueue(name, EK_BROADCAST, buf, buf, count, dtype, HVD_SUM,
		       root, opts, handle);
}

hvd_status_t hvd_alltoall_async(const char *name, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dtype,
				const hvd_opts_t *opts, hvd_handle_t *handle)
{
	return enqueue(name, EK_ALLTOALL, sendbuf, recvbuf, count, dtype,
		       HVD_SUM, 0, opts, handle);
}

hvd_status_t hvd_reducescatter_async(const char *name, const void *sendbuf,
				     void *recvbuf, size_t count,
				     hvd_dtype_t dtype, hvd_op_t op,
				     const hvd_opts_t *opts,
				     hvd_handle_t *handle)
{
	return enqueue(name, EK_REDUCESCATTER, sendbuf, recvbuf, count, dtype,
		       op, 0, opts, handle);
}

/* ------------------------------------------------------------- groups */

hvd_status_t hvd_group_begin(int *group_id)
{
	if (!group_id)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_group_begin: group_id is NULL");
	if (open_group.id)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_group_begin: group %d is still open on "
				 "this thread; call hvd_group_end first",
				 open_group.id);
	open_group.id = __atomic_fetch_add(&next_group_id, 1, __ATOMIC_RELAXED);
	open_group.head = open_group.tail = NULL;
	open_group.n = 0;
	*group_id = open_group.id;
	return HVD_OK;
}

hvd_status_t hvd_group_end(int group_id)
{
	struct engine *e = NULL;
	struct hvd_handle *h, *next;
	const char *key = NULL;
	hvd_status_t st;

	if (!open_group.id || group_id != open_group.id)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_group_end: group %d is not open on this "
				 "thread",
				 group_id);
	open_group.id = 0;
	if (!open_group.head)
		return HVD_OK;
	/* The group is known across ranks by its smallest member name. */
	for (h = open_group.head; h; h = h->next)
		if (!key || strcmp(h->name, key) < 0)
			key = h->name;
	for (h = open_group.head; h; h = h->next) {
		h->group_size = (uint32_t)open_group.n;
		if (open_group.n > 1 && !(h->group = strdup(key)))
			h->group_size = 1;
	}
	st = engine_ready(&e);
	if (st == HVD_OK)
		st = submit(e, open_group.head, open_group.n);
	if (st != HVD_OK) {
		/* The handles were returned to the caller: fail them. */
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", hvd_last_error());
		for (h = open_group.head; h; h = next) {
			next = h->next;
			engine_complete(h, st, msg);
		}
	}
	open_group.head = open_group.tail = NULL;
	open_group.n = 0;
	return st;
}

/* ------------------------------------------- join and process sets */

static hvd_status_t run_internal(int kind, const char *name, int32_t pset,
				 const int *ranks, int nranks, int *result)
{
	struct engine *e = NULL;
	struct hvd_handle *h;
	hvd_status_t st;

	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	h = calloc(1, sizeof(*h));
	if (!h || !(h->name = strdup(name)))
		goto err_oom;
	h->p.kind = (uint8_t)kind;
	h->p.pset = pset;
	h->p.prescale = h->p.postscale = 1.0;
	h->group_size = 1;
	h->bit = -1;
	h->internal = 1;
	h->t_enqueue = hvd_now();
	if (nranks) {
		h->ranks = malloc((size_t)nranks * sizeof(*h->ranks));
		if (!h->ranks)
			goto err_oom;
		memcpy(h->ranks, ranks, (size_t)nranks * sizeof(*ranks));
		h->nranks = (uint32_t)nranks;
	}
	st = submit(e, h, 1);
	if (st != HVD_OK) {
		handle_free(h);
		return st;
	}
	wait_done(h);
	st = h->status;
	if (result)
		*result = h->result_int;
	if (st != HVD_OK)
		hvd_error(st, "%s",
			  h->message ? h->message : hvd_status_name(st));
	handle_free(h);
	return st;
err_oom:
	if (h)
		handle_free(h);
	return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
}

hvd_status_t hvd_join(int *last_rank)
{
	int last = -1;
	hvd_status_t st =
	    run_internal(EK_JOIN, "__hvd_join", 0, NULL, 0, &last);

	if (last_rank)
		*last_rank = last;
	return st;
}

hvd_status_t hvd_pset_add(const int *ranks, int nranks, hvd_pset_t *pset)
{
	struct engine *e = NULL;
	char name[64], why[256];
	int *sorted, id = -1;
	hvd_status_t st;

	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	if (!e->psets.dynamic)
		return hvd_error(HVD_ERR_PROCESS_SET,
				 "hvd_pset_add: dynamic process sets are off; "
				 "set HOROVOD_DYNAMIC_PROCESS_SETS=1 on every "
				 "rank");
	if (!ranks || nranks <= 0 || !pset)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_pset_add: need a list of ranks and a "
				 "place for the id");
	sorted = malloc((size_t)nranks * sizeof(*sorted));
	if (!sorted)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	memcpy(sorted, ranks, (size_t)nranks * sizeof(*ranks));
	if (pset_check_ranks(sorted, nranks, e->size, why, sizeof(why)) !=
	    HVD_OK) {
		free(sorted);
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_pset_add: %s", why);
	}
	snprintf(name, sizeof(name), "__hvd_pset.%d",
		 __atomic_fetch_add(&pset_seq_counter, 1, __ATOMIC_RELAXED));
	st = run_internal(EK_PSET_ADD, name, 0, sorted, nranks, &id);
	free(sorted);
	if (st == HVD_OK)
		*pset = id;
	return st;
}

hvd_status_t hvd_pset_remove(hvd_pset_t pset)
{
	struct engine *e = NULL;
	char name[64];
	hvd_status_t st;
	int exists;

	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	if (!e->psets.dynamic)
		return hvd_error(HVD_ERR_PROCESS_SET,
				 "hvd_pset_remove: dynamic process sets are "
				 "off; set HOROVOD_DYNAMIC_PROCESS_SETS=1");
	if (pset == HVD_PSET_GLOBAL)
		return hvd_error(HVD_ERR_PROCESS_SET,
				 "hvd_pset_remove: the global set 0 cannot be "
				 "removed");
	pthread_mutex_lock(&e->lock);
	exists = pset_get(&e->psets, pset) != NULL;
	pthread_mutex_unlock(&e->lock);
	if (!exists)
		return hvd_error(HVD_ERR_PROCESS_SET,
				 "hvd_pset_remove: process set %d does not "
				 "exist",
				 pset);
	snprintf(name, sizeof(name), "__hvd_pset.%d",
		 __atomic_fetch_add(&pset_seq_counter, 1, __ATOMIC_RELAXED));
	return run_internal(EK_PSET_REMOVE, name, pset, NULL, 0, NULL);
}

int hvd_pset_rank(hvd_pset_t id)
{
	struct engine *e = hvd_engine;
	struct pset *p;
	int r = -1;

	if (!e)
		return -1;
	pthread_mutex_lock(&e->lock);
	p = pset_get(&e->psets, id);
	if (p)
		r = p->my_rank;
	pthread_mutex_unlock(&e->lock);
	return r;
}

int hvd_pset_size(hvd_pset_t id)
{
	struct engine *e = hvd_engine;
	struct pset *p;
	int n = -1;

	if (!e)
		return -1;
	pthread_mutex_lock(&e->lock);
	p = pset_get(&e->psets, id);
	if (p)
		n = p->n;
	pthread_mutex_unlock(&e->lock);
	return n;
}

hvd_status_t hvd_pset_list(hvd_pset_t *ids, int max, int *n)
{
	struct engine *e = NULL;
	hvd_status_t st;
	int k = 0;

	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	if (!n || (max > 0 && !ids))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_pset_list: NULL argument");
	pthread_mutex_lock(&e->lock);
	for (int i = 0; i < e->psets.cap; i++)
		if (e->psets.sets[i]) {
			if (k < max)
				ids[k] = i;
			k++;
		}
	pthread_mutex_unlock(&e->lock);
	*n = k;
	return HVD_OK;
}

/* ----------------------------------------------------------- timeline */

/* Hands a command to the engine thread and waits until it is applied. */
static hvd_status_t timeline_command(struct engine *e, int cmd,
				     struct timeline *t)
{
	pthread_mutex_lock(&e->lock);
	while (e->tl_cmd && !e->dead)
		pthread_cond_wait(&e->done_cond, &e->lock);
	if (e->dead) {
		pthread_mutex_unlock(&e->lock);
		if (t)
			timeline_close(t);
		return dead_status(e);
	}
	e->tl_cmd = cmd;
	if (t)
		e->tl_new = *t;
	if (e->sleeping)
		pthread_cond_signal(&e->wake);
	while (e->tl_cmd && !e->dead)
		pthread_cond_wait(&e->done_cond, &e->lock);
	pthread_mutex_unlock(&e->lock);
	return HVD_OK;
}

hvd_status_t hvd_timeline_start(const char *path, int mark_cycles)
{
	struct engine *e = NULL;
	struct timeline t;
	hvd_status_t st;

	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	if (!path || !*path)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_timeline_start: no file name");
	if (e->rank != 0)
		return HVD_OK; /* the coordinator writes the timeline */
	st = timeline_open(&t, path, mark_cycles);
	if (st != HVD_OK)
		return st;
	return timeline_command(e, 1, &t);
}

hvd_status_t hvd_timeline_stop(void)
{
	struct engine *e = NULL;
	hvd_status_t st;

	if ((st = engine_ready(&e)) != HVD_OK)
		return st;
	if (e->rank != 0)
		return HVD_OK;
	return timeline_command(e, 2, NULL);
}

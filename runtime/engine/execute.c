/*
 * execute.c - the last step of a cycle: the agreed responses (cached hits
 * and the coordinator's new ones) are ordered by priority (stable, so
 * equal priorities keep cache-bit / coordinator order), cut into fusion
 * buckets and run; special responses (errors, join, process-set changes,
 * stall shutdown) are applied in their place in the order.  Then, on
 * every rank whether member or not, cache hits are touched and new
 * cacheable responses are put, in list order, so that the caches stay
 * identical; autotune is fed on rank 0.
 */
#include "config.h"

#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

static void complete_op(struct engine *e, struct hvd_handle *h, hvd_status_t st,
			const char *msg)
{
	if (e->rank == 0 && timeline_active(&e->tl))
		timeline_end(&e->tl, h->name,
			     hvd_dtype_name((hvd_dtype_t)h->p.dtype),
			     h->p.count);
	pending_finish(e, h, st, msg);
}

/* Runs a special response; returns 1 when the engine must stop. */
static int run_special(struct engine *e, const struct eng_resp *r,
		       struct hvd_handle *h)
{
	switch (r->p.kind) {
	case EK_ERROR:
		if (h)
			pending_finish(e, h, (hvd_status_t)r->status,
				       r->message);
		return 0;
	case EK_SHUTDOWN:
		hvd_log(HVD_LOG_ERROR, "%s", r->message ? r->message : "stall");
		pending_fail_all(e, (hvd_status_t)r->status,
				 r->message ? r->message : "hvd: stalled");
		return 1;
	case EK_JOIN:
		e->joined = 0;
		if (e->join_op) {
			e->join_op->result_int = r->last_joined;
			pending_finish(e, e->join_op, HVD_OK, NULL);
			e->join_op = NULL;
		}
		return 0;
	case EK_PSET_ADD: {
		int32_t id = e->psets.next_id;
		hvd_status_t st;

		pthread_mutex_lock(&e->lock);
		st = pset_table_add(&e->psets, id, r->ranks, (int)r->nranks,
				    e->rank, e->comm);
		pthread_mutex_unlock(&e->lock);
		if (h) {
			h->result_int = id;
			pending_finish(e, h, st,
				       st == HVD_OK ? NULL : hvd_last_error());
		}
		return 0;
	}
	case EK_PSET_REMOVE:
		/* Ops still pending on the set can never run now. */
		for (int i = e->npending - 1; i >= 0; i--) {
			struct hvd_handle *p = e->pending[i];

			if (!p->internal && p->p.pset == r->p.pset)
				pending_finish(
				    e, p, HVD_ERR_PROCESS_SET,
				    "hvd: the process set was removed "
				    "while this operation was pending");
		}
		for (int b = 0; b < e->cache.nbits; b++) {
			struct rc_entry *ce = rc_entry_at(&e->cache, b);

			if (ce && ce->resp.p.pset == r->p.pset)
				rc_erase(&e->cache, b);
		}
		pthread_mutex_lock(&e->lock);
		pset_table_remove(&e->psets, r->p.pset);
		pthread_mutex_unlock(&e->lock);
		if (h)
			pending_finish(e, h, HVD_OK, NULL);
		return 0;
	default:
		return 0;
	}
}

static int is_special(int kind) { return kind > EK_REDUCESCATTER; }

static int cacheable(const struct eng_resp *r)
{
	return r->p.kind <= EK_REDUCESCATTER && !r->joined &&
	       r->group_size <= 1;
}

/* The order every rank executes a cycle's responses in: higher priority
 * first, then the order they were collected in (cache bit, then
 * coordinator order), so equal priorities keep their order. */
struct exec_key {
	int32_t priority;
	int order;
	int idx; /* in the collected list */
};

static int cmp_key(const void *a, const void *b)
{
	const struct exec_key *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority > y->priority ? -1 : 1;
	return x->order - y->order;
}

/* A cycle's responses in execution order, with this rank's op for each
 * (NULL where it has none: not a member, or joined). */
struct exec_list {
	struct resp_list r;	  /* sorted; owns the responses */
	struct cycle_item *items; /* [r.n] */
	struct hvd_handle **ops;  /* [r.n] */
};

static void exec_list_free(struct exec_list *x)
{
	resp_list_free(&x->r);
	free(x->items);
	free(x->ops);
}

/* Moves l's responses into x in execution order. */
static hvd_status_t order_responses(struct resp_list *l,
				    const struct cycle_item *items,
				    struct exec_list *x)
{
	struct exec_key *keys = malloc((size_t)l->n * sizeof(*keys));

	x->ops = calloc((size_t)l->n, sizeof(*x->ops));
	x->items = malloc((size_t)l->n * sizeof(*x->items));
	x->r.v = malloc((size_t)l->n * sizeof(*x->r.v));
	if (!keys || !x->ops || !x->items || !x->r.v) {
		free(keys);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	for (int i = 0; i < l->n; i++) {
		keys[i].priority = l->v[i].p.priority;
		keys[i].order = items[i].order;
		keys[i].idx = i;
	}
	qsort(keys, (size_t)l->n, sizeof(*keys), cmp_key);
	for (int i = 0; i < l->n; i++) {
		x->r.v[i] = l->v[keys[i].idx];
		x->items[i] = items[keys[i].idx];
	}
	x->r.n = x->r.cap = l->n;
	l->n = 0; /* x owns the contents now */
	free(keys);
	return HVD_OK;
}

/* This rank's op for each response: the one waiting on the cache bit, or
 * the pending op of that name (a JOIN response completes e->join_op). */
static void find_ops(struct engine *e, struct exec_list *x)
{
	for (int i = 0; i < x->r.n; i++) {
		const struct eng_resp *r = &x->r.v[i];

		if (x->items[i].bit >= 0) {
			struct rc_entry *ce =
			    rc_entry_at(&e->cache, x->items[i].bit);

			x->ops[i] = ce ? ce->pending : NULL;
		} else {
			x->ops[i] = namemap_get(&e->pending_names, r->name);
			if (x->ops[i] && r->p.kind == EK_JOIN)
				x->ops[i] = NULL;
		}
	}
}

/* One bucket of collectives, on members of its set; returns 1 when the
 * engine must stop (the communicator broke). */
static int run_bucket(struct engine *e, const struct exec_list *x,
		      const struct fusion_bucket *b)
{
	char msg[1024];
	hvd_status_t st;

	for (int i = 0; i < b->n; i++) {
		struct hvd_handle *h = x->ops[b->idx[i]];

		if (!h)
			continue;
		if (h->tl_neg) {
			timeline_end(&e->tl, h->name, NULL, 0);
			h->tl_neg = 0;
		}
		if (e->rank == 0)
			timeline_begin(&e->tl, h->name,
				       eng_kind_name(h->p.kind));
	}
	msg[0] = '\0';
	st = fusion_execute(e, x->r.v, x->ops, b, msg, sizeof(msg));
	for (int i = 0; i < b->n; i++) {
		struct hvd_handle *h = x->ops[b->idx[i]];

		if (h)
			complete_op(e, h, st, msg);
	}
	if (hvd_status_peers_broken(st)) {
		/* The communicator is broken: nothing can run. */
		pending_fail_all(e, st, msg);
		return 1;
	}
	return 0;
}

/* The plan's buckets in order; returns 1 when the engine must stop. */
static int run_plan(struct engine *e, const struct exec_list *x,
		    const struct fusion_plan *plan)
{
	for (int k = 0; k < plan->n; k++) {
		const struct fusion_bucket *b = &plan->b[k];
		const struct eng_resp *r0 = &x->r.v[b->idx[0]];
		int stop;

		if (is_special(r0->p.kind))
			stop = run_special(e, r0, x->ops[b->idx[0]]);
		else if (pset_is_member(&e->psets, r0->p.pset, e->rank))
			stop = run_bucket(e, x, b);
		else
			stop = 0;
		if (stop)
			return 1;
	}
	return 0;
}

/* LRU touches and new entries in list order, on every rank (members or
 * not), so that the caches stay identical.  Returns 1 when the engine
 * must stop (out of memory). */
static int update_cache(struct engine *e, const struct exec_list *x)
{
	for (int i = 0; i < x->r.n; i++)
		if (x->items[i].bit >= 0)
			rc_touch(&e->cache, x->items[i].bit);
	for (int i = 0; i < x->r.n; i++) {
		void *evicted = NULL;

		if (x->items[i].bit >= 0 || !cacheable(&x->r.v[i]) ||
		    !e->cache.capacity)
			continue;
		if (rc_put(&e->cache, &x->r.v[i], &evicted) < 0) {
			pending_fail_all(e, HVD_ERR_NO_MEMORY,
					 "hvd: out of memory in the cache");
			return 1;
		}
		if (evicted)
			pending_uncache(e, evicted);
	}
	return 0;
}

/* Rank 0: autotune counts the bytes allreduced in the global set. */
static void feed_autotune(struct engine *e, const struct exec_list *x)
{
	if (e->rank != 0 || !e->at.active)
		return;
	for (int i = 0; i < x->r.n && e->at.active; i++) {
		const struct eng_resp *r = &x->r.v[i];

		if (r->p.kind == EK_ALLREDUCE && r->p.pset == 0 &&
		    autotune_record(&e->at, r->name,
				    r->p.count *
					hvd_dtype_size((hvd_dtype_t)r->p.dtype),
				    hvd_now()))
			e->at_sync = 1;
	}
}

int cycle_execute(struct engine *e, struct resp_list *l,
		  struct cycle_item *items)
{
	struct exec_list x = {0};
	struct fusion_plan plan = {0};
	hvd_status_t st;
	int stop;

	if (!l->n)
		return 0;
	st = order_responses(l, items, &x);
	if (st == HVD_OK) {
		find_ops(e, &x);
		st = fusion_plan_build(x.r.v, x.r.n, e->fusion_threshold,
				       e->fusion_direct, &plan);
	}
	if (st != HVD_OK) {
		pending_fail_all(e, st, hvd_last_error());
		exec_list_free(&x);
		return 1;
	}
	stop = run_plan(e, &x, &plan);
	if (!stop)
		stop = update_cache(e, &x);
	feed_autotune(e, &x);
	fusion_plan_free(&plan);
	exec_list_free(&x);
	return stop;
}

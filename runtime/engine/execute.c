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

static struct eng_resp *sort_base;
static struct cycle_item *sort_items;

static int cmp_prio(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	int pi = sort_base[i].p.priority, pj = sort_base[j].p.priority;

	if (pi != pj)
		return pi > pj ? -1 : 1;
	return sort_items[i].order - sort_items[j].order;
}

static void complete_op(struct engine *e, struct hvd_handle *h, hvd_status_t st,
			const char *msg)
{
	if (e->rank == 0 && timeline_active(&e->tl))
		timeline_end(&e->tl, h->name,
			     hvd_dtype_name((hvd_dtype_t)h->p.dtype),
			     h->p.count);
	cycle_finish(e, h, st, msg);
}

/* Runs a special response; returns 1 when the engine must stop. */
static int run_special(struct engine *e, const struct eng_resp *r,
		       struct hvd_handle *h)
{
	switch (r->p.kind) {
	case EK_ERROR:
		if (h)
			cycle_finish(e, h, (hvd_status_t)r->status, r->message);
		return 0;
	case EK_SHUTDOWN:
		hvd_log(HVD_LOG_ERROR, "%s", r->message ? r->message : "stall");
		cycle_fail_all(e, (hvd_status_t)r->status,
			       r->message ? r->message : "hvd: stalled");
		return 1;
	case EK_JOIN:
		e->joined = 0;
		if (e->join_op) {
			e->join_op->result_int = r->last_joined;
			cycle_finish(e, e->join_op, HVD_OK, NULL);
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
			cycle_finish(e, h, st,
				     st == HVD_OK ? NULL : hvd_last_error());
		}
		return 0;
	}
	case EK_PSET_REMOVE:
		/* Ops still pending on the set can never run now. */
		for (int i = e->npending - 1; i >= 0; i--) {
			struct hvd_handle *p = e->pending[i];

			if (!p->internal && p->p.pset == r->p.pset)
				cycle_finish(
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
			cycle_finish(e, h, HVD_OK, NULL);
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

/* Executes the list; returns 1 when the engine must stop. */
int cycle_execute(struct engine *e, struct resp_list *l,
		  struct cycle_item *items)
{
	struct hvd_handle **ops = NULL;
	struct fusion_plan plan = {0};
	int *perm = NULL, stop = 0;
	struct resp_list sorted = {0};
	struct cycle_item *sitems = NULL;
	char msg[1024];
	hvd_status_t st;

	if (!l->n)
		return 0;
	perm = malloc((size_t)l->n * sizeof(*perm));
	ops = calloc((size_t)l->n, sizeof(*ops));
	sitems = malloc((size_t)l->n * sizeof(*sitems));
	sorted.v = malloc((size_t)l->n * sizeof(*sorted.v));
	if (!perm || !ops || !sitems || !sorted.v) {
		cycle_fail_all(e, HVD_ERR_NO_MEMORY, "hvd: out of memory");
		stop = 1;
		goto out;
	}
	for (int i = 0; i < l->n; i++)
		perm[i] = i;
	sort_base = l->v;
	sort_items = items;
	qsort(perm, (size_t)l->n, sizeof(*perm), cmp_prio);
	for (int i = 0; i < l->n; i++) {
		sorted.v[i] = l->v[perm[i]];
		sitems[i] = items[perm[i]];
	}
	sorted.n = sorted.cap = l->n;
	/* sorted owns the contents now */
	l->n = 0;
	for (int i = 0; i < sorted.n; i++) {
		const struct eng_resp *r = &sorted.v[i];

		if (sitems[i].bit >= 0) {
			struct rc_entry *ce =
			    rc_entry_at(&e->cache, sitems[i].bit);

			ops[i] = ce ? ce->pending : NULL;
		} else {
			ops[i] = namemap_get(&e->pending_names, r->name);
			if (ops[i] && r->p.kind == EK_JOIN)
				ops[i] = NULL;
		}
	}
	st = fusion_plan_build(sorted.v, sorted.n, e->fusion_threshold,
			       e->fusion_direct, &plan);
	if (st != HVD_OK) {
		cycle_fail_all(e, st, hvd_last_error());
		stop = 1;
		goto out;
	}
	for (int k = 0; k < plan.n && !stop; k++) {
		const struct fusion_bucket *b = &plan.b[k];
		const struct eng_resp *r0 = &sorted.v[b->idx[0]];
		int member;

		if (is_special(r0->p.kind)) {
			stop = run_special(e, r0, ops[b->idx[0]]);
			continue;
		}
		member = pset_is_member(&e->psets, r0->p.pset, e->rank);
		if (!member)
			continue;
		for (int i = 0; i < b->n; i++) {
			struct hvd_handle *h = ops[b->idx[i]];

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
		st = fusion_execute(e, sorted.v, ops, b, msg, sizeof(msg));
		for (int i = 0; i < b->n; i++) {
			struct hvd_handle *h = ops[b->idx[i]];

			if (h)
				complete_op(e, h, st, msg);
		}
		if (st != HVD_OK &&
		    (st == HVD_ERR_PEER_FAILED || st == HVD_ERR_TRANSPORT ||
		     st == HVD_ERR_TIMEOUT)) {
			/* The communicator is broken: nothing can run. */
			cycle_fail_all(e, st, msg);
			stop = 1;
		}
	}
	/* LRU touches and new entries in list order, on every rank (members
	 * or not), so that the caches stay identical. */
	for (int i = 0; i < sorted.n && !stop; i++)
		if (sitems[i].bit >= 0)
			rc_touch(&e->cache, sitems[i].bit);
	for (int i = 0; i < sorted.n && !stop; i++) {
		void *evicted = NULL;

		if (sitems[i].bit >= 0 || !cacheable(&sorted.v[i]) ||
		    !e->cache.capacity)
			continue;
		if (rc_put(&e->cache, &sorted.v[i], &evicted) < 0) {
			cycle_fail_all(e, HVD_ERR_NO_MEMORY,
				       "hvd: out of memory in the cache");
			stop = 1;
			break;
		}
		if (evicted)
			cycle_uncache(e, evicted);
	}
	/* Autotune counts the bytes allreduced in the global set. */
	for (int i = 0; i < sorted.n && e->rank == 0 && e->at.active; i++) {
		const struct eng_resp *r = &sorted.v[i];

		if (r->p.kind == EK_ALLREDUCE && r->p.pset == 0 &&
		    autotune_record(&e->at, r->name,
				    r->p.count *
					hvd_dtype_size((hvd_dtype_t)r->p.dtype),
				    hvd_now()))
			e->at_sync = 1;
	}
out:
	fusion_plan_free(&plan);
	resp_list_free(&sorted);
	free(perm);
	free(ops);
	free(sitems);
	return stop;
}

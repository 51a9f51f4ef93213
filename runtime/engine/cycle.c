/*
 * cycle.c - one engine cycle, run by the engine thread on every rank.
 *
 *  1. Drain the submission queue; classify each new op against the
 *     response cache: HIT (wait for its bit), MISS or INVALID (send it to
 *     the coordinator).
 *  2. Exchange one byte vector with a MIN allreduce on the engine's
 *     communicator: a few status bytes (stored inverted, so MIN is an OR:
 *     shutdown, something uncached, an invalid entry, autotune sync), then
 *     per cache bit an AND byte (1: this rank has it ready, has joined or
 *     is not a member of its set) and an OR byte (0: this rank really has
 *     it).  A bit runs when all ranks agree and at least one really has it.
 *     The message is 2 bytes per cache entry whatever the job size, and
 *     the allreduce takes O(log size) rounds: a repeat step costs exactly
 *     this one small collective.
 *  3. Only when some rank has something uncached: every rank sends its
 *     requests to rank 0 (lengths by allgather, data by a gather), rank 0
 *     runs the coordinator (negotiate.c) and broadcasts the new responses.
 *  4. Cached and new responses are ordered (priority, then cache bit /
 *     coordinator order), fused (fusion.c) and executed; every rank does
 *     the same in the same order; then new responses enter the cache
 *     (execute.c).
 */
#include "config.h"

#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

enum {
	S_SHUTDOWN = 0, /* some rank is finalizing */
	S_UNCACHED,	/* some rank has requests for the coordinator */
	S_INVALID,	/* some rank found a cached name with new params */
	S_AUTOTUNE,	/* rank 0 has new autotune values to broadcast */
	S_NSTATUS
};

/* ------------------------------------------------------- pending ops */

static int pending_add(struct engine *e, struct hvd_handle *h)
{
	if (e->npending == e->cappending) {
		int cap = e->cappending ? e->cappending * 2 : 256;
		struct hvd_handle **v =
		    realloc(e->pending, (size_t)cap * sizeof(*v));

		if (!v)
			return -1;
		e->pending = v;
		e->cappending = cap;
	}
	if (namemap_put(&e->pending_names, h->name, h) != HVD_OK)
		return -1;
	h->pending_idx = e->npending;
	e->pending[e->npending++] = h;
	return 0;
}

static void pending_remove(struct engine *e, struct hvd_handle *h)
{
	int i = h->pending_idx;

	namemap_del(&e->pending_names, h->name);
	e->pending[i] = e->pending[--e->npending];
	e->pending[i]->pending_idx = i;
	if (h->state == OS_HIT) {
		struct rc_entry *ce = rc_entry_at(&e->cache, h->bit);

		if (ce && ce->pending == h)
			ce->pending = NULL;
	}
}

void cycle_finish(struct engine *e, struct hvd_handle *h, hvd_status_t st,
		  const char *msg)
{
	pending_remove(e, h);
	engine_complete(h, st, msg);
}

void cycle_fail_all(struct engine *e, hvd_status_t st, const char *msg)
{
	struct hvd_handle *q;

	while (e->npending)
		cycle_finish(e, e->pending[e->npending - 1], st, msg);
	e->join_op = NULL;
	pthread_mutex_lock(&e->lock);
	e->dead = 1;
	e->dead_status = st;
	snprintf(e->dead_message, sizeof(e->dead_message), "%s", msg);
	q = e->q_head;
	e->q_head = e->q_tail = NULL;
	pthread_cond_broadcast(&e->done_cond);
	pthread_mutex_unlock(&e->lock);
	while (q) {
		struct hvd_handle *next = q->next;

		engine_complete(q, st, msg);
		q = next;
	}
}

static int my_set_rank(struct engine *e, int32_t id)
{
	struct pset *p = pset_get(&e->psets, id);

	return p ? p->my_rank : -1;
}

/* Back to the coordinator path (the op's cache bit is gone or invalid). */
void cycle_uncache(struct engine *e, struct hvd_handle *h)
{
	struct rc_entry *ce = rc_entry_at(&e->cache, h->bit);

	if (ce && ce->pending == h)
		ce->pending = NULL;
	h->state = OS_SEND;
	h->bit = -1;
}

/* ------------------------------------------------------ step 1: drain */

static void apply_commands(struct engine *e, int *stop)
{
	struct hvd_handle *q, *next;

	pthread_mutex_lock(&e->lock);
	q = e->q_head;
	e->q_head = e->q_tail = NULL;
	*stop = e->stop_requested;
	if (e->tl_cmd) {
		timeline_close(&e->tl);
		if (e->tl_cmd == 1)
			e->tl = e->tl_new;
		memset(&e->tl_new, 0, sizeof(e->tl_new));
		e->tl_new.fd = -1;
		e->tl_cmd = 0;
		pthread_cond_broadcast(&e->done_cond);
	}
	pthread_mutex_unlock(&e->lock);
	for (; q; q = next) {
		next = q->next;
		q->next = NULL;
		q->state = OS_NEW;
		if (pending_add(e, q) < 0)
			engine_complete(q, HVD_ERR_NO_MEMORY,
					"hvd: out of memory queueing the op");
	}
}

/* Returns 1 when this rank has invalid cache bits (marked in inv). */
static int classify(struct engine *e, uint8_t *inv, double now)
{
	int any_invalid = 0;

	for (int i = 0; i < e->npending; i++) {
		struct hvd_handle *h = e->pending[i];
		int bit = -1, res;

		if (h->state == OS_HIT && !e->stall_disable &&
		    now - h->t_enqueue > e->stall_warn) {
			/* Waiting too long on a cached bit: let the
			 * coordinator see it so the stall gets reported. */
			inv[h->bit] = 1;
			any_invalid = 1;
			continue;
		}
		if (h->state != OS_NEW)
			continue;
		if (h->p.kind == EK_JOIN) {
			e->joined = 1;
			e->join_op = h;
		}
		if (h->internal || h->group_size > 1 || !e->cache.capacity) {
			h->state = OS_SEND;
			continue;
		}
		res = rc_lookup(&e->cache, h->name, &h->p,
				my_set_rank(e, h->p.pset), &bit);
		if (res == RC_HIT && !rc_entry_at(&e->cache, bit)->pending) {
			h->state = OS_HIT;
			h->bit = bit;
			rc_entry_at(&e->cache, bit)->pending = h;
			if (e->rank == 0 && timeline_active(&e->tl)) {
				char what[64];

				snprintf(what, sizeof(what), "NEGOTIATE_%s",
					 eng_kind_name(h->p.kind));
				timeline_begin(&e->tl, h->name, what);
				h->tl_neg = 1;
			}
		} else {
			if (res == RC_INVALID) {
				inv[bit] = 1;
				any_invalid = 1;
			}
			h->state = OS_SEND;
		}
	}
	return any_invalid;
}

/* --------------------------------------------------- step 3: slow path */

static hvd_status_t gather_requests(struct engine *e, struct wbuf *w,
				    uint8_t **all, uint64_t **lens)
{
	uint64_t mylen = w->len, total = 0;
	size_t *counts = NULL, *displs = NULL, *zeros = NULL;
	hvd_status_t st;
	int n = e->size;

	*all = NULL;
	*lens = calloc((size_t)n, sizeof(**lens));
	counts = calloc((size_t)n, sizeof(*counts));
	displs = calloc((size_t)n, sizeof(*displs));
	zeros = calloc((size_t)n, sizeof(*zeros));
	if (!*lens || !counts || !displs || !zeros) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		counts[i] = 1;
	st =
	    coll_allgatherv(e->comm, &mylen, 1, *lens, counts, NULL, HVD_INT64);
	if (st != HVD_OK)
		goto out;
	/* A gather: every rank sends to rank 0 only. */
	for (int i = 0; i < n; i++) {
		displs[i] = total;
		total += (*lens)[i];
		counts[i] = e->rank == 0 ? (size_t)(*lens)[i] : 0;
	}
	if (e->rank == 0) {
		*all = malloc(total ? total : 1);
		if (!*all) {
			st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
			goto out;
		}
	}
	zeros[0] = w->len;
	st = coll_alltoallv(e->comm, w->data ? (void *)w->data : (void *)&mylen,
			    zeros, displs /* all 0 on the send side */,
			    *all ? (void *)*all : (void *)&mylen, counts,
			    e->rank == 0 ? displs : zeros, HVD_UINT8);
out:
	free(counts);
	free(displs);
	free(zeros);
	return st;
}

static hvd_status_t slow_path(struct engine *e, struct resp_list *out,
			      double now)
{
	struct wbuf w = {0}, rw = {0};
	uint8_t *all = NULL;
	uint64_t *lens = NULL, rlen = 0;
	uint32_t nreq = 0;
	hvd_status_t st;

	wire_put_u32(&w, 0);
	for (int i = 0; i < e->npending; i++) {
		struct hvd_handle *h = e->pending[i];
		struct eng_req r;

		if (h->state != OS_SEND)
			continue;
		memset(&r, 0, sizeof(r));
		r.p = h->p;
		r.age = now - h->t_enqueue;
		r.group_size = h->group_size;
		r.nranks = h->nranks;
		r.ranks = h->ranks;
		r.name = h->name;
		r.group = h->group;
		wire_put_req(&w, &r);
		h->state = OS_SENT;
		nreq++;
	}
	if (w.oom) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	memcpy(w.data, &nreq, sizeof(nreq));
	st = gather_requests(e, &w, &all, &lens);
	if (st != HVD_OK)
		goto out;
	if (e->rank == 0) {
		struct resp_list rl = {0};
		size_t off = 0;

		for (int r = 0; r < e->size && st == HVD_OK; r++) {
			struct rbuf b = {all + off, all + off + lens[r], 0};
			uint32_t k = wire_get_u32(&b);

			off += lens[r];
			for (uint32_t j = 0; j < k && st == HVD_OK; j++) {
				struct eng_req *q = malloc(sizeof(*q));

				if (!q || wire_get_req(&b, q) < 0) {
					free(q);
					st = hvd_error(HVD_ERR_INTERNAL,
						       "hvd: malformed request "
						       "list from rank %d",
						       r);
					break;
				}
				st = coord_add(&e->coord, r, q, now);
			}
		}
		if (st == HVD_OK)
			st = coord_collect(&e->coord, &rl);
		if (st == HVD_OK && e->stall_shutdown_pending) {
			/* Everything else is moot: one SHUTDOWN response. */
			struct eng_resp *s;

			resp_list_free(&rl);
			s = resp_list_push(&rl);
			if (s) {
				s->p.kind = EK_SHUTDOWN;
				s->status = HVD_ERR_STALLED;
				s->name = strdup("__hvd_stall");
				s->message = strdup(e->stall_message);
			}
		}
		wire_put_u32(&rw, (uint32_t)rl.n);
		for (int i = 0; i < rl.n; i++)
			wire_put_resp(&rw, &rl.v[i]);
		resp_list_free(&rl);
		if (st == HVD_OK && rw.oom)
			st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		rlen = rw.len;
	}
	/* Every rank must join the broadcasts, even after a local error. */
	{
		hvd_status_t st2 =
		    coll_broadcast(e->comm, &rlen, 1, HVD_INT64, 0);

		if (st2 == HVD_OK && e->rank != 0) {
			rw.data = malloc(rlen ? rlen : 1);
			rw.len = rw.cap = rlen;
			if (!rw.data)
				st2 = HVD_ERR_NO_MEMORY;
		}
		if (st2 == HVD_OK)
			st2 = coll_broadcast(e->comm, rw.data, rlen, HVD_UINT8,
					     0);
		if (st == HVD_OK)
			st = st2;
	}
	if (st == HVD_OK) {
		struct rbuf b = {rw.data, rw.data + rlen, 0};
		uint32_t k = wire_get_u32(&b);

		for (uint32_t j = 0; j < k; j++) {
			struct eng_resp *r = resp_list_push(out);

			if (!r || wire_get_resp(&b, r) < 0) {
				if (r)
					out->n--;
				st = hvd_error(HVD_ERR_INTERNAL,
					       "hvd: malformed response list");
				break;
			}
		}
	}
out:
	wbuf_free(&w);
	wbuf_free(&rw);
	free(all);
	free(lens);
	return st;
}

/* -------------------------------------------------------- the cycle */

int cycle_run(struct engine *e)
{
	struct resp_list l = {0};
	struct cycle_item *items = NULL;
	uint8_t *v = NULL, *inv = NULL;
	int nbits, stop = 0, any_invalid, uncached = 0, len;
	double now = hvd_now();
	hvd_status_t st = HVD_OK;

	apply_commands(e, &stop);
	e->cycles++;
	if (e->rank == 0)
		timeline_mark_cycle(&e->tl);
	nbits = e->cache.nbits;
	inv = calloc((size_t)nbits + 1, 1);
	len = S_NSTATUS + 2 * nbits;
	v = malloc((size_t)len);
	if (!inv || !v) {
		cycle_fail_all(e, HVD_ERR_NO_MEMORY, "hvd: out of memory");
		stop = 1;
		goto out;
	}
	any_invalid = classify(e, inv, now);
	if (e->rank == 0 && !e->stall_disable &&
	    now - e->last_stall_check >= e->stall_warn) {
		e->last_stall_check = now;
		if (stall_check(&e->coord, now, e->stall_warn,
				e->stall_shutdown, e->stall_message,
				sizeof(e->stall_message)))
			e->stall_shutdown_pending = 1;
	}
	for (int i = 0; i < e->npending; i++)
		if (e->pending[i]->state == OS_SEND)
			uncached = 1;
	v[S_SHUTDOWN] = !stop;
	v[S_UNCACHED] = !(uncached || e->stall_shutdown_pending);
	v[S_INVALID] = !any_invalid;
	v[S_AUTOTUNE] = !(e->rank == 0 && e->at_sync);

	for (int b = 0; b < nbits; b++) {
		struct rc_entry *ce = rc_entry_at(&e->cache, b);
		int real = ce && ce->pending && !inv[b];
		int vacuous =
		    !ce || e->joined ||
		    !pset_is_member(&e->psets, ce->resp.p.pset, e->rank);

		v[S_NSTATUS + b] = real || vacuous;
		v[S_NSTATUS + nbits + b] = !real;
	}
	if (e->size > 1) {
		st = coll_allreduce(e->comm, v, v, (size_t)len, HVD_UINT8,
				    HVD_MIN);
		if (st != HVD_OK)
			goto err_comm;
	}
	if (!v[S_SHUTDOWN]) {
		cycle_fail_all(e, HVD_ERR_SHUTDOWN,
			       "hvd: the engine shut down (a rank called "
			       "hvd_finalize) before this operation ran on "
			       "every rank");
		stop = 1;
		goto out;
	}
	if (!v[S_AUTOTUNE]) {
		/* Rank 0 chose new values: all switch at this cycle. */
		double kn[2] = {(double)e->at.fusion, e->at.cycle_ms};

		st = coll_broadcast(e->comm, kn, 2, HVD_FLOAT64, 0);
		if (st != HVD_OK)
			goto err_comm;
		e->fusion_threshold = (size_t)kn[0];
		e->cycle_ms = kn[1];
		e->at_sync = 0;
	}
	if (!v[S_INVALID]) {
		/* OR of the invalid bits: erase them everywhere; their ops
		 * go through the coordinator. */
		for (int b = 0; b < nbits; b++)
			inv[b] = !inv[b];
		if (e->size > 1) {
			st = coll_allreduce(e->comm, inv, inv, (size_t)nbits,
					    HVD_UINT8, HVD_MIN);
			if (st != HVD_OK)
				goto err_comm;
		}
		for (int b = 0; b < nbits; b++) {
			struct rc_entry *ce;

			if (inv[b])
				continue;
			ce = rc_entry_at(&e->cache, b);
			if (ce && ce->pending)
				cycle_uncache(e, ce->pending);
			rc_erase(&e->cache, b);
		}
		v[S_UNCACHED] = 0;
	}
	/* Common hits, in bit order. */
	items = malloc(((size_t)nbits + 1) * sizeof(*items));
	if (!items) {
		cycle_fail_all(e, HVD_ERR_NO_MEMORY, "hvd: out of memory");
		stop = 1;
		goto out;
	}
	for (int b = 0; b < nbits; b++) {
		struct rc_entry *ce = rc_entry_at(&e->cache, b);
		struct eng_resp *r;

		if (!ce || !v[S_NSTATUS + b] || v[S_NSTATUS + nbits + b])
			continue;
		r = resp_list_push(&l);
		if (!r || eng_resp_copy(r, &ce->resp) != HVD_OK) {
			if (r)
				l.n--;
			cycle_fail_all(e, HVD_ERR_NO_MEMORY,
				       "hvd: out of memory");
			stop = 1;
			goto out;
		}
		items[l.n - 1].bit = b;
		items[l.n - 1].order = l.n - 1;
	}
	if (!v[S_UNCACHED]) {
		int first = l.n;
		struct cycle_item *ni;

		st = slow_path(e, &l, now);
		if (st != HVD_OK)
			goto err_comm;
		ni = realloc(items, ((size_t)l.n + 1) * sizeof(*items));
		if (!ni) {
			cycle_fail_all(e, HVD_ERR_NO_MEMORY,
				       "hvd: out of memory");
			stop = 1;
			goto out;
		}
		items = ni;
		for (int i = first; i < l.n; i++) {
			items[i].bit = -1;
			items[i].order = i;
		}
		if (e->rank == 0)
			e->stall_shutdown_pending = 0;
	}
	/* Hot polling: while some rank has a cached op waiting for the
	 * others (the OR byte says someone has it, the AND byte says not
	 * everyone), the others usually submit it within microseconds (a
	 * backward pass), so the next cycle starts at once instead of after
	 * HOROVOD_CYCLE_TIME - for at most one cycle time (2 ms at most)
	 * without progress, then the normal pace resumes.  Every rank sees
	 * the same vector, so all of them poll together and meet in the
	 * next collective. */
	{
		int partial = 0;

		for (int b = 0; b < nbits && !partial; b++)
			partial =
			    !v[S_NSTATUS + nbits + b] && !v[S_NSTATUS + b];
		if (!partial)
			e->hot_since = now;
		e->hot =
		    partial && now - e->hot_since <
				   (e->cycle_ms < 2 ? e->cycle_ms : 2) / 1e3;
	}
	/* one CPU per rank: no waiter can run while this thread executes */
	engine_wake_defer(e->max_spinners == 0);
	stop = cycle_execute(e, &l, items);
	engine_wake_flush();
	if (!stop && e->rank == 0)
		timeline_flush(&e->tl);
	goto out;
err_comm : {
	char msg[1024];

	snprintf(msg, sizeof(msg), "hvd: the engine's negotiation failed: %s",
		 hvd_last_error());
	hvd_log(HVD_LOG_ERROR, "%s", msg);
	cycle_fail_all(e, st, msg);
	stop = 1;
}
out:
	resp_list_free(&l);
	free(items);
	free(v);
	free(inv);
	return stop;
}

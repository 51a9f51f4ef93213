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
 *     coordinator order), cut into fusion buckets (core/fusion_plan.c) and
 *     executed (fusion.c); every rank does the same in the same order;
 *     then new responses enter the cache (execute.c).
 *
 * cycle_run reads as these steps; each returns 1 when the engine must
 * stop, having failed every pending op with the reason.
 */
#include "config.h"

#include "engine/engine.h"
#include "net/transport.h"

#include <stdlib.h>
#include <string.h>

enum {
	S_SHUTDOWN = 0, /* some rank is finalizing */
	S_UNCACHED,	/* some rank has requests for the coordinator */
	S_INVALID,	/* some rank found a cached name with new params */
	S_AUTOTUNE,	/* rank 0 has new autotune values to broadcast */
	S_NSTATUS
};

static int my_set_rank(struct engine *e, int32_t id)
{
	struct pset *p = pset_get(&e->psets, id);

	return p ? p->my_rank : -1;
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

/* Encodes this rank's OS_SEND ops as one request list (they become
 * OS_SENT): a count, then the requests. */
static hvd_status_t encode_requests(struct engine *e, struct wbuf *w,
				    double now)
{
	uint32_t nreq = 0;

	wire_put_u32(w, 0);
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
		r.ndims = h->ndims;
		r.dims = h->dims;
		r.name = h->name;
		r.group = h->group;
		wire_put_req(w, &r);
		h->state = OS_SENT;
		nreq++;
	}
	if (w->oom)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	memcpy(w->data, &nreq, sizeof(nreq));
	return HVD_OK;
}

/* Rank 0: every rank's request list (lens[r] bytes each, back to back in
 * all) through the coordinator; the ready responses, or one SHUTDOWN
 * when the stall inspector asked for it, encoded into rw. */
static hvd_status_t coordinate(struct engine *e, const uint8_t *all,
			       const uint64_t *lens, struct wbuf *rw,
			       double now)
{
	struct resp_list rl = {0};
	hvd_status_t st = HVD_OK;
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
	wire_put_u32(rw, (uint32_t)rl.n);
	for (int i = 0; i < rl.n; i++)
		wire_put_resp(rw, &rl.v[i]);
	resp_list_free(&rl);
	if (st == HVD_OK && rw->oom)
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	return st;
}

/* Rank 0's encoded responses (rw) to every rank.  Every rank must join
 * both broadcasts, even after a local error (st), or the others hang. */
static hvd_status_t broadcast_responses(struct engine *e, struct wbuf *rw,
					hvd_status_t st)
{
	uint64_t rlen = e->rank == 0 ? rw->len : 0;
	hvd_status_t st2 = coll_broadcast(e->comm, &rlen, 1, HVD_INT64, 0);

	if (st2 == HVD_OK && e->rank != 0) {
		rw->data = malloc(rlen ? rlen : 1);
		rw->len = rw->cap = rlen;
		if (!rw->data)
			st2 = HVD_ERR_NO_MEMORY;
	}
	if (st2 == HVD_OK)
		st2 = coll_broadcast(e->comm, rw->data, rlen, HVD_UINT8, 0);
	return st == HVD_OK ? st2 : st;
}

static hvd_status_t decode_responses(const struct wbuf *rw,
				     struct resp_list *out)
{
	struct rbuf b = {rw->data, rw->data + rw->len, 0};
	uint32_t k = wire_get_u32(&b);

	for (uint32_t j = 0; j < k; j++) {
		struct eng_resp *r = resp_list_push(out);

		if (!r || wire_get_resp(&b, r) < 0) {
			if (r)
				out->n--;
			return hvd_error(HVD_ERR_INTERNAL,
					 "hvd: malformed response list");
		}
	}
	return HVD_OK;
}

/* Step 3: requests to rank 0, the coordinator there, its responses to
 * every rank (appended to out). */
static hvd_status_t slow_path(struct engine *e, struct resp_list *out,
			      double now)
{
	struct wbuf w = {0}, rw = {0};
	uint8_t *all = NULL;
	uint64_t *lens = NULL;
	hvd_status_t st;

	HVD_CHECK_GOTO(encode_requests(e, &w, now), st, out);
	HVD_CHECK_GOTO(gather_requests(e, &w, &all, &lens), st, out);
	if (e->rank == 0)
		st = coordinate(e, all, lens, &rw, now);
	st = broadcast_responses(e, &rw, st);
	if (st == HVD_OK)
		st = decode_responses(&rw, out);
out:
	wbuf_free(&w);
	wbuf_free(&rw);
	free(all);
	free(lens);
	return st;
}

/* -------------------------------------------------------- the cycle */

/* One cycle's working state. */
struct cycle {
	double now;
	int stop_requested; /* this rank is finalizing */
	int nbits;	    /* cache bits when the cycle started */
	/* The agreed vector: S_NSTATUS status bytes, then nbits AND bytes
	 * (1: ready, joined or not a member, on every rank), then nbits OR
	 * bytes (0: some rank really has the op). */
	uint8_t *v;
	uint8_t *inv; /* this rank's invalid bits (1), then their OR (0) */
	int any_invalid;
	struct resp_list l;	  /* what runs this cycle */
	struct cycle_item *items; /* [l.n]: where each response came from */
};

static int all_ready(const struct cycle *c, int b)
{
	return c->v[S_NSTATUS + b];
}

static int someone_has(const struct cycle *c, int b)
{
	return !c->v[S_NSTATUS + c->nbits + b];
}

/* The ways a cycle fails every pending op and stops the engine; both
 * return 1 (stop). */
static int fail_oom(struct engine *e)
{
	pending_fail_all(e, HVD_ERR_NO_MEMORY, "hvd: out of memory");
	return 1;
}

static int fail_negotiation(struct engine *e, hvd_status_t st)
{
	char msg[1024];
	/* an elastic job goes on without the rank that failed: a warning
	 * that says so, not an error, on each rank that is left */
	int recover = e->elastic && hvd_status_peers_broken(st);

	snprintf(msg, sizeof(msg), "hvd: the engine's negotiation failed: %s",
		 hvd_last_error());
	if (recover)
		hvd_log(HVD_LOG_WARNING,
			"%s (HOROVOD_ELASTIC=1: the pending operations fail "
			"with this, and the ranks that are left re-form the "
			"world)",
			msg);
	else
		hvd_log(HVD_LOG_ERROR, "%s", msg);
	pending_fail_all(e, st, msg);
	return 1;
}

/* Rank 0, every HOROVOD_STALL_CHECK_TIME_SECONDS: the stall report, and
 * a shutdown on the next slow path when something waited too long. */
static void stall_inspect(struct engine *e, double now)
{
	if (e->rank != 0 || e->stall_disable ||
	    now - e->last_stall_check < e->stall_warn)
		return;
	e->last_stall_check = now;
	if (stall_check(&e->coord, now, e->stall_warn, e->stall_shutdown,
			e->stall_message, sizeof(e->stall_message)))
		e->stall_shutdown_pending = 1;
}

/* Steps 1 and 2a: drain and classify, then this rank's vector. */
static int build_vector(struct engine *e, struct cycle *c)
{
	int uncached = 0;

	c->nbits = e->cache.nbits;
	c->inv = calloc((size_t)c->nbits + 1, 1);
	c->v = malloc((size_t)S_NSTATUS + 2 * (size_t)c->nbits);
	if (!c->inv || !c->v)
		return fail_oom(e);
	c->any_invalid = classify(e, c->inv, c->now);
	stall_inspect(e, c->now);
	for (int i = 0; i < e->npending; i++)
		if (e->pending[i]->state == OS_SEND)
			uncached = 1;
	c->v[S_SHUTDOWN] = !c->stop_requested;
	c->v[S_UNCACHED] = !(uncached || e->stall_shutdown_pending);
	c->v[S_INVALID] = !c->any_invalid;
	c->v[S_AUTOTUNE] = !(e->rank == 0 && e->at_sync);
	for (int b = 0; b < c->nbits; b++) {
		struct rc_entry *ce = rc_entry_at(&e->cache, b);
		int real = ce && ce->pending && !c->inv[b];
		int vacuous =
		    !ce || e->joined ||
		    !pset_is_member(&e->psets, ce->resp.p.pset, e->rank);

		c->v[S_NSTATUS + b] = real || vacuous;
		c->v[S_NSTATUS + c->nbits + b] = !real;
	}
	return 0;
}

/* Rank 0 chose new autotune values: every rank switches at this cycle. */
static hvd_status_t autotune_switch(struct engine *e)
{
	double kn[2] = {(double)e->at.fusion, e->at.cycle_ms};

	HVD_CHECK(coll_broadcast(e->comm, kn, 2, HVD_FLOAT64, 0));
	e->fusion_threshold = (size_t)kn[0];
	e->cycle_ms = kn[1];
	e->at_sync = 0;
	return HVD_OK;
}

/* Some rank has invalid bits: the OR of them is erased everywhere, and
 * their ops go through the coordinator. */
static hvd_status_t erase_invalid(struct engine *e, struct cycle *c)
{
	for (int b = 0; b < c->nbits; b++)
		c->inv[b] = !c->inv[b];
	if (e->size > 1)
		HVD_CHECK(coll_allreduce(e->comm, c->inv, c->inv,
					 (size_t)c->nbits, HVD_UINT8, HVD_MIN));
	for (int b = 0; b < c->nbits; b++) {
		struct rc_entry *ce;

		if (c->inv[b])
			continue;
		ce = rc_entry_at(&e->cache, b);
		if (ce && ce->pending)
			pending_uncache(e, ce->pending);
		rc_erase(&e->cache, b);
	}
	c->v[S_UNCACHED] = 0;
	return HVD_OK;
}

/* Whether the negotiated vector (this rank's own, alone) has nothing on
 * any rank, and since when (engine_start.c thins out the cycles of a job
 * that stays so). */
static void note_quiet(struct engine *e, const struct cycle *c)
{
	int was = e->quiet;

	e->quiet = c->v[S_UNCACHED] && c->v[S_INVALID] && c->v[S_AUTOTUNE];
	for (int b = 0; e->quiet && b < c->nbits; b++)
		if (someone_has(c, b))
			e->quiet = 0;
	if (e->quiet && !was)
		e->quiet_since = c->now;
}

/* Step 2b: the vector's MIN over all ranks, and what its status bytes
 * ask for. */
static int exchange_vector(struct engine *e, struct cycle *c)
{
	hvd_status_t st;

	if (e->size > 1) {
		/* Nothing of ours waits on this one, and the last one found
		 * nothing on any rank: block while the peers' vectors come
		 * (net/transport.c, wait_idle).  Not after a cycle that
		 * found something: where ranks of a process set without
		 * this one keep working, their negotiation waits on ours in
		 * recursive doubling's later rounds. */
		transport_set_patient(e->quiet && engine_nothing_waits(e));
		st = coll_allreduce(e->comm, c->v, c->v,
				    (size_t)S_NSTATUS + 2 * (size_t)c->nbits,
				    HVD_UINT8, HVD_MIN);
		transport_set_patient(0);
		if (st != HVD_OK)
			return fail_negotiation(e, st);
	}
	note_quiet(e, c);
	if (!c->v[S_SHUTDOWN]) {
		pending_fail_all(e, HVD_ERR_SHUTDOWN,
				 "hvd: the engine shut down (a rank called "
				 "hvd_finalize) before this operation ran on "
				 "every rank");
		return 1;
	}
	if (!c->v[S_AUTOTUNE] && (st = autotune_switch(e)) != HVD_OK)
		return fail_negotiation(e, st);
	if (!c->v[S_INVALID] && (st = erase_invalid(e, c)) != HVD_OK)
		return fail_negotiation(e, st);
	return 0;
}

/* The bits every rank agreed on, in bit order. */
static int collect_hits(struct engine *e, struct cycle *c)
{
	c->items = malloc(((size_t)c->nbits + 1) * sizeof(*c->items));
	if (!c->items)
		return fail_oom(e);
	for (int b = 0; b < c->nbits; b++) {
		struct rc_entry *ce = rc_entry_at(&e->cache, b);
		struct eng_resp *r;

		if (!ce || !all_ready(c, b) || !someone_has(c, b))
			continue;
		r = resp_list_push(&c->l);
		if (!r || eng_resp_copy(r, &ce->resp) != HVD_OK) {
			if (r)
				c->l.n--;
			return fail_oom(e);
		}
		c->items[c->l.n - 1].bit = b;
		c->items[c->l.n - 1].order = c->l.n - 1;
	}
	return 0;
}

/* Step 3 when some rank has uncached work: the coordinator's new
 * responses, after the hits. */
static int collect_new(struct engine *e, struct cycle *c)
{
	int first = c->l.n;
	struct cycle_item *ni;
	hvd_status_t st;

	if (c->v[S_UNCACHED])
		return 0;
	st = slow_path(e, &c->l, c->now);
	if (st != HVD_OK)
		return fail_negotiation(e, st);
	ni = realloc(c->items, ((size_t)c->l.n + 1) * sizeof(*ni));
	if (!ni)
		return fail_oom(e);
	c->items = ni;
	for (int i = first; i < c->l.n; i++) {
		c->items[i].bit = -1;
		c->items[i].order = i;
	}
	if (e->rank == 0)
		e->stall_shutdown_pending = 0;
	return 0;
}

/* Hot polling: while some rank has a cached op waiting for the others
 * (the OR byte says someone has it, the AND byte says not everyone), the
 * others usually submit it within microseconds (a backward pass), so the
 * next cycle starts at once instead of after HOROVOD_CYCLE_TIME - for at
 * most one cycle time (2 ms at most) without progress, then the normal
 * pace resumes.  Every rank sees the same vector, so all of them poll
 * together and meet in the next collective. */
static void poll_hot(struct engine *e, const struct cycle *c)
{
	int partial = 0;

	for (int b = 0; b < c->nbits && !partial; b++)
		partial = someone_has(c, b) && !all_ready(c, b);
	if (!partial)
		e->hot_since = c->now;
	e->hot = partial && c->now - e->hot_since <
				(e->cycle_ms < 2 ? e->cycle_ms : 2) / 1e3;
}

/* Step 4 (execute.c), with the waiters' wake-ups gathered when there is
 * one CPU per rank: no waiter could run while this thread executes. */
static int execute_responses(struct engine *e, struct cycle *c)
{
	int stop;

	poll_hot(e, c);
	e->worked = c->l.n > 0;
	engine_wake_defer(e->max_spinners == 0);
	stop = cycle_execute(e, &c->l, c->items);
	engine_wake_flush();
	if (!stop && e->rank == 0)
		timeline_flush(&e->tl);
	return stop;
}

int cycle_run(struct engine *e)
{
	struct cycle c = {0};
	int stop;

	c.now = hvd_now();
	apply_commands(e, &c.stop_requested);
	e->cycles++;
	if (e->rank == 0)
		timeline_mark_cycle(&e->tl);
	stop = build_vector(e, &c);
	if (!stop)
		stop = exchange_vector(e, &c);
	if (!stop)
		stop = collect_hits(e, &c);
	if (!stop)
		stop = collect_new(e, &c);
	if (!stop)
		stop = execute_responses(e, &c);
	resp_list_free(&c.l);
	free(c.items);
	free(c.v);
	free(c.inv);
	return stop;
}

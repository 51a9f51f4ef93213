/*
 * pending.c - this rank's pending ops: the ops the engine thread has
 * drained from the submission queue and not yet completed, in an array
 * (walked every cycle) and a name map (the coordinator's responses name
 * their op).  Each of the cycle's steps completes, fails or reroutes ops
 * through these calls: cycle.c drains into it and execute.c finishes out
 * of it, and neither has to call back into the other.
 *
 * An op waiting on a cache bit is also the bit's entry's `pending`; every
 * removal here clears that link, so the cache never points at a completed
 * handle.  Engine thread only.
 */
#include "config.h"

#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>

int pending_add(struct engine *e, struct hvd_handle *h)
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

void pending_finish(struct engine *e, struct hvd_handle *h, hvd_status_t st,
		    const char *msg)
{
	pending_remove(e, h);
	engine_complete(h, st, msg);
}

void pending_fail_all(struct engine *e, hvd_status_t st, const char *msg)
{
	struct hvd_handle *q;

	while (e->npending)
		pending_finish(e, e->pending[e->npending - 1], st, msg);
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

void pending_uncache(struct engine *e, struct hvd_handle *h)
{
	struct rc_entry *ce = rc_entry_at(&e->cache, h->bit);

	if (ce && ce->pending == h)
		ce->pending = NULL;
	h->state = OS_SEND;
	h->bit = -1;
}

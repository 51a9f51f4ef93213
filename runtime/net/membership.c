/*
 * membership.c - the elastic agreement over the current world's worker
 * (net/membership.h has the protocol; net/memb_core.c the messages and
 * decisions; net/memb_wire.c how they travel).
 *
 * Everything here runs on the caller's thread while no collective runs
 * (the engine is stopped): messages are probed for (ucp_tag_probe_nb)
 * and received with the size the probe reports, so a decision of any
 * size needs no buffer guessed in advance and no receive is left posted
 * when the worker goes.  Sends are copied into buffers that live until
 * the send completes; what is still in flight at the end is kept until
 * the old worker is gone (memb_release_sends, after the switch), since
 * UCX may read a send buffer until then.
 *
 * Liveness while waiting: the failed set (UCX endpoint errors, PMIx
 * events, notices from other ranks), the pids of ranks on this node, and
 * a HELLO sent every second to the ranks waited for on other nodes, whose
 * connection error marks a dead one (a killed process's socket is reset).
 *
 * Every tag is keyed with the job's key (net/auth.h) as the collectives'
 * are, on the wire and in every probe, so that a process outside the job
 * that reaches a worker cannot put a proposal, a decision or a removal
 * into an agreement without guessing 64 bits; a step that joins takes the
 * key from the rendezvous file before it sends its request.
 */
#include "config.h"

#include "net/membership.h"
#include "net/memb_wire.h"
#include "net/notice.h"
#include "net/peers.h"
#include "net/ucx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void memb_release_sends(void)
{
	memb_sends_release();
}

/* ------------------------------------------------------ the survivors */

struct agree {
	const struct memb_round *in;
	int n, me, coord;
	uint8_t *failed;
	struct memb_peer **props; /* [n]: proposals kept (owned), me: self */
	struct net_group all;     /* every rank of the current world      */
	struct memb_buf buf;
	double deadline; /* of the round: the coordinator's wait for all */
	int decided;
	struct memb_decide *out;
	int *index;
	char removed[MEMB_REASON_MAX];
};

static void mark(struct agree *a, int r, const char *why)
{
	if (r < 0 || r >= a->n || r == a->me || memb_bit(a->failed, r))
		return;
	memb_set_bit(a->failed, r);
	peers_mark_failed(r, why, 0);
	hvd_log(HVD_LOG_INFO, "elastic: rank %d is out: %s", r, why);
}

/* What the transport's detectors know, into the failed set. */
static void refresh(struct agree *a)
{
	peers_check_local_pids(&a->all);
	notice_poll();
	for (int r = 0; r < a->n; r++)
		if (r != a->me && peers_failed(r))
			mark(a, r, transport_fail_reason(r));
}

static void take_proposals(struct agree *a)
{
	uint64_t tag = memb_tag(MEMB_CTX, a->in->epoch, MEMB_PROPOSE, 0);
	size_t len;
	uint64_t stag;
	void *msg;
	int got;

	while ((got = memb_take(tag, MASK_EXACT, &msg, &len, &stag)) != 0) {
		struct memb_propose p;
		char why[96];

		if (got < 0)
			continue;
		if (memb_decode_propose(msg, len, &p) != HVD_OK ||
		    p.epoch != a->in->epoch || p.nranks != a->n ||
		    p.sender == a->me || p.self.old_rank != p.sender) {
			hvd_log(HVD_LOG_WARNING,
				"elastic: dropped a malformed proposal (%s)",
				hvd_last_error());
			free(msg);
			continue;
		}
		free(msg);
		snprintf(why, sizeof(why), "rank %d reports it gone",
			 (int)p.sender);
		for (int r = 0; r < a->n; r++)
			if (memb_bit(p.failed, r))
				mark(a, r, why);
		if (a->props[p.sender])
			memb_peer_free(a->props[p.sender]);
		else
			a->props[p.sender] = malloc(sizeof(struct memb_peer));
		if (a->props[p.sender]) {
			*a->props[p.sender] = p.self; /* takes the address */
			p.self.addr = NULL;
		}
		memb_propose_free(&p);
	}
}

/* A decision for the next epoch that names this rank ends the wait. */
static void take_decisions(struct agree *a)
{
	uint64_t tag = memb_tag(MEMB_CTX, a->in->epoch, MEMB_DECIDE, 0);
	size_t len;
	uint64_t stag;
	void *msg;
	int got;

	while (!a->decided &&
	       (got = memb_take(tag, MASK_EXACT, &msg, &len, &stag)) != 0) {
		struct memb_decide d;
		int idx = -1;

		if (got < 0)
			continue;
		if (memb_decode_decide(msg, len, &d) != HVD_OK ||
		    d.epoch != a->in->epoch + 1) {
			free(msg);
			continue;
		}
		free(msg);
		for (int i = 0; i < d.n && idx < 0; i++)
			if (d.peers[i].old_rank == a->me &&
			    d.peers[i].pid == a->in->self.pid)
				idx = i;
		if (idx < 0) {
			snprintf(a->removed, sizeof(a->removed),
				 "the next world (epoch %u) was decided by "
				 "rank %d without this rank",
				 (unsigned)d.epoch, (int)d.sender);
			memb_decide_free(&d);
			continue;
		}
		*a->out = d;
		*a->index = idx;
		a->decided = 1;
	}
	tag = memb_tag(MEMB_CTX, a->in->epoch, MEMB_REMOVED, 0);
	while (!a->decided &&
	       (got = memb_take(tag, MASK_EXACT, &msg, &len, &stag)) != 0) {
		char why[MEMB_REASON_MAX];

		if (got < 0)
			continue;
		if (memb_decode_removed(msg, len, why, sizeof(why)) == HVD_OK)
			snprintf(a->removed, sizeof(a->removed), "%s", why);
		free(msg);
	}
}

static void send_to_rank(struct agree *a, int r, int type)
{
	hvd_status_t st = HVD_OK;
	ucp_ep_h ep;

	if (r == a->me || peers_failed(r))
		return;
	ep = ucx_ep(r, &st);
	memb_send(ep, memb_tag(MEMB_CTX, a->in->epoch, type, a->me), &a->buf);
}

static hvd_status_t propose(struct agree *a)
{
	struct memb_propose p = {
	    .epoch = a->in->epoch,
	    .sender = a->me,
	    .nranks = a->n,
	    .failed = a->failed,
	    .self = a->in->self,
	};

	p.self.old_rank = a->me;
	HVD_CHECK(memb_encode_propose(&a->buf, &p));
	send_to_rank(a, a->coord, MEMB_PROPOSE);
	hvd_log(HVD_LOG_DEBUG, "elastic: proposal sent to rank %d", a->coord);
	return HVD_OK;
}

/* Liveness probes to the ranks on other nodes this rank waits for (on
 * its node the pids say it): a dead one's reset connection fails the
 * send, and the endpoint's error handler marks it. */
static void hello(struct agree *a)
{
	if (memb_encode_hello(&a->buf, a->in->epoch, a->me) != HVD_OK)
		return;
	for (int r = 0; r < a->n; r++) {
		int waited = a->coord == a->me ? !a->props[r] : r == a->coord;

		if (r != a->me && waited && !memb_bit(a->failed, r) &&
		    !peers_local(r))
			send_to_rank(a, r, MEMB_HELLO);
	}
	memb_reap_sends();
}

/* Newcomers of complete steps, in the order their requests came. */
static struct memb_join **joins;
static int njoins, capjoins;

static int pick_newcomers(struct memb_peer ***out)
{
	struct memb_peer **v = calloc((size_t)(njoins + 1), sizeof(*v));
	int k = 0;

	*out = v;
	if (!v)
		return 0;
	for (int i = 0; i < njoins; i++) {
		const struct memb_join *j = joins[i];
		int first = 1;

		/* Each step once, at its first request. */
		for (int p = 0; p < i && first; p++)
			first = strcmp(joins[p]->self.nspace,
				       j->self.nspace) != 0;
		if (!first ||
		    !memb_step_complete((const struct memb_join *const *)joins,
					njoins, j->self.nspace, j->step_size))
			continue;
		for (int want = 0; want < j->step_size; want++)
			for (int q = 0; q < njoins; q++)
				if (joins[q]->step_rank == want &&
				    strcmp(joins[q]->self.nspace,
					   j->self.nspace) == 0) {
					v[k++] = &joins[q]->self;
					break;
				}
	}
	return k;
}

long memb_local_pid(const char *peer_node, long pid, const char *my_node)
{
	if (pid <= 0 || !peer_node[0] || strcmp(peer_node, my_node) != 0)
		return 0;
	return pid;
}

static struct memb_join *join_of(const struct memb_peer *p)
{
	for (int i = 0; i < njoins; i++)
		if (&joins[i]->self == p)
			return joins[i];
	return NULL;
}

static void drop_join(struct memb_join *j)
{
	for (int i = 0; i < njoins; i++) {
		if (joins[i] != j)
			continue;
		memb_join_free(j);
		free(j);
		memmove(&joins[i], &joins[i + 1],
			(size_t)(njoins - i - 1) * sizeof(*joins));
		njoins--;
		return;
	}
}

/* Who each flush of the decision goes to: a member (rank >= 0) or a
 * newcomer's endpoint (x). */
struct decide_flush {
	struct agree *a;
	struct {
		int rank;
		struct memb_ep *x;
	} *to;
	double next_refresh;
};

static int decision_gone(void *arg, int i)
{
	struct decide_flush *f = arg;
	double now;

	if (f->to[i].rank < 0)
		return memb_ep_gone(f->to[i].x, 0);
	now = hvd_now();
	if (now >= f->next_refresh) {
		refresh(f->a);
		f->next_refresh = now + 0.05;
	}
	return memb_bit(f->a->failed, f->to[i].rank);
}

/* The coordinator: the decision, sent to every member and to the ranks
 * that came too late. */
static hvd_status_t decide(struct agree *a, const uint8_t *late)
{
	struct memb_peer **newc = NULL, **order = NULL;
	struct memb_decide d;
	struct memb_ep *xeps = NULL;
	ucp_ep_h *flush = NULL;
	struct decide_flush fl = {.a = a};
	int nnew = 0, n = 0, nflush = 0, left;
	double t_flush, wait;
	hvd_status_t st;

	if (a->in->admit)
		nnew = pick_newcomers(&newc);
	st = memb_order(a->n, a->failed, a->props, newc, nnew, &order, &n);
	if (st != HVD_OK)
		goto out;
	memset(&d, 0, sizeof(d));
	d.epoch = a->in->epoch + 1;
	d.sender = a->me;
	d.min_size = a->in->min_size;
	d.status = n < a->in->min_size ? HVD_ERR_TOO_FEW_RANKS : HVD_OK;
	{
		/* The world's name: the first world's, and the epoch. */
		const char *base = a->in->world, *dot = strrchr(base, '@');
		int blen = dot ? (int)(dot - base) : (int)strlen(base);

		if (blen > 200)
			blen = 200;
		snprintf(d.world, sizeof(d.world), "%.*s@%u", blen, base,
			 (unsigned)d.epoch);
	}
	d.n = n;
	d.peers = calloc((size_t)(n ? n : 1), sizeof(*d.peers));
	xeps = calloc((size_t)(nnew + 1), sizeof(*xeps));
	flush = calloc((size_t)(a->n + nnew + 1), sizeof(*flush));
	fl.to = calloc((size_t)(a->n + nnew + 1), sizeof(*fl.to));
	if (!d.peers || !xeps || !flush || !fl.to) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		d.peers[i] = *order[i]; /* shallow: for encoding */
	st = memb_encode_decide(&a->buf, &d);
	if (st != HVD_OK)
		goto out;
	for (int i = 0; i < n; i++) {
		int r = order[i]->old_rank;
		hvd_status_t est = HVD_OK;

		if (r == a->me)
			continue;
		if (r >= 0) {
			fl.to[nflush].rank = r;
			flush[nflush++] = ucx_ep(r, &est);
			send_to_rank(a, r, MEMB_DECIDE);
		} else {
			struct memb_join *j = join_of(order[i]);
			struct memb_ep *x = &xeps[i - (n - nnew)];
			/* On this node the decision goes over shared
			 * memory (memb_ep_open). */
			long pid = j ? memb_local_pid(j->self.node_key,
						      j->self.pid,
						      a->in->self.node_key)
				     : 0;

			if (j && memb_ep_open(x, j->reply_addr, pid) == HVD_OK) {
				memb_send(x->ep,
					  memb_tag(MEMB_CTX, a->in->epoch,
						   MEMB_DECIDE, a->me),
					  &a->buf);
				fl.to[nflush].rank = -1;
				fl.to[nflush].x = x;
				flush[nflush++] = x->ep;
			}
		}
	}
	/* The ranks that came too late learn it at once if they listen. */
	if (late) {
		char why[160];

		snprintf(why, sizeof(why),
			 "it did not reach the re-forming of epoch %u within "
			 "%.0f s (HOROVOD_ELASTIC_TIMEOUT); the others went on "
			 "without it",
			 (unsigned)a->in->epoch, a->in->timeout);
		if (memb_encode_removed(&a->buf, a->in->epoch, a->me, why) ==
		    HVD_OK)
			for (int r = 0; r < a->n; r++)
				if (memb_bit(late, r)) {
					hvd_status_t est = HVD_OK;

					memb_send(ucx_ep(r, &est),
						  memb_tag(MEMB_CTX,
							   a->in->epoch,
							   MEMB_REMOVED,
							   a->me),
						  &a->buf);
				}
	}
	/* Every member and newcomer must have it before this worker goes
	 * (the switch cancels what it still holds): wait for the slow ones
	 * up to the round's bound, not for those known gone. */
	t_flush = hvd_now();
	wait = a->deadline - t_flush;
	if (wait < 5.0)
		wait = 5.0;
	left = memb_flush(flush, nflush, wait, decision_gone, &fl);
	if (left)
		hvd_log(HVD_LOG_WARNING,
			"elastic: the decision on epoch %u may not have "
			"reached %d member%s (its sends did not complete "
			"within HOROVOD_ELASTIC_TIMEOUT)",
			(unsigned)d.epoch, left, left == 1 ? "" : "s");
	t_flush = hvd_now() - t_flush;
	hvd_log(t_flush > 1.0 ? HVD_LOG_INFO : HVD_LOG_DEBUG,
		"elastic: the decision on epoch %u left in %.3f s",
		(unsigned)d.epoch, t_flush);
	for (int i = 0; i < nnew; i++)
		memb_ep_close(&xeps[i]);
	/* The caller's copy: deep, so that it outlives the proposals. */
	for (int i = 0; i < n; i++) {
		if (order[i]->old_rank == a->me &&
		    order[i]->pid == a->in->self.pid)
			*a->index = i;
		st = memb_peer_copy(&d.peers[i], order[i]);
		if (st != HVD_OK) {
			d.n = i;
			memb_decide_free(&d);
			goto out;
		}
	}
	*a->out = d;
	d.peers = NULL;
	a->decided = 1;
	/* The admitted requests are done with. */
	for (int i = 0; i < nnew; i++)
		drop_join(join_of(newc[i]));
	hvd_log(HVD_LOG_INFO,
		"elastic: epoch %u decided: %d ranks (%d new), status %s",
		(unsigned)a->out->epoch, n, nnew,
		hvd_status_name((hvd_status_t)a->out->status));
out:
	free(d.peers);
	free(xeps);
	free(flush);
	free(fl.to);
	free(order);
	free(newc);
	return st;
}

hvd_status_t memb_agree(const struct memb_round *in, struct memb_decide *out,
			int *index)
{
	struct agree a;
	struct memb_peer self;
	double start = hvd_now(), deadline = start + in->timeout;
	double next_check = 0, next_hello = start + 1.0;
	int sent_to = -1;
	hvd_status_t st = HVD_OK;

	memset(&a, 0, sizeof(a));
	a.in = in;
	a.deadline = deadline;
	a.n = peers_count();
	a.me = peers_self();
	a.out = out;
	a.index = index;
	a.failed = calloc((size_t)(a.n + 7) / 8 + 1, 1);
	a.props = calloc((size_t)a.n, sizeof(*a.props));
	a.all.world_ranks = malloc((size_t)a.n * sizeof(int));
	if (!a.failed || !a.props || !a.all.world_ranks) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	for (int r = 0; r < a.n; r++)
		a.all.world_ranks[r] = r;
	a.all.size = a.n;
	a.all.rank = a.me;
	self = in->self; /* shallow: the caller owns the address */
	self.old_rank = a.me;
	a.props[a.me] = &self;

	while (!a.decided) {
		double now;
		int busy = ucp_worker_progress(ucx_worker);

		take_proposals(&a);
		take_decisions(&a);
		if (a.decided)
			break;
		if (a.removed[0]) {
			st = hvd_error(HVD_ERR_REMOVED,
				       "hvd: elastic: this rank (%d) was left "
				       "out of the next world: %s",
				       a.me, a.removed);
			goto out;
		}
		now = hvd_now();
		if (now >= next_check) {
			refresh(&a);
			next_check = now + 0.05;
		}
		a.coord = memb_coordinator(a.failed, a.n);
		if (a.coord == a.me) {
			uint8_t *late = NULL;
			int pending = 0;

			for (int r = 0; r < a.n; r++)
				pending += !memb_bit(a.failed, r) && !a.props[r];
			if (pending && now > deadline) {
				late = calloc((size_t)(a.n + 7) / 8 + 1, 1);
				for (int r = 0; late && r < a.n; r++)
					if (!memb_bit(a.failed, r) &&
					    !a.props[r]) {
						memb_set_bit(late, r);
						mark(&a, r,
						     "it did not reach the "
						     "re-forming within "
						     "HOROVOD_ELASTIC_TIMEOUT");
					}
				pending = 0;
			}
			if (!pending) {
				st = decide(&a, late);
				free(late);
				if (st != HVD_OK)
					goto out;
				break;
			}
		} else {
			if (sent_to != a.coord) {
				st = propose(&a);
				if (st != HVD_OK)
					goto out;
				sent_to = a.coord;
			}
			/* The coordinator waits up to the bound for the
			 * others; a member waits that and a margin. */
			if (now > deadline + 10.0) {
				st = hvd_error(HVD_ERR_TIMEOUT,
					       "hvd: elastic: no decision on the "
					       "next world from rank %d within "
					       "%.0f s (HOROVOD_ELASTIC_TIMEOUT)",
					       a.coord, in->timeout + 10.0);
				goto out;
			}
		}
		if (now >= next_hello) {
			hello(&a);
			next_hello = now + 1.0;
		}
		if (!busy)
			memb_nap();
	}
	hvd_log(HVD_LOG_DEBUG, "elastic: agreement took %.3f s",
		hvd_now() - start);
out:
	for (int r = 0; a.props && r < a.n; r++)
		if (r != a.me && a.props[r]) {
			memb_peer_free(a.props[r]);
			free(a.props[r]);
		}
	free(a.props);
	free(a.failed);
	free(a.all.world_ranks);
	memb_buf_free(&a.buf);
	memb_reap_sends();
	return st;
}

/* ------------------------------------------------------- the newcomers */

hvd_status_t memb_join(const struct memb_join *req, uint32_t epoch,
		       const void *rank0_addr, long rank0_pid, double wait_s,
		       struct memb_decide *out, int *index)
{
	struct memb_ep x;
	struct memb_buf b = {0};
	double deadline = hvd_now() + wait_s;
	double next_probe = hvd_now() + 1.0;
	hvd_status_t st;
	int failed, unsent;

	HVD_CHECK(memb_encode_join(&b, epoch, req));
	st = memb_ep_open(&x, rank0_addr, rank0_pid);
	if (st != HVD_OK) {
		memb_buf_free(&b);
		return st;
	}
	memb_send(x.ep, memb_tag(JOIN_CTX, 0, MEMB_JOIN, 0), &b);
	/* The request must be out before the wait for the answer starts:
	 * closing the endpoint at the end cancels a send still queued, so
	 * a wire-up slower than a fixed bound would lose every request. */
	unsent = memb_flush(&x.ep, 1, wait_s, memb_ep_gone, &x) > 0;
	deadline = hvd_now() + wait_s;
	st = HVD_ERR_TIMEOUT;
	while (hvd_now() < deadline) {
		size_t len;
		uint64_t stag;
		void *msg;
		int got;

		/* A probe a second, as the survivors send theirs: a rank 0
		 * that is gone fails the send, and x.failed says so, where
		 * an idle endpoint might never learn it. */
		if (hvd_now() >= next_probe) {
			struct memb_buf h = {0};

			if (memb_encode_hello(&h, 0, -1) == HVD_OK)
				memb_send(x.ep,
					  memb_tag(MEMB_CTX, 0, MEMB_HELLO, 0),
					  &h);
			memb_buf_free(&h);
			next_probe = hvd_now() + 1.0;
		}
		/* The answer first: rank 0 decides, then its old worker goes
		 * and with it the connection, so a decision that came is
		 * taken before the failure that follows it counts. */
		failed = memb_ep_gone(&x, 0);
		got = memb_take(memb_tag(MEMB_CTX, 0, MEMB_DECIDE, 0), MASK_TYPE,
			       &msg, &len, &stag);
		if (got > 0) {
			struct memb_decide d;
			int idx = -1;

			if (memb_decode_decide(msg, len, &d) == HVD_OK) {
				for (int i = 0; i < d.n && idx < 0; i++)
					if (d.peers[i].old_rank == -1 &&
					    d.peers[i].pid == req->self.pid &&
					    d.peers[i].pmix_rank ==
						req->self.pmix_rank &&
					    strcmp(d.peers[i].nspace,
						   req->self.nspace) == 0)
						idx = i;
				if (idx >= 0) {
					*out = d;
					*index = idx;
					free(msg);
					st = HVD_OK;
					break;
				}
				memb_decide_free(&d);
			}
			free(msg);
			continue;
		}
		got = memb_take(memb_tag(MEMB_CTX, 0, MEMB_REMOVED, 0),
			       MASK_TYPE, &msg, &len, &stag);
		if (got > 0) {
			char why[MEMB_REASON_MAX] = "";

			memb_decode_removed(msg, len, why, sizeof(why));
			free(msg);
			st = hvd_error(HVD_ERR_REMOVED,
				       "hvd: elastic: the running world refused "
				       "this process: %s",
				       why);
			break;
		}
		if (failed) {
			st = x.pid ? hvd_error(HVD_ERR_PEER_FAILED,
					       "hvd: elastic: rank 0 of the "
					       "running world is gone (pid %d "
					       "on this node)",
					       x.pid)
				   : hvd_error(HVD_ERR_PEER_FAILED,
					       "hvd: elastic: cannot reach rank "
					       "0 of the running world (its "
					       "connection failed)");
			break;
		}
		if (!ucp_worker_progress(ucx_worker))
			memb_nap();
	}
	/* UCX 1.13 does not fail a TCP endpoint whose address it cannot
	 * connect to (an interface of rank 0's that is gone): it tries
	 * again and again, and the request never leaves. */
	if (st == HVD_ERR_TIMEOUT && unsent)
		hvd_error(HVD_ERR_TIMEOUT,
			  "hvd: elastic: the join request did not reach rank 0 "
			  "(no connection to its address within %.0f s)",
			  wait_s);
	else if (st == HVD_ERR_TIMEOUT)
		hvd_error(HVD_ERR_TIMEOUT,
			  "hvd: elastic: rank 0 did not answer the join request "
			  "within %.0f s",
			  wait_s);
	memb_ep_close(&x);
	memb_buf_free(&b);
	memb_reap_sends();
	return st;
}

int memb_reachable(const void *addr, long pid, double limit_s)
{
	struct memb_ep x;
	int ok;

	if (memb_ep_open(&x, addr, pid) != HVD_OK)
		return 0;
	/* A flush completes once the connection is wired up, or fails (the
	 * error handler) when nobody listens at the address any more; on
	 * this node, the pid says. */
	memb_flush(&x.ep, 1, limit_s, memb_ep_gone, &x);
	ok = !memb_ep_gone(&x, 0);
	memb_ep_close(&x);
	return ok;
}

/* ------------------------------------------------ rank 0's join desk */

static int same_token(const uint8_t *a, const uint8_t *b)
{
	unsigned d = 0;

	for (int i = 0; i < MEMB_TOKEN_BYTES; i++)
		d |= (unsigned)(a[i] ^ b[i]);
	return d == 0;
}

static void keep_join(struct memb_join *j)
{
	for (int i = 0; i < njoins; i++)
		if (joins[i]->step_rank == j->step_rank &&
		    strcmp(joins[i]->self.nspace, j->self.nspace) == 0) {
			memb_join_free(joins[i]);
			*joins[i] = *j; /* a newer request replaces it */
			free(j);
			return;
		}
	if (njoins == capjoins) {
		int cap = capjoins ? capjoins * 2 : 8;
		struct memb_join **v = realloc(joins, (size_t)cap * sizeof(*v));

		if (!v) {
			memb_join_free(j);
			free(j);
			return;
		}
		joins = v;
		capjoins = cap;
	}
	joins[njoins++] = j;
}

int memb_poll_joins(const uint8_t token[MEMB_TOKEN_BYTES], const char *jobid)
{
	size_t len;
	uint64_t stag;
	void *msg;
	int got, complete = 0;

	if (!ucx_worker)
		return 0;
	ucp_worker_progress(ucx_worker);
	while ((got = memb_take(memb_tag(JOIN_CTX, 0, MEMB_JOIN, 0),
			       (uint64_t)0xffffu << 48, &msg, &len, &stag)) !=
	       0) {
		struct memb_join *j;
		uint32_t ep;

		if (got < 0)
			continue;
		j = calloc(1, sizeof(*j));
		if (!j || memb_decode_join(msg, len, &ep, j) != HVD_OK) {
			hvd_log(HVD_LOG_WARNING,
				"elastic: refused a malformed join request "
				"(%zu bytes)",
				len);
			free(j);
			free(msg);
			continue;
		}
		free(msg);
		if (!same_token(j->token, token) || strcmp(j->jobid, jobid)) {
			hvd_log(HVD_LOG_WARNING,
				"elastic: refused a join request from pid %d "
				"(namespace %s, job %s): its %s does not "
				"match",
				(int)j->self.pid, j->self.nspace, j->jobid,
				strcmp(j->jobid, jobid) ? "job id" : "token");
			memb_join_free(j);
			free(j);
			continue;
		}
		hvd_log(HVD_LOG_INFO,
			"elastic: join request from rank %d of %d of step %s "
			"(pid %d)",
			(int)j->step_rank, (int)j->step_size, j->self.nspace,
			(int)j->self.pid);
		keep_join(j);
	}
	for (int i = 0; i < njoins; i++) {
		int first = 1;

		for (int p = 0; p < i && first; p++)
			first = strcmp(joins[p]->self.nspace,
				       joins[i]->self.nspace) != 0;
		if (first &&
		    memb_step_complete((const struct memb_join *const *)joins,
				       njoins, joins[i]->self.nspace,
				       joins[i]->step_size))
			complete++;
	}
	return complete;
}

void memb_joins_clear(void)
{
	for (int i = 0; i < njoins; i++) {
		memb_join_free(joins[i]);
		free(joins[i]);
	}
	free(joins);
	joins = NULL;
	njoins = capjoins = 0;
}

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
 * HELLOs, every second, between the ranks on different nodes that wait
 * on each other: the coordinator and every member, and a rank and any
 * rank it suspects.  A rank answers every hello it gets with one of its
 * own.  A killed process's reset socket fails the send at once; a rank
 * cut off (a link, a switch, a hung kernel: no reset ever comes, and UCX
 * may never fail a connection it has unsent data on) is found by silence:
 * a rank this one waits on is out when nothing came from it for
 * HOROVOD_PEER_TIMEOUT, and not before that and 5 s after the wait for
 * it began.  The grace is for a rank computing until its next call: one
 * still inside a collective is not late, since the collective timeout
 * that began the re-forming was told to every rank (a failure notice),
 * and every collective fails on it.
 *
 * What a rank knows of another comes in three strengths (net/peers.h):
 * dead (its pid, PMIx, a reset, a refused probe: its host says so),
 * silent (a timed-out connection, the silence above) and suspected (a
 * collective got no progress from it: it may itself wait on a third; or
 * another rank's notice: that rank may only have lost its own way to
 * it).  A suspicion is not a failure here: the rank probes the suspect's
 * host and sends it hellos; a refusal makes it dead, an answer clears it,
 * no answer turns it into silence.  Proposals
 * carry the three sets, and the coordinator decides only when no member
 * still suspects another.  A member that reports another silent while
 * the coordinator hears both is in a quarrel: the coordinator keeps the
 * lower rank of the two and tells the other it is out.
 *
 * A partition must not leave two worlds training apart: the coordinator
 * goes on only with a majority of the ranks not known dead (exactly half
 * when it has the lowest of them, net/memb_core.h); otherwise it tells
 * its side to stop (HVD_ERR_REMOVED), and so does every side without one.
 *
 * Every tag is keyed with the job's key (net/auth.h) as the collectives'
 * are, on the wire and in every probe, so that a process outside the job
 * that reaches a worker cannot put a proposal, a decision or a removal
 * into an agreement without guessing 64 bits; a step that joins takes the
 * key from the rendezvous file before it sends its request.
 */
#include "config.h"

#include "net/membership.h"
#include "net/lane.h"
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
	uint8_t *quiet;   /* of failed: only gone silent (not known dead)  */
	uint8_t *doubt;   /* suspected, not heard from yet: not failed     */
	uint8_t *greet;   /* hello to send back at the next round          */
	uint8_t *probe;   /* silent ranks whose process to look for         */
	int nprobe;
	uint8_t **pdoubt; /* [n] coordinator: each proposal's doubt set    */
	int *rival;       /* [n] coordinator: the rank a dropped one
			     quarrelled with (-1: none)                    */
	double *heard;    /* [n] when anything last came from it (0: never) */
	double *since;    /* [n] when this rank began to wait on it (0)     */
	double *sent;     /* [n] when the last hello to it left (0: never)  */
	int hello_now;    /* a new suspect or a hello to answer: at once    */
	double pt;        /* HOROVOD_PEER_TIMEOUT                           */
	int dirty;        /* the sets changed: propose again                */
	struct memb_peer **props; /* [n]: proposals kept (owned), me: self */
	struct net_group all;     /* every rank of the current world      */
	struct memb_buf buf;
	double deadline; /* of the round: the coordinator's wait for all */
	int decided;
	struct memb_decide *out;
	int *index;
	char removed[MEMB_REASON_MAX];
};

/* Ask lane_probe, at the next turn of the loop, whether r's process is
 * there. */
static void want_probe(struct agree *a, int r)
{
	memb_set_bit(a->probe, r);
	a->nprobe++;
}

/* r is out, as dead or as silent (quiet: it may be alive beyond a
 * partition); a silent one found dead later is counted dead. */
static void mark(struct agree *a, int r, const char *why,
		 enum peer_gone kind)
{
	if (r < 0 || r >= a->n || r == a->me)
		return;
	if (memb_bit(a->failed, r)) {
		if (kind == PEER_DEAD && memb_bit(a->quiet, r)) {
			memb_clear_bit(a->quiet, r);
			peers_mark(r, why, 0, PEER_DEAD);
			a->dirty = 1;
		}
		return;
	}
	memb_set_bit(a->failed, r);
	if (kind != PEER_DEAD)
		memb_set_bit(a->quiet, r);
	if (kind != PEER_DEAD && !peers_local(r))
		want_probe(a, r);
	memb_clear_bit(a->doubt, r);
	a->dirty = 1;
	peers_mark(r, why, 0, kind == PEER_DEAD ? PEER_DEAD : PEER_QUIET);
	hvd_log(HVD_LOG_INFO, "elastic: rank %d is out: %s", r, why);
}

/* Was r, on another node, heard from in this agreement?  Then it was
 * alive a moment ago: if its connection fails now it has more likely
 * moved on to a world decided without this rank (its old worker closed)
 * than died, and a failure of it counts as silent at most; the pids of
 * node-mates are certain. */
static int heard_here(const struct agree *a, int r)
{
	return a->heard[r] > 0 && !peers_local(r);
}

/* What the transport's detectors know, into the sets.  A rank on
 * another node heard from in this agreement stays in whatever a
 * connection or a suspicion says: the silence rule, and the
 * coordinator's view of the quarrel, decide.  Otherwise a suspicion of
 * a rank on another node becomes a doubt; on this node the pids tell,
 * and a node-mate that made no progress is out as before. */
static void refresh(struct agree *a)
{
	peers_check_local_pids(&a->all);
	notice_poll();
	for (int r = 0; r < a->n; r++) {
		enum peer_gone kind;

		if (r == a->me || !peers_failed(r) || memb_bit(a->failed, r) ||
		    heard_here(a, r))
			continue;
		kind = peers_gone_kind(r);
		if (kind != PEER_SUSPECT || peers_local(r)) {
			mark(a, r, transport_fail_reason(r),
			     kind == PEER_SUSPECT ? PEER_DEAD : kind);
		} else if (!memb_bit(a->doubt, r)) {
			memb_set_bit(a->doubt, r);
			want_probe(a, r);
			a->dirty = 1;
			a->hello_now = 1;
			hvd_log(HVD_LOG_DEBUG,
				"elastic: rank %d is suspected (%s); asking it",
				r, transport_fail_reason(r));
		}
	}
}

/* Something came from r: it is alive and reaches this rank. */
static void heard_from(struct agree *a, int r)
{
	if (r < 0 || r >= a->n || r == a->me)
		return;
	a->heard[r] = hvd_now();
	if (memb_bit(a->doubt, r)) {
		memb_clear_bit(a->doubt, r);
		a->dirty = 1;
		hvd_log(HVD_LOG_INFO,
			"elastic: rank %d answers: no longer suspected", r);
	}
}

/* Silent and suspected ranks: is their process there?  A host that
 * refuses a connection to a rank's lane says it is gone (a kill, a
 * crash), which UCX does not tell from a cut; a process that is there,
 * or no answer, leaves it as it was (net/lane.h, lane_probe). */
static void probe_silent(struct agree *a)
{
	int *ws = malloc((size_t)a->nprobe * sizeof(int));
	int *res = malloc((size_t)a->nprobe * sizeof(int));
	int k = 0;

	for (int r = 0; r < a->n && ws && res && k < a->nprobe; r++)
		if (memb_bit(a->probe, r))
			ws[k++] = r;
	memset(a->probe, 0, (size_t)(a->n + 7) / 8);
	a->nprobe = 0;
	if (ws && res)
		lane_probe(ws, k, 0.5, res);
	for (int i = 0; ws && res && i < k; i++) {
		char why[400];

		if (res[i] != LANE_PROBE_GONE) {
			hvd_log(HVD_LOG_DEBUG,
				"elastic: rank %d is silent or suspected, %s",
				ws[i],
				res[i] == LANE_PROBE_THERE
					? "and its process is there"
					: "and its host does not answer");
			continue;
		}
		snprintf(why, sizeof(why),
			 "%s; its host refuses connections to its TCP lane, so "
			 "its process is gone",
			 transport_fail_reason(ws[i]));
		mark(a, ws[i], why, PEER_DEAD);
	}
	free(ws);
	free(res);
}

/* Does this rank wait on r, over the network (the silence rule and the
 * hellos)?  The coordinator on every member, a member on the coordinator
 * and on those it suspects. */
static int waits_on(const struct agree *a, int r)
{
	if (r == a->me || memb_bit(a->failed, r) || peers_local(r))
		return 0;
	return a->coord == a->me || r == a->coord || memb_bit(a->doubt, r);
}

/* The silence rule (see the top of the file). */
static void silence(struct agree *a, double now)
{
	for (int r = 0; r < a->n; r++) {
		double last;

		if (!waits_on(a, r))
			continue;
		if (a->since[r] == 0)
			a->since[r] = now;
		last = a->since[r] + 5.0;
		if (a->heard[r] > last)
			last = a->heard[r];
		if (now - last > a->pt) {
			char why[200];

			snprintf(why, sizeof(why),
				 "nothing came from it for %.0f s while the "
				 "world re-formed (HOROVOD_PEER_TIMEOUT): cut "
				 "off from rank %d, or gone without its "
				 "connection failing",
				 now - (a->heard[r] ? a->heard[r] : a->since[r]),
				 a->me);
			mark(a, r, why, PEER_QUIET);
		}
	}
}

/* The next message of this agreement's epoch and type, from anyone: 1
 * with *msg (malloc'ed) and *len, 0 when none; those that failed to
 * arrive or to verify are skipped. */
static int next_msg(const struct agree *a, int type, void **msg, size_t *len)
{
	uint64_t tag = memb_tag(MEMB_CTX, a->in->epoch, type, 0), stag;
	int got;

	while ((got = memb_take(tag, MASK_EXACT, msg, len, &stag)) < 0)
		;
	return got;
}

static void take_hellos(struct agree *a)
{
	size_t len;
	void *msg;

	while (next_msg(a, MEMB_HELLO, &msg, &len)) {
		uint32_t epoch;
		int32_t from;

		if (memb_decode_hello(msg, len, &epoch, &from) == HVD_OK &&
		    epoch == a->in->epoch && from >= 0 && from < a->n &&
		    from != a->me) {
			heard_from(a, from);
			if (!memb_bit(a->failed, from)) {
				memb_set_bit(a->greet, from);
				a->hello_now = 1;
			}
		}
		free(msg);
	}
}

/* Why a rank that lost a quarrel with rank kept is out. */
static void rival_why(const struct agree *a, int kept, char *why, size_t len)
{
	snprintf(why, len,
		 "it and rank %d cannot reach each other, and rank %d, which "
		 "reaches both, keeps the lower of the two",
		 kept, a->me);
}

/* The coordinator keeps the lower of two ranks it hears that cannot
 * reach each other; the other is out, and told why at the decision. */
static void quarrel(struct agree *a, int reporter, int r)
{
	int loser = reporter > r ? reporter : r, kept = reporter + r - loser;
	char why[200];

	rival_why(a, kept, why, sizeof(why));
	mark(a, loser, why, PEER_DEAD);
	a->rival[loser] = kept;
}

static void take_proposals(struct agree *a)
{
	size_t len;
	void *msg;

	while (next_msg(a, MEMB_PROPOSE, &msg, &len)) {
		struct memb_propose p;
		char why[96];

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
		heard_from(a, p.sender);
		snprintf(why, sizeof(why), "rank %d reports it gone",
			 (int)p.sender);
		for (int r = 0; r < a->n; r++) {
			int silent = memb_bit(p.quiet, r) || heard_here(a, r);

			if (!memb_bit(p.failed, r) || r == a->me ||
			    memb_bit(a->failed, p.sender))
				continue;
			/* Silent to the sender, but heard here. */
			if (silent && !memb_bit(a->failed, r) &&
			    (a->props[r] || a->heard[r] > 0))
				quarrel(a, p.sender, r);
			else
				mark(a, r, why,
				     silent ? PEER_QUIET : PEER_DEAD);
		}
		/* Only a set that names someone: doubts_open, which runs at
		 * each turn of the coordinator's loop, skips the others. */
		free(a->pdoubt[p.sender]);
		a->pdoubt[p.sender] = NULL;
		if (memb_any(p.doubt, a->n)) {
			a->pdoubt[p.sender] = p.doubt; /* takes it */
			p.doubt = NULL;
		}
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
	size_t len;
	void *msg;

	while (!a->decided && next_msg(a, MEMB_DECIDE, &msg, &len)) {
		struct memb_decide d;
		int idx = -1;

		if (memb_decode_decide(msg, len, &d) != HVD_OK ||
		    d.epoch != a->in->epoch + 1) {
			free(msg);
			continue;
		}
		free(msg);
		heard_from(a, d.sender);
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
	while (!a->decided && next_msg(a, MEMB_REMOVED, &msg, &len)) {
		char why[MEMB_REASON_MAX];

		if (memb_decode_removed(msg, len, why, sizeof(why)) == HVD_OK)
			snprintf(a->removed, sizeof(a->removed), "%s", why);
		free(msg);
	}
}

static void send_to_rank(struct agree *a, int r, int type)
{
	hvd_status_t st = HVD_OK;
	ucp_ep_h ep;

	/* Not peers_failed: a suspect is still asked. */
	if (r == a->me || memb_bit(a->failed, r))
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
	    .quiet = a->quiet,
	    .doubt = a->doubt,
	    .self = a->in->self,
	};

	p.self.old_rank = a->me;
	HVD_CHECK(memb_encode_propose(&a->buf, &p));
	send_to_rank(a, a->coord, MEMB_PROPOSE);
	hvd_log(HVD_LOG_DEBUG, "elastic: proposal sent to rank %d", a->coord);
	return HVD_OK;
}

/* Liveness probes to the ranks on other nodes this rank waits on, and
 * answers to those that sent one (on its node the pids say it): a dead
 * one's reset connection fails the send, and the endpoint's error
 * handler marks it; a live one hears that this one is alive. */
static void hello(struct agree *a, double now)
{
	a->hello_now = 0;
	if (memb_encode_hello(&a->buf, a->in->epoch, a->me) != HVD_OK)
		return;
	/* At most one a second to each rank, so that two ranks answering
	 * each other do not spin. */
	for (int r = 0; r < a->n; r++) {
		if ((waits_on(a, r) || memb_bit(a->greet, r)) &&
		    now - a->sent[r] >= 1.0) {
			send_to_rank(a, r, MEMB_HELLO);
			a->sent[r] = now;
			memb_clear_bit(a->greet, r);
		}
	}
	memb_reap_sends();
}

/* Does any candidate (this rank, or one that proposed) still suspect
 * another that is not out? */
static int doubts_open(const struct agree *a)
{
	for (int c = 0; c < a->n; c++) {
		const uint8_t *d = c == a->me ? a->doubt : a->pdoubt[c];

		if (!d || memb_bit(a->failed, c) || (c != a->me && !a->props[c]))
			continue;
		for (int r = 0; r < a->n; r++)
			if (r != c && memb_bit(d, r) && !memb_bit(a->failed, r))
				return 1;
	}
	return 0;
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

long memb_local_pid(const char *peer_node, long pid, uint64_t peer_ns,
		    const char *my_node)
{
	if (pid <= 0 || !peer_node[0] || strcmp(peer_node, my_node) != 0)
		return 0;
	return hvd_pid_here((pid_t)pid, peer_ns);
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

/* Tell r it is left out, and why (REMOVED); its endpoint, to flush. */
static ucp_ep_h send_removed(struct agree *a, int r, const char *why)
{
	hvd_status_t est = HVD_OK;
	ucp_ep_h ep;

	if (memb_encode_removed(&a->buf, a->in->epoch, a->me, why) != HVD_OK)
		return NULL;
	ep = ucx_ep(r, &est);
	memb_send(ep, memb_tag(MEMB_CTX, a->in->epoch, MEMB_REMOVED, a->me),
		  &a->buf);
	return ep;
}

/* The ranks left out of the decision that this coordinator heard from
 * in the agreement (alive, and reached) learn it, and why, before its
 * worker goes (up to 2 s: they are not waited for). */
static void tell_left_out(struct agree *a)
{
	ucp_ep_h *eps = calloc((size_t)a->n + 1, sizeof(*eps));
	int k = 0;

	for (int r = 0; r < a->n; r++) {
		char why[MEMB_REASON_MAX];
		ucp_ep_h ep;

		if (r == a->me || !memb_bit(a->failed, r) ||
		    (!a->props[r] && a->heard[r] <= 0))
			continue;
		if (a->rival[r] >= 0)
			rival_why(a, a->rival[r], why, sizeof(why));
		else
			snprintf(why, sizeof(why),
				 "rank %d (coordinating) counts it out: %s",
				 a->me, transport_fail_reason(r));
		ep = send_removed(a, r, why);
		if (ep && eps)
			eps[k++] = ep;
	}
	if (eps)
		memb_flush(eps, k, 2.0, NULL, NULL);
	free(eps);
}

/* The side of a partition without a majority stops: the members this
 * coordinator would have kept are told, and it returns HVD_ERR_REMOVED. */
static hvd_status_t check_quorum(struct agree *a, struct memb_peer **order,
				 int n)
{
	size_t nb = (size_t)(a->n + 7) / 8 + 1;
	uint8_t *in = calloc(nb, 1);
	int *to = calloc((size_t)a->n + 1, sizeof(int));
	char why[MEMB_REASON_MAX], gone[160] = "";
	int kept = 0, alive = 0, nto = 0, ok, len = 0;

	if (!in || !to) {
		free(in);
		free(to);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	for (int i = 0; i < n; i++)
		if (order[i]->old_rank >= 0) {
			memb_set_bit(in, order[i]->old_rank);
			kept++;
			if (order[i]->old_rank != a->me)
				to[nto++] = order[i]->old_rank;
		}
	ok = memb_quorum(a->n, a->failed, a->quiet, in);
	for (int r = 0; r < a->n; r++) {
		if (memb_bit(a->failed, r) && !memb_bit(a->quiet, r))
			continue;
		alive++;
		if (!memb_bit(in, r) && len < (int)sizeof(gone) - 16)
			len += snprintf(gone + len, sizeof(gone) - (size_t)len,
					"%s%d", len ? ", " : "", r);
	}
	free(in);
	if (ok) {
		free(to);
		return HVD_OK;
	}
	snprintf(why, sizeof(why),
		 "its side of the network holds %d of the %d ranks not known "
		 "dead (rank%s %s went silent, not known gone): without a "
		 "majority it stops, so that two worlds do not train apart; a "
		 "side with one goes on",
		 kept, alive, strchr(gone, ',') ? "s" : "", gone);
	hvd_log(HVD_LOG_WARNING, "elastic: epoch %u: %s",
		(unsigned)a->in->epoch + 1, why);
	{
		ucp_ep_h *eps = calloc((size_t)nto + 1, sizeof(*eps));

		for (int i = 0; i < nto; i++) {
			ucp_ep_h ep = send_removed(a, to[i], why);

			if (eps)
				eps[i] = ep;
		}
		if (eps)
			memb_flush(eps, nto, 5.0, NULL, NULL);
		free(eps);
	}
	free(to);
	return hvd_error(HVD_ERR_REMOVED,
			 "hvd: elastic: this rank (%d) stops: %s", a->me, why);
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

	memset(&d, 0, sizeof(d)); /* out: frees d.peers */
	if (a->in->admit)
		nnew = pick_newcomers(&newc);
	st = memb_order(a->n, a->failed, a->props, newc, nnew, &order, &n);
	if (st != HVD_OK)
		goto out;
	st = check_quorum(a, order, n);
	if (st != HVD_OK)
		goto out;
	tell_left_out(a);
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
						      j->self.pidns,
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
		for (int r = 0; r < a->n; r++)
			if (memb_bit(late, r))
				send_removed(a, r, why);
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
	a.pt = transport_peer_timeout();
	a.failed = calloc((size_t)(a.n + 7) / 8 + 1, 1);
	a.quiet = calloc((size_t)(a.n + 7) / 8 + 1, 1);
	a.doubt = calloc((size_t)(a.n + 7) / 8 + 1, 1);
	a.greet = calloc((size_t)(a.n + 7) / 8 + 1, 1);
	a.probe = calloc((size_t)(a.n + 7) / 8 + 1, 1);
	a.pdoubt = calloc((size_t)a.n, sizeof(*a.pdoubt));
	a.rival = malloc((size_t)a.n * sizeof(*a.rival));
	a.heard = calloc((size_t)a.n, sizeof(*a.heard));
	a.since = calloc((size_t)a.n, sizeof(*a.since));
	a.sent = calloc((size_t)a.n, sizeof(*a.sent));
	a.props = calloc((size_t)a.n, sizeof(*a.props));
	a.all.world_ranks = malloc((size_t)a.n * sizeof(int));
	if (!a.failed || !a.quiet || !a.doubt || !a.greet || !a.probe ||
	    !a.pdoubt || !a.rival || !a.heard || !a.since || !a.sent || !a.props ||
	    !a.all.world_ranks) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	for (int r = 0; r < a.n; r++) {
		a.all.world_ranks[r] = r;
		a.rival[r] = -1;
	}
	a.all.size = a.n;
	a.all.rank = a.me;
	self = in->self; /* shallow: the caller owns the address */
	self.old_rank = a.me;
	a.props[a.me] = &self;

	while (!a.decided) {
		double now;
		int busy = ucp_worker_progress(ucx_worker);

		take_hellos(&a);
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
			a.coord = memb_coordinator(a.failed, a.n);
			silence(&a, now);
			next_check = now + 0.05;
		}
		if (a.nprobe)
			probe_silent(&a);
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
						     "HOROVOD_ELASTIC_TIMEOUT",
						     PEER_DEAD);
					}
				pending = 0;
			}
			/* A member that still suspects another: wait for
			 * the answer or the silence (bounded as well). */
			if (!pending && now <= deadline && doubts_open(&a))
				pending = 1;
			if (!pending) {
				st = decide(&a, late);
				free(late);
				if (st != HVD_OK)
					goto out;
				break;
			}
		} else {
			if (sent_to != a.coord || a.dirty) {
				st = propose(&a);
				if (st != HVD_OK)
					goto out;
				sent_to = a.coord;
				a.dirty = 0;
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
		if (now >= next_hello || a.hello_now) {
			hello(&a, now);
			if (now >= next_hello)
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
	for (int r = 0; a.pdoubt && r < a.n; r++)
		free(a.pdoubt[r]);
	free(a.pdoubt);
	free(a.props);
	free(a.failed);
	free(a.quiet);
	free(a.doubt);
	free(a.greet);
	free(a.probe);
	free(a.rival);
	free(a.heard);
	free(a.since);
	free(a.sent);
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

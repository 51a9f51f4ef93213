/*
 * refusal.c - a blocking collective refused on some ranks only
 * (net/refusal.h says what and why).
 *
 * Three words travel as fire-and-forget messages: "refused" and "empty"
 * go to every other rank of the world, "made" only to the rank whose word
 * it answers.  So a job where one rank refused a call sends some 2n of
 * them, not n^2, and a rank that answered opens one endpoint, not one to
 * every rank (above HVD_EAGER_CONNECT_MAX they are made on first use).
 * Where every rank refuses the same call, each still tells every other:
 * n(n-1) in all.  Nothing else in a job sends on REFUSAL_CTX, so a rank
 * takes in what arrived with a probe of that one tag.  What a rank has
 * heard is kept until its own calls reach the call a word is about: a
 * rank can be ahead of another by calls that did not need it (all ranks
 * refusing a row of calls), or behind.
 *
 * In hvd_finalize(), a rank that sent any of them says goodbye to every
 * rank it sent one to, after them (UCX keeps one endpoint's messages in
 * order), and each answers the goodbye when it takes it in: then it has
 * heard every word.  Until each has answered, the teller does not join
 * the PMIx fence that ends hvd_finalize()'s wait for every rank;
 * otherwise that fence (PMIx) could be over before a word (UCX) was in,
 * and a broadcast's leaf finalized without the warning it owed.  A job
 * where no call was refused sends nothing.
 */
#include "config.h"

#include "net/auth.h"
#include "net/peers.h"
#include "net/refusal.h"
#include "net/ucx.h"
#include "net/watch.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RF_MAGIC 0x52465532u /* "RFU2" */

enum rf_kind {
	RF_REFUSED = 1, /* the sender refused call `call`           */
	RF_MADE = 2,    /* the sender made call `call`, which some
			   rank refused or skipped                    */
	RF_EMPTY = 3,   /* the sender skipped call `call`: a count
			   of 0, nothing to send or receive           */
	RF_BYE = 4,     /* the sender, in hvd_finalize(), told the
			   others something before this: answer       */
	RF_HEARD = 5,   /* the answer to RF_BYE, to its sender only   */
};

struct rf_msg {
	uint32_t magic;
	uint32_t kind;
	int32_t who;    /* the sender's world rank                  */
	int32_t status; /* RF_REFUSED: the refusal's hvd_status_t   */
	uint64_t call;  /* the call's number on every rank, from 1  */
	char fn[32];    /* the function skipped, NUL-terminated     */
	/* RF_MADE: the word it answers (its kind and sender; status and fn
	 * above are that word's): the sender of that word gets it, and
	 * checks that it is about its own */
	uint32_t about_kind;
	int32_t about;
};

/* A send's buffer must outlive it, and nothing waits for these: kept
 * until the worker is gone (one a refused call, and one a rank that
 * made such a call). */
struct rf_out {
	struct rf_out *next;
	struct rf_msg m;
};

static pthread_mutex_t rf_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t calls;   /* public blocking calls begun here       */
static int apart;        /* 1: they fail from now on                */
static enum rf_kind own; /* how this rank skips the current call    */
static char apart_why[320];
static struct rf_msg *heard; /* taken in, about calls not settled */
static size_t nheard, capheard;
static struct rf_out *sent;
static unsigned long dropped, nsent; /* words sent, goodbyes not counted */
static int told;          /* this rank sent words (not goodbyes)  */
static unsigned char *told_to; /* [w]: to rank w (NULL: every rank) */
static uint64_t told_call; /* the call of this rank's own last word */
static int said_bye;      /* hvd_finalize() began here            */
static unsigned char *heard_bye; /* [w]: rank w answered the goodbye */

static uint64_t rf_tag(void)
{
	return auth_tag((uint64_t)REFUSAL_CTX << 48);
}

void refusal_start(void)
{
	pthread_mutex_lock(&rf_lock);
	calls = 0;
	apart = 0;
	apart_why[0] = '\0';
	nheard = 0;
	dropped = 0;
	told = 0;
	free(told_to);
	told_to = NULL;
	told_call = 0;
	nsent = 0;
	said_bye = 0;
	free(heard_bye);
	heard_bye = NULL;
	pthread_mutex_unlock(&rf_lock);
}

void refusal_free(void)
{
	pthread_mutex_lock(&rf_lock);
	while (sent) {
		struct rf_out *o = sent;

		sent = o->next;
		free(o);
	}
	free(heard);
	heard = NULL;
	nheard = capheard = 0;
	free(heard_bye);
	heard_bye = NULL;
	told = 0;
	free(told_to);
	told_to = NULL;
	told_call = 0;
	said_bye = 0;
	pthread_mutex_unlock(&rf_lock);
}

/* Send kind about call (status st, function fn) to world rank to, or to
 * every other rank (to -1); an RF_MADE answers the word *about, and goes
 * to that word's sender only.  Who was sent words is kept: those, and
 * only those, get this rank's goodbye (a rank that answered one refusal
 * says goodbye to one rank, not to the job). */
static void send_word(int to, enum rf_kind kind, uint64_t call,
		      hvd_status_t st, const char *fn,
		      const struct rf_msg *about)
{
	struct rf_out *o = calloc(1, sizeof(*o));
	int n = peers_count();

	if (!o)
		return; /* the others find out at the peer timeout */
	if (kind != RF_BYE && kind != RF_HEARD) {
		if (!told && to >= 0)
			told_to = calloc((size_t)n, 1); /* NULL: every rank */
		if (to < 0 || !told_to) {
			free(told_to);
			told_to = NULL;
		} else {
			told_to[to] = 1;
		}
		told = 1;
	}
	o->m.magic = RF_MAGIC;
	o->m.kind = kind;
	o->m.who = peers_self();
	o->m.status = st;
	o->m.call = call;
	snprintf(o->m.fn, sizeof(o->m.fn), "%s", fn);
	if (about) {
		o->m.about_kind = about->kind;
		o->m.about = about->who;
	}
	o->next = sent;
	sent = o;
	for (int w = to < 0 ? 0 : to; w < (to < 0 ? n : to + 1); w++)
		if (w != peers_self()) {
			ucx_send_forget(w, &o->m, sizeof(o->m), rf_tag());
			nsent += kind != RF_BYE && kind != RF_HEARD;
		}
}

static void tell(enum rf_kind kind, uint64_t call, hvd_status_t st,
		 const char *fn, const struct rf_msg *about)
{
	send_word(-1, kind, call, st, fn, about);
}

static const char *invalid(const struct rf_msg *m, size_t len, int n)
{
	if (len != sizeof(*m))
		return "not the size of one";
	if (m->magic != RF_MAGIC ||
	    (m->kind != RF_REFUSED && m->kind != RF_MADE &&
	     m->kind != RF_EMPTY && m->kind != RF_BYE &&
	     m->kind != RF_HEARD))
		return "not one";
	if (m->who < 0 || m->who >= n || m->who == peers_self())
		return "from no other rank of the job";
	if ((m->call == 0 && m->kind != RF_BYE && m->kind != RF_HEARD) ||
	    !memchr(m->fn, '\0', sizeof(m->fn)))
		return "malformed";
	if (m->kind == RF_MADE &&
	    ((m->about_kind != RF_REFUSED && m->about_kind != RF_EMPTY) ||
	     m->about < 0 || m->about >= n || m->about == m->who))
		return "an answer to no word";
	return NULL;
}

/* Take in what arrived (the caller progressed the worker). */
static void drain(void)
{
	ucp_tag_recv_info_t info;
	ucp_tag_message_h h;
	int n = peers_count();

	if (!ucx_worker)
		return;
	while ((h = ucp_tag_probe_nb(ucx_worker, rf_tag(), ~(uint64_t)0, 1,
				     &info))) {
		size_t got = 0;
		struct rf_msg *m = ucx_recv_probed(h, sizeof(*m), &got);
		const char *bad = m ? invalid(m, got, n) : "its receive failed";

		if (!bad && m->kind == RF_BYE) {
			/* every word of its sender is in: those before it
			 * were taken in first, and settle below */
			send_word(m->who, RF_HEARD, calls, HVD_OK,
				  "hvd_finalize", NULL);
			free(m);
			continue;
		}
		if (!bad && m->kind == RF_HEARD) {
			if (heard_bye)
				heard_bye[m->who] = 1;
			free(m);
			continue;
		}
		if (!bad && nheard == capheard) {
			size_t cap = capheard ? 2 * capheard : 16;
			struct rf_msg *p = realloc(heard, cap * sizeof(*p));

			if (p) {
				heard = p;
				capheard = cap;
			} else {
				bad = "no memory to keep it";
			}
		}
		if (!bad) {
			heard[nheard++] = *m;
		} else if (++dropped <= 10 || dropped % 1000 == 0) {
			hvd_log(HVD_LOG_WARNING,
				"dropped a message about a refused call "
				"(%zu bytes, %s); %lu dropped so far",
				info.length, bad, dropped);
		}
		free(m);
	}
}

static void set_apart(const char *fmt, ...)
{
	va_list ap;

	if (apart)
		return;
	apart = 1;
	va_start(ap, fmt);
	vsnprintf(apart_why, sizeof(apart_why), fmt, ap);
	va_end(ap);
	hvd_log(HVD_LOG_DEBUG, "blocking collectives apart: %s", apart_why);
}

/* "rank 2 refused call 12 of the blocking collectives, hvd_allreduce()
 * (HVD_ERR_INVALID_ARG), which this rank made", or "rank 2 made call 12
 * ..., hvd_allreduce(), with a count of 0, where ...": the world is apart
 * because of word m, of kind kind from rank who (m's own, or those of the
 * word an answer m is about). */
static void apart_by(const struct rf_msg *m, enum rf_kind kind, int who)
{
	if (kind == RF_EMPTY)
		set_apart("rank %d made call %" PRIu64 " of the blocking "
			  "collectives, %s(), with a count of 0, where this "
			  "rank's count was not 0",
			  who, m->call, m->fn);
	else
		set_apart("rank %d refused call %" PRIu64 " of the blocking "
			  "collectives, %s() (%s), which this rank made",
			  who, m->call, m->fn,
			  hvd_status_name((hvd_status_t)m->status));
}

/* How this rank skipped the current call, after "which this rank ". */
static const char *own_how(void)
{
	return own == RF_EMPTY ? "made with a count of 0" : "refused";
}

/* Answer word m, about a call this rank made, with "made": to its sender,
 * which waits for every rank's word on its call.  The other ranks need
 * not hear it: the sender told each of them itself. */
static void answer(const struct rf_msg *m)
{
	send_word(m->who, RF_MADE, m->call, (hvd_status_t)m->status, m->fn,
		  m);
}

/*
 * What was heard, against this rank's calls.  A word about a later call
 * waits for it.  One about a call this rank made (an earlier one, or the
 * current one unless seen[] is given: this rank skipped it and counts
 * the others who did) sets the world apart; a refusal or an empty call
 * of such a call is answered with "made".  Once apart, a word is still
 * answered unless it is about the call this rank skipped and told the
 * others of (its sender has that word): a second rank that refused the
 * same call waits for every rank's word, and no other rank sends it.
 */
static void settle(unsigned char *seen, int *got)
{
	size_t keep = 0;

	for (size_t i = 0; i < nheard; i++) {
		const struct rf_msg *m = &heard[i];

		if (apart) {
			if (m->kind != RF_MADE && m->call != told_call)
				answer(m);
			continue;
		}
		if (m->call > calls) {
			if (keep != i)
				heard[keep] = *m;
			keep++;
			continue;
		}
		if (seen && m->call == calls && m->kind != RF_MADE) {
			if (!seen[m->who]) {
				seen[m->who] = 1;
				++*got;
			}
			continue;
		}
		if (m->kind != RF_MADE) {
			apart_by(m, (enum rf_kind)m->kind, (int)m->who);
			answer(m);
		} else if (seen && m->call == calls) {
			set_apart("rank %d made call %" PRIu64
				  " of the blocking collectives, which this "
				  "rank %s",
				  (int)m->who, m->call, own_how());
		} else {
			/* an answer to another rank's word (answers go to
			 * that word's sender, so this is not expected): the
			 * same words as the skipping rank's own would give */
			apart_by(m, (enum rf_kind)m->about_kind,
				 (int)m->about);
		}
	}
	if (apart) /* words about later calls, kept above */
		for (size_t i = 0; i < keep; i++)
			answer(&heard[i]);
	nheard = apart ? 0 : keep;
}

/* Where the world is apart, what a failing call says after "hvd: ". */
static void apart_text(char *buf, size_t len)
{
	snprintf(buf, len,
		 "%s: the ranks' blocking collectives are apart, and each "
		 "fails from now on (end the program, or call "
		 "hvd_finalize())",
		 apart_why);
}

/* The refusing rank's wait for every other rank's word on its call. */
static void agree(int n)
{
	unsigned char *seen = calloc((size_t)n, 1);
	double t0 = hvd_now(), next_check = t0 + 0.05;
	double limit = transport_peer_timeout();
	int got = 0, f;
	char why[200];

	if (!seen) {
		set_apart("this rank had no memory to hear the others on call "
			  "%" PRIu64 " of the blocking collectives, which it "
			  "%s",
			  calls, own_how());
		return;
	}
	for (;;) {
		double now;

		ucp_worker_progress(ucx_worker);
		drain();
		settle(seen, &got);
		if (apart || got == n - 1)
			break;
		now = hvd_now();
		if (now >= next_check) {
			next_check = now + 0.05;
			f = transport_watch(why, sizeof(why));
			if (f >= 0) {
				set_apart("%s while the ranks settled call "
					  "%" PRIu64 " of the blocking "
					  "collectives, which this rank %s",
					  why, calls, own_how());
				break;
			}
		}
		if (now - t0 > limit) {
			int w = 0;

			while (w < n && (seen[w] || w == peers_self()))
				w++;
			set_apart("rank %d gave no word for %.0f s "
				  "(HOROVOD_PEER_TIMEOUT) on call %" PRIu64
				  " of the blocking collectives, which this "
				  "rank %s",
				  w, limit, calls, own_how());
			break;
		}
		if (!ucx_block(10, -1)) {
			struct timespec nap = {0, 100 * 1000};

			nanosleep(&nap, NULL);
		}
	}
	free(seen);
}

hvd_status_t refusal_call(const char *fn)
{
	hvd_status_t st = HVD_OK;

	pthread_mutex_lock(&rf_lock);
	calls++;
	if (apart)
		st = hvd_error(HVD_ERR_MISMATCH,
			       "hvd: %s(): the ranks' blocking collectives "
			       "are apart since %s",
			       fn, apart_why);
	pthread_mutex_unlock(&rf_lock);
	return st;
}

/* This rank skips the call just numbered (kind, its status st): tell,
 * and settle it with the others.  1 when the world is apart. */
static int skip(enum rf_kind kind, const char *fn, hvd_status_t st)
{
	int n = peers_count(), was;

	if (n < 2 || !ucx_worker)
		return 0;
	pthread_mutex_lock(&rf_lock);
	if (!apart) {
		own = kind;
		told_call = calls;
		tell(kind, calls, st, fn, NULL);
		agree(n);
	}
	was = apart;
	pthread_mutex_unlock(&rf_lock);
	return was;
}

hvd_status_t refusal_refuse(const char *fn, hvd_status_t st)
{
	char *msg = strdup(hvd_last_error());

	skip(RF_REFUSED, fn, st);
	if (msg)
		hvd_error(st, "%s", msg);
	free(msg);
	return st;
}

hvd_status_t refusal_empty(const char *fn)
{
	char why[480];

	if (!skip(RF_EMPTY, fn, HVD_OK))
		return HVD_OK;
	pthread_mutex_lock(&rf_lock);
	apart_text(why, sizeof(why));
	pthread_mutex_unlock(&rf_lock);
	return hvd_error(HVD_ERR_MISMATCH, "hvd: %s", why);
}

hvd_status_t refusal_go(void)
{
	hvd_status_t st = HVD_OK;

	pthread_mutex_lock(&rf_lock);
	if (nheard)
		settle(NULL, NULL);
	if (apart) {
		char why[480];

		apart_text(why, sizeof(why));
		st = hvd_error(HVD_ERR_MISMATCH, "hvd: %s", why);
	}
	pthread_mutex_unlock(&rf_lock);
	return st;
}

/* Take in what arrived and settle it (rf_lock held; the caller
 * progressed the worker). */
static void listen_now(void)
{
	drain();
	if (nheard)
		settle(NULL, NULL);
}

/* Whether this rank sent words to rank w (and owes it a goodbye). */
static int was_told(int w)
{
	return told && w != peers_self() && (!told_to || told_to[w]);
}

/* 1 when every rank this rank sent words to answered its goodbye, or
 * never will (a failed rank; no memory to count them: the fence is then
 * all there is). */
static int all_heard(int n)
{
	if (!heard_bye)
		return 1;
	for (int w = 0; w < n; w++)
		if (was_told(w) && !heard_bye[w] && !peers_failed(w))
			return 0;
	return 1;
}

int refusal_finalizing(void)
{
	int n = peers_count(), was, done;

	if (n < 2 || !ucx_worker)
		return 1;
	pthread_mutex_lock(&rf_lock);
	if (!said_bye) {
		said_bye = 1;
		if (told && (heard_bye = calloc((size_t)n, 1))) {
			int to = 0;

			for (int w = 0; w < n; w++)
				if (was_told(w)) {
					send_word(w, RF_BYE, calls, HVD_OK,
						  "hvd_finalize", NULL);
					to++;
				}
			hvd_log(HVD_LOG_DEBUG,
				"hvd_finalize(): %lu words about refused calls "
				"sent to %d ranks, and as many goodbyes",
				nsent, to);
		}
	}
	was = apart;
	listen_now();
	if (apart && !was)
		hvd_log(HVD_LOG_WARNING,
			"hvd_finalize(): %s (this rank's call returned "
			"before it heard)",
			apart_why);
	done = all_heard(n);
	pthread_mutex_unlock(&rf_lock);
	return done;
}

hvd_status_t refusal_watch(char *why, size_t len)
{
	hvd_status_t st = HVD_OK;

	if (peers_count() < 2)
		return HVD_OK;
	pthread_mutex_lock(&rf_lock);
	listen_now();
	if (apart) {
		apart_text(why, len);
		st = HVD_ERR_MISMATCH;
	}
	pthread_mutex_unlock(&rf_lock);
	return st;
}

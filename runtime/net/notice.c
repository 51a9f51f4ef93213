/*
 * notice.c - failure notices: {failed rank, reporter, sequence number}
 * sent to every live rank with a MAC under the job's key, fire and
 * forget, and taken in by the one receive every rank keeps posted
 * (net/notice.h says why they exist, net/auth.h how they are protected).
 *
 * A notice that does not verify is dropped and logged: only a process
 * that knows the tag key can even deliver one (the receive matches the
 * whole keyed tag), so one that arrives and fails its MAC says that the
 * traffic was read or the key leaked, or another libhvd is in the job.
 */
#include "config.h"

#include "net/auth.h"
#include "net/notice.h"
#include "net/peers.h"
#include "net/ucx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct auth_notice notice_in;
static struct tp_req *notice_req;
/* Send buffers, one per failed rank: a send's buffer must stay valid
 * until it completes, and fire-and-forget sends are never waited for,
 * so these live until the worker is gone. */
static struct auth_notice *notice_out;
static uint32_t *notice_last; /* [n] last sequence taken per reporter */
static uint32_t notice_seq;   /* of the last notice this rank sent   */
static unsigned long notice_dropped;
static pthread_mutex_t notice_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t notice_tag(void)
{
	return auth_tag((uint64_t)NOTICE_CTX << 48);
}

static void post_recv(void)
{
	ucp_request_param_t prm;
	void *r;

	ucx_bytes_recv_params(&prm);
	r = ucp_tag_recv_nbx(ucx_worker, &notice_in, sizeof(notice_in),
			     notice_tag(), ~(uint64_t)0, &prm);
	notice_req = UCS_PTR_IS_ERR(r) ? NULL : r;
}

hvd_status_t notice_start(void)
{
	int n = peers_count();

	notice_out = calloc((size_t)(n > 0 ? n : 1), sizeof(*notice_out));
	notice_last = calloc((size_t)(n > 0 ? n : 1), sizeof(*notice_last));
	if (!notice_out || !notice_last) {
		notice_free();
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory for failure notices");
	}
	notice_seq = 0;
	notice_dropped = 0;
	post_recv();
	return HVD_OK;
}

/* A notice's how is an enum peer_gone (net/auth.h cannot see it). */
_Static_assert(PEER_SUSPECT == 0 && PEER_DEAD == AUTH_NOTICE_HOW_MAX,
	       "net/auth.h's notice how and enum peer_gone differ");

/* What a notice's how says, after "rank R reports". */
static const char *notice_how(uint32_t how)
{
	switch (how) {
	case PEER_SUSPECT:
		return "no progress from it (HOROVOD_PEER_TIMEOUT): it is "
		       "stuck, cut off, or waits on a rank that is";
	case PEER_QUIET:
		return "its connection to it timed out (cut off, or gone)";
	default:
		return "it gone";
	}
}

static void take_in(void)
{
	int n = peers_count();

	while (notice_req && atomic_load(&notice_req->done)) {
		ucs_status_t rs = notice_req->status;
		int ok = rs == UCS_OK;
		size_t len = notice_req->length;
		const char *bad = rs == UCS_ERR_MESSAGE_TRUNCATED
					  ? "longer than a failure notice"
					  : "its receive failed";
		char why[200];

		atomic_store(&notice_req->done, 0);
		ucp_request_free(notice_req);
		notice_req = NULL;
		if (ok && auth_notice_open(&notice_in, len, n, peers_self(),
					   notice_last, &bad) == 0) {
			snprintf(why, sizeof(why), "rank %d reports %s",
				 (int)notice_in.reporter,
				 notice_how(notice_in.how));
			hvd_log(HVD_LOG_DEBUG,
				"failure notice %u from rank %d: rank %d is "
				"gone (how %u)",
				notice_in.seq, (int)notice_in.reporter,
				(int)notice_in.dead, notice_in.how);
			/* Another rank's word: it may only have lost
			 * its way to it, which the elastic agreement
			 * checks.  Of a rank on this node only a death
			 * is taken: its pid, and this rank's own waits
			 * on it, say more than another node's silence
			 * (which the agreement would take for a
			 * node-mate's death: a timeout behind a chain
			 * of waits names live ranks). */
			if (notice_in.how == PEER_DEAD ||
			    !peers_local(notice_in.dead))
				peers_mark(notice_in.dead, why, 0,
					   PEER_SUSPECT);
		} else if (rs != UCS_ERR_CANCELED) {
			/* a flood must not flood the log: the first ten,
			 * then every 1000th */
			if (++notice_dropped <= 10 ||
			    notice_dropped % 1000 == 0)
				hvd_log(HVD_LOG_WARNING,
					"dropped a failure notice (%zu bytes, "
					"naming rank %d, claiming to come "
					"from rank %d): %s; %lu dropped so "
					"far",
					len, (int)notice_in.dead,
					(int)notice_in.reporter, bad,
					notice_dropped);
		}
		post_recv();
	}
}

static void send_out(int f)
{
	int n = peers_count();

	auth_notice_seal(&notice_out[f], f, peers_self(), ++notice_seq,
			 (unsigned)peers_gone_kind(f));
	for (int w = 0; w < n; w++)
		ucx_send_forget(w, &notice_out[f], sizeof(notice_out[f]),
				notice_tag());
}

void notice_poll(void)
{
	int f;

	if (pthread_mutex_trylock(&notice_lock))
		return;
	take_in();
	while (notice_out && (f = peers_take_announce()) >= 0)
		send_out(f);
	pthread_mutex_unlock(&notice_lock);
}

void notice_cancel(void)
{
	pthread_mutex_lock(&notice_lock);
	if (notice_req) {
		ucp_request_cancel(ucx_worker, notice_req);
		atomic_store(&notice_req->done, 0);
		ucp_request_free(notice_req);
		notice_req = NULL;
	}
	pthread_mutex_unlock(&notice_lock);
}

void notice_free(void)
{
	free(notice_out);
	free(notice_last);
	notice_out = NULL;
	notice_last = NULL;
}

/*
 * memb_wire.c - the elastic agreement's messages on the wire (see
 * net/memb_wire.h, and membership.c's comment for why sends are copied and
 * receives probed).  Every tag is keyed with the job's key (net/auth.h),
 * and every message ends in a MAC under it (auth_msg_mac, over the plain
 * tag and the bytes): the tag key only narrows what reaches a probe, and
 * the probes match a part of the tag (the source, for newcomers the epoch
 * and for join requests all but the context are wildcards), so the MAC is
 * what keeps a forged proposal, decision, removal or join request out.
 * memb_take drops a message whose MAC does not verify, and logs it.
 */
#include "config.h"

#include "net/memb_wire.h"
#include "net/auth.h"
#include "net/ucx.h"

#include <stdlib.h>
#include <string.h>

#define TYPE_BITS 4
#define EPOCH_MASK 0xfffffu /* the epoch's bits in a tag */

uint64_t memb_tag(uint32_t ctx, uint32_t epoch, int type, int src)
{
	uint32_t seq = ((epoch & EPOCH_MASK) << TYPE_BITS) | (uint32_t)type;

	return ((uint64_t)ctx << 48) | ((uint64_t)(seq & 0xffffffu) << 24) |
	       (uint64_t)((uint32_t)src & 0xffffffu);
}


void memb_nap(void)
{
	hvd_sleep_us(200);
}

/* ------------------------------------------------------------- sends */

struct sent {
	void *req;
	void *buf;
};

/* Sends whose request is still in flight, across calls (see above). */
static struct sent *inflight;
static int ninflight, capinflight;

void memb_reap_sends(void)
{
	int k = 0;

	for (int i = 0; i < ninflight; i++) {
		struct sent *s = &inflight[i];

		if (s->req && ucp_request_check_status(s->req) == UCS_INPROGRESS) {
			inflight[k++] = *s;
			continue;
		}
		if (s->req)
			ucp_request_free(s->req);
		free(s->buf);
	}
	ninflight = k;
}

void memb_sends_release(void)
{
	/* The worker these were posted on is gone: nothing reads them. */
	for (int i = 0; i < ninflight; i++)
		free(inflight[i].buf);
	free(inflight);
	inflight = NULL;
	ninflight = capinflight = 0;
}

/* Fire a copy of b to ep; a failed post is what the endpoint's error
 * handler reports (the caller's liveness checks see it). */
void memb_send(ucp_ep_h ep, uint64_t tag, const struct memb_buf *b)
{
	ucp_request_param_t prm;
	uint64_t mac;
	void *buf, *r;

	if (!ep)
		return;
	if (ninflight == capinflight) {
		int cap = capinflight ? capinflight * 2 : 16;
		struct sent *v = realloc(inflight, (size_t)cap * sizeof(*v));

		if (!v)
			return;
		inflight = v;
		capinflight = cap;
	}
	buf = malloc(b->len + AUTH_MAC_BYTES);
	if (!buf)
		return;
	memcpy(buf, b->p, b->len);
	if (auth_msg_mac(tag, b->p, b->len, &mac) != 0) {
		free(buf);
		return;
	}
	memcpy((uint8_t *)buf + b->len, &mac, sizeof(mac));
	ucx_bytes_send_params(&prm);
	r = ucp_tag_send_nbx(ep, buf, b->len + AUTH_MAC_BYTES, auth_tag(tag),
			     &prm);
	if (r == NULL || UCS_PTR_IS_ERR(r)) {
		free(buf);
		return;
	}
	inflight[ninflight].req = r;
	inflight[ninflight].buf = buf;
	ninflight++;
}

/* Flush eps[0..n) until done, their peers gone, or limit: a decision must
 * have left this process before its worker goes, since the switch to the
 * next worker force-closes every endpoint and cancels what is still
 * queued.  A flush that gave up after a fixed 2 s lost the decision to a
 * newcomer that did not run for 4 s (SIGSTOP; its TCP connection cannot
 * be wired up meanwhile): it waited for an answer that never came, and
 * the world for it (tests/runtime/elastic.sh, "paused"). */
int memb_flush(ucp_ep_h *eps, int n, double limit,
	       int (*gone)(void *arg, int i), void *arg)
{
	void **reqs = calloc((size_t)(n ? n : 1), sizeof(*reqs));
	double deadline = hvd_now() + limit, next_check = 0;
	int left = 0;

	if (!reqs)
		return n;
	for (int i = 0; i < n; i++) {
		ucp_request_param_t prm;
		void *q;

		if (!eps[i])
			continue;
		memset(&prm, 0, sizeof(prm));
		q = ucp_ep_flush_nbx(eps[i], &prm);
		if (q && !UCS_PTR_IS_ERR(q))
			reqs[i] = q;
	}
	for (;;) {
		double now;

		if (!ucp_worker_progress(ucx_worker))
			memb_nap();
		left = ucx_reqs_left(reqs, n);
		now = hvd_now();
		if (!left || now >= deadline)
			break;
		if (gone && now >= next_check) {
			/* A flush to a dead peer may never complete (shared
			 * memory, or a connection not yet wired up): what the
			 * caller knows of its peers ends the wait for them. */
			left = 0;
			for (int i = 0; i < n; i++)
				if (reqs[i] && !gone(arg, i))
					left++;
			if (!left)
				break;
			next_check = now + 0.05;
		}
	}
	left = 0;
	for (int i = 0; i < n; i++)
		if (reqs[i]) {
			left += !gone || !gone(arg, i);
			ucp_request_free(reqs[i]);
		}
	free(reqs);
	memb_reap_sends();
	return left;
}

/* ------------------------------------------- endpoints to newcomers */

int memb_ep_gone(void *arg, int i)
{
	struct memb_ep *x = (struct memb_ep *)arg + i;
	double now;

	/* The pid's state comes from /proc: every 50 ms at most. */
	if (x->pid > 0 && !__atomic_load_n(&x->failed, __ATOMIC_ACQUIRE) &&
	    (now = hvd_now()) >= x->pid_next) {
		x->pid_next = now + 0.05;
		if (hvd_pid_dead((pid_t)x->pid))
			__atomic_store_n(&x->failed, 1, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&x->failed, __ATOMIC_ACQUIRE);
}

static void extra_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	(void)ep;
	(void)status;
	__atomic_store_n(&((struct memb_ep *)arg)->failed, 1,
			 __ATOMIC_RELEASE);
}

hvd_status_t memb_ep_open(struct memb_ep *x, const void *addr, long pid)
{
	ucp_ep_params_t p;
	ucs_status_t s;

	x->failed = 0;
	x->pid_next = 0;
	x->pid = pid > 0 && pid <= 0x7fffffffL && !ucx_peer_errors_local()
			 ? (int)pid
			 : 0;
	memset(&p, 0, sizeof(p));
	p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
		       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
		       UCP_EP_PARAM_FIELD_ERR_HANDLER;
	p.address = addr;
	/* As the world's endpoints to its node's ranks (net/ucx.c): UCX
	 * 1.13's shared-memory transports cannot watch a peer, so asking
	 * for that leaves only TCP, whose address may name an interface
	 * that has gone since the peer's worker was made (UCX then tries
	 * to connect to it again and again, and never fails the endpoint:
	 * a newcomer waited out HOROVOD_ELASTIC_TIMEOUT).  A peer on this
	 * node goes over shared memory and is watched by its pid, unless
	 * HVD_UCX_PEER_ERRORS=1 asks for UCX's failure handling there. */
	p.err_mode = x->pid ? UCP_ERR_HANDLING_MODE_NONE
			    : UCP_ERR_HANDLING_MODE_PEER;
	p.err_handler.cb = extra_error;
	p.err_handler.arg = x;
	s = ucp_ep_create(ucx_worker, &p, &x->ep);
	if (s != UCS_OK) {
		x->ep = NULL;
		return hvd_error(HVD_ERR_PEER_FAILED,
				 "hvd: elastic: cannot make an endpoint "
				 "(ucp_ep_create: %s)",
				 UCS_MSG(s));
	}
	return HVD_OK;
}

void memb_ep_close(struct memb_ep *x)
{
	ucp_request_param_t prm;
	double deadline = hvd_now() + 1.0;
	void *q;

	if (!x->ep)
		return;
	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
	q = ucp_ep_close_nbx(x->ep, &prm);
	x->ep = NULL;
	if (!q || UCS_PTR_IS_ERR(q))
		return;
	while (ucp_request_check_status(q) == UCS_INPROGRESS &&
	       hvd_now() < deadline)
		ucp_worker_progress(ucx_worker);
	ucp_request_free(q);
}

/* ----------------------------------------------------------- receive */

static const char *const type_names[MEMB_NTYPES] = {
    [MEMB_PROPOSE] = "proposal", [MEMB_DECIDE] = "decision",
    [MEMB_HELLO] = "hello",      [MEMB_JOIN] = "join request",
    [MEMB_REMOVED] = "removal",
};
static unsigned long dropped;

unsigned long memb_dropped(void)
{
	return dropped;
}

/* 0 when the MAC at the end of b[*len] verifies for the plain tag stag
 * (then *len loses the MAC); -1 when it does not (logged). */
static int open_msg(uint64_t stag, const uint8_t *b, size_t *len)
{
	uint64_t mac, want;
	int type = (int)((stag >> 24) & 0xf);
	const char *what = type < MEMB_NTYPES ? type_names[type] : NULL;

	if (*len >= AUTH_MAC_BYTES) {
		memcpy(&mac, b + *len - AUTH_MAC_BYTES, sizeof(mac));
		/* compared as a whole word: no early exit */
		if (auth_msg_mac(stag, b, *len - AUTH_MAC_BYTES, &want) == 0 &&
		    (mac ^ want) == 0) {
			*len -= AUTH_MAC_BYTES;
			return 0;
		}
	}
	/* a flood must not flood the log: the first ten, then every
	 * 1000th */
	if (++dropped <= 10 || dropped % 1000 == 0)
		hvd_log(HVD_LOG_WARNING,
			"elastic: dropped a %s message (%zu bytes, tag epoch "
			"%u, claiming source %u): %s; %lu dropped so far",
			what ? what : "membership", *len,
			(unsigned)((stag >> 28) & EPOCH_MASK),
			(unsigned)(stag & 0xffffffu),
			*len < AUTH_MAC_BYTES
			    ? "too short to carry a MAC"
			    : "its MAC does not verify under the job's key",
			dropped);
	return -1;
}

/* Take one message matching tag/mask if there is one: 1 with *buf
 * (malloc'ed), *len and *stag; 0 when none; -1 when receiving it failed
 * (dropped). */
int memb_take(uint64_t tag, uint64_t mask, void **buf, size_t *len,
		    uint64_t *stag)
{
	ucp_tag_recv_info_t info;
	ucp_tag_message_h msg;
	ucp_request_param_t prm;
	struct tp_req *r;
	double deadline;
	void *b;

	msg = ucp_tag_probe_nb(ucx_worker, auth_tag(tag), mask, 1, &info);
	if (!msg)
		return 0;
	b = malloc(info.length ? info.length : 1);
	ucx_bytes_recv_params(&prm);
	/* Without a buffer the message must still be taken off the queue:
	 * receive it into a byte and drop it (truncated). */
	r = ucp_tag_msg_recv_nbx(ucx_worker, b ? b : (void *)&deadline,
				 b ? info.length : 0, msg, &prm);
	if (UCS_PTR_IS_ERR(r)) {
		free(b);
		return -1;
	}
	deadline = hvd_now() + 10.0;
	while (!atomic_load_explicit(&r->done, memory_order_acquire)) {
		if (hvd_now() > deadline) {
			ucp_request_cancel(ucx_worker, r);
			while (!atomic_load(&r->done) &&
			       hvd_now() < deadline + 1.0)
				ucp_worker_progress(ucx_worker);
			break;
		}
		if (!ucp_worker_progress(ucx_worker))
			memb_nap();
	}
	if (!atomic_load(&r->done) || r->status != UCS_OK || !b) {
		atomic_store(&r->done, 0);
		ucp_request_free(r);
		free(b);
		return -1;
	}
	*len = r->length;
	atomic_store(&r->done, 0);
	ucp_request_free(r);
	*stag = auth_tag(info.sender_tag); /* the XOR undone */
	if (open_msg(*stag, b, len) != 0) {
		free(b);
		return -1;
	}
	*buf = b;
	return 1;
}

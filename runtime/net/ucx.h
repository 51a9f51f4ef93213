/*
 * net/ucx.h - the UCX objects of the process: one context, one
 * thread-safe worker, one endpoint per peer made on first use, and the
 * request layout every operation shares.  Private to net/.
 *
 * Completion state lives inside the UCX request (request_size), so that an
 * operation abandoned after a peer failure can be released with
 * ucp_request_free() and UCX will never call back into memory we freed.
 */
#ifndef HVD_NET_UCX_H
#define HVD_NET_UCX_H

#include "net/world.h"

#include <stdatomic.h>
#include <ucp/api/ucp.h>

#pragma GCC visibility push(hidden)

struct tp_req {
	atomic_int done;
	ucs_status_t status;
	size_t length;
};

#define UCS_MSG(s) ucs_status_string(s)

extern ucp_worker_h ucx_worker;

/* 1 when /sys/class/infiniband lists a device (InfiniBand, RoCE) and
 * UCX_TLS and UCX_NET_DEVICES let UCX use it (net/lane_if.h). */
int ucx_uses_rdma(void);
/* Context, worker, and this worker's address (valid until ucx_finalize). */
hvd_status_t ucx_init(void **addr, size_t *addr_len);
/* The endpoint to world rank w, created on first use (NULL: *st says). */
ucp_ep_h ucx_ep(int w, hvd_status_t *st);
/* The endpoint table for w's ranks (net/peers.h has their addresses);
 * in small jobs every endpoint is made and wired up here. */
hvd_status_t ucx_set_peers(const struct hvd_world *w);
/* More ranks on this machine than cores: waiters yield at once (unless
 * HVD_POLL_YIELD says otherwise). */
void ucx_set_oversubscribed(int oversubscribed);
/* Completion callbacks that fill a struct tp_req. */
void ucx_send_cb(void *request, ucs_status_t status, void *user_data);
void ucx_recv_cb(void *request, ucs_status_t status,
		 const ucp_tag_recv_info_t *info, void *user_data);
/* Fire and forget: len bytes of buf to world rank w under tag, unless w
 * is this rank, has failed or has no endpoint (which records its error).
 * buf must outlive the send: nothing waits for it. */
void ucx_send_forget(int w, const void *buf, size_t len, uint64_t tag);
/* Request parameters for a send / receive of plain bytes through the
 * callbacks above (a receive always completes through its callback:
 * UCP_OP_ATTR_FLAG_NO_IMM_CMPL). */
void ucx_bytes_send_params(ucp_request_param_t *prm);
void ucx_bytes_recv_params(ucp_request_param_t *prm);
/* Receive the message m that ucp_tag_probe_nb() took off the queue (it
 * must be received) into a buffer of len bytes from malloc: the buffer,
 * and *got its length, once it completes within 0.1 s (a small message
 * is here already); NULL otherwise, and then a buffer UCX may still write
 * is left to it, never freed. */
void *ucx_recv_probed(ucp_tag_message_h m, size_t len, size_t *got);
/* Free the requests of reqs[0..n) that completed (their slots become
 * NULL); how many are still in flight.  No progress: the caller's. */
int ucx_reqs_left(void **reqs, int n);
/* Block until the worker has an event, extra_fd (when >= 0: the TCP
 * lane's, net/lane.h) polls readable, or timeout_ms passed (after the
 * caller progressed until nothing was left).  0: blocking is not
 * available (no UCP_FEATURE_WAKEUP), the caller must poll. */
int ucx_block(int timeout_ms, int extra_fd);
/* Another thread may be blocked in ucx_block() on an event this thread's
 * progress just consumed: wake it so that it looks at its requests. */
void ucx_wake_sleepers(void);
/* Oversubscribed node (or HVD_POLL_YIELD=1): waiters yield at once. */
int ucx_yield_always(void);
/* HVD_UCX_PEER_ERRORS=1: endpoints to peers on this node ask UCX for peer
 * failure handling too (which leaves them TCP). */
int ucx_peer_errors_local(void);
/* Seconds without progress before a peer counts as dead
 * (HOROVOD_PEER_TIMEOUT, default 60). */
double transport_peer_timeout(void);
/* Close every endpoint while progressing; with fence, a PMIx fence
 * before (every rank has reached finalize: until then waiting() is called
 * while progressing, and may still send) and one in between, so that no
 * rank stops progressing while others still flush to it.  This rank
 * joins the first fence once waiting() returns nonzero (every rank has
 * what this one sent it).  Then the worker and context go. */
void ucx_finalize(int fence, int (*waiting)(void));

/* Elastic re-forming (net/membership.c): the next world's worker, made on
 * the same context while the current one still carries the agreement
 * (*addr is its address, valid until the switch or the discard).  The
 * switch force-closes every endpoint of the current worker and destroys
 * it, so that nothing of the old world reaches the new one; the next
 * worker becomes ucx_worker and ucx_set_peers() makes its endpoints. */
hvd_status_t ucx_worker_prepare(void **addr, size_t *addr_len);
/* The current worker's address (a newcomer's reply address). */
void ucx_worker_address(void **addr, size_t *addr_len);
ucp_worker_h ucx_worker_next(void);
void ucx_worker_switch(void);
void ucx_worker_discard(void);

#pragma GCC visibility pop

#endif /* HVD_NET_UCX_H */

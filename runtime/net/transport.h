/*
 * transport.h - UCX point-to-point layer under the collective algorithms.
 *
 * One UCP context and one thread-safe worker per process; endpoints to
 * world ranks are created on first use.  A collective keeps its transfers
 * in a struct xfer: posting returns an index, waiting progresses the worker
 * and watches for dead peers, and on any failure every transfer still
 * pending is cancelled and released, so an error never leaves UCX writing
 * into a buffer the caller got back.
 *
 * Tags (64 bits): context id (16) | collective sequence (24) | source group
 * rank (24), XORed on the wire with the job's tag key (net/auth.h).
 * Receives match the whole tag, so groups never mix, and a process
 * outside the job cannot deliver into them without the key; messages
 * between two ranks within one collective rely on UCX's in-order tag
 * matching per endpoint, as MPI over UCX does.
 */
#ifndef HVD_TRANSPORT_H
#define HVD_TRANSPORT_H

#include "net/bootstrap.h"
#include "net/group.h"
#include "net/peers.h"
#include "net/world.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

#define TP_CTX_BITS 16
#define TP_SEQ_BITS 24
#define TP_SRC_BITS 24

static inline uint64_t tp_tag(uint32_t ctx, uint32_t seq, uint32_t src)
{
	return ((uint64_t)(ctx & 0xffffu) << 48) |
	       ((uint64_t)(seq & 0xffffffu) << 24) | (uint64_t)(src & 0xffffffu);
}

/* Create the UCP context and worker; *addr is the worker address to
 * publish (valid until transport_finalize). */
hvd_status_t transport_init(void **addr, size_t *addr_len);
/* Take the peers' addresses (and pids, for liveness checks). */
hvd_status_t transport_set_peers(const struct hvd_world *w,
				 struct bootstrap_peer *peers);
/* Every rank of world w at once, over its peers: which ranks share a
 * machine, and the TCP lane's addresses (net/lane.h).  Part of
 * transport_set_peers; again for each world an elastic re-forming makes
 * (net/reform.h). */
hvd_status_t transport_agree_world(const struct hvd_world *w);
/* Ranks of the job on this machine (all of them when every rank runs
 * here, whatever node it counts as: the same kernel boot id), and whether
 * they outnumber its cores: then waiters should not spin. */
int transport_host_ranks(void);
int transport_host_oversubscribed(void);
/* The CPUs those ranks may run on: the union of their affinity masks
 * once the world is agreed, this process's own mask before. */
long transport_host_cpus(void);
/* 1 when some machine of the job runs more of its ranks than it has
 * cores (the mini-cluster's netns nodes on one host): agreed with the
 * machines, so the same on every rank, and algorithms may choose by it. */
int transport_job_crowded(void);
/* 1 when the TCP lane (net/lane.h) is on at every rank of this world: the
 * same answer on every rank, so algorithms may size their messages by it. */
int transport_lane_everywhere(void);
/* Close endpoints while progressing, with a PMIx fence in between so that
 * no rank stops progressing while others still flush to it. */
void transport_finalize(int fence);

/* Failures: net/peers.h (transport_mark_failed, transport_group_failed,
 * transport_fail_reason, transport_check_failed). */

struct tp_op;
struct rr_desc;

struct xfer {
	struct net_group *g;
	uint64_t tag_base;   /* ctx and seq; the source is or'ed in   */
	int me;              /* group rank                            */
	hvd_status_t st;     /* first error                           */
	struct tp_op *ops;
	int nops, cap, first_pending;
	double last_progress;
	double next_check;
	struct rr_desc *rr;  /* receive-reduce descriptors              */
	int fg;              /* counted in transport_foreground_busy    */
	int lane_off;        /* UCX only, not the TCP lane (net/lane.h) */
	int one_way;         /* a broadcast: its own lane threshold     */
	int told;            /* no mismatch notice to send: one came, or
	                      * the group broke before                 */
	struct xfer_kept *kept; /* xfer_keep's blocks                   */
};

/* The calling thread runs background collectives (the engine's): its
 * transfers are not counted by transport_foreground_busy(). */
void transport_set_background(void);
/* 1 on such a thread. */
int transport_is_background(void);
/* on 1: the calling thread's waits block on the transport at once,
 * without the spinning and yielding that come first otherwise; 0 ends
 * it.  For a wait whose end this rank does not need soon: the
 * engine's negotiation while nothing is pending anywhere
 * (engine/cycle.c). */
void transport_set_patient(int on);
/* Nonzero while a collective started by a thread that is not background
 * (the caller of a blocking hvd_* function) is between xfer_begin and
 * xfer_end.  The engine defers its idle negotiation meanwhile: its posts
 * and progress would contend for the worker with the transfers of that
 * collective. */
int transport_foreground_busy(void);

/* Starts a collective on g: takes the next sequence number. */
void xfer_begin(struct xfer *x, struct net_group *g);
/* Post a send/receive to/from group rank peer.  Returns an index for
 * xfer_wait, or -1 (x->st says why). */
int xfer_send(struct xfer *x, int peer, const void *buf, size_t len);
int xfer_recv(struct xfer *x, int peer, void *buf, size_t len);
/* The same, taking the path (TCP lane or UCX) a message of route bytes
 * would take: a small message that must travel with a large one, in
 * its stream and right behind it, costs one more write there, where on
 * the other path it costs a wake-up of its own.  Both ends must give
 * the same route. */
int xfer_send_as(struct xfer *x, int peer, const void *buf, size_t len,
		 size_t route);
int xfer_recv_as(struct xfer *x, int peer, void *buf, size_t len,
		 size_t route);
/* len bytes that live until xfer_end, for a receive whose poster may
 * return first (an error elsewhere) while it is still posted.  NULL
 * (x->st says why) when out of memory. */
void *xfer_keep(struct xfer *x, size_t len);
/* A send of len bytes from buf with tail_len (at most XFER_TAIL_MAX)
 * bytes from tail behind them, in one message of len + tail_len bytes
 * that the receiver takes with one xfer_recv: the tail is copied when
 * posted, the body is not (a gather on either path).  For the few bytes
 * that describe a block to travel with it. */
#define XFER_TAIL_MAX 32
int xfer_send_tail(struct xfer *x, int peer, const void *buf, size_t len,
		   const void *tail, size_t tail_len);
/* Receive count elements from group rank peer and reduce them as they
 * land: dst = src op (what arrived), element by element (dst may be
 * src).  Only where xfer_recv_reduce_ok() (HVD_RECV_REDUCE, default 1);
 * dtype of at most 8 bytes, op not AVERAGE.  Index or -1 as xfer_recv. */
int xfer_recv_reduce(struct xfer *x, int peer, void *dst, const void *src,
		     size_t count, hvd_dtype_t dtype, hvd_op_t op);
int xfer_recv_reduce_ok(void);
/* Progress until op idx is done (others progress too). */
hvd_status_t xfer_wait(struct xfer *x, int idx);
/* Progress until op a or op b is done; returns which (a when both), or
 * -1 on an error (x->st says). */
int xfer_wait_either(struct xfer *x, int a, int b);
/* 1 when op idx is done, 0 while it is in flight, -1 on its error (or an
 * earlier one: x->st).  Progresses the worker once when not done. */
int xfer_test(struct xfer *x, int idx);
/* Progress until every posted op is done. */
hvd_status_t xfer_waitall(struct xfer *x);
/* Wait for everything (when no error so far), release, return status.
 * On an error, pending ops are cancelled and released; a peer failure or
 * a mismatch marks the group broken. */
hvd_status_t xfer_end(struct xfer *x);

/* Send and receive in one step (the common exchange pattern). */
hvd_status_t xfer_sendrecv(struct xfer *x, int dst, const void *sbuf,
			   size_t slen, int src, void *rbuf, size_t rlen);

#pragma GCC visibility pop

#endif /* HVD_TRANSPORT_H */

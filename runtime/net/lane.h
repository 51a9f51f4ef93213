/*
 * net/lane.h - the bulk TCP lane: large messages between nodes on plain
 * TCP sockets of our own, written from and read into the caller's memory.
 *
 * Over TCP, UCX with peer failure handling moves every eager fragment
 * through its own buffers: a copy into a send segment before the kernel's
 * copy, and a copy out of a receive segment after it.  On a node whose
 * cores are the limit, those two copies are a large part of the time.
 * The lane sends with sendmsg(2) straight from the caller's buffer and
 * receives into it, as MPI's TCP transports do, and reads a message of
 * up to HVD_TCP_LANE_WHOLE bytes only once all of it has arrived (a
 * low-water mark on the socket), which on a node whose cores are busy
 * made a 512 KiB exchange twice as fast.  A receive-reduce
 * (xfer_recv_reduce) has nothing to land in place and stays on UCX: the
 * algorithms that use it run with the lane off (struct xfer's lane_off).
 *
 * One connection per pair, both ways, made by the lower rank on its first
 * operation with the other (the peer's addresses raced as Happy Eyeballs
 * does: net/lane.c's dial); the other side learns who connected from a
 * hello whose
 * MAC is keyed by the job's key (net/auth.h), so no other process can
 * feed a rank's receives.  Each message is a header (tag, length) and the
 * bytes; messages of one pair arrive in the order sent and are matched
 * against posted receives by their full tag, so the lane's stream and
 * UCX's are ordered each on its own, and the transport (transport.c)
 * puts every message of at least HVD_TCP_LANE_MIN (16K; a broadcast's:
 * 1K, and 16K too where the job is crowded) bytes between ranks of
 * different nodes on the lane, the others on UCX.  A message nobody has
 * asked for yet is read into memory of its own and copied when its
 * receive is posted.
 *
 * A connection that ends without the closing message (a killed rank) or
 * fails marks its peer failed (net/peers.h), like UCX's error callback.
 *
 * Used only where UCX has no RDMA device to use (ucx_uses_rdma: there its
 * rendezvous is zero-copy), with HVD_TCP_LANE=1 (the default), between
 * ranks that published a lane, over the interfaces net/lane_if.h picks
 * (IPv4 or IPv6: one listening socket takes both).
 * HVD_TCP_LANE_LOCAL=1 on both ends puts ranks of one node on it too:
 * slower than shared memory, it is there so that the tests that run on
 * one node (the sanitizer builds among them) cover the lane.  All
 * functions are thread-safe: one lock, which progress only tries.
 */
#ifndef HVD_NET_LANE_H
#define HVD_NET_LANE_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define LANE_ADDRS 4

/* What a rank tells the others (exchanged in hvd_init). */
struct lane_addr {
	uint8_t ip[LANE_ADDRS][16]; /* IPv6, IPv4 mapped (net/lane_if.h)   */
	uint16_t nip;            /* 0: no lane on this rank                */
	uint16_t port;           /* network byte order                     */
	uint32_t min_kib;        /* HVD_TCP_LANE_MIN of this rank, in KiB  */
	uint32_t one_way_kib;    /* the same for a broadcast's messages    */
	uint32_t local;          /* 1: also within a node (HVD_TCP_LANE_LOCAL) */
};

struct lane_op;

/* Listen (when the lane is wanted: HVD_TCP_LANE, no RDMA for UCX, and
 * the job spans nodes, one_node 0, or HVD_TCP_LANE_LOCAL); *mine says how
 * to reach this rank (nip 0 without a lane). */
hvd_status_t lane_open(struct lane_addr *mine, int world_size, int me,
		       int one_node);
/* Where the job's ranks outnumber their CPUs (the job is crowded,
 * net/transport.h): every message takes the lane from 16K, a
 * broadcast's as the others', unless HVD_TCP_LANE_MIN sets it.  Before
 * the addresses are exchanged; each pair takes the larger of its two
 * thresholds, so ranks that differ here still agree. */
void lane_crowded(struct lane_addr *mine);
/* Every rank's lane_addr, in world rank order (copied; this rank's
 * threshold is taken from it). */
hvd_status_t lane_start(const struct lane_addr *all, int n);
/* 1 when a message of len bytes to or from world rank w goes by the lane
 * (the same answer on both sides); one_way: a broadcast's message, whose
 * threshold is one_way_kib. */
int lane_wants(int w, size_t len, int one_way);
/* 1 when every rank of the world offers the lane (the same answer on
 * every rank: they all hold the same table). */
int lane_everywhere(void);

/* The most bytes lane_send_tail copies behind a message. */
#define LANE_TAIL_MAX 32

/* Post a send or a receive.  NULL with *st on an error. */
struct lane_op *lane_send(int w, uint64_t tag, const void *buf, size_t len,
			  hvd_status_t *st);
/* A send of len bytes from buf followed, in the same message, by
 * tail_len (at most LANE_TAIL_MAX) bytes from tail, which are copied. */
struct lane_op *lane_send_tail(int w, uint64_t tag, const void *buf,
			       size_t len, const void *tail, size_t tail_len,
			       hvd_status_t *st);
struct lane_op *lane_recv(int w, uint64_t tag, void *buf, size_t len,
			  hvd_status_t *st);
/* Done?  Then *status (0 ok, 1 longer than expected, 2 failed) and
 * *length (bytes that arrived), and op is freed.  0 while in flight. */
int lane_test(struct lane_op *op, int *status, size_t *length);
/* Abandon op (an error elsewhere): the lane no longer touches its buffer
 * once this returns; op is freed. */
void lane_cancel(struct lane_op *op);

/* Mismatched sizes (one end sends a message on the lane, the other
 * expects it on UCX, or the other way round: ranks that called a
 * collective with different counts).  lane_holds: a message with this
 * tag from w has waited on the lane for its receive for age seconds.
 * lane_quiet: receive op has not begun, and nothing came from its peer
 * on the lane for age seconds. */
int lane_holds(int w, uint64_t tag, double age);
int lane_quiet(struct lane_op *op, double age);

/* Move bytes; the number of operations completed. */
int lane_progress(void);
/* Operations posted and not yet done (progress and block only then). */
int lane_busy(void);
/* An fd that polls readable when the lane can move bytes, or -1; and
 * how long a waiter may block on it (ms, at most the one given). */
int lane_poll_fd(void);
int lane_block_ms(int ms);

/* Whether the processes of world ranks ws[0..n) are there, all at once
 * within limit seconds: out[k] LANE_PROBE_GONE when an address of ws[k]'s
 * lane refused a connection and none took one (its host answered:
 * nothing listens), LANE_PROBE_THERE when one took it, else
 * LANE_PROBE_UNKNOWN (no answer, no lane). */
enum { LANE_PROBE_UNKNOWN = 0, LANE_PROBE_THERE = 1, LANE_PROBE_GONE = 2 };
void lane_probe(const int *ws, int n, double limit, int *out);
/* Before an elastic re-forming's lane_close: keep this world's listening
 * socket open, unaccepted, for as long as the process lives (the last
 * 64 worlds').  A rank left behind in the old world that probes this one
 * (lane_probe) then finds it there, not gone: the kernel still takes
 * connections to the port, where a closed one would refuse them as a
 * dead process's does. */
void lane_park(void);
/* Say goodbye to every peer and close (hvd_finalize, and before an
 * elastic re-forming: the new world opens its own, transport.h's
 * transport_agree_world). */
void lane_close(void);

#pragma GCC visibility pop

#endif /* HVD_NET_LANE_H */

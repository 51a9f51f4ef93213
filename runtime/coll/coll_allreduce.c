/*
 * coll_allreduce.c - allreduce and reducescatter on host memory: the
 * algorithm coll_select() picks, recursive doubling for small messages
 * (the service allreduce, net/service.h), the ring for large ones
 * (coll_ring.c), shared memory within a node and the hierarchical
 * composition across nodes.
 *
 * AVERAGE is reduced as SUM everywhere (the reduction kernels' contract),
 * so every algorithm sees four ops, and divided once: inside the shared-
 * memory pipeline step by step while the data is in the cache, by the
 * hierarchical allreduce on its slice before the allgather, by the others
 * in a pass at the end.
 *
 * Hierarchical allreduce (all members spread evenly over several nodes):
 *   1. shm_reduce_scatter within the node: local rank i holds slice i of
 *      the node's sum;
 *   2. allreduce of slice i over UCX among the ranks with local rank i
 *      (one rank per node, "cross" communicator), all slices at once;
 *   3. shm_allgather_slices within the node.
 * Inter-node traffic is 1/local_size of the flat ring's per rank, and the
 * node-local steps never copy through the transport.  Up to
 * HVD_HIER_LEADER_MAX bytes (32K) latency rules instead: a shared-memory
 * allreduce within the node, the allreduce among the node leaders (local
 * rank 0) alone, and a shared-memory broadcast from each leader.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "kernels/kernels.h"
#include "net/service.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hvd_status_t ring_allreduce(hvd_comm_t *comm, const void *src,
				   void *dst, size_t count, hvd_dtype_t dt,
				   hvd_op_t op)
{
	int n = comm->net.size;
	size_t esz = hvd_dtype_size(dt), *off, *len;
	struct xfer x;

	off = malloc(2 * (size_t)n * sizeof(size_t));
	if (!off)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	len = off + n;
	for (int b = 0; b < n; b++) {
		off[b] = hvd_reducescatter_offset(count, b, n) * esz;
		len[b] = hvd_reducescatter_count(count, b, n) * esz;
	}
	xfer_begin(&x, &comm->net);
	if (ring_reduce_scatter(&x, src, dst, NULL, count, dt, op) == HVD_OK)
		ring_allgather(&x, dst, off, len);
	free(off);
	return xfer_end(&x);
}

static hvd_status_t halving_allreduce(hvd_comm_t *comm, const void *src,
				      void *dst, size_t count, hvd_dtype_t dt,
				      hvd_op_t op);

hvd_status_t coll_allreduce_flat(hvd_comm_t *comm, const void *sendbuf,
				 void *recvbuf, size_t count, hvd_dtype_t dt,
				 hvd_op_t op)
{
	const struct coll_tuning *t = coll_tuning();
	const void *src = coll_src(sendbuf, recvbuf);
	size_t bytes = count * hvd_dtype_size(dt);
	enum coll_algo a = t->algo[CK_ALLREDUCE];

	if (a != ALGO_RD && a != ALGO_RING && a != ALGO_HALVING)
		a = coll_allreduce_rd(t, bytes, count, comm->net.size)
			    ? ALGO_RD
			: coll_allreduce_halving(t, bytes, count,
						 comm->net.size)
			    ? ALGO_HALVING
			    : ALGO_RING;
	if (a == ALGO_RD || comm->net.size == 1)
		return svc_allreduce(&comm->net, src, recvbuf, count, dt, op);
	if (a == ALGO_HALVING)
		return halving_allreduce(comm, src, recvbuf, count, dt, op);
	return ring_allreduce(comm, src, recvbuf, count, dt, op);
}

/* ------------------------------------------------------ hierarchy */

static hvd_status_t hier_allreduce(hvd_comm_t *comm, const void *src,
				   void *dst, size_t count, hvd_dtype_t dt,
				   hvd_op_t op, double scale)
{
	shm_group_t *shm = coll_shm(comm->node);
	int lr = comm->node->net.rank, ls = comm->node->net.size, f;
	size_t esz = hvd_dtype_size(dt);
	size_t off = hvd_reducescatter_offset(count, lr, ls);
	size_t cnt = hvd_reducescatter_count(count, lr, ls);
	hvd_status_t st, st2;
	char *slice = (char *)dst + off * esz;

	st = shm_reduce_scatter(shm, src, dst, count, dt, op);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical allreduce, "
					    "intra-node reduce-scatter");
	shm_away(shm, 1);
	st = coll_allreduce_flat(comm->cross, slice, slice, cnt, dt, op);
	shm_away(shm, 0);
	if (st == HVD_OK && scale != 1.0)
		reduce_scale(slice, cnt, dt, scale);
	/* Even after a cross-node failure the node-mates are waiting in
	 * the allgather: take part so that they are not left hanging. */
	st2 = shm_allgather_slices(shm, dst, count, dt);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical allreduce, "
					    "inter-node step");
	if (st2 != HVD_OK)
		return hvd_error_prefix(st2, "hierarchical allreduce, "
					     "intra-node allgather");
	/* A node-mate may have failed its inter-node step while ours
	 * succeeded: do not return its garbage slice as a result. */
	f = transport_group_failed(&comm->net);
	if (f >= 0)
		return hvd_error(HVD_ERR_PEER_FAILED,
				 "hvd: rank %d failed: %s", f,
				 transport_fail_reason(f));
	return HVD_OK;
}

/* Small messages: the whole sum through the node leader (local rank 0).
 * Splitting 8 bytes into slices buys nothing, and with every local rank
 * on the network at once (2 x 2 on two cores) four processes take turns
 * at two cores for one round trip each.  Here the node-mates sleep in the
 * broadcast while the leaders alone make the exchange.  The leader's
 * status travels in front of the result (struct leader_hdr). */
hvd_status_t hier_allreduce_small(hvd_comm_t *comm, const void *src,
				  void *dst, size_t count, hvd_dtype_t dt,
				  hvd_op_t op, double scale)
{
	shm_group_t *shm = coll_shm(comm->node);
	size_t bytes = count * hvd_dtype_size(dt);
	int leader = comm->node->net.rank == 0;
	struct leader_hdr *h;
	hvd_status_t st;
	char *buf;

	st = shm_allreduce(shm, src, dst, count, dt, op, 1.0);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical allreduce, "
					    "intra-node reduction");
	buf = coll_scratch(comm, sizeof(*h) + bytes);
	if (!buf)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	h = (struct leader_hdr *)buf;
	if (leader) {
		shm_away(shm, 1);
		st = coll_allreduce_flat(comm->cross, dst, dst, count, dt, op);
		shm_away(shm, 0);
		if (st == HVD_OK && scale != 1.0)
			reduce_scale(dst, count, dt, scale);
		leader_hdr_set(h, st, comm->cross);
		memcpy(buf + sizeof(*h), dst, bytes);
	}
	/* after a failed inter-node step too: the node-mates wait here */
	st = shm_broadcast(shm, buf, sizeof(*h) + bytes, 0);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical allreduce, "
					    "intra-node broadcast");
	st = leader_hdr_status(h, leader, "hierarchical allreduce");
	if (st == HVD_OK && !leader)
		memcpy(dst, buf + sizeof(*h), bytes);
	return st;
}

static hvd_status_t direct_allreduce(hvd_comm_t *comm, const void *src,
				     void *dst, size_t count, hvd_dtype_t dt,
				     hvd_op_t op);

hvd_status_t host_allreduce(hvd_comm_t *comm, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dt,
			    hvd_op_t op)
{
	const void *src = coll_src(sendbuf, recvbuf);
	hvd_op_t rop = op == HVD_AVERAGE ? HVD_SUM : op;
	size_t esz = hvd_dtype_size(dt);
	struct coll_place p;
	hvd_status_t st;
	enum coll_algo a;
	double scale;

	coll_place_of(comm, &p);
	a = coll_select(coll_tuning(), CK_ALLREDUCE, count * esz, count, &p);
	if (a == ALGO_SHM && !coll_shm(comm))
		a = ALGO_AUTO;
	if (a == ALGO_HIER && !coll_hier_ready(comm))
		a = ALGO_AUTO;
	if (hvd_log_enabled(HVD_LOG_TRACE))
		hvd_log(HVD_LOG_TRACE, "allreduce ctx %u: %zu x %s: %s",
			comm->net.ctx, count, hvd_dtype_name(dt),
			coll_algo_name(a));
	scale = op == HVD_AVERAGE ? 1.0 / comm->net.size : 1.0;
	switch (a) {
	case ALGO_SHM:
		st = shm_allreduce(coll_shm(comm), src, recvbuf, count, dt,
				   rop, scale);
		scale = 1.0; /* done */
		break;
	case ALGO_HIER:
		st = count * esz <= coll_tuning()->hier_leader_max
			     ? hier_allreduce_small(comm, src, recvbuf, count,
						    dt, rop, scale)
			     : hier_allreduce(comm, src, recvbuf, count, dt,
					      rop, scale);
		scale = 1.0;
		break;
	case ALGO_RING:
		st = ring_allreduce(comm, src, recvbuf, count, dt, rop);
		break;
	case ALGO_RD:
		st = svc_allreduce(&comm->net, src, recvbuf, count, dt, rop);
		break;
	case ALGO_DIRECT:
		st = direct_allreduce(comm, src, recvbuf, count, dt, rop);
		break;
	case ALGO_HALVING:
		st = halving_allreduce(comm, src, recvbuf, count, dt, rop);
		break;
	default:
		st = coll_allreduce_flat(comm, src, recvbuf, count, dt, rop);
		break;
	}
	if (st != HVD_OK)
		return coll_fail(comm, st, "allreduce of %zu x %s", count,
				 hvd_dtype_name(dt));
	if (scale != 1.0)
		reduce_scale(recvbuf, count, dt, scale);
	return HVD_OK;
}

/*
 * Larger reducescatters across even nodes: every byte crosses between
 * nodes once, where the allreduce-then-slice sends it twice and the flat
 * ring over all members pays a hop per member.  Each member copies its
 * input into scratch with the blocks reordered by (local index, cross
 * rank) and padded to the largest block size q, so that the node's
 * reduce-scatter hands local index i exactly the blocks of its own cross
 * group: slots i*nc .. i*nc+nc-1.  The ring reduce-scatter among the
 * cross group then leaves cross rank c its own slot, fully reduced.  No
 * step follows within the node, so a failed inter-node step is an error
 * on its own cross group; node-mates of other groups whose ring completed
 * have their whole result, and learn of the dead rank from the failure
 * notice at the latest in their next collective.
 */
static hvd_status_t hier_reducescatter(hvd_comm_t *comm, const void *src,
				       void *slice, size_t count,
				       hvd_dtype_t dt, hvd_op_t op)
{
	shm_group_t *shm = coll_shm(comm->node);
	int n = comm->net.size, me = comm->node->net.rank;
	int nc = comm->cross->net.size;
	size_t esz = hvd_dtype_size(dt);
	size_t q = hvd_reducescatter_count(count, 0, n) * esz;
	size_t mine = hvd_reducescatter_count(count, comm->net.rank, n) * esz;
	char *pack = coll_scratch(comm, (size_t)n * q), *region;
	hvd_status_t st;
	struct xfer x;

	if (!pack)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int w = 0; w < n; w++) {
		char *to = pack + ((size_t)comm->local_index[w] * nc +
				   (size_t)comm->cross_index[w]) *
					  q;
		size_t len = hvd_reducescatter_count(count, w, n) * esz;

		memcpy(to,
		       (const char *)src +
			       hvd_reducescatter_offset(count, w, n) * esz,
		       len);
		memset(to + len, 0, q - len);
	}
	st = shm_reduce_scatter(shm, pack, pack, (size_t)n * (q / esz), dt,
				op);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical reducescatter, "
					    "intra-node reduce-scatter");
	region = pack + (size_t)me * nc * q;
	shm_away(shm, 1);
	xfer_begin(&x, &comm->cross->net);
	ring_reduce_scatter(&x, region, region, NULL, (size_t)nc * (q / esz),
			    dt, op);
	st = xfer_end(&x);
	shm_away(shm, 0);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical reducescatter, "
					    "inter-node step");
	if (mine)
		memcpy(slice, region + (size_t)comm->cross->net.rank * q, mine);
	return HVD_OK;
}

/*
 * Reducescatters among a few ranks ("direct"): every rank sends
 * each other rank that rank's block, all at once, and folds the p - 1
 * blocks it receives into its own as they land.  One round, where
 * recursive doubling moves the whole buffer log2(p) times (three ranks:
 * three times, with the hand-over and the hand-back) and the ring makes
 * p - 1 rounds one after the other.  The own block is read from src and
 * the sum written to dst (they may be the same memory); tmp (from
 * rs_direct_scratch) holds the p - 1 incoming blocks, each with the
 * sender's call behind it (below), so that nothing a pending operation
 * points at is freed before xfer_end; the calls sent are copied when
 * posted (xfer_send_tail).
 *
 * A rank receives only its own block from each peer, so ranks whose
 * counts differ but split to the same block here would see nothing
 * wrong (3 ranks, 16384 and 16386 floats: block 0 is 5462 either way;
 * 2 ranks, 16384 and 16385: block 1 is 8192 either way) and return
 * HVD_OK while the others fail.  So each block carries the sender's
 * count, type and op behind it, in the same message (xfer_send_tail: a
 * gather, nothing copied), and any difference is HVD_ERR_MISMATCH on
 * every rank.
 */
static size_t round8(size_t v)
{
	return (v + 7) / 8 * 8;
}

/*
 * The scratch: n - 1 receive slots of stride bytes (a block and the call
 * behind it).
 */
struct rs_layout {
	size_t bl, stride, total;
};

static void rs_layout_of(struct rs_layout *l, int n, int r, size_t count,
			 size_t esz)
{
	l->bl = hvd_reducescatter_count(count, r, n) * esz;
	l->stride = round8(l->bl + sizeof(struct rs_call));
	l->total = (size_t)(n - 1) * l->stride;
}

/* The scratch rs_direct takes, kept on comm (NULL: out of memory, and
 * the error is set). */
static char *rs_direct_scratch(hvd_comm_t *comm, size_t count, size_t esz)
{
	struct rs_layout l;
	char *tmp;

	rs_layout_of(&l, comm->net.size, comm->net.rank, count, esz);
	tmp = coll_scratch(comm, l.total);
	if (!tmp)
		hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory (%zu bytes)",
			  l.total);
	return tmp;
}

static hvd_status_t rs_direct(struct xfer *x, const char *src, char *dst,
			      char *tmp, size_t count, hvd_dtype_t dt,
			      hvd_op_t op)
{
	int n = x->g->size, r = x->me, *ops;
	size_t esz = hvd_dtype_size(dt);
	size_t mine = hvd_reducescatter_count(count, r, n);
	struct rs_layout l;
	struct rs_call me = rs_call_of(count, dt, op), theirs;

	rs_layout_of(&l, n, r, count, esz);
	ops = malloc((size_t)n * sizeof(int));
	if (!ops)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
	/* Everything posted before anything is waited for; the receives
	 * first, so that the blocks land in place. */
	for (int s = 1; s < n; s++) {
		int from = (r - s + n) % n, to = (r + s) % n;
		size_t tl = hvd_reducescatter_count(count, to, n) * esz;
		const char *blk =
		    src + hvd_reducescatter_offset(count, to, n) * esz;

		ops[s] = xfer_recv(x, from, tmp + (size_t)(s - 1) * l.stride,
				   l.bl + sizeof(me));
		if (ops[s] < 0 ||
		    xfer_send_tail(x, to, blk, tl, &me, sizeof(me)) < 0)
			goto out;
	}
	src += hvd_reducescatter_offset(count, r, n) * esz;
	if (dst != src)
		memcpy(dst, src, l.bl);
	for (int s = 1; s < n; s++) {
		const char *in = tmp + (size_t)(s - 1) * l.stride;

		if (xfer_wait(x, ops[s]) != HVD_OK)
			goto out;
		memcpy(&theirs, in + l.bl, sizeof(theirs));
		if (rs_call_apart(x, (r - s + n) % n, &theirs, &me))
			goto out;
		reduce_apply(dst, in, mine, dt, op);
	}
	xfer_waitall(x);
out:
	free(ops);
	return x->st;
}

/*
 * The allreduce of three or four ranks ("direct", coll_select.c): the
 * direct reducescatter leaves each rank the sum of its block in place,
 * then every rank sends that block to every other at once and receives
 * theirs in place.  Two rounds, where the ring makes 2(p - 1) one after
 * the other.  The reducescatter has checked the counts (rs_direct), and
 * waited for its sends, so the second round may land on what the first
 * sent from.
 */
static hvd_status_t direct_allreduce(hvd_comm_t *comm, const void *src,
				     void *dst, size_t count, hvd_dtype_t dt,
				     hvd_op_t op)
{
	int n = comm->net.size, r = comm->net.rank;
	size_t esz = hvd_dtype_size(dt);
	char *own = (char *)dst + hvd_reducescatter_offset(count, r, n) * esz;
	size_t own_len = hvd_reducescatter_count(count, r, n) * esz;
	char *tmp = rs_direct_scratch(comm, count, esz);
	struct xfer x;

	if (!tmp)
		return HVD_ERR_NO_MEMORY;
	xfer_begin(&x, &comm->net);
	if (rs_direct(&x, src, own, tmp, count, dt, op) == HVD_OK) {
		for (int s = 1; s < n; s++) {
			int from = (r - s + n) % n, to = (r + s) % n;
			size_t at = hvd_reducescatter_offset(count, from, n);
			size_t len = hvd_reducescatter_count(count, from, n);

			if (xfer_recv(&x, from, (char *)dst + at * esz,
				      len * esz) < 0 ||
			    xfer_send(&x, to, own, own_len) < 0)
				break;
		}
	}
	return xfer_end(&x);
}

/* The first element after blocks [0, b) of a reducescatter of count. */
static size_t blocks_end(size_t count, int b, int n)
{
	return b >= n ? count : hvd_reducescatter_offset(count, b, n);
}

/*
 * Recursive halving (a power of two of ranks, coll_select.c): in each of
 * log2(n) rounds a rank and its partner (rank ^ m) split the blocks they
 * still hold in two, each sends the other the half it gives up and adds
 * what comes to the half it keeps; after the last round a rank holds the
 * sum of its own block.  Every byte of (n-1)/n of the buffer crosses
 * once, in log2(n) messages, where the direct algorithm sends n - 1 and
 * the ring takes n - 1 rounds, and rd sends the whole buffer each round.
 * The first round adds what comes to the input into acc; later rounds
 * add to acc in place, sending from its other half (a part no later
 * round writes).  acc is scratch, or with whole (the allreduce's output)
 * the same places in whole: the blocks a round gives up are the ones the
 * allgather overwrites, and the own block is left where it belongs.
 *
 * Every message carries the sender's call (count, type, op) behind it,
 * as rs_direct's blocks do, and a rank checks its partner's before it
 * sends in the next round.  So a rank that returns HVD_OK had, through
 * its partners and theirs in earlier rounds (a binomial tree over every
 * rank), all calls alike: where counts differ but every message has the
 * size its receiver expects (4 ranks, 16384 floats on rank 0 and 16386
 * on the others), no rank completes, and the ones left waiting end on
 * the mismatch notice.
 */
static hvd_status_t rs_halving(hvd_comm_t *comm, struct xfer *x,
			       const char *src, char *dst, char *whole,
			       size_t count, hvd_dtype_t dt, hvd_op_t op,
			       int n, int r, int rem)
{
	int lo = 0, hi = n;
	size_t esz = hvd_dtype_size(dt), cs = sizeof(struct rs_call);
	size_t base = 0, first, most, room;
	const char *from = src;
	struct rs_call me = rs_call_of(count, dt, op);
	char *acc, *in;

	/* The first round keeps the most (its half of the blocks, from
	 * first).  The scratch: in (a part and a call), then acc unless
	 * whole holds it. */
	first = r < n / 2 ? 0 : blocks_end(count, n / 2, n);
	most = r < n / 2 ? blocks_end(count, n / 2, n) : count - first;
	room = round8(most * esz + cs);
	in = coll_scratch(comm, whole ? room : 2 * room);
	if (!in)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory (%zu bytes)",
					 whole ? room : 2 * room);
	acc = whole ? whole + first * esz : in + room;
	for (int m = n / 2; m >= 1; m /= 2) {
		int peer = svc_fold_rank(r ^ m, rem), mid = lo + (hi - lo) / 2;
		int low = r < mid;
		int klo = low ? lo : mid, khi = low ? mid : hi;
		int slo = low ? mid : lo, shi = low ? hi : mid;
		size_t ko = blocks_end(count, klo, n);
		size_t kb = (blocks_end(count, khi, n) - ko) * esz;
		size_t so = blocks_end(count, slo, n);
		size_t sb = (blocks_end(count, shi, n) - so) * esz;
		struct rs_call c;
		int rv;

		rv = xfer_recv(x, peer, in, kb + cs);
		if (rv < 0 ||
		    xfer_send_tail(x, peer, from + (so - base) * esz, sb, &me,
				   cs) < 0 ||
		    xfer_wait(x, rv) != HVD_OK)
			return x->st;
		memcpy(&c, in + kb, cs);
		if (rs_call_apart(x, peer, &c, &me))
			return x->st;
		if (m == n / 2) { /* from the input (acc may be it) */
			reduce_apply3(acc, src + ko * esz, in, kb / esz, dt,
				      op);
			from = acc;
			base = ko;
		} else {
			reduce_apply(acc + (ko - base) * esz, in, kb / esz, dt,
				     op);
		}
		lo = klo;
		hi = khi;
	}
	/* The sends read acc and, in place, dst's buffer: done first. */
	if (xfer_waitall(x) == HVD_OK && count) {
		from += (hvd_reducescatter_offset(count, r, n) - base) * esz;
		if (from != dst)
			memcpy(dst, from,
			       hvd_reducescatter_count(count, r, n) * esz);
	}
	return x->st;
}

/*
 * The allreduce of a power of two of ranks past the small sizes
 * (coll_select.c; Rabenseifner's): recursive halving leaves each rank
 * the sum of its block, then recursive doubling gathers the blocks, a
 * rank and its partner (rank ^ 1, ^ 2, ...) swapping the aligned groups
 * of blocks they hold, which doubles each round.  2 log2(p) rounds where
 * the ring makes 2(p - 1), each byte of 2(p-1)/p of the buffer sent
 * once.  The halving checked every call (rs_halving); a rank that failed
 * there sends nothing more, and its partners' waits end on the notice.
 * The blocks sent from dst are never written again in the collective.
 *
 * Any other number of ranks p folds first, as MPICH does: with q the
 * largest power of two below p and rem = p - q, each even rank of the
 * first 2 x rem sends its whole input, its call behind, to the odd rank
 * after it, which adds it to its own and takes part in the halving and
 * doubling over q ranks (svc_fold_rank, recursive doubling's pairing);
 * at the end it sends the sum back.
 * Two more messages of the whole buffer, where a ring of p ranks takes
 * 2(p - 1) rounds: worth it where a message's latency is dear and p
 * large (coll_select.c).  The folded-out rank sends before it posts the
 * receive of the sum, so that an in-place sum never lands on what it
 * still sends.
 */
static hvd_status_t halving_allreduce(hvd_comm_t *comm, const void *src,
				      void *dst, size_t count, hvd_dtype_t dt,
				      hvd_op_t op)
{
	int n = comm->net.size, r = comm->net.rank, q = svc_pof2(n);
	int rem = n - q, vr, rv;
	size_t esz = hvd_dtype_size(dt), bytes = count * esz;
	size_t cs = sizeof(struct rs_call);
	struct rs_call me = rs_call_of(count, dt, op), c;
	char *out = dst, *in;
	struct xfer x;

	xfer_begin(&x, &comm->net);
	if (r < 2 * rem && r % 2 == 0) {
		rv = xfer_send_tail(&x, r + 1, src, bytes, &me, cs);
		if (rv >= 0 && xfer_wait(&x, rv) == HVD_OK &&
		    (rv = xfer_recv(&x, r + 1, out, bytes)) >= 0)
			xfer_wait(&x, rv);
		return xfer_end(&x);
	}
	if (r < 2 * rem) {
		in = coll_scratch(comm, bytes + cs);
		if (!in) {
			x.st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory (%zu bytes)",
					 bytes + cs);
			return xfer_end(&x);
		}
		rv = xfer_recv(&x, r - 1, in, bytes + cs);
		if (rv < 0 || xfer_wait(&x, rv) != HVD_OK)
			return xfer_end(&x);
		memcpy(&c, in + bytes, cs);
		if (rs_call_apart(&x, r - 1, &c, &me))
			return xfer_end(&x);
		if (count)
			reduce_apply3(out, src, in, count, dt, op);
		src = out;
	}
	vr = r < 2 * rem ? r / 2 : r - rem;
	if (rs_halving(comm, &x, src,
		       out + hvd_reducescatter_offset(count, vr, q) * esz, out,
		       count, dt, op, q, vr, rem) == HVD_OK)
		for (int m = 1; m < q; m <<= 1) {
			int peer = vr ^ m, mine = vr & ~(m - 1);
			int theirs = peer & ~(m - 1);
			int partner = svc_fold_rank(peer, rem);
			size_t mo = blocks_end(count, mine, q);
			size_t to = blocks_end(count, theirs, q);

			rv = xfer_recv(
			    &x, partner, out + to * esz,
			    (blocks_end(count, theirs + m, q) - to) * esz);
			if (rv < 0 ||
			    xfer_send(&x, partner, out + mo * esz,
				      (blocks_end(count, mine + m, q) - mo) *
					  esz) < 0 ||
			    xfer_wait(&x, rv) != HVD_OK)
				break;
		}
	if (x.st == HVD_OK && r < 2 * rem)
		xfer_send(&x, r - 1, out, bytes);
	return xfer_end(&x);
}

hvd_status_t host_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dt,
				hvd_op_t op)
{
	hvd_op_t rop = op == HVD_AVERAGE ? HVD_SUM : op;
	size_t esz = hvd_dtype_size(dt);
	int n = comm->net.size, r = comm->net.rank;
	size_t mine = hvd_reducescatter_count(count, r, n);
	size_t moff = hvd_reducescatter_offset(count, r, n);
	int in_place = sendbuf == HVD_IN_PLACE || sendbuf == recvbuf;
	const void *src = in_place ? recvbuf : sendbuf;
	struct coll_place p;
	struct xfer x;
	hvd_status_t st;
	enum coll_algo a;
	char *full;
	int slice_only, direct = 0;

	coll_place_of(comm, &p);
	a = coll_select(coll_tuning(), CK_REDUCESCATTER, count * esz, count,
			&p);
	if ((a == ALGO_SHM && !coll_shm(comm)) ||
	    (a == ALGO_HIER && !coll_hier_ready(comm)))
		a = coll_select_flat(coll_tuning(), CK_REDUCESCATTER,
				     count * esz, count, &p);
	if (hvd_log_enabled(HVD_LOG_TRACE))
		hvd_log(HVD_LOG_TRACE, "reducescatter ctx %u: %zu x %s: %s",
			comm->net.ctx, count, hvd_dtype_name(dt),
			coll_algo_name(a));
	/* In place, recvbuf holds the whole input and is scratch too.  Out
	 * of place on one node there is no scratch: ranks reduce their slice
	 * straight from the segment into recvbuf.  By local index, the
	 * reordered copy is the scratch (kept on comm). */
	slice_only =
	    ((a == ALGO_SHM || a == ALGO_DIRECT || a == ALGO_HALVING) &&
	     !in_place) ||
	    (a == ALGO_HIER &&
	     !coll_leaders(coll_tuning(), CK_REDUCESCATTER, count * esz, &p));
	full = slice_only ? NULL : in_place ? recvbuf : malloc(count * esz);
	if (!full && !slice_only)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory (%zu bytes)",
				 count * esz);
	switch (a) {
	case ALGO_SHM:
		st = !in_place ? shm_reduce_scatter_slice(coll_shm(comm),
							    sendbuf, recvbuf,
							    count, dt, rop)
				: shm_reduce_scatter(coll_shm(comm), src, full,
						     count, dt, rop);
		break;
	case ALGO_RD:
		st = svc_allreduce(&comm->net, src, full, count, dt, rop);
		break;
	case ALGO_DIRECT: {
		/* In place, the sum lands on this rank's block of the input
		 * (never sent) and is moved to the front below. */
		char *tmp = rs_direct_scratch(comm, count, esz);

		if (!tmp) {
			st = HVD_ERR_NO_MEMORY;
			break;
		}
		xfer_begin(&x, &comm->net);
		rs_direct(&x, src, in_place ? full + moff * esz : recvbuf, tmp,
			  count, dt, rop);
		st = xfer_end(&x);
		break;
	}
	case ALGO_HALVING:
		xfer_begin(&x, &comm->net);
		rs_halving(comm, &x, src,
			   in_place ? full + moff * esz : recvbuf, NULL, count,
			   dt, rop, n, r, 0);
		st = xfer_end(&x);
		break;
	case ALGO_HIER:
		/* across even nodes: small, the whole sum through the node
		 * leaders, then the slice; larger, by local index */
		st = slice_only ? hier_reducescatter(comm, src, recvbuf, count,
						     dt, rop)
				: hier_allreduce_small(comm, src, full, count,
						       dt, rop, 1.0);
		break;
	default:
		/* Out of place, this rank's block is reduced straight into
		 * recvbuf: a copy of the slice less (2 netns nodes x 1 rank,
		 * 16 MiB: as much CPU as the reduction). */
		direct = !in_place;
		xfer_begin(&x, &comm->net);
		ring_reduce_scatter(&x, src, full, direct ? recvbuf : NULL,
				    count, dt, rop);
		st = xfer_end(&x);
		break;
	}
	if (st == HVD_OK) {
		if (full && !direct)
			memmove(recvbuf, full + moff * esz, mine * esz);
		if (op == HVD_AVERAGE)
			reduce_scale(recvbuf, mine, dt, 1.0 / n);
	}
	if (full != recvbuf)
		free(full);
	if (st != HVD_OK)
		return coll_fail(comm, st, "reducescatter of %zu x %s", count,
				 hvd_dtype_name(dt));
	return HVD_OK;
}

/*
 * shm.c - intra-node collectives through one POSIX shared-memory segment
 * per node-local group (the contract is shm.h; doc/design.md, "Shared
 * memory", explains the algorithms and their knobs).
 *
 * Segment layout (all offsets page or 128-byte aligned):
 *
 *   header      magic, layout parameters chosen by the creator, attach
 *               count, "dead" word set by whoever first sees a peer die
 *   ctl[n]      per member: its pid (and pid namespace) and its flags,
 *               each 64-bit flag on its own 128-byte line (one writer
 *               per line: the member)
 *   small[n][2] per member, two copy-in buffers of small_max bytes
 *   slot[n][nbuf]  per member, nbuf pipeline buffers of chunk bytes, each
 *               split into n regions, region p carrying data for slice p
 *
 * Flags are monotonically increasing sequence numbers, never reset, and
 * compared with >=: a fast member may already be one call ahead, and reset
 * flags are how other shm allreduces lost wake-ups.  Data is published
 * with a release store of the flag after it, and read after an acquire
 * load of the flag.
 *
 * Small messages (<= small_max bytes): each member copies its input into
 * its small buffer of parity seq&1 (inline in the flag's own cache line up
 * to SHM_INLINE bytes), release-stores seq, waits until every peer's seq
 * for this parity reached it, and reduces all members' buffers, in rank
 * order, straight into its output.  One synchronisation per call and no
 * exit barrier: a member can reuse parity p at call s+2 only after it saw
 * every peer enter call s+1, i.e. finish reading call s.
 *
 * Large messages: the buffer is split into n slices (Horovod's even split,
 * so that shm_reduce_scatter hands the hierarchical allreduce the slices it
 * expects), each slice into steps of R elements.  At step k member r copies
 * step k of every other slice p into region p of its pipeline buffer k%nbuf
 * and publishes "in"; it then reduces step k of its own slice from its own
 * input and the peers' regions r (no extra copy of its own data), writes
 * the result to its output and to its own region r, publishes "red"; and,
 * one step behind so that it rarely waits, copies the peers' reduced
 * regions of step k-1 into its output and publishes "done".  A buffer is
 * refilled only when every peer's "done" shows it finished with it.  While
 * r reduces step k its peers are already copying step k+1: the copy and
 * the reduction overlap across members, and the data a peer reads was just
 * written by another core, so it comes from the shared cache, not DRAM.
 *
 * Waiting: spin with pause for HOROVOD_SHM_SPIN polls (about 10 us;
 * almost nothing when the group has more members than the node has CPUs),
 * then sched_yield a few times (the peer may be waiting for this CPU),
 * then sleep on a futex on the flag, which its publisher
 * wakes when it sees a sleeper: a waiting rank must not burn the CPU time
 * of the rank it waits for on a shared or oversubscribed node.  Every
 * 20 ms asleep the laggard's pid is checked; a dead peer, or no progress
 * within HOROVOD_PEER_TIMEOUT seconds, ends the call with an error naming
 * it, and the group is marked failed so that its other members give up
 * too.
 */
#include "config.h"

#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ small path */

static inline struct shm_flag *small_line(shm_group_t *g, int r, uint64_t s)
{
	return (s & 1) ? &g->ctl[r].small1 : &g->ctl[r].small0;
}

static inline unsigned char *small_buf(shm_group_t *g, int r, uint64_t s,
				       size_t bytes)
{
	if (bytes <= SHM_INLINE)
		return small_line(g, r, s)->data;
	return g->small + ((size_t)r * 2 + (s & 1)) * g->small_max;
}

/* Publish bytes of src (may be NULL) as this member's contribution to
 * small call s and wait for every peer's. */
static hvd_status_t small_exchange(shm_group_t *g, const void *src,
				   size_t bytes, uint64_t *sp)
{
	uint64_t s = ++g->sseq;

	set_budget(g, bytes);

	if (src && bytes)
		memcpy(small_buf(g, g->rank, s, bytes), src, bytes);
	publish(small_line(g, g->rank, s), s);
	for (int q = 0; q < g->n; q++) {
		hvd_status_t st;

		if (q == g->rank)
			continue;
		st = wait_ge(g, small_line(g, q, s), s, q);
		if (st != HVD_OK)
			return st;
	}
	/* Every peer has now entered call s, so none reads our line of
	 * parity s+1 any more: take it back into this core's cache in
	 * exclusive state now, instead of paying that coherence round trip
	 * when the next call writes it (the XHC trick). */
	prefetch_w(small_line(g, g->rank, s + 1));
	if (bytes > SHM_INLINE) {
		/* and the start of the buffer, guessing the next call is
		 * about as large as this one */
		unsigned char *next = small_buf(g, g->rank, s + 1, bytes);
		size_t lim = bytes < SHM_PREFETCH ? bytes : SHM_PREFETCH;

		for (size_t off = 0; off < lim; off += 64)
			prefetch_w(next + off);
	}
	*sp = s;
	return HVD_OK;
}

/* ----------------------------------------------------- collectives */

static int in_place(const void *send, const void *recv)
{
	return send == HVD_IN_PLACE || send == recv;
}

static hvd_status_t check_args(shm_group_t *g, const char *what,
			       const void *send, const void *recv, size_t count,
			       hvd_dtype_t dtype, hvd_op_t op)
{
	hvd_status_t st = check(g, what);

	if (st != HVD_OK)
		return st;
	if ((unsigned)dtype >= HVD_DTYPE_COUNT)
		return hvd_error(HVD_ERR_BAD_TYPE,
				 "shared-memory %s: unknown type %d", what,
				 (int)dtype);
	if ((unsigned)op >= HVD_OP_COUNT)
		return hvd_error(HVD_ERR_BAD_OP,
				 "shared-memory %s: unknown op %d", what,
				 (int)op);
	if (count && (!send || !recv))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "shared-memory %s: NULL buffer with %zu "
				 "elements",
				 what, count);
	return HVD_OK;
}

hvd_status_t shm_allreduce(shm_group_t *g, const void *sendbuf, void *recvbuf,
			   size_t count, hvd_dtype_t dtype, hvd_op_t op,
			   double scale)
{
	hvd_status_t st =
	    check_args(g, "allreduce", sendbuf, recvbuf, count, dtype, op);
	size_t es = hvd_dtype_size(dtype), bytes = count * es;
	const void *send = in_place(sendbuf, recvbuf) ? recvbuf : sendbuf;
	uint64_t s;

	if (st != HVD_OK || count == 0)
		return st;
	if (g->n == 1) {
		if (send != recvbuf)
			memcpy(recvbuf, send, bytes);
		if (scale != 1.0)
			reduce_scale(recvbuf, count, dtype, scale);
		return HVD_OK;
	}
	if (bytes > g->small_max)
		return shm_pipeline(g, PIPE_ALLREDUCE, send, recvbuf, count, dtype,
				op, scale);
	st = small_exchange(g, send, bytes, &s);
	if (st != HVD_OK)
		return st;
	/* every member reduces all contributions in rank order: identical
	 * results everywhere.  The own contribution is read from the input
	 * (already in this core's cache), except in place by a member past
	 * the first two, whose input the first step overwrites: then from
	 * its slot. */
	{
		const void *src[2];
		int own_ok = send != recvbuf || g->rank < 2;

		for (int q = 0; q < 2; q++)
			src[q] = q == g->rank && own_ok
				     ? send
				     : (const void *)small_buf(g, q, s, bytes);
		reduce_apply3(recvbuf, src[0], src[1], count, dtype, op);
		for (int q = 2; q < g->n; q++)
			reduce_apply(
			    recvbuf,
			    q == g->rank && send != recvbuf
				? send
				: (const void *)small_buf(g, q, s, bytes),
			    count, dtype, op);
	}
	if (scale != 1.0)
		reduce_scale(recvbuf, count, dtype, scale);
	return HVD_OK;
}

/* Reduce-scatter into out, which holds this member's slice only. */
static hvd_status_t reduce_scatter(shm_group_t *g, const void *send,
				   unsigned char *out, size_t count,
				   hvd_dtype_t dtype, hvd_op_t op)
{
	size_t es = hvd_dtype_size(dtype), bytes = count * es;
	size_t off = hvd_reducescatter_offset(count, g->rank, g->n);
	size_t cnt = hvd_reducescatter_count(count, g->rank, g->n);
	hvd_status_t st;
	uint64_t s;

	if (g->n == 1) {
		if ((const unsigned char *)send + off * es != out)
			memcpy(out, (const unsigned char *)send + off * es,
			       cnt * es);
		return HVD_OK;
	}
	if (bytes > g->small_max)
		return shm_pipeline(g, PIPE_REDUCE_SCATTER, send, out, count, dtype,
				op, 1.0);
	st = small_exchange(g, send, bytes, &s);
	if (st != HVD_OK || cnt == 0)
		return st;
	reduce_apply3(out, small_buf(g, 0, s, bytes) + off * es,
		      small_buf(g, 1, s, bytes) + off * es, cnt, dtype, op);
	for (int q = 2; q < g->n; q++)
		reduce_apply(out, small_buf(g, q, s, bytes) + off * es, cnt,
			     dtype, op);
	return HVD_OK;
}

hvd_status_t shm_reduce_scatter(shm_group_t *g, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dtype,
				hvd_op_t op)
{
	hvd_status_t st =
	    check_args(g, "reduce-scatter", sendbuf, recvbuf, count, dtype, op);
	const void *send = in_place(sendbuf, recvbuf) ? recvbuf : sendbuf;
	size_t off;

	if (st != HVD_OK || count == 0)
		return st;
	off = hvd_reducescatter_offset(count, g->rank, g->n);
	return reduce_scatter(
	    g, send, (unsigned char *)recvbuf + off * hvd_dtype_size(dtype),
	    count, dtype, op);
}

hvd_status_t shm_reduce_scatter_slice(shm_group_t *g, const void *sendbuf,
				      void *recvslice, size_t count,
				      hvd_dtype_t dtype, hvd_op_t op)
{
	hvd_status_t st = check_args(g, "reduce-scatter", sendbuf, recvslice,
				     count, dtype, op);

	if (st != HVD_OK || count == 0)
		return st;
	if (in_place(sendbuf, recvslice))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "shared-memory reduce-scatter: the slice "
				 "variant needs separate input and output "
				 "buffers (use shm_reduce_scatter in place)");
	return reduce_scatter(g, sendbuf, recvslice, count, dtype, op);
}

hvd_status_t shm_allgather_slices(shm_group_t *g, void *buf, size_t count,
				  hvd_dtype_t dtype)
{
	hvd_status_t st =
	    check_args(g, "allgather", buf, buf, count, dtype, HVD_SUM);
	size_t es = hvd_dtype_size(dtype), bytes = count * es;
	size_t off, cnt;
	uint64_t s;

	if (st != HVD_OK || count == 0 || g->n == 1)
		return st;
	if (bytes > g->small_max)
		return shm_pipeline(g, PIPE_ALLGATHER, NULL, buf, count, dtype,
				HVD_SUM, 1.0);
	off = hvd_reducescatter_offset(count, g->rank, g->n);
	cnt = hvd_reducescatter_count(count, g->rank, g->n);
	/* each member's slice goes at its own offset of its small buffer */
	s = g->sseq + 1;
	memcpy(small_buf(g, g->rank, s, bytes) + off * es,
	       (unsigned char *)buf + off * es, cnt * es);
	st = small_exchange(g, NULL, 0, &s);
	if (st != HVD_OK)
		return st;
	for (int i = 1; i < g->n; i++) {
		int q = (g->rank + i) % g->n;

		off = hvd_reducescatter_offset(count, q, g->n);
		cnt = hvd_reducescatter_count(count, q, g->n);
		memcpy((unsigned char *)buf + off * es,
		       small_buf(g, q, s, bytes) + off * es, cnt * es);
	}
	return HVD_OK;
}

/* Every alltoall starts with one small exchange: the block size in a
 * header, then, for blocks up to shm_alltoall_small_max, the blocks for
 * the peers at their own offsets.  The header is always at the same place
 * of the small buffer (not inline in the flag line for the smallest
 * calls), so that members that disagree on the size read each other's
 * header, not bytes of an earlier call. */
#define A2A_HDR sizeof(uint64_t)
#define A2A_AT (SHM_INLINE + 1) /* small_buf()'s size for that place */

size_t shm_alltoall_small_max(const shm_group_t *g)
{
	return (g->small_max - A2A_HDR) / (size_t)g->n;
}

/* Larger blocks: steps of at most one region (a pipeline buffer's share
 * for one peer), member r copying step k of its block for p into region p
 * of its buffer and publishing "in", then, a step behind, copying region
 * r of every peer's buffer into its output and publishing "done". */
static hvd_status_t alltoall_pipe(shm_group_t *g, const unsigned char *send,
				  unsigned char *recv, size_t block)
{
	const int me = g->rank, n = g->n;
	const size_t rbytes = g->chunk / (size_t)n / 64 * 64;
	const size_t K = (block + rbytes - 1) / rbytes;
	const uint64_t base = g->step;

	set_budget(g, rbytes);
	shm_share_begin(g, block * (size_t)n);
	for (size_t k = 0; k <= K; k++) {
		if (k < K) {
			uint64_t s = base + k + 1, b = (base + k) % g->nbuf;
			size_t off = k * rbytes;
			size_t len =
			    block - off < rbytes ? block - off : rbytes;

			if (s > (uint64_t)g->nbuf)
				WAIT_ALL(g, done, s - (uint64_t)g->nbuf);
			for (int p = 0; p < n; p++)
				if (p != me)
					copy_share(g,
						   region(g, me, b, p, rbytes),
						   send + (size_t)p * block +
						       off,
						   len);
			publish_shared(g, &g->ctl[me].in, s);
		}
		if (k >= 1) {
			uint64_t s = base + k, b = (base + k - 1) % g->nbuf;
			size_t off = (k - 1) * rbytes;
			size_t len =
			    block - off < rbytes ? block - off : rbytes;

			WAIT_ALL(g, in, s);
			for (int i = 1; i < n; i++) {
				int p = (me + i) % n;

				hvd_copy(recv + (size_t)p * block + off,
					 region(g, p, b, me, rbytes), len);
			}
			publish(&g->ctl[me].done, s);
		}
	}
	g->step = base + K;
	shm_share_end(g, block * (size_t)n);
	return HVD_OK;
}

hvd_status_t shm_alltoall(shm_group_t *g, const void *sendbuf, void *recvbuf,
			  size_t block)
{
	const int me = g->rank, n = g->n;
	const int small = block <= shm_alltoall_small_max(g);
	const size_t hdr = A2A_HDR;
	const size_t total = hdr + (small ? block * (size_t)n : 0);
	const unsigned char *send =
	    in_place(sendbuf, recvbuf) ? recvbuf : sendbuf;
	unsigned char *recv = recvbuf, *mine;
	hvd_status_t st = check(g, "alltoall");
	uint64_t s, b64 = block;

	if (st != HVD_OK || block == 0)
		return st;
	if (!sendbuf || !recvbuf)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "shared-memory alltoall: NULL buffer with "
				 "%zu bytes per block",
				 block);
	/* the block size, and small blocks for the peers, into the own
	 * small buffer of this call's parity */
	s = g->sseq + 1;
	mine = small_buf(g, me, s, A2A_AT);
	memcpy(mine, &b64, hdr);
	if (small)
		for (int q = 0; q < n; q++)
			if (q != me) /* the own block goes straight to recv */
				memcpy(mine + hdr + (size_t)q * block,
				       send + (size_t)q * block, block);
	/* src NULL: already in place; the size: spin budget and the
	 * prefetch of the next call's buffer */
	st = small_exchange(g, NULL, total > A2A_AT ? total : A2A_AT, &s);
	if (st != HVD_OK)
		return st;
	for (int q = 0; q < n; q++) {
		uint64_t theirs;

		memcpy(&theirs, small_buf(g, q, s, A2A_AT), hdr);
		if (theirs != b64)
			return hvd_error(HVD_ERR_MISMATCH,
					 "alltoall: local rank %d sends blocks "
					 "of %llu bytes, this rank (local rank "
					 "%d) expects %zu",
					 q, (unsigned long long)theirs, me,
					 block);
	}
	if (small) {
		for (int i = 1; i < n; i++) {
			int q = (me + i) % n;

			memcpy(recv + (size_t)q * block,
			       small_buf(g, q, s, A2A_AT) + hdr +
				   (size_t)me * block,
			       block);
		}
	} else {
		st = alltoall_pipe(g, send, recv, block);
		if (st != HVD_OK)
			return st;
	}
	/* last: in place, the own block was read by nobody else */
	if (send != recv)
		memcpy(recv + (size_t)me * block, send + (size_t)me * block,
		       block);
	return HVD_OK;
}

static size_t bcast_step(const shm_group_t *g, size_t bytes)
{
	size_t c = (bytes / 8 + 4095) / 4096 * 4096;

	if (c < (64u << 10))
		c = 64u << 10;
	return c < g->chunk ? c : g->chunk;
}

hvd_status_t shm_broadcast(shm_group_t *g, void *buf, size_t bytes, int root)
{
	hvd_status_t st = check(g, "broadcast");
	unsigned char *p = buf;
	uint64_t s;

	if (st != HVD_OK)
		return st;
	if (root < 0 || root >= g->n)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "shared-memory broadcast: root %d is not a "
				 "member (group of %d)",
				 root, g->n);
	if (bytes == 0 || g->n == 1)
		return HVD_OK;
	if (!buf)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "shared-memory broadcast: NULL buffer");
	if (bytes <= g->small_max) {
		st = small_exchange(g, g->rank == root ? buf : NULL, bytes, &s);
		if (st == HVD_OK && g->rank != root)
			memcpy(buf, small_buf(g, root, s, bytes), bytes);
		return st;
	}
	/* large: the root streams through its pipeline buffers, the others
	 * copy out one step behind; at least 8 steps (of 64 KiB or more), so
	 * that the others do not wait long for the first one */
	{
		const size_t C = bcast_step(g, bytes);
		const size_t K = (bytes + C - 1) / C;
		const uint64_t base = g->step;
		const int me = g->rank;

		set_budget(g, C);
		shm_share_begin(g, bytes);

		for (size_t k = 0; k <= K; k++) {
			if (k < K && me == root) {
				uint64_t st_s = base + k + 1;
				uint64_t b = (base + k) % g->nbuf;
				size_t len = k + 1 < K ? C : bytes - k * C;

				if (st_s > (uint64_t)g->nbuf)
					WAIT_ALL(g, done,
						 st_s - (uint64_t)g->nbuf);
				copy_share(g, region(g, root, b, 0, 0),
					   p + k * C, len);
				publish_shared(g, &g->ctl[me].red, st_s);
			}
			if (k >= 1) {
				uint64_t st_s = base + k;
				uint64_t b = (base + k - 1) % g->nbuf;
				size_t len = k < K ? C : bytes - (k - 1) * C;

				if (me != root) {
					st = wait_ge(g, &g->ctl[root].red, st_s,
						     root);
					if (st != HVD_OK)
						return st;
					hvd_copy(p + (k - 1) * C,
						 region(g, root, b, 0, 0), len);
				}
				publish(&g->ctl[me].done, st_s);
			}
		}
		g->step = base + K;
		shm_share_end(g, bytes);
	}
	return HVD_OK;
}

void shm_away(shm_group_t *g, int away)
{
	if (g)
		__atomic_store_n(&g->ctl[g->rank].away, (uint32_t)!!away,
				 __ATOMIC_RELEASE);
}

void shm_group_oversubscribed(shm_group_t *g)
{
	g->oversub = 1;
	if (!getenv("HOROVOD_SHM_SPIN"))
		g->spin = g->spin_now = 16;
}

hvd_status_t shm_barrier(shm_group_t *g)
{
	hvd_status_t st = check(g, "barrier");
	uint64_t s;

	if (st != HVD_OK || g->n == 1)
		return st;
	return small_exchange(g, NULL, 0, &s);
}

/* What a wait also checks every tick: a failure elsewhere in the job. */
void shm_group_set_check(shm_group_t *g, shm_check_fn fn, void *arg)
{
	g->check = fn;
	g->check_arg = arg;
}

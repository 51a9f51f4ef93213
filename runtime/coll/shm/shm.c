/*
 * shm.c - intra-node collectives through one POSIX shared-memory segment
 * per node-local group (the contract is shm.h; doc/design.md, "Shared
 * memory", explains the algorithms and their knobs).
 *
 * Segment layout (all offsets page or 128-byte aligned):
 *
 *   header      magic, layout parameters chosen by the creator, attach
 *               count, "dead" word set by whoever first sees a peer die
 *   ctl[n]      per member: its pid and its flags, each 64-bit flag on its
 *               own 128-byte line (one writer per line: the member)
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

#include "comm/comm.h"
#include "coll/shm/shm_impl.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* ------------------------------------------------------------ waiting */

static hvd_status_t fail(shm_group_t *g, hvd_status_t st, const char *fmt, ...)
    HVD_PRINTF(3, 4);

static hvd_status_t fail(shm_group_t *g, hvd_status_t st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->failmsg, sizeof(g->failmsg), fmt, ap);
	va_end(ap);
	g->failed = st;
	return hvd_error(st, "%s", g->failmsg);
}

/* The slow part of a wait: sleep on the flag's futex (the publisher wakes
 * us), waking every 20 ms to check for a dead or silent peer.  flag
 * belongs to member peer. */
static hvd_status_t wait_slow(shm_group_t *g, struct shm_flag *f, uint64_t want,
			      int peer)
{
	const struct timespec tick = {0, 20 * 1000 * 1000};
	double t0 = hvd_now(), now;
	hvd_status_t st = HVD_OK;
	uint32_t dead;
	uint64_t v;

	__atomic_add_fetch(&f->sleepers, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		v = __atomic_load_n(&f->seq, __ATOMIC_SEQ_CST);
		if (v >= want)
			break;
		futex(futex_word(f), FUTEX_WAIT, (uint32_t)v, &tick);
		if (__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) >= want)
			break;
		now = hvd_now();
		dead = __atomic_load_n(&g->hdr->dead, __ATOMIC_ACQUIRE);
		if (dead) {
			st = fail(g, HVD_ERR_PEER_FAILED,
				  "shared-memory %s: local rank %u died (seen "
				  "by another member); the group is unusable",
				  g->what, dead - 1);
			break;
		}
		if (hvd_pid_dead((pid_t)g->ctl[peer].pid)) {
			__atomic_store_n(&g->hdr->dead, (uint32_t)peer + 1,
					 __ATOMIC_RELEASE);
			st = fail(g, HVD_ERR_PEER_FAILED,
				  "shared-memory %s: local rank %d (pid %lld) "
				  "exited in the middle of the collective; the "
				  "group is unusable",
				  g->what, peer, (long long)g->ctl[peer].pid);
			break;
		}
		if (now - t0 > g->timeout) {
			st = fail(g, HVD_ERR_TIMEOUT,
				  "shared-memory %s: local rank %d (pid %lld) "
				  "made no progress for %.0f s "
				  "(HOROVOD_PEER_TIMEOUT); is it stuck or "
				  "calling collectives in a different order?",
				  g->what, peer, (long long)g->ctl[peer].pid,
				  g->timeout);
			break;
		}
	}
	__atomic_sub_fetch(&f->sleepers, 1, __ATOMIC_SEQ_CST);
	/* the acquire that orders our reads of the peer's data */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return st;
}

static inline hvd_status_t wait_ge(shm_group_t *g, struct shm_flag *f,
				   uint64_t want, int peer)
{
	unsigned i;

	if (load_acq(&f->seq) >= want)
		return HVD_OK;
	for (i = 0; i < g->spin_now; i++) {
		cpu_relax();
		if (load_acq(&f->seq) >= want)
			return HVD_OK;
	}
	/* The peer may be waiting for this very CPU (unbound ranks, a busy
	 * node): hand it over a few times before going to sleep. */
	for (i = 0; i < SHM_YIELDS; i++) {
		sched_yield();
		if (load_acq(&f->seq) >= want)
			return HVD_OK;
	}
	return wait_slow(g, f, want, peer);
}

/* Spin longer for bigger steps: a peer that is a few microseconds behind
 * on a 32 KiB step is normal, and putting the waiter to sleep would make
 * it late for the next step (a futex wake-up costs ~10 us).  About 2.5 us
 * of polling per KiB, nothing extra when the node is oversubscribed. */
static inline void set_budget(shm_group_t *g, size_t bytes)
{
	g->spin_now = g->spin + (g->oversub ? 0 : (unsigned)(bytes / 16));
}

/* Wait until field f of every other member reached want. */
#define WAIT_ALL(g, f, want)                                                   \
	do {                                                                   \
		for (int q_ = 0; q_ < (g)->n; q_++) {                          \
			hvd_status_t st_;                                      \
			if (q_ == (g)->rank)                                   \
				continue;                                      \
			st_ = wait_ge((g), &(g)->ctl[q_].f, (want), q_);       \
			if (st_ != HVD_OK)                                     \
				return st_;                                    \
		}                                                              \
	} while (0)

static inline hvd_status_t check(shm_group_t *g, const char *what)
{
	g->what = what;
	if (g->failed)
		return hvd_error(g->failed, "%s", g->failmsg);
	return HVD_OK;
}

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

/* ---------------------------------------------------- large path */

enum pipe_kind { PIPE_ALLREDUCE, PIPE_REDUCE_SCATTER, PIPE_ALLGATHER };

static inline unsigned char *region(shm_group_t *g, int r, uint64_t b, int p,
				    size_t rbytes)
{
	return g->slots + ((size_t)r * g->nbuf + b) * g->chunk +
	       (size_t)p * rbytes;
}

/* Step k of slice p: [*first, *first + *len) in elements. */
static inline void step_range(size_t count, int n, int p, size_t R, size_t k,
			      size_t *first, size_t *len)
{
	size_t c = hvd_reducescatter_count(count, p, n);
	size_t o = hvd_reducescatter_offset(count, p, n);
	size_t a = k * R;

	*first = o + a;
	*len = a >= c ? 0 : (c - a < R ? c - a : R);
}

/* Reduce len elements of the own slice for pipeline buffer b: the own
 * input first, then the peers' regions in rank order (only this member
 * reduces this slice, so every member gets the same bits). */
static void reduce_step(shm_group_t *g, uint64_t b, size_t rbytes,
			const unsigned char *mine, unsigned char *dst,
			size_t len, hvd_dtype_t dtype, hvd_op_t op)
{
	int first = 1;

	for (int p = 0; p < g->n && len; p++) {
		const unsigned char *peer;

		if (p == g->rank)
			continue;
		peer = region(g, p, b, g->rank, rbytes);
		if (first)
			reduce_apply3(dst, mine, peer, len, dtype, op);
		else
			reduce_apply(dst, peer, len, dtype, op);
		first = 0;
	}
}

#if defined(__x86_64__)
/* Four vectors to p: streamed (p 16-byte aligned), aligned or not. */
static inline __attribute__((always_inline)) void
store4(float *p, __m128 x0, __m128 x1, __m128 x2, __m128 x3, const int nt,
       const int aligned)
{
	if (nt) {
		_mm_stream_ps(p, x0);
		_mm_stream_ps(p + 4, x1);
		_mm_stream_ps(p + 8, x2);
		_mm_stream_ps(p + 12, x3);
	} else if (aligned) {
		_mm_store_ps(p, x0);
		_mm_store_ps(p + 4, x1);
		_mm_store_ps(p + 8, x2);
		_mm_store_ps(p + 12, x3);
	} else {
		_mm_storeu_ps(p, x0);
		_mm_storeu_ps(p + 4, x1);
		_mm_storeu_ps(p + 8, x2);
		_mm_storeu_ps(p + 12, x3);
	}
}

/* The loop of sum2_f32 for one combination of store kinds (constants
 * after inlining, so that the loop has no branches). */
static inline __attribute__((always_inline)) size_t
sum2_loop(float *dst, float *own, const float *a, const float *b, size_t n,
	  float scale, const int own_nt, const int dst_nt)
{
	const __m128 f = _mm_set1_ps(scale);
	const int mul = scale != 1.0f;
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m128 x0 = _mm_add_ps(_mm_loadu_ps(a + i),
				       _mm_loadu_ps(b + i));
		__m128 x1 = _mm_add_ps(_mm_loadu_ps(a + i + 4),
				       _mm_loadu_ps(b + i + 4));
		__m128 x2 = _mm_add_ps(_mm_loadu_ps(a + i + 8),
				       _mm_loadu_ps(b + i + 8));
		__m128 x3 = _mm_add_ps(_mm_loadu_ps(a + i + 12),
				       _mm_loadu_ps(b + i + 12));

		if (mul) {
			x0 = _mm_mul_ps(x0, f);
			x1 = _mm_mul_ps(x1, f);
			x2 = _mm_mul_ps(x2, f);
			x3 = _mm_mul_ps(x3, f);
		}
		store4(own + i, x0, x1, x2, x3, own_nt, 1);
		store4(dst + i, x0, x1, x2, x3, dst_nt, 0);
	}
	return i;
}
#endif

/* Two members, float32 sum (the gradients' case): own = dst = (a + b) *
 * scale in one pass, instead of reduce, scale and copy in three.  dst is
 * the output (streamed when nt and aligned), own the member's region that
 * the peer copies the result from (64-byte aligned; streamed when own_nt,
 * see share_mode_begin).  The same float32 operations in the same order as
 * reduce_apply3 followed by reduce_scale: the same bits. */
static void sum2_f32(float *dst, float *own, const float *a, const float *b,
		     size_t n, float scale, int nt, int own_nt)
{
	size_t i = 0;

#if defined(__x86_64__)
	const int dst_nt = nt && ((uintptr_t)dst & 15) == 0;

	if (own_nt)
		i = dst_nt ? sum2_loop(dst, own, a, b, n, scale, 1, 1)
			   : sum2_loop(dst, own, a, b, n, scale, 1, 0);
	else
		i = dst_nt ? sum2_loop(dst, own, a, b, n, scale, 0, 1)
			   : sum2_loop(dst, own, a, b, n, scale, 0, 0);
#else
	(void)nt;
	(void)own_nt;
#endif
	for (; i < n; i++) {
		own[i] = scale == 1.0f ? a[i] + b[i] : (a[i] + b[i]) * scale;
		dst[i] = own[i];
	}
}

/* ------------------------------------------- how peers' data is written
 *
 * Data a peer reads (the copy-in, the reduced slice, the broadcast root's
 * steps) is either written through the caches, so that the peer takes it
 * from this core's cache, or streamed to memory with non-temporal stores,
 * so that the peer reads it from memory.  The first is faster while the
 * two CPUs share a cache at full speed; the second does not depend on
 * cache-to-cache transfers, which slow down 4-5x when the CPUs are far
 * apart (other sockets, or a virtual machine whose vCPUs the host moves:
 * measured on the 2-core build VM, a 96 MiB average 13 ms through the
 * caches in one phase, 58-82 ms in another, where streaming took 18 ms).
 * So, with HOROVOD_SHM_SHARE=auto (the default), each member keeps the
 * recent bandwidth of its large calls in the mode it uses, tries the other
 * mode at the second large call, then after SHARE_PROBE large calls,
 * twice as many after each probe that did not win (up to SHARE_PROBE_MAX),
 * and at once when two calls in a row run at half the usual bandwidth,
 * and switches when that is 25% faster.  The choice is local (the flags
 * and fences are the same either way): members follow the same sequence
 * of calls, so they probe together. */
#define SHARE_MIN (1u << 20) /* calls from this size are measured */
#define SHARE_PROBE 16	   /* calls between probes */
#define SHARE_PROBE_MAX 512 /* ... after probes that did not win */

static void share_mode_begin(shm_group_t *g, size_t bytes)
{
	int c = 0;

	g->share_now = g->share_mode;
	g->share_t0 = 0;
	if (g->share_policy >= 0 || bytes < SHARE_MIN)
		return;
	/* sizes compare with sizes: classes of 1, 2, 4, ... 128+ MiB */
	while (c < 7 && bytes >= ((size_t)SHARE_MIN << (c + 1)))
		c++;
	g->share_class = c;
	/* the second large call already tries the other mode */
	++g->share_calls;
	if (g->share_probe || g->share_calls == 2 ||
	    (g->share_next && g->share_calls >= g->share_next))
		g->share_now = !g->share_mode;
	g->share_probe = 0;
	g->share_t0 = hvd_now();
}

static void share_mode_end(shm_group_t *g, size_t bytes)
{
	double dt, bw, *cur;

	if (g->share_t0 == 0)
		return;
	dt = hvd_now() - g->share_t0;
	bw = dt > 0 ? (double)bytes / dt / 1e9 : 0;
	cur = &g->share_bw[g->share_mode][g->share_class];
	if (g->share_now != g->share_mode) {
		/* a probe: each one that does not win makes the next wait
		 * twice as long (up to SHARE_PROBE_MAX calls), since a probe
		 * of the worse mode costs a slower call; a change of pace
		 * (below) still looks again at once */
		int win = *cur > 0 && bw > 1.25 * *cur;

		if (g->share_interval < SHARE_PROBE)
			g->share_interval = SHARE_PROBE;
		if (win)
			g->share_interval = SHARE_PROBE;
		else if (*cur > 0 && g->share_interval < SHARE_PROBE_MAX)
			g->share_interval *= 2;
		g->share_next = g->share_calls + g->share_interval;
		g->share_slow = 0;
		g->share_bw[g->share_now][g->share_class] = bw;
		if (win) {
			g->share_mode = g->share_now;
			if (hvd_log_enabled(HVD_LOG_DEBUG))
				hvd_log(HVD_LOG_DEBUG,
					"shared memory: data for peers now "
					"%s (%.2f GB/s against %.2f)",
					g->share_mode ? "streamed" : "cached",
					bw, *cur);
		}
		return;
	}
	/* two calls in a row at half the usual speed: a change of pace,
	 * look again at once */
	g->share_slow = *cur > 0 && bw < 0.5 * *cur ? g->share_slow + 1 : 0;
	if (g->share_slow >= 2) {
		g->share_probe = 1;
		g->share_slow = 0;
	}
	*cur = *cur > 0 ? 0.75 * *cur + 0.25 * bw : bw;
}

static void copy_share(shm_group_t *g, void *dst, const void *src, size_t n)
{
	if (g->share_now)
		hvd_copy_stream(dst, src, n);
	else
		hvd_copy(dst, src, n);
}

/* Publish s in f after data for the peers written in this call's mode:
 * streamed stores are ordered before the flag by a fence. */
static void publish_shared(shm_group_t *g, struct shm_flag *f, uint64_t s)
{
	if (g->share_now)
		hvd_stream_fence();
	publish(f, s);
}

static hvd_status_t pipeline(shm_group_t *g, enum pipe_kind kind,
			     const unsigned char *send, unsigned char *recv,
			     size_t count, hvd_dtype_t dtype, hvd_op_t op,
			     double scale)
{
	const int me = g->rank, n = g->n;
	const size_t es = hvd_dtype_size(dtype);
	const size_t rbytes = g->chunk / (size_t)n / 64 * 64;
	const size_t R = rbytes / es;
	const size_t c0 = hvd_reducescatter_count(count, 0, n);
	const size_t K = (c0 + R - 1) / R;
	const uint64_t base = g->step;
	const int copy_out = kind != PIPE_REDUCE_SCATTER;

	set_budget(g, rbytes);
	share_mode_begin(g, count * es);
	const size_t moff = hvd_reducescatter_offset(count, me, n);
	/* outputs far larger than the caches: stream them (no read for
	 * ownership of lines that will be evicted anyway); not in place,
	 * where each output line was read as input a step before and is
	 * still in the cache */
	const int nt = count * es >= g->nt_min &&
		       !(kind == PIPE_ALLREDUCE && send == recv);

	for (size_t k = 0; k <= K; k++) {
		if (k < K) {
			uint64_t s = base + k + 1, b = (base + k) % g->nbuf;
			size_t f, len;

			if (s > (uint64_t)g->nbuf)
				WAIT_ALL(g, done, s - (uint64_t)g->nbuf);
			if (kind == PIPE_ALLGATHER) {
				step_range(count, n, me, R, k, &f, &len);
				copy_share(g, region(g, me, b, me, rbytes),
					   recv + f * es, len * es);
				publish_shared(g, &g->ctl[me].red, s);
			} else {
				const unsigned char *mine;
				unsigned char *dst;

				for (int p = 0; p < n; p++) {
					if (p == me)
						continue;
					step_range(count, n, p, R, k, &f, &len);
					copy_share(g,
						   region(g, me, b, p, rbytes),
						   send + f * es, len * es);
				}
				publish_shared(g, &g->ctl[me].in, s);
				WAIT_ALL(g, in, s);
				step_range(count, n, me, R, k, &f, &len);
				mine = send + f * es;
				/* reduce-scatter: recv is the own slice */
				dst = kind == PIPE_REDUCE_SCATTER
					  ? recv + (f - moff) * es
					  : recv + f * es;
				if (kind == PIPE_ALLREDUCE && n == 2 &&
				    dtype == HVD_FLOAT32 && op == HVD_SUM) {
					sum2_f32((float *)(void *)dst,
						 (float *)(void *)region(
						     g, me, b, me, rbytes),
						 (const float *)(const void *)
						     mine,
						 (const float *)(const void *)
						     region(g, 1 - me, b, me,
							    rbytes),
						 len, (float)scale, nt,
						 g->share_now);
				} else if (kind == PIPE_ALLREDUCE && nt) {
					/* reduce into the cached segment,
					 * stream to the output */
					unsigned char *own =
					    region(g, me, b, me, rbytes);

					reduce_step(g, b, rbytes, mine, own,
						    len, dtype, op);
					if (scale != 1.0)
						reduce_scale(own, len, dtype,
							     scale);
					hvd_copy_stream(dst, own, len * es);
				} else {
					reduce_step(g, b, rbytes, mine, dst,
						    len, dtype, op);
					if (scale != 1.0)
						reduce_scale(dst, len, dtype,
							     scale);
					if (kind == PIPE_ALLREDUCE)
						copy_share(g,
							   region(g, me, b, me,
								  rbytes),
							   dst, len * es);
				}
				publish_shared(g, &g->ctl[me].red, s);
				if (!copy_out)
					publish(&g->ctl[me].done, s);
			}
		}
		if (k >= 1 && copy_out) {
			uint64_t s = base + k, b = (base + k - 1) % g->nbuf;

			WAIT_ALL(g, red, s);
			for (int i = 1; i < n; i++) {
				/* rotate so members read different peers */
				int p = (me + i) % n;
				size_t f, len;

				step_range(count, n, p, R, k - 1, &f, &len);
				if (nt)
					hvd_copy_stream(recv + f * es,
						region(g, p, b, p, rbytes),
						len * es);
				else
					hvd_copy(recv + f * es,
						 region(g, p, b, p, rbytes),
						 len * es);
			}
			publish(&g->ctl[me].done, s);
		}
	}
	if (nt)
		hvd_stream_fence();
	g->step = base + K;
	share_mode_end(g, count * es);
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
		return pipeline(g, PIPE_ALLREDUCE, send, recvbuf, count, dtype,
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
		return pipeline(g, PIPE_REDUCE_SCATTER, send, out, count, dtype,
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
		return pipeline(g, PIPE_ALLGATHER, NULL, buf, count, dtype,
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
	share_mode_begin(g, block * (size_t)n);
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
	share_mode_end(g, block * (size_t)n);
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
		share_mode_begin(g, bytes);

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
		share_mode_end(g, bytes);
	}
	return HVD_OK;
}

hvd_status_t shm_barrier(shm_group_t *g)
{
	hvd_status_t st = check(g, "barrier");
	uint64_t s;

	if (st != HVD_OK || g->n == 1)
		return st;
	return small_exchange(g, NULL, 0, &s);
}

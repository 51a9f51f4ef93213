/*
 * shm_pipe.c - the large-message pipeline (shm.c's comment, "Large
 * messages"): per step, the copy-in of the peers' slices, the reduction
 * of the own slice, the copy-out of the peers' reduced slices a step
 * behind; and the two-member float32 kernel that fuses those passes.
 */
#include "config.h"

#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"
#include "kernels/kernels.h"

#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

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
	  float scale, float div, const int own_nt, const int dst_nt)
{
	const __m128 f = _mm_set1_ps(scale), k = _mm_set1_ps(div);
	const int mul = scale != 1.0f && div == 0.0f;
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
		} else if (div != 0.0f) {
			x0 = _mm_div_ps(x0, k);
			x1 = _mm_div_ps(x1, k);
			x2 = _mm_div_ps(x2, k);
			x3 = _mm_div_ps(x3, k);
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
 * reduce_apply3 followed by reduce_scale (a division for an average): the
 * same bits. */
static void sum2_f32(float *dst, float *own, const float *a, const float *b,
		     size_t n, double factor, int nt, int own_nt)
{
	const float scale = (float)factor, div = reduce_scale_divisor(factor);
	size_t i = 0;

#if defined(__x86_64__)
	const int dst_nt = nt && ((uintptr_t)dst & 15) == 0;

	if (own_nt)
		i = dst_nt ? sum2_loop(dst, own, a, b, n, scale, div, 1, 1)
			   : sum2_loop(dst, own, a, b, n, scale, div, 1, 0);
	else
		i = dst_nt ? sum2_loop(dst, own, a, b, n, scale, div, 0, 1)
			   : sum2_loop(dst, own, a, b, n, scale, div, 0, 0);
#else
	(void)nt;
	(void)own_nt;
#endif
	for (; i < n; i++) {
		own[i] = reduce_scale1(a[i] + b[i], scale, div);
		dst[i] = own[i];
	}
}

/* What every step of one pipeline call shares. */
struct pipe {
	shm_group_t *g;
	enum pipe_kind kind;
	const unsigned char *send;
	unsigned char *recv;
	size_t count, es, rbytes, R, moff;
	hvd_dtype_t dtype;
	hvd_op_t op;
	double scale;
	uint64_t base;
	int copy_out, nt;
};

/* Step k's reduction of the own slice from the own input and the peers'
 * regions, written to the output and (allreduce) to the own region. */
static inline void step_reduce(const struct pipe *p, uint64_t b,
			       const unsigned char *mine, unsigned char *dst,
			       size_t len)
{
	shm_group_t *g = p->g;
	const int me = g->rank;
	const size_t rbytes = p->rbytes;

	if (p->kind == PIPE_ALLREDUCE && g->n == 2 &&
	    p->dtype == HVD_FLOAT32 && p->op == HVD_SUM) {
		sum2_f32((float *)(void *)dst,
			 (float *)(void *)region(g, me, b, me, rbytes),
			 (const float *)(const void *)mine,
			 (const float *)(const void *)region(g, 1 - me, b, me,
							     rbytes),
			 len, p->scale, p->nt, g->share_now);
	} else if (p->kind == PIPE_ALLREDUCE && p->nt) {
		/* reduce into the cached segment, stream to the output */
		unsigned char *own = region(g, me, b, me, rbytes);

		reduce_step(g, b, rbytes, mine, own, len, p->dtype, p->op);
		if (p->scale != 1.0)
			reduce_scale(own, len, p->dtype, p->scale);
		hvd_copy_stream(dst, own, len * p->es);
	} else {
		reduce_step(g, b, rbytes, mine, dst, len, p->dtype, p->op);
		if (p->scale != 1.0)
			reduce_scale(dst, len, p->dtype, p->scale);
		if (p->kind == PIPE_ALLREDUCE)
			copy_share(g, region(g, me, b, me, rbytes), dst,
				   len * p->es);
	}
}

/* Step k, forward half: wait for the buffer to be free, copy in (the
 * peers' parts of the input, or the own slice for allgather), publish,
 * and reduce the own slice. */
static inline hvd_status_t step_in(const struct pipe *p, size_t k)
{
	shm_group_t *g = p->g;
	const int me = g->rank, n = g->n;
	const size_t es = p->es, rbytes = p->rbytes;
	uint64_t s = p->base + k + 1, b = (p->base + k) % g->nbuf;
	const unsigned char *mine;
	unsigned char *dst;
	size_t f, len;

	if (s > (uint64_t)g->nbuf)
		WAIT_ALL(g, done, s - (uint64_t)g->nbuf);
	if (p->kind == PIPE_ALLGATHER) {
		step_range(p->count, n, me, p->R, k, &f, &len);
		copy_share(g, region(g, me, b, me, rbytes), p->recv + f * es,
			   len * es);
		publish_shared(g, &g->ctl[me].red, s);
		return HVD_OK;
	}
	for (int q = 0; q < n; q++) {
		if (q == me)
			continue;
		step_range(p->count, n, q, p->R, k, &f, &len);
		copy_share(g, region(g, me, b, q, rbytes), p->send + f * es,
			   len * es);
	}
	publish_shared(g, &g->ctl[me].in, s);
	WAIT_ALL(g, in, s);
	step_range(p->count, n, me, p->R, k, &f, &len);
	mine = p->send + f * es;
	/* reduce-scatter: recv is the own slice */
	dst = p->kind == PIPE_REDUCE_SCATTER ? p->recv + (f - p->moff) * es
					      : p->recv + f * es;
	step_reduce(p, b, mine, dst, len);
	publish_shared(g, &g->ctl[me].red, s);
	if (!p->copy_out)
		publish(&g->ctl[me].done, s);
	return HVD_OK;
}

/* Step k, a step behind: copy the peers' reduced slices of step k-1
 * into the output and free the buffer. */
static inline hvd_status_t step_out(const struct pipe *p, size_t k)
{
	shm_group_t *g = p->g;
	const int me = g->rank, n = g->n;
	const size_t es = p->es, rbytes = p->rbytes;
	uint64_t s = p->base + k, b = (p->base + k - 1) % g->nbuf;

	WAIT_ALL(g, red, s);
	for (int i = 1; i < n; i++) {
		/* rotate so members read different peers */
		int q = (me + i) % n;
		size_t f, len;

		step_range(p->count, n, q, p->R, k - 1, &f, &len);
		if (p->nt)
			hvd_copy_stream(p->recv + f * es,
					region(g, q, b, q, rbytes), len * es);
		else
			hvd_copy(p->recv + f * es, region(g, q, b, q, rbytes),
				 len * es);
	}
	publish(&g->ctl[me].done, s);
	return HVD_OK;
}

hvd_status_t shm_pipeline(shm_group_t *g, enum pipe_kind kind,
			  const unsigned char *send, unsigned char *recv,
			  size_t count, hvd_dtype_t dtype, hvd_op_t op,
			  double scale)
{
	const int n = g->n;
	struct pipe p = {
	    .g = g,
	    .kind = kind,
	    .send = send,
	    .recv = recv,
	    .count = count,
	    .es = hvd_dtype_size(dtype),
	    .rbytes = g->chunk / (size_t)n / 64 * 64,
	    .moff = hvd_reducescatter_offset(count, g->rank, n),
	    .dtype = dtype,
	    .op = op,
	    .scale = scale,
	    .base = g->step,
	    .copy_out = kind != PIPE_REDUCE_SCATTER,
	};
	size_t c0 = hvd_reducescatter_count(count, 0, n), K;
	hvd_status_t st;

	p.R = p.rbytes / p.es;
	K = (c0 + p.R - 1) / p.R;
	/* outputs far larger than the caches: stream them (no read for
	 * ownership of lines that will be evicted anyway); not in place,
	 * where each output line was read as input a step before and is
	 * still in the cache */
	p.nt = count * p.es >= g->nt_min &&
	       !(kind == PIPE_ALLREDUCE && send == recv);
	set_budget(g, p.rbytes);
	shm_share_begin(g, count * p.es);
	for (size_t k = 0; k <= K; k++) {
		if (k < K && (st = step_in(&p, k)) != HVD_OK)
			return st;
		if (k >= 1 && p.copy_out && (st = step_out(&p, k)) != HVD_OK)
			return st;
	}
	if (p.nt)
		hvd_stream_fence();
	g->step = p.base + K;
	shm_share_end(g, count * p.es);
	return HVD_OK;
}

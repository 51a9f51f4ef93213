/*
 * bench_check.c - hvd-bench's inputs and the check of one result per size
 * (-c 1): every rank can regenerate every rank's input, so each computes
 * the expected output itself, independently of the collective.
 */
#include "config.h"

#include "tools/bench/bench.h"
#include "tools/bench/typed.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint32_t hash(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	x ^= x >> 16;
	return x;
}

/* Element i of rank r's input for case c: integers anywhere in the type
 * (they wrap the same in every order); floats small integers, -3..3, exact
 * in every order of a sum, a minimum or a maximum; for a product -2, -1, 1
 * or 2, so that every partial product is a power of two, exact in every
 * order and type (-3..3 made 3^7 on 8 ranks, which float16 and bfloat16
 * round, differently by order) up to 15 ranks in float16. */
static double gen(int r, size_t i, const struct bench_case *c)
{
	uint32_t h =
	    hash((uint32_t)i * 2654435761u ^ ((uint32_t)r + 1) * 40503u);

	switch (c->dtype) {
	case HVD_UINT8:
		return h & 255;
	case HVD_INT8:
		return (int8_t)(h & 255);
	case HVD_INT32:
	case HVD_INT64:
		return (int32_t)(h >> 8); /* no int32 overflow for sums */
	default:
		if (c->op == HVD_PRODUCT)
			return (h & 1 ? 1.0 : 2.0) * (h & 2 ? -1.0 : 1.0);
		return (double)(int)(h % 7) - 3.0;
	}
}

static int is_int(hvd_dtype_t t)
{
	return t == HVD_UINT8 || t == HVD_INT8 || t == HVD_INT32 ||
	       t == HVD_INT64;
}

/* Wrap x into the integer type's range (what the type's arithmetic does).
 * From the 64-bit result itself: through a double, a product of three
 * ranks' int32 inputs (up to 2^72, wrapped to 64 bits) lost the low bits
 * that the int32 result keeps. */
static double wrap(int64_t x, hvd_dtype_t t)
{
	switch (t) {
	case HVD_UINT8:
		return (uint8_t)x;
	case HVD_INT8:
		return (int8_t)(uint8_t)x;
	case HVD_INT32:
		return (int32_t)(uint32_t)x;
	default:
		return (double)x;
	}
}

/* Expected reduced element i. */
static double expect_reduced(size_t i, const struct bench_case *c)
{
	double a = gen(0, i, c);
	int64_t ai = (int64_t)a;

	for (int r = 1; r < c->size; r++) {
		double v = gen(r, i, c);

		switch (c->op) {
		case HVD_SUM:
		case HVD_AVERAGE:
			a += v;
			ai = (int64_t)((uint64_t)ai + (uint64_t)(int64_t)v);
			break;
		case HVD_PRODUCT:
			a *= v;
			ai = (int64_t)((uint64_t)ai * (uint64_t)(int64_t)v);
			break;
		case HVD_MIN:
			a = v < a ? v : a;
			ai = (int64_t)a;
			break;
		case HVD_MAX:
			a = v > a ? v : a;
			ai = (int64_t)a;
			break;
		default:
			break;
		}
	}
	if (is_int(c->dtype))
		a = wrap(ai, c->dtype);
	if (c->op == HVD_AVERAGE)
		a = is_int(c->dtype) ? trunc(a / c->size) : a / c->size;
	return a;
}

static int same(double got, double want, const struct bench_case *c)
{
	double tol;

	if (c->op != HVD_AVERAGE)
		return got == want;
	/* averages of integers may round either way; of floats, the type's
	 * precision decides */
	tol = is_int(c->dtype) ? 1.0
	      : c->dtype == HVD_FLOAT16 || c->dtype == HVD_BFLOAT16
		  ? 1e-2 * fmax(1.0, fabs(want))
		  : 1e-5 * fmax(1.0, fabs(want));
	return fabs(got - want) <= tol;
}

/* Elements per rank in send and recv for a case. */
static void case_counts(const struct bench_case *c, size_t *ns, size_t *nr)
{
	size_t n = (size_t)c->size;

	switch (c->coll) {
	case BENCH_ALLREDUCE:
		*ns = *nr = c->count;
		break;
	case BENCH_ALLGATHER:
		*ns = c->count;
		*nr = c->count * n;
		break;
	case BENCH_BROADCAST:
		*ns = 0;
		*nr = c->count;
		break;
	case BENCH_ALLTOALL:
		*ns = *nr = c->count * n;
		break;
	default: /* reducescatter: the whole vector in, a slice out */
		*ns = c->count * n;
		*nr = c->count * n;
		break;
	}
}

void bench_fill_inputs(const struct bench_case *c)
{
	size_t ns, nr;

	case_counts(c, &ns, &nr);
	if (c->coll == BENCH_BROADCAST) {
		for (size_t i = 0; i < nr; i++)
			typed_put(c->recv, i, c->dtype,
				  c->rank == 0 ? gen(0, i, c) : -1.0);
		return;
	}
	for (size_t i = 0; i < ns; i++)
		typed_put(c->send, i, c->dtype, gen(c->rank, i, c));
	memset(c->recv, 0xa5, nr * hvd_dtype_size(c->dtype));
}

long bench_count_wrong(const struct bench_case *c)
{
	size_t n = (size_t)c->size, cnt = c->count, off;
	long bad = 0;

	switch (c->coll) {
	case BENCH_ALLREDUCE:
		for (size_t i = 0; i < cnt; i++)
			bad += !same(typed_get(c->recv, i, c->dtype),
				     expect_reduced(i, c), c);
		break;
	case BENCH_ALLGATHER:
		for (size_t r = 0; r < n; r++)
			for (size_t i = 0; i < cnt; i++)
				bad += typed_get(c->recv, r * cnt + i,
						 c->dtype) != gen((int)r, i, c);
		break;
	case BENCH_BROADCAST:
		for (size_t i = 0; i < cnt; i++)
			bad += typed_get(c->recv, i, c->dtype) != gen(0, i, c);
		break;
	case BENCH_ALLTOALL:
		for (size_t r = 0; r < n; r++)
			for (size_t i = 0; i < cnt; i++)
				bad +=
				    typed_get(c->recv, r * cnt + i, c->dtype) !=
				    gen((int)r, (size_t)c->rank * cnt + i, c);
		break;
	default:
		off = hvd_reducescatter_offset(cnt * n, c->rank, c->size);
		for (size_t i = 0; i < cnt; i++)
			bad += !same(typed_get(c->recv, i, c->dtype),
				     expect_reduced(off + i, c), c);
		break;
	}
	return bad;
}

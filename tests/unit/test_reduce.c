/*
 * test_reduce.c - the reduction kernels (reduce.c, reduce_avx2.c,
 * reduce_avx512.c) against a scalar reference written here, for every
 * instruction-set table this CPU can run, every type and op, lengths that
 * exercise the vector body and the tail, in place and not; and the
 * float16/bfloat16 conversions against independent references (the
 * compiler's _Float16 and an exhaustive nearest-value search for bfloat16),
 * including NaN, infinities, subnormals and ties.
 */
#include "config.h"

#include "kernels/kernels.h"
#include "kernels/reduce_impl.h"
#include "tap.h"
#include "tools/bench/typed.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* ------------------------------------------------ reference converters */

/* float16: typed_to_half and typed_from_half (tools/bench/typed.h, through
 * GCC's _Float16).  bfloat16: below, by comparing distances rather than
 * by rounding the bits as libhvd and typed.h do, so that the reference
 * does not share their method. */

/* Nearest bfloat16 by comparing the two candidates around f in double
 * arithmetic (ties to the even one). */
static uint16_t ref_to_bf16(float f)
{
	uint32_t u = f2u(f);
	uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
	double dl, dh;

	if (isnan(f))
		return (uint16_t)(lo | 0x40);
	if ((u & 0xffff) == 0)
		return lo;
	dl = fabs((double)f - (double)u2f((uint32_t)lo << 16));
	if ((hi & 0x7fff) == 0x7f80) /* next is infinity: compare to 2^128 */
		dh = fabs(ldexp(f < 0 ? -1.0 : 1.0, 128) - (double)f);
	else
		dh = fabs((double)u2f((uint32_t)hi << 16) - (double)f);
	if (dl < dh)
		return lo;
	if (dh < dl)
		return hi;
	return (lo & 1) ? hi : lo;
}

static int same_float(float a, float b)
{
	return (isnan(a) && isnan(b)) || f2u(a) == f2u(b);
}

static void test_conversions(void)
{
	int bad = 0;
	uint32_t u;

	/* every float16 value round-trips (NaN stays NaN) */
	for (u = 0; u < 65536; u++) {
		float f = hvd_half_to_float((uint16_t)u);
		uint16_t back = hvd_float_to_half(f);

		if (!same_float(f, typed_from_half((uint16_t)u)) ||
		    (!isnan(f) && back != u) ||
		    (isnan(f) && (back & 0x7fff) <= 0x7c00)) {
			if (bad++ < 5)
				diag("half 0x%04x -> %g -> 0x%04x", u, f, back);
		}
	}
	ok(bad == 0,
	   "float16 -> float32 -> float16 exact for all 65536 values");

	/* float32 -> float16 rounding: random bits, plus the boundaries */
	bad = 0;
	for (int i = 0; i < 400000; i++) {
		float f = u2f((uint32_t)next());
		uint16_t got = hvd_float_to_half(f), want = typed_to_half(f);

		if (isnan(f) ? (got & 0x7fff) <= 0x7c00 : got != want) {
			if (bad++ < 5)
				diag("to_half(%a) = 0x%04x, want 0x%04x", f,
				     got, want);
		}
	}
	{
		const float edge[] = {
		    0.0f,	  -0.0f,	   65504.0f,
		    65519.99f,	  65520.0f,	   -65520.0f,
		    INFINITY,	  -INFINITY,	   0x1p-14f,
		    0x1p-24f,	  0x1p-25f,	   0x1.000002p-25f,
		    0x1.8p-24f,	  0x1.4p-24f,	   0x1.ffcp-15f,
		    0x1.ffep-15f, 1.0f + 0x1p-11f, 1.0f + 0x1.8p-10f,
		    1e-30f,	  3.0e38f,
		};

		for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
			uint16_t got = hvd_float_to_half(edge[i]);
			uint16_t want = typed_to_half(edge[i]);

			if (got != want && bad++ < 10)
				diag("to_half(%a) = 0x%04x, want 0x%04x",
				     edge[i], got, want);
		}
	}
	ok(bad == 0, "float32 -> float16 rounds to nearest even (random, "
		     "ties, overflow, subnormals)");

	/* bfloat16 */
	bad = 0;
	for (u = 0; u < 65536; u++) {
		float f = hvd_bf16_to_float((uint16_t)u);

		if (f2u(f) != u << 16 ||
		    (!isnan(f) && hvd_float_to_bf16(f) != u)) {
			if (bad++ < 5)
				diag("bf16 0x%04x does not round-trip", u);
		}
	}
	ok(bad == 0, "bfloat16 -> float32 -> bfloat16 exact for all values");
	bad = 0;
	for (int i = 0; i < 400000; i++) {
		uint32_t bits = (uint32_t)next();
		float f;

		if (i % 4 == 0) /* a tie: low half exactly 0x8000 */
			bits = (bits & 0xffff0000u) | 0x8000;
		f = u2f(bits);
		if (hvd_float_to_bf16(f) != ref_to_bf16(f)) {
			if (bad++ < 5)
				diag("to_bf16(%a) = 0x%04x, want 0x%04x", f,
				     hvd_float_to_bf16(f), ref_to_bf16(f));
		}
	}
	ok(bad == 0, "float32 -> bfloat16 rounds to nearest even, NaN quiet");
}

/* --------------------------------------------------- reference reduce */

static double ref_op(double p, double q, hvd_op_t op)
{
	switch (op) {
	case HVD_SUM:
	case HVD_AVERAGE:
		return p + q;
	case HVD_PRODUCT:
		return p * q;
	case HVD_MIN:
		return q < p ? q : p;
	case HVD_MAX:
		return q > p ? q : p;
	default:
		return 0;
	}
}

/* One element of dtype at index i: a OP b -> d. */
static void ref_elem(void *d, const void *a, const void *b, size_t i,
		     hvd_dtype_t t, hvd_op_t op)
{
	switch (t) {
	case HVD_UINT8:
	case HVD_INT8: {
		uint8_t p = ((const uint8_t *)a)[i],
			q = ((const uint8_t *)b)[i];
		uint8_t r;

		if (op == HVD_MIN || op == HVD_MAX) {
			int sp = t == HVD_INT8 ? (int8_t)p : p;
			int sq = t == HVD_INT8 ? (int8_t)q : q;
			int m = op == HVD_MIN ? (sq < sp ? sq : sp)
					      : (sq > sp ? sq : sp);
			r = (uint8_t)m;
		} else if (op == HVD_PRODUCT) {
			r = (uint8_t)(p * q);
		} else {
			r = (uint8_t)(p + q);
		}
		((uint8_t *)d)[i] = r;
		break;
	}
	case HVD_INT32: {
		int32_t p = ((const int32_t *)a)[i],
			q = ((const int32_t *)b)[i];
		uint32_t r;

		if (op == HVD_MIN)
			r = (uint32_t)(q < p ? q : p);
		else if (op == HVD_MAX)
			r = (uint32_t)(q > p ? q : p);
		else if (op == HVD_PRODUCT)
			r = (uint32_t)p * (uint32_t)q;
		else
			r = (uint32_t)p + (uint32_t)q;
		memcpy((int32_t *)d + i, &r, 4);
		break;
	}
	case HVD_INT64: {
		int64_t p = ((const int64_t *)a)[i],
			q = ((const int64_t *)b)[i];
		uint64_t r;

		if (op == HVD_MIN)
			r = (uint64_t)(q < p ? q : p);
		else if (op == HVD_MAX)
			r = (uint64_t)(q > p ? q : p);
		else if (op == HVD_PRODUCT)
			r = (uint64_t)p * (uint64_t)q;
		else
			r = (uint64_t)p + (uint64_t)q;
		memcpy((int64_t *)d + i, &r, 8);
		break;
	}
	case HVD_FLOAT16: {
		float p = typed_from_half(((const uint16_t *)a)[i]);
		float q = typed_from_half(((const uint16_t *)b)[i]);

		((uint16_t *)d)[i] = typed_to_half((float)ref_op(p, q, op));
		break;
	}
	case HVD_BFLOAT16: {
		float p = u2f((uint32_t)((const uint16_t *)a)[i] << 16);
		float q = u2f((uint32_t)((const uint16_t *)b)[i] << 16);

		/* the float32 result, then rounded: as the kernels do */
		((uint16_t *)d)[i] = ref_to_bf16((float)ref_op(p, q, op));
		break;
	}
	case HVD_FLOAT32: {
		float p = ((const float *)a)[i], q = ((const float *)b)[i];
		float r = op == HVD_PRODUCT ? p * q
			  : op == HVD_MIN   ? (q < p ? q : p)
			  : op == HVD_MAX   ? (q > p ? q : p)
					    : p + q;

		((float *)d)[i] = r;
		break;
	}
	case HVD_FLOAT64: {
		double p = ((const double *)a)[i], q = ((const double *)b)[i];

		((double *)d)[i] = ref_op(p, q, op);
		break;
	}
	default:
		break;
	}
}

/* Fill with values that make every op interesting: small magnitudes (so
 * products stay finite most of the time), negatives, some specials. */
static void fill(void *buf, size_t n, hvd_dtype_t t)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = next();
		double v = (double)(int)(r % 2001 - 1000) / 97.0;

		switch (t) {
		case HVD_UINT8:
		case HVD_INT8:
			((uint8_t *)buf)[i] = (uint8_t)r;
			break;
		case HVD_INT32:
			((int32_t *)buf)[i] = (int32_t)(uint32_t)(r >> 7);
			break;
		case HVD_INT64:
			((int64_t *)buf)[i] = (int64_t)r;
			break;
		case HVD_FLOAT16:
			((uint16_t *)buf)[i] = (r >> 32) % 61 == 0
						   ? (uint16_t)(r >> 40)
						   : typed_to_half((float)v);
			break;
		case HVD_BFLOAT16:
			((uint16_t *)buf)[i] = (r >> 32) % 61 == 0
						   ? (uint16_t)(r >> 40)
						   : ref_to_bf16((float)v);
			break;
		case HVD_FLOAT32:
			((float *)buf)[i] = (r >> 32) % 61 == 0
						? u2f((uint32_t)(r >> 20))
						: (float)v;
			break;
		case HVD_FLOAT64:
			((double *)buf)[i] = (r >> 32) % 61 == 0
						 ? ((r & 1) ? INFINITY : NAN)
						 : v * 1e3;
			break;
		default:
			break;
		}
	}
}

/* Bitwise comparison, any NaN equal to any NaN. */
static size_t count_diff(const void *got, const void *want, size_t n,
			 hvd_dtype_t t)
{
	size_t bad = 0, es = hvd_dtype_size(t);

	for (size_t i = 0; i < n; i++) {
		const char *g = (const char *)got + i * es;
		const char *w = (const char *)want + i * es;

		if (memcmp(g, w, es) == 0)
			continue;
		if (t == HVD_FLOAT32 && isnan(((const float *)got)[i]) &&
		    isnan(((const float *)want)[i]))
			continue;
		if (t == HVD_FLOAT64 && isnan(((const double *)got)[i]) &&
		    isnan(((const double *)want)[i]))
			continue;
		if (t == HVD_FLOAT16 &&
		    isnan(typed_from_half(((const uint16_t *)got)[i])) &&
		    isnan(typed_from_half(((const uint16_t *)want)[i])))
			continue;
		if (t == HVD_BFLOAT16 &&
		    isnan(u2f((uint32_t)((const uint16_t *)got)[i] << 16)) &&
		    isnan(u2f((uint32_t)((const uint16_t *)want)[i] << 16)))
			continue;
		bad++;
	}
	return bad;
}

static void test_kernels(const char *isa)
{
	static const size_t lens[] = {0,   1,	2,   3,	   15,	16, 17,
				      31,  32,	33,  63,   64,	65, 127,
				      255, 256, 257, 1000, 4099};
	size_t maxn = 4099 + 8, bad_total = 0, checked = 0;
	char *a = malloc(maxn * 8), *b = malloc(maxn * 8);
	char *d = malloc(maxn * 8), *w = malloc(maxn * 8);
	char *s = malloc(maxn * 8);

	for (int t = 0; t < HVD_DTYPE_COUNT; t++) {
		size_t es = hvd_dtype_size((hvd_dtype_t)t);

		for (int op = 0; op < HVD_OP_COUNT; op++) {
			size_t bad = 0;

			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]);
			     li++) {
				size_t n = lens[li];
				/* misalign by one element sometimes */
				size_t off = (li % 3 == 1) ? es : 0;
				char *pa = a + off, *pb = b + off;

				fill(pa, n, (hvd_dtype_t)t);
				fill(pb, n, (hvd_dtype_t)t);
				for (size_t i = 0; i < n; i++)
					ref_elem(w, pa, pb, i, (hvd_dtype_t)t,
						 (hvd_op_t)op);
				/* out of place */
				reduce_apply3(d, pa, pb, n, (hvd_dtype_t)t,
					      (hvd_op_t)op);
				bad += count_diff(d, w, n, (hvd_dtype_t)t);
				/* in place, dst == a (reduce_apply) */
				memcpy(s, pa, n * es);
				reduce_apply(s, pb, n, (hvd_dtype_t)t,
					     (hvd_op_t)op);
				bad += count_diff(s, w, n, (hvd_dtype_t)t);
				/* in place, dst == b */
				memcpy(s, pb, n * es);
				reduce_apply3(s, pa, s, n, (hvd_dtype_t)t,
					      (hvd_op_t)op);
				bad += count_diff(s, w, n, (hvd_dtype_t)t);
				checked += 3 * n;
			}
			if (bad)
				diag("%s: %s %s: %zu wrong elements", isa,
				     hvd_dtype_name((hvd_dtype_t)t),
				     hvd_op_name((hvd_op_t)op), bad);
			bad_total += bad;
		}
	}
	ok(bad_total == 0,
	   "%s kernels: 8 types x 5 ops x 19 lengths, in and "
	   "out of place (%zu elements checked)",
	   isa, checked);
	free(a);
	free(b);
	free(d);
	free(w);
	free(s);
}

static void test_scale(void)
{
	int32_t i32[] = {7, -7, 10, -10, INT32_MAX, INT32_MIN};
	int8_t i8[] = {5, -5, 127, -128};
	float f32[] = {1.0f, -3.0f, 0.5f};
	uint16_t h[] = {typed_to_half(3.0f), typed_to_half(-1.0f)};
	uint16_t bf[] = {ref_to_bf16(3.0f), ref_to_bf16(-1.0f)};
	double f64[] = {9.0, -1.5};

	reduce_scale(i32, 6, HVD_INT32, 0.5);
	ok(i32[0] == 3 && i32[1] == -3 && i32[2] == 5 && i32[3] == -5 &&
	       i32[4] == INT32_MAX / 2 && i32[5] == INT32_MIN / 2,
	   "reduce_scale int32 truncates toward zero");
	reduce_scale(i8, 4, HVD_INT8, 2.0);
	ok(i8[0] == 10 && i8[1] == -10 && i8[2] == 127 && i8[3] == -128,
	   "reduce_scale int8 saturates");
	reduce_scale(f32, 3, HVD_FLOAT32, 0.25);
	ok(f32[0] == 0.25f && f32[1] == -0.75f && f32[2] == 0.125f,
	   "reduce_scale float32");
	reduce_scale(h, 2, HVD_FLOAT16, 0.5);
	reduce_scale(bf, 2, HVD_BFLOAT16, 0.5);
	reduce_scale(f64, 2, HVD_FLOAT64, 2.0);
	ok(typed_from_half(h[0]) == 1.5f && typed_from_half(h[1]) == -0.5f &&
	       hvd_bf16_to_float(bf[0]) == 1.5f &&
	       hvd_bf16_to_float(bf[1]) == -0.5f && f64[0] == 18.0 &&
	       f64[1] == -3.0,
	   "reduce_scale float16, bfloat16, float64");

	/* Long, misaligned runs take the vector loops and the tail. */
	{
		float fv[1 + 37];
		double dv[1 + 37];
		int good = 1;

		for (int i = 0; i < 38; i++) {
			fv[i] = (float)(i * 3 - 50) / 7.0f;
			dv[i] = (double)(i * 3 - 50) / 7.0;
		}
		reduce_scale(fv + 1, 37, HVD_FLOAT32, 1.0 / 3);
		reduce_scale(dv + 1, 37, HVD_FLOAT64, 1.0 / 3);
		for (int i = 1; i < 38; i++) {
			volatile float ef = (float)(i * 3 - 50) / 7.0f;
			volatile double ed = (double)(i * 3 - 50) / 7.0;

			ef = ef / 3.0f;
			ed = ed / 3.0;
			good &= fv[i] == ef && dv[i] == ed;
		}
		good &= fv[0] == -50 / 7.0f && dv[0] == -50 / 7.0;
		ok(good, "reduce_scale float32/float64 by 1/3: 37 misaligned "
			 "elements as the scalar division, neighbour untouched");
	}

	/* An average is the correctly rounded x / k (torch's t / k), not
	 * x * (float)(1/3); a factor only near 1/k multiplies as given. */
	{
		float a[16], b[16], c[16];
		double d[2] = {142.0, 142.0};
		uint16_t hf[1] = {hvd_float_to_half(142.0f)};
		int differs = 0, good = 1;

		for (int i = 0; i < 16; i++) {
			a[i] = b[i] = c[i] = (float)(i * 37 + 100);
			/* the multiply is an ulp off for some of them */
			differs |= a[i] * (float)(1.0 / 3) != a[i] / 3.0f;
		}
		reduce_scale(a, 16, HVD_FLOAT32, 1.0 / 3);
		reduce_scale_copy(b, b, 16, HVD_FLOAT32, 1.0 / 3);
		reduce_scale(c, 16, HVD_FLOAT32, 0.3333);
		for (int i = 0; i < 16; i++) {
			volatile float x = (float)(i * 37 + 100);

			good &= a[i] == x / 3.0f && b[i] == a[i] &&
				c[i] == x * (float)0.3333;
		}
		reduce_scale(d, 2, HVD_FLOAT64, 1.0 / 3);
		reduce_scale(hf, 1, HVD_FLOAT16, 1.0 / 3);
		good &= d[0] == 142.0 / 3 &&
			hf[0] == hvd_float_to_half(142.0f / 3.0f);
		ok(differs && good, "reduce_scale by exactly 1/k divides "
				    "(float32, float64, float16; in place and "
				    "copying); by 0.3333 multiplies");
	}

	/* Averages of integers divide exactly (as NCCL's ncclAvg does). */
	int32_t avg32[] = {9, -9, 10, 2};
	int64_t avg64[] = {(INT64_C(1) << 62) + 3, -((INT64_C(1) << 62) + 3)};
	uint8_t avg8[] = {255, 9};

	reduce_scale(avg32, 4, HVD_INT32, 1.0 / 3);
	reduce_scale(avg64, 2, HVD_INT64, 1.0 / 3);
	reduce_scale(avg8, 2, HVD_UINT8, 1.0 / 5);
	ok(avg32[0] == 3 && avg32[1] == -3 && avg32[2] == 3 && avg32[3] == 0 &&
	       avg64[0] == ((INT64_C(1) << 62) + 3) / 3 &&
	       avg64[1] == -(((INT64_C(1) << 62) + 3) / 3) && avg8[0] == 51 &&
	       avg8[1] == 1,
	   "reduce_scale by 1/k divides integers exactly (9/3 == 3, int64 "
	   "past 2^53)");
}

/* reduce_scale_copy gives exactly what a copy and reduce_scale give, for
 * every type, misaligned, across the vector loops' lengths and tails, into
 * another buffer (source and neighbours untouched) and in place. */
static void test_scale_copy(void)
{
	static const size_t lens[] = {0, 1, 3, 4, 7, 8, 9, 33, 1000};
	static const double factors[] = {1.0, 0.5, 1.0 / 3, 2.0, -1.5};
	enum { MAXN = 1000, SLACK = 16 };
	static char src[(MAXN + 2) * 8 + SLACK], keep[sizeof(src)];
	static char got[sizeof(src)], want[sizeof(src)];
	int copies_ok = 1, inplace_ok = 1;

	for (int t = 0; t < HVD_DTYPE_COUNT; t++) {
		size_t es = hvd_dtype_size((hvd_dtype_t)t);

		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
			for (int fi = 0; fi < 5; fi++) {
				size_t n = lens[li], bytes = (n + 2) * es;
				double f = factors[fi];

				fill(src, n + 2, (hvd_dtype_t)t);
				memcpy(keep, src, bytes);
				memset(got, 0x5a, bytes);
				memcpy(want, got, bytes);
				memcpy(want + es, src + es, n * es);
				reduce_scale(want + es, n, (hvd_dtype_t)t, f);
				reduce_scale_copy(got + es, src + es, n,
						  (hvd_dtype_t)t, f);
				if (count_diff(got, want, n + 2,
					       (hvd_dtype_t)t) ||
				    memcmp(src, keep, bytes)) {
					if (copies_ok)
						diag("%s, %zu elements, factor "
						     "%g: differs",
						     hvd_dtype_name(
							 (hvd_dtype_t)t),
						     n, f);
					copies_ok = 0;
				}
				reduce_scale_copy(src + es, src + es, n,
						  (hvd_dtype_t)t, f);
				if (count_diff(src + es, want + es, n,
					       (hvd_dtype_t)t) ||
				    memcmp(src, keep, es) ||
				    memcmp(src + (n + 1) * es,
					   keep + (n + 1) * es, es)) {
					if (inplace_ok)
						diag("%s, %zu elements, factor "
						     "%g: in place differs",
						     hvd_dtype_name(
							 (hvd_dtype_t)t),
						     n, f);
					inplace_ok = 0;
				}
			}
	}
	ok(copies_ok, "reduce_scale_copy: every type, length and factor as "
		      "a copy and reduce_scale, source and neighbours "
		      "untouched");
	ok(inplace_ok, "reduce_scale_copy in place: as reduce_scale");
}

int main(void)
{
	static const char *const isas[] = {"generic", "avx2", "avx512"};

	plan(4 + 3 * 2 + 7 + 2);
	test_conversions();
	for (int i = 0; i < 3; i++) {
		if (reduce_select_isa(isas[i]) != 0) {
			skip(2, "this CPU cannot run these kernels");
			continue;
		}
		is_str(reduce_isa_name(), isas[i], "selected %s", isas[i]);
		test_kernels(isas[i]);
	}
	test_scale();
	test_scale_copy();
	return done_testing();
}

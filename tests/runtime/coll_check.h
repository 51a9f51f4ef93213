/*
 * coll_check.h - coll_check.c's inputs, answers and reporting: the type
 * conversions (written here, not taken from the library), each rank's
 * input and the exact expected result, the tolerance of an average, and
 * the one TAP line per group with failures summed over ranks.
 *
 * Header-only, as tap.h (whose counters are per file), for coll_check.c
 * alone.
 */
#ifndef HVD_TEST_COLL_CHECK_H
#define HVD_TEST_COLL_CHECK_H

#include "hvd.h"
#include "tap.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* This rank and the world's size (main sets them after hvd_init). */
static int rank_, size_;
static int verbose_bad = 5; /* mismatches printed per rank */

/* ------------------------------------------------- type conversions */
/* Written here, not taken from the library, so that checks stay
 * independent of the code under test. */

static uint16_t f2h(float f)
{
	uint32_t x;
	int e;
	uint32_t m, s;

	memcpy(&x, &f, 4);
	s = (x >> 16) & 0x8000u;
	e = (int)((x >> 23) & 0xff) - 127 + 15;
	m = x & 0x7fffffu;
	if (((x >> 23) & 0xff) == 0)
		return (uint16_t)s;
	if (e >= 31)
		return (uint16_t)(s | 0x7c00u);
	if (e <= 0)
		return (uint16_t)s; /* tiny values do not occur here */
	/* round to nearest even */
	m += 0xfffu + ((m >> 13) & 1u);
	if (m & 0x800000u) {
		m = 0;
		e++;
	}
	return (uint16_t)(s | (uint32_t)e << 10 | m >> 13);
}

static float h2f(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f,
		 m = h & 0x3ffu, x;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return s ? -f : f;
	}
	if (e == 31)
		x = s | 0x7f800000u | m << 13;
	else
		x = s | (e - 15 + 127) << 23 | m << 13;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t f2bf(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

static float bf2f(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

static void put(void *buf, size_t i, hvd_dtype_t t, double v)
{
	switch (t) {
	case HVD_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(int)v; break;
	case HVD_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case HVD_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case HVD_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case HVD_FLOAT16: ((uint16_t *)buf)[i] = f2h((float)v); break;
	case HVD_BFLOAT16: ((uint16_t *)buf)[i] = f2bf((float)v); break;
	case HVD_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case HVD_FLOAT64: ((double *)buf)[i] = v; break;
	default: break;
	}
}

static double get(const void *buf, size_t i, hvd_dtype_t t)
{
	switch (t) {
	case HVD_UINT8: return ((const uint8_t *)buf)[i];
	case HVD_INT8: return ((const int8_t *)buf)[i];
	case HVD_INT32: return ((const int32_t *)buf)[i];
	case HVD_INT64: return (double)((const int64_t *)buf)[i];
	case HVD_FLOAT16: return h2f(((const uint16_t *)buf)[i]);
	case HVD_BFLOAT16: return bf2f(((const uint16_t *)buf)[i]);
	case HVD_FLOAT32: return ((const float *)buf)[i];
	case HVD_FLOAT64: return ((const double *)buf)[i];
	default: return NAN;
	}
}

static int is_unsigned(hvd_dtype_t t)
{
	return t == HVD_UINT8;
}

static int is_integer(hvd_dtype_t t)
{
	return t <= HVD_INT64;
}

/* The input of rank r at index i for op. */
static double input(int r, size_t i, hvd_dtype_t t, hvd_op_t op)
{
	size_t k = i % 1000003;

	switch (op) {
	case HVD_SUM:
	case HVD_AVERAGE:
		return is_unsigned(t) ? (double)((k * 7 + (size_t)r * 3) % 11)
				      : (double)((k * 7 + (size_t)r * 3) % 11) -
						5;
	case HVD_MIN:
	case HVD_MAX:
		return is_unsigned(t)
			       ? (double)((k * 13 + (size_t)r * 7) % 23)
			       : (double)((k * 13 + (size_t)r * 7) % 23) - 11;
	case HVD_PRODUCT: {
		double v = (k + (size_t)r) % 5 == 0 ? 2 : 1;

		if (!is_unsigned(t) && (k * 3 + (size_t)r) % 7 == 0)
			v = -v;
		return v;
	}
	default:
		return 0;
	}
}

static double expect(size_t i, hvd_dtype_t t, hvd_op_t op, int n)
{
	double acc = input(0, i, t, op);

	for (int r = 1; r < n; r++) {
		double v = input(r, i, t, op);

		switch (op) {
		case HVD_SUM:
		case HVD_AVERAGE: acc += v; break;
		case HVD_MIN: acc = v < acc ? v : acc; break;
		case HVD_MAX: acc = v > acc ? v : acc; break;
		case HVD_PRODUCT: acc *= v; break;
		default: break;
		}
	}
	if (op == HVD_AVERAGE)
		acc /= n;
	return acc;
}

static int close_enough(double got, double want, hvd_dtype_t t, hvd_op_t op)
{
	if (op != HVD_AVERAGE)
		return got == want;
	if (is_integer(t)) /* integer division of the sum, toward zero */
		return got == trunc(want);
	if (t == HVD_FLOAT16 || t == HVD_BFLOAT16)
		return fabs(got - want) <= 0.02 * fabs(want) + 0.01;
	return fabs(got - want) <= 1e-5 * fabs(want) + 1e-6;
}

/* ------------------------------------------------------- reporting */

static long group_bad;

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void bad(const char *fmt, ...)
{
	va_list ap;

	if (group_bad++ < verbose_bad) {
		fprintf(stderr, "coll_check: rank %d: ", rank_);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
}

/* One TAP line for a group: failures summed over all ranks. */
static void report(const char *fmt, ...)
{
	long total = 0;
	char name[256];
	va_list ap;
	hvd_status_t st;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	st = hvd_allreduce(&group_bad, &total, 1, HVD_INT64, HVD_SUM);
	if (st != HVD_OK)
		total = -1;
	if (rank_ == 0) {
		ok(total == 0, "%s", name);
		if (total)
			diag("  %ld failures over all ranks (stderr has the "
			     "first ones)",
			     total);
	}
	group_bad = 0;
}

static void check_status(hvd_status_t st, const char *what)
{
	if (st != HVD_OK)
		bad("%s: %s: %s", what, hvd_status_name(st), hvd_last_error());
}

/* --------------------------------------------------------- memory */

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "coll_check: out of memory (%zu bytes)\n", n);
		exit(99);
	}
	return p;
}

#endif

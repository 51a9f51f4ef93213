/*
 * reduce.c - element-wise reduction kernels: reduce_apply, reduce_apply3,
 * reduce_scale, reduce_scale_copy (the float16/bfloat16 conversions are
 * half.c).
 *
 * The kernels are in three tables built from one template (reduce_tmpl.h):
 * "generic" (this file, baseline x86-64 / any CPU), "avx2" and "avx512"
 * (reduce_avx2.c, reduce_avx512.c).  The table is chosen once, at first
 * use, from what the CPU supports; HOROVOD_REDUCE_ISA=generic|avx2|avx512
 * forces one (a table the CPU cannot run is refused with a warning).  All
 * tables give bitwise-identical results: float16/bfloat16 are widened to
 * float32, combined once and rounded to nearest even, and min/max use the
 * same NaN rule (b < a ? b : a) everywhere.
 */
#include "config.h"

#include "kernels/kernels.h"
#include "kernels/reduce_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------- generic table */

#define RK_ISA reduce_isa_generic
#define RK_ISA_NAME "generic"
#define RK_W 1
typedef float rk_vec;
#define RK_LD_H(p) hvd_half_to_float(*(p))
#define RK_ST_H(p, v) (*(p) = hvd_float_to_half(v))
#define RK_LD_B(p) hvd_bf16_to_float(*(p))
#define RK_ST_B(p, v) (*(p) = hvd_float_to_bf16(v))
#define RK_ADD(a, b) ((a) + (b))
#define RK_MUL(a, b) ((a) * (b))
#define RK_MIN(a, b) rk_min((a), (b))
#define RK_MAX(a, b) rk_max((a), (b))

#include "kernels/reduce_tmpl.h"

/* --------------------------------------------------------- dispatch */

static const struct reduce_isa *isa;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static const struct reduce_isa *isa_lookup(const char *name)
{
	if (strcmp(name, "generic") == 0)
		return &reduce_isa_generic;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (strcmp(name, "avx2") == 0)
		return __builtin_cpu_supports("avx2") &&
			       __builtin_cpu_supports("fma") &&
			       __builtin_cpu_supports("f16c")
			   ? &reduce_isa_avx2
			   : NULL;
	if (strcmp(name, "avx512") == 0)
		return __builtin_cpu_supports("avx512f") &&
			       __builtin_cpu_supports("avx512bw") &&
			       __builtin_cpu_supports("avx512vl") &&
			       isa_lookup("avx2")
			   ? &reduce_isa_avx512
			   : NULL;
#endif
	return NULL;
}

static void isa_init(void)
{
	const char *want = getenv("HOROVOD_REDUCE_ISA");
	const struct reduce_isa *t;

	if (want && *want) {
		t = isa_lookup(want);
		if (t) {
			isa = t;
			return;
		}
		hvd_log(HVD_LOG_WARNING,
			"HOROVOD_REDUCE_ISA=%s: expected generic, avx2 or "
			"avx512 that this CPU supports; choosing automatically",
			want);
	}
	t = isa_lookup("avx512");
	if (!t)
		t = isa_lookup("avx2");
	if (!t)
		t = &reduce_isa_generic;
	isa = t;
}

static inline const struct reduce_isa *get_isa(void)
{
	pthread_once(&isa_once, isa_init);
	return isa;
}

int reduce_select_isa(const char *name)
{
	const struct reduce_isa *t = isa_lookup(name);

	get_isa();
	if (!t)
		return -1;
	isa = t;
	return 0;
}

const char *reduce_isa_name(void) { return get_isa()->name; }

void reduce_apply(void *dst, const void *src, size_t n, hvd_dtype_t dtype,
		  hvd_op_t op)
{
	if (n == 0 || (unsigned)dtype >= HVD_DTYPE_COUNT ||
	    (unsigned)op >= HVD_OP_COUNT)
		return;
	get_isa()->fn[dtype][op](dst, dst, src, n);
}

void reduce_apply3(void *dst, const void *a, const void *b, size_t n,
		   hvd_dtype_t dtype, hvd_op_t op)
{
	if (n == 0 || (unsigned)dtype >= HVD_DTYPE_COUNT ||
	    (unsigned)op >= HVD_OP_COUNT)
		return;
	get_isa()->fn[dtype][op](dst, a, b, n);
}

/* ---------------------------------------------------------- scaling */

/* Integers: multiply in double, truncate toward zero, saturate at the
 * type's range (a float-to-int conversion out of range is undefined). */
/* Integers scaled by 1/k (averages: k ranks) are divided exactly, like
 * C's division and NCCL's ncclAvg: 9 * (1/3.0) is 2.999... in double and
 * would truncate to 2, and int64 values past 2^53 would lose digits. */
#define SCALE_INT(T, LO, HI)                                                   \
	do {                                                                   \
		T *p = buf;                                                    \
		long long k_ = exact_divisor(factor);                          \
		if (k_ > 0) {                                                  \
			for (size_t i = 0; i < n; i++)                         \
				p[i] = (T)(p[i] / (T)k_);                      \
			break;                                                 \
		}                                                              \
		for (size_t i = 0; i < n; i++) {                               \
			double v = trunc((double)p[i] * factor);               \
			p[i] = v <= (double)(LO)   ? (T)(LO)                   \
			       : v >= (double)(HI) ? (T)(HI)                   \
						   : (T)v;                     \
		}                                                              \
	} while (0)

/* k when factor is 1/k for a whole k in [1, 2^31), else 0. */
static long long exact_divisor(double factor)
{
	double inv;
	long long k;

	if (!(factor > 0.0) || factor > 1.0)
		return 0;
	inv = 1.0 / factor;
	if (inv >= 2147483648.0)
		return 0;
	k = llround(inv);
	return fabs(inv - (double)k) <= 1e-9 * (double)k ? k : 0;
}

float reduce_scale_divisor(double factor)
{
	/* exactly 1.0 / k, as the averages compute it: a factor the caller
	 * chose near 1/k multiplies as given */
	double k;

	if (!(factor > 0.0) || factor > 0.5)
		return 0.0f;
	k = nearbyint(1.0 / factor);
	if (k > 16777216.0 || 1.0 / k != factor)
		return 0.0f;
	/* by a power of two the multiply is exact, and cheaper */
	return ((long)k & ((long)k - 1)) ? (float)k : 0.0f;
}

/* d[i] = s[i] * factor, or s[i] / k (reduce_scale_divisor); d may be s.
 * Explicit vectors: -O2 leaves the plain loops scalar, and the
 * shared-memory allreduce scales every step of its output.  A division
 * costs more than a multiply (0.18 against 0.09 ns an element on the
 * build VM, SSE, in a loop of its own, in cache), and nothing where the
 * loop waits on memory, as the collectives' loops do. */
#define SCALE_COPY(name, T)                                                    \
	static void name(T *d, const T *s, size_t n, double factor)            \
	{                                                                      \
		typedef T vec __attribute__((vector_size(32),                  \
					     aligned(sizeof(T)), may_alias));  \
		const size_t w = 32 / sizeof(T);                               \
		T f = (T)factor, k = (T)reduce_scale_divisor(factor);          \
		size_t i = 0;                                                  \
                                                                               \
		if (k != 0) {                                                  \
			for (; i + w <= n; i += w)                             \
				*(vec *)(d + i) = *(const vec *)(s + i) / k;   \
			for (; i < n; i++)                                     \
				d[i] = s[i] / k;                               \
			return;                                                \
		}                                                              \
		for (; i + w <= n; i += w)                                     \
			*(vec *)(d + i) = *(const vec *)(s + i) * f;           \
		for (; i < n; i++)                                             \
			d[i] = s[i] * f;                                       \
	}
SCALE_COPY(scale_copy_f32, float)
SCALE_COPY(scale_copy_f64, double)

void reduce_scale(void *buf, size_t n, hvd_dtype_t dtype, double factor)
{
	switch (dtype) {
	case HVD_UINT8:
		SCALE_INT(uint8_t, 0, UINT8_MAX);
		break;
	case HVD_INT8:
		SCALE_INT(int8_t, INT8_MIN, INT8_MAX);
		break;
	case HVD_INT32:
		SCALE_INT(int32_t, INT32_MIN, INT32_MAX);
		break;
	case HVD_INT64:
		SCALE_INT(int64_t, INT64_MIN, INT64_MAX);
		break;
	case HVD_FLOAT16: {
		uint16_t *p = buf;
		float f = (float)factor, k = reduce_scale_divisor(factor);

		for (size_t i = 0; i < n; i++) {
			float x = hvd_half_to_float(p[i]);

			p[i] = hvd_float_to_half(reduce_scale1(x, f, k));
		}
		break;
	}
	case HVD_BFLOAT16: {
		uint16_t *p = buf;
		float f = (float)factor, k = reduce_scale_divisor(factor);

		for (size_t i = 0; i < n; i++) {
			float x = hvd_bf16_to_float(p[i]);

			p[i] = hvd_float_to_bf16(reduce_scale1(x, f, k));
		}
		break;
	}
	case HVD_FLOAT32:
		scale_copy_f32(buf, buf, n, factor);
		break;
	case HVD_FLOAT64:
		scale_copy_f64(buf, buf, n, factor);
		break;
	default:
		break;
	}
}

void reduce_scale_copy(void *dst, const void *src, size_t n, hvd_dtype_t dtype,
		       double factor)
{
	if (factor != 1.0 && dtype == HVD_FLOAT32) {
		scale_copy_f32(dst, src, n, factor);
		return;
	}
	if (factor != 1.0 && dtype == HVD_FLOAT64) {
		scale_copy_f64(dst, src, n, factor);
		return;
	}
	/* the other types: copy, then scale in place */
	if (dst != src)
		memcpy(dst, src, n * hvd_dtype_size(dtype));
	if (factor != 1.0)
		reduce_scale(dst, n, dtype, factor);
}

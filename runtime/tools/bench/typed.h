/*
 * tools/bench/typed.h - element i of a buffer of any hvd_dtype_t, read and
 * written as a double: how hvd-bench and the tests make inputs and expected
 * results for every type with one loop.
 *
 * The conversions are independent of libhvd's own (kernels/): float16
 * through GCC's _Float16, bfloat16 by rounding the float's bits, both to
 * the nearest, ties to even (as __float2half_rn and __float2bfloat16_rn
 * do), so a reference made here checks libhvd's and the GPU's, not
 * itself.  Integers are converted through int64_t: a value outside the
 * type wraps as the type's arithmetic would.
 */
#ifndef HVD_TOOLS_BENCH_TYPED_H
#define HVD_TOOLS_BENCH_TYPED_H

#include "hvd.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t typed_to_half(float f)
{
	_Float16 h = (_Float16)f;
	uint16_t u;

	memcpy(&u, &h, 2);
	return u;
}

static inline float typed_from_half(uint16_t u)
{
	_Float16 h;

	memcpy(&h, &u, 2);
	return (float)h;
}

static inline uint16_t typed_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000) /* NaN: stays a quiet NaN */
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static inline float typed_from_bf16(uint16_t u)
{
	uint32_t x = (uint32_t)u << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

/* buf[i] = v in type t (no-op for a type it does not know). */
static inline void typed_put(void *buf, size_t i, hvd_dtype_t t, double v)
{
	switch (t) {
	case HVD_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)(int64_t)v;
		break;
	case HVD_INT8:
		((int8_t *)buf)[i] = (int8_t)(int64_t)v;
		break;
	case HVD_INT32:
		((int32_t *)buf)[i] = (int32_t)(int64_t)v;
		break;
	case HVD_INT64:
		((int64_t *)buf)[i] = (int64_t)v;
		break;
	case HVD_FLOAT16:
		((uint16_t *)buf)[i] = typed_to_half((float)v);
		break;
	case HVD_BFLOAT16:
		((uint16_t *)buf)[i] = typed_to_bf16((float)v);
		break;
	case HVD_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	case HVD_FLOAT64:
		((double *)buf)[i] = v;
		break;
	default:
		break;
	}
}

/* buf[i] of type t as a double (0 for a type it does not know). */
static inline double typed_get(const void *buf, size_t i, hvd_dtype_t t)
{
	switch (t) {
	case HVD_UINT8:
		return ((const uint8_t *)buf)[i];
	case HVD_INT8:
		return ((const int8_t *)buf)[i];
	case HVD_INT32:
		return ((const int32_t *)buf)[i];
	case HVD_INT64:
		return (double)((const int64_t *)buf)[i];
	case HVD_FLOAT16:
		return typed_from_half(((const uint16_t *)buf)[i]);
	case HVD_BFLOAT16:
		return typed_from_bf16(((const uint16_t *)buf)[i]);
	case HVD_FLOAT32:
		return ((const float *)buf)[i];
	case HVD_FLOAT64:
		return ((const double *)buf)[i];
	default:
		return 0;
	}
}

#endif

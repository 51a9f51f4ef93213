/*
 * kernels/kernels.h - the reduction and copy kernels: loops over memory,
 * nothing else (no communicator, no transport).  Every data path of the
 * runtime (shared memory, the transport's algorithms, the engine's fusion
 * buffer, the checkpoint's staging) reduces and copies through these.
 */
#ifndef HVD_KERNELS_H
#define HVD_KERNELS_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Reduction kernels (reduce.c): dst[i] = dst[i] OP src[i] for n elements.
 * float16/bfloat16 are computed in float32.  AVERAGE reduces as SUM; the
 * caller divides (reduce_scale) once at the end. */
void reduce_apply(void *dst, const void *src, size_t n, hvd_dtype_t dtype,
		  hvd_op_t op);
/* dst[i] = a[i] OP b[i] (three-operand form, dst may alias a or b). */
void reduce_apply3(void *dst, const void *a, const void *b, size_t n,
		   hvd_dtype_t dtype, hvd_op_t op);
/* buf[i] *= factor (integers: rounded toward zero after the multiply).
 * An average divides instead: integers by k when factor is 1/k, floating
 * types by reduce_scale_divisor's k, giving the correctly rounded x / k
 * that torch's t / k and DDP's average give (x * (float)(1/3) is an ulp
 * away for some x). */
void reduce_scale(void *buf, size_t n, hvd_dtype_t dtype, double factor);
/* k when factor is exactly 1.0 / k for a whole k in [3, 2^24] (exact as
 * a float) that is not a power of two (those multiply exactly), else 0:
 * reduce_scale then divides by k. */
float reduce_scale_divisor(double factor);
/* One float scaled as reduce_scale scales it: x / k when k (from
 * reduce_scale_divisor) is not 0, else x * f (f: the factor as a float). */
static inline float reduce_scale1(float x, float f, float k)
{
	return k != 0.0f ? x / k : x * f;
}
/* dst[i] = src[i] * factor, the same values as a copy then reduce_scale
 * but in one pass for float32/float64 (a fusion buffer's pack and unpack);
 * factor 1 is a plain copy.  dst may equal src (never partially overlap). */
void reduce_scale_copy(void *dst, const void *src, size_t n, hvd_dtype_t dtype,
		       double factor);
/* memcpy with non-temporal stores: the copy goes to memory without reading
 * the destination's lines first or evicting the caches' contents; not
 * ordered with other stores until hvd_stream_fence(). */
void hvd_copy_stream(void *dst, const void *src, size_t n);
void hvd_stream_fence(void);
/* memcpy for the data paths' steps, into memory that may not be cached
 * (copy_stream.c says why not glibc's). */
void hvd_copy(void *dst, const void *src, size_t n);
/* float32 <-> float16 / bfloat16 conversions (round to nearest even). */
uint16_t hvd_float_to_half(float f);
float hvd_half_to_float(uint16_t h);
uint16_t hvd_float_to_bf16(float f);
float hvd_bf16_to_float(uint16_t h);

#pragma GCC visibility pop

#endif /* HVD_KERNELS_H */

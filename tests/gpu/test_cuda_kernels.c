/*
 * CUDA kernels against a host reference: scale for every type (packed and
 * misaligned paths, in and out of place), float32 <-> float16/bfloat16
 * casts with a folded-in scale (specials, subnormals, overflow), and the
 * batched copy (many entries, every alignment, more than one launch, one
 * large entry).  Needs a GPU; skips with the reason without one.
 */
#include "config.h"

#include "cuda/cuda_internal.h"
#include "gpu_ref.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N 1000003 /* odd: exercises the scalar tail after the packs */

/* Reference scale of element i of type t (fp16/bf16 in float32). */
#define SAT(T, LO, HI, x, f)                                                   \
	do {                                                                   \
		double v_ = trunc((double)(x) * (f));                          \
		*(T *)out = v_ <= (double)(LO)	 ? (T)(LO)                     \
			    : v_ >= (double)(HI) ? (T)(HI)                     \
						 : (T)v_;                      \
	} while (0)

/* Reference scale of element i of type t: reduce_scale's rules (fp16/bf16
 * in float32, integers truncated and saturated). */
static void ref_scale(void *dst, const void *src, size_t i, hvd_dtype_t t,
		      double f)
{
	void *out = (char *)dst + i * hvd_dtype_size(t);

	switch (t) {
	case HVD_UINT8:
		SAT(uint8_t, 0, UINT8_MAX, ((const uint8_t *)src)[i], f);
		break;
	case HVD_INT8:
		SAT(int8_t, INT8_MIN, INT8_MAX, ((const int8_t *)src)[i], f);
		break;
	case HVD_INT32:
		SAT(int32_t, INT32_MIN, INT32_MAX, ((const int32_t *)src)[i],
		    f);
		break;
	case HVD_INT64:
		SAT(int64_t, INT64_MIN, INT64_MAX, ((const int64_t *)src)[i],
		    f);
		break;
	case HVD_FLOAT16:
		((uint16_t *)dst)[i] =
		    ref_f2h(ref_h2f(((const uint16_t *)src)[i]) * (float)f);
		break;
	case HVD_BFLOAT16:
		((uint16_t *)dst)[i] =
		    ref_f2bf(ref_bf2f(((const uint16_t *)src)[i]) * (float)f);
		break;
	case HVD_FLOAT32:
		((float *)dst)[i] = ((const float *)src)[i] * (float)f;
		break;
	case HVD_FLOAT64:
		((double *)dst)[i] = ((const double *)src)[i] * f;
		break;
	default:
		break;
	}
}

/* Test data of type t: small values so integer products do not
 * overflow, varied signs and magnitudes for floats. */
static void fill(void *buf, size_t n, hvd_dtype_t t, unsigned seed)
{
	srand(seed);
	for (size_t i = 0; i < n; i++) {
		int r = rand();
		float v = (float)((r % 20001) - 10000) / 64.0f;

		switch (t) {
		case HVD_UINT8:
			((uint8_t *)buf)[i] = (uint8_t)(r % 40);
			break;
		case HVD_INT8:
			((int8_t *)buf)[i] = (int8_t)(r % 41 - 20);
			break;
		case HVD_INT32:
			((int32_t *)buf)[i] = r % 2000001 - 1000000;
			break;
		case HVD_INT64:
			((int64_t *)buf)[i] =
			    (int64_t)(r % 2000001 - 1000000) * 1000003LL;
			break;
		case HVD_FLOAT16:
			((uint16_t *)buf)[i] = ref_f2h(v);
			break;
		case HVD_BFLOAT16:
			((uint16_t *)buf)[i] = ref_f2bf(v);
			break;
		case HVD_FLOAT32:
			((float *)buf)[i] = v * 1.37f;
			break;
		case HVD_FLOAT64:
			((double *)buf)[i] = (double)v * 1.37;
			break;
		default:
			break;
		}
	}
}

static void *dev_alloc(size_t bytes)
{
	void *p = NULL;

	if (cudaMalloc(&p, bytes) != cudaSuccess)
		return NULL;
	return p;
}

/* Scale n elements at element offset off (0: packed path, 1: misaligned)
 * in or out of place; compare bit for bit. */
static void check_scale(hvd_dtype_t t, double f, size_t off, int in_place)
{
	size_t es = hvd_dtype_size(t), n = N, bytes = (n + 1) * es;
	char *h_src = malloc(bytes), *h_ref = malloc(bytes),
	     *h_out = malloc(bytes);
	char *d_src = dev_alloc(bytes), *d_dst = dev_alloc(bytes);
	size_t bad = 0, first = 0;
	cudaError_t err;

	fill(h_src, n + 1, t, 17 + (unsigned)t);
	for (size_t i = 0; i < n; i++)
		ref_scale(h_ref, h_src + off * es, i, t, f);
	cudaMemcpy(d_src, h_src, bytes, cudaMemcpyHostToDevice);
	err = cuda_kernel_scale(in_place ? d_src + off * es : d_dst,
				d_src + off * es, n, t, f, 0);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	cudaMemcpy(h_out, in_place ? d_src + off * es : d_dst, n * es,
		   cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < n; i++)
		if (memcmp(h_out + i * es, h_ref + i * es, es) &&
		    !(t == HVD_FLOAT32 &&
		      same_f32(((float *)(void *)h_out)[i],
			       ((float *)(void *)h_ref)[i])) &&
		    !bad++)
			first = i;
	ok(err == cudaSuccess && bad == 0,
	   "scale %s x%g (%s, %s): %zu of %zu differ%s%s", hvd_dtype_name(t), f,
	   off ? "misaligned" : "aligned", in_place ? "in place" : "out", bad,
	   n, err ? ": " : "", err ? cudaGetErrorString(err) : "");
	if (bad)
		diag("  first difference at element %zu", first);
	free(h_src);
	free(h_ref);
	free(h_out);
	cudaFree(d_src);
	cudaFree(d_dst);
}

static const float specials[] = {
    0.0f,     -0.0f,	 1.0f,	  -2.5f,    65504.0f, 65519.0f, 65520.0f,
    1e6f,     -1e6f,	 6.1e-5f, 5.96e-8f, 2.98e-8f, 1e-9f,	3.3895e38f,
    INFINITY, -INFINITY, NAN,	  0.1f,	    1.0f / 3, 1e-40f};

static void check_casts(hvd_dtype_t t, double f)
{
	size_t n = N, ns = sizeof(specials) / sizeof(specials[0]);
	float *h_src = malloc(n * 4), *h_back = malloc(n * 4);
	uint16_t *h_half = malloc(n * 2), *h_ref = malloc(n * 2);
	float *d_src = dev_alloc(n * 4), *d_back = dev_alloc(n * 4);
	uint16_t *d_half = dev_alloc(n * 2);
	size_t bad = 0, bad_back = 0, first = 0;
	int bf = t == HVD_BFLOAT16;
	cudaError_t err;

	srand(99);
	for (size_t i = 0; i < n; i++) {
		int e = rand() % 60 - 30;

		h_src[i] =
		    i < ns
			? specials[i]
			: ldexpf((float)(rand() % 200001 - 100000) / 100000.0f,
				 e);
	}
	cudaMemcpy(d_src, h_src, n * 4, cudaMemcpyHostToDevice);
	err = cuda_kernel_cast_from_f32(d_half, t, d_src, n, f, 0);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	cudaMemcpy(h_half, d_half, n * 2, cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < n; i++) {
		float x = h_src[i] * (float)f;

		h_ref[i] = bf ? ref_f2bf(x) : ref_f2h(x);
		if (!same_h(h_half[i], h_ref[i], bf) && !bad++)
			first = i;
	}
	ok(err == cudaSuccess && bad == 0,
	   "float32 -> %s x%g: %zu of %zu differ", hvd_dtype_name(t), f, bad,
	   n);
	if (bad)
		diag("  first at %zu: %g -> 0x%04x, want 0x%04x", first,
		     h_src[first], h_half[first], h_ref[first]);

	/* and back, from the reference halves */
	cudaMemcpy(d_half, h_ref, n * 2, cudaMemcpyHostToDevice);
	err = cuda_kernel_cast_to_f32(d_back, d_half, t, n, 1.0 / f, 0);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	cudaMemcpy(h_back, d_back, n * 4, cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < n; i++) {
		float want = (bf ? ref_bf2f(h_ref[i]) : ref_h2f(h_ref[i])) *
			     (float)(1.0 / f);

		if (!same_f32(h_back[i], want) && !bad_back++)
			first = i;
	}
	ok(err == cudaSuccess && bad_back == 0,
	   "%s -> float32 x%g: %zu of %zu differ", hvd_dtype_name(t), 1.0 / f,
	   bad_back, n);
	free(h_src);
	free(h_back);
	free(h_half);
	free(h_ref);
	cudaFree(d_src);
	cudaFree(d_back);
	cudaFree(d_half);
}

/* 400 copies (three launches), sizes 0..4999 bytes, every alignment of
 * source and destination, into disjoint slots; then one 64 MiB copy. */
static void check_batched_copy(void)
{
	enum { NC = 400, SLOT = 5024 };
	size_t bytes = (size_t)NC * SLOT;
	unsigned char *h_src = malloc(bytes), *h_dst = malloc(bytes),
		      *h_ref = calloc(1, bytes);
	unsigned char *d_src = dev_alloc(bytes), *d_dst = dev_alloc(bytes);
	struct cuda_copy *c = malloc(NC * sizeof(*c));
	size_t big = 64UL << 20, bad = 0;
	cudaError_t err;

	for (size_t i = 0; i < bytes; i++)
		h_src[i] = (unsigned char)(i * 131 + 7);
	srand(5);
	for (int i = 0; i < NC; i++) {
		size_t so = (size_t)(rand() % 17), dof = (size_t)(rand() % 17);
		size_t len = i == 3 ? 0 : (size_t)(rand() % 5000);

		c[i].src = d_src + (size_t)((i * 7) % NC) * SLOT + so;
		c[i].dst = d_dst + (size_t)i * SLOT + dof;
		c[i].bytes = len;
		memcpy(h_ref + (size_t)i * SLOT + dof,
		       h_src + (size_t)((i * 7) % NC) * SLOT + so, len);
	}
	cudaMemcpy(d_src, h_src, bytes, cudaMemcpyHostToDevice);
	cudaMemset(d_dst, 0, bytes);
	err = cuda_kernel_batched_copy(c, NC, 0);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	cudaMemcpy(h_dst, d_dst, bytes, cudaMemcpyDeviceToHost);
	for (size_t i = 0; i < bytes; i++)
		bad += h_dst[i] != h_ref[i];
	ok(err == cudaSuccess && bad == 0,
	   "batched copy of %d entries, every alignment: %zu bytes differ", NC,
	   bad);
	cudaFree(d_src);
	cudaFree(d_dst);

	d_src = dev_alloc(big);
	d_dst = dev_alloc(big);
	free(h_src);
	free(h_dst);
	h_src = malloc(big);
	h_dst = malloc(big);
	for (size_t i = 0; i < big; i++)
		h_src[i] = (unsigned char)(i * 13 + 1);
	cudaMemcpy(d_src, h_src, big, cudaMemcpyHostToDevice);
	c[0].src = d_src;
	c[0].dst = d_dst;
	c[0].bytes = big - 3;
	err = cuda_kernel_batched_copy(c, 1, 0);
	if (err == cudaSuccess)
		err = cudaDeviceSynchronize();
	cudaMemcpy(h_dst, d_dst, big - 3, cudaMemcpyDeviceToHost);
	ok(err == cudaSuccess && memcmp(h_dst, h_src, big - 3) == 0,
	   "batched copy of one 64 MiB entry");
	cudaFree(d_src);
	cudaFree(d_dst);
	free(h_src);
	free(h_dst);
	free(h_ref);
	free(c);
}

int main(void)
{
	const char *why;
	static const double factors[] = {0.5, 3.0};

	if (cuda_device_count(&why) == 0)
		skip_all("no CUDA device (%s)", why);
	if (cudaSetDevice(0) != cudaSuccess)
		skip_all("cudaSetDevice(0) failed");
	for (int t = 0; t < HVD_DTYPE_COUNT; t++)
		for (int k = 0; k < 2; k++)
			check_scale((hvd_dtype_t)t, factors[k], (size_t)k,
				    k == 1);
	check_scale(HVD_FLOAT32, 1.0 / 3, 0, 1);
	check_scale(HVD_FLOAT16, -0.25, 1, 0);
	/* saturation at the type's range, as reduce_scale */
	check_scale(HVD_INT8, 10.0, 0, 0);
	check_scale(HVD_UINT8, -1.0, 1, 1);
	check_scale(HVD_UINT8, 9.0, 0, 0);
	check_scale(HVD_INT32, 5000.0, 0, 1);
	is_int(cuda_kernel_scale(NULL, NULL, 10, HVD_DTYPE_COUNT, 1.0, 0),
	       cudaErrorInvalidValue, "scale refuses a bad type");
	is_int(cuda_kernel_scale(NULL, NULL, 0, HVD_FLOAT32, 2.0, 0),
	       cudaSuccess, "scale of 0 elements is a no-op");

	check_casts(HVD_FLOAT16, 1.0);
	check_casts(HVD_FLOAT16, 0.125);
	check_casts(HVD_BFLOAT16, 1.0);
	check_casts(HVD_BFLOAT16, 4.0);
	is_int(cuda_kernel_cast_from_f32(NULL, HVD_FLOAT32, NULL, 4, 1.0, 0),
	       cudaErrorInvalidValue, "cast refuses a non-16-bit target");

	check_batched_copy();
	return done_testing();
}

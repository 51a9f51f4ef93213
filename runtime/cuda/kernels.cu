/*
 * kernels.cu - the GPU path's CUDA kernels behind plain C entry points:
 * scale (prescale/postscale and averaging), float32 <-> float16/bfloat16
 * casts with a folded-in scale (fp16 compression), and the batched
 * device-to-device copy that packs and unpacks the fusion buffer.
 *
 * Every elementwise kernel is one template, pack_map: each thread moves
 * 16-byte packs (4 floats, 8 halves, ...) when both pointers are aligned
 * to the pack, with a scalar tail, in a grid-stride loop sized to the
 * device (a few blocks per SM), so that large arrays run near the memory
 * bandwidth of a device-to-device memcpy.  Misaligned pointers take the
 * scalar path; the result is the same.
 *
 * Arithmetic matches the host reference (reduce_scale in kernels/kernels.h): float16
 * and bfloat16 scale in float32 with round-to-nearest-even on the way
 * back, integers multiply in double, round toward zero and saturate.
 */
#include "config.h"

#include "cuda/cuda_internal.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define THREADS 256
#define MAX_DEVICES 64

/* ---------------------------------------------------------- launch size */

static int blocks_for(size_t work)
{
	static int sm_count[MAX_DEVICES];
	int dev = 0, sms;
	size_t blocks;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MAX_DEVICES)
		dev = 0;
	sms = sm_count[dev];
	if (sms <= 0) {
		if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount,
					   dev) != cudaSuccess ||
		    sms <= 0)
			sms = 16;
		sm_count[dev] = sms;
	}
	blocks = (work + THREADS - 1) / THREADS;
	if (blocks > (size_t)sms * 16)
		blocks = (size_t)sms * 16;
	return blocks ? (int)blocks : 1;
}

/* ----------------------------------------------------- elementwise maps */

template <typename T, int E> struct alignas(sizeof(T) * E) Pack {
	T v[E];
};

template <typename Tin, typename Tout, int E, typename Op>
__global__ void pack_map(Tout *dst, const Tin *src, size_t n, Op op)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	size_t nv = n / E;
	const Pack<Tin, E> *s = reinterpret_cast<const Pack<Tin, E> *>(src);
	Pack<Tout, E> *d = reinterpret_cast<Pack<Tout, E> *>(dst);

	for (size_t i = tid; i < nv; i += stride) {
		Pack<Tin, E> a = s[i];
		Pack<Tout, E> b;
#pragma unroll
		for (int k = 0; k < E; k++)
			b.v[k] = op(a.v[k]);
		d[i] = b;
	}
	for (size_t i = nv * E + tid; i < n; i += stride)
		dst[i] = op(src[i]);
}

static bool aligned(const void *p, size_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

/* Launch with packs of E elements when both pointers allow it. */
template <typename Tin, typename Tout, int E, typename Op>
static cudaError_t launch_map(Tout *dst, const Tin *src, size_t n, Op op,
			      cudaStream_t stream)
{
	if (n == 0)
		return cudaSuccess;
	if (aligned(dst, sizeof(Tout) * E) && aligned(src, sizeof(Tin) * E))
		pack_map<Tin, Tout, E, Op>
		    <<<blocks_for(n / E + 1), THREADS, 0, stream>>>(dst, src, n,
								    op);
	else
		pack_map<Tin, Tout, 1, Op>
		    <<<blocks_for(n), THREADS, 0, stream>>>(dst, src, n, op);
	return cudaGetLastError();
}

/* x * f in the type's accumulation type, back to the type. */
struct ScaleF32 {
	float f;
	__device__ float operator()(float x) const { return x * f; }
};
struct ScaleF64 {
	double f;
	__device__ double operator()(double x) const { return x * f; }
};
struct ScaleF16 {
	float f;
	__device__ __half operator()(__half x) const
	{
		return __float2half_rn(__half2float(x) * f);
	}
};
struct ScaleBF16 {
	float f;
	__device__ __nv_bfloat16 operator()(__nv_bfloat16 x) const
	{
		return __float2bfloat16_rn(__bfloat162float(x) * f);
	}
};
/* Integers as reduce_scale on the host: multiply in double, truncate
 * toward zero, saturate at the type's range. */
template <typename T> struct ScaleInt {
	double f, lo, hi;
	__device__ T operator()(T x) const
	{
		double v = trunc((double)x * f);

		return v <= lo ? (T)lo : v >= hi ? (T)hi : (T)v;
	}
};

extern "C" cudaError_t cuda_kernel_scale(void *dst, const void *src, size_t n,
					 hvd_dtype_t dtype, double factor,
					 cudaStream_t stream)
{
	switch (dtype) {
	case HVD_UINT8:
		return launch_map<uint8_t, uint8_t, 16>(
		    (uint8_t *)dst, (const uint8_t *)src, n,
		    ScaleInt<uint8_t>{factor, 0, UINT8_MAX}, stream);
	case HVD_INT8:
		return launch_map<int8_t, int8_t, 16>(
		    (int8_t *)dst, (const int8_t *)src, n,
		    ScaleInt<int8_t>{factor, INT8_MIN, INT8_MAX}, stream);
	case HVD_INT32:
		return launch_map<int32_t, int32_t, 4>(
		    (int32_t *)dst, (const int32_t *)src, n,
		    ScaleInt<int32_t>{factor, INT32_MIN, INT32_MAX}, stream);
	case HVD_INT64:
		return launch_map<int64_t, int64_t, 2>(
		    (int64_t *)dst, (const int64_t *)src, n,
		    ScaleInt<int64_t>{factor, (double)INT64_MIN,
				      (double)INT64_MAX},
		    stream);
	case HVD_FLOAT16:
		return launch_map<__half, __half, 8>(
		    (__half *)dst, (const __half *)src, n,
		    ScaleF16{(float)factor}, stream);
	case HVD_BFLOAT16:
		return launch_map<__nv_bfloat16, __nv_bfloat16, 8>(
		    (__nv_bfloat16 *)dst, (const __nv_bfloat16 *)src, n,
		    ScaleBF16{(float)factor}, stream);
	case HVD_FLOAT32:
		return launch_map<float, float, 4>(
		    (float *)dst, (const float *)src, n,
		    ScaleF32{(float)factor}, stream);
	case HVD_FLOAT64:
		return launch_map<double, double, 2>((double *)dst,
						     (const double *)src, n,
						     ScaleF64{factor}, stream);
	default:
		return cudaErrorInvalidValue;
	}
}

/* ---------------------------------------------------------------- casts */

struct F32ToF16 {
	float f;
	__device__ __half operator()(float x) const
	{
		return __float2half_rn(x * f);
	}
};
struct F32ToBF16 {
	float f;
	__device__ __nv_bfloat16 operator()(float x) const
	{
		return __float2bfloat16_rn(x * f);
	}
};
struct F16ToF32 {
	float f;
	__device__ float operator()(__half x) const
	{
		return __half2float(x) * f;
	}
};
struct BF16ToF32 {
	float f;
	__device__ float operator()(__nv_bfloat16 x) const
	{
		return __bfloat162float(x) * f;
	}
};

extern "C" cudaError_t
cuda_kernel_cast_from_f32(void *dst, hvd_dtype_t to_dtype, const float *src,
			  size_t n, double factor, cudaStream_t stream)
{
	switch (to_dtype) {
	case HVD_FLOAT16:
		return launch_map<float, __half, 4>(
		    (__half *)dst, src, n, F32ToF16{(float)factor}, stream);
	case HVD_BFLOAT16:
		return launch_map<float, __nv_bfloat16, 4>(
		    (__nv_bfloat16 *)dst, src, n, F32ToBF16{(float)factor},
		    stream);
	default:
		return cudaErrorInvalidValue;
	}
}

extern "C" cudaError_t cuda_kernel_cast_to_f32(float *dst, const void *src,
					       hvd_dtype_t from_dtype, size_t n,
					       double factor,
					       cudaStream_t stream)
{
	switch (from_dtype) {
	case HVD_FLOAT16:
		return launch_map<__half, float, 4>(dst, (const __half *)src, n,
						    F16ToF32{(float)factor},
						    stream);
	case HVD_BFLOAT16:
		return launch_map<__nv_bfloat16, float, 4>(
		    dst, (const __nv_bfloat16 *)src, n,
		    BF16ToF32{(float)factor}, stream);
	default:
		return cudaErrorInvalidValue;
	}
}

/* ------------------------------------------------------- batched copy */

/* Passed by value as the kernel parameter (3.8 KB, under the classic 4 KB
 * limit), so a launch needs no descriptor upload. */
struct Batch {
	void *dst[CUDA_BATCH_MAX];
	const void *src[CUDA_BATCH_MAX];
	size_t bytes[CUDA_BATCH_MAX];
};

/* blockIdx.y picks the copy, the x blocks stride over it: 16-byte words
 * when both ends are 16-byte aligned, 4-byte words when 4-aligned, else
 * bytes; the unaligned tail in bytes. */
__global__ void batched_copy(Batch b)
{
	int e = blockIdx.y;
	char *dst = (char *)b.dst[e];
	const char *src = (const char *)b.src[e];
	size_t bytes = b.bytes[e];
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	uintptr_t a = (uintptr_t)dst | (uintptr_t)src;
	size_t done = 0;

	if ((a & 15) == 0) {
		size_t nw = bytes / 16;

		for (size_t i = tid; i < nw; i += stride)
			((uint4 *)dst)[i] = ((const uint4 *)src)[i];
		done = nw * 16;
	} else if ((a & 3) == 0) {
		size_t nw = bytes / 4;

		for (size_t i = tid; i < nw; i += stride)
			((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
		done = nw * 4;
	}
	for (size_t i = done + tid; i < bytes; i += stride)
		dst[i] = src[i];
}

extern "C" cudaError_t cuda_kernel_batched_copy(const struct cuda_copy *copies,
						int n, cudaStream_t stream)
{
	for (int base = 0; base < n; base += CUDA_BATCH_MAX) {
		Batch b;
		int m = n - base < CUDA_BATCH_MAX ? n - base : CUDA_BATCH_MAX;
		size_t most = 0;
		unsigned gx, cap;

		for (int i = 0; i < m; i++) {
			b.dst[i] = copies[base + i].dst;
			b.src[i] = copies[base + i].src;
			b.bytes[i] = copies[base + i].bytes;
			if (b.bytes[i] > most)
				most = b.bytes[i];
		}
		if (most == 0)
			continue;
		/* Enough x blocks that the largest copy gets ~4 words per
		 * thread, capped so that the whole grid stays a few waves
		 * (~2048 blocks) however many copies share it. */
		gx = (unsigned)((most / 16 + THREADS * 4 - 1) / (THREADS * 4));
		cap = 2048 / (unsigned)m;
		if (cap < 4)
			cap = 4;
		if (gx > cap)
			gx = cap;
		if (gx < 1)
			gx = 1;
		batched_copy<<<dim3(gx, (unsigned)m), THREADS, 0, stream>>>(b);
		cudaError_t err = cudaGetLastError();
		if (err != cudaSuccess)
			return err;
	}
	return cudaSuccess;
}

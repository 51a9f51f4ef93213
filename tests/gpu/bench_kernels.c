/*
 * bench_kernels - bandwidth of the GPU path's kernels against a device-to-
 * device cudaMemcpy, as a table: scale (float32, float16, bfloat16,
 * float64), the float32 <-> float16/bfloat16 casts, and the batched copy
 * that packs the fusion buffer.  Bandwidth counts bytes read plus bytes
 * written, the same for the memcpy, so the ratio says how close a kernel
 * runs to the memory system.  Exit status 1 when a kernel is under
 * --target (default 0.7) of memcpy at the largest size (smaller sizes are
 * printed for information: they measure launch latency more than
 * bandwidth).
 *
 *   bench_kernels [--target 0.7] [--max-mib 256]
 */
#include "config.h"

#include "cuda/cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind {
	K_MEMCPY,
	K_SCALE_F32,
	K_SCALE_F16,
	K_SCALE_BF16,
	K_SCALE_F64,
	K_F32_TO_F16,
	K_F16_TO_F32,
	K_F32_TO_BF16,
	K_BF16_TO_F32,
	K_BATCHED_COPY,
	K_COUNT
};

static const struct {
	const char *name;
	int in_es, out_es; /* bytes per element read / written */
} kinds[K_COUNT] = {
    [K_MEMCPY] = {"cudaMemcpy D2D", 4, 4},
    [K_SCALE_F32] = {"scale float32", 4, 4},
    [K_SCALE_F16] = {"scale float16", 2, 2},
    [K_SCALE_BF16] = {"scale bfloat16", 2, 2},
    [K_SCALE_F64] = {"scale float64", 8, 8},
    [K_F32_TO_F16] = {"cast f32->f16", 4, 2},
    [K_F16_TO_F32] = {"cast f16->f32", 2, 4},
    [K_F32_TO_BF16] = {"cast f32->bf16", 4, 2},
    [K_BF16_TO_F32] = {"cast bf16->f32", 2, 4},
    [K_BATCHED_COPY] = {"batched copy x64", 4, 4},
};

#define NB 64

static cudaError_t launch(enum kind k, void *dst, void *src, size_t n,
			  struct cuda_copy *c)
{
	switch (k) {
	case K_MEMCPY:
		return cudaMemcpyAsync(dst, src, n * 4,
				       cudaMemcpyDeviceToDevice, 0);
	case K_SCALE_F32:
		return cuda_kernel_scale(dst, src, n, HVD_FLOAT32, 0.5, 0);
	case K_SCALE_F16:
		return cuda_kernel_scale(dst, src, n, HVD_FLOAT16, 0.5, 0);
	case K_SCALE_BF16:
		return cuda_kernel_scale(dst, src, n, HVD_BFLOAT16, 0.5, 0);
	case K_SCALE_F64:
		return cuda_kernel_scale(dst, src, n, HVD_FLOAT64, 0.5, 0);
	case K_F32_TO_F16:
		return cuda_kernel_cast_from_f32(dst, HVD_FLOAT16, src, n, 1.0,
						 0);
	case K_F16_TO_F32:
		return cuda_kernel_cast_to_f32(dst, src, HVD_FLOAT16, n, 1.0,
					       0);
	case K_F32_TO_BF16:
		return cuda_kernel_cast_from_f32(dst, HVD_BFLOAT16, src, n, 1.0,
						 0);
	case K_BF16_TO_F32:
		return cuda_kernel_cast_to_f32(dst, src, HVD_BFLOAT16, n, 1.0,
					       0);
	case K_BATCHED_COPY:
		for (int i = 0; i < NB; i++) {
			size_t part = n * 4 / NB;

			c[i].dst = (char *)dst + (size_t)i * part;
			c[i].src = (char *)src + (size_t)i * part;
			c[i].bytes = part;
		}
		return cuda_kernel_batched_copy(c, NB, 0);
	default:
		return cudaErrorInvalidValue;
	}
}

/* Seconds per call, best of a few timed batches. */
static double time_it(enum kind k, void *dst, void *src, size_t n, int iters,
		      cudaEvent_t a, cudaEvent_t b)
{
	struct cuda_copy c[NB];
	double best = 1e30;
	float ms;

	for (int w = 0; w < 3; w++)
		launch(k, dst, src, n, c);
	for (int rep = 0; rep < 3; rep++) {
		cudaEventRecord(a, 0);
		for (int i = 0; i < iters; i++)
			launch(k, dst, src, n, c);
		cudaEventRecord(b, 0);
		cudaEventSynchronize(b);
		cudaEventElapsedTime(&ms, a, b);
		if (ms / 1e3 / iters < best)
			best = ms / 1e3 / iters;
	}
	return best;
}

int main(int argc, char **argv)
{
	double target = 0.7;
	size_t max_mib = 256;
	const char *why;
	void *src, *dst;
	cudaEvent_t a, b;
	int fails = 0;
	cudaError_t err;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--target"))
			target = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--max-mib"))
			max_mib = (size_t)atol(argv[i + 1]);
	}
	if (cuda_device_count(&why) == 0) {
		printf("SKIP bench_kernels: no CUDA device (%s)\n", why);
		return 77;
	}
	cudaSetDevice(0);
	/* Buffers hold max_mib of float32 on the wider side of any kernel
	 * (8-byte float64 elements need twice the float32 count). */
	if (cudaMalloc(&src, max_mib << 21) != cudaSuccess ||
	    cudaMalloc(&dst, max_mib << 21) != cudaSuccess) {
		printf("FAIL bench_kernels: cudaMalloc of %zu MiB\n",
		       max_mib * 2);
		return 1;
	}
	cudaMemset(src, 0, max_mib << 21);
	cudaEventCreate(&a);
	cudaEventCreate(&b);
	{
		struct cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, 0) == cudaSuccess)
			printf("# device 0: %s, sm_%d%d, %d SMs\n", p.name,
			       p.major, p.minor, p.multiProcessorCount);
	}
	printf("# GB/s = (bytes read + bytes written) / time; ratio = kernel "
	       "GB/s / cudaMemcpy D2D GB/s at the same size\n");
	printf("# %-18s %12s %12s %10s %10s %8s\n", "kernel", "elements",
	       "MiB moved", "time(us)", "GB/s", "ratio");
	for (size_t mib = 1; mib <= max_mib; mib *= 16) {
		size_t n = (mib << 20) / 4; /* float32 elements */
		double memcpy_bw = 0;
		int iters = mib >= 64 ? 10 : 50;

		for (int k = 0; k < K_COUNT; k++) {
			double t =
			    time_it((enum kind)k, dst, src, n, iters, a, b);
			double bytes =
			    (double)n * (kinds[k].in_es + kinds[k].out_es);
			double bw = bytes / t / 1e9;
			int last = mib * 16 > max_mib;
			const char *verdict = "";

			if (k == K_MEMCPY)
				memcpy_bw = bw;
			else if (last && bw < target * memcpy_bw) {
				verdict = "  FAIL";
				fails++;
			} else if (last) {
				verdict = "  ok";
			}
			printf("  %-18s %12zu %12.1f %10.1f %10.1f %8.2f%s\n",
			       kinds[k].name, n, bytes / 1048576.0, t * 1e6, bw,
			       memcpy_bw > 0 ? bw / memcpy_bw : 0.0, verdict);
		}
	}
	err = cudaGetLastError();
	if (err != cudaSuccess) {
		printf("FAIL bench_kernels: %s\n", cudaGetErrorString(err));
		return 1;
	}
	printf("%s bench_kernels: %d kernel(s) under %.2fx of cudaMemcpy at "
	       "the largest size\n",
	       fails ? "FAIL" : "PASS", fails, target);
	cudaFree(src);
	cudaFree(dst);
	return fails ? 1 : 0;
}

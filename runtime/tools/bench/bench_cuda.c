/*
 * bench_cuda.c - device buffers for hvd-bench -D cuda (see bench_cuda.h).
 * Part of the hvd-bench program, not of libhvd: it calls the CUDA runtime
 * directly and reaches NCCL only through libhvd's public API, which routes
 * device pointers there.
 */
#include "config.h"

#include "tools/bench/bench_cuda.h"

#include <cuda_runtime.h>

static void *d_send, *d_recv;
static size_t n_send, n_recv;

static int fail(const char *what, cudaError_t err)
{
	fprintf(stderr, "hvd-bench: -D cuda: %s: %s (%s)\n", what,
		cudaGetErrorString(err), cudaGetErrorName(err));
	return -1;
}

int bench_cuda_setup(int local_rank, size_t send_bytes, size_t recv_bytes)
{
	cudaError_t err;
	int n = 0;

	err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess)
		return fail("cudaGetDeviceCount", err);
	if (n == 0) {
		fprintf(stderr, "hvd-bench: -D cuda: no CUDA device\n");
		return -1;
	}
	err = cudaSetDevice(local_rank % n);
	if (err != cudaSuccess)
		return fail("cudaSetDevice", err);
	err = cudaMalloc(&d_send, send_bytes ? send_bytes : 1);
	if (err == cudaSuccess)
		err = cudaMalloc(&d_recv, recv_bytes ? recv_bytes : 1);
	if (err != cudaSuccess)
		return fail("cudaMalloc", err);
	n_send = send_bytes;
	n_recv = recv_bytes;
	return 0;
}

void *bench_cuda_send(void) { return d_send; }

void *bench_cuda_recv(void) { return d_recv; }

int bench_cuda_upload(const void *send, const void *recv)
{
	cudaError_t err =
	    cudaMemcpy(d_send, send, n_send, cudaMemcpyHostToDevice);

	if (err == cudaSuccess)
		err = cudaMemcpy(d_recv, recv, n_recv, cudaMemcpyHostToDevice);
	return err == cudaSuccess ? 0 : fail("cudaMemcpy to the device", err);
}

int bench_cuda_download(void *recv)
{
	cudaError_t err =
	    cudaMemcpy(recv, d_recv, n_recv, cudaMemcpyDeviceToHost);

	return err == cudaSuccess ? 0 : fail("cudaMemcpy to the host", err);
}

void bench_cuda_teardown(void)
{
	cudaFree(d_send);
	cudaFree(d_recv);
	d_send = d_recv = NULL;
}

/*
 * Device buffers through the public API of libhvd (run under hvdrun, one
 * GPU per rank): the blocking collectives route device memory to NCCL,
 * and the engine fuses device allreduces (prescale, postscale, fp16
 * compression, groups) without mixing them with host ones submitted at
 * the same time.  Every rank checks its results against a host reference;
 * rank 0 prints one TAP line per check for all ranks (a host allreduce of
 * the verdicts).  Last, with two ranks or more, a device allreduce that
 * one rank refuses must fail on the others at once.
 *
 *   hvdrun -np N gpu/test_cuda_hvd
 */
#include "config.h"

#include "hvd.h"
#include "tap.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank_, size_;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Report a check for all ranks: rank 0 prints it when every rank passed. */
static void all_ok(int good, const char *what)
{
	int32_t g = good ? 1 : 0;
	hvd_status_t st =
	    hvd_allreduce(HVD_IN_PLACE, &g, 1, HVD_INT32, HVD_MIN);

	if (!good)
		printf("# rank %d: FAIL %s [%s]\n", rank_, what,
		       hvd_last_error());
	if (rank_ == 0)
		ok(st == HVD_OK && g == 1, "%s (%d rank%s)", what, size_,
		   size_ == 1 ? "" : "s");
}

static float value(int r, size_t i)
{
	return (float)((i * 7 + (size_t)r * 3) % 11);
}

static float sum_of(size_t i)
{
	float s = 0;

	for (int r = 0; r < size_; r++)
		s += value(r, i);
	return s;
}

static float *dev_f32(size_t n, int r, size_t shift)
{
	float *h = malloc(n * 4 + 4), *d = NULL;

	for (size_t i = 0; i < n; i++)
		h[i] = value(r, i + shift);
	if (cudaMalloc((void **)&d, n * 4 + 4) != cudaSuccess)
		d = NULL;
	else
		cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice);
	free(h);
	return d;
}

static float *host_copy(const float *d, size_t n)
{
	float *h = malloc(n * 4 + 4);

	cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost);
	return h;
}

static void blocking(void)
{
	size_t n = 100003, bad = 0;
	float *d = dev_f32(n, rank_, 0), *h;
	float *g, *big;
	hvd_status_t st;

	st = hvd_allreduce(HVD_IN_PLACE, d, n, HVD_FLOAT32, HVD_SUM);
	h = host_copy(d, n);
	for (size_t i = 0; i < n; i++)
		bad += h[i] != sum_of(i);
	all_ok(st == HVD_OK && bad == 0, "hvd_allreduce on device memory");
	free(h);

	cudaFree(d);
	d = dev_f32(n, rank_, 0);
	st = hvd_allreduce(d, d, n, HVD_FLOAT32, HVD_AVERAGE);
	h = host_copy(d, n);
	bad = 0;
	for (size_t i = 0; i < n; i++) {
		float want = sum_of(i) / (float)size_, diff = h[i] - want;

		bad += diff > 1e-5f || diff < -1e-5f;
	}
	all_ok(st == HVD_OK && bad == 0, "hvd_allreduce average on device");
	free(h);

	/* allgather: every rank 1000 elements */
	big = NULL;
	cudaMalloc((void **)&big, (size_t)size_ * 1000 * 4);
	g = dev_f32(1000, rank_, 0);
	st = hvd_allgather(g, big, 1000, HVD_FLOAT32);
	h = host_copy(big, (size_t)size_ * 1000);
	bad = 0;
	for (int r = 0; r < size_; r++)
		for (size_t i = 0; i < 1000; i++)
			bad += h[(size_t)r * 1000 + i] != value(r, i);
	all_ok(st == HVD_OK && bad == 0, "hvd_allgather on device memory");
	free(h);

	/* broadcast from the last rank */
	cudaFree(d);
	d = dev_f32(n, rank_, 0);
	st = hvd_broadcast(d, n, HVD_FLOAT32, size_ - 1);
	h = host_copy(d, n);
	bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += h[i] != value(size_ - 1, i);
	all_ok(st == HVD_OK && bad == 0, "hvd_broadcast on device memory");
	free(h);

	/* alltoall: block for rank p holds value(rank, p*1000+i) */
	cudaFree(g);
	g = dev_f32((size_t)size_ * 1000, rank_, 0);
	st = hvd_alltoall(g, big, 1000, HVD_FLOAT32);
	h = host_copy(big, (size_t)size_ * 1000);
	bad = 0;
	for (int p = 0; p < size_; p++)
		for (size_t i = 0; i < 1000; i++)
			bad += h[(size_t)p * 1000 + i] !=
			       value(p, (size_t)rank_ * 1000 + i);
	all_ok(st == HVD_OK && bad == 0, "hvd_alltoall on device memory");
	free(h);

	/* reducescatter of an uneven count */
	{
		size_t c = (size_t)size_ * 100 + 1;
		size_t mine = hvd_reducescatter_count(c, rank_, size_);
		size_t off = hvd_reducescatter_offset(c, rank_, size_);

		cudaFree(g);
		g = dev_f32(c, rank_, 0);
		st = hvd_reducescatter(g, big, c, HVD_FLOAT32, HVD_SUM);
		h = host_copy(big, mine);
		bad = 0;
		for (size_t i = 0; i < mine; i++)
			bad += h[i] != sum_of(off + i);
		all_ok(st == HVD_OK && bad == 0,
		       "hvd_reducescatter on device memory");
		free(h);
	}
	cudaFree(g);
	cudaFree(big);
	cudaFree(d);
}

/* The engine: named async device allreduces, fused; a host one at the
 * same time; fp16 compression; a grouped pair. */
static void engine(void)
{
	enum { NT = 8 };
	static const size_t counts[NT] = {1,	  1000, 65536, 3,
					  250000, 17,	4096,  100};
	hvd_handle_t hs[NT + 1];
	float *d[NT], host[64];
	hvd_opts_t o;
	size_t bad = 0;
	int good = 1, gid = 0;
	char name[64];

	hvd_opts_init(&o);
	o.prescale = 2.0;
	o.postscale = 0.25;
	for (int k = 0; k < NT; k++) {
		d[k] = dev_f32(counts[k], rank_, (size_t)k);
		snprintf(name, sizeof(name), "gpu.grad.%d", k);
		good &= hvd_allreduce_async(name, HVD_IN_PLACE, d[k], counts[k],
					    HVD_FLOAT32, HVD_SUM, &o,
					    &hs[k]) == HVD_OK;
	}
	for (int i = 0; i < 64; i++)
		host[i] = value(rank_, (size_t)i);
	good &=
	    hvd_allreduce_async("gpu.host.mixed", HVD_IN_PLACE, host, 64,
				HVD_FLOAT32, HVD_SUM, NULL, &hs[NT]) == HVD_OK;
	for (int k = 0; k <= NT; k++)
		good &= hvd_wait(hs[k]) == HVD_OK;
	for (int k = 0; k < NT; k++) {
		float *h = host_copy(d[k], counts[k]);

		for (size_t i = 0; i < counts[k]; i++)
			bad += h[i] != sum_of(i + (size_t)k) * 0.5f;
		free(h);
	}
	for (int i = 0; i < 64; i++)
		bad += host[i] != sum_of((size_t)i);
	all_ok(good && bad == 0,
	       "engine: 8 device allreduces fused (prescale 2, postscale "
	       "0.25) next to a host one");

	/* fp16 compression, averaged */
	hvd_opts_init(&o);
	o.compress_fp16 = 1;
	good = hvd_allreduce_async("gpu.fp16", HVD_IN_PLACE, d[4], counts[4],
				   HVD_FLOAT32, HVD_SUM, &o, &hs[0]) == HVD_OK;
	good &= hvd_wait(hs[0]) == HVD_OK;
	{
		float *h = host_copy(d[4], counts[4]);

		bad = 0;
		for (size_t i = 0; i < counts[4]; i++) {
			float want = sum_of(i + 4) * 0.5f * (float)size_;
			float diff = h[i] - want;

			bad += diff > 1e-2f * (1 + want) ||
			       diff < -1e-2f * (1 + want);
		}
		free(h);
	}
	all_ok(good && bad == 0, "engine: fp16-compressed device allreduce");

	/* a group: two ops that must run in the same cycle */
	good = hvd_group_begin(&gid) == HVD_OK;
	hvd_opts_init(&o);
	o.group = gid;
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof(name), "gpu.group.%d", k);
		cudaFree(d[k]);
		d[k] = dev_f32(counts[k], rank_, (size_t)k);
		good &= hvd_allreduce_async(name, HVD_IN_PLACE, d[k], counts[k],
					    HVD_FLOAT32, HVD_SUM, &o,
					    &hs[k]) == HVD_OK;
	}
	good &= hvd_group_end(gid) == HVD_OK;
	for (int k = 0; k < 2; k++)
		good &= hvd_wait(hs[k]) == HVD_OK;
	bad = 0;
	for (int k = 0; k < 2; k++) {
		float *h = host_copy(d[k], counts[k]);

		for (size_t i = 0; i < counts[k]; i++)
			bad += h[i] != sum_of(i + (size_t)k);
		free(h);
	}
	all_ok(good && bad == 0, "engine: grouped device allreduces");

	/* broadcast and allgather (different counts per rank) via the
	 * engine */
	{
		size_t mine = 10 + (size_t)rank_, total = 0;
		float *out = NULL, *h;

		for (int r = 0; r < size_; r++)
			total += 10 + (size_t)r;
		cudaFree(d[0]);
		d[0] = dev_f32(mine, rank_, 0);
		cudaMalloc((void **)&out, total * 4);
		good = hvd_allgather_async("gpu.ag", d[0], out, mine,
					   HVD_FLOAT32, NULL, &hs[0]) == HVD_OK;
		good &= hvd_wait(hs[0]) == HVD_OK;
		h = host_copy(out, total);
		bad = 0;
		total = 0;
		for (int r = 0; r < size_; r++) {
			for (size_t i = 0; i < 10 + (size_t)r; i++)
				bad += h[total + i] != value(r, i);
			total += 10 + (size_t)r;
		}
		free(h);
		all_ok(good && bad == 0,
		       "engine: device allgather of uneven counts");
		cudaFree(out);

		good =
		    hvd_broadcast_async("gpu.bcast", d[2], counts[2],
					HVD_FLOAT32, 0, NULL, &hs[0]) == HVD_OK;
		good &= hvd_wait(hs[0]) == HVD_OK;
		all_ok(good, "engine: device broadcast");
	}
	for (int k = 0; k < NT; k++)
		cudaFree(d[k]);
}

/* The producer of a tensor is late on the caller's stream (a host function
 * that sleeps, then an asynchronous copy from page-locked memory): without
 * hvd_stream_set NCCL would reduce the zeros the buffer held before; with
 * it, NCCL's stream waits for the caller's on the GPU, no host sync, and
 * the caller's stream waits for the result. */
static void CUDART_CB late_producer(void *arg)
{
	(void)arg;
	usleep(200000);
}

static void streams(void)
{
	const size_t n = 1u << 20;
	cudaStream_t s;
	float *d = NULL, *h = NULL, *out = NULL;
	hvd_handle_t hd;
	size_t bad = 0;
	int good = 1;

	good &= cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) ==
		cudaSuccess;
	good &= cudaMalloc((void **)&d, n * 4) == cudaSuccess;
	good &= cudaMallocHost((void **)&h, n * 4) == cudaSuccess;
	good &= cudaMallocHost((void **)&out, n * 4) == cudaSuccess;
	if (!good) {
		all_ok(0, "engine: device allreduce ordered after the "
			  "caller's stream (setup)");
		return;
	}
	cudaMemset(d, 0, n * 4);
	cudaDeviceSynchronize();
	for (size_t i = 0; i < n; i++)
		h[i] = value(rank_, i);
	good &= hvd_stream_set(s) == HVD_OK;
	good &= cudaLaunchHostFunc(s, late_producer, NULL) == cudaSuccess;
	good &= cudaMemcpyAsync(d, h, n * 4, cudaMemcpyHostToDevice, s) ==
		cudaSuccess;
	good &= hvd_allreduce_async("gpu.stream", HVD_IN_PLACE, d, n,
				    HVD_FLOAT32, HVD_SUM, NULL,
				    &hd) == HVD_OK;
	good &= hvd_wait(hd) == HVD_OK;
	good &= cudaMemcpyAsync(out, d, n * 4, cudaMemcpyDeviceToHost, s) ==
		cudaSuccess;
	good &= cudaStreamSynchronize(s) == cudaSuccess;
	for (size_t i = 0; i < n; i++)
		bad += out[i] != sum_of(i);
	good &= hvd_stream_set(NULL) == HVD_OK;
	all_ok(good && bad == 0,
	       "engine: device allreduce ordered after the caller's stream "
	       "(hvd_stream_set, a late producer, no host sync)");
	cudaFree(d);
	cudaFreeHost(h);
	cudaFreeHost(out);
	cudaStreamDestroy(s);
}

/* Last, it leaves the blocking collectives apart: rank 1 refuses a device
 * allreduce (an unknown reduction) that every other rank makes.  The
 * others' NCCL waits must see the refusal and fail at once, not wait for
 * rank 1 until HOROVOD_PEER_TIMEOUT (60 s).  Rank 0 reports what it saw:
 * the verdicts can no longer travel by a blocking collective. */
static void refused(void)
{
	const size_t n = 1u << 20;
	float *d = dev_f32(n, rank_, 0);
	hvd_op_t op = rank_ == 1 ? (hvd_op_t)99 : HVD_SUM;
	double t;
	hvd_status_t st;

	if (rank_ == 1)
		sleep(1); /* the others are in NCCL's wait by then */
	t = now_s();
	st = hvd_allreduce(HVD_IN_PLACE, d, n, HVD_FLOAT32, op);
	t = now_s() - t;

	if (rank_ == 0) {
		ok(st == HVD_ERR_MISMATCH && t < 20,
		   "a device allreduce refused on rank 1 fails on rank 0 "
		   "with HVD_ERR_MISMATCH, not at the timeout (%.1f s, %s)",
		   t, hvd_last_error());
	}
	cudaFree(d);
}

int main(void)
{
	int ndev = 0;
	cudaError_t err = cudaGetDeviceCount(&ndev);
	hvd_status_t st;

	if (err != cudaSuccess || ndev == 0)
		skip_all("no CUDA device (cudaGetDeviceCount: %s)",
			 err != cudaSuccess ? cudaGetErrorString(err)
					    : "0 devices");
	st = hvd_init();
	if (st != HVD_OK) {
		if (!getenv("PMIX_RANK"))
			skip_all("hvd_init: %s (run it under hvdrun)",
				 hvd_last_error());
		printf("1..1\nnot ok 1 - hvd_init: %s\n", hvd_last_error());
		return 1;
	}
	rank_ = hvd_rank();
	size_ = hvd_size();
	if (hvd_local_size() > ndev) {
		if (rank_ == 0)
			printf("1..0 # SKIP %d ranks on this node but %d "
			       "GPU(s): NCCL needs one GPU per rank\n",
			       hvd_local_size(), ndev);
		hvd_finalize();
		return 0;
	}
	cudaSetDevice(hvd_local_rank());
	blocking();
	engine();
	streams();
	if (size_ > 1)
		refused();
	hvd_finalize();
	return rank_ == 0 ? done_testing() : 0;
}

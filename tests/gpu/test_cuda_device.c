/*
 * GPU path without and with a GPU: device detection is cached and cheap,
 * host pointers are never device pointers, errors carry the CUDA/NCCL
 * name, file and line, every type maps to NCCL.  With a GPU: device,
 * managed and pinned memory are told apart, a host-pointer check creates
 * no CUDA context, the checkpointer's staging copies round-trip.
 */
#include "config.h"

#include "cuda/cuda_internal.h"
/* (weak declarations: cuda_device.o is linked for cuda_device_count) */
#include "cuda/cuda_internal.h"
#include "tap.h"

#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>

#define GPU_TESTS 9

/* Whether device 0's primary context is active (driver entry point). */
static int primary_active(void)
{
	CUresult (*state)(CUdevice, unsigned int *, int *) = NULL;
	unsigned int flags;
	int active = -1;

#if CUDART_VERSION >= 12050
	if (cudaGetDriverEntryPointByVersion(
		"cuDevicePrimaryCtxGetState", (void **)&state, 12000,
		cudaEnableDefault, NULL) != cudaSuccess ||
	    !state)
		return -1;
#else
	if (cudaGetDriverEntryPoint("cuDevicePrimaryCtxGetState",
				    (void **)&state, cudaEnableDefault,
				    NULL) != cudaSuccess ||
	    !state)
		return -1;
#endif
	if (state(0, &flags, &active) != CUDA_SUCCESS)
		return -1;
	return active;
}

static void gpu_tests(void)
{
	int host_stack = 0, *dev = NULL, *managed = NULL, *pinned = NULL;
	int src[64], back[64], ok_copy = 1;
	void *ph = NULL;

	/* Before anything allocates: a host check must not make a context. */
	int before = primary_active();
	ok(cuda_is_device_ptr(&host_stack) == 0, "stack is host memory");
	int after = primary_active();
	ok(before == 0 && after == 0,
	   "a host-pointer check creates no context (active before %d, "
	   "after %d)",
	   before, after);

	if (cudaMalloc((void **)&dev, sizeof(src)) != cudaSuccess ||
	    cudaMallocManaged((void **)&managed, 64, cudaMemAttachGlobal) !=
		cudaSuccess ||
	    cudaMallocHost((void **)&pinned, 64) != cudaSuccess) {
		skip(GPU_TESTS - 2, "allocation failed");
		return;
	}
	ok(cuda_is_device_ptr(dev) == 1, "cudaMalloc memory is device memory");
	ok(cuda_is_device_ptr((char *)dev + 8) == 1,
	   "an interior pointer is device memory");
	ok(cuda_is_device_ptr(managed) == 1, "managed memory goes to NCCL");
	ok(cuda_is_device_ptr(pinned) == 0, "pinned host memory is host");
	is_int(cuda_ptr_device(dev), 0, "device of a cudaMalloc pointer");

	for (int i = 0; i < 64; i++)
		src[i] = i * 7 - 3;
	if (cuda_memcpy_to_device(dev, src, sizeof(src)) != HVD_OK ||
	    cuda_memcpy_to_host(back, dev, sizeof(back)) != HVD_OK)
		ok_copy = 0;
	for (int i = 0; ok_copy && i < 64; i++)
		ok_copy = back[i] == src[i];
	ok(ok_copy, "staging copies round-trip (%s)", hvd_last_error());
	ok(cuda_host_alloc(&ph, 1 << 20) == HVD_OK && ph,
	   "page-locked staging buffer");
	cuda_host_free(ph);
	cudaFree(dev);
	cudaFree(managed);
	cudaFreeHost(pinned);
}

static hvd_status_t local_bcast(void *ctx, void *buf, size_t bytes, int root)
{
	(void)ctx;
	(void)buf;
	(void)bytes;
	(void)root;
	return HVD_OK;
}

int main(void)
{
	const char *why = NULL;
	int n, heap_ok;
	char *heap = malloc(4096);
	void *tmp = &n;
	double t0, dt;
	hvd_status_t st;

	n = cuda_device_count(&why);
	ok(n >= 0 && why && *why, "device count %d (%s)", n, why);
	is_int(cuda_device_count(NULL), n, "device count is cached");
	ok(cuda_is_device_ptr(NULL) == 0, "NULL is not device memory");
	ok(cuda_is_device_ptr(HVD_IN_PLACE) == 0,
	   "HVD_IN_PLACE is not device memory");
	heap_ok = cuda_is_device_ptr(heap) == 0;
	ok(heap_ok, "malloc memory is host memory");
	is_int(cuda_ptr_device(heap), -1, "host memory has no device");
	if (n == 0) {
		/* Without a device every check must return at once. */
		t0 = hvd_now();
		for (int i = 0; i < 100000; i++)
			heap_ok &= cuda_is_device_ptr(heap) == 0;
		dt = hvd_now() - t0;
		ok(heap_ok && dt < 0.5,
		   "100000 checks without a GPU take %.3f s", dt);
		ok(cuda_host_alloc(&tmp, 16) == HVD_ERR_CUDA && !tmp,
		   "pinned allocation refused without a GPU: %s",
		   hvd_last_error());
	} else {
		skip(2, "the no-GPU fast path needs a machine without a GPU");
	}
	ok(cuda_memcpy_to_host(heap, &n, sizeof(n)) == HVD_ERR_INVALID_ARG,
	   "staging refuses host memory as the device side");

	st = cuda_error_at(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)",
			   "runtime/cuda/x.c", 42);
	is_int(st, HVD_ERR_CUDA, "CUDA failures are HVD_ERR_CUDA");
	ok(strstr(hvd_last_error(), "cudaMalloc(&p, n)") &&
	       strstr(hvd_last_error(), "cudaErrorMemoryAllocation") &&
	       strstr(hvd_last_error(), "x.c:42"),
	   "message names call, error and place: %s", hvd_last_error());
	st = nccl_error_at(ncclUnhandledCudaError, "ncclAllReduce(...)",
			   "runtime/cuda/y.c", 7);
	is_int(st, HVD_ERR_NCCL, "NCCL failures are HVD_ERR_NCCL");
	ok(strstr(hvd_last_error(), "ncclAllReduce") &&
	       strstr(hvd_last_error(), "y.c:7"),
	   "message names call and place: %s", hvd_last_error());

	for (int t = 0; t < HVD_DTYPE_COUNT; t++)
		ok(nccl_dtype((hvd_dtype_t)t) >= 0, "%s maps to an NCCL type",
		   hvd_dtype_name((hvd_dtype_t)t));
	is_int(nccl_dtype(HVD_DTYPE_COUNT), -1, "bad type has no NCCL type");
	is_int(nccl_redop(HVD_AVERAGE), ncclAvg, "average is ncclAvg");
	is_int(nccl_redop(HVD_OP_COUNT), -1, "bad op has no NCCL op");
	{
		/* hierarchical layout: node index, local rank, applies? */
		static const int n4[] = {0, 0, 1, 1}, nx[] = {0, 1, 0, 1},
				 n1[] = {3, 3, 3}, n2[] = {0, 1},
				 nu[] = {0, 0, 1}, n6[] = {5, 5, 7, 7, 9, 9};
		int node, lr, nodes, ls;

		ok(cuda_hier_layout(n4, 4, 3, &node, &lr, &nodes, &ls) == 1 &&
		       node == 1 && lr == 1 && nodes == 2 && ls == 2,
		   "hierarchical: 2 nodes x 2, rank 3 is node 1 local 1");
		ok(cuda_hier_layout(nx, 4, 2, &node, &lr, &nodes, &ls) == 1 &&
		       node == 0 && lr == 1,
		   "hierarchical: interleaved ranks, rank 2 is node 0 "
		   "local 1");
		ok(cuda_hier_layout(n6, 6, 4, &node, &lr, &nodes, &ls) == 1 &&
		       node == 2 && lr == 0 && nodes == 3,
		   "hierarchical: 3 nodes, rank 4 is node 2 local 0");
		ok(cuda_hier_layout(n1, 3, 0, &node, &lr, &nodes, &ls) == 0,
		   "hierarchical: one node stays flat");
		ok(cuda_hier_layout(n2, 2, 1, &node, &lr, &nodes, &ls) == 0,
		   "hierarchical: one rank per node stays flat");
		ok(cuda_hier_layout(nu, 3, 0, &node, &lr, &nodes, &ls) == 0 &&
		       ls == 0,
		   "hierarchical: uneven nodes stay flat");
	}
	{
		struct cuda_boot bad = {2, 2, NULL, local_bcast, NULL};
		struct cuda_boot one = {0, 1, NULL, local_bcast, NULL};
		struct cuda_comm *cc = (struct cuda_comm *)&bad;

		is_int(cuda_comm_create(&bad, &cc), HVD_ERR_INVALID_ARG,
		       "a bootstrap with rank >= size is refused");
		ok(cc == NULL, "and no communicator comes back");
		if (n == 0) {
			st = cuda_comm_create(&one, &cc);
			ok(st == HVD_ERR_NCCL && !cc &&
			       strstr(hvd_last_error(), why),
			   "without a GPU, NCCL init fails with the reason "
			   "(no hang): %s",
			   hvd_last_error());
		} else {
			skip(1, "init failure needs a machine without a GPU");
		}
	}
	ok(cuda_settings()->num_streams >= 1, "settings load (%d stream(s))",
	   cuda_settings()->num_streams);

	if (n == 0) {
		char reason[300];

		snprintf(reason, sizeof(reason), "no CUDA device (%s)", why);
		skip(GPU_TESTS, reason);
	} else
		gpu_tests();
	free(heap);
	return done_testing();
}

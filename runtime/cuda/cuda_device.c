/*
 * cuda_device.c - what the GPU path knows about devices: whether there are
 * any, which memory a pointer is, the checkpointer's staging copies, the
 * GPU settings, error messages and NVTX ranges.
 *
 * cuda_is_device_ptr() runs for every buffer the runtime sees, host or
 * not, so it must be cheap and harmless:
 *   - without a driver or a GPU the first cudaGetDeviceCount() failure is
 *     cached and every later call returns 0 at once;
 *   - cudaPointerGetAttributes() creates a context on the calling thread's
 *     current device when there is none, which on a shared node would put
 *     ~500 MB on GPU 0 for every host-only rank.  Device memory can only
 *     exist where a context is active, so the query runs only with a
 *     current context, or on a device whose primary context is already
 *     active (asked through the driver's cuDevicePrimaryCtxGetState, found
 *     with cudaGetDriverEntryPointByVersion so libhvd needs no libcuda at
 *     link time).  No active context anywhere: the pointer is host memory.
 */
#include "config.h"

#include "cuda/cuda_internal.h"

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
#endif

/* ------------------------------------------------------------ errors */

static const char *base_name(const char *file)
{
	const char *s = strrchr(file, '/');

	return s ? s + 1 : file;
}

hvd_status_t cuda_error_at(cudaError_t err, const char *what, const char *file,
			   int line)
{
	/* Clear a non-sticky error so that it does not resurface in the
	 * next unrelated cudaGetLastError(). */
	(void)cudaGetLastError();
	return hvd_error(HVD_ERR_CUDA, "%s: %s (%s) at %s:%d", what,
			 cudaGetErrorString(err), cudaGetErrorName(err),
			 base_name(file), line);
}

hvd_status_t nccl_error_at(ncclResult_t res, const char *what, const char *file,
			   int line)
{
	const char *last = ncclGetLastError(NULL);

	return hvd_error(HVD_ERR_NCCL, "%s: %s (NCCL %d) at %s:%d%s%s", what,
			 ncclGetErrorString(res), (int)res, base_name(file),
			 line, last && *last ? "; NCCL: " : "",
			 last ? last : "");
}

/* ---------------------------------------------------------- settings */

static struct cuda_settings settings;
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static void settings_load(void)
{
	long streams = hvd_env_long("HOROVOD_NUM_NCCL_STREAMS", 1);

	if (streams < 1 || streams > 16) {
		hvd_log(HVD_LOG_WARNING,
			"HOROVOD_NUM_NCCL_STREAMS=%ld: expected 1..16; "
			"using 1",
			streams);
		streams = 1;
	}
	settings.num_streams = (int)streams;
	settings.hierarchical =
	    hvd_env_bool("HOROVOD_HIERARCHICAL_ALLREDUCE", 0);
	settings.nvtx = !hvd_env_bool("HOROVOD_DISABLE_NVTX_RANGES", 0);
	settings.fusion_bytes =
	    hvd_env_size("HOROVOD_FUSION_THRESHOLD", 128UL << 20);
	settings.timeout = hvd_env_double("HOROVOD_PEER_TIMEOUT", 60.0);
	if (settings.timeout <= 0)
		settings.timeout = 60.0;
	hvd_log(HVD_LOG_INFO,
		"GPU path: HOROVOD_NUM_NCCL_STREAMS=%d "
		"HOROVOD_HIERARCHICAL_ALLREDUCE=%d "
		"HOROVOD_DISABLE_NVTX_RANGES=%d HOROVOD_FUSION_THRESHOLD=%zu "
		"HOROVOD_PEER_TIMEOUT=%g (NCCL %d.%d.%d)",
		settings.num_streams, settings.hierarchical, !settings.nvtx,
		settings.fusion_bytes, settings.timeout, NCCL_MAJOR, NCCL_MINOR,
		NCCL_PATCH);
}

const struct cuda_settings *cuda_settings(void)
{
	pthread_once(&settings_once, settings_load);
	return &settings;
}

/* ----------------------------------------------------------- devices */

/* Driver entry points (found at run time: libhvd links no libcuda). */
static CUresult (*primary_state)(CUdevice, unsigned int *, int *);
static CUresult (*primary_retain)(CUcontext *, CUdevice);
static CUresult (*primary_release)(CUdevice);
static CUresult (*ctx_current)(CUcontext *);
static CUresult (*ctx_push)(CUcontext);
static CUresult (*ctx_pop)(CUcontext *);

static int dev_count = -1;
static char dev_why[256];
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static void entry(const char *name, void **fn)
{
#if CUDART_VERSION >= 12050
	if (cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault,
					     NULL) != cudaSuccess)
		*fn = NULL;
#else
	/* (CUDA 12.0-12.4: the unversioned lookup, deprecated later) */
	if (cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, NULL) !=
	    cudaSuccess)
		*fn = NULL;
#endif
}

static void devices_probe(void)
{
	cudaError_t err;
	int n = 0;

	err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess || n <= 0) {
		(void)cudaGetLastError();
		dev_count = 0;
		if (err != cudaSuccess)
			snprintf(dev_why, sizeof(dev_why),
				 "cudaGetDeviceCount: %s (%s)",
				 cudaGetErrorString(err),
				 cudaGetErrorName(err));
		else
			snprintf(dev_why, sizeof(dev_why),
				 "cudaGetDeviceCount: 0 devices");
		return;
	}
	dev_count = n;
	snprintf(dev_why, sizeof(dev_why), "%d CUDA device%s", n,
		 n == 1 ? "" : "s");
	/* Without them every query goes straight to the runtime. */
	entry("cuDevicePrimaryCtxGetState", (void **)&primary_state);
	entry("cuDevicePrimaryCtxRetain", (void **)&primary_retain);
	entry("cuDevicePrimaryCtxRelease", (void **)&primary_release);
	entry("cuCtxGetCurrent", (void **)&ctx_current);
	entry("cuCtxPushCurrent", (void **)&ctx_push);
	entry("cuCtxPopCurrent", (void **)&ctx_pop);
	if (!primary_retain || !primary_release || !ctx_push || !ctx_pop)
		primary_state = NULL;
	(void)cudaGetLastError();
}

int cuda_device_count(const char **why)
{
	pthread_once(&dev_once, devices_probe);
	if (why)
		*why = dev_why;
	return dev_count;
}

static int primary_active(int dev)
{
	unsigned int flags = 0;
	int active = 0;

	if (!primary_state)
		return 1;
	if (primary_state((CUdevice)dev, &flags, &active) != CUDA_SUCCESS)
		return 0;
	return active;
}

int cuda_context_active(int dev)
{
	return cuda_device_count(NULL) > 0 && primary_active(dev);
}

/* Where a runtime call about device memory can run without creating a
 * context.  direct: on the calling thread as it is (it has a context, or
 * its current device's primary context is active).  Else dev is a device
 * whose primary context is active, to be pushed for the call (cudaSetDevice
 * would create one on the device restored afterwards).  -1: no context
 * anywhere, so no device memory exists yet. */
static int usable_device(int *direct)
{
	CUcontext ctx = NULL;
	int cur = 0, n = cuda_device_count(NULL);

	*direct = 0;
	if (cudaGetDevice(&cur) != cudaSuccess) {
		(void)cudaGetLastError();
		return -1;
	}
	if ((ctx_current && ctx_current(&ctx) == CUDA_SUCCESS && ctx) ||
	    primary_active(cur)) {
		*direct = 1;
		return cur;
	}
	for (int d = 0; d < n; d++)
		if (d != cur && primary_active(d))
			return d;
	return -1;
}

/* Make dev's (active) primary context current on this thread until
 * ctx_leave(); returns 0 on success. */
static int ctx_enter(int dev)
{
	CUcontext ctx;

	if (!primary_retain ||
	    primary_retain(&ctx, (CUdevice)dev) != CUDA_SUCCESS)
		return -1;
	if (ctx_push(ctx) != CUDA_SUCCESS) {
		primary_release((CUdevice)dev);
		return -1;
	}
	return 0;
}

static void ctx_leave(int dev)
{
	CUcontext ctx;

	(void)ctx_pop(&ctx);
	(void)primary_release((CUdevice)dev);
}

/* Memory type of p (cudaMemoryTypeUnregistered for host memory). */
static enum cudaMemoryType pointer_kind(const void *p, int *device)
{
	struct cudaPointerAttributes attr;
	int dev, direct;
	cudaError_t err;

	if (!p || p == HVD_IN_PLACE || cuda_device_count(NULL) == 0)
		return cudaMemoryTypeUnregistered;
	dev = usable_device(&direct);
	if (dev < 0 || (!direct && ctx_enter(dev)))
		return cudaMemoryTypeUnregistered;
	err = cudaPointerGetAttributes(&attr, p);
	if (!direct)
		ctx_leave(dev);
	if (err != cudaSuccess) {
		/* Older drivers report plain host memory as an error. */
		(void)cudaGetLastError();
		return cudaMemoryTypeUnregistered;
	}
	if (device)
		*device = attr.device;
	return attr.type;
}

int cuda_is_device_ptr(const void *p)
{
	enum cudaMemoryType t = pointer_kind(p, NULL);

	return t == cudaMemoryTypeDevice || t == cudaMemoryTypeManaged;
}

/* ----------------------------------------------------------- staging */

/* A blocking copy in the context of the device that owns dev_ptr (its
 * primary context pushed, so that the caller's current device and
 * contexts are left exactly as they were). */
static hvd_status_t staging_copy(void *dst, const void *src, size_t bytes,
				 const void *dev_ptr, const char *what)
{
	int dev = -1, cur = -1, pushed = 0;
	hvd_status_t st = HVD_OK;
	enum cudaMemoryType t;

	if (bytes == 0)
		return HVD_OK;
	if (!dst || !src)
		return hvd_error(HVD_ERR_INVALID_ARG, "%s: NULL buffer", what);
	t = pointer_kind(dev_ptr, &dev);
	if (t != cudaMemoryTypeDevice && t != cudaMemoryTypeManaged)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "%s: %p is not device memory", what, dev_ptr);
	CUDACHECK_RET(cudaGetDevice(&cur));
	if (dev >= 0 && dev != cur) {
		if (ctx_enter(dev) == 0)
			pushed = 1;
		else
			CUDACHECK_RET(cudaSetDevice(dev));
	}
	CUDACHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), st, out);
out:
	if (pushed)
		ctx_leave(dev);
	else if (dev >= 0 && dev != cur)
		(void)cudaSetDevice(cur);
	return st;
}

hvd_status_t cuda_memcpy_to_host(void *dst, const void *src, size_t bytes)
{
	return staging_copy(dst, src, bytes, src, "cuda_memcpy_to_host");
}

hvd_status_t cuda_memcpy_to_device(void *dst, const void *src, size_t bytes)
{
	return staging_copy(dst, src, bytes, dst, "cuda_memcpy_to_device");
}

hvd_status_t cuda_host_alloc(void **p, size_t bytes)
{
	const char *why;

	if (!p)
		return hvd_error(HVD_ERR_INVALID_ARG, "cuda_host_alloc: NULL");
	*p = NULL;
	if (cuda_device_count(&why) == 0)
		return hvd_error(HVD_ERR_CUDA,
				 "page-locked host memory needs a GPU (%s)",
				 why);
	CUDACHECK_RET(
	    cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocPortable));
	return HVD_OK;
}

void cuda_host_free(void *p)
{
	if (p)
		(void)cudaFreeHost(p);
}

/* -------------------------------------------------------------- NVTX */

void cuda_range_push(const char *name)
{
#ifdef HAVE_NVTX3
	if (cuda_settings()->nvtx)
		nvtxRangePushA(name);
#else
	(void)name;
#endif
}

void cuda_range_pop(void)
{
#ifdef HAVE_NVTX3
	if (cuda_settings()->nvtx)
		nvtxRangePop();
#endif
}

int cuda_ptr_device(const void *p)
{
	int dev = -1;
	enum cudaMemoryType t = pointer_kind(p, &dev);

	return t == cudaMemoryTypeDevice || t == cudaMemoryTypeManaged ? dev
								       : -1;
}

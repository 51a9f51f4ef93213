/*
 * cuda_internal.h - the GPU path's own interface: error macros, settings,
 * kernels, and NCCL communicators independent of the host comm layer.
 *
 * Layers, bottom up:
 *   kernels.cu      CUDA kernels (cast, scale, batched copy) behind C calls;
 *   cuda_device.c   device presence (asked once), pointer kind, staging,
 *                   settings, NVTX ranges;
 *   nccl_comm.c     struct cuda_comm: one NCCL communicator per stream, its
 *                   local/cross split, waiting with async-error polling;
 *   nccl_coll.c     collectives on a struct cuda_comm;
 *   cuda_coll.c     hvd_comm_t -> struct cuda_comm: the GPU path's
 *                   table for the collectives' front door (cuda/cuda.h,
 *                   comm/backend.h), the only file that knows the host
 *                   communicators.
 * A struct cuda_comm is made from a struct cuda_boot (rank, size, node of
 * each rank, and a broadcast over some out-of-band channel), so that tests
 * can drive NCCL without the PMIx/UCX layers and the library drives it over
 * its host communicators.
 */
#ifndef HVD_CUDA_INTERNAL_H
#define HVD_CUDA_INTERNAL_H

#include "base/base.h"

#include <cuda_runtime.h>
/* nccl.h declares ncclGroupStart() without (void). */
#ifndef __cplusplus
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <nccl.h>
#ifndef __cplusplus
#pragma GCC diagnostic pop
#endif

/* ncclCommSplit, nonblocking communicators, ncclCommFinalize,
 * ncclGetLastError, ncclAvg and bfloat16 are all there from 2.18 on. */
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "GPU path: NCCL >= 2.18 needed (--with-nccl=DIR or --without-cuda)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------ errors */

/* Turn a failed CUDA / NCCL call into a status whose message names the
 * call, the error and where it happened: "hvd: cudaMalloc(&p, n):
 * out of memory (cudaErrorMemoryAllocation) at nccl_comm.c:123".  The
 * statement form jumps to a label; the _RET form returns the status. */
hvd_status_t cuda_error_at(cudaError_t err, const char *what, const char *file,
			   int line);
hvd_status_t nccl_error_at(ncclResult_t res, const char *what, const char *file,
			   int line);

#define CUDACHECK_RET(call)                                                    \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess)                                         \
			return cuda_error_at(e_, #call, __FILE__, __LINE__);   \
	} while (0)
#define CUDACHECK(call, st, label)                                             \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess) {                                       \
			(st) = cuda_error_at(e_, #call, __FILE__, __LINE__);   \
			goto label;                                            \
		}                                                              \
	} while (0)
#define NCCLCHECK(call, st, label)                                             \
	do {                                                                   \
		ncclResult_t r_ = (call);                                      \
		if (r_ != ncclSuccess && r_ != ncclInProgress) {               \
			(st) = nccl_error_at(r_, #call, __FILE__, __LINE__);   \
			goto label;                                            \
		}                                                              \
	} while (0)

/* ---------------------------------------------------------- settings */

/* Environment knobs of the GPU path, read once (cuda_settings()) and
 * logged at INFO. */
struct cuda_settings {
	int num_streams;     /* HOROVOD_NUM_NCCL_STREAMS (1)               */
	int hierarchical;    /* HOROVOD_HIERARCHICAL_ALLREDUCE (0)         */
	int nvtx;	     /* !HOROVOD_DISABLE_NVTX_RANGES               */
	size_t fusion_bytes; /* HOROVOD_FUSION_THRESHOLD (128 MiB)         */
	double timeout;	     /* HOROVOD_PEER_TIMEOUT seconds (60): longest
				wait for an NCCL init or operation        */
};
const struct cuda_settings *cuda_settings(void);

/* 1 when p is device (or managed) memory, 0 for host memory, unregistered
 * memory, NULL, HVD_IN_PLACE, and always 0 when no GPU is present.  Cheap:
 * a process without a usable device asks the driver only once. */
int cuda_is_device_ptr(const void *p);
/* Plain blocking copies between device and host memory, and page-locked
 * host buffers for asynchronous ones (the checkpointer's staging). */
hvd_status_t cuda_memcpy_to_host(void *dst, const void *src, size_t bytes);
hvd_status_t cuda_memcpy_to_device(void *dst, const void *src, size_t bytes);
hvd_status_t cuda_host_alloc(void **p, size_t bytes);
void cuda_host_free(void *p);

/* Number of usable devices; 0 without a driver or GPU.  The first failure
 * is cached, with its message in *why (may be NULL) for skip lines. */
int cuda_device_count(const char **why);

/* Whether dev's primary context is active (switching back to a device
 * without one would create it: ~500 MB of that GPU). */
int cuda_context_active(int dev);

/* Device of a device (or managed) pointer, -1 for host memory. */
int cuda_ptr_device(const void *p);

/* NVTX range around each operation (no-ops when disabled or unavailable). */
void cuda_range_push(const char *name);
void cuda_range_pop(void);

/* ----------------------------------------------------------- kernels */

/* All launches are asynchronous on stream and return a launch error (a
 * CUDA status) at once.  n is in elements. */
/* dst[i] = (dtype)(src[i] * factor); dst may equal src.  fp16/bf16 scale
 * in float32; integers round toward zero and saturate (as reduce_scale). */
cudaError_t cuda_kernel_scale(void *dst, const void *src, size_t n,
			      hvd_dtype_t dtype, double factor,
			      cudaStream_t stream);
/* Conversions with a scale folded in (factor 1.0 for a plain cast);
 * to_dtype / from_dtype is HVD_FLOAT16 or HVD_BFLOAT16. */
cudaError_t cuda_kernel_cast_from_f32(void *dst, hvd_dtype_t to_dtype,
				      const float *src, size_t n, double factor,
				      cudaStream_t stream);
cudaError_t cuda_kernel_cast_to_f32(float *dst, const void *src,
				    hvd_dtype_t from_dtype, size_t n,
				    double factor, cudaStream_t stream);

/* Batched device-to-device copy: any number of (dst, src, bytes), one
 * kernel launch per CUDA_BATCH_MAX entries. */
struct cuda_copy {
	void *dst;
	const void *src;
	size_t bytes;
};
#define CUDA_BATCH_MAX 160
cudaError_t cuda_kernel_batched_copy(const struct cuda_copy *copies, int n,
				     cudaStream_t stream);

/* ------------------------------------------------------ communicator */

/* How a struct cuda_comm is bootstrapped. */
struct cuda_boot {
	int rank, size;
	const int *node_of; /* [size] node id of each rank; NULL: one node */
	/* Copy bytes at buf from rank root to every rank (collective). */
	hvd_status_t (*bcast)(void *ctx, void *buf, size_t bytes, int root);
	void *ctx;
};

struct cuda_comm;

/* Collective over all ranks of boot; the NCCL communicators (one per
 * stream) are bound to the calling thread's current device. */
hvd_status_t cuda_comm_create(const struct cuda_boot *boot,
			      struct cuda_comm **out);
/* Collective over all ranks of parent: ranks with the same color >= 0 get
 * a communicator, ordered by key; color < 0 gets *out = NULL.  node_of:
 * node of each rank of the new communicator (NULL: one node). */
hvd_status_t cuda_comm_split_nccl(struct cuda_comm *parent, int color, int key,
				  const int *node_of, struct cuda_comm **out);
void cuda_comm_destroy(struct cuda_comm *cc);
int cuda_comm_rank(const struct cuda_comm *cc);
int cuda_comm_size(const struct cuda_comm *cc);
int cuda_comm_device(const struct cuda_comm *cc);

/* One operation in flight on a communicator: a stream, its NCCL
 * communicator, and the event that marks the end. */
struct cuda_op {
	struct cuda_comm *cc;
	int idx; /* stream index */
	cudaStream_t stream;
	ncclComm_t nccl;
	ncclComm_t extra[2]; /* local and cross comms it also used */
	const char *name;
	int prev_device; /* the caller's, restored by cuda_op_end */
};
/* Choose the stream for the next operation (round robin, the same on
 * every rank because ops are issued in the same order), make the device
 * current, open the NVTX range.  Fails when the comm was aborted. */
hvd_status_t cuda_op_begin(struct cuda_comm *cc, const char *name,
			   struct cuda_op *op);
/* Ordering with callers' streams (cuda_stream.c): an event marking what
 * stream has queued so far; events and streams queued for the calling
 * thread's next operation (cuda_op_begin makes its stream wait for the
 * events on the GPU, cuda_op_end makes the streams wait for the
 * operation's end event). */
hvd_status_t cuda_stream_mark(void *stream, void **event);
void cuda_stream_order(void *event, void *follow);
void cuda_event_release(void *event);
hvd_status_t cuda_stream_before(cudaStream_t stream);
void cuda_stream_after(cudaStream_t stream, cudaEvent_t done, int ok);

/* Record completion and wait for it, polling ncclCommGetAsyncError; on an
 * NCCL error or timeout every communicator of cc is aborted and later
 * operations fail.  st: the status of the enqueueing so far (an error
 * skips the wait but still closes the range). */
hvd_status_t cuda_op_end(struct cuda_op *op, hvd_status_t st);
/* After a nonblocking NCCL call returned ncclInProgress: wait until the
 * communicator is ready (or failed / timed out). */
hvd_status_t cuda_nccl_ready(struct cuda_comm *cc, ncclComm_t comm,
			     const char *what);
/* Mark cc failed and abort its NCCL communicators (idempotent). */
void cuda_comm_abort(struct cuda_comm *cc, const char *why);

/* The NCCL communicator of stream 0 (for the local/cross ones). */
ncclComm_t cuda_comm_nccl(const struct cuda_comm *cc);

/* Scratch device memory of the communicator's device, at least bytes;
 * valid until the next call with the same slot (0 or 1). */
hvd_status_t cuda_comm_scratch(struct cuda_comm *cc, int slot, size_t bytes,
			       void **p);
/* Layout for the hierarchical allreduce (pure): nodes numbered in order
 * of first appearance in node_of[size]; *node and *local_rank of rank.
 * 1 when it applies (2+ nodes, the same number 2+ of ranks on each), 0
 * when not, -1 out of memory. */
int cuda_hier_layout(const int *node_of, int size, int rank, int *node,
		     int *local_rank, int *nodes, int *local_size);
/* Local (same node) and cross (same local rank) communicators for the
 * hierarchical allreduce; created on first use (collective), *local NULL
 * when the layout does not allow it (uneven nodes). */
hvd_status_t cuda_comm_hier(struct cuda_comm *cc, struct cuda_comm **local,
			    struct cuda_comm **cross);

/* ------------------------------------------------------- collectives */

/* Same semantics as coll_* in comm.h; buffers in device memory of the
 * communicator's device.  allreduce_ex adds the engine's options. */
hvd_status_t nccl_allreduce(struct cuda_comm *cc, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dtype,
			    hvd_op_t op);
hvd_status_t nccl_allreduce_ex(struct cuda_comm *cc, const void *sendbuf,
			       void *recvbuf, size_t count, hvd_dtype_t dtype,
			       hvd_op_t op, double prescale, double postscale,
			       int compress_fp16);
hvd_status_t nccl_allgatherv(struct cuda_comm *cc, const void *sendbuf,
			     size_t sendcount, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     hvd_dtype_t dtype);
hvd_status_t nccl_broadcast(struct cuda_comm *cc, void *buf, size_t count,
			    hvd_dtype_t dtype, int root);
hvd_status_t nccl_alltoallv(struct cuda_comm *cc, const void *sendbuf,
			    const size_t *sendcounts, const size_t *sdispls,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *rdispls, hvd_dtype_t dtype);
hvd_status_t nccl_reducescatter(struct cuda_comm *cc, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dtype,
				hvd_op_t op);
/* Fused allreduce through the communicator's fusion buffer (the engine
 * reaches it through the front door's coll_fused_allreduce). */
struct cuda_fusion_entry {
	const void *sendbuf;
	void *recvbuf;
	size_t count;
};
hvd_status_t nccl_fused_allreduce(struct cuda_comm *cc,
				  const struct cuda_fusion_entry *entries,
				  int n, hvd_dtype_t dtype, hvd_op_t op,
				  double prescale, double postscale,
				  int compress_fp16);

/* NCCL type and op of ours; -1 when there is none. */
int nccl_dtype(hvd_dtype_t dtype);
int nccl_redop(hvd_op_t op);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* HVD_CUDA_INTERNAL_H */

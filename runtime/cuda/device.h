/*
 * device.h - hooks from the host runtime into the GPU path (runtime/cuda/).
 *
 * Every hook is a weak reference: in a build without CUDA/NCCL the GPU path
 * is not linked in, the hooks are NULL and host code must test them before
 * calling (hvd_device_ptr() below does it for the pointer check).  In a CUDA
 * build they resolve to runtime/cuda/ inside libhvd itself, so nothing here
 * is ever exported.
 *
 * Routing rule: a collective whose receive buffer (or, for broadcast, its
 * only buffer) is device memory runs on NCCL through cuda_coll_*, which take
 * exactly the argument lists of the host coll_* in comm.h.  Host and device
 * tensors are never mixed in one fused operation; the engine fuses device
 * allreduces through cuda_fused_allreduce().
 */
#ifndef HVD_DEVICE_H
#define HVD_DEVICE_H

#include "comm/comm.h"

#define HVD_WEAK __attribute__((weak))

#pragma GCC visibility push(hidden)

/* 1 when p is device (or managed) memory, 0 for host memory, unregistered
 * memory, NULL, HVD_IN_PLACE, and always 0 when no GPU is present.  Cheap:
 * a process without a usable device asks the driver only once. */
int cuda_is_device_ptr(const void *p) HVD_WEAK;

/* Device collectives: same arguments and semantics as coll_* in comm.h.
 * The first one on a communicator creates its NCCL communicator (collective
 * over the members; the unique id goes from member 0 over the host comm). */
hvd_status_t cuda_coll_allreduce(hvd_comm_t *comm, const void *sendbuf,
				 void *recvbuf, size_t count, hvd_dtype_t dtype,
				 hvd_op_t op) HVD_WEAK;
hvd_status_t cuda_coll_allgatherv(hvd_comm_t *comm, const void *sendbuf,
				  size_t sendcount, void *recvbuf,
				  const size_t *recvcounts,
				  const size_t *displs,
				  hvd_dtype_t dtype) HVD_WEAK;
hvd_status_t cuda_coll_broadcast(hvd_comm_t *comm, void *buf, size_t count,
				 hvd_dtype_t dtype, int root) HVD_WEAK;
hvd_status_t cuda_coll_alltoallv(hvd_comm_t *comm, const void *sendbuf,
				 const size_t *sendcounts,
				 const size_t *sdispls, void *recvbuf,
				 const size_t *recvcounts,
				 const size_t *rdispls,
				 hvd_dtype_t dtype) HVD_WEAK;
hvd_status_t cuda_coll_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				     void *recvbuf, size_t count,
				     hvd_dtype_t dtype, hvd_op_t op) HVD_WEAK;

/* Engine: one fused allreduce of n device tensors of one type.  Inputs are
 * packed into the device fusion buffer by one batched copy kernel (with
 * prescale applied), reduced by one NCCL call (compress_fp16: float32
 * travels as float16), and unpacked (with postscale).  sendbuf may equal
 * recvbuf. */
#ifndef HVD_CUDA_FUSION_ENTRY
#define HVD_CUDA_FUSION_ENTRY
struct cuda_fusion_entry {
	const void *sendbuf;
	void *recvbuf;
	size_t count;
};
#endif
hvd_status_t cuda_fused_allreduce(hvd_comm_t *comm,
				  const struct cuda_fusion_entry *entries,
				  int n, hvd_dtype_t dtype, hvd_op_t op,
				  double prescale, double postscale,
				  int compress_fp16) HVD_WEAK;

/* Process sets: collective over the members of parent.  child is the new
 * communicator on members, NULL on ranks outside the set.  Derives the
 * child's NCCL communicator with ncclCommSplit (cheaper than a new unique
 * id); optional - without it the child gets its own on first use. */
hvd_status_t cuda_comm_split(hvd_comm_t *parent, hvd_comm_t *child) HVD_WEAK;
/* comm_destroy() calls this so the NCCL side of comm goes too. */
void cuda_comm_release(hvd_comm_t *comm) HVD_WEAK;
/* hvd_finalize(): destroys every NCCL communicator, frees device buffers. */
void cuda_finalize(void) HVD_WEAK;

/* Staging for the checkpointer: plain blocking copies between device and
 * host memory, and page-locked host buffers for asynchronous writes. */
hvd_status_t cuda_memcpy_to_host(void *dst, const void *src,
				 size_t bytes) HVD_WEAK;
hvd_status_t cuda_memcpy_to_device(void *dst, const void *src,
				   size_t bytes) HVD_WEAK;
hvd_status_t cuda_host_alloc(void **p, size_t bytes) HVD_WEAK;
void cuda_host_free(void *p) HVD_WEAK;

#pragma GCC visibility pop

/* The check host code uses to route a buffer. */
static inline int hvd_device_ptr(const void *p)
{
	return cuda_is_device_ptr && cuda_is_device_ptr(p);
}

#endif /* HVD_DEVICE_H */

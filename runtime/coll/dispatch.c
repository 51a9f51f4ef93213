/*
 * dispatch.c - the collectives' front door (coll/coll.h).
 *
 * Every collective passes here once: a buffer of the GPU path's memory
 * goes to its table (comm/backend.h, handed over by cuda/ when it is
 * built in), a communicator an earlier failure broke is answered at once,
 * the calls with nothing to do return, and the rest goes to the host
 * algorithms (coll_impl.h).  Device collectives see the same broken-check
 * and empty calls; one member alone on a communicator is the device
 * backend's own business (its copy is a device copy).
 *
 * Routing is on the receive buffer (the only buffer, for broadcast), as
 * Horovod routes on the output tensor: host and device buffers are never
 * mixed in one collective.
 */
#include "config.h"

#include "coll/coll.h"
#include "coll/coll_impl.h"
#if HVD_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>

/* The GPU path's table; NULL in a host-only build. */
static const struct comm_device_ops *device;

void coll_init(void)
{
	coll_tuning_load();
	coll_topo_init();
#if HVD_HAVE_CUDA
	device = cuda_device_ops();
	cuda_set_watch(coll_world_check);
#endif
}

void coll_finalize(void)
{
	if (device && device->finalize)
		device->finalize();
}

int coll_has_device(void)
{
	return device != NULL;
}

int coll_is_device(const void *p)
{
	return device && p && p != HVD_IN_PLACE && device->is_device(p);
}

static hvd_status_t no_device(const char *what)
{
	return hvd_error(HVD_ERR_UNSUPPORTED,
			 "hvd: %s: device memory needs libhvd built with the "
			 "GPU path (configure --with-cuda --with-nccl)",
			 what);
}

hvd_status_t coll_allreduce_args(const hvd_comm_t *comm, const void *recvbuf,
				 hvd_dtype_t dt, hvd_op_t op)
{
	int n = comm->net.size;

	if (op != HVD_ADASUM)
		return HVD_OK;
	if (coll_is_device(recvbuf))
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd: Adasum runs on host memory only; copy "
				 "the tensor to the host (or use HVD_AVERAGE "
				 "on the device)");
	if (!adasum_type_ok(dt))
		return hvd_error(HVD_ERR_BAD_TYPE,
				 "hvd: Adasum of %s: expected float16, "
				 "bfloat16, float32 or float64",
				 hvd_dtype_name(dt));
	if (n & (n - 1))
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd: Adasum over %d ranks: it needs a "
				 "power-of-two number of ranks",
				 n);
	return HVD_OK;
}

hvd_status_t coll_reducescatter_args(hvd_op_t op)
{
	if (op == HVD_ADASUM)
		return hvd_error(HVD_ERR_BAD_OP,
				 "hvd: reducescatter: Adasum is an allreduce "
				 "only");
	return HVD_OK;
}

hvd_status_t coll_allreduce(hvd_comm_t *comm, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dt,
			    hvd_op_t op)
{
	const void *src = sendbuf == HVD_IN_PLACE ? recvbuf : sendbuf;
	int dev = coll_is_device(recvbuf);

	if (comm->net.broken)
		return coll_broken(comm, "allreduce");
	if (op == HVD_ADASUM) {
		HVD_CHECK(coll_allreduce_args(comm, recvbuf, dt, op));
		if (count == 0)
			return HVD_OK;
		return host_adasum(comm, src, recvbuf, count, dt);
	}
	if (count == 0)
		return HVD_OK;
	if (dev)
		return device->allreduce(comm, sendbuf, recvbuf, count, dt, op);
	if (comm->net.size == 1) {
		if (src != recvbuf)
			memcpy(recvbuf, src, count * hvd_dtype_size(dt));
		return HVD_OK;
	}
	return host_allreduce(comm, src, recvbuf, count, dt, op);
}

hvd_status_t coll_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dt,
				hvd_op_t op)
{
	int in_place = sendbuf == HVD_IN_PLACE || sendbuf == recvbuf;

	if (comm->net.broken)
		return coll_broken(comm, "reducescatter");
	HVD_CHECK(coll_reducescatter_args(op));
	if (count == 0)
		return HVD_OK;
	if (coll_is_device(recvbuf))
		return device->reducescatter(comm, sendbuf, recvbuf, count, dt,
					     op);
	if (comm->net.size == 1) {
		if (!in_place)
			memcpy(recvbuf, sendbuf, count * hvd_dtype_size(dt));
		return HVD_OK;
	}
	return host_reducescatter(comm, sendbuf, recvbuf, count, dt, op);
}

hvd_status_t coll_broadcast(hvd_comm_t *comm, void *buf, size_t count,
			    hvd_dtype_t dt, int root)
{
	size_t bytes = count * hvd_dtype_size(dt);

	if (comm->net.broken)
		return coll_broken(comm, "broadcast");
	if (bytes == 0)
		return HVD_OK;
	if (coll_is_device(buf))
		return device->broadcast(comm, buf, count, dt, root);
	if (comm->net.size == 1)
		return HVD_OK;
	return host_broadcast(comm, buf, bytes, root);
}

hvd_status_t coll_allgatherv(hvd_comm_t *comm, const void *sendbuf,
			     size_t sendcount, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     hvd_dtype_t dt)
{
	if (comm->net.broken)
		return coll_broken(comm, "allgather");
	if (coll_is_device(recvbuf))
		return device->allgatherv(comm, sendbuf, sendcount, recvbuf,
					  recvcounts, displs, dt);
	return host_allgatherv(comm, sendbuf, sendcount, recvbuf, recvcounts,
			       displs, dt);
}

hvd_status_t coll_alltoallv(hvd_comm_t *comm, const void *sendbuf,
			    const size_t *sendcounts, const size_t *sdispls,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *rdispls, hvd_dtype_t dt)
{
	if (comm->net.broken)
		return coll_broken(comm, "alltoall");
	if (coll_is_device(recvbuf))
		return device->alltoallv(comm, sendbuf, sendcounts, sdispls,
					 recvbuf, recvcounts, rdispls, dt);
	return host_alltoallv(comm, sendbuf, sendcounts, sdispls, recvbuf,
			      recvcounts, rdispls, dt, 0);
}

hvd_status_t coll_alltoall(hvd_comm_t *comm, const void *sendbuf,
			   void *recvbuf, size_t count, hvd_dtype_t dt)
{
	size_t *counts;
	hvd_status_t st;

	if (comm->net.broken)
		return coll_broken(comm, "alltoall");
	counts = malloc((size_t)comm->net.size * sizeof(*counts));
	if (!counts)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int i = 0; i < comm->net.size; i++)
		counts[i] = count;
	if (coll_is_device(recvbuf))
		st = device->alltoallv(comm, sendbuf, counts, NULL, recvbuf,
				       counts, NULL, dt);
	else
		st = host_alltoallv(comm, sendbuf, counts, NULL, recvbuf,
				    counts, NULL, dt, 1);
	free(counts);
	return st;
}

hvd_status_t coll_barrier(hvd_comm_t *comm)
{
	if (comm->net.broken)
		return coll_broken(comm, "barrier");
	if (comm->net.size == 1)
		return HVD_OK;
	return host_barrier(comm);
}

hvd_status_t coll_fused_allreduce(hvd_comm_t *comm,
				  const struct comm_fusion_entry *entries,
				  int n, hvd_dtype_t dt, hvd_op_t op,
				  double prescale, double postscale,
				  int compress_fp16)
{
	if (!device)
		return no_device("fused allreduce");
	if (comm->net.broken)
		return coll_broken(comm, "fused allreduce");
	if (n <= 0)
		return HVD_OK;
	return device->fused_allreduce(comm, entries, n, dt, op, prescale,
				       postscale, compress_fp16);
}

hvd_status_t coll_stream_mark(void *stream, void **ev)
{
	*ev = NULL;
	if (!device || !device->stream_mark)
		return no_device("order device work after a stream");
	return device->stream_mark(stream, ev);
}

void coll_stream_order(void *ev, void *follow)
{
	if (device && device->stream_order)
		device->stream_order(ev, follow);
}

void coll_event_release(void *ev)
{
	if (ev && device && device->event_release)
		device->event_release(ev);
}

hvd_status_t coll_to_host(void *dst, const void *src, size_t bytes)
{
	return device ? device->to_host(dst, src, bytes)
		      : no_device("copy to host");
}

hvd_status_t coll_to_device(void *dst, const void *src, size_t bytes)
{
	return device ? device->to_device(dst, src, bytes)
		      : no_device("copy to device");
}

hvd_status_t coll_host_alloc(void **p, size_t bytes)
{
	return device ? device->host_alloc(p, bytes)
		      : no_device("page-locked memory");
}

void coll_host_free(void *p)
{
	if (device)
		device->host_free(p);
	else
		free(p);
}

/*
 * cuda_coll.c - the GPU path's table for the collectives' front door
 * (cuda/cuda.h): host communicators (hvd_comm_t) mapped to GPU
 * communicators (struct cuda_comm), created on first use.
 *
 * The first device collective on an hvd_comm_t creates its cuda_comm:
 * every member reaches that call in the same order (comm.h's rule for all
 * collectives), member 0 makes the NCCL unique id and the service
 * broadcast on the host communicator's group carries it to the others.
 * The communicator is bound to the device of the buffer that triggered
 * it; a later buffer on another device is refused (one device per rank,
 * as in Horovod).  The cuda_comm lives in the host communicator's slot
 * for this backend (comm/backend.h): split from the parent's when a
 * process set is made, destroyed with the host communicator.
 */
#include "config.h"

#include "comm/comm.h"
#include "cuda/cuda.h"
#include "cuda/cuda_internal.h"
#include "net/service.h"

#include <stdlib.h>

static int slot_id = -1;

static struct cuda_comm *find(hvd_comm_t *comm)
{
	struct comm_slot *s;

	if (slot_id < 0)
		return NULL;
	s = comm_slot(comm, slot_id);
	return s->status > 0 ? s->state : NULL;
}

static void remember(hvd_comm_t *comm, struct cuda_comm *cc)
{
	struct comm_slot *s = comm_slot(comm, slot_id);

	s->state = cc;
	s->status = 1;
}

static hvd_status_t id_bcast(void *ctx, void *buf, size_t bytes, int root)
{
	return svc_bcast(comm_net(ctx), buf, bytes, root);
}

/* Node of each member, from the world's table (NULL: one node). */
static int *members_nodes(hvd_comm_t *comm, int size)
{
	const struct hvd_world *w = hvd_world();
	int *nodes;

	if (!w || !w->node_of)
		return NULL;
	nodes = malloc((size_t)size * sizeof(int));
	if (!nodes)
		return NULL;
	for (int r = 0; r < size; r++) {
		int wr = comm_world_rank(comm, r);

		nodes[r] = wr >= 0 && wr < w->size ? w->node_of[wr] : 0;
	}
	return nodes;
}

/* The cuda_comm of comm, created (collectively) on first use on the
 * device of buf. */
static hvd_status_t get(hvd_comm_t *comm, const void *buf, const char *what,
			struct cuda_comm **out)
{
	struct cuda_boot boot;
	struct cuda_comm *cc;
	int dev, *nodes;
	hvd_status_t st;

	if (!comm || slot_id < 0)
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "%s: no communicator (call hvd_init first)",
				 what);
	/* No "no device" shortcut here: cuda_comm_create() still takes part
	 * in the id broadcast and then fails, so that peers with a GPU are
	 * not left waiting. */
	dev = cuda_ptr_device(buf);
	cc = find(comm);
	if (cc) {
		if (dev >= 0 && dev != cuda_comm_device(cc))
			return hvd_error(HVD_ERR_INVALID_ARG,
					 "%s: buffer is on device %d but this "
					 "rank's GPU communicator is on device "
					 "%d: use one device per rank",
					 what, dev, cuda_comm_device(cc));
		*out = cc;
		return HVD_OK;
	}
	if (dev >= 0)
		CUDACHECK_RET(cudaSetDevice(dev));
	boot.rank = comm_rank(comm);
	boot.size = comm_size(comm);
	nodes = members_nodes(comm, boot.size);
	boot.node_of = nodes;
	boot.bcast = id_bcast;
	boot.ctx = comm;
	st = cuda_comm_create(&boot, &cc);
	free(nodes);
	if (st != HVD_OK)
		return hvd_error_prefix(
		    st, "%s: creating the NCCL communicator", what);
	remember(comm, cc);
	*out = cc;
	return HVD_OK;
}

static hvd_status_t dev_allreduce(hvd_comm_t *comm, const void *sendbuf,
				  void *recvbuf, size_t count,
				  hvd_dtype_t dtype, hvd_op_t op)
{
	struct cuda_comm *cc;

	HVD_CHECK(get(comm, recvbuf, "allreduce", &cc));
	return nccl_allreduce(cc, sendbuf, recvbuf, count, dtype, op);
}

static hvd_status_t dev_allgatherv(hvd_comm_t *comm, const void *sendbuf,
				   size_t sendcount, void *recvbuf,
				   const size_t *recvcounts,
				   const size_t *displs, hvd_dtype_t dtype)
{
	struct cuda_comm *cc;

	HVD_CHECK(get(comm, recvbuf, "allgatherv", &cc));
	return nccl_allgatherv(cc, sendbuf, sendcount, recvbuf, recvcounts,
			       displs, dtype);
}

static hvd_status_t dev_broadcast(hvd_comm_t *comm, void *buf, size_t count,
				  hvd_dtype_t dtype, int root)
{
	struct cuda_comm *cc;

	HVD_CHECK(get(comm, buf, "broadcast", &cc));
	return nccl_broadcast(cc, buf, count, dtype, root);
}

static hvd_status_t dev_alltoallv(hvd_comm_t *comm, const void *sendbuf,
				  const size_t *sendcounts,
				  const size_t *sdispls, void *recvbuf,
				  const size_t *recvcounts,
				  const size_t *rdispls, hvd_dtype_t dtype)
{
	struct cuda_comm *cc;

	HVD_CHECK(get(comm, recvbuf, "alltoallv", &cc));
	return nccl_alltoallv(cc, sendbuf, sendcounts, sdispls, recvbuf,
			      recvcounts, rdispls, dtype);
}

static hvd_status_t dev_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				      void *recvbuf, size_t count,
				      hvd_dtype_t dtype, hvd_op_t op)
{
	struct cuda_comm *cc;

	HVD_CHECK(get(comm, recvbuf, "reducescatter", &cc));
	return nccl_reducescatter(cc, sendbuf, recvbuf, count, dtype, op);
}

static hvd_status_t dev_fused_allreduce(hvd_comm_t *comm,
					const struct comm_fusion_entry *e,
					int n, hvd_dtype_t dtype, hvd_op_t op,
					double prescale, double postscale,
					int compress_fp16)
{
	struct cuda_fusion_entry *ce;
	struct cuda_comm *cc;
	hvd_status_t st;

	HVD_CHECK(get(comm, e[0].recvbuf, "fused allreduce", &cc));
	ce = malloc((size_t)n * sizeof(*ce));
	if (!ce)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "fused allreduce: out of memory for %d "
				 "entries",
				 n);
	for (int i = 0; i < n; i++) {
		ce[i].sendbuf = e[i].sendbuf;
		ce[i].recvbuf = e[i].recvbuf;
		ce[i].count = e[i].count;
	}
	st = nccl_fused_allreduce(cc, ce, n, dtype, op, prescale, postscale,
				  compress_fp16);
	free(ce);
	return st;
}

/* Process sets: collective over parent's members.  Only a parent already
 * on NCCL is split: the decision is the same on every member (its
 * cuda_comm was made collectively), and a host-only program never starts
 * NCCL.  ncclCommSplit is cheaper than a new unique id; without it the
 * child gets its own cuda_comm on first use. */
static hvd_status_t on_split(hvd_comm_t *parent, hvd_comm_t *child, int slot)
{
	struct cuda_comm *pc = find(parent), *cc = NULL;
	int *nodes = NULL;
	hvd_status_t st;

	(void)slot;
	if (!pc)
		return HVD_OK;
	if (child)
		nodes = members_nodes(child, comm_size(child));
	st = cuda_comm_split_nccl(pc, child ? 0 : -1, comm_rank(parent), nodes,
				  &cc);
	free(nodes);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "process set: NCCL split");
	if (child && cc)
		remember(child, cc);
	return HVD_OK;
}

static void on_destroy(hvd_comm_t *comm, struct comm_slot *s)
{
	(void)comm;
	if (s->status > 0 && s->state)
		cuda_comm_destroy(s->state);
	s->state = NULL;
	s->status = 0;
}

static const struct comm_backend backend = {
	.name = "NCCL",
	.on_split = on_split,
	.on_destroy = on_destroy,
};

static const struct comm_device_ops ops = {
	.name = "CUDA/NCCL",
	.is_device = cuda_is_device_ptr,
	.allreduce = dev_allreduce,
	.allgatherv = dev_allgatherv,
	.broadcast = dev_broadcast,
	.alltoallv = dev_alltoallv,
	.reducescatter = dev_reducescatter,
	.fused_allreduce = dev_fused_allreduce,
	.to_host = cuda_memcpy_to_host,
	.to_device = cuda_memcpy_to_device,
	.host_alloc = cuda_host_alloc,
	.host_free = cuda_host_free,
	.stream_mark = cuda_stream_mark,
	.stream_order = cuda_stream_order,
	.event_release = cuda_event_release,
	/* No finalize: hvd_finalize destroys the host communicators, and
	 * with them (on_destroy) every cuda_comm. */
};

const struct comm_device_ops *cuda_device_ops(void)
{
	if (slot_id < 0)
		slot_id = comm_backend_register(&backend);
	return &ops;
}

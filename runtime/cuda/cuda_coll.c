/*
 * cuda_coll.c - the device.h hooks: host communicators (hvd_comm_t) mapped
 * to GPU communicators (struct cuda_comm), created on first use.
 *
 * The first device collective on an hvd_comm_t creates its cuda_comm:
 * every member reaches that call in the same order (comm.h's rule for all
 * collectives), member 0 makes the NCCL unique id and coll_broadcast on
 * the host communicator carries it to the others.  The communicator is
 * bound to the device of the buffer that triggered it; a later buffer on
 * another device is refused (one device per rank, as in Horovod).
 *
 * The host comm layer is referenced weakly so that this file links before
 * (and without) it: with no comm layer, device collectives fail with
 * HVD_ERR_UNSUPPORTED instead of breaking the link.
 */
#include "config.h"

#include "comm/comm.h"
#include "cuda/cuda_internal.h"
#include "cuda/device.h"

#include <pthread.h>
#include <stdlib.h>

#pragma weak comm_rank
#pragma weak comm_size
#pragma weak comm_world_rank
#pragma weak coll_broadcast
#pragma weak hvd_world

struct mapping {
	hvd_comm_t *comm;
	struct cuda_comm *cc;
	struct mapping *next;
};

static struct mapping *mappings;
static pthread_mutex_t mappings_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cuda_comm *find(hvd_comm_t *comm)
{
	struct cuda_comm *cc = NULL;

	pthread_mutex_lock(&mappings_lock);
	for (struct mapping *m = mappings; m; m = m->next)
		if (m->comm == comm) {
			cc = m->cc;
			break;
		}
	pthread_mutex_unlock(&mappings_lock);
	return cc;
}

static hvd_status_t remember(hvd_comm_t *comm, struct cuda_comm *cc)
{
	struct mapping *m = malloc(sizeof(*m));

	if (!m)
		return hvd_error(HVD_ERR_NO_MEMORY, "GPU communicator table");
	m->comm = comm;
	m->cc = cc;
	pthread_mutex_lock(&mappings_lock);
	m->next = mappings;
	mappings = m;
	pthread_mutex_unlock(&mappings_lock);
	return HVD_OK;
}

static hvd_status_t host_bcast(void *ctx, void *buf, size_t bytes, int root)
{
	return coll_broadcast((hvd_comm_t *)ctx, buf, bytes, HVD_UINT8, root);
}

/* Node of each member, from the world's table (NULL: one node). */
static int *members_nodes(hvd_comm_t *comm, int size)
{
	const struct hvd_world *w = hvd_world ? hvd_world() : NULL;
	int *nodes;

	if (!w || !w->node_of || !comm_world_rank)
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

static hvd_status_t have_comm_layer(void)
{
	if (!comm_rank || !comm_size || !coll_broadcast)
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "device collectives need the host "
				 "communicator layer (comm.c), which this "
				 "libhvd lacks");
	return HVD_OK;
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

	if (!comm)
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "%s: no communicator (call hvd_init first)",
				 what);
	if ((st = have_comm_layer()) != HVD_OK)
		return st;
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
	boot.bcast = host_bcast;
	boot.ctx = comm;
	st = cuda_comm_create(&boot, &cc);
	free(nodes);
	if (st != HVD_OK)
		return hvd_error_prefix(
		    st, "%s: creating the NCCL communicator", what);
	st = remember(comm, cc);
	if (st != HVD_OK) {
		cuda_comm_destroy(cc);
		return st;
	}
	*out = cc;
	return HVD_OK;
}

hvd_status_t cuda_coll_allreduce(hvd_comm_t *comm, const void *sendbuf,
				 void *recvbuf, size_t count, hvd_dtype_t dtype,
				 hvd_op_t op)
{
	struct cuda_comm *cc;
	hvd_status_t st = get(comm, recvbuf, "allreduce", &cc);

	return st != HVD_OK
		   ? st
		   : nccl_allreduce(cc, sendbuf, recvbuf, count, dtype, op);
}

hvd_status_t cuda_coll_allgatherv(hvd_comm_t *comm, const void *sendbuf,
				  size_t sendcount, void *recvbuf,
				  const size_t *recvcounts,
				  const size_t *displs, hvd_dtype_t dtype)
{
	struct cuda_comm *cc;
	hvd_status_t st = get(comm, recvbuf, "allgatherv", &cc);

	return st != HVD_OK ? st
			    : nccl_allgatherv(cc, sendbuf, sendcount, recvbuf,
					      recvcounts, displs, dtype);
}

hvd_status_t cuda_coll_broadcast(hvd_comm_t *comm, void *buf, size_t count,
				 hvd_dtype_t dtype, int root)
{
	struct cuda_comm *cc;
	hvd_status_t st = get(comm, buf, "broadcast", &cc);

	return st != HVD_OK ? st : nccl_broadcast(cc, buf, count, dtype, root);
}

hvd_status_t cuda_coll_alltoallv(hvd_comm_t *comm, const void *sendbuf,
				 const size_t *sendcounts,
				 const size_t *sdispls, void *recvbuf,
				 const size_t *recvcounts,
				 const size_t *rdispls, hvd_dtype_t dtype)
{
	struct cuda_comm *cc;
	hvd_status_t st = get(comm, recvbuf, "alltoallv", &cc);

	return st != HVD_OK
		   ? st
		   : nccl_alltoallv(cc, sendbuf, sendcounts, sdispls, recvbuf,
				    recvcounts, rdispls, dtype);
}

hvd_status_t cuda_coll_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				     void *recvbuf, size_t count,
				     hvd_dtype_t dtype, hvd_op_t op)
{
	struct cuda_comm *cc;
	hvd_status_t st = get(comm, recvbuf, "reducescatter", &cc);

	return st != HVD_OK
		   ? st
		   : nccl_reducescatter(cc, sendbuf, recvbuf, count, dtype, op);
}

hvd_status_t cuda_fused_allreduce(hvd_comm_t *comm,
				  const struct cuda_fusion_entry *entries,
				  int n, hvd_dtype_t dtype, hvd_op_t op,
				  double prescale, double postscale,
				  int compress_fp16)
{
	struct cuda_comm *cc;
	hvd_status_t st;

	if (n <= 0)
		return HVD_OK;
	st = get(comm, entries ? entries[0].recvbuf : NULL, "fused allreduce",
		 &cc);
	return st != HVD_OK
		   ? st
		   : nccl_fused_allreduce(cc, entries, n, dtype, op, prescale,
					  postscale, compress_fp16);
}

hvd_status_t cuda_comm_split(hvd_comm_t *parent, hvd_comm_t *child)
{
	struct cuda_comm *pc = find(parent), *cc = NULL;
	int *nodes = NULL;
	hvd_status_t st;

	/* Only a parent already on NCCL is split: the decision is the same
	 * on every member (its cuda_comm was made collectively), and a
	 * host-only program never starts NCCL. */
	if (!pc || (st = have_comm_layer()) != HVD_OK)
		return HVD_OK;
	if (child)
		nodes = members_nodes(child, comm_size(child));
	st = cuda_comm_split_nccl(pc, child ? 0 : -1, comm_rank(parent), nodes,
				  &cc);
	free(nodes);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "process set: NCCL split");
	if (child && cc) {
		st = remember(child, cc);
		if (st != HVD_OK)
			cuda_comm_destroy(cc);
	}
	return st;
}

void cuda_comm_release(hvd_comm_t *comm)
{
	struct mapping **pp, *m = NULL;

	pthread_mutex_lock(&mappings_lock);
	for (pp = &mappings; *pp; pp = &(*pp)->next)
		if ((*pp)->comm == comm) {
			m = *pp;
			*pp = m->next;
			break;
		}
	pthread_mutex_unlock(&mappings_lock);
	if (m) {
		cuda_comm_destroy(m->cc);
		free(m);
	}
}

void cuda_finalize(void)
{
	struct mapping *m;

	pthread_mutex_lock(&mappings_lock);
	m = mappings;
	mappings = NULL;
	pthread_mutex_unlock(&mappings_lock);
	while (m) {
		struct mapping *next = m->next;

		cuda_comm_destroy(m->cc);
		free(m);
		m = next;
	}
}

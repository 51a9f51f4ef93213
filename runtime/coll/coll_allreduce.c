/*
 * coll_allreduce.c - allreduce and reducescatter: dispatch to the
 * algorithm coll_select() picks, recursive doubling for small messages,
 * the ring for large ones (coll_ring.c), shared memory within a node and
 * the hierarchical composition across nodes.
 *
 * AVERAGE is reduced as SUM everywhere (the reduction kernels' contract),
 * so every algorithm sees four ops, and divided once: inside the shared-
 * memory pipeline step by step while the data is in the cache, by the
 * hierarchical allreduce on its slice before the allgather, by the others
 * in a pass at the end.
 *
 * Hierarchical allreduce (all members spread evenly over several nodes):
 *   1. shm_reduce_scatter within the node: local rank i holds slice i of
 *      the node's sum;
 *   2. allreduce of slice i over UCX among the ranks with local rank i
 *      (one rank per node, "cross" communicator), all slices at once;
 *   3. shm_allgather_slices within the node.
 * Inter-node traffic is 1/local_size of the flat ring's per rank, and the
 * node-local steps never copy through the transport.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "comm/comm_impl.h"
#include "cuda/device.h"
#include "kernels/kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma weak shm_allreduce
#pragma weak shm_reduce_scatter
#pragma weak shm_allgather_slices

static struct coll_tuning tuning;
static int tuning_loaded;

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

static void env_warn(const char *msg)
{
	hvd_log(HVD_LOG_WARNING, "%s", msg);
}

void coll_tuning_load(void)
{
	coll_tuning_parse(&tuning, env_lookup, env_warn);
	tuning_loaded = 1;
	hvd_log(HVD_LOG_INFO,
		"collectives: allreduce %s (rd <= %zu B), bcast %s "
		"(binomial <= %zu B), allgather %s (direct <= %zu B), "
		"segment %zu B x %d, shm %s%s, hierarchical %s",
		coll_algo_name(tuning.algo[CK_ALLREDUCE]),
		tuning.allreduce_small_max,
		coll_algo_name(tuning.algo[CK_BROADCAST]),
		tuning.bcast_small_max,
		coll_algo_name(tuning.algo[CK_ALLGATHER]),
		tuning.allgather_small_max, tuning.segment, tuning.window,
		tuning.shm ? "on" : "off",
		shm_allreduce ? "" : " (not built in)",
		tuning.hier < 0 ? "auto" : tuning.hier ? "on" : "off");
}

const struct coll_tuning *coll_tuning(void)
{
	if (!tuning_loaded)
		coll_tuning_load();
	return &tuning;
}

void coll_place_of(hvd_comm_t *comm, struct coll_place *p)
{
	p->size = comm->size;
	p->nodes = comm->node_count;
	p->uniform = comm->uniform;
	p->local_size = comm->local_size;
	p->shm = coll_tuning()->shm && shm_allreduce && comm->shm_state >= 0 &&
		 comm->hier_state >= 0;
}

/* ----------------------------------------------- recursive doubling */

/* Non-powers of two: the first 2*rem ranks pair up, the even one of each
 * pair hands its data to the odd one and sits out, the remaining pof2
 * ranks run the doubling, and the result goes back to the sitters. */
static hvd_status_t rd_run(struct xfer *x, void *dst, size_t count,
			   hvd_dtype_t dt, hvd_op_t op)
{
	int n = x->comm->size, r = x->me, pof2 = 1, rem, vr;
	size_t bytes = count * hvd_dtype_size(dt);
	void *tmp;

	while (pof2 * 2 <= n)
		pof2 *= 2;
	rem = n - pof2;
	tmp = malloc(bytes ? bytes : 1);
	if (!tmp)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory (%zu bytes)",
					 bytes);
	if (r < 2 * rem) {
		if (r % 2 == 0) {
			if (xfer_wait(x, xfer_send(x, r + 1, dst, bytes)))
				goto out;
			vr = -1;
		} else {
			if (xfer_wait(x, xfer_recv(x, r - 1, tmp, bytes)))
				goto out;
			reduce_apply(dst, tmp, count, dt, op);
			vr = r / 2;
		}
	} else {
		vr = r - rem;
	}
	if (vr >= 0) {
		for (int mask = 1; mask < pof2; mask <<= 1) {
			int vp = vr ^ mask;
			int peer = vp < rem ? vp * 2 + 1 : vp + rem;

			if (xfer_sendrecv(x, peer, dst, bytes, peer, tmp,
					  bytes) != HVD_OK)
				goto out;
			reduce_apply(dst, tmp, count, dt, op);
		}
	}
	if (r < 2 * rem) {
		if (r % 2 == 0)
			xfer_wait(x, xfer_recv(x, r + 1, dst, bytes));
		else
			xfer_wait(x, xfer_send(x, r - 1, dst, bytes));
	}
out:
	free(tmp);
	return x->st;
}

hvd_status_t coll_allreduce_rd(hvd_comm_t *comm, const void *sendbuf,
			       void *recvbuf, size_t count, hvd_dtype_t dt,
			       hvd_op_t op)
{
	const void *src = coll_src(sendbuf, recvbuf);
	struct xfer x;

	if (src != recvbuf)
		memcpy(recvbuf, src, count * hvd_dtype_size(dt));
	if (comm->size == 1 || count == 0)
		return HVD_OK;
	xfer_begin(&x, comm);
	rd_run(&x, recvbuf, count, dt, op);
	return xfer_end(&x);
}

static hvd_status_t ring_allreduce(hvd_comm_t *comm, const void *src,
				   void *dst, size_t count, hvd_dtype_t dt,
				   hvd_op_t op)
{
	int n = comm->size;
	size_t esz = hvd_dtype_size(dt), *off, *len;
	struct xfer x;

	off = malloc(2 * (size_t)n * sizeof(size_t));
	if (!off)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	len = off + n;
	for (int b = 0; b < n; b++) {
		off[b] = hvd_reducescatter_offset(count, b, n) * esz;
		len[b] = hvd_reducescatter_count(count, b, n) * esz;
	}
	xfer_begin(&x, comm);
	if (ring_reduce_scatter(&x, src, dst, count, dt, op) == HVD_OK)
		ring_allgather(&x, dst, off, len);
	free(off);
	return xfer_end(&x);
}

hvd_status_t coll_allreduce_flat(hvd_comm_t *comm, const void *sendbuf,
				 void *recvbuf, size_t count, hvd_dtype_t dt,
				 hvd_op_t op)
{
	const struct coll_tuning *t = coll_tuning();
	const void *src = coll_src(sendbuf, recvbuf);
	size_t bytes = count * hvd_dtype_size(dt);
	enum coll_algo a = t->algo[CK_ALLREDUCE];

	if (a != ALGO_RD && a != ALGO_RING)
		a = bytes <= t->allreduce_small_max ||
				    count < (size_t)comm->size
			    ? ALGO_RD
			    : ALGO_RING;
	if (a == ALGO_RD || comm->size == 1)
		return coll_allreduce_rd(comm, src, recvbuf, count, dt, op);
	return ring_allreduce(comm, src, recvbuf, count, dt, op);
}

/* ------------------------------------------------------ hierarchy */

/* Hierarchy usable on every member (agreed once per communicator). */
static int hier_ready(hvd_comm_t *comm)
{
	int ok = 0;
	int32_t mine, all = 0;

	if (comm->hier_state)
		return comm->hier_state > 0;
	if (comm_hier(comm, &ok) != HVD_OK)
		ok = 0;
	mine = ok && comm_shm(comm->node) != NULL;
	if (coll_allreduce_rd(comm, &mine, &all, 1, HVD_INT32, HVD_MIN) !=
		    HVD_OK ||
	    !all) {
		comm->hier_state = -1;
		return 0;
	}
	comm->hier_state = 1;
	return 1;
}

static hvd_status_t hier_allreduce(hvd_comm_t *comm, const void *src,
				   void *dst, size_t count, hvd_dtype_t dt,
				   hvd_op_t op, double scale)
{
	shm_group_t *shm = comm->node->shm;
	int lr = comm->node->rank, ls = comm->node->size, f;
	size_t esz = hvd_dtype_size(dt);
	size_t off = hvd_reducescatter_offset(count, lr, ls);
	size_t cnt = hvd_reducescatter_count(count, lr, ls);
	hvd_status_t st, st2;
	char *slice = (char *)dst + off * esz;

	st = shm_reduce_scatter(shm, src, dst, count, dt, op);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical allreduce, "
					    "intra-node reduce-scatter");
	st = coll_allreduce_flat(comm->cross, slice, slice, cnt, dt, op);
	if (st == HVD_OK && scale != 1.0)
		reduce_scale(slice, cnt, dt, scale);
	/* Even after a cross-node failure the node-mates are waiting in
	 * the allgather: take part so that they are not left hanging. */
	st2 = shm_allgather_slices(shm, dst, count, dt);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical allreduce, "
					    "inter-node step");
	if (st2 != HVD_OK)
		return hvd_error_prefix(st2, "hierarchical allreduce, "
					     "intra-node allgather");
	/* A node-mate may have failed its inter-node step while ours
	 * succeeded: do not return its garbage slice as a result. */
	f = transport_comm_failed(comm);
	if (f >= 0)
		return hvd_error(HVD_ERR_PEER_FAILED,
				 "hvd: rank %d failed: %s", f,
				 transport_fail_reason(f));
	return HVD_OK;
}

/* ------------------------------------------------------- dispatch */

hvd_status_t coll_fail(hvd_comm_t *comm, hvd_status_t st, const char *fmt,
		       ...)
{
	char what[160];
	va_list ap;
	int f;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (st != HVD_ERR_PEER_FAILED)
		return hvd_error_prefix(st, "%s", what);
	comm->broken = st;
	/* The shared-memory layer names group members: name the world
	 * rank when we can tell which one is gone. */
	f = transport_check_failed(comm);
	if (f >= 0 && !strstr(hvd_last_error(), "hvd: rank "))
		hvd_error_prefix(st, "hvd: rank %d failed", f);
	return hvd_error_prefix(st, "%s", what);
}

static hvd_status_t broken(hvd_comm_t *comm, const char *what)
{
	int f = transport_comm_failed(comm);

	if (f >= 0)
		return hvd_error(comm->broken, "hvd: %s: rank %d failed "
					       "earlier (%s); the job cannot "
					       "continue",
				 what, f, transport_fail_reason(f));
	return hvd_error(comm->broken,
			 "hvd: %s: an earlier collective on this "
			 "communicator failed (%s)",
			 what, hvd_status_name(comm->broken));
}

hvd_status_t coll_allreduce(hvd_comm_t *comm, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dt,
			    hvd_op_t op)
{
	const void *src = coll_src(sendbuf, recvbuf);
	hvd_op_t rop = op == HVD_AVERAGE ? HVD_SUM : op;
	size_t esz = hvd_dtype_size(dt);
	struct coll_place p;
	hvd_status_t st;
	enum coll_algo a;
	double scale;

	if (hvd_device_ptr(recvbuf) && cuda_coll_allreduce)
		return cuda_coll_allreduce(comm, sendbuf, recvbuf, count, dt,
					   op);
	if (comm->broken)
		return broken(comm, "allreduce");
	if (count == 0)
		return HVD_OK;
	if (comm->size == 1) {
		if (src != recvbuf)
			memcpy(recvbuf, src, count * esz);
		return HVD_OK;
	}
	coll_place_of(comm, &p);
	a = coll_select(coll_tuning(), CK_ALLREDUCE, count * esz, count, &p);
	if (a == ALGO_SHM && !comm_shm(comm))
		a = ALGO_AUTO;
	if (a == ALGO_HIER && !hier_ready(comm))
		a = ALGO_AUTO;
	if (hvd_log_enabled(HVD_LOG_TRACE))
		hvd_log(HVD_LOG_TRACE, "allreduce ctx %u: %zu x %s: %s",
			comm->ctx, count, hvd_dtype_name(dt),
			coll_algo_name(a));
	scale = op == HVD_AVERAGE ? 1.0 / comm->size : 1.0;
	switch (a) {
	case ALGO_SHM:
		st = shm_allreduce(comm->shm, src, recvbuf, count, dt, rop,
				   scale);
		scale = 1.0; /* done */
		break;
	case ALGO_HIER:
		st = hier_allreduce(comm, src, recvbuf, count, dt, rop, scale);
		scale = 1.0;
		break;
	case ALGO_RING:
		st = ring_allreduce(comm, src, recvbuf, count, dt, rop);
		break;
	case ALGO_RD:
		st = coll_allreduce_rd(comm, src, recvbuf, count, dt, rop);
		break;
	default:
		st = coll_allreduce_flat(comm, src, recvbuf, count, dt, rop);
		break;
	}
	if (st != HVD_OK)
		return coll_fail(comm, st, "allreduce of %zu x %s", count,
				 hvd_dtype_name(dt));
	if (scale != 1.0)
		reduce_scale(recvbuf, count, dt, scale);
	return HVD_OK;
}

hvd_status_t coll_reducescatter(hvd_comm_t *comm, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dt,
				hvd_op_t op)
{
	hvd_op_t rop = op == HVD_AVERAGE ? HVD_SUM : op;
	size_t esz = hvd_dtype_size(dt);
	int n = comm->size, r = comm->rank;
	size_t mine = hvd_reducescatter_count(count, r, n);
	size_t moff = hvd_reducescatter_offset(count, r, n);
	int in_place = sendbuf == HVD_IN_PLACE || sendbuf == recvbuf;
	const void *src = in_place ? recvbuf : sendbuf;
	struct coll_place p;
	struct xfer x;
	hvd_status_t st;
	enum coll_algo a;
	char *full;
	int slice_only;

	if (hvd_device_ptr(recvbuf) && cuda_coll_reducescatter)
		return cuda_coll_reducescatter(comm, sendbuf, recvbuf, count,
					       dt, op);
	if (comm->broken)
		return broken(comm, "reducescatter");
	if (count == 0)
		return HVD_OK;
	if (n == 1) {
		if (!in_place)
			memcpy(recvbuf, src, count * esz);
		return HVD_OK;
	}
	coll_place_of(comm, &p);
	a = coll_select(coll_tuning(), CK_REDUCESCATTER, count * esz, count,
			&p);
	if (a == ALGO_SHM && !comm_shm(comm))
		a = count * esz <= coll_tuning()->reducescatter_small_max
			    ? ALGO_RD
			    : ALGO_RING;
	/* In place, recvbuf holds the whole input and is scratch too.  Out
	 * of place on one node there is no scratch: ranks reduce their slice
	 * straight from the segment into recvbuf. */
	slice_only = a == ALGO_SHM && !in_place;
	full = in_place ? recvbuf : slice_only ? NULL : malloc(count * esz);
	if (!full && !slice_only)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory (%zu bytes)",
				 count * esz);
	switch (a) {
	case ALGO_SHM:
		st = slice_only ? shm_reduce_scatter_slice(comm->shm, sendbuf,
							    recvbuf, count, dt,
							    rop)
				: shm_reduce_scatter(comm->shm, src, full,
						     count, dt, rop);
		break;
	case ALGO_RD:
		st = coll_allreduce_rd(comm, src, full, count, dt, rop);
		break;
	default:
		xfer_begin(&x, comm);
		ring_reduce_scatter(&x, src, full, count, dt, rop);
		st = xfer_end(&x);
		break;
	}
	if (st == HVD_OK) {
		if (full)
			memmove(recvbuf, full + moff * esz, mine * esz);
		if (op == HVD_AVERAGE)
			reduce_scale(recvbuf, mine, dt, 1.0 / n);
	}
	if (full != recvbuf)
		free(full);
	if (st != HVD_OK)
		return coll_fail(comm, st, "reducescatter of %zu x %s", count,
				 hvd_dtype_name(dt));
	return HVD_OK;
}

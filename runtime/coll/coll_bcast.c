/*
 * coll_bcast.c - broadcast and barrier.
 *
 * Broadcast: a binomial tree for small messages (log2(p) rounds, each
 * carrying the whole buffer); for large ones a chain from the root in
 * segments of HVD_RING_SEGMENT bytes, every rank forwarding a segment as
 * soon as it lands, so the time approaches one buffer transfer plus
 * (p-2) segments.  Within one node, the shared-memory broadcast.
 *
 * Barrier: dissemination (ceil(log2 p) rounds of empty messages), or the
 * shared-memory barrier within one node.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "comm/comm_impl.h"
#include "cuda/device.h"

#include <stdlib.h>
#include <string.h>

#pragma weak shm_broadcast
#pragma weak shm_barrier

static char empty;

static hvd_status_t bcast_binomial(struct xfer *x, void *buf, size_t bytes,
				   int root)
{
	int n = x->comm->size, vr = (x->me - root + n) % n, mask = 1;

	while (mask < n) {
		if (vr & mask) {
			int src = (vr - mask + root) % n;

			if (xfer_wait(x, xfer_recv(x, src, buf, bytes)))
				return x->st;
			break;
		}
		mask <<= 1;
	}
	for (mask >>= 1; mask > 0; mask >>= 1)
		if (vr + mask < n &&
		    xfer_send(x, (vr + mask + root) % n, buf, bytes) < 0)
			return x->st;
	return xfer_waitall(x);
}

static hvd_status_t bcast_chain(struct xfer *x, void *buf, size_t bytes,
				int root)
{
	const struct coll_tuning *t = coll_tuning();
	int n = x->comm->size, vr = (x->me - root + n) % n;
	int prev = (x->me - 1 + n) % n, next = (x->me + 1) % n;
	size_t seg = t->segment, nseg = (bytes + seg - 1) / seg;
	int win = t->window * 2, *ops;
	char *b = buf;
	size_t posted = 0;

	if (vr == 0) {
		for (size_t j = 0; j < nseg; j++) {
			size_t l = bytes - j * seg < seg ? bytes - j * seg : seg;

			if (xfer_send(x, next, b + j * seg, l) < 0)
				return x->st;
		}
		return xfer_waitall(x);
	}
	ops = malloc((size_t)win * sizeof(int));
	if (!ops)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
	for (size_t j = 0; j < nseg; j++) {
		size_t l = bytes - j * seg < seg ? bytes - j * seg : seg;

		while (posted < nseg && posted < j + (size_t)win) {
			size_t pl = bytes - posted * seg < seg
					    ? bytes - posted * seg
					    : seg;

			ops[posted % (size_t)win] =
				xfer_recv(x, prev, b + posted * seg, pl);
			if (ops[posted % (size_t)win] < 0)
				goto out;
			posted++;
		}
		if (xfer_wait(x, ops[j % (size_t)win]) != HVD_OK)
			goto out;
		if (vr < n - 1 && xfer_send(x, next, b + j * seg, l) < 0)
			goto out;
	}
	xfer_waitall(x);
out:
	free(ops);
	return x->st;
}

hvd_status_t coll_broadcast(hvd_comm_t *comm, void *buf, size_t count,
			    hvd_dtype_t dt, int root)
{
	size_t bytes = count * hvd_dtype_size(dt);
	struct coll_place p;
	struct xfer x;
	hvd_status_t st;
	enum coll_algo a;

	if (hvd_device_ptr(buf) && cuda_coll_broadcast)
		return cuda_coll_broadcast(comm, buf, count, dt, root);
	if (comm->broken)
		return hvd_error(comm->broken,
				 "hvd: broadcast: an earlier collective on "
				 "this communicator failed (%s)",
				 hvd_status_name(comm->broken));
	if (bytes == 0 || comm->size == 1)
		return HVD_OK;
	coll_place_of(comm, &p);
	a = coll_select(coll_tuning(), CK_BROADCAST, bytes, count, &p);
	if (a == ALGO_SHM && (!shm_broadcast || !comm_shm(comm)))
		a = bytes <= coll_tuning()->bcast_small_max ? ALGO_BINOMIAL
							    : ALGO_CHAIN;
	if (a == ALGO_SHM) {
		st = shm_broadcast(comm->shm, buf, bytes, root);
	} else {
		xfer_begin(&x, comm);
		if (a == ALGO_CHAIN)
			bcast_chain(&x, buf, bytes, root);
		else
			bcast_binomial(&x, buf, bytes, root);
		st = xfer_end(&x);
	}
	if (st != HVD_OK)
		return coll_fail(comm, st, "broadcast of %zu bytes from %d",
				 bytes, root);
	return HVD_OK;
}

hvd_status_t coll_barrier_ucx(hvd_comm_t *comm)
{
	int n = comm->size;
	struct xfer x;

	if (n == 1)
		return HVD_OK;
	xfer_begin(&x, comm);
	for (int k = 1; k < n; k <<= 1)
		if (xfer_sendrecv(&x, (x.me + k) % n, &empty, 0,
				  (x.me - k + n) % n, &empty, 0) != HVD_OK)
			break;
	return xfer_end(&x);
}

hvd_status_t coll_barrier(hvd_comm_t *comm)
{
	struct coll_place p;
	hvd_status_t st;

	if (comm->broken)
		return hvd_error(comm->broken,
				 "hvd: barrier: an earlier collective on "
				 "this communicator failed (%s)",
				 hvd_status_name(comm->broken));
	if (comm->size == 1)
		return HVD_OK;
	coll_place_of(comm, &p);
	if (coll_select(coll_tuning(), CK_BARRIER, 0, 0, &p) == ALGO_SHM &&
	    shm_barrier && comm_shm(comm))
		st = shm_barrier(comm->shm);
	else
		st = coll_barrier_ucx(comm);
	if (st != HVD_OK)
		return coll_fail(comm, st, "barrier");
	return HVD_OK;
}

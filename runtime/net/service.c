/*
 * service.c - the service collectives (net/service.h): recursive-doubling
 * allreduce, dissemination barrier, binomial broadcast, each one xfer on
 * the group.
 */
#include "config.h"

#include "kernels/kernels.h"
#include "net/service.h"
#include "net/transport.h"

#include <stdlib.h>
#include <string.h>

static char empty;

/* Non-powers of two: the first 2*rem ranks pair up, the even one of each
 * pair hands its data to the odd one and sits out, the remaining pof2
 * ranks run the doubling, and the result goes back to the sitters. */
static hvd_status_t rd_run(struct xfer *x, void *dst, size_t count,
			   hvd_dtype_t dt, hvd_op_t op)
{
	int n = x->g->size, r = x->me, pof2 = svc_pof2(n), rem = n - pof2, vr;
	size_t bytes = count * hvd_dtype_size(dt);
	void *tmp;

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
			int peer = svc_fold_rank(vr ^ mask, rem);

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

hvd_status_t svc_allreduce(struct net_group *g, const void *sendbuf,
			   void *recvbuf, size_t count, hvd_dtype_t dt,
			   hvd_op_t op)
{
	const void *src = sendbuf == HVD_IN_PLACE ? recvbuf : sendbuf;
	struct xfer x;

	if (src != recvbuf)
		memcpy(recvbuf, src, count * hvd_dtype_size(dt));
	if (g->size == 1 || count == 0)
		return HVD_OK;
	xfer_begin(&x, g);
	rd_run(&x, recvbuf, count, dt, op);
	return xfer_end(&x);
}

hvd_status_t svc_barrier(struct net_group *g)
{
	int n = g->size;
	struct xfer x;

	if (n == 1)
		return HVD_OK;
	xfer_begin(&x, g);
	for (int k = 1; k < n; k <<= 1)
		if (xfer_sendrecv(&x, (x.me + k) % n, &empty, 0,
				  (x.me - k + n) % n, &empty, 0) != HVD_OK)
			break;
	return xfer_end(&x);
}

static hvd_status_t bcast_binomial(struct xfer *x, void *buf, size_t bytes,
				   int root)
{
	int n = x->g->size, vr = (x->me - root + n) % n, mask = 1;

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

hvd_status_t svc_bcast(struct net_group *g, void *buf, size_t bytes,
		       int root)
{
	struct xfer x;

	if (g->size == 1 || bytes == 0)
		return HVD_OK;
	xfer_begin(&x, g);
	x.one_way = 1;
	bcast_binomial(&x, buf, bytes, root);
	return xfer_end(&x);
}

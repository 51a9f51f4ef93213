/*
 * coll_bcast.c - broadcast and barrier.
 *
 * Broadcast: a binomial tree for small messages (log2(p) rounds, each
 * carrying the whole buffer: the service broadcast, net/service.h); for
 * large ones a chain from the root in
 * segments of HVD_RING_SEGMENT bytes, every rank forwarding a segment as
 * soon as it lands, so the time approaches one buffer transfer plus
 * (p-2) segments.  Within one node, the shared-memory broadcast.
 *
 * Barrier: dissemination (the service barrier), or the shared-memory
 * barrier within one node.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "net/service.h"

#include <stdlib.h>
#include <string.h>

/* At most win sends outstanding (an eager send to a slow rank would
 * otherwise pile up in its unexpected queue); the chain has no cycle, so a
 * rank may wait for its oldest send. */
static int chain_send(struct xfer *x, int next, const char *b, size_t l,
		      int *sops, int win, int *head, int *out)
{
	if (*out == win) {
		if (xfer_wait(x, sops[*head]) != HVD_OK)
			return -1;
		*head = (*head + 1) % win;
		(*out)--;
	}
	sops[(*head + *out) % win] = xfer_send(x, next, b, l);
	if (sops[(*head + *out) % win] < 0)
		return -1;
	(*out)++;
	return 0;
}

static hvd_status_t bcast_chain(struct xfer *x, void *buf, size_t bytes,
				int root)
{
	const struct coll_tuning *t = coll_tuning();
	int n = x->g->size, vr = (x->me - root + n) % n;
	int prev = (x->me - 1 + n) % n, next = (x->me + 1) % n;
	size_t seg = t->segment, nseg = (bytes + seg - 1) / seg;
	int win = t->window * 2, *ops, *sops, head = 0, out = 0;
	char *b = buf;
	size_t posted = 0;

	ops = malloc(2 * (size_t)win * sizeof(int));
	if (!ops)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
	sops = ops + win;
	for (size_t j = 0; j < nseg; j++) {
		size_t l = bytes - j * seg < seg ? bytes - j * seg : seg;

		while (vr > 0 && posted < nseg && posted < j + (size_t)win) {
			size_t pl = bytes - posted * seg < seg
					    ? bytes - posted * seg
					    : seg;

			ops[posted % (size_t)win] =
				xfer_recv(x, prev, b + posted * seg, pl);
			if (ops[posted % (size_t)win] < 0)
				goto out;
			posted++;
		}
		if (vr > 0 && xfer_wait(x, ops[j % (size_t)win]) != HVD_OK)
			goto out;
		if (vr < n - 1 &&
		    chain_send(x, next, b + j * seg, l, sops, win, &head, &out))
			goto out;
	}
	xfer_waitall(x);
out:
	free(ops);
	return x->st;
}

hvd_status_t host_broadcast(hvd_comm_t *comm, void *buf, size_t bytes,
			    int root)
{
	struct coll_place p;
	struct xfer x;
	hvd_status_t st;
	enum coll_algo a;

	coll_place_of(comm, &p);
	a = coll_select(coll_tuning(), CK_BROADCAST, bytes, bytes, &p);
	if (a == ALGO_SHM && !coll_shm(comm))
		a = coll_select_flat(coll_tuning(), CK_BROADCAST, bytes, bytes,
				     &p);
	if (hvd_log_enabled(HVD_LOG_TRACE))
		hvd_log(HVD_LOG_TRACE, "broadcast ctx %u: %zu B from %d: %s",
			comm->net.ctx, bytes, root, coll_algo_name(a));
	if (a == ALGO_SHM) {
		st = shm_broadcast(coll_shm(comm), buf, bytes, root);
	} else if (a == ALGO_CHAIN) {
		xfer_begin(&x, &comm->net);
		x.one_way = 1;
		bcast_chain(&x, buf, bytes, root);
		st = xfer_end(&x);
	} else {
		st = svc_bcast(&comm->net, buf, bytes, root);
	}
	if (st != HVD_OK)
		return coll_fail(comm, st, "broadcast of %zu bytes from %d",
				 bytes, root);
	return HVD_OK;
}

hvd_status_t host_barrier(hvd_comm_t *comm)
{
	struct coll_place p;
	hvd_status_t st;

	coll_place_of(comm, &p);
	if (coll_select(coll_tuning(), CK_BARRIER, 0, 0, &p) == ALGO_SHM &&
	    coll_shm(comm))
		st = shm_barrier(coll_shm(comm));
	else
		st = svc_barrier(&comm->net);
	if (st != HVD_OK)
		return coll_fail(comm, st, "barrier");
	return HVD_OK;
}

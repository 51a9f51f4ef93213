/*
 * net/service.h - the service collectives: the small allreduce, barrier
 * and broadcast that setting up needs (agreeing on context ids and on
 * shared memory, carrying an NCCL unique id), over the transport alone.
 *
 * As UCC's service collectives, they sit below the communicators and the
 * algorithms that users' collectives run on, so that setup never calls
 * up into what it is setting up.  The collective layer also uses them as
 * its recursive-doubling allreduce and binomial broadcast.  Every member
 * of g calls them in the same order; a failed peer makes them fail on
 * every member (net/transport.h).
 */
#ifndef HVD_NET_SERVICE_H
#define HVD_NET_SERVICE_H

#include "net/group.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* How recursive doubling (svc_allreduce) and the collective layer's
 * halving pair off any number n of ranks: q, the largest power of two
 * not above n, run the power-of-two algorithm; the first 2 (n - q) fold
 * in pairs onto the odd rank of each.  svc_pof2: q.  svc_fold_rank: the
 * group rank of rank v of the q, given rem = n - q (v itself for 0). */
static inline int svc_pof2(int n)
{
	int q = 1;

	while (q * 2 <= n)
		q *= 2;
	return q;
}
static inline int svc_fold_rank(int v, int rem)
{
	return v < rem ? 2 * v + 1 : v + rem;
}

/* Recursive doubling (non-powers of two fold in and out).  sendbuf may be
 * HVD_IN_PLACE or equal recvbuf; op must not be HVD_AVERAGE. */
hvd_status_t svc_allreduce(struct net_group *g, const void *sendbuf,
			   void *recvbuf, size_t count, hvd_dtype_t dtype,
			   hvd_op_t op);
/* Dissemination barrier: ceil(log2 n) rounds of empty messages. */
hvd_status_t svc_barrier(struct net_group *g);
/* Binomial tree from group rank root, the whole buffer each round. */
hvd_status_t svc_bcast(struct net_group *g, void *buf, size_t bytes,
		       int root);

#pragma GCC visibility pop

#endif /* HVD_NET_SERVICE_H */

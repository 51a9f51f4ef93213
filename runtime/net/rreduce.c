/*
 * rreduce.c - receiving into a reduction (net/rreduce.h).
 *
 * Over TCP UCX copies every received fragment out of its own buffer into
 * the destination; a receive of the ring reduce-scatter used to land in
 * scratch memory and be reduced in a second pass.  Folding each fragment
 * into its destination as it is copied out does both in one pass over
 * the data, with the operands and the order of reduce_apply3(dst, src,
 * tmp) element by element, so the bits are the same.
 *
 * Fragments need not end on an element boundary (a fragment's payload is
 * a transport segment minus headers; UCX 1.13 over TCP and shared memory
 * happens to give multiples of 8, other transports need not): the bytes
 * of an element that straddles two fragments are kept in a small table
 * and the element is reduced once both parts are in, whatever order they
 * come in.
 *
 * Nor need a fragment sit at an address aligned for its type (UCX's
 * receive buffers are byte buffers: UBSan caught int64 loads at
 * addresses 4 mod 8): a misaligned run is reduced through an aligned
 * bounce buffer, 4 KiB at a time, and so is the table's straddler.
 */
#include "config.h"

#include "kernels/kernels.h"
#include "net/rreduce.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void rr_init(struct rr_desc *d, void *dst, const void *src, size_t count,
	     hvd_dtype_t dt, hvd_op_t op)
{
	memset(d, 0, sizeof(*d));
	d->dst = dst;
	d->src = src;
	d->esz = hvd_dtype_size(dt);
	d->len = count * d->esz;
	d->dt = dt;
	d->op = op;
	d->edge = d->inl;
	d->cap = (int)(sizeof(d->inl) / sizeof(d->inl[0]));
}

static int edge_put(struct rr_desc *d, size_t e, size_t at,
		    const unsigned char *q, size_t n)
{
	struct rr_edge *g = NULL;
	unsigned full = (1u << d->esz) - 1;

	for (int i = 0; i < d->nedge && !g; i++)
		if (d->edge[i].elem == e)
			g = &d->edge[i];
	if (!g) {
		if (d->nedge == d->cap) {
			int cap = d->cap * 2;
			struct rr_edge *ne = malloc((size_t)cap * sizeof(*ne));

			if (!ne)
				return -1;
			memcpy(ne, d->edge, (size_t)d->nedge * sizeof(*ne));
			if (d->edge != d->inl)
				free(d->edge);
			d->edge = ne;
			d->cap = cap;
		}
		g = &d->edge[d->nedge++];
		g->elem = e;
		g->mask = 0;
	}
	memcpy(g->b + at, q, n);
	g->mask |= ((1u << n) - 1) << at;
	if (g->mask == full) {
		_Alignas(8) unsigned char t[sizeof(g->b)];

		memcpy(t, g->b, d->esz);
		reduce_apply3(d->dst + e * d->esz, d->src + e * d->esz, t, 1,
			      d->dt, d->op);
		*g = d->edge[--d->nedge];
	}
	return 0;
}

/* n whole elements from e on, their received bytes at s: straight from s
 * when s is aligned for the type, else through an aligned copy. */
static void reduce_run(struct rr_desc *d, size_t e, const unsigned char *s,
		       size_t n)
{
	_Alignas(64) unsigned char t[4096];
	size_t esz = d->esz, per = sizeof(t) / esz;

	if ((uintptr_t)s % esz == 0) {
		reduce_apply3(d->dst + e * esz, d->src + e * esz, s, n, d->dt,
			      d->op);
		return;
	}
	while (n) {
		size_t k = n < per ? n : per;

		memcpy(t, s, k * esz);
		reduce_apply3(d->dst + e * esz, d->src + e * esz, t, k, d->dt,
			      d->op);
		e += k;
		s += k * esz;
		n -= k;
	}
}

int rr_unpack(struct rr_desc *d, size_t off, const void *p, size_t len)
{
	const unsigned char *q = p;
	size_t esz = d->esz, end = off + len, lo, hi;

	if (end > d->len || end < off)
		return -1;
	if (!len)
		return 0;
	lo = (off + esz - 1) / esz; /* first element wholly here */
	hi = end / esz;             /* one past the last          */
	if (off % esz) {            /* the rest of an element begun before */
		size_t e = off / esz, n = (e + 1) * esz - off;

		if (edge_put(d, e, off - e * esz, q, n < len ? n : len))
			return -1;
	}
	if (lo < hi)
		reduce_run(d, lo, q + (lo * esz - off), hi - lo);
	if (end % esz && hi >= lo && hi * esz >= off) /* begins an element */
		if (edge_put(d, hi, 0, q + (hi * esz - off), end - hi * esz))
			return -1;
	return 0;
}

int rr_pending(const struct rr_desc *d)
{
	return d->nedge;
}

void rr_release(struct rr_desc *d)
{
	if (d->edge != d->inl)
		free(d->edge);
	d->edge = d->inl;
	d->nedge = 0;
}

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
 * addresses 4 mod 8).  The kernels load every operand at any address
 * (kernels/reduce_tmpl.h), so a run is reduced where it lies; it used to
 * go through an aligned bounce buffer, which was 3.3% of a rank's CPU in
 * a 1 MiB allreduce across two netns nodes.
 */
#include "config.h"

#include "kernels/kernels.h"
#include "net/rreduce.h"

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
		reduce_apply3(d->dst + e * d->esz, d->src + e * d->esz, g->b, 1,
			      d->dt, d->op);
		*g = d->edge[--d->nedge];
	}
	return 0;
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
		reduce_apply3(d->dst + lo * esz, d->src + lo * esz,
			      q + (lo * esz - off), hi - lo, d->dt, d->op);
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

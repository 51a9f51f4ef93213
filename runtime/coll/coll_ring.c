/*
 * coll_ring.c - the bandwidth algorithms: ring reduce-scatter and ring
 * allgather, segmented and pipelined.
 *
 * Reduce-scatter: the buffer is cut into n blocks (Horovod's even split,
 * hvd_reducescatter_offset/count) and each block into segments of
 * HVD_RING_SEGMENT bytes.  At step s rank r receives block r-s-2 from its
 * left neighbour and folds it into its own copy, then forwards that very
 * block to its right neighbour at step s+1; after n-1 steps it owns the
 * full reduction of block r.  The pipeline runs per segment, not per
 * step: as soon as segment j of a block is reduced it goes out, while
 * segment j+1 is still on the wire, and HVD_RING_WINDOW receives stay
 * posted ahead into a small scratch ring, so data movement and reduction
 * overlap and the scratch space is window x segment, not a block.
 *
 * Allgather: rank r owns block r; at step s it forwards block r-s and
 * receives block r-s-1 straight into its final place, each segment
 * forwarded as soon as it lands.
 *
 * Every block is reduced in one place, in one chain order, and then
 * copied, so every rank ends with bit-identical results.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

static inline int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

struct rs_cursor {
	int s, j; /* step, segment within the step's block */
};

/* Segments of block b (elements seg each). */
static size_t nsegs(size_t count, int b, int n, size_t seg)
{
	size_t c = hvd_reducescatter_count(count, b, n);

	return (c + seg - 1) / seg;
}

/* Advance to the next (step, segment) that exists; 0 at the end. */
static int rs_next(struct rs_cursor *c, int r, int n, size_t count,
		   size_t seg)
{
	for (;;) {
		if (c->s > n - 2)
			return 0;
		if ((size_t)c->j < nsegs(count, mod(r - c->s - 2, n), n, seg))
			return 1;
		c->s++;
		c->j = 0;
	}
}

hvd_status_t ring_reduce_scatter(struct xfer *x, const void *src, void *dst,
				 size_t count, hvd_dtype_t dt, hvd_op_t op)
{
	const struct coll_tuning *t = coll_tuning();
	int n = x->g->size, r = x->me;
	int right = mod(r + 1, n), left = mod(r - 1, n);
	size_t esz = hvd_dtype_size(dt);
	size_t seg = t->segment / esz ? t->segment / esz : 1;
	int win = t->window;
	const char *s8 = src;
	char *d8 = dst, *tmp;
	struct rs_cursor post = {0, 0}, done = {0, 0};
	int *slot_op;
	int k_post = 0, k_done = 0;

	if (n == 1) {
		if (src != dst)
			memcpy(dst, src, count * esz);
		return HVD_OK;
	}
	tmp = malloc((size_t)win * seg * esz);
	slot_op = malloc((size_t)win * sizeof(int));
	if (!tmp || !slot_op) {
		free(tmp);
		free(slot_op);
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory (ring scratch "
					 "of %zu bytes)",
					 (size_t)win * seg * esz);
	}

	/* Step 0 sends come straight from the input. */
	{
		int b = mod(r - 1, n);
		size_t off = hvd_reducescatter_offset(count, b, n);
		size_t cnt = hvd_reducescatter_count(count, b, n);

		for (size_t j = 0; j * seg < cnt; j++) {
			size_t len = cnt - j * seg < seg ? cnt - j * seg : seg;

			if (xfer_send(x, right, s8 + (off + j * seg) * esz,
				      len * esz) < 0)
				goto out;
		}
	}
	/* Receives run win ahead of the reductions. */
	for (;;) {
		while (k_post < k_done + win && rs_next(&post, r, n, count, seg)) {
			int b = mod(r - post.s - 2, n);
			size_t cnt = hvd_reducescatter_count(count, b, n);
			size_t len = cnt - (size_t)post.j * seg < seg
					     ? cnt - (size_t)post.j * seg
					     : seg;

			slot_op[k_post % win] =
				xfer_recv(x, left,
					  tmp + (size_t)(k_post % win) * seg *
							esz,
					  len * esz);
			if (slot_op[k_post % win] < 0)
				goto out;
			k_post++;
			post.j++;
		}
		if (!rs_next(&done, r, n, count, seg))
			break;
		{
			int b = mod(r - done.s - 2, n);
			size_t off = hvd_reducescatter_offset(count, b, n);
			size_t cnt = hvd_reducescatter_count(count, b, n);
			size_t first = off + (size_t)done.j * seg;
			size_t len = cnt - (size_t)done.j * seg < seg
					     ? cnt - (size_t)done.j * seg
					     : seg;

			if (xfer_wait(x, slot_op[k_done % win]) != HVD_OK)
				goto out;
			reduce_apply3(d8 + first * esz, s8 + first * esz,
				      tmp + (size_t)(k_done % win) * seg * esz,
				      len, dt, op);
			/* This segment is what the right neighbour needs
			 * at the next step. */
			if (done.s < n - 2 &&
			    xfer_send(x, right, d8 + first * esz, len * esz) <
				    0)
				goto out;
			k_done++;
			done.j++;
		}
	}
	/* The allgather that usually follows overwrites blocks we are
	 * still sending from. */
	xfer_waitall(x);
out:
	free(tmp);
	free(slot_op);
	return x->st;
}

hvd_status_t ring_allgather(struct xfer *x, void *buf, const size_t *off,
			    const size_t *len)
{
	const struct coll_tuning *t = coll_tuning();
	int n = x->g->size, r = x->me;
	int right = mod(r + 1, n), left = mod(r - 1, n);
	size_t seg = t->segment;
	char *b8 = buf;
	int win = t->window * 2;
	/* Posted receives: (step, segment) pairs in order. */
	int ps = 0, ds = 0;
	size_t pj = 0, dj = 0;
	int *ring_op;
	int k_post = 0, k_done = 0;

	if (n == 1)
		return HVD_OK;
	ring_op = malloc((size_t)win * sizeof(int));
	if (!ring_op)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
	for (size_t o = 0; o < len[r]; o += seg) {
		size_t l = len[r] - o < seg ? len[r] - o : seg;

		if (xfer_send(x, right, b8 + off[r] + o, l) < 0)
			goto out;
	}
	for (;;) {
		/* Post receives ahead, skipping empty blocks. */
		while (k_post < k_done + win && ps <= n - 2) {
			int b = mod(r - ps - 1, n);

			if (pj * seg >= len[b]) {
				ps++;
				pj = 0;
				continue;
			}
			{
				size_t o = pj * seg;
				size_t l = len[b] - o < seg ? len[b] - o : seg;

				ring_op[k_post % win] =
					xfer_recv(x, left, b8 + off[b] + o, l);
				if (ring_op[k_post % win] < 0)
					goto out;
				k_post++;
				pj++;
			}
		}
		/* Complete the next one in order and forward it. */
		while (ds <= n - 2 && dj * seg >= len[mod(r - ds - 1, n)]) {
			ds++;
			dj = 0;
		}
		if (ds > n - 2)
			break;
		{
			int b = mod(r - ds - 1, n);
			size_t o = dj * seg;
			size_t l = len[b] - o < seg ? len[b] - o : seg;

			if (xfer_wait(x, ring_op[k_done % win]) != HVD_OK)
				goto out;
			if (ds < n - 2 &&
			    xfer_send(x, right, b8 + off[b] + o, l) < 0)
				goto out;
			k_done++;
			dj++;
		}
	}
	xfer_waitall(x);
out:
	free(ring_op);
	return x->st;
}

/*
 * coll_ring.c - the bandwidth algorithms: ring reduce-scatter and ring
 * allgather, segmented and pipelined.
 *
 * Reduce-scatter: the buffer is cut into n blocks (Horovod's even split,
 * hvd_reducescatter_offset/count) and each block into segments of
 * HVD_RING_SEGMENT bytes.  At step s rank r receives block r-s-2 from its
 * left neighbour and folds it into its own copy, then forwards that very
 * block to its right neighbour at step s+1; after n-1 steps it owns the
 * full reduction of block r.
 *
 * Allgather: rank r owns block r; at step s it forwards block r-s and
 * receives block r-s-1 straight into its final place.
 *
 * Both are one pass of the same pipeline, per segment rather than per
 * step: a segment goes out as soon as it is reduced (or has landed), while
 * the next ones are on the wire.  Two windows bound what is in flight:
 * HVD_RING_WINDOW receives are posted ahead (into a scratch ring of window
 * x segment bytes for the reduce-scatter, so the scratch space does not
 * grow with the message), and at most as many sends are outstanding.  The
 * send window matters when UCX sends eagerly (over TCP below its
 * rendezvous threshold): without it step 0 would push a whole block into
 * the receiver's unexpected queue at once.
 *
 * Order: messages between two ranks within one collective carry one tag
 * and match in the order sent, so every rank sends to its right neighbour
 * in exactly the order that neighbour posts its receives (step by step,
 * segment by segment); a send the window holds back waits in that order,
 * and nothing behind it overtakes it.
 *
 * Progress: a rank waiting for its next receive also wakes when its
 * oldest send completes, since a held-back send may be what its
 * neighbours need before they can send it anything again (with
 * rendezvous, a send completes only when the receiver took it).
 *
 * Every block is reduced in one place, in one chain order, and then
 * copied, so every rank ends with bit-identical results.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

/* Which reduce-scatter blocks go on the TCP lane, where every rank offers
 * it: those under RING_RS_LANE_SMALL, and with the caller's lane_wide
 * (hvd_reducescatter, not the allreduce's pass) also those from
 * RING_RS_LANE_FROM to under RING_RS_LANE_WIDE_MAX, in RING_RS_LANE_SEG
 * segments unless HVD_RING_SEGMENT says otherwise.  2 netns nodes x 1
 * rank, hvd-bench alternations, UCX -> the lane: a reducescatter of
 * 1 MiB 350-565 -> 198-403 us (17 of 19), 1.5 MiB 673-777 -> 340-549,
 * 2 MiB 875-995 -> 692-721 (3 of 3 each), alike from 2M blocks (4 MiB),
 * slower with 256K blocks (512 KiB: 77-253 -> 365-468 us); 3 x 1 at 1.5
 * and 3 MiB 6 of 6 faster or alike.  Inside an allreduce the wide range
 * was no faster (1 MiB 635-734 -> 581-721 us) and slower for 2 x 2's
 * 2 MiB slices at 4 MiB (3 of 4). */
#define RING_RS_LANE_SMALL ((size_t)256 << 10)
#define RING_RS_LANE_FROM ((size_t)512 << 10)
#define RING_RS_LANE_WIDE_MAX ((size_t)2 << 20)
#define RING_RS_LANE_SEG ((size_t)128 << 10)

static inline int mod(int a, int n)
{
	return ((a % n) + n) % n;
}

/* One pass: n-1 steps, a block per step, segments within a block. */
struct ring_pass {
	int n, r;
	int reduce;           /* reduce-scatter (1) or allgather (0)       */
	int in_recv;          /* reduce as segments land (xfer_recv_reduce)*/
	const size_t *off, *len; /* blocks, bytes                          */
	size_t seg;           /* bytes per segment                         */
	const char *src;      /* reduce-scatter: the input                 */
	char *dst;            /* where blocks are reduced / land           */
	hvd_dtype_t dt;
	hvd_op_t op;
};

/* A position in a pass's sequence of messages: step, segment. */
struct cursor {
	int s;
	size_t j;
};

/* Block received at step s (sent is the one of the step before). */
static int recv_block(const struct ring_pass *p, int s)
{
	return mod(p->r - s - (p->reduce ? 2 : 1), p->n);
}

static int send_block(const struct ring_pass *p, int s)
{
	return mod(p->r - s - (p->reduce ? 1 : 0), p->n);
}

/* Skip to the next (step, segment) that exists; 0 past the last step. */
static int valid(const struct ring_pass *p, struct cursor *c, int sending)
{
	for (; c->s <= p->n - 2; c->s++, c->j = 0) {
		int b = sending ? send_block(p, c->s) : recv_block(p, c->s);

		if (c->j * p->seg < p->len[b])
			return 1;
	}
	return 0;
}

static size_t seg_len(const struct ring_pass *p, int b, size_t j)
{
	size_t o = j * p->seg;

	return p->len[b] - o < p->seg ? p->len[b] - o : p->seg;
}

/* 1 when (a) comes before (b) */
static int before(const struct cursor *a, const struct cursor *b)
{
	return a->s < b->s || (a->s == b->s && a->j < b->j);
}

static hvd_status_t ring_run(struct xfer *x, const struct ring_pass *p,
			     int win)
{
	int right = mod(p->r + 1, p->n), left = mod(p->r - 1, p->n);
	struct cursor post = {0, 0}, done = {0, 0}, snd = {0, 0};
	int *rop, *sop, k_post = 0, k_done = 0, s_head = 0, s_out = 0;
	char *tmp = NULL;

	rop = malloc(2 * (size_t)win * sizeof(int));
	if (p->reduce && !p->in_recv)
		tmp = malloc((size_t)win * p->seg);
	if (!rop || (p->reduce && !p->in_recv && !tmp)) {
		free(rop);
		free(tmp);
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory (ring scratch "
					 "of %zu bytes)",
					 (size_t)win * p->seg);
	}
	sop = rop + win;
	for (;;) {
		int more_recv, more_send, w;

		/* Reap finished sends, oldest first. */
		while (s_out) {
			int t = xfer_test(x, sop[s_head]);

			if (t < 0)
				goto out;
			if (!t)
				break;
			s_head = (s_head + 1) % win;
			s_out--;
		}
		/* Send what is ready, in order: step 0 from the input, a
		 * later step's segment once it was reduced (or landed) at
		 * the step before. */
		while (s_out < win && valid(p, &snd, 1)) {
			struct cursor dep = {snd.s - 1, snd.j};
			int b = send_block(p, snd.s);
			const char *from;

			if (snd.s > 0 && !before(&dep, &done))
				break;
			from = (snd.s == 0 && p->reduce ? p->src : p->dst) +
			       p->off[b] + snd.j * p->seg;
			sop[(s_head + s_out) % win] =
				xfer_send(x, right, from, seg_len(p, b, snd.j));
			if (sop[(s_head + s_out) % win] < 0)
				goto out;
			s_out++;
			snd.j++;
		}
		/* Receives run a window ahead. */
		while (k_post < k_done + win && valid(p, &post, 0)) {
			int b = recv_block(p, post.s);
			size_t o = p->off[b] + post.j * p->seg;
			size_t l = seg_len(p, b, post.j);

			if (p->in_recv)
				rop[k_post % win] = xfer_recv_reduce(
					x, left, p->dst + o, p->src + o,
					l / hvd_dtype_size(p->dt), p->dt, p->op);
			else if (p->reduce)
				rop[k_post % win] = xfer_recv(
					x, left, tmp + (size_t)(k_post % win) * p->seg,
					l);
			else
				rop[k_post % win] = xfer_recv(x, left, p->dst + o, l);
			if (rop[k_post % win] < 0)
				goto out;
			k_post++;
			post.j++;
		}
		more_recv = valid(p, &done, 0);
		more_send = valid(p, &snd, 1);
		if (!more_recv) {
			if (!more_send)
				break;
			/* Only sends left: all of them are ready. */
			if (xfer_wait(x, sop[s_head]) != HVD_OK)
				goto out;
			continue;
		}
		/* The next receive; or the oldest send, when sends are held
		 * back by the window. */
		if (s_out == win && more_send)
			w = xfer_wait_either(x, rop[k_done % win], sop[s_head]);
		else
			w = xfer_wait(x, rop[k_done % win]) == HVD_OK
				    ? rop[k_done % win]
				    : -1;
		if (w < 0)
			goto out;
		if (w != rop[k_done % win])
			continue;
		if (p->reduce && !p->in_recv) {
			int b = recv_block(p, done.s);
			size_t o = p->off[b] + done.j * p->seg;
			size_t esz = hvd_dtype_size(p->dt);

			reduce_apply3(p->dst + o, p->src + o,
				      tmp + (size_t)(k_done % win) * p->seg,
				      seg_len(p, b, done.j) / esz, p->dt, p->op);
		}
		k_done++;
		done.j++;
	}
	/* What follows (the allgather, the caller) may overwrite blocks we
	 * are still sending from. */
	xfer_waitall(x);
out:
	free(rop);
	free(tmp);
	return x->st;
}

/*
 * Unless HVD_RING_SEGMENT says otherwise, 512K segments where the TCP lane
 * runs between the nodes (every rank decides alike): the allgather's
 * segments then go by the lane in half as many messages, each read whole,
 * and the reduce-scatter's reach UCX's rendezvous threshold.  2 netns
 * nodes x 1 rank, allreduce, medians of 4-5 alternations: 1 MiB 549 ->
 * 485 us (and 587 -> 367, 478 -> 411 in other runs), 16 MiB 13.9 -> 11.8
 * ms, 64 MiB 54.5 -> 48.6 ms; 3 x 1: 1 MiB 2.42 -> 2.16 ms, 4 MiB 9.3 ->
 * 8.5 ms, 16 and 64 MiB alike; 2 x 2 (hierarchical) alike.  Blocks
 * under 512K (block: the pass's largest, the same on every rank) go in
 * 128K segments, so that sending one overlaps reducing the next: 2 x 1,
 * 512 KiB (256K blocks), 100-call alternations 417-470 -> 310-381 us
 * and 426-481 -> 378-532 us; 1 MiB (512K blocks) alike with 128K, 256K
 * or 512K; 3 x 1 within its spread.
 */
static size_t ring_segment(const struct coll_tuning *t, size_t block)
{
	if (t->segment_auto && transport_lane_everywhere())
		return block < ((size_t)512 << 10) ? (size_t)128 << 10
						   : (size_t)512 << 10;
	return t->segment;
}

static size_t largest(const size_t *len, int n)
{
	size_t m = 0;

	for (int b = 0; b < n; b++)
		m = len[b] > m ? len[b] : m;
	return m;
}

hvd_status_t ring_reduce_scatter(struct xfer *x, const void *src, void *dst,
				 size_t count, hvd_dtype_t dt, hvd_op_t op,
				 int lane_wide)
{
	const struct coll_tuning *t = coll_tuning();
	int n = x->g->size;
	size_t esz = hvd_dtype_size(dt), seg, blk, *off;
	struct ring_pass p = {
		.n = n,
		.r = x->me,
		.reduce = 1,
		.src = src,
		.dst = dst,
		.dt = dt,
		.op = op,
	};

	if (n == 1) {
		if (src != dst)
			memcpy(dst, src, count * esz);
		return HVD_OK;
	}
	off = malloc(2 * (size_t)n * sizeof(*off));
	if (!off)
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
	for (int b = 0; b < n; b++) {
		off[b] = hvd_reducescatter_offset(count, b, n) * esz;
		off[n + b] = hvd_reducescatter_count(count, b, n) * esz;
	}
	p.off = off;
	p.len = off + n;
	/* Blocks of 256K and more, but for the wide range (above): UCX, not
	 * the TCP lane (net/lane.h), for every rank alike (the block is the
	 * same everywhere), so that a segment is reduced as UCX copies it
	 * out of its receive buffer; a receive-reduce cannot land in place,
	 * and over the lane through scratch it was slower (2 netns nodes,
	 * 16 MiB allreduce: 10.4 against 9.1 ms).  Smaller blocks go on the
	 * lane into scratch: there UCX's per-message cost is what shows (2 x
	 * 1 reducescatter, OpenMPI's time over ours, 4 alternations: 64 KiB
	 * 0.82-0.89 -> 1.08-1.11, 256 KiB 0.88-1.20 -> 1.29-2.21). */
	blk = largest(p.len, n);
	x->lane_off = !transport_lane_everywhere() ||
		      !(blk < RING_RS_LANE_SMALL ||
			(lane_wide && blk >= RING_RS_LANE_FROM &&
			 blk < RING_RS_LANE_WIDE_MAX));
	p.in_recv = x->lane_off && xfer_recv_reduce_ok();
	seg = ring_segment(t, blk);
	if (!x->lane_off && t->segment_auto && seg > RING_RS_LANE_SEG)
		seg = RING_RS_LANE_SEG;
	p.seg = seg / esz ? seg / esz * esz : esz;
	ring_run(x, &p, t->window);
	x->lane_off = 0;
	free(off);
	return x->st;
}

hvd_status_t ring_allgather(struct xfer *x, void *buf, const size_t *off,
			    const size_t *len)
{
	const struct coll_tuning *t = coll_tuning();
	struct ring_pass p = {
		.n = x->g->size,
		.r = x->me,
		.reduce = 0,
		.off = off,
		.len = len,
		.dst = buf,
	};

	if (p.n == 1)
		return HVD_OK;
	p.seg = ring_segment(t, largest(len, p.n));
	/* No scratch: receives land in place, so more can be posted. */
	return ring_run(x, &p, t->window * 2);
}

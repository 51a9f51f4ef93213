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

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*
 * The reduce-scatter's scratch ring, kept by each thread between calls
 * up to RING_TMP_KEEP bytes.  A fresh one per call is a malloc of window
 * x segment bytes, which glibc maps anew and whose every page then faults
 * in: 2 netns nodes x 1 rank, a 2 MiB reducescatter in 512K segments on
 * the TCP lane spent 1.4 ms of kernel time a call, most of it in page
 * faults and unmapping.  Freed when the thread ends.
 */
#define RING_TMP_KEEP ((size_t)16 << 20)
static pthread_key_t tmp_key;
static pthread_once_t tmp_once = PTHREAD_ONCE_INIT;
static __thread void *tmp_buf;
static __thread size_t tmp_cap;

static void tmp_key_make(void)
{
	(void)pthread_key_create(&tmp_key, free);
}

/* Scratch of n bytes for this thread's ring.  Past RING_TMP_KEEP, for
 * this collective only: it lives until xfer_end, as receives into it may
 * still be posted when an error returns from the ring. */
static char *ring_tmp_get(struct xfer *x, size_t n)
{
	void *b;

	if (n <= tmp_cap)
		return tmp_buf;
	if (n > RING_TMP_KEEP)
		return xfer_keep(x, n);
	if (pthread_once(&tmp_once, tmp_key_make) != 0 || !(b = malloc(n)))
		return NULL;
	free(tmp_buf);
	tmp_buf = b;
	tmp_cap = n;
	(void)pthread_setspecific(tmp_key, b);
	return b;
}

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
	char *mine;           /* reduce-scatter: block r's place, not dst  */
	hvd_dtype_t dt;
	hvd_op_t op;
	const struct rs_call *call; /* reduce-scatter: checked (ring_run) */
};

/* Where the reduction of block b's bytes at offset o goes. */
static char *red_at(const struct ring_pass *p, int b, size_t o)
{
	return p->mine && b == p->r ? p->mine + (o - p->off[b]) : p->dst + o;
}

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

/*
 * The reduce-scatter's check of the calls (p->call): each rank sends its
 * call to its right neighbour behind its first segment (a message of its
 * own where that is not possible: UCX reducing as it receives, or an
 * empty first block), and checks its left neighbour's before it reduces
 * anything or forwards a segment (the first receive's completion; the
 * forwarded segments wait for it).  A rank completes only when the
 * others have forwarded to it, so when each checked its left neighbour:
 * around the ring, every call alike.  Two ranks check each other.  Where
 * they differ, the ranks that found it stop forwarding, and the others'
 * waits end on the mismatch notice.
 */
#define CALL_ROOM 16 /* sizeof(struct rs_call), 8-byte aligned */
_Static_assert(sizeof(struct rs_call) == CALL_ROOM, "a call's room");

static hvd_status_t ring_run(struct xfer *x, const struct ring_pass *p,
			     int win)
{
	int right = mod(p->r + 1, p->n), left = mod(p->r - 1, p->n);
	struct cursor post = {0, 0}, done = {0, 0}, snd = {0, 0};
	int *rop, *sop, k_post = 0, k_done = 0, s_head = 0, s_out = 0;
	int tail_in = 0, tail_out = 0, crv = -1;
	size_t slot = p->seg + (p->call ? CALL_ROOM : 0);
	struct rs_call theirs, *apart = &theirs;
	char *tmp = NULL;

	rop = malloc(2 * (size_t)win * sizeof(int));
	if (p->reduce && !p->in_recv)
		tmp = ring_tmp_get(x, (size_t)win * slot);
	if (!rop || (p->reduce && !p->in_recv && !tmp)) {
		free(rop);
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory (ring scratch "
					 "of %zu bytes)",
					 (size_t)win * slot);
	}
	sop = rop + win;
	if (p->call) {
		tail_in = !p->in_recv && p->len[recv_block(p, 0)];
		tail_out = !p->in_recv && p->len[send_block(p, 0)];
		/* Its own message lands where it may after an error
		 * returns from here. */
		if (!tail_in && (apart = xfer_keep(x, sizeof(*apart))))
			crv = xfer_recv(x, left, apart, sizeof(*apart));
		if ((!tail_in && crv < 0) ||
		    (!tail_out &&
		     xfer_send(x, right, p->call, sizeof(*p->call)) < 0))
			goto out;
		/* Nothing to receive at step 0: nothing to wait for
		 * before forwarding, so the check comes first. */
		if (!p->len[recv_block(p, 0)] &&
		    (xfer_wait(x, crv) != HVD_OK ||
		     rs_call_apart(x, left, apart, p->call)))
			goto out;
	}
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
			    tail_out && snd.s == 0 && snd.j == 0
				? xfer_send_tail(x, right, from,
						 seg_len(p, b, 0), p->call,
						 sizeof(*p->call))
				: xfer_send(x, right, from,
					    seg_len(p, b, snd.j));
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
					x, left, red_at(p, b, o), p->src + o,
					l / hvd_dtype_size(p->dt), p->dt, p->op);
			else if (p->reduce)
				rop[k_post % win] = xfer_recv(
				    x, left, tmp + (size_t)(k_post % win) * slot,
				    l + (k_post == 0 && tail_in ? CALL_ROOM
								: 0));
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
		if (k_done == 0 && p->call && p->len[recv_block(p, 0)]) {
			if (tail_in)
				memcpy(&theirs,
				       tmp + seg_len(p, recv_block(p, 0), 0),
				       sizeof(theirs));
			else if (xfer_wait(x, crv) != HVD_OK)
				goto out;
			if (rs_call_apart(x, left, apart, p->call))
				goto out;
		}
		if (p->reduce && !p->in_recv) {
			int b = recv_block(p, done.s);
			size_t o = p->off[b] + done.j * p->seg;
			size_t esz = hvd_dtype_size(p->dt);

			reduce_apply3(red_at(p, b, o), p->src + o,
				      tmp + (size_t)(k_done % win) * slot,
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
				 void *mine, size_t count, hvd_dtype_t dt,
				 hvd_op_t op)
{
	const struct coll_tuning *t = coll_tuning();
	int n = x->g->size;
	size_t esz = hvd_dtype_size(dt), seg, blk, *off;
	struct rs_call call = rs_call_of(count, dt, op);
	struct ring_pass p = {
		.n = n,
		.r = x->me,
		.reduce = 1,
		.src = src,
		.dst = dst,
		.mine = mine,
		.dt = dt,
		.op = op,
		.call = &call,
	};

	if (n == 1) {
		if (mine)
			dst = mine;
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
	/* Where the TCP lane (net/lane.h) runs at every rank, every segment
	 * goes on it into the scratch ring and is reduced from there;
	 * elsewhere UCX reduces each as it copies it out of its receive
	 * buffer.  UCX carried the blocks of 256K and more until the lane's
	 * connections left BBR's pacing and the scratch ring was kept between
	 * calls: 2 netns nodes x 1 rank, 3 alternations, UCX -> the lane,
	 * reducescatter 512 KiB 188-220 -> 86-93 us, 4 MiB 1.76-2.07 ->
	 * 0.87-1.10 ms, 16 MiB 8.3-8.9 -> 4.4-4.6 ms, 64 MiB 29-33 -> 19-20
	 * ms; allreduce 1 MiB 436-622 -> 280-351 us, 4 MiB 2.18-2.33 ->
	 * 1.48-1.74 ms, 64 MiB 40-51 -> 33-35 ms (with BBR kept, alike or
	 * faster too).  The same on every rank: transport_lane_everywhere
	 * is. */
	blk = largest(p.len, n);
	x->lane_off = !transport_lane_everywhere();
	p.in_recv = x->lane_off && xfer_recv_reduce_ok();
	seg = ring_segment(t, blk);
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

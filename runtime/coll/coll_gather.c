/*
 * coll_gather.c - allgather(v) and alltoall(v).
 *
 * Allgatherv: across even nodes, small totals go through the node
 * leaders (hier_allgatherv), larger ones by a ring per local index and
 * shared memory (hier_allgatherv_cross); otherwise "direct" for small
 * totals on few ranks (every rank posts its n-1 receives and sends its
 * block to everyone at once: one round of latency; step by step where
 * the ranks outnumber the cores, step_window), Bruck's log2(n)
 * rounds for small totals on many, the segmented ring (coll_ring.c) for
 * large ones, where every byte crosses each link once.
 *
 * Alltoallv: pairwise exchange, step s sends to r+s and receives from r-s,
 * at most ALLTOALL_WINDOW steps in flight so that a large exchange does
 * not flood one receiver (one where the ranks outnumber the cores,
 * step_window); coll_alltoall's equal blocks within one node
 * go through shared memory (shm_alltoall: one exchange for small blocks,
 * the pipeline buffers for larger ones).  Where the TCP lane runs at
 * every rank, each block goes in pieces of ALLTOALL_LANE_PIECE
 * (post_pieces).
 */
#include "config.h"

#include "coll/coll_impl.h"

#include <stdlib.h>
#include <string.h>

#define ALLTOALL_WINDOW 8
#define ALLTOALL_LANE_PIECE ((size_t)512 << 10)

/*
 * Steps of a pairwise exchange in flight at once: HVD_ALLTOALL_WINDOW,
 * else ALLTOALL_WINDOW, or one where the job's ranks on this machine
 * outnumber its cores.  There every step's messages in flight together
 * made each rank take turns at the cores with two or more peers' traffic
 * at once; step by step, as OpenMPI's pairwise alltoall goes, each
 * pair's exchange runs on its own (3 netns nodes x 1 rank on 2 cores,
 * medians of 5 alternated runs: alltoall 12 B 57.1 -> 44.6 us, 64 KiB
 * 98.7 -> 78.6, 1 MiB 443 -> 396; 2 x 2, 256 KiB 181 -> 156).  A choice
 * of each rank's own: the messages and their order are the same either
 * way.
 */
static int step_window(void)
{
	int w = coll_tuning()->steps; /* HVD_ALLTOALL_WINDOW */

	if (w > 0)
		return w;
	return transport_host_oversubscribed() ? 1 : ALLTOALL_WINDOW;
}

/* Before step s of an exchange with w steps in flight: at the start of
 * each new window, wait for the steps before it.  1: stop (failed). */
static int step_gate(struct xfer *x, int s, int w)
{
	return s > 1 && (s - 1) % w == 0 && xfer_waitall(x) != HVD_OK;
}

/* Counts of Horovod's even split (hvd_reducescatter_count's sizes). */
static int even_split(const size_t *counts, size_t total, int n)
{
	for (int r = 0; r < n; r++)
		if (counts[r] != hvd_reducescatter_count(total, r, n))
			return 0;
	return 1;
}

/*
 * Bruck's allgather(v): log2(n) rounds.  Rank r keeps the blocks it has
 * in rotated order (its own, then r+1, r+2, ...) in a scratch buffer; at
 * round k it sends the first min(2^k, n - 2^k) of them to r - 2^k and
 * appends as many from r + 2^k, whose first blocks are exactly the ones
 * that follow r's; block sizes are known everywhere (recvcounts), so
 * each side knows how many bytes move.  At the end the blocks are copied
 * out to their places.
 */
static hvd_status_t bruck_allgatherv(struct xfer *x, char *rb,
				     const size_t *off, const size_t *len)
{
	int n = x->g->size, r = x->me, cur = 1;
	size_t *pos = malloc(((size_t)n + 1) * sizeof(*pos));
	char *tmp = NULL;

	if (pos) {
		pos[0] = 0;
		for (int i = 0; i < n; i++)
			pos[i + 1] = pos[i] + len[(r + i) % n];
		tmp = malloc(pos[n] ? pos[n] : 1);
	}
	if (!pos || !tmp) {
		free(pos);
		return x->st = hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd: out of memory");
	}
	memcpy(tmp, rb + off[r], len[r]);
	for (int dist = 1; dist < n; dist <<= 1) {
		int cnt = cur < n - cur ? cur : n - cur;

		if (xfer_sendrecv(x, (r - dist + n) % n, tmp, pos[cnt],
				  (r + dist) % n, tmp + pos[cur],
				  pos[cur + cnt] - pos[cur]) != HVD_OK)
			goto out;
		cur += cnt;
	}
	for (int i = 1; i < n; i++)
		memcpy(rb + off[(r + i) % n], tmp + pos[i], len[(r + i) % n]);
out:
	free(tmp);
	free(pos);
	return x->st;
}

/*
 * A packed copy of blocks laid out elsewhere: in = 1 copies the own
 * block into it, in = 0 the others' blocks out of it.  The algorithms
 * that need the blocks packed run on the copy when this rank's displs
 * have gaps or another order: displs are each rank's own business (only
 * the counts must agree), so the choice of algorithm never depends on
 * them.
 */
static void repack(char *rb, const size_t *off, const size_t *len,
		   char *packed, int n, int me, int in)
{
	size_t at = 0;

	for (int b = 0; b < n; at += len[b], b++)
		if (in && b == me)
			memcpy(packed + at, rb + off[b], len[b]);
		else if (!in && b != me)
			memcpy(rb + off[b], packed + at, len[b]);
}

/*
 * Small totals across even nodes: every rank puts its block in its place
 * of a zeroed buffer, the buffer is summed by the allreduce through the
 * node leaders (x + 0 + ... + 0 is x, whatever its bits), and the
 * others' blocks are copied out.  The leaders make one exchange
 * where "direct" has every rank send to every other.  Packed blocks (all
 * of hvd_allgather) are summed in recvbuf itself; otherwise in a packed
 * copy, so that gaps between the displs stay as they were.  Summed as
 * uint8: any length, and in shared memory as fast as int32 or int64 up to
 * 64 KiB (1 node x 2: 4.6-4.9 us at 64 KiB, each).
 */
static hvd_status_t hier_allgatherv(hvd_comm_t *comm, char *rb,
				    const size_t *off, const size_t *len,
				    size_t total, int packed)
{
	int n = comm->net.size, r = comm->net.rank;
	char *buf = packed ? rb : calloc(total ? total : 1, 1);
	size_t at = 0;
	hvd_status_t st;

	if (!buf)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory (%zu bytes)", total);
	for (int b = 0; b < r; b++)
		at += len[b];
	if (packed) {
		memset(rb, 0, at);
		memset(rb + at + len[r], 0, total - at - len[r]);
	} else {
		repack(rb, off, len, buf, n, r, 1);
	}
	st = hier_allreduce_small(comm, buf, buf, total, HVD_UINT8, HVD_SUM,
				  1.0);
	if (!packed) {
		if (st == HVD_OK)
			repack(rb, off, len, buf, n, r, 0);
		free(buf);
	}
	return st;
}

/*
 * Larger totals across even nodes: every rank runs the ring allgather
 * among the ranks with its local index (one per node), with the blocks
 * landing at their places in recvbuf; then, within the node, each local
 * index in turn broadcasts the blocks its cross group gathered, packed,
 * through shared memory.  Each node receives the other nodes' blocks
 * once, where the flat ring sends (n-1)/n of the total over every link
 * it has between nodes.  A member's local index is its position among
 * the members on its node, in comm order (comm_hier's rule); its cross
 * group is in comm order too.  The cross steps' statuses are agreed
 * before the broadcasts, so that a failure is an error on every
 * node-mate, never a broadcast of blocks that did not come.
 */
static hvd_status_t hier_allgatherv_cross(hvd_comm_t *comm, char *rb,
					  const size_t *off,
					  const size_t *len)
{
	shm_group_t *shm = coll_shm(comm->node);
	int n = comm->net.size, me = comm->node->net.rank;
	int ls = comm->node->net.size, nc = comm->cross->net.size;
	const int *li = comm->local_index;
	size_t *coff = malloc((2 * (size_t)nc + (size_t)ls) * sizeof(size_t));
	size_t *clen, *group, most = 0;
	char *pack = NULL;
	int32_t mine[2], worst[2] = {0, 0}; /* status, failed rank + 1 */
	hvd_status_t st = HVD_OK;
	struct xfer x;

	if (!coff)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	/* this rank's cross group, and the bytes of every group */
	clen = coff + nc;
	group = clen + nc;
	memset(group, 0, (size_t)ls * sizeof(size_t));
	for (int c = 0, j = 0; c < n; c++) {
		if (li[c] == me && j < nc) {
			coff[j] = off[c];
			clen[j++] = len[c];
		}
		group[li[c]] += len[c];
	}
	for (int i = 0; i < ls; i++)
		if (group[i] > most)
			most = group[i];
	pack = coll_scratch(comm, most);
	shm_away(shm, 1);
	xfer_begin(&x, &comm->cross->net);
	ring_allgather(&x, rb, coff, clen);
	mine[0] = (int32_t)xfer_end(&x);
	shm_away(shm, 0);
	/* out of memory: still in the agreement, so that nobody waits */
	if (mine[0] == HVD_OK && !pack)
		mine[0] = (int32_t)hvd_error(HVD_ERR_NO_MEMORY,
					     "hvd: out of memory (%zu bytes)",
					     most);
	mine[1] = mine[0] == HVD_OK
			  ? 0
			  : transport_check_failed(&comm->cross->net) + 1;
	st = shm_allreduce(shm, mine, worst, 2, HVD_INT32, HVD_MAX, 1.0);
	if (st == HVD_OK && worst[0] != HVD_OK)
		st = mine[0] != HVD_OK
			     ? (hvd_status_t)mine[0]
			     : coll_mate_failed(
				       (hvd_status_t)worst[0], worst[1] - 1,
				       "failed in a node-mate's inter-node "
				       "step",
				       "allgather");
	for (int i = 0; st == HVD_OK && i < ls; i++) {
		for (size_t c = 0, o = 0; i == me && c < (size_t)n; c++)
			if (li[c] == i) {
				memcpy(pack + o, rb + off[c], len[c]);
				o += len[c];
			}
		st = shm_broadcast(shm, pack, group[i], i);
		for (size_t c = 0, o = 0; st == HVD_OK && i != me &&
					  c < (size_t)n;
		     c++)
			if (li[c] == i) {
				memcpy(rb + off[c], pack + o, len[c]);
				o += len[c];
			}
	}
	free(coff);
	return st;
}

hvd_status_t host_allgatherv(hvd_comm_t *comm, const void *sendbuf,
			     size_t sendcount, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     hvd_dtype_t dt)
{
	int n = comm->net.size, r = comm->net.rank;
	size_t esz = hvd_dtype_size(dt), total = 0, *off, *len;
	int packed = 1;
	struct coll_place p;
	struct xfer x;
	hvd_status_t st = HVD_OK;
	enum coll_algo a;
	char *rb = recvbuf;

	if (recvcounts[r] != sendcount)
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: allgatherv: this rank sends %zu "
				 "elements but recvcounts[%d] is %zu",
				 sendcount, r, recvcounts[r]);
	off = malloc(2 * (size_t)n * sizeof(size_t));
	if (!off)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	len = off + n;
	for (int b = 0; b < n; b++) {
		off[b] = (displs ? displs[b] : total) * esz;
		len[b] = recvcounts[b] * esz;
		packed = packed && off[b] == total * esz;
		total += recvcounts[b];
	}
	/* Own block first (memmove: sendbuf may overlap recvbuf). */
	if (sendbuf != HVD_IN_PLACE && (const char *)sendbuf != rb + off[r] &&
	    len[r])
		memmove(rb + off[r], sendbuf, len[r]);
	if (n == 1 || total == 0)
		goto out;
	coll_place_of(comm, &p);
	/* On one node, when the counts are Horovod's even split of the
	 * total (always so for hvd_allgather), the shared-memory allgather
	 * of slices does it without transport copies: in recvbuf when this
	 * rank's blocks are packed, else in a packed copy. */
	if (p.shm && p.nodes == 1 &&
	    even_split(recvcounts, total, n) && coll_shm(comm)) {
		char *buf = packed ? rb : malloc(total * esz);

		if (!buf) {
			st = hvd_error(HVD_ERR_NO_MEMORY,
				       "hvd: out of memory (%zu bytes)",
				       total * esz);
			goto out;
		}
		if (!packed)
			repack(rb, off, len, buf, n, r, 1);
		st = shm_allgather_slices(coll_shm(comm), buf, total, dt);
		if (!packed) {
			if (st == HVD_OK)
				repack(rb, off, len, buf, n, r, 0);
			free(buf);
		}
		goto out;
	}
	a = coll_select(coll_tuning(), CK_ALLGATHER, total * esz, total, &p);
	/* The same on every member (the counts are; the displs need not
	 * be, and do not count).  Small: through the leaders; else the
	 * cross rings. */
	if (a == ALGO_HIER && coll_hier_ready(comm)) {
		if (coll_leaders(coll_tuning(), CK_ALLGATHER, total * esz,
				 &p))
			st = hier_allgatherv(comm, rb, off, len, total * esz,
					     packed);
		else
			st = hier_allgatherv_cross(comm, rb, off, len);
		goto out;
	}
	if (a == ALGO_HIER)
		a = coll_select_flat(coll_tuning(), CK_ALLGATHER, total * esz,
				     total, &p);
	xfer_begin(&x, &comm->net);
	if (a == ALGO_RING) {
		ring_allgather(&x, recvbuf, off, len);
	} else if (a == ALGO_BRUCK) {
		bruck_allgatherv(&x, recvbuf, off, len);
	} else {
		int w = step_window();

		for (int s = 1; s < n; s++) {
			int from = (r - s + n) % n, to = (r + s) % n;

			if (step_gate(&x, s, w) ||
			    xfer_recv(&x, from, rb + off[from], len[from]) < 0 ||
			    xfer_send(&x, to, rb + off[r], len[r]) < 0)
				break;
		}
	}
	st = xfer_end(&x);
out:
	free(off);
	if (st != HVD_OK)
		return coll_fail(comm, st, "allgather");
	return HVD_OK;
}

/*
 * Small alltoalls of equal blocks across even nodes (coll_alltoall's):
 * through the node leaders.  The node's ranks agree on the block size
 * and share their send buffers through shared memory (so the blocks
 * between node-mates never touch the network); each leader sends every
 * other node's leader, in one message, the blocks its node has for that
 * node's ranks, and broadcasts what it received, its status in front
 * (struct leader_hdr).  Pairwise, every rank sends a message to every
 * other: with 2 x 2 ranks on two cores, four processes take turns at the
 * cores for three round trips each.
 *
 * Ranks that disagree on the block size: within a node the agreement
 * tells every node-mate, and the leader still sends its peers a message
 * one byte longer than any block size could make it, so that theirs fail
 * too (HVD_ERR_MISMATCH); between nodes the leaders' messages differ in
 * length, which the transport reports as the same error.
 */
static hvd_status_t hier_alltoall(hvd_comm_t *comm, const char *send,
				  char *recv, size_t b)
{
	shm_group_t *shm = coll_shm(comm->node);
	hvd_comm_t *cross = comm->cross;
	int n = comm->net.size, L = comm->node->net.size;
	int N = cross->net.size, me = comm->node->net.rank, leader = me == 0;
	size_t row = (size_t)n * b, msg = (size_t)L * L * b;
	size_t hoff = ((size_t)L * row + 7) & ~(size_t)7;
	/* member_at[node * L + local index]; mine: this rank's node */
	const int *at = comm->member_at, mine = comm->node_index[comm->net.rank];
	char *all = coll_scratch(comm, hoff + sizeof(struct leader_hdr) +
					       2 * (size_t)(N - 1) * msg + 1);
	/* block size, its negative, out of memory: MAX over the node */
	int64_t v[3] = {(int64_t)b, -(int64_t)b, !all};
	struct leader_hdr alone, *h = &alone;
	char *in = NULL, *out = NULL;
	hvd_status_t st;
	struct xfer x;

	st = shm_allreduce(shm, v, v, 3, HVD_INT64, HVD_MAX, 1.0);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical alltoall, block "
					    "sizes");
	/* Trouble in the node (sizes apart, or no memory somewhere): no
	 * data moves and only the header is broadcast, but the leader
	 * still meets its peers, with a message one byte longer than they
	 * expect, so that nobody waits. */
	if (v[2] || v[0] != -v[1])
		row = 0;
	if (all) {
		in = all + hoff + sizeof(*h);
		out = in + (size_t)(N - 1) * msg;
		if (row)
			h = (struct leader_hdr *)(all + hoff);
	}
	if (row) {
		memcpy(all + (size_t)me * row, send, row);
		st = shm_allgather_slices(shm, all, (size_t)L * row,
					  HVD_UINT8);
		if (st != HVD_OK)
			return hvd_error_prefix(st, "hierarchical alltoall, "
						    "intra-node allgather");
	}
	if (leader) {
		hvd_status_t xs;

		shm_away(shm, 1);
		xfer_begin(&x, &cross->net);
		for (int c = 0, k = 0; c < N; c++) {
			char *o = out ? out + (size_t)k * msg : (char *)h;

			if (c == mine)
				continue;
			for (int i = 0; row && i < L; i++)
				for (int j = 0; j < L; j++)
					memcpy(o + ((size_t)i * L + j) * b,
					       all + (size_t)i * row +
						       (size_t)at[c * L + j] * b,
					       b);
			if (in)
				xfer_recv(&x, c, in + (size_t)k * msg, msg);
			xfer_send(&x, c, o, row ? msg : out ? msg + 1 : 1);
			k++;
		}
		xs = xfer_end(&x);
		shm_away(shm, 0);
		if (xs != HVD_ERR_PEER_FAILED && v[2])
			xs = hvd_error(HVD_ERR_NO_MEMORY,
				       "hvd: alltoall: out of memory on this "
				       "node (%zu bytes of scratch)",
				       hoff + 2 * (size_t)(N - 1) * msg);
		else if (xs == HVD_OK && !row)
			xs = hvd_error(HVD_ERR_MISMATCH,
				       "hvd: alltoall: this node's ranks "
				       "passed blocks of %lld to %lld bytes: "
				       "ranks called the collective with "
				       "different counts or types",
				       (long long)-v[1], (long long)v[0]);
		leader_hdr_set(h, xs, cross);
	}
	/* after a failed inter-node step too: the node-mates wait here */
	st = shm_broadcast(shm, h, sizeof(*h) + (size_t)(N - 1) * msg * !!row,
			   0);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hierarchical alltoall, intra-node "
					    "broadcast");
	st = leader_hdr_status(h, leader, "hierarchical alltoall");
	for (int c = 0, k = 0; st == HVD_OK && c < N; c++) {
		for (int i = 0; i < L; i++)
			memcpy(recv + (size_t)at[c * L + i] * b,
			       c == mine ? all + (size_t)i * row +
						   (size_t)comm->net.rank * b
					 : in + (size_t)k * msg +
						   ((size_t)i * L + me) * b,
			       b);
		k += c != mine;
	}
	return st;
}

/*
 * One block of the exchange, in pieces of seg bytes (0: whole).  Where
 * the lane runs (net/lane.h) a piece of 512K is read once all of it is
 * in, as the ring's segments are; one message of several MiB is read as
 * its bytes come, and there, as a whole, went slower than even UCX.
 * 2 netns nodes x 1 rank, alternations of 50 calls: 2 MiB 1180-1490 ->
 * 810-990 us, 4 MiB 2710-2940 -> 1660-2020 us, 16 MiB 11.0 -> 7.9 ms,
 * 64 MiB 44.5-52.0 -> 33.3-35.5 ms (UCX alone: 2.1-2.5, 8.4-8.7 and
 * 33.9-35.2 ms; 256K pieces were better at 2 MiB and worse at 64).
 * Both ends cut alike: the sizes agree when the call is right, and
 * transport_lane_everywhere is the same on every rank.
 */
static void post_pieces(struct xfer *x, int peer, char *buf, size_t len,
			size_t seg, int send)
{
	if (!seg)
		seg = len;
	for (size_t o = 0; o < len; o += seg) {
		size_t l = len - o < seg ? len - o : seg;

		if (send)
			xfer_send(x, peer, buf + o, l);
		else
			xfer_recv(x, peer, buf + o, l);
	}
}

hvd_status_t host_alltoallv(hvd_comm_t *comm, const void *sendbuf,
			    const size_t *sendcounts, const size_t *sdispls,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *rdispls, hvd_dtype_t dt, int even)
{
	int n = comm->net.size, r = comm->net.rank;
	size_t esz = hvd_dtype_size(dt), *so, *ro, stot = 0, rtot = 0;
	const char *sb = sendbuf;
	char *rb = recvbuf, *copy = NULL;
	size_t seg;
	int win;
	struct xfer x;
	hvd_status_t st = HVD_OK;

	so = malloc(2 * (size_t)n * sizeof(size_t));
	if (!so)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	ro = so + n;
	for (int b = 0; b < n; b++) {
		so[b] = (sdispls ? sdispls[b] : stot) * esz;
		ro[b] = (rdispls ? rdispls[b] : rtot) * esz;
		stot += sendcounts[b];
		rtot += recvcounts[b];
	}
	if (sendcounts[r] != recvcounts[r]) {
		st = hvd_error(HVD_ERR_MISMATCH,
			       "hvd: alltoallv: this rank sends itself %zu "
			       "elements but expects %zu",
			       sendcounts[r], recvcounts[r]);
		goto out;
	}
	/* Alltoall of equal blocks (coll_alltoall's calls) on one node:
	 * through shared memory instead of n-1 transport messages each way;
	 * small ones across even nodes: through the node leaders.  Every
	 * member takes the same path; ones that disagree on the block size
	 * get HVD_ERR_MISMATCH from it.  Not for an alltoallv whose blocks
	 * are equal here: its other members' may not be, and they would
	 * take the pairwise exchange. */
	if (n > 1 && even) {
		struct coll_place p;
		size_t block = recvcounts[0] * esz;

		coll_place_of(comm, &p);
		if (p.shm && p.nodes == 1 && coll_shm(comm)) {
			st = shm_alltoall(coll_shm(comm), sendbuf, recvbuf,
					  block);
			goto out;
		}
		if (block &&
		    coll_select(coll_tuning(), CK_ALLTOALL, block * (size_t)n,
				recvcounts[0] * (size_t)n, &p) == ALGO_HIER &&
		    coll_hier_ready(comm)) {
			if (hvd_log_enabled(HVD_LOG_TRACE))
				hvd_log(HVD_LOG_TRACE,
					"alltoall ctx %u: %zu x %zu B: hier",
					comm->net.ctx, (size_t)n, block);
			st = hier_alltoall(comm, coll_src(sendbuf, recvbuf),
					   recvbuf, block);
			goto out;
		}
	}
	/* In place: the input is in recvbuf and gets overwritten. */
	if (sendbuf == HVD_IN_PLACE || sendbuf == recvbuf) {
		size_t need = 0;

		for (int b = 0; b < n; b++)
			if (so[b] + sendcounts[b] * esz > need)
				need = so[b] + sendcounts[b] * esz;
		copy = malloc(need ? need : 1);
		if (!copy) {
			st = hvd_error(HVD_ERR_NO_MEMORY,
				       "hvd: out of memory");
			goto out;
		}
		if (need) /* every count 0: recvbuf may be NULL */
			memcpy(copy, recvbuf, need);
		sb = copy;
	}
	if (recvcounts[r])
		memmove(rb + ro[r], sb + so[r], recvcounts[r] * esz);
	if (n == 1)
		goto out;
	seg = transport_lane_everywhere() ? ALLTOALL_LANE_PIECE : 0;
	win = step_window();
	xfer_begin(&x, &comm->net);
	for (int s = 1; s < n && x.st == HVD_OK; s++) {
		int to = (r + s) % n, from = (r - s + n) % n;

		if (step_gate(&x, s, win))
			break;
		/* Nothing to move, nothing sent (as OpenMPI's alltoallv):
		 * the engine's gather of requests to rank 0 is an alltoallv
		 * with all other counts 0, p(p-1) empty messages otherwise.
		 * Both sides know a count is 0 when the call is right. */
		if (recvcounts[from])
			post_pieces(&x, from, rb + ro[from],
				    recvcounts[from] * esz, seg, 0);
		if (sendcounts[to])
			post_pieces(&x, to, (char *)sb + so[to],
				    sendcounts[to] * esz, seg, 1);
	}
	st = xfer_end(&x);
out:
	free(copy);
	free(so);
	if (st != HVD_OK)
		return coll_fail(comm, st, "alltoall");
	return HVD_OK;
}

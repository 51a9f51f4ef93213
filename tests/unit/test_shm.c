/*
 * test_shm.c - shared-memory collectives (runtime/coll/shm/shm.c) with real
 * processes: the test forks N members that create one group (barrier
 * through an anonymous shared page, shm_members.h), run every collective
 * for every type and op, in place and not, over counts that hit the edge
 * cases (0, 1, fewer than the members, primes, the small/large threshold,
 * several pipeline rounds), and check each result against an answer
 * computed independently from the inputs every member can regenerate.
 *
 * Inputs are chosen so that every order of reduction gives the same bits:
 * integers wrap (order-free), floats are small integers (exact sums and
 * products).  Also: a member that dies before a collective makes the others
 * return HVD_ERR_PEER_FAILED naming it, and a silent member HVD_ERR_TIMEOUT,
 * both within HOROVOD_PEER_TIMEOUT; one that is away on the network
 * (shm_away) is waited for past that, unless it dies there.
 *
 * A segment someone else made is test_shm_segment.c.
 */
#include "config.h"

#include "comm/comm.h"
#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"
#include "kernels/kernels.h"
#include "shm_members.h"
#include "tap.h"
#include "tools/bench/typed.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const kind_names[NKINDS] = {
    "allreduce", "reduce_scatter",   "allgather_slices",
    "broadcast", "barrier",	     "alltoall"};

/* ----------------------------------------------------- inputs, answer */

static uint32_t hash(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	x ^= x >> 16;
	return x;
}

/* Value of element i of member r's input, as a double (exact). */
static double gen(int r, size_t i, hvd_dtype_t t, uint32_t salt)
{
	uint32_t h =
	    hash((uint32_t)i * 2654435761u ^ (uint32_t)r * 40503u ^ salt);

	switch (t) {
	case HVD_UINT8:
		return h & 255;
	case HVD_INT8:
		return (int8_t)(h & 255);
	case HVD_INT32:
		return (int32_t)h;
	case HVD_INT64:
		return (double)(int32_t)h; /* exact in double */
	default:
		return (double)(int)(h % 7) - 3.0; /* -3..3 */
	}
}

/* The expected value of element i, computed with wrapping integers in
 * 64 bits and exact doubles, then stored in the element type. */
static void expect(void *out, size_t i, int n, hvd_dtype_t t, hvd_op_t op,
		   uint32_t salt)
{
	int is_int =
	    t == HVD_UINT8 || t == HVD_INT8 || t == HVD_INT32 || t == HVD_INT64;
	uint64_t ai = 0;
	double af = 0;

	for (int r = 0; r < n; r++) {
		double v = gen(r, i, t, salt);
		uint64_t vi = (uint64_t)(int64_t)v;

		if (r == 0) {
			ai = vi;
			af = v;
			continue;
		}
		switch (op) {
		case HVD_SUM:
		case HVD_AVERAGE:
			ai += vi;
			af += v;
			break;
		case HVD_PRODUCT:
			ai *= vi;
			af *= v;
			break;
		case HVD_MIN:
			af = v < af ? v : af;
			break;
		case HVD_MAX:
			af = v > af ? v : af;
			break;
		default:
			break;
		}
	}
	if (is_int && (op == HVD_MIN || op == HVD_MAX))
		ai = (uint64_t)(int64_t)af;
	if (is_int) {
		switch (t) {
		case HVD_UINT8:
			((uint8_t *)out)[i] = (uint8_t)ai;
			break;
		case HVD_INT8:
			((uint8_t *)out)[i] = (uint8_t)ai;
			break;
		case HVD_INT32:
			((uint32_t *)out)[i] = (uint32_t)ai;
			break;
		default:
			((uint64_t *)out)[i] = ai;
			break;
		}
	} else {
		typed_put(out, i, t, af);
	}
}

static long compare(const void *got, const void *want, size_t first, size_t n,
		    size_t es)
{
	long bad = 0;

	for (size_t i = first; i < first + n; i++)
		if (memcmp((const char *)got + i * es,
			   (const char *)want + i * es, es) != 0)
			bad++;
	return bad;
}

/* ------------------------------------------------------------ member */

static const size_t counts[] = {0,   1,	  2,   3,    5,	   13,	  97,
				255, 256, 257, 1021, 4099, 20011, 65537};

static void run_member(int me, int n, const char *key, int big)
{
	shm_group_t *g;
	size_t maxc = big ? ((size_t)1 << 20) + 3 : 65537;
	char *send = malloc(maxc * 8 + 64), *recv = malloc(maxc * 8 + 64);
	char *want = malloc(maxc * 8 + 64);
	char *want_avg = malloc(maxc * 8 + 64);
	hvd_status_t st;
	struct member m = {me, n};

	st = shm_group_create(key, me, n, test_barrier, test_bcast, &m, &g);
	if (st != HVD_OK) {
		note(me, "create: %s", hvd_last_error());
		sh->status[me] = st;
		_exit(1);
	}
	for (int t = 0; t < HVD_DTYPE_COUNT; t++) {
		size_t es = hvd_dtype_size((hvd_dtype_t)t);

		for (int op = 0; op < HVD_OP_COUNT; op++) {
			for (size_t ci = 0;
			     ci < sizeof(counts) / sizeof(counts[0]) + 2;
			     ci++) {
				size_t c =
				    ci < sizeof(counts) / sizeof(counts[0])
					? counts[ci]
					: (ci % 2 ? maxc : maxc / 3 + 1);
				uint32_t salt =
				    (uint32_t)(t * 131 + op * 7 + ci);

				if (ci >= sizeof(counts) / sizeof(counts[0]) &&
				    !big)
					continue;
				/* the big counts for a few type/op pairs */
				if (big && (t + op) % 4 != 0)
					continue;
				for (int ip = 0; ip < 2; ip++) {
					long bad;
					size_t off, cnt;

					for (size_t i = 0; i < c; i++) {
						typed_put(
						    send, i, (hvd_dtype_t)t,
						    gen(me, i, (hvd_dtype_t)t,
							salt));
						expect(want, i, n,
						       (hvd_dtype_t)t,
						       (hvd_op_t)op, salt);
					}
					/* allreduce */
					if (ip)
						memcpy(recv, send, c * es);
					else
						memset(recv, 0x5a, c * es);
					st = shm_allreduce(
					    g, ip ? HVD_IN_PLACE : send, recv,
					    c, (hvd_dtype_t)t, (hvd_op_t)op,
					    op == HVD_AVERAGE ? 1.0 / n : 1.0);
					/* AVERAGE: the sum scaled by 1/n, as
					 * the end pass of coll_allreduce did
					 * before shm fused it in */
					memcpy(want_avg, want, c * es);
					if (op == HVD_AVERAGE)
						reduce_scale(want_avg, c,
							     (hvd_dtype_t)t,
							     1.0 / n);
					bad =
					    st ? (long)c + 1
					       : compare(recv, want_avg, 0, c,
							 es);
					if (bad)
						note(me,
						     "allreduce %s %s count "
						     "%zu %s: %ld wrong (%s)",
						     hvd_dtype_name(t),
						     hvd_op_name(op), c,
						     ip ? "in place" : "", bad,
						     hvd_last_error());
					sh->wrong[me][0] += bad;
					sh->checked[me][0] += (long)c;

					/* reduce-scatter */
					off =
					    hvd_reducescatter_offset(c, me, n);
					cnt = hvd_reducescatter_count(c, me, n);
					if (ip)
						memcpy(recv, send, c * es);
					else
						memset(recv, 0x5a, c * es);
					st = shm_reduce_scatter(
					    g, ip ? HVD_IN_PLACE : send, recv,
					    c, (hvd_dtype_t)t, (hvd_op_t)op);
					bad = st ? (long)cnt + 1
						 : compare(recv, want, off, cnt,
							   es);
					if (bad)
						note(
						    me,
						    "reduce_scatter %s %s "
						    "count %zu: %ld wrong (%s)",
						    hvd_dtype_name(t),
						    hvd_op_name(op), c, bad,
						    hvd_last_error());
					sh->wrong[me][1] += bad;
					sh->checked[me][1] += (long)cnt;

					/* the slice-only variant: the result
					 * at the start of a slice-sized
					 * buffer (out of place only) */
					if (!ip) {
						memset(recv, 0x5a, c * es);
						st = shm_reduce_scatter_slice(
						    g, send, recv, c,
						    (hvd_dtype_t)t,
						    (hvd_op_t)op);
						bad = st ? (long)cnt + 1
							 : compare(recv,
								   want +
								       off * es,
								   0, cnt, es);
						if (bad)
							note(
							    me,
							    "reduce_scatter_"
							    "slice %s %s count "
							    "%zu: %ld wrong "
							    "(%s)",
							    hvd_dtype_name(t),
							    hvd_op_name(op), c,
							    bad,
							    hvd_last_error());
						sh->wrong[me][1] += bad;
						sh->checked[me][1] += (long)cnt;
					}
					if (op != HVD_SUM)
						continue;

					/* allgather of the slices: start
					 * from only my slice being right */
					memset(recv, 0x5a, c * es);
					memcpy(recv + off * es, send + off * es,
					       cnt * es);
					st = shm_allgather_slices(
					    g, recv, c, (hvd_dtype_t)t);
					/* member r's slice holds r's input */
					for (int r = 0; r < n; r++) {
						size_t o =
						    hvd_reducescatter_offset(
							c, r, n);
						size_t k =
						    hvd_reducescatter_count(
							c, r, n);

						for (size_t i = o; i < o + k;
						     i++)
							typed_put(
							    want, i,
							    (hvd_dtype_t)t,
							    gen(r, i,
								(hvd_dtype_t)t,
								salt));
					}
					bad =
					    st ? (long)c + 1
					       : compare(recv, want, 0, c, es);
					if (bad)
						note(me,
						     "allgather %s count %zu: "
						     "%ld wrong (%s)",
						     hvd_dtype_name(t), c, bad,
						     hvd_last_error());
					sh->wrong[me][2] += bad;
					sh->checked[me][2] += (long)c;

					/* broadcast from root ci % n */
					{
						int root =
						    (int)(ci % (size_t)n);

						if (me == root)
							memcpy(recv, send,
							       c * es);
						else
							memset(recv, 0x5a,
							       c * es);
						st = shm_broadcast(
						    g, recv, c * es, root);
						for (size_t i = 0; i < c; i++)
							typed_put(
							    want, i,
							    (hvd_dtype_t)t,
							    gen(root, i,
								(hvd_dtype_t)t,
								salt));
						bad = st ? (long)c + 1
							 : compare(recv, want,
								   0, c, es);
						if (bad)
							note(me,
							     "broadcast root "
							     "%d %zu bytes: "
							     "%ld wrong (%s)",
							     root, c * es, bad,
							     hvd_last_error());
						sh->wrong[me][3] += bad;
						sh->checked[me][3] += (long)c;
					}
					st = shm_barrier(g);
					if (st)
						note(me, "barrier: %s",
						     hvd_last_error());
					sh->wrong[me][4] += st != HVD_OK;
					sh->checked[me][4]++;
				}
			}
		}
	}
	/* alltoall of equal blocks: block q of member p's input is byte
	 * pattern (p, q, i); member me must end with (q, me, i) in its
	 * block q.  Blocks from 1 byte to the largest that fits the small
	 * buffers, then larger ones through the pipeline buffers (up to as
	 * large as the buffers here allow: many steps with the big counts
	 * and with tiny pipeline buffers) */
	{
		size_t maxb = shm_alltoall_small_max(g);
		size_t most = maxc * 8 / (size_t)n;
		size_t blocks[] = {1, 3, 8, 13, 40, 333, maxb, maxb + 1,
				   70001, most};

		for (size_t bi = 0; bi < sizeof(blocks) / sizeof(*blocks);
		     bi++) {
			size_t bs = blocks[bi] > most ? most : blocks[bi];

			for (int ip = 0; ip < 2; ip++) {
				unsigned char *in = (unsigned char *)(ip ? recv : send);
				unsigned char *out = (unsigned char *)recv;
				long bad = 0;

				for (int q = 0; q < n; q++)
					for (size_t i = 0; i < bs; i++)
						in[(size_t)q * bs + i] =
						    (unsigned char)(me * 31 +
								    q * 7 + i);
				if (!ip)
					memset(recv, 0x5a, (size_t)n * bs);
				st = shm_alltoall(
				    g, ip ? HVD_IN_PLACE : send, recv, bs);
				for (int q = 0; q < n && !st; q++)
					for (size_t i = 0; i < bs; i++)
						bad += out[(size_t)q * bs +
							   i] !=
						       (unsigned char)(q * 31 +
								       me * 7 +
								       i);
				if (st)
					bad = (long)bs * n + 1;
				if (bad)
					note(me,
					     "alltoall %zu-byte blocks%s: "
					     "%ld wrong (%s)",
					     bs, ip ? " in place" : "", bad,
					     hvd_last_error());
				sh->wrong[me][5] += bad;
				sh->checked[me][5] += (long)bs * n;
			}
		}
		/* members that disagree on the block size all get an error
		 * (no exchange of garbage): both small, one small and one
		 * inline-sized, one small and one large, both large */
		if (n > 1) {
			size_t pairs[][2] = {{4, 8},
					     {1, 40},
					     {8, maxb + 1},
					     {maxb + 1, maxb + 64}};

			for (int pi = 0; pi < 4; pi++) {
				st = shm_alltoall(g, send, recv,
						  pairs[pi][me == 0 ? 0 : 1]);
				if (st != HVD_ERR_MISMATCH) {
					note(me,
					     "alltoall with mismatched blocks "
					     "%zu/%zu: status %d, want "
					     "HVD_ERR_MISMATCH",
					     pairs[pi][0], pairs[pi][1],
					     (int)st);
					sh->wrong[me][5]++;
				}
				/* the group is still usable afterwards */
				st = shm_barrier(g);
				sh->wrong[me][5] += st != HVD_OK;
			}
		}
	}
	shm_group_destroy(g);
	free(send);
	free(recv);
	free(want);
	free(want_avg);
	_exit(0);
}

/* Fork n members running fn; returns 0 when all exited 0. */
static int run_group(int n, int big, const char *tag)
{
	pid_t pids[MAXN];
	char key[128];
	int ok_all = 1;

	memset(sh, 0, sizeof(*sh));
	snprintf(key, sizeof(key), "test-shm-%d-%s", (int)getpid(), tag);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(240);
			run_member(r, n, key, big);
		}
	}
	for (int r = 0; r < n; r++) {
		int ws;

		waitpid(pids[r], &ws, 0);
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
			ok_all = 0;
			diag("member %d of %d: %s %d", r, n,
			     WIFSIGNALED(ws) ? "killed by signal"
					     : "exit status",
			     WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
		}
		if (sh->msg[r][0])
			diag("member %d: %s", r, sh->msg[r]);
	}
	return ok_all;
}

static void check_group(int n, int big, const char *tag)
{
	int fine = run_group(n, big, tag);

	for (int k = 0; k < NKINDS; k++) {
		long wrong = 0, checked = 0;

		for (int r = 0; r < n; r++) {
			wrong += sh->wrong[r][k];
			checked += sh->checked[r][k];
		}
		ok(fine && wrong == 0 && checked > 0,
		   "%d member%s, %s: %s (%ld elements checked, %ld wrong)", n,
		   n > 1 ? "s" : "", tag, kind_names[k], checked, wrong);
	}
}

/* ---------------------------------------------- failure detection */

static void failing_member(int me, int n, const char *key, int mode)
{
	shm_group_t *g;
	hvd_status_t st;
	struct member m = {me, n};
	float x[4] = {1, 2, 3, 4}, y[4];
	double t0;

	st = shm_group_create(key, me, n, test_barrier, test_bcast, &m, &g);
	if (st != HVD_OK)
		_exit(2);
	t0 = hvd_now();
	if (me == n - 1) {
		if (mode == 0)
			_exit(0); /* dies without taking part */
		if (mode == 1) {
			sleep(4); /* alive but silent */
			_exit(0);
		}
		/* away on the network for twice the timeout, then back
		 * (mode 2), or dying there (mode 3) */
		shm_away(g, 1);
		sleep(mode == 2 ? 4 : 3);
		if (mode == 3)
			_exit(0);
		shm_away(g, 0);
	}
	st = shm_allreduce(g, x, y, 4, HVD_FLOAT32, HVD_SUM, 1.0);
	sh->status[me] = st;
	snprintf(sh->msg[me], sizeof(sh->msg[me]), "%.1f s: %s", hvd_now() - t0,
		 st == HVD_OK ? "ok" : hvd_last_error());
	if (mode == 2) {
		/* every member took part: the sum, and the group usable */
		for (int i = 0; i < 4; i++)
			if (y[i] != (float)n * x[i])
				sh->status[me] = -2;
		if (shm_barrier(g) != HVD_OK)
			sh->status[me] = -3;
		_exit(0);
	}
	/* the group stays failed */
	st = shm_barrier(g);
	if (st == HVD_OK)
		sh->status[me] = -1;
	_exit(0);
}

static void check_failure(int mode)
{
	const int n = 3;
	pid_t pids[MAXN];
	char key[128], want[64];
	int all = 1;

	memset(sh, 0, sizeof(*sh));
	snprintf(key, sizeof(key), "test-shm-%d-fail%d", (int)getpid(), mode);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(60);
			failing_member(r, n, key, mode);
		}
	}
	/* reap the members that succeed or fail; the dying one stays a
	 * zombie until its peers noticed, as under a slow launcher */
	for (int r = 0; r < n - 1; r++)
		waitpid(pids[r], NULL, 0);
	waitpid(pids[n - 1], NULL, 0);
	if (mode == 2) {
		/* the others waited for it, past their timeout of 2 s */
		for (int r = 0; r < n; r++)
			if (sh->status[r] != HVD_OK ||
			    (r < n - 1 && atof(sh->msg[r]) < 3.5)) {
				all = 0;
				diag("member %d: status %d, %s", r,
				     sh->status[r], sh->msg[r]);
			}
		ok(all, "a member away on the network for 4 s (timeout "
			"2 s): the others wait for it, the sum is right, "
			"the group usable after (%s)",
		   sh->msg[0]);
		return;
	}
	snprintf(want, sizeof(want), "local rank %d", n - 1);
	for (int r = 0; r < n - 1; r++) {
		hvd_status_t expect_st =
		    mode == 1 ? HVD_ERR_TIMEOUT : HVD_ERR_PEER_FAILED;

		if (sh->status[r] != (int)expect_st ||
		    !strstr(sh->msg[r], want)) {
			all = 0;
			diag("member %d: status %d, %s", r, sh->status[r],
			     sh->msg[r]);
		}
	}
	ok(all, "%s: survivors get %s naming local rank %d (%s)",
	   mode == 0   ? "a member exits"
	   : mode == 1 ? "a member stays silent"
		       : "a member exits while away on the network",
	   mode == 1 ? "HVD_ERR_TIMEOUT" : "HVD_ERR_PEER_FAILED", n - 1,
	   sh->msg[0]);
}

int main(void)
{
	shared_map();
	plan(6 * 9 + 4);

	/* small pipeline buffers so that modest counts take many rounds;
	 * HOROVOD_SHM_NBUF=2 is the tightest buffer reuse */
	setenv("HOROVOD_SHM_CHUNK", "4K", 1);
	setenv("HOROVOD_SHM_SMALL", "1K", 1);
	setenv("HOROVOD_SHM_NBUF", "2", 1);
	check_group(1, 0, "tiny buffers");
	check_group(2, 0, "tiny buffers");
	check_group(3, 0, "tiny buffers");
	setenv("HOROVOD_SHM_NBUF", "3", 1);
	check_group(4, 0, "tiny buffers");
	/* data for peers streamed past the caches (HOROVOD_SHM_SHARE=auto
	 * picks between the two ways as it measures) */
	setenv("HOROVOD_SHM_SHARE", "stream", 1);
	check_group(3, 0, "tiny buffers, streamed sharing");
	unsetenv("HOROVOD_SHM_CHUNK");
	unsetenv("HOROVOD_SHM_SMALL");
	unsetenv("HOROVOD_SHM_NBUF");
	check_group(2, 0, "defaults, streamed sharing");
	unsetenv("HOROVOD_SHM_SHARE");
	check_group(2, 0, "defaults");
	check_group(3, 0, "defaults");
	/* outputs from 1 MiB streamed (non-temporal stores) */
	setenv("HOROVOD_SHM_STREAM", "1M", 1);
	check_group(2, 1, "1M elements, streamed outputs");
	unsetenv("HOROVOD_SHM_STREAM");

	setenv("HOROVOD_PEER_TIMEOUT", "2", 1);
	check_failure(0);
	check_failure(1);
	check_failure(2);
	check_failure(3);
	return done_testing();
}

/*
 * test_shm.c - shared-memory collectives (runtime/coll/shm/shm.c) with real
 * processes: the test forks N members that create one group (barrier
 * through an anonymous shared page), run every collective for every type
 * and op, in place and not, over counts that hit the edge cases (0, 1,
 * fewer than the members, primes, the small/large threshold, several
 * pipeline rounds), and check each result against an answer computed
 * independently from the inputs every member can regenerate.
 *
 * Inputs are chosen so that every order of reduction gives the same bits:
 * integers wrap (order-free), floats are small integers (exact sums and
 * products).  Also: a member that dies before a collective makes the others
 * return HVD_ERR_PEER_FAILED naming it, and a silent member HVD_ERR_TIMEOUT,
 * both within HOROVOD_PEER_TIMEOUT.
 *
 * And a segment someone else made: the members' checks of a segment's file
 * and header (shm_segment_check) against crafted headers, modes, sizes and
 * owners, and, as root, another user (nobody) pre-creating the name a
 * victim's group used to get, with a header whose layout goes past the
 * file (the members used to map it and crash).
 */
#include "config.h"

#include "comm/comm.h"
#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"
#include "kernels/kernels.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXN 8
#define NKINDS 6
static const char *const kind_names[NKINDS] = {
    "allreduce", "reduce_scatter",   "allgather_slices",
    "broadcast", "barrier",	     "alltoall"};

struct shared {
	uint64_t barrier;
	unsigned char bcast[64];
	int n;
	long wrong[MAXN][NKINDS];
	long checked[MAXN][NKINDS];
	int status[MAXN];
	char msg[MAXN][256];
};

static struct shared *sh;

/* The set-up callbacks' argument: the member's place in the group. */
struct member {
	int me, n;
};

static hvd_status_t test_barrier(void *arg)
{
	int n = ((struct member *)arg)->n;
	uint64_t t = __atomic_fetch_add(&sh->barrier, 1, __ATOMIC_ACQ_REL);
	uint64_t target = (t / (uint64_t)n + 1) * (uint64_t)n;

	while (__atomic_load_n(&sh->barrier, __ATOMIC_ACQUIRE) < target)
		sched_yield();
	return HVD_OK;
}

static hvd_status_t test_bcast(void *arg, void *buf, size_t bytes)
{
	struct member *m = arg;

	if (bytes > sizeof(sh->bcast))
		return hvd_error(HVD_ERR_INVALID_ARG, "test_bcast: %zu bytes",
				 bytes);
	if (m->me == 0)
		memcpy(sh->bcast, buf, bytes);
	test_barrier(arg);
	if (m->me != 0)
		memcpy(buf, sh->bcast, bytes);
	test_barrier(arg);
	return HVD_OK;
}

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

static void put(void *buf, size_t i, hvd_dtype_t t, double v)
{
	switch (t) {
	case HVD_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)(uint32_t)(int64_t)v;
		break;
	case HVD_INT8:
		((int8_t *)buf)[i] = (int8_t)(int64_t)v;
		break;
	case HVD_INT32:
		((int32_t *)buf)[i] = (int32_t)(int64_t)v;
		break;
	case HVD_INT64:
		((int64_t *)buf)[i] = (int64_t)v;
		break;
	case HVD_FLOAT16:
		((uint16_t *)buf)[i] = hvd_float_to_half((float)v);
		break;
	case HVD_BFLOAT16:
		((uint16_t *)buf)[i] = hvd_float_to_bf16((float)v);
		break;
	case HVD_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	case HVD_FLOAT64:
		((double *)buf)[i] = v;
		break;
	default:
		break;
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
		put(out, i, t, af);
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

static void note(int me, const char *fmt, ...) HVD_PRINTF(2, 3);

static void note(int me, const char *fmt, ...)
{
	va_list ap;

	if (sh->msg[me][0])
		return;
	va_start(ap, fmt);
	vsnprintf(sh->msg[me], sizeof(sh->msg[me]), fmt, ap);
	va_end(ap);
}

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
						put(send, i, (hvd_dtype_t)t,
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
							put(want, i,
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
							put(want, i,
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
	if (me == n - 1) {
		if (mode == 0)
			_exit(0); /* dies without taking part */
		sleep(4);	  /* alive but silent */
		_exit(0);
	}
	t0 = hvd_now();
	st = shm_allreduce(g, x, y, 4, HVD_FLOAT32, HVD_SUM, 1.0);
	sh->status[me] = st;
	snprintf(sh->msg[me], sizeof(sh->msg[me]), "%.1f s: %s", hvd_now() - t0,
		 hvd_last_error());
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
	snprintf(want, sizeof(want), "local rank %d", n - 1);
	for (int r = 0; r < n - 1; r++) {
		hvd_status_t expect_st =
		    mode == 0 ? HVD_ERR_PEER_FAILED : HVD_ERR_TIMEOUT;

		if (sh->status[r] != (int)expect_st ||
		    !strstr(sh->msg[r], want)) {
			all = 0;
			diag("member %d: status %d, %s", r, sh->status[r],
			     sh->msg[r]);
		}
	}
	ok(all, "%s: survivors get %s naming local rank %d (%s)",
	   mode == 0 ? "a member exits" : "a member stays silent",
	   mode == 0 ? "HVD_ERR_PEER_FAILED" : "HVD_ERR_TIMEOUT", n - 1,
	   sh->msg[0]);
}

/* ------------------------------------- a segment made by someone else */

/* Every header the creator makes passes the members' check: the two
 * bounds agree, for knob values far outside the usual ones too. */
static void check_params_accepted(void)
{
	static const int ns[] = {1, 2, 3, 7, 64, 1000};
	static const long nbufs[] = {-1, 0, 2, 4, 64, 1000};
	static const size_t chunks[] = {0, 1, 4096, 1 << 20, (size_t)1 << 40,
					SIZE_MAX};
	static const size_t smalls[] = {0, 1, 32 << 10, (size_t)1 << 40};
	int bad = 0, total = 0;
	char why[200];

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (size_t b = 0; b < sizeof(nbufs) / sizeof(nbufs[0]); b++)
			for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]);
			     c++)
				for (size_t d = 0;
				     d < sizeof(smalls) / sizeof(smalls[0]);
				     d++) {
					struct shm_header h;

					shm_params(ns[a], nbufs[b], chunks[c],
						   smalls[d], &h);
					h.magic = SHM_MAGIC;
					total++;
					if (shm_header_check(&h, ns[a], why,
							     sizeof(why))) {
						if (!bad++)
							diag("n %d nbuf %ld chunk "
							     "%zu small %zu: %s",
							     ns[a], nbufs[b],
							     chunks[c],
							     smalls[d], why);
					}
				}
	ok(bad == 0, "every header the creator makes passes the check (%d of "
		     "%d refused)", bad, total);
}

/* Headers another user could write: each one is refused. */
static const char *const crafted[] = {
    "no magic",
    "another member count",
    "member count 0",
    "1 pipeline buffer",
    "65 pipeline buffers",
    "2^32-1 pipeline buffers",
    "chunk 0",
    "chunk not a multiple of 64 n",
    "chunk 1 GiB (pipeline past the segment limit)",
    "chunk 2^63 (sizes overflow)",
    "small 16 MiB + 64",
    "small not a multiple of 64",
    "small 2^62 (sizes overflow)",
    "size one byte short",
    "size 8 KiB (the layout goes past it)",
    "size 2^63",
};

static void craft(struct shm_header *x, int i)
{
	switch (i) {
	case 0: x->magic = 0; break;
	case 1: x->n = 3; break;
	case 2: x->n = 0; break;
	case 3: x->nbuf = 1; break;
	case 4: x->nbuf = 65; break;
	case 5: x->nbuf = UINT32_MAX; break;
	case 6: x->chunk = 0; break;
	case 7: x->chunk += 64; break;
	case 8: x->chunk = 1ull << 30; break;
	case 9: x->chunk = 1ull << 63; break;
	case 10: x->small_max = (16u << 20) + 64; break;
	case 11: x->small_max = 1000; break;
	case 12: x->small_max = 1ull << 62; break;
	case 13: x->size -= 1; break;
	case 14: x->size = 8192; break;
	default: x->size = 1ull << 63; break;
	}
}

static void check_crafted_headers(void)
{
	const int ncases = (int)(sizeof(crafted) / sizeof(crafted[0]));
	struct shm_header good, h;
	char why[200];
	int refused = 0;

	shm_params(2, 4, 1 << 20, 32 << 10, &good);
	good.magic = SHM_MAGIC;
	ok(shm_header_check(&good, 2, why, sizeof(why)) == 0,
	   "the default header of 2 members passes");
	for (int i = 0; i < ncases; i++) {
		h = good;
		craft(&h, i);
		if (shm_header_check(&h, 2, why, sizeof(why)) != 0)
			refused++;
		else
			diag("accepted: %s", crafted[i]);
	}
	ok(refused == ncases, "%d crafted headers refused, of %d (last: %s)",
	   refused, ncases, why);
}

static int segment_ok(int fd, const char *what, int want_ok)
{
	struct shm_header h;
	char why[200] = "";
	int r = shm_segment_check(fd, 2, &h, why, sizeof(why));

	if ((r == 0) != want_ok)
		diag("%s: %s", what, r == 0 ? "accepted" : why);
	return (r == 0) == want_ok;
}

/* The file itself: owner, mode, type and size. */
static void check_segment_files(void)
{
	struct shm_header h;
	char name[96];
	int fd, p[2];
	int fine = 1;

	shm_params(2, 4, 64 << 10, 4 << 10, &h);
	h.magic = SHM_MAGIC;
	snprintf(name, sizeof(name), "/hvd-test-shm-%d-check", (int)getpid());
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0) {
		ok(0, "shm_open(%s): %s", name, strerror(errno));
		ok(0, "(skipped)");
		ok(0, "(skipped)");
		ok(0, "(skipped)");
		return;
	}
	shm_unlink(name);
	fchmod(fd, 0600);
	if (ftruncate(fd, (off_t)h.size) != 0 ||
	    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		fine = 0;
	ok(fine && segment_ok(fd, "a file of ours, 0600", 1),
	   "a segment of this uid with mode 0600 and the layout's size passes");

	fine = 1;
	fchmod(fd, 0666);
	fine &= segment_ok(fd, "mode 0666", 0);
	fchmod(fd, 0640);
	fine &= segment_ok(fd, "mode 0640", 0);
	fchmod(fd, 0400);
	fine &= segment_ok(fd, "mode 0400", 0);
	fchmod(fd, 04600);
	fine &= segment_ok(fd, "mode 04600", 0);
	fchmod(fd, 0600);
	ok(fine, "modes 0666, 0640, 0400 and 04600 refused");

	fine = 1;
	fine &= ftruncate(fd, (off_t)h.size + 4096) == 0 &&
		segment_ok(fd, "a page longer than the header says", 0);
	fine &= ftruncate(fd, (off_t)h.size - 4096) == 0 &&
		segment_ok(fd, "a page shorter than the header says", 0);
	fine &= ftruncate(fd, 16) == 0 &&
		segment_ok(fd, "shorter than a header", 0);
	fine &= pipe(p) == 0 && segment_ok(p[0], "a pipe", 0);
	close(p[0]);
	close(p[1]);
	ok(fine, "a size other than the header's, a short file and a pipe "
		 "refused");

	if (ftruncate(fd, (off_t)h.size) != 0 ||
	    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		ok(0, "cannot restore the test segment");
	} else if (geteuid() != 0) {
		ok(1, "# SKIP another owner: needs root to chown");
	} else {
		ok(fchown(fd, 65534, 65534) == 0 &&
			   segment_ok(fd, "owned by nobody", 0),
		   "a segment owned by another user (nobody) refused");
	}
	close(fd);
}

#define VICTIM_UID 4242

/* A victim member (uid VICTIM_UID): set up with key, run allreduces of a
 * few sizes, check the results; exit status 0 when all were right. */
static void victim_member(int me, int n, const char *key)
{
	struct member m = {me, n};
	shm_group_t *g;
	hvd_status_t st;
	static float x[1 << 18], y[1 << 18];
	static const size_t sizes[] = {1, 100, 1 << 12, 1 << 18};
	long bad = 0;

	if (setgroups(0, NULL) || setgid(VICTIM_UID) || setuid(VICTIM_UID))
		_exit(3);
	st = shm_group_create(key, me, n, test_barrier, test_bcast, &m, &g);
	sh->status[me] = st;
	if (st != HVD_OK)
		note(me, "create: %s", hvd_last_error());
	/* as coll_topo.c: everyone or no one uses the group */
	test_barrier(&m);
	for (int r = 0; r < n; r++) {
		if (sh->status[r] == HVD_OK)
			continue;
		if (st == HVD_OK) {
			note(me, "made, but not on member %d: destroying it",
			     r);
			shm_group_destroy(g);
		}
		_exit(1);
	}
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (size_t i = 0; i < sizes[k]; i++)
			x[i] = (float)((int)(i % 13) + me);
		st = shm_allreduce(g, x, y, sizes[k], HVD_FLOAT32, HVD_SUM,
				   1.0);
		for (size_t i = 0; i < sizes[k]; i++)
			bad += st != HVD_OK ||
			       y[i] != (float)(n * (int)(i % 13) +
					       n * (n - 1) / 2);
		sh->checked[me][0] += (long)sizes[k];
	}
	sh->wrong[me][0] = bad;
	if (bad)
		note(me, "%ld wrong (%s)", bad, hvd_last_error());
	shm_group_destroy(g);
	_exit(bad ? 1 : 0);
}

/* Another user (nobody) creates the name the segment of a victim's group
 * used to have, "/hvd-<uid>-<key>", before the group is made, mode 0666,
 * with a header whose layout goes far past the file.  Before the name had
 * random bits, local rank 0 could not create it (nor, in sticky /dev/shm,
 * remove it), the others attached the attacker's file, took its layout
 * and crashed writing past the mapping (or unmapped what the header
 * said).  Now the members never open that name and compute right
 * results; the attacker's file is left as it was. */
static void check_attack(void)
{
	const int n = 2;
	char key[96], old_name[160];
	struct shm_header h;
	pid_t pids[MAXN], a;
	int ws, fine = 1, fd;
	long checked = 0, wrong = 0;
	struct stat sb;

	if (geteuid() != 0) {
		ok(1, "# SKIP attack by another user: needs root to run as "
		      "nobody and uid %d",
		   VICTIM_UID);
		return;
	}
	memset(sh, 0, sizeof(*sh));
	snprintf(key, sizeof(key), "test-shm-%d-attack", (int)getpid());
	snprintf(old_name, sizeof(old_name), "/hvd-%d-%s", VICTIM_UID, key);
	a = fork();
	if (a == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(3);
		fd = shm_open(old_name, O_CREAT | O_EXCL | O_RDWR, 0666);
		if (fd < 0)
			_exit(4);
		memset(&h, 0, sizeof(h));
		h.magic = SHM_MAGIC;
		h.n = (uint32_t)n;
		h.nbuf = 64;
		h.chunk = 1ull << 30;
		h.small_max = 1ull << 30;
		h.size = 8192; /* = the file's size: the old check */
		h.attached = 1; /* so that the other member's count adds up */
		if (fchmod(fd, 0666) || ftruncate(fd, 8192) ||
		    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			_exit(5);
		_exit(0);
	}
	waitpid(a, &ws, 0);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		ok(0, "the attacker (nobody) could not create /dev/shm%s "
		      "(status %d)",
		   old_name, ws);
		shm_unlink(old_name);
		return;
	}
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(60);
			victim_member(r, n, key);
		}
	}
	for (int r = 0; r < n; r++) {
		waitpid(pids[r], &ws, 0);
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
			fine = 0;
			diag("victim member %d: %s %d", r,
			     WIFSIGNALED(ws) ? "killed by signal"
					     : "exit status",
			     WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
		}
		if (sh->msg[r][0])
			diag("victim member %d: %s", r, sh->msg[r]);
		checked += sh->checked[r][0];
		wrong += sh->wrong[r][0];
	}
	ok(fine && checked > 0 && wrong == 0,
	   "a segment name pre-created by nobody (mode 0666, a header past "
	   "the file): the group is made elsewhere, results right (%ld "
	   "checked, %ld wrong)",
	   checked, wrong);
	fd = shm_open(old_name, O_RDONLY, 0);
	ok(fd >= 0 && fstat(fd, &sb) == 0 && sb.st_uid == 65534 &&
		   sb.st_size == 8192 && (sb.st_mode & 0777) == 0666,
	   "the attacker's file is left alone");
	if (fd >= 0)
		close(fd);
	shm_unlink(old_name);
}

int main(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		skip_all("cannot map shared memory: %s", strerror(errno));
	if (access("/dev/shm", W_OK) != 0)
		skip_all("/dev/shm is not writable: POSIX shared memory is "
			 "unavailable here");
	plan(6 * 9 + 2 + 3 + 4 + 2);

	check_params_accepted();
	check_crafted_headers();
	check_segment_files();
	check_attack();

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
	return done_testing();
}

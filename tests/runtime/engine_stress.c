/*
 * engine_stress - many threads submitting random async ops.
 *
 *   engine_stress [THREADS [OPS [WINDOW]]]     (default 8 1000 16)
 *
 * Every rank draws the same random ops (name, kind, type, count, reduction,
 * root, scale factors, fp16 compression) from a per-thread seed, then
 * submits each window of WINDOW ops in a rank-dependent order: the engine
 * must agree on them whatever the order, fuse what it can and produce
 * exact results (inputs are small integers, exact in every type).  Prints
 * TAP from rank 0; every rank checks its own results.
 */
#include "hvd.h"
#include "tap.h"
#include "tools/bench/typed.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, nthreads = 8, nops = 1000, window = 16;
static int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

static double val(int r, size_t i, int salt)
{
	return (double)((r * 3 + (int)i + salt) % 10);
}

static int is_float(hvd_dtype_t t)
{
	return t == HVD_FLOAT16 || t == HVD_BFLOAT16 || t == HVD_FLOAT32 ||
	       t == HVD_FLOAT64;
}

/* ---- one random op */

struct op {
	char name[64];
	int kind; /* 0 allreduce 1 allgather 2 broadcast 3 alltoall 4 rs */
	hvd_dtype_t t;
	hvd_op_t red;
	size_t count; /* this rank's */
	int root, salt, inplace;
	double pre, post;
	int fp16;
	void *send, *recv;
	hvd_handle_t h;
};

static size_t count_of(unsigned *seed, int kind)
{
	int k = rand_r(seed) % 20;

	(void)kind;
	if (k == 0)
		return 0;
	if (k < 14)
		return 1 + (size_t)(rand_r(seed) % 300);
	if (k < 19)
		return 300 + (size_t)(rand_r(seed) % 5000);
	return 20000 + (size_t)(rand_r(seed) % 60000);
}

/* Names repeat (every NAMES ops) and each parameter set is used twice in
 * a row, so the run mixes cache misses, hits and invalidations. */
static void draw(struct op *o, int thread, int i)
{
	int names = nops / 5 > window ? nops / 5 : window;
	int id = i % names, gen = i / names / 2;
	unsigned s = 1234u + (unsigned)thread * 7919u + (unsigned)id * 104729u +
		     (unsigned)gen * 15485863u;
	unsigned *seed = &s;

	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "t%d/op%d", thread, id);
	o->kind = rand_r(seed) % 10;
	o->kind = o->kind < 6 ? 0 : o->kind - 5; /* mostly allreduce */
	if (o->kind > 4)
		o->kind = 4;
	o->t = (hvd_dtype_t)(rand_r(seed) % HVD_DTYPE_COUNT);
	o->salt = rand_r(seed) % 10;
	o->count = count_of(seed, o->kind);
	o->pre = o->post = 1.0;
	switch (rand_r(seed) % 4) {
	case 0:
		o->red = HVD_MIN;
		break;
	case 1:
		o->red = HVD_MAX;
		break;
	default:
		o->red = HVD_SUM;
		break;
	}
	if (is_float(o->t) && rand_r(seed) % 3 == 0)
		o->red = HVD_AVERAGE;
	if (is_float(o->t) && o->red == HVD_SUM && rand_r(seed) % 4 == 0) {
		o->pre = 2.0;
		o->post = 0.5 * (rand_r(seed) % 2 + 1);
	}
	o->fp16 = o->t == HVD_FLOAT32 && rand_r(seed) % 4 == 0;
	o->inplace = rand_r(seed) % 3 == 0;
	o->root = rand_r(seed) % size;
	if (o->kind == 1) /* allgather: counts differ per rank */
		o->count = (o->count / 4) + (size_t)rank;
}

static void prepare(struct op *o)
{
	size_t es = hvd_dtype_size(o->t), n = o->count, rn = o->count;

	if (o->kind == 1) {
		rn = 0;
		for (int r = 0; r < size; r++)
			rn += o->count - (size_t)rank + (size_t)r;
	} else if (o->kind == 3) {
		n = rn = o->count * (size_t)size;
	}
	o->send = malloc(n * es + 1);
	o->recv = malloc(rn * es + 1);
	for (size_t i = 0; i < n; i++)
		typed_put(o->send, i, o->t, val(rank, i, o->salt));
	if (o->kind == 2)
		memcpy(o->recv, o->send, n * es);
	if (o->kind == 0 && o->inplace)
		memcpy(o->recv, o->send, n * es);
}

static void fail(const struct op *o, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&fail_mu);
	if (failures++ < 10) {
		printf("# rank %d: %s (%s %s count %zu): ", rank, o->name,
		       (const char *[]){"allreduce", "allgather", "broadcast",
					"alltoall", "reducescatter"}[o->kind],
		       hvd_dtype_name(o->t), o->count);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	pthread_mutex_unlock(&fail_mu);
}

/* Averages over 3 ranks are not exact in 8- or 11-bit mantissas. */
static int close_enough(const struct op *o, double got, double want)
{
	double tol = o->t == HVD_BFLOAT16	      ? 1e-2
		     : o->t == HVD_FLOAT16 || o->fp16 ? 2e-3
						      : 1e-6;

	return fabs(got - want) <= tol * (1 + fabs(want));
}

static double expect_reduce(const struct op *o, size_t i)
{
	double acc = val(0, i, o->salt) * o->pre;

	for (int r = 1; r < size; r++) {
		double x = val(r, i, o->salt) * o->pre;

		if (o->red == HVD_MIN)
			acc = x < acc ? x : acc;
		else if (o->red == HVD_MAX)
			acc = x > acc ? x : acc;
		else
			acc += x;
	}
	if (o->red == HVD_AVERAGE)
		acc /= size;
	return acc * o->post;
}

static void check(struct op *o)
{
	size_t n = o->count;
	double want, got;

	switch (o->kind) {
	case 0:
		for (size_t i = 0; i < n; i++) {
			want = expect_reduce(o, i);
			got = typed_get(o->recv, i, o->t);
			if (!close_enough(o, got, want)) {
				fail(o, "[%zu] = %g, want %g", i, got, want);
				return;
			}
		}
		break;
	case 1: {
		size_t off = 0;

		for (int r = 0; r < size; r++) {
			size_t rc = o->count - (size_t)rank + (size_t)r;

			for (size_t i = 0; i < rc; i++, off++)
				if (typed_get(o->recv, off, o->t) !=
				    val(r, i, o->salt)) {
					fail(o,
					     "from rank %d [%zu] = %g, want %g",
					     r, i,
					     typed_get(o->recv, off, o->t),
					     val(r, i, o->salt));
					return;
				}
		}
		break;
	}
	case 2:
		for (size_t i = 0; i < n; i++)
			if (typed_get(o->recv, i, o->t) !=
			    val(o->root, i, o->salt)) {
				fail(o, "[%zu] = %g, want root %d's %g", i,
				     typed_get(o->recv, i, o->t), o->root,
				     val(o->root, i, o->salt));
				return;
			}
		break;
	case 3:
		for (int r = 0; r < size; r++)
			for (size_t i = 0; i < n; i++) {
				want = val(r, (size_t)rank * n + i, o->salt);
				got =
				    typed_get(o->recv, (size_t)r * n + i, o->t);
				if (got != want) {
					fail(o, "from %d [%zu] = %g, want %g",
					     r, i, got, want);
					return;
				}
			}
		break;
	case 4: {
		size_t mine = hvd_reducescatter_count(n, rank, size);
		size_t off = hvd_reducescatter_offset(n, rank, size);

		for (size_t i = 0; i < mine; i++) {
			want = expect_reduce(o, off + i);
			got = typed_get(o->recv, i, o->t);
			if (!close_enough(o, got, want)) {
				fail(o, "[%zu] = %g, want %g", off + i, got,
				     want);
				return;
			}
		}
		break;
	}
	}
}

static hvd_status_t submit(struct op *o)
{
	hvd_opts_t opts;
	const void *send = o->inplace && o->kind == 0 ? HVD_IN_PLACE : o->send;

	hvd_opts_init(&opts);
	opts.prescale = o->pre;
	opts.postscale = o->post;
	opts.compress_fp16 = o->fp16;
	opts.priority = o->salt % 3;
	switch (o->kind) {
	case 0:
		return hvd_allreduce_async(o->name, send, o->recv, o->count,
					   o->t, o->red, &opts, &o->h);
	case 1:
		return hvd_allgather_async(o->name, o->send, o->recv, o->count,
					   o->t, &opts, &o->h);
	case 2:
		return hvd_broadcast_async(o->name, o->recv, o->count, o->t,
					   o->root, &opts, &o->h);
	case 3:
		return hvd_alltoall_async(o->name, o->send, o->recv, o->count,
					  o->t, &opts, &o->h);
	default:
		return hvd_reducescatter_async(o->name, o->send, o->recv,
					       o->count, o->t, o->red, &opts,
					       &o->h);
	}
}

static void *worker(void *arg)
{
	int thread = (int)(intptr_t)arg;
	unsigned order_seed = 99u + (unsigned)rank * 131u + (unsigned)thread;
	struct op *ops = calloc((size_t)window, sizeof(*ops));
	int *perm = calloc((size_t)window, sizeof(*perm));

	for (int base = 0; base < nops; base += window) {
		int n = nops - base < window ? nops - base : window;

		for (int i = 0; i < n; i++) {
			draw(&ops[i], thread, base + i);
			prepare(&ops[i]);
			perm[i] = i;
		}
		/* a different submission order on every rank */
		for (int i = n - 1; i > 0; i--) {
			int j = rand_r(&order_seed) % (i + 1), t = perm[i];

			perm[i] = perm[j];
			perm[j] = t;
		}
		for (int i = 0; i < n; i++) {
			struct op *o = &ops[perm[i]];
			hvd_status_t st = submit(o);

			if (st != HVD_OK) {
				fail(o, "submit: %s", hvd_last_error());
				o->h = NULL;
			}
		}
		for (int i = 0; i < n; i++) {
			struct op *o = &ops[i]; /* not the submit order */
			hvd_status_t st;

			if (!o->h)
				continue;
			if (o->kind == 1) {
				/* allgather: the total count is read before
				 * hvd_wait releases the handle */
				size_t want = 0;

				for (int r = 0; r < size; r++)
					want +=
					    o->count - (size_t)rank + (size_t)r;
				while (hvd_test(o->h) == HVD_IN_PROGRESS)
					sched_yield();
				if (hvd_test(o->h) == HVD_OK &&
				    hvd_handle_count(o->h) != want)
					fail(o,
					     "hvd_handle_count %zu, want %zu",
					     hvd_handle_count(o->h), want);
			}
			st = hvd_wait(o->h);
			if (st != HVD_OK)
				fail(o, "wait: %s: %s", hvd_status_name(st),
				     hvd_last_error());
			else
				check(o);
			free(o->send);
			free(o->recv);
		}
	}
	free(ops);
	free(perm);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	int total = 0, gathered = 1;
	double t0;

	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		nops = atoi(argv[2]);
	if (argc > 3)
		window = atoi(argv[3]);
	if (nthreads < 1 || nthreads > 64 || window < 1)
		return 2;
	if (hvd_init() != HVD_OK) {
		printf("1..0 # SKIP hvd_init failed: %s\n", hvd_last_error());
		return 0;
	}
	rank = hvd_rank();
	size = hvd_size();
	t0 = (double)clock();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	/* Every rank's verdict reaches rank 0.  If that allreduce fails the
	 * verdicts are unknown: a failure, not a zero. */
	{
		int32_t f = failures, sum = 0;
		hvd_status_t st =
		    hvd_allreduce(&f, &sum, 1, HVD_INT32, HVD_SUM);

		if (st != HVD_OK) {
			printf("# rank %d: gathering the failure counts "
			       "failed: %s: %s\n",
			       rank, hvd_status_name(st), hvd_last_error());
			gathered = 0;
		}
		total = sum;
	}
	if (rank == 0) {
		plan(1);
		ok(gathered && total == 0,
		   "%d threads x %d random async ops on %d ranks: all results "
		   "exact (%d failures%s)",
		   nthreads, nops, size, total,
		   gathered ? "" : ", other ranks' unknown");
		diag("cpu %.1f s", ((double)clock() - t0) / CLOCKS_PER_SEC);
	}
	hvd_finalize();
	return rank == 0 ? done_testing() : failures != 0 || !gathered;
}

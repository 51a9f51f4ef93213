/*
 * hvd-bench - collective bandwidth of libhvd, in nccl-tests' terms, with
 * OpenMPI, Gloo and memcpy measured in the same run on the same buffers
 * (see hvd-bench(1)).
 *
 * For each size: optional check of one result (-c 1), warm-up, then the
 * timed loop, each call timed on its own.  The time of a size is the
 * median call time of the timed loop (HVD_BENCH_TIME=mean: the mean),
 * taken as the maximum over the ranks (the slowest rank decides when a
 * collective is done).  The median by default because the machines this
 * runs on are shared: a call during which another job took the CPU says
 * nothing about the collective, and every peer is measured the same way.
 * Without -n the iteration count is chosen so that one measurement takes about
 * 0.3 s, from the slowest rank's warm-up time, so that all ranks agree on it.
 * Peers get the same treatment; libhvd's own collectives carry the agreement,
 * which is fair because they are outside the timed loops.
 */
#include "config.h"

#include "tools/bench/bench.h"

#include <dirent.h>
#include <errno.h>

#include "tools/bench/bench_cuda.h" /* -D cuda (GPU path) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------- runners */

static int ours_once(const struct bench_case *c)
{
	size_t n = (size_t)c->size;

	switch (c->coll) {
	case BENCH_ALLREDUCE:
		return hvd_allreduce(c->send, c->recv, c->count, c->dtype,
				     c->op);
	case BENCH_ALLGATHER:
		return hvd_allgather(c->send, c->recv, c->count, c->dtype);
	case BENCH_BROADCAST:
		return hvd_broadcast(c->recv, c->count, c->dtype, 0);
	case BENCH_ALLTOALL:
		return hvd_alltoall(c->send, c->recv, c->count, c->dtype);
	default:
		return hvd_reducescatter(c->send, c->recv, c->count * n,
					 c->dtype, c->op);
	}
}

static int run_ours(const struct bench_case *c, int iters, double *times)
{
	double t0 = now(), t1;

	for (int i = 0; i < iters; i++) {
		hvd_status_t st = ours_once(c);

		if (st != HVD_OK) {
			fprintf(stderr,
				"hvd-bench: %s of %zu elements: %s: %s\n",
				bench_coll_names[c->coll], c->count,
				hvd_status_name(st), hvd_last_error());
			return -1;
		}
		t1 = now();
		times[i] = t1 - t0;
		t0 = t1;
	}
	return 0;
}

static int run_memcpy(const struct bench_case *c, int iters, double *times)
{
	size_t bytes = c->count * hvd_dtype_size(c->dtype);
	double t0 = now(), t1;

	for (int i = 0; i < iters; i++) {
		memcpy(c->recv, c->send, bytes);
		/* keep the copy from being optimised away */
		__asm__ __volatile__("" : : "r"(c->recv) : "memory");
		t1 = now();
		times[i] = t1 - t0;
		t0 = t1;
	}
	return 0;
}

static int agree_max(double *v)
{
	hvd_status_t st =
	    hvd_allreduce(HVD_IN_PLACE, v, 1, HVD_FLOAT64, HVD_MAX);

	if (st != HVD_OK) {
		fprintf(stderr, "hvd-bench: allreduce of the timings: %s\n",
			hvd_last_error());
		return -1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Seconds per call of times[0..n-1]: median or mean. */
static double per_call(double *times, int n, int median)
{
	double sum = 0;

	if (median) {
		qsort(times, (size_t)n, sizeof(*times), cmp_double);
		return n % 2 ? times[n / 2]
			     : (times[n / 2 - 1] + times[n / 2]) / 2;
	}
	for (int i = 0; i < n; i++)
		sum += times[i];
	return sum / n;
}

/* Seconds per call, max over ranks; negative on failure.  local: only
 * rank 0 runs (memcpy), the others wait. */
static double measure(bench_run_fn fn, const struct bench_case *c,
		      const struct bench_opts *o, int local)
{
	static double *times;
	static int cap;
	double t = 0;
	int warm = o->warmup, iters = o->iters, run = !local || c->rank == 0;
	int need = iters > warm ? iters : warm;

	if (need < 1000000 && iters <= 0)
		need = 1000000;
	if (need > cap) {
		free(times);
		times = malloc(sizeof(*times) * (size_t)need);
		cap = times ? need : 0;
		if (!times) {
			fprintf(stderr, "hvd-bench: out of memory\n");
			return -1;
		}
	}
	if (hvd_barrier() != HVD_OK)
		return -1;
	if (run && fn(c, 1, times))
		return -1;
	t = run ? times[0] : 0;
	if (agree_max(&t))
		return -1;
	/* a slow peer at a big size: do not spend seconds warming it */
	if (warm > 1 && t * (warm - 1) < 2.0) {
		if (hvd_barrier() != HVD_OK)
			return -1;
		if (run && fn(c, warm - 1, times))
			return -1;
		t = run ? per_call(times, warm - 1, 0) : 0;
		if (agree_max(&t))
			return -1;
	}
	if (iters <= 0) {
		double want = o->target_s / (t > 1e-9 ? t : 1e-9);

		iters = want < 3 ? 3 : want > 1e6 ? 1000000 : (int)want;
	}
	if (hvd_barrier() != HVD_OK)
		return -1;
	if (run && fn(c, iters, times))
		return -1;
	t = run ? per_call(times, iters, o->median) : 0;
	if (agree_max(&t))
		return -1;
	return t;
}

/* Median, minimum and maximum of q[0..n-1] (reordered). */
static void spread(double *q, int n, double out[3])
{
	out[0] = per_call(q, n, 1); /* sorts */
	out[1] = q[0];
	out[2] = q[n - 1];
}

/* ------------------------------------------------------------- output */

struct row {
	size_t bytes, count;
	double time_us, algbw, busbw;
	long wrong;
	double mpi_busbw, gloo_busbw, memcpy_bw; /* < 0: not measured */
	/* with -R: the median and the range of the peer's time over ours,
	 * measurement by measurement */
	double vs_mpi[3], vs_gloo[3];
};

static void print_header(const struct bench_opts *o, FILE *csv)
{
	printf("# hvd-bench: %s, %d ranks, %s, %s; time = max over ranks of "
	       "the %s time per call\n",
	       bench_coll_names[o->coll], o->size, hvd_dtype_name(o->dtype),
	       hvd_op_name(o->op), o->median ? "median" : "mean");
	printf("#%11s %12s %9s %6s %10s %8s %8s %7s", "size(B)", "count",
	       "type", "redop", "time_us", "algbw", "busbw", "#wrong");
	if (o->cmp_mpi)
		printf(" %9s %7s%s", "mpi_busbw", "vs_mpi",
		       o->repeat > 1 ? "    spread" : "");
	if (o->cmp_gloo)
		printf(" %10s %7s%s", "gloo_busbw", "vs_gloo",
		       o->repeat > 1 ? "    spread" : "");
	if (o->cmp_memcpy)
		printf(" %9s", "memcpy_bw");
	printf("\n#%11s %12s %9s %6s %10s %8s %8s %7s", "", "(elements)", "",
	       "", "", "(GB/s)", "(GB/s)", "");
	if (o->cmp_mpi)
		printf(" %9s %7s%s", "(GB/s)", "(x)",
		       o->repeat > 1 ? "       (x)" : "");
	if (o->cmp_gloo)
		printf(" %10s %7s%s", "(GB/s)", "(x)",
		       o->repeat > 1 ? "       (x)" : "");
	if (o->cmp_memcpy)
		printf(" %9s", "(GB/s)");
	printf("\n");
	if (csv) {
		fprintf(csv, "size,count,type,redop,time_us,algbw,busbw,wrong");
		if (o->cmp_mpi)
			fprintf(csv, ",mpi_busbw,vs_mpi");
		if (o->cmp_gloo)
			fprintf(csv, ",gloo_busbw,vs_gloo");
		if (o->cmp_memcpy)
			fprintf(csv, ",memcpy_bw");
		if (o->repeat > 1 && o->cmp_mpi)
			fprintf(csv, ",vs_mpi_min,vs_mpi_max");
		if (o->repeat > 1 && o->cmp_gloo)
			fprintf(csv, ",vs_gloo_min,vs_gloo_max");
		fprintf(csv, "\n");
	}
}

static void fmt_bw(char *out, size_t len, double v)
{
	if (v < 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%.3f", v);
}

static void fmt_ratio(char *out, size_t len, double r)
{
	if (r <= 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%.2f", r);
}

static void fmt_spread(char *out, size_t len, const double *r)
{
	if (r[1] <= 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%.2f-%.2f", r[1], r[2]);
}

static void print_row(const struct bench_opts *o, const struct row *r,
		      FILE *csv)
{
	char wrong[32], a[32], b[32];
	const char *redop =
	    o->coll == BENCH_ALLREDUCE || o->coll == BENCH_REDUCESCATTER
		? hvd_op_name(o->op)
		: "none";

	if (o->check)
		snprintf(wrong, sizeof(wrong), "%ld", r->wrong);
	else
		snprintf(wrong, sizeof(wrong), "n/a");
	printf("%12zu %12zu %9s %6s %10.2f %8.3f %8.3f %7s", r->bytes, r->count,
	       hvd_dtype_name(o->dtype), redop, r->time_us, r->algbw, r->busbw,
	       wrong);
	if (csv)
		fprintf(csv, "%zu,%zu,%s,%s,%.3f,%.4f,%.4f,%s", r->bytes,
			r->count, hvd_dtype_name(o->dtype), redop, r->time_us,
			r->algbw, r->busbw, wrong);
	if (o->cmp_mpi) {
		fmt_bw(a, sizeof(a), r->mpi_busbw);
		fmt_ratio(b, sizeof(b), r->vs_mpi[0]);
		printf(" %9s %7s", a, b);
		if (csv)
			fprintf(csv, ",%s,%s", a, b);
		if (o->repeat > 1) {
			fmt_spread(a, sizeof(a), r->vs_mpi);
			printf(" %9s", a);
		}
	}
	if (o->cmp_gloo) {
		fmt_bw(a, sizeof(a), r->gloo_busbw);
		fmt_ratio(b, sizeof(b), r->vs_gloo[0]);
		printf(" %10s %7s", a, b);
		if (csv)
			fprintf(csv, ",%s,%s", a, b);
		if (o->repeat > 1) {
			fmt_spread(a, sizeof(a), r->vs_gloo);
			printf(" %9s", a);
		}
	}
	if (o->cmp_memcpy) {
		fmt_bw(a, sizeof(a), r->memcpy_bw);
		printf(" %9s", a);
		if (csv)
			fprintf(csv, ",%s", a);
	}
	if (csv && o->repeat > 1 && o->cmp_mpi)
		fprintf(csv, ",%.3f,%.3f", r->vs_mpi[1], r->vs_mpi[2]);
	if (csv && o->repeat > 1 && o->cmp_gloo)
		fprintf(csv, ",%.3f,%.3f", r->vs_gloo[1], r->vs_gloo[2]);
	printf("\n");
	fflush(stdout);
	if (csv) {
		fprintf(csv, "\n");
		fflush(csv);
	}
}

/* ---------------------------------------------------------------- main */

static int setup_gloo(const struct bench_opts *o, char *dir, size_t len)
{
	int rc = 0;

	if (o->rank == 0) {
		snprintf(dir, len, "/var/tmp/hvd-bench-gloo-XXXXXX");
		if (!mkdtemp(dir)) {
			fprintf(stderr,
				"hvd-bench: cannot create a Gloo rendezvous "
				"directory under /var/tmp: %s\n",
				strerror(errno));
			dir[0] = '\0';
		}
	}
	if (hvd_broadcast(dir, len, HVD_UINT8, 0) != HVD_OK) {
		fprintf(stderr, "hvd-bench: broadcast: %s\n", hvd_last_error());
		return -1;
	}
	if (!dir[0])
		return -1;
	rc = bench_gloo_init(o->rank, o->size, dir);
	return rc;
}

/* The FileStore keeps one flat file per key in dir. */
static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[512];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

/* The peers asked for with --compare, brought up on every rank. */
struct peers {
	int mpi, gloo;
	char gloo_dir[256];
};

static int peers_open(struct bench_opts *o, struct peers *p, int *argc,
		      char ***argv)
{
	(void)argc;
	(void)argv;
	if (o->cmp_mpi) {
#ifdef HVD_HAVE_MPI
		if (bench_mpi_init(argc, argv, o->rank, o->size))
			return -1;
		p->mpi = 1;
#else
		if (o->rank == 0)
			fprintf(stderr,
				"hvd-bench: --compare mpi: not built "
				"in (configure did not find OpenMPI)\n");
		return -1;
#endif
	}
	if (o->cmp_gloo) {
#ifdef HVD_HAVE_GLOO
		if (setup_gloo(o, p->gloo_dir, sizeof(p->gloo_dir)))
			return -1;
		p->gloo = 1;
#else
		if (o->rank == 0)
			fprintf(stderr, "hvd-bench: --compare gloo: not built "
					"in (configure did not find Gloo)\n");
		return -1;
#endif
	}
	return 0;
}

static void peers_close(const struct bench_opts *o, struct peers *p)
{
	(void)o;
#ifdef HVD_HAVE_GLOO
	if (p->gloo) {
		bench_gloo_finalize();
		hvd_barrier();
		if (o->rank == 0)
			remove_dir(p->gloo_dir);
	}
#endif
#ifdef HVD_HAVE_MPI
	if (p->mpi)
		bench_mpi_finalize();
#endif
	(void)p;
}

/* The buffers every size runs in (and their device mirrors, -D cuda). */
struct buffers {
	void *send, *recv;
	size_t bytes;
};

static int buffers_alloc(const struct bench_opts *o, struct buffers *b)
{
	b->bytes = o->max_bytes + 4096;
	if (posix_memalign(&b->send, 4096, b->bytes) ||
	    posix_memalign(&b->recv, 4096, b->bytes)) {
		fprintf(stderr, "hvd-bench: cannot allocate 2 x %zu bytes\n",
			b->bytes);
		return -1;
	}
	memset(b->send, 0, b->bytes);
	memset(b->recv, 0, b->bytes);
	if (o->cuda &&
	    bench_cuda_setup(hvd_local_rank(), b->bytes, b->bytes))
		return -1;
	return 0;
}

/* Verifies one result of case c (dc: the same on the device mirrors);
 * the wrong elements summed over the ranks, or -1 on a failure. */
static long check_once(const struct bench_opts *o, const struct buffers *b,
		       const struct bench_case *c,
		       const struct bench_case *dc)
{
	long bad;

	bench_fill_inputs(c);
	if (o->cuda && bench_cuda_upload(b->send, b->recv))
		return -1;
	if (hvd_barrier() != HVD_OK || ours_once(dc) != HVD_OK) {
		fprintf(stderr, "hvd-bench: %s: %s\n",
			bench_coll_names[o->coll], hvd_last_error());
		return -1;
	}
	if (o->cuda && bench_cuda_download(b->recv))
		return -1;
	bad = bench_count_wrong(c);
	if (hvd_allreduce(HVD_IN_PLACE, &bad, 1, HVD_INT64, HVD_SUM) !=
	    HVD_OK)
		return -1;
	return bad;
}

/* One row: the case of count elements (per of them make a byte count),
 * checked, then timed for libhvd and each peer. */
static int run_row(const struct bench_opts *o, const struct peers *p,
		   const struct buffers *b, size_t count, size_t per,
		   struct row *r)
{
	int n = o->size;
	struct bench_case c = {
	    .coll = o->coll,
	    .dtype = o->dtype,
	    .op = o->op,
	    .count = count,
	    .send = b->send,
	    .recv = b->recv,
	    .rank = o->rank,
	    .size = n,
	};
	/* -D cuda: the same case on the device mirrors (GPU hook) */
	struct bench_case dc = c;
	double factor = o->coll == BENCH_ALLREDUCE ? 2.0 * (n - 1) / n
			: o->coll == BENCH_BROADCAST ? 1.0
						     : (double)(n - 1) / n;
	int R = o->repeat > 1 ? o->repeat : 1;
	double t, *t_ours = malloc(5 * (size_t)R * sizeof(double));
	double *t_mpi = t_ours + R, *t_gloo = t_mpi + R;
	double *q_mpi = t_gloo + R, *q_gloo = q_mpi + R;

	if (!t_ours) {
		fprintf(stderr, "hvd-bench: out of memory\n");
		return -1;
	}

	if (o->cuda) {
		dc.send = bench_cuda_send();
		dc.recv = bench_cuda_recv();
	}
	r->bytes = count * per;
	r->count = count;
	if (o->check && (r->wrong = check_once(o, b, &c, &dc)) < 0)
		goto fail;
	/* -R: ours and each peer in turn, R times, so that each ratio is
	 * taken between measurements a moment apart (a shared machine's
	 * load changes from second to second); the medians are reported. */
	for (int k = 0; k < R; k++) {
		t = measure(run_ours, &dc, o, 0);
		if (t < 0)
			goto fail;
		t_ours[k] = t;
		if (p->mpi && bench_mpi_supported(&c)) {
			t = measure(bench_mpi_run, &c, o, 0);
			if (t < 0)
				goto fail;
			t_mpi[k] = t;
			q_mpi[k] = t / t_ours[k];
		}
		if (p->gloo && bench_gloo_supported(&c)) {
			t = measure(bench_gloo_run, &c, o, 0);
			if (t < 0)
				goto fail;
			t_gloo[k] = t;
			q_gloo[k] = t / t_ours[k];
		}
	}
	t = per_call(t_ours, R, 1);
	r->time_us = t * 1e6;
	r->algbw = (double)r->bytes / t / 1e9;
	r->busbw = r->algbw * factor;
	if (p->mpi && bench_mpi_supported(&c)) {
		r->mpi_busbw =
		    (double)r->bytes / per_call(t_mpi, R, 1) / 1e9 * factor;
		spread(q_mpi, R, r->vs_mpi);
	}
	if (p->gloo && bench_gloo_supported(&c)) {
		r->gloo_busbw =
		    (double)r->bytes / per_call(t_gloo, R, 1) / 1e9 * factor;
		spread(q_gloo, R, r->vs_gloo);
	}
	if (o->cmp_memcpy) {
		struct bench_case m = c;

		/* one core copying the same number of bytes */
		m.dtype = HVD_UINT8;
		m.count = r->bytes;
		t = measure(run_memcpy, &m, o, 1);
		if (t < 0)
			goto fail;
		r->memcpy_bw = (double)r->bytes / t / 1e9;
	}
	free(t_ours);
	return 0;
fail:
	free(t_ours);
	return -1;
}

/* Every size from -b to -e, a row each; 0 when every check passed. */
static int sweep(const struct bench_opts *o, const struct peers *p,
		 const struct buffers *b, FILE *csv)
{
	size_t es = hvd_dtype_size(o->dtype), bytes, next;
	size_t per = o->coll == BENCH_ALLREDUCE || o->coll == BENCH_BROADCAST
			 ? es
			 : es * (size_t)o->size;
	double sum_busbw = 0;
	long wrong_total = 0;
	int rows = 0;

	if (o->rank == 0)
		print_header(o, csv);
	for (bytes = o->min_bytes; bytes <= o->max_bytes; bytes = next) {
		struct row r = {.mpi_busbw = -1,
				.gloo_busbw = -1,
				.memcpy_bw = -1,
				.vs_mpi = {-1, -1, -1},
				.vs_gloo = {-1, -1, -1}};

		next = (size_t)((double)bytes * o->factor);
		if (next <= bytes)
			next = bytes + 1;
		if (bytes / per == 0)
			continue;
		if (run_row(o, p, b, bytes / per, per, &r))
			return 1;
		wrong_total += r.wrong;
		if (o->rank == 0)
			print_row(o, &r, csv);
		sum_busbw += r.busbw;
		rows++;
	}
	if (o->rank == 0) {
		printf("# Out of bounds values : %ld %s\n", wrong_total,
		       wrong_total ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %.3f\n",
		       rows ? sum_busbw / rows : 0.0);
	}
	return wrong_total ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
	    .coll = BENCH_ALLREDUCE,
	    .min_bytes = 8,
	    .max_bytes = 256u << 20,
	    .factor = 2.0,
	    .dtype = HVD_FLOAT32,
	    .op = HVD_SUM,
	    .iters = 0,
	    .warmup = 5,
	    .check = 1,
	    .target_s = 0.3,
	    .median = 1,
	};
	struct peers peers = {0};
	struct buffers bufs = {0};
	const char *grads = NULL;
	FILE *csv = NULL;
	hvd_status_t st;
	int rc = 1;

	if (bench_parse_args(argc, argv, &o, &grads))
		return 2;
	st = hvd_init();
	if (st != HVD_OK) {
		fprintf(stderr,
			"hvd-bench: hvd_init: %s (run it under hvdrun, "
			"srun --mpi=pmix or mpirun)\n",
			hvd_last_error());
		return 1;
	}
	o.rank = hvd_rank();
	o.size = hvd_size();
	if (grads) {
		rc = bench_grads(&o, grads);
		goto out;
	}
	if (peers_open(&o, &peers, &argc, &argv) || buffers_alloc(&o, &bufs))
		goto out;
	if (o.rank == 0 && o.csv) {
		csv = fopen(o.csv, "w");
		if (!csv) {
			fprintf(stderr, "hvd-bench: --csv %s: %s\n", o.csv,
				strerror(errno));
			goto out;
		}
	}
	rc = sweep(&o, &peers, &bufs, csv);
out:
	if (csv)
		fclose(csv);
	free(bufs.send);
	free(bufs.recv);
	if (o.cuda)
		bench_cuda_teardown();
	peers_close(&o, &peers);
	hvd_finalize();
	return rc;
}

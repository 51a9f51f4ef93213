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
#include <getopt.h>

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

static const char *const coll_names[BENCH_COLL_COUNT] = {
    [BENCH_ALLREDUCE] = "allreduce",	     [BENCH_ALLGATHER] = "allgather",
    [BENCH_BROADCAST] = "broadcast",	     [BENCH_ALLTOALL] = "alltoall",
    [BENCH_REDUCESCATTER] = "reducescatter",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int use_cuda; /* -D cuda */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hvd-bench [-o allreduce|allgather|broadcast|alltoall|"
		"reducescatter]\n"
		"                 [-b MIN] [-e MAX] [-f FACTOR] [-d TYPE] "
		"[-r sum|prod|min|max|avg]\n"
		"                 [-n ITERS] [-w WARMUP] [-c 0|1] "
		"[--compare mpi,gloo,memcpy] [--csv FILE]\n"
		"                 [--grads SPEC] [-D host|cuda]\n"
		"Run under hvdrun, srun --mpi=pmix or mpirun (--compare mpi "
		"needs mpirun).\n"
		"Sizes take K/M/G suffixes (binary).  See hvd-bench(1).\n");
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
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
				coll_names[c->coll], c->count,
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

/* ------------------------------------------------------------- output */

struct row {
	size_t bytes, count;
	double time_us, algbw, busbw;
	long wrong;
	double mpi_busbw, gloo_busbw, memcpy_bw; /* < 0: not measured */
};

static void print_header(const struct bench_opts *o, FILE *csv)
{
	printf("# hvd-bench: %s, %d ranks, %s, %s; time = max over ranks of "
	       "the %s time per call\n",
	       coll_names[o->coll], o->size, hvd_dtype_name(o->dtype),
	       hvd_op_name(o->op), o->median ? "median" : "mean");
	printf("#%11s %12s %9s %6s %10s %8s %8s %7s", "size(B)", "count",
	       "type", "redop", "time_us", "algbw", "busbw", "#wrong");
	if (o->cmp_mpi)
		printf(" %9s %7s", "mpi_busbw", "vs_mpi");
	if (o->cmp_gloo)
		printf(" %10s %7s", "gloo_busbw", "vs_gloo");
	if (o->cmp_memcpy)
		printf(" %9s", "memcpy_bw");
	printf("\n#%11s %12s %9s %6s %10s %8s %8s %7s", "", "(elements)", "",
	       "", "", "(GB/s)", "(GB/s)", "");
	if (o->cmp_mpi)
		printf(" %9s %7s", "(GB/s)", "(x)");
	if (o->cmp_gloo)
		printf(" %10s %7s", "(GB/s)", "(x)");
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

static void fmt_ratio(char *out, size_t len, double ours, double theirs)
{
	if (theirs <= 0 || ours < 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%.2f", ours / theirs);
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
		fmt_ratio(b, sizeof(b), r->busbw, r->mpi_busbw);
		printf(" %9s %7s", a, b);
		if (csv)
			fprintf(csv, ",%s,%s", a, b);
	}
	if (o->cmp_gloo) {
		fmt_bw(a, sizeof(a), r->gloo_busbw);
		fmt_ratio(b, sizeof(b), r->busbw, r->gloo_busbw);
		printf(" %10s %7s", a, b);
		if (csv)
			fprintf(csv, ",%s,%s", a, b);
	}
	if (o->cmp_memcpy) {
		fmt_bw(a, sizeof(a), r->memcpy_bw);
		printf(" %9s", a);
		if (csv)
			fprintf(csv, ",%s", a);
	}
	printf("\n");
	fflush(stdout);
	if (csv) {
		fprintf(csv, "\n");
		fflush(csv);
	}
}

/* ------------------------------------------------------------ options */

static int parse_compare(struct bench_opts *o, const char *arg)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	int rc = 0;

	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "mpi") == 0)
			o->cmp_mpi = 1;
		else if (strcmp(tok, "gloo") == 0)
			o->cmp_gloo = 1;
		else if (strcmp(tok, "memcpy") == 0)
			o->cmp_memcpy = 1;
		else {
			fprintf(stderr,
				"hvd-bench: --compare %s: expected a "
				"comma-separated list of mpi, gloo, memcpy\n",
				tok);
			rc = -1;
		}
	}
	free(copy);
	return rc;
}

static int parse_args(int argc, char **argv, struct bench_opts *o,
		      const char **grads)
{
	static const struct option longopts[] = {
	    {"compare", required_argument, NULL, 'C'},
	    {"csv", required_argument, NULL, 'S'},
	    {"grads", required_argument, NULL, 'G'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, i;
	char *end;

	while ((c = getopt_long(argc, argv, "o:b:e:f:d:r:n:w:c:D:h", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'o':
			for (i = 0; i < BENCH_COLL_COUNT; i++)
				if (strcmp(optarg, coll_names[i]) == 0)
					break;
			if (i == BENCH_COLL_COUNT) {
				fprintf(stderr,
					"hvd-bench: -o %s: expected allreduce, "
					"allgather, broadcast, alltoall or "
					"reducescatter\n",
					optarg);
				return -1;
			}
			o->coll = (enum bench_coll)i;
			break;
		case 'b':
		case 'e':
			if (parse_size(optarg, c == 'b' ? &o->min_bytes
							: &o->max_bytes)) {
				fprintf(stderr,
					"hvd-bench: -%c %s: expected a size in "
					"bytes with an optional K, M or G "
					"suffix\n",
					c, optarg);
				return -1;
			}
			break;
		case 'f':
			o->factor = strtod(optarg, &end);
			if (*end || !(o->factor > 1.0)) {
				fprintf(stderr,
					"hvd-bench: -f %s: expected a number "
					"greater than 1\n",
					optarg);
				return -1;
			}
			break;
		case 'd':
			if (hvd_dtype_parse(optarg, &o->dtype) != HVD_OK) {
				fprintf(
				    stderr,
				    "hvd-bench: -d %s: expected uint8, "
				    "int8, int32, int64, float16, bfloat16, "
				    "float32 or float64\n",
				    optarg);
				return -1;
			}
			break;
		case 'r':
			if (hvd_op_parse(optarg, &o->op) != HVD_OK) {
				fprintf(stderr,
					"hvd-bench: -r %s: expected sum, prod, "
					"min, max or avg\n",
					optarg);
				return -1;
			}
			break;
		case 'n':
		case 'w':
			i = (int)strtol(optarg, &end, 10);
			if (*end || i < 0) {
				fprintf(stderr,
					"hvd-bench: -%c %s: expected a "
					"non-negative integer\n",
					c, optarg);
				return -1;
			}
			if (c == 'n')
				o->iters = i;
			else
				o->warmup = i;
			break;
		case 'c':
			if (strcmp(optarg, "0") && strcmp(optarg, "1")) {
				fprintf(stderr,
					"hvd-bench: -c %s: expected 0 "
					"or 1\n",
					optarg);
				return -1;
			}
			o->check = optarg[0] == '1';
			break;
		case 'D': /* GPU path hook: buffers in device memory */
			if (strcmp(optarg, "host") && strcmp(optarg, "cuda")) {
				fprintf(stderr,
					"hvd-bench: -D %s: expected host "
					"or cuda\n",
					optarg);
				return -1;
			}
			use_cuda = !strcmp(optarg, "cuda");
			break;
		case 'C':
			if (parse_compare(o, optarg))
				return -1;
			break;
		case 'S':
			o->csv = optarg;
			break;
		case 'G':
			*grads = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hvd-bench: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return -1;
	}
	if (o->min_bytes > o->max_bytes) {
		fprintf(stderr, "hvd-bench: -b %zu is larger than -e %zu\n",
			o->min_bytes, o->max_bytes);
		return -1;
	}
	return 0;
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
	const char *grads = NULL;
	char gloo_dir[256] = "";
	int have_mpi = 0, have_gloo = 0, rc = 1, n;
	size_t es, max_send, max_recv, bytes;
	void *send = NULL, *recv = NULL;
	FILE *csv = NULL;
	hvd_status_t st;
	double sum_busbw = 0;
	int rows = 0;
	long wrong_total = 0;

	if (parse_args(argc, argv, &o, &grads))
		return 2;
	if (getenv("HVD_BENCH_TIME")) {
		const char *m = getenv("HVD_BENCH_TIME");

		if (strcmp(m, "mean") && strcmp(m, "median")) {
			fprintf(stderr,
				"hvd-bench: HVD_BENCH_TIME=%s: expected "
				"mean or median\n",
				m);
			return 2;
		}
		o.median = strcmp(m, "median") == 0;
	}
	st = hvd_init();
	if (st != HVD_OK) {
		fprintf(stderr,
			"hvd-bench: hvd_init: %s (run it under hvdrun, "
			"srun --mpi=pmix or mpirun)\n",
			hvd_last_error());
		return 1;
	}
	o.rank = hvd_rank();
	o.size = n = hvd_size();

	if (grads) {
		rc = bench_grads(&o, grads);
		goto out;
	}

	if (o.cmp_mpi) {
#ifdef HVD_HAVE_MPI
		if (bench_mpi_init(&argc, &argv, o.rank, o.size))
			goto out;
		have_mpi = 1;
#else
		if (o.rank == 0)
			fprintf(stderr,
				"hvd-bench: --compare mpi: not built "
				"in (configure did not find OpenMPI)\n");
		goto out;
#endif
	}
	if (o.cmp_gloo) {
#ifdef HVD_HAVE_GLOO
		if (setup_gloo(&o, gloo_dir, sizeof(gloo_dir)))
			goto out;
		have_gloo = 1;
#else
		if (o.rank == 0)
			fprintf(stderr, "hvd-bench: --compare gloo: not built "
					"in (configure did not find Gloo)\n");
		goto out;
#endif
	}

	es = hvd_dtype_size(o.dtype);
	max_send = max_recv = o.max_bytes + 4096;
	if (posix_memalign(&send, 4096, max_send) ||
	    posix_memalign(&recv, 4096, max_recv)) {
		fprintf(stderr, "hvd-bench: cannot allocate 2 x %zu bytes\n",
			max_send);
		goto out;
	}
	memset(send, 0, max_send);
	memset(recv, 0, max_recv);
	if (use_cuda && bench_cuda_setup(hvd_local_rank(), max_send, max_recv))
		goto out;
	if (o.rank == 0 && o.csv) {
		csv = fopen(o.csv, "w");
		if (!csv) {
			fprintf(stderr, "hvd-bench: --csv %s: %s\n", o.csv,
				strerror(errno));
			goto out;
		}
	}
	if (o.rank == 0)
		print_header(&o, csv);

	for (bytes = o.min_bytes; bytes <= o.max_bytes;) {
		struct bench_case c = {
		    .coll = o.coll,
		    .dtype = o.dtype,
		    .op = o.op,
		    .send = send,
		    .recv = recv,
		    .rank = o.rank,
		    .size = n,
		};
		struct row r = {
		    .mpi_busbw = -1, .gloo_busbw = -1, .memcpy_bw = -1};
		size_t next,
		    per = o.coll == BENCH_ALLREDUCE || o.coll == BENCH_BROADCAST
			      ? es
			      : es * (size_t)n;
		double factor = o.coll == BENCH_ALLREDUCE ? 2.0 * (n - 1) / n
				: o.coll == BENCH_BROADCAST
				    ? 1.0
				    : (double)(n - 1) / n;
		double t;
		/* -D cuda: the same case on the device mirrors (GPU hook) */
		struct bench_case dc = c;

		if (use_cuda) {
			dc.send = bench_cuda_send();
			dc.recv = bench_cuda_recv();
		}
		c.count = dc.count = bytes / per;
		next = (size_t)((double)bytes * o.factor);
		if (next <= bytes)
			next = bytes + 1;
		if (c.count == 0) {
			bytes = next;
			continue;
		}
		r.bytes = c.count * per;
		r.count = c.count;
		if (o.check) {
			long bad;

			bench_fill_inputs(&c);
			if (use_cuda && bench_cuda_upload(send, recv))
				goto out;
			if (hvd_barrier() != HVD_OK ||
			    ours_once(&dc) != HVD_OK) {
				fprintf(stderr, "hvd-bench: %s: %s\n",
					coll_names[o.coll], hvd_last_error());
				goto out;
			}
			if (use_cuda && bench_cuda_download(recv))
				goto out;
			bad = bench_count_wrong(&c);
			if (hvd_allreduce(HVD_IN_PLACE, &bad, 1, HVD_INT64,
					  HVD_SUM) != HVD_OK)
				goto out;
			r.wrong = bad;
			wrong_total += bad;
		}
		t = measure(run_ours, &dc, &o, 0);
		if (t < 0)
			goto out;
		r.time_us = t * 1e6;
		r.algbw = (double)r.bytes / t / 1e9;
		r.busbw = r.algbw * factor;
		if (have_mpi && bench_mpi_supported(&c)) {
			t = measure(bench_mpi_run, &c, &o, 0);
			if (t < 0)
				goto out;
			r.mpi_busbw = (double)r.bytes / t / 1e9 * factor;
		}
		if (have_gloo && bench_gloo_supported(&c)) {
			t = measure(bench_gloo_run, &c, &o, 0);
			if (t < 0)
				goto out;
			r.gloo_busbw = (double)r.bytes / t / 1e9 * factor;
		}
		if (o.cmp_memcpy) {
			struct bench_case m = c;

			/* one core copying the same number of bytes */
			m.dtype = HVD_UINT8;
			m.count = r.bytes;
			t = measure(run_memcpy, &m, &o, 1);
			if (t < 0)
				goto out;
			r.memcpy_bw = (double)r.bytes / t / 1e9;
		}
		if (o.rank == 0)
			print_row(&o, &r, csv);
		sum_busbw += r.busbw;
		rows++;
		bytes = next;
	}
	if (o.rank == 0) {
		printf("# Out of bounds values : %ld %s\n", wrong_total,
		       wrong_total ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %.3f\n",
		       rows ? sum_busbw / rows : 0.0);
	}
	rc = wrong_total ? 1 : 0;

out:
	if (csv)
		fclose(csv);
	free(send);
	free(recv);
	if (use_cuda)
		bench_cuda_teardown();
#ifdef HVD_HAVE_GLOO
	if (have_gloo) {
		bench_gloo_finalize();
		hvd_barrier();
		if (o.rank == 0)
			remove_dir(gloo_dir);
	}
#endif
#ifdef HVD_HAVE_MPI
	if (have_mpi)
		bench_mpi_finalize();
#endif
	(void)have_mpi;
	(void)have_gloo;
	hvd_finalize();
	return rc;
}

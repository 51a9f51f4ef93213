/*
 * bench_opts.c - hvd-bench's command line (hvd-bench(1)).
 */
#include "config.h"

#include "tools/bench/bench.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const bench_coll_names[BENCH_COLL_COUNT] = {
    [BENCH_ALLREDUCE] = "allreduce",	     [BENCH_ALLGATHER] = "allgather",
    [BENCH_BROADCAST] = "broadcast",	     [BENCH_ALLTOALL] = "alltoall",
    [BENCH_REDUCESCATTER] = "reducescatter",
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hvd-bench [-o allreduce|allgather|broadcast|alltoall|"
		"reducescatter]\n"
		"                 [-b MIN] [-e MAX] [-f FACTOR] [-d TYPE] "
		"[-r sum|prod|min|max|avg]\n"
		"                 [-n ITERS] [-w WARMUP] [-c 0|1] "
		"[--compare mpi,gloo,memcpy] [-R REPEAT]\n"
		"                 [--csv FILE]\n"
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

int bench_parse_args(int argc, char **argv, struct bench_opts *o,
		     const char **grads)
{
	static const struct option longopts[] = {
	    {"compare", required_argument, NULL, 'C'},
	    {"csv", required_argument, NULL, 'S'},
	    {"grads", required_argument, NULL, 'G'},
	    {"repeat", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *time;
	int c, i;
	char *end;

	while ((c = getopt_long(argc, argv, "o:b:e:f:d:r:n:w:c:D:R:h", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'o':
			for (i = 0; i < BENCH_COLL_COUNT; i++)
				if (strcmp(optarg, bench_coll_names[i]) == 0)
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
			/* (Adasum is not elementwise: no reference
			 * values to check it against here) */
			if (hvd_op_parse(optarg, &o->op) != HVD_OK ||
			    o->op == HVD_ADASUM) {
				fprintf(stderr,
					"hvd-bench: -r %s: expected sum, prod, "
					"min, max or avg\n",
					optarg);
				return -1;
			}
			break;
		case 'R':
			i = (int)strtol(optarg, &end, 10);
			if (*end || i < 1 || i > 1000) {
				fprintf(stderr,
					"hvd-bench: --repeat %s: expected an "
					"integer from 1 to 1000\n",
					optarg);
				return -1;
			}
			o->repeat = i;
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
			o->cuda = !strcmp(optarg, "cuda");
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
	time = getenv("HVD_BENCH_TIME");
	if (time) {
		if (strcmp(time, "mean") && strcmp(time, "median")) {
			fprintf(stderr,
				"hvd-bench: HVD_BENCH_TIME=%s: expected "
				"mean or median\n",
				time);
			return -1;
		}
		o->median = strcmp(time, "median") == 0;
	}
	return 0;
}

/*
 * NCCL collectives of the GPU path, driven directly (struct cuda_comm, no
 * PMIx/UCX): the ranks are forked processes, one GPU each, and the unique
 * id travels through files.  Every collective, type and reduction is
 * checked against a host reference that each rank computes for all ranks.
 *
 * Phases (each one TAP line per rank):
 *   1 rank          everything, with 2 NCCL streams;
 *   N ranks         everything (N = GPUs, at most 8; needs 2 - NCCL refuses
 *                   two ranks on one GPU);
 *   hierarchical    4+ GPUs split into 2 pretend nodes, so the local/cross
 *                   communicators and the reduce-scatter/allreduce/
 *                   allgather path run on one machine;
 *   failure         rank 1 dies after init: rank 0's next collective must
 *                   fail within HOROVOD_PEER_TIMEOUT, not hang, and later
 *                   calls must fail fast.
 * The parent never touches CUDA (a CUDA context does not survive fork):
 * a probe child counts the devices.
 *
 *   test_nccl [--ranks N]   (default: all phases the GPUs allow)
 *   test_nccl --one         1 rank in this process, no fork
 */
#include "config.h"

#include "cuda/cuda_internal.h"
#include "tap.h"
#include "tools/bench/typed.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PHASE_LIMIT 150 /* seconds a phase may take before it is killed */

static char dir[256];

/* --------------------------------------------------- file bootstrap */

struct fboot {
	int rank, seq;
};

static hvd_status_t file_bcast(void *ctx, void *buf, size_t bytes, int root)
{
	struct fboot *b = ctx;
	char path[512], tmp[520];
	double deadline = hvd_now() + 60;
	int fd;

	snprintf(path, sizeof(path), "%s/bcast.%d", dir, b->seq++);
	if (b->rank == root) {
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, buf, bytes) != (ssize_t)bytes ||
		    close(fd) || rename(tmp, path))
			return hvd_error(HVD_ERR_IO, "bcast file %s", path);
		return HVD_OK;
	}
	while ((fd = open(path, O_RDONLY)) < 0) {
		if (hvd_now() > deadline)
			return hvd_error(HVD_ERR_TIMEOUT, "no %s", path);
		usleep(2000);
	}
	if (read(fd, buf, bytes) != (ssize_t)bytes) {
		close(fd);
		return hvd_error(HVD_ERR_IO, "short %s", path);
	}
	close(fd);
	return HVD_OK;
}

/* -------------------------------------------------------- references */

static int rank_, size_, fails;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fails++;                                               \
			printf("# rank %d: FAIL ", rank_);                     \
			printf(__VA_ARGS__);                                   \
			printf(" [%s]\n", hvd_last_error());                   \
			fflush(stdout);                                        \
		}                                                              \
	} while (0)

/* Input value of rank r at element i for reduction op: small and exact in
 * every type (products stay tiny, averages of N ranks are exact in
 * float16 for N a power of two and truncate like integers otherwise). */
static double input(int r, size_t i, hvd_op_t op)
{
	if (op == HVD_PRODUCT)
		return (double)(1 + (int)((i + (size_t)r) % 2));
	return (double)((i * 7 + (size_t)r * 3) % 11);
}

static int is_int_type(hvd_dtype_t t)
{
	return t == HVD_UINT8 || t == HVD_INT8 || t == HVD_INT32 ||
	       t == HVD_INT64;
}

/* Expected reduction of element i over all ranks. */
static double reduced(size_t i, hvd_dtype_t t, hvd_op_t op)
{
	double acc = input(0, i, op);

	for (int r = 1; r < size_; r++) {
		double v = input(r, i, op);

		switch (op) {
		case HVD_SUM:
		case HVD_AVERAGE:
			acc += v;
			break;
		case HVD_MIN:
			acc = v < acc ? v : acc;
			break;
		case HVD_MAX:
			acc = v > acc ? v : acc;
			break;
		case HVD_PRODUCT:
			acc *= v;
			break;
		default:
			break;
		}
	}
	if (op == HVD_AVERAGE) {
		acc /= size_;
		if (is_int_type(t))
			acc = (double)(long long)acc;
	}
	return acc;
}

/* Tolerance: exact for integers; the rounding of the type otherwise. */
static int close_to(double got, double want, hvd_dtype_t t)
{
	double tol = t == HVD_FLOAT16	 ? 1e-3
		     : t == HVD_BFLOAT16 ? 8e-3
		     : t == HVD_FLOAT32	 ? 1e-6
					 : 1e-12;

	if (is_int_type(t))
		return got == want;
	return got == want ||
	       (got - want) * (got - want) <= tol * tol * (1 + want * want);
}

/* --------------------------------------------------------- device io */

static void *dev(size_t bytes)
{
	void *p = NULL;

	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		printf("# rank %d: cudaMalloc(%zu) failed\n", rank_, bytes);
		exit(100);
	}
	return p;
}

static void up(void *d, const void *h, size_t bytes)
{
	cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
}

static void down(void *h, const void *d, size_t bytes)
{
	cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
}

/* -------------------------------------------------------- collectives */

static void t_allreduce(struct cuda_comm *cc, hvd_dtype_t t, hvd_op_t op,
			int in_place)
{
	size_t n = 4099, es = hvd_dtype_size(t), bad = 0;
	char *h = malloc(n * es), *o = malloc(n * es);
	char *ds = dev(n * es), *dr = dev(n * es);
	hvd_status_t st;

	for (size_t i = 0; i < n; i++)
		typed_put(h, i, t, input(rank_, i, op));
	up(in_place ? dr : ds, h, n * es);
	st = nccl_allreduce(cc, in_place ? HVD_IN_PLACE : ds, dr, n, t, op);
	down(o, dr, n * es);
	for (size_t i = 0; st == HVD_OK && i < n; i++)
		bad += !close_to(typed_get(o, i, t), reduced(i, t, op), t);
	CHECK(st == HVD_OK && bad == 0, "allreduce %s %s%s: %s, %zu wrong",
	      hvd_dtype_name(t), hvd_op_name(op), in_place ? " in place" : "",
	      hvd_status_name(st), bad);
	free(h);
	free(o);
	cudaFree(ds);
	cudaFree(dr);
}

/* prescale/postscale and fp16 compression on float32. */
static void t_allreduce_ex(struct cuda_comm *cc, hvd_op_t op, double pre,
			   double post, int compress)
{
	size_t n = 10007, bad = 0;
	float *h = malloc(n * 4), *o = malloc(n * 4);
	float *ds = dev(n * 4), *dr = dev(n * 4);
	hvd_status_t st;

	for (size_t i = 0; i < n; i++)
		h[i] = (float)input(rank_, i, op);
	up(ds, h, n * 4);
	st = nccl_allreduce_ex(cc, ds, dr, n, HVD_FLOAT32, op, pre, post,
			       compress);
	down(o, dr, n * 4);
	for (size_t i = 0; st == HVD_OK && i < n; i++) {
		double want = reduced(i, HVD_FLOAT32, op) * post;

		if (op == HVD_SUM || op == HVD_AVERAGE)
			want *= pre;
		bad +=
		    !close_to(o[i], want, compress ? HVD_FLOAT16 : HVD_FLOAT32);
	}
	CHECK(st == HVD_OK && bad == 0,
	      "allreduce float32 %s pre %g post %g%s: %s, %zu wrong",
	      hvd_op_name(op), pre, post, compress ? " fp16-compressed" : "",
	      hvd_status_name(st), bad);
	free(h);
	free(o);
	cudaFree(ds);
	cudaFree(dr);
}

/* Fusion: tensors of different sizes, one in place, through the fusion
 * buffer (batched copies in and out). */
static void t_fused(struct cuda_comm *cc, hvd_dtype_t t, double pre,
		    double post, int compress)
{
	enum { NT = 7 };
	static const size_t counts[NT] = {1, 17, 4096, 0, 33333, 5, 100000};
	struct cuda_fusion_entry e[NT];
	size_t es = hvd_dtype_size(t), bad = 0;
	char *h[NT], *ds[NT], *dr[NT];
	hvd_status_t st;

	for (int k = 0; k < NT; k++) {
		h[k] = malloc(counts[k] * es + 1);
		for (size_t i = 0; i < counts[k]; i++)
			typed_put(h[k], i, t,
				  input(rank_, i + (size_t)k, HVD_SUM));
		ds[k] = dev(counts[k] * es);
		dr[k] = k == 2 ? ds[k] : dev(counts[k] * es);
		up(ds[k], h[k], counts[k] * es);
		e[k].sendbuf = k == 4 ? HVD_IN_PLACE : ds[k];
		e[k].recvbuf = k == 4 ? ds[k] : dr[k];
		e[k].count = counts[k];
	}
	st = nccl_fused_allreduce(cc, e, NT, t, HVD_SUM, pre, post, compress);
	for (int k = 0; k < NT; k++) {
		down(h[k], e[k].recvbuf, counts[k] * es);
		for (size_t i = 0; st == HVD_OK && i < counts[k]; i++) {
			/* (integer types are only fused with factors 1) */
			double want =
			    reduced(i + (size_t)k, t, HVD_SUM) * pre * post;

			bad += !close_to(typed_get(h[k], i, t), want,
					 compress ? HVD_FLOAT16 : t);
		}
		free(h[k]);
		cudaFree(ds[k]);
		if (k != 2)
			cudaFree(dr[k]);
	}
	CHECK(st == HVD_OK && bad == 0,
	      "fused allreduce of %d %s tensors pre %g post %g%s: %s, %zu "
	      "wrong",
	      NT, hvd_dtype_name(t), pre, post,
	      compress ? " fp16-compressed" : "", hvd_status_name(st), bad);
}

/* in_place: 0 separate send buffer, 1 HVD_IN_PLACE (block already in
 * its slot), 2 sendbuf == recvbuf (block at the start, moved by the
 * library, as on the host path). */
static void t_allgatherv(struct cuda_comm *cc, hvd_dtype_t t, int even,
			 int in_place)
{
	size_t es = hvd_dtype_size(t), total = 0, bad = 0;
	size_t *counts = malloc((size_t)size_ * sizeof(size_t));
	size_t *displs = malloc((size_t)size_ * sizeof(size_t));
	char *h, *o, *ds, *dr;
	hvd_status_t st;

	for (int r = 0; r < size_; r++) {
		counts[r] = even ? 1000 : 100 * (size_t)(r + 1) + 1;
		displs[r] = total;
		total += counts[r];
	}
	h = malloc(total * es);
	o = malloc(total * es);
	ds = dev(counts[rank_] * es);
	dr = dev(total * es);
	for (size_t i = 0; i < counts[rank_]; i++)
		typed_put(h, i, t, input(rank_, i, HVD_SUM));
	if (in_place == 1)
		up(dr + displs[rank_] * es, h, counts[rank_] * es);
	else if (in_place == 2)
		up(dr, h, counts[rank_] * es);
	else
		up(ds, h, counts[rank_] * es);
	st =
	    nccl_allgatherv(cc,
			    in_place == 1   ? HVD_IN_PLACE
			    : in_place == 2 ? (const void *)dr
					    : (const void *)ds,
			    counts[rank_], dr, counts, even ? NULL : displs, t);
	down(o, dr, total * es);
	for (int r = 0; st == HVD_OK && r < size_; r++)
		for (size_t i = 0; i < counts[r]; i++)
			bad += typed_get(o, displs[r] + i, t) !=
			       input(r, i, HVD_SUM);
	CHECK(st == HVD_OK && bad == 0, "allgatherv %s %s%s: %s, %zu wrong",
	      hvd_dtype_name(t), even ? "even" : "uneven",
	      in_place == 1   ? " in place"
	      : in_place == 2 ? " from the start of recvbuf"
			      : "",
	      hvd_status_name(st), bad);
	free(counts);
	free(displs);
	free(h);
	free(o);
	cudaFree(ds);
	cudaFree(dr);
}

static void t_broadcast(struct cuda_comm *cc, hvd_dtype_t t, int root)
{
	size_t n = 12345, es = hvd_dtype_size(t), bad = 0;
	char *h = malloc(n * es);
	char *d = dev(n * es);
	hvd_status_t st;

	for (size_t i = 0; i < n; i++)
		typed_put(h, i, t, input(rank_, i, HVD_SUM));
	up(d, h, n * es);
	st = nccl_broadcast(cc, d, n, t, root);
	down(h, d, n * es);
	for (size_t i = 0; st == HVD_OK && i < n; i++)
		bad += typed_get(h, i, t) != input(root, i, HVD_SUM);
	CHECK(st == HVD_OK && bad == 0, "broadcast %s from %d: %s, %zu wrong",
	      hvd_dtype_name(t), root, hvd_status_name(st), bad);
	free(h);
	cudaFree(d);
}

/* Elements rank a sends to rank b (symmetric: also what b gets from a). */
static size_t a2a_count(int a, int b, int even)
{
	return even ? 333 : (size_t)((a + b) % 3) * 50 + 1;
}

/* Value of element i of the block rank a sends to rank b. */
static double a2a_value(int a, int b, size_t i)
{
	return (double)((a * 5 + b * 3 + (int)i) % 13);
}

static void t_alltoallv(struct cuda_comm *cc, hvd_dtype_t t, int even,
			int in_place)
{
	size_t es = hvd_dtype_size(t), st_ = 0, rt = 0, bad = 0;
	size_t *sc = malloc((size_t)size_ * sizeof(size_t));
	size_t *rc = malloc((size_t)size_ * sizeof(size_t));
	size_t *sd = malloc((size_t)size_ * sizeof(size_t));
	size_t *rd = malloc((size_t)size_ * sizeof(size_t));
	char *h, *o, *ds, *dr;
	hvd_status_t st;

	for (int p = 0; p < size_; p++) {
		sc[p] = a2a_count(rank_, p, even);
		rc[p] = a2a_count(p, rank_, even);
		sd[p] = st_;
		rd[p] = rt;
		st_ += sc[p];
		rt += rc[p];
	}
	h = malloc(st_ * es);
	o = malloc(rt * es);
	for (int p = 0; p < size_; p++)
		for (size_t i = 0; i < sc[p]; i++)
			typed_put(h, sd[p] + i, t, a2a_value(rank_, p, i));
	ds = dev(st_ * es);
	dr = dev((rt > st_ ? rt : st_) * es);
	up(in_place ? dr : ds, h, st_ * es);
	st = nccl_alltoallv(cc, in_place ? HVD_IN_PLACE : ds, sc,
			    even ? NULL : sd, dr, rc, even ? NULL : rd, t);
	down(o, dr, rt * es);
	for (int p = 0; st == HVD_OK && p < size_; p++)
		for (size_t i = 0; i < rc[p]; i++)
			bad += typed_get(o, rd[p] + i, t) !=
			       a2a_value(p, rank_, i);
	CHECK(st == HVD_OK && bad == 0, "alltoallv %s %s%s: %s, %zu wrong",
	      hvd_dtype_name(t), even ? "even" : "uneven",
	      in_place ? " in place" : "", hvd_status_name(st), bad);
	free(sc);
	free(rc);
	free(sd);
	free(rd);
	free(h);
	free(o);
	cudaFree(ds);
	cudaFree(dr);
}

static void t_reducescatter(struct cuda_comm *cc, hvd_dtype_t t, hvd_op_t op,
			    size_t count, int in_place)
{
	size_t es = hvd_dtype_size(t), bad = 0;
	size_t mine = hvd_reducescatter_count(count, rank_, size_);
	size_t off = hvd_reducescatter_offset(count, rank_, size_);
	char *h = malloc(count * es), *o = malloc(count * es);
	char *ds = dev(count * es), *dr = dev(count * es);
	hvd_status_t st;

	for (size_t i = 0; i < count; i++)
		typed_put(h, i, t, input(rank_, i, op));
	up(in_place ? dr : ds, h, count * es);
	st = nccl_reducescatter(cc, in_place ? HVD_IN_PLACE : ds, dr, count, t,
				op);
	down(o, dr, mine * es);
	for (size_t i = 0; st == HVD_OK && i < mine; i++)
		bad +=
		    !close_to(typed_get(o, i, t), reduced(off + i, t, op), t);
	CHECK(st == HVD_OK && bad == 0,
	      "reducescatter %s %s of %zu%s: %s, %zu wrong", hvd_dtype_name(t),
	      hvd_op_name(op), count, in_place ? " in place" : "",
	      hvd_status_name(st), bad);
	free(h);
	free(o);
	cudaFree(ds);
	cudaFree(dr);
}

static void everything(struct cuda_comm *cc)
{
	for (int t = 0; t < HVD_DTYPE_COUNT; t++)
		for (int op = 0; op < HVD_OP_COUNT; op++)
			t_allreduce(cc, (hvd_dtype_t)t, (hvd_op_t)op, 0);
	t_allreduce(cc, HVD_FLOAT32, HVD_SUM, 1);
	t_allreduce(cc, HVD_BFLOAT16, HVD_AVERAGE, 1);
	t_allreduce_ex(cc, HVD_SUM, 0.5, 3.0, 0);
	t_allreduce_ex(cc, HVD_AVERAGE, 2.0, 0.25, 0);
	t_allreduce_ex(cc, HVD_MAX, 1.0, 2.0, 0);
	t_allreduce_ex(cc, HVD_SUM, 1.0, 1.0, 1);
	t_allreduce_ex(cc, HVD_AVERAGE, 0.5, 2.0, 1);
	t_fused(cc, HVD_FLOAT32, 1.0, 1.0, 0);
	t_fused(cc, HVD_FLOAT32, 2.0, 0.25, 0);
	t_fused(cc, HVD_FLOAT32, 1.0, 0.5, 1);
	t_fused(cc, HVD_INT32, 1.0, 1.0, 0);
	t_fused(cc, HVD_FLOAT16, 0.5, 1.0, 0);
	for (int t = 0; t < HVD_DTYPE_COUNT; t++) {
		t_allgatherv(cc, (hvd_dtype_t)t, 1, 0);
		t_broadcast(cc, (hvd_dtype_t)t, size_ - 1);
		t_alltoallv(cc, (hvd_dtype_t)t, 1, 0);
		t_reducescatter(cc, (hvd_dtype_t)t, HVD_SUM,
				(size_t)size_ * 1000, 0);
	}
	t_allgatherv(cc, HVD_INT64, 0, 0);
	t_allgatherv(cc, HVD_FLOAT32, 0, 1);
	t_allgatherv(cc, HVD_FLOAT16, 1, 1);
	t_allgatherv(cc, HVD_INT32, 1, 2);
	t_allgatherv(cc, HVD_FLOAT64, 0, 2);
	t_broadcast(cc, HVD_UINT8, 0);
	t_alltoallv(cc, HVD_BFLOAT16, 0, 0);
	t_alltoallv(cc, HVD_INT32, 1, 1);
	t_alltoallv(cc, HVD_FLOAT64, 0, 1);
	t_reducescatter(cc, HVD_INT32, HVD_SUM, (size_t)size_ * 100 + 3, 0);
	t_reducescatter(cc, HVD_FLOAT32, HVD_MAX, (size_t)size_ * 100 + 1, 1);
	t_reducescatter(cc, HVD_FLOAT16, HVD_AVERAGE, (size_t)size_ * 64, 0);
	t_reducescatter(cc, HVD_FLOAT32, HVD_SUM, (size_t)size_ * 512, 1);
	t_reducescatter(cc, HVD_FLOAT32, HVD_SUM, 1, 0);

	CHECK(nccl_broadcast(cc, NULL, 4, HVD_FLOAT32, size_) ==
		  HVD_ERR_INVALID_ARG,
	      "broadcast from a root outside the communicator is refused");
	CHECK(nccl_allreduce(cc, NULL, NULL, 0, HVD_FLOAT32, HVD_SUM) == HVD_OK,
	      "allreduce of 0 elements");
	CHECK(nccl_allreduce(cc, NULL, NULL, 4, HVD_DTYPE_COUNT, HVD_SUM) ==
		  HVD_ERR_BAD_TYPE,
	      "allreduce of a bad type is refused");
}

/* ------------------------------------------------------------- phases */

enum phase { P_ONE, P_MANY, P_HIER, P_FAIL };

static int worker(enum phase ph, int rank, int size)
{
	struct fboot fb = {rank, 0};
	struct cuda_boot boot;
	struct cuda_comm *cc = NULL;
	int nodes[64];
	double t0;
	hvd_status_t st;

	rank_ = rank;
	size_ = size;
	if (ph == P_ONE)
		setenv("HOROVOD_NUM_NCCL_STREAMS", "2", 1);
	if (ph == P_MANY)
		setenv("HOROVOD_NUM_NCCL_STREAMS", size > 2 ? "3" : "2", 1);
	if (ph == P_HIER)
		setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", "1", 1);
	if (ph == P_FAIL)
		setenv("HOROVOD_PEER_TIMEOUT", "10", 1);
	if (cudaSetDevice(rank) != cudaSuccess) {
		printf("# rank %d: cudaSetDevice(%d) failed\n", rank, rank);
		return 100;
	}
	for (int r = 0; r < size; r++)
		nodes[r] = ph == P_HIER ? r / (size / 2) : 0;
	boot.rank = rank;
	boot.size = size;
	boot.node_of = nodes;
	boot.bcast = file_bcast;
	boot.ctx = &fb;
	st = cuda_comm_create(&boot, &cc);
	if (st != HVD_OK) {
		printf("# rank %d: cuda_comm_create: %s: %s\n", rank,
		       hvd_status_name(st), hvd_last_error());
		return 100;
	}
	if (ph == P_FAIL) {
		float *d = dev(1 << 20);

		/* Both make sure the communicator works, then rank 1 dies
		 * without a word. */
		st = nccl_allreduce(cc, d, d, 1 << 18, HVD_FLOAT32, HVD_SUM);
		CHECK(st == HVD_OK, "allreduce before the failure");
		if (rank == 1)
			_exit(0);
		t0 = hvd_now();
		st = nccl_allreduce(cc, d, d, 1 << 18, HVD_FLOAT32, HVD_SUM);
		CHECK(st == HVD_ERR_NCCL || st == HVD_ERR_TIMEOUT,
		      "allreduce with a dead peer fails (got %s)",
		      hvd_status_name(st));
		printf("# rank 0: dead peer detected after %.1f s: %s\n",
		       hvd_now() - t0, hvd_last_error());
		CHECK(hvd_now() - t0 < 30, "detected within 30 s");
		st = nccl_allreduce(cc, d, d, 16, HVD_FLOAT32, HVD_SUM);
		CHECK(st == HVD_ERR_NCCL, "later calls fail at once (got %s)",
		      hvd_status_name(st));
		cuda_comm_destroy(cc);
		return fails;
	}
	everything(cc);
	cuda_comm_destroy(cc);
	return fails;
}

static void remove_dir(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
}

/* Run size workers of a phase; one TAP line per rank. */
static void run_phase(enum phase ph, int size, const char *name)
{
	pid_t pids[64];
	int status[64];
	double deadline;
	int left = size;

	snprintf(dir, sizeof(dir), "%s/hvd-nccl-test.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		ok(0, "%s: mkdtemp: %s", name, strerror(errno));
		return;
	}
	fflush(stdout);
	for (int r = 0; r < size; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			int f = worker(ph, r, size);

			fflush(stdout);
			_exit(f > 99 ? 100 : f);
		}
		status[r] = -1;
	}
	deadline = hvd_now() + PHASE_LIMIT;
	while (left > 0) {
		int s;
		pid_t p = waitpid(-1, &s, WNOHANG);

		if (p > 0) {
			for (int r = 0; r < size; r++)
				if (pids[r] == p) {
					status[r] = s;
					left--;
				}
			continue;
		}
		if (hvd_now() > deadline) {
			for (int r = 0; r < size; r++)
				if (status[r] == -1)
					kill(pids[r], SIGKILL);
			diag("%s: killed after %d s", name, PHASE_LIMIT);
			deadline = hvd_now() + 3600;
		}
		usleep(20000);
	}
	for (int r = 0; r < size; r++) {
		int s = status[r];

		if (ph == P_FAIL && r == 1)
			continue;
		ok(WIFEXITED(s) && WEXITSTATUS(s) == 0,
		   "%s: rank %d of %d (%s)", name, r, size,
		   WIFEXITED(s) ? (WEXITSTATUS(s) == 0	   ? "all checks passed"
				   : WEXITSTATUS(s) == 100 ? "could not start"
							   : "checks failed")
				: "killed or crashed");
	}
	remove_dir();
}

/* Device count from a child, so the parent stays CUDA-free. */
static int probe(char *why, size_t len)
{
	int fd[2], n = 0, s;
	char buf[300] = "";
	pid_t p;

	if (pipe(fd))
		return 0;
	p = fork();
	if (p == 0) {
		const char *w = "";
		int c;

		close(fd[0]);
		c = cuda_device_count(&w);
		dprintf(fd[1], "%d %s", c, w);
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], buf, sizeof(buf) - 1) < 0)
		buf[0] = '\0';
	close(fd[0]);
	waitpid(p, &s, 0);
	if (sscanf(buf, "%d", &n) != 1)
		n = 0;
	snprintf(why, len, "%s",
		 strchr(buf, ' ') ? strchr(buf, ' ') + 1
				  : "device probe failed");
	return n;
}

int main(int argc, char **argv)
{
	char why[300];
	int n = probe(why, sizeof(why)), many;

	if (argc == 3 && !strcmp(argv[1], "--ranks"))
		n = atoi(argv[2]) < n ? atoi(argv[2]) : n;
	if (n <= 0)
		skip_all("no CUDA device (%s)", why);
	if (argc == 2 && !strcmp(argv[1], "--one")) {
		/* One rank in this very process (for profilers that do not
		 * follow fork, e.g. the NVTX check under nsys). */
		int f;

		snprintf(dir, sizeof(dir), "%s/hvd-nccl-test.XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(dir))
			skip_all("mkdtemp: %s", strerror(errno));
		plan(1);
		f = worker(P_ONE, 0, 1);
		ok(f == 0, "1 rank in process (%d failed)", f);
		remove_dir();
		return done_testing();
	}
	many = n > 8 ? 8 : n;
	diag("%d GPU(s): %s", n, why);
	run_phase(P_ONE, 1, "1 rank, 2 streams");
	if (many >= 2)
		run_phase(P_MANY, many, "all ranks");
	else
		skip(1, "one GPU: NCCL needs one GPU per rank for N ranks");
	if (many >= 4)
		run_phase(P_HIER, many - many % 2, "hierarchical, 2 nodes");
	else
		skip(1, "hierarchical allreduce needs 4 GPUs (2 per node)");
	if (many >= 2)
		run_phase(P_FAIL, 2, "dead peer");
	else
		skip(1, "dead-peer test needs 2 GPUs");
	return done_testing();
}

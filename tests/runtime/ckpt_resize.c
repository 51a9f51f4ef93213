/*
 * ckpt_resize.c - a deterministic training loop that is stopped and
 * resumed on another number of ranks (tests/runtime/ckpt_resize.sh).
 *
 *	ckpt_resize DIR OUT RUN STOP [--per-rank] [--async]
 *
 * An epoch is EPOCH_SIZE samples in an order shuffled by epoch; each step
 * the ranks take the next size * BATCH positions of it through the global
 * sampler position (hvd_ckpt_sampler_batch/advance), "consumed", kept in a
 * replicated buffer.  Each rank logs the samples it takes to OUT/seen.RUN.R
 * ("epoch sample" lines).  State:
 *   weights  replicated: int64 sums of g(sample, k) over every sample seen
 *            (allreduced each step);
 *   table    sharded: TABLE elements of 2 int64, element i the sums of
 *            h(sample, i) over every sample seen; each rank holds and
 *            updates its block only;
 *   rng      per-rank (--per-rank only): each rank's own, so the checkpoint
 *            cannot be restored on another size.
 * Both sums do not depend on who saw a sample, so the state after
 * (epoch, consumed) is known exactly: after a restore and at the end each
 * rank checks its buffers against it.  STOP > 0: after STOP steps, save,
 * dump the state (OUT/save.RUN.R.{w,tab}) and exit 85; after a restore the
 * state is dumped too (OUT/restore.RUN.R.{w,tab}), so that the test can
 * compare what N ranks saved with what M ranks restored, byte for byte.
 * Exit: 0 finished, 85 stopped, 1 a wrong value, 3 restore failed.
 */
#include "hvd.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EPOCHS 2
#define EPOCH_SIZE 101
#define BATCH 4
#define TABLE 37
#define NW 8

static int rank, size;

static int64_t g(uint64_t s, int k)
{
	return (int64_t)((s * 31 + (uint64_t)k * 7 + 3) % 1000);
}

static int64_t h(uint64_t s, uint64_t i, int c)
{
	return c ? (int64_t)((s ^ i) % 89)
		 : (int64_t)((s * 13 + i * 5 + 1) % 997);
}

/* The epoch's order: Fisher-Yates with an LCG seeded by the epoch, the
 * same on every rank. */
static void order(uint64_t epoch, uint64_t *perm)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (epoch + 1);

	for (uint64_t i = 0; i < EPOCH_SIZE; i++)
		perm[i] = i;
	for (uint64_t i = EPOCH_SIZE - 1; i > 0; i--) {
		uint64_t j, t;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (x >> 33) % (i + 1);
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

/* The samples seen once (epoch, consumed) is reached, in any order. */
static void expected(uint64_t epoch, uint64_t consumed, int64_t *w,
		     int64_t *tab, uint64_t first, uint64_t n)
{
	uint64_t perm[EPOCH_SIZE];

	memset(w, 0, NW * sizeof(*w));
	memset(tab, 0, 2 * n * sizeof(*tab));
	for (uint64_t e = 0; e <= epoch && e < EPOCHS; e++) {
		uint64_t upto = e < epoch ? EPOCH_SIZE : consumed;

		order(e, perm);
		for (uint64_t p = 0; p < upto; p++) {
			for (int k = 0; k < NW; k++)
				w[k] += g(perm[p], k);
			for (uint64_t j = 0; j < n; j++) {
				tab[2 * j] += h(perm[p], first + j, 0);
				tab[2 * j + 1] += h(perm[p], first + j, 1);
			}
		}
	}
}

static int check(const char *when, uint64_t epoch, uint64_t consumed,
		 const int64_t *w, const int64_t *tab, uint64_t first,
		 uint64_t n)
{
	int64_t ew[NW], *et = calloc(2 * n + 1, sizeof(*et));
	int good;

	expected(epoch, consumed, ew, et, first, n);
	good = memcmp(ew, w, sizeof(ew)) == 0 &&
	       memcmp(et, tab, 2 * n * sizeof(*tab)) == 0;
	printf("%s: epoch %" PRIu64 " consumed %" PRIu64 " rank %d of %d "
	       "block [%" PRIu64 ", %" PRIu64 "): %s\n", when, epoch,
	       consumed, rank, size, first, first + n, good ? "ok" : "WRONG");
	free(et);
	return good;
}

static void dump(const char *out, const char *what, int run, const void *p,
		 size_t n)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.%d.%d", out, what, run, rank);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n)) {
		perror(path);
		exit(1);
	}
	close(fd);
}

static void fail(const char *what, hvd_status_t st, int code)
{
	printf("%s: %s: %s\n", what, hvd_status_name(st), hvd_last_error());
	fflush(stdout);
	exit(code);
}

int main(int argc, char **argv)
{
	hvd_ckpt_config_t cfg = { 0 };
	uint64_t sampler[2] = { 0, 0 }; /* epoch, consumed: replicated */
	uint64_t perm[EPOCH_SIZE], pos[BATCH], first, n, rng;
	int64_t w[NW] = { 0 }, *tab;
	long step, steps = 0, stop_after;
	int per_rank = 0, run, stop = 0, good = 1;
	char path[4096], w_name[64], t_name[64];
	hvd_ckpt_t *ck;
	hvd_status_t st;
	FILE *seen;

	if (argc < 5) {
		fprintf(stderr, "usage: ckpt_resize DIR OUT RUN STOP "
			"[--per-rank] [--async]\n");
		return 2;
	}
	run = atoi(argv[3]);
	stop_after = atol(argv[4]);
	for (int i = 5; i < argc; i++) {
		if (strcmp(argv[i], "--per-rank") == 0)
			per_rank = 1;
		else if (strcmp(argv[i], "--async") == 0)
			cfg.async = 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((st = hvd_init()) != HVD_OK)
		fail("hvd_init", st, 1);
	rank = hvd_rank();
	size = hvd_size();
	cfg.dir = argv[1];
	cfg.every = 5;
	cfg.keep = 2;
	if ((st = hvd_ckpt_open(&cfg, &ck)) != HVD_OK)
		fail("open", st, 1);
	n = hvd_ckpt_shard_range(TABLE, rank, size, &first);
	tab = calloc(2 * n + 1, sizeof(*tab));
	rng = 1000 + (uint64_t)rank;
	if ((st = hvd_ckpt_register(ck, "weights", w, sizeof(w),
				    HVD_CKPT_REPLICATED)) != HVD_OK ||
	    (st = hvd_ckpt_register(ck, "sampler", sampler, sizeof(sampler),
				    HVD_CKPT_REPLICATED)) != HVD_OK ||
	    (st = hvd_ckpt_register_sharded(ck, "table", n ? tab : NULL,
					    TABLE, 2 * sizeof(int64_t))) !=
		    HVD_OK ||
	    (per_rank && (st = hvd_ckpt_register(ck, "rng", &rng, sizeof(rng),
						 HVD_CKPT_PER_RANK)) != HVD_OK))
		fail("register", st, 1);
	if ((st = hvd_ckpt_restore(ck, &step)) != HVD_OK)
		fail("restore", st, 3);
	if (step > 0) {
		good &= check("restored", sampler[0], sampler[1], w, tab, first,
			      n);
		dump(argv[2], "restore.w", run, w, sizeof(w));
		dump(argv[2], "restore.tab", run, tab, 2 * n * sizeof(*tab));
	}
	snprintf(path, sizeof(path), "%s/seen.%d.%d", argv[2], run, rank);
	seen = fopen(path, "w");
	if (!seen) {
		perror(path);
		return 1;
	}
	while (sampler[0] < EPOCHS) {
		int64_t contrib[NW] = { 0 };
		uint64_t next, cnt;

		order(sampler[0], perm);
		cnt = hvd_ckpt_sampler_batch(EPOCH_SIZE, sampler[1], rank, size,
					     BATCH, pos);
		for (uint64_t x = 0; x < cnt; x++) {
			fprintf(seen, "%" PRIu64 " %" PRIu64 "\n", sampler[0],
				perm[pos[x]]);
			for (int k = 0; k < NW; k++)
				contrib[k] += g(perm[pos[x]], k);
		}
		/* the forward/backward pass: gradients summed over ranks */
		if ((st = hvd_allreduce(contrib, contrib, NW, HVD_INT64,
					HVD_SUM)) != HVD_OK)
			fail("allreduce", st, 1);
		hvd_ckpt_fence(ck);
		for (int k = 0; k < NW; k++)
			w[k] += contrib[k];
		/* the sharded state: this rank's block, updated with every
		 * sample of the step (as a sharded optimizer would) */
		next = hvd_ckpt_sampler_advance(EPOCH_SIZE, sampler[1], size,
						BATCH);
		for (uint64_t p = sampler[1]; p < next; p++)
			for (uint64_t j = 0; j < n; j++) {
				tab[2 * j] += h(perm[p], first + j, 0);
				tab[2 * j + 1] += h(perm[p], first + j, 1);
			}
		sampler[1] = next;
		if (sampler[1] == EPOCH_SIZE) {
			sampler[0]++;
			sampler[1] = 0;
		}
		step++;
		if (stop_after > 0 && ++steps == stop_after) {
			fclose(seen);
			if ((st = hvd_ckpt_save(ck, step)) != HVD_OK ||
			    (st = hvd_ckpt_wait(ck)) != HVD_OK)
				fail("save", st, 1);
			snprintf(w_name, sizeof(w_name), "save.w");
			snprintf(t_name, sizeof(t_name), "save.tab");
			dump(argv[2], w_name, run, w, sizeof(w));
			dump(argv[2], t_name, run, tab, 2 * n * sizeof(*tab));
			printf("stopped at step %ld: epoch %" PRIu64
			       " consumed %" PRIu64 " (rank %d of %d)\n", step,
			       sampler[0], sampler[1], rank, size);
			hvd_ckpt_close(ck);
			hvd_finalize();
			free(tab);
			return good ? HVD_CKPT_EXIT_STATUS : 1;
		}
		if ((st = hvd_ckpt_step(ck, step, &stop)) != HVD_OK)
			fail("step", st, 1);
	}
	fclose(seen);
	good &= check("finished", sampler[0], sampler[1], w, tab, first, n);
	if ((st = hvd_ckpt_close(ck)) != HVD_OK)
		fail("close", st, 1);
	hvd_finalize();
	free(tab);
	return good ? 0 : 1;
}

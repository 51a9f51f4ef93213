/*
 * ckpt_prog.c - the program the checkpoint tests run (alone or under
 * tests/runtime/launch.sh): restore, check that what was restored is
 * exactly the state of the restored step (never a mix of two steps), then
 * run steps with checkpoints.  Buffer contents are a function of (step,
 * rank, index), so a torn checkpoint cannot pass for a good one.
 *
 *	ckpt_prog DIR STEPS EVERY [--keep K] [--async] [--overlap]
 *	          [--no-fence] [--bytes N] [--compute-ms MS] [--times]
 *	          [--expect-error] [--replicated-only]
 *
 * Each step computes (reading the buffers), calls hvd_ckpt_fence() (the
 * program is about to modify them; --no-fence leaves it out, to show what
 * the fence prevents), fills the buffers with the step's values and calls
 * hvd_ckpt_step().  --overlap: async with config.overlap (the staging copy
 * runs in the background while the next step computes).
 *
 * Prints "restored STEP ok" (or "restored STEP BAD"), one line per step
 * with --times ("step S blocked SECONDS"), "done STEP" at the end, or
 * "stopped STEP" when a stop signal ended the run (exit status 85).
 * After a stop every rank raises SIGUSR1 and SIGTERM once more, after
 * hvd_ckpt_close(): a late copy of the signal must not kill it.
 */
#include <hvd.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CKPT_PROG_SOLO set: a plain process without hvd_init() (no PMIx server
 * around), which the checkpointer treats as a world of one. */

static uint64_t *repl, *mine;
static size_t nrepl, nmine;
static int rank;

static uint64_t word(long step, int r, size_t i)
{
	return (uint64_t)step << 40 ^ (uint64_t)(r + 1) << 32 ^ (uint64_t)i;
}

static void fill(long step)
{
	for (size_t i = 0; i < nrepl; i++)
		repl[i] = word(step, -1, i);
	for (size_t i = 0; i < nmine; i++)
		mine[i] = word(step, rank, i);
}

static int check(long step)
{
	for (size_t i = 0; i < nrepl; i++)
		if (repl[i] != word(step, -1, i))
			return 0;
	for (size_t i = 0; i < nmine; i++)
		if (mine[i] != word(step, rank, i))
			return 0;
	return 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Busy compute: what async writes must overlap with. */
static volatile double sink;

static void compute(double ms)
{
	double end = now() + ms / 1000.0, acc = 0;

	while (now() < end)
		for (int i = 0; i < 1000; i++)
			acc += i * 0.5;
	sink = acc;
}

int main(int argc, char **argv)
{
	hvd_ckpt_config_t cfg = { 0 };
	hvd_ckpt_t *ck;
	long steps, step = 0, every;
	size_t bytes = 1 << 16;
	double compute_ms = 0;
	int times = 0, expect_error = 0, stop = 0, size = 1, repl_only = 0;
	int fence = 1;
	hvd_status_t st;

	if (argc < 4) {
		fprintf(stderr, "usage: ckpt_prog DIR STEPS EVERY [options]\n");
		return 2;
	}
	cfg.dir = argv[1];
	steps = atol(argv[2]);
	every = atol(argv[3]);
	cfg.every = every;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--async") == 0)
			cfg.async = 1;
		else if (strcmp(argv[i], "--overlap") == 0)
			cfg.async = cfg.overlap = 1;
		else if (strcmp(argv[i], "--no-fence") == 0)
			fence = 0;
		else if (strcmp(argv[i], "--times") == 0)
			times = 1;
		else if (strcmp(argv[i], "--expect-error") == 0)
			expect_error = 1;
		else if (strcmp(argv[i], "--replicated-only") == 0)
			repl_only = 1;
		else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc)
			cfg.keep = atoi(argv[++i]);
		else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc)
			bytes = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--compute-ms") == 0 && i + 1 < argc)
			compute_ms = atof(argv[++i]);
		else {
			fprintf(stderr, "ckpt_prog: bad option %s\n", argv[i]);
			return 2;
		}
	}
	if (!getenv("CKPT_PROG_SOLO")) {
		st = hvd_init();
		if (st != HVD_OK) {
			fprintf(stderr, "ckpt_prog: hvd_init: %s\n",
				hvd_last_error());
			return 1;
		}
		rank = hvd_rank();
		size = hvd_size();
	}
	if (getenv("CKPT_PROG_PIDDIR")) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%d", getenv("CKPT_PROG_PIDDIR"),
			 rank);
		f = fopen(path, "w");
		if (f) {
			fprintf(f, "%ld\n", (long)getpid());
			fclose(f);
		}
	}
	/* half replicated, half per rank */
	nrepl = bytes / 2 / sizeof(uint64_t);
	nmine = repl_only ? 0 : bytes / 2 / sizeof(uint64_t);
	repl = calloc(nrepl + 1, sizeof(uint64_t));
	mine = calloc(nmine + 1, sizeof(uint64_t));
	if (hvd_ckpt_open(&cfg, &ck) != HVD_OK) {
		fprintf(stderr, "ckpt_prog: [%d] open: %s\n", rank,
			hvd_last_error());
		return 1;
	}
	hvd_ckpt_register(ck, "repl", repl, nrepl * sizeof(uint64_t),
			  HVD_CKPT_REPLICATED);
	if (nmine)
		hvd_ckpt_register(ck, "mine", mine, nmine * sizeof(uint64_t),
				  HVD_CKPT_PER_RANK);
	fill(0x7777);
	st = hvd_ckpt_restore(ck, &step);
	if (st != HVD_OK) {
		fprintf(stderr, "ckpt_prog: [%d] restore: %s: %s\n", rank,
			hvd_status_name(st), hvd_last_error());
		hvd_ckpt_close(ck);
		return expect_error ? 3 : 1;
	}
	if (rank == 0 || !check(step)) {
		printf("restored %ld %s (rank %d of %d)\n", step,
		       step == 0 || check(step) ? "ok" : "BAD", rank, size);
		fflush(stdout);
	}
	for (long s = step + 1; s <= steps; s++) {
		double t0, fenced;

		compute(compute_ms);
		t0 = now();
		if (fence && hvd_ckpt_fence(ck) != HVD_OK) {
			fprintf(stderr, "ckpt_prog: [%d] fence: %s\n", rank,
				hvd_last_error());
			return 1;
		}
		fenced = now() - t0;
		fill(s);
		t0 = now();
		st = hvd_ckpt_step(ck, s, &stop);
		if (times && rank == 0)
			printf("step %ld blocked %.6f\n", s,
			       fenced + now() - t0);
		if (st != HVD_OK) {
			fprintf(stderr, "ckpt_prog: [%d] step %ld: %s: %s\n",
				rank, s, hvd_status_name(st), hvd_last_error());
			hvd_ckpt_close(ck);
			return expect_error ? 3 : 1;
		}
		if (stop) {
			step = s;
			break;
		}
		step = s;
	}
	st = hvd_ckpt_close(ck);
	if (st != HVD_OK) {
		fprintf(stderr, "ckpt_prog: [%d] close: %s: %s\n", rank,
			hvd_status_name(st), hvd_last_error());
		return expect_error ? 3 : 1;
	}
	if (rank == 0)
		printf("%s %ld\n", stop ? "stopped" : "done", step);
	/* A rank's own copy of the stop signal can come after the others'
	 * stop reached it through the per-step allreduce, and after it
	 * closed: it must still exit with 85 (srun forwards the signal to
	 * each node in turn; one rank died of its SIGUSR1 this way). */
	if (stop) {
		raise(SIGUSR1);
		raise(SIGTERM);
	}
	if (!getenv("CKPT_PROG_SOLO"))
		hvd_finalize();
	free(repl);
	free(mine);
	return stop ? HVD_CKPT_EXIT_STATUS : 0;
}

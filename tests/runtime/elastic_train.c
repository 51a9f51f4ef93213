/*
 * elastic_train.c - a small training run under hvd_elastic_run, for the
 * elastic tests (tests/runtime/elastic.sh, tests/slurm/elastic_*.sh).
 *
 * Logistic regression of a synthetic, deterministic data set (every rank
 * makes the same one): NTRAIN samples of DIM features labelled by a fixed
 * teacher with noise.  Each epoch visits the samples in an order shuffled
 * by the epoch number; a step takes the next BATCH samples per rank from
 * the global position `pos`, so after a change of size the rest of the
 * epoch is split over the new ranks and every sample of it is still used
 * exactly once.  That is checked, not assumed: every step also allreduces
 * which samples each rank used into a replicated count per sample (part of
 * the state, committed and rolled back with the weights), and each epoch
 * end prints how many samples were seen exactly once.
 *
 * Output (rank 0 unless noted; stdout, one line each):
 *   start rank R size S pid P                   every rank
 *   step N epoch E size S t=<unix seconds>       every step, rank 0
 *   sync epoch Q rank R size S hash H           every rank, at each sync
 *   reset epoch Q rank R size S t=<unix seconds>  every rank, after each
 *   epoch E seen-once K of N                    each epoch end
 *   done size S steps N resets R acc A          at the end
 *
 * Arguments: [epochs] (default 3).  Environment: ELASTIC_STEP_MS (sleep per
 * step, default 0), ELASTIC_COMMIT (steps between commits, default 1),
 * ELASTIC_UNTIL_SIZE (more epochs while the world has fewer ranks: a
 * test that adds a rank cannot see the world finish before it arrives).
 * Exit status 0 when training finished and every epoch saw every sample
 * once; 3 on HVD_ERR_TOO_FEW_RANKS (after printing "too-few"), 4 when
 * removed, 1 otherwise.
 */
#include "hvd.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define DIM 16
#define NTRAIN 2048
#define NTEST 1024
#define BATCH 16

struct state {
	float w[DIM + 1];
	int64_t epoch, pos, step;
	int32_t seen[NTRAIN];
};

static struct state cur, saved;
static float xtr[NTRAIN][DIM], xte[NTEST][DIM];
static int ytr[NTRAIN], yte[NTEST];
static int epochs = 3, step_ms, commit_every = 1, resets, bad_epochs;
static int until_size; /* ELASTIC_UNTIL_SIZE: train on while smaller */
static int32_t perm[NTRAIN];

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static void make_data(void)
{
	uint64_t s = 12345;
	float teacher[DIM];

	for (int d = 0; d < DIM; d++)
		teacher[d] = (float)(uniform(&s) * 2 - 1);
	for (int i = 0; i < NTRAIN + NTEST; i++) {
		float *x = i < NTRAIN ? xtr[i] : xte[i - NTRAIN];
		double z = 0;

		for (int d = 0; d < DIM; d++) {
			x[d] = (float)(uniform(&s) * 2 - 1);
			z += x[d] * teacher[d];
		}
		z += (uniform(&s) - 0.5) * 0.4; /* label noise */
		if (i < NTRAIN)
			ytr[i] = z > 0;
		else
			yte[i - NTRAIN] = z > 0;
	}
}

static void shuffle(int64_t epoch)
{
	uint64_t s = 777 + (uint64_t)epoch;

	for (int i = 0; i < NTRAIN; i++)
		perm[i] = i;
	for (int i = NTRAIN - 1; i > 0; i--) {
		int j = (int)(rng_next(&s) % (uint64_t)(i + 1));
		int32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
}

static double wall(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static uint64_t hash_state(const struct state *st)
{
	const unsigned char *p = (const unsigned char *)st;
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < sizeof(*st); i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static double accuracy(void)
{
	int good = 0;

	for (int i = 0; i < NTEST; i++) {
		double z = cur.w[DIM];

		for (int d = 0; d < DIM; d++)
			z += cur.w[d] * xte[i][d];
		good += (z > 0) == yte[i];
	}
	return (double)good / NTEST;
}

/* One step: this rank's share of the next size x BATCH samples. */
static hvd_status_t step(void)
{
	static float grad[DIM + 2];
	static int32_t inc[NTRAIN];
	int r = hvd_rank(), n = hvd_size();
	hvd_handle_t hg, hs;
	hvd_status_t st, st2;

	memset(grad, 0, sizeof(grad));
	memset(inc, 0, sizeof(inc));
	for (int j = 0; j < BATCH; j++) {
		int64_t g = cur.pos + (int64_t)r * BATCH + j;
		int i;
		double z, p, e;

		if (g >= NTRAIN)
			break;
		i = perm[g];
		inc[i]++;
		z = cur.w[DIM];
		for (int d = 0; d < DIM; d++)
			z += cur.w[d] * xtr[i][d];
		p = 1.0 / (1.0 + exp(-z));
		e = p - ytr[i];
		for (int d = 0; d < DIM; d++)
			grad[d] += (float)(e * xtr[i][d]);
		grad[DIM] += (float)e;
		grad[DIM + 1] += 1; /* samples */
	}
	st = hvd_allreduce_async("grad", HVD_IN_PLACE, grad, DIM + 2,
				 HVD_FLOAT32, HVD_SUM, NULL, &hg);
	if (st != HVD_OK)
		return st;
	st = hvd_allreduce_async("seen", HVD_IN_PLACE, inc, NTRAIN, HVD_INT32,
				 HVD_SUM, NULL, &hs);
	st2 = hvd_wait(hg);
	if (st == HVD_OK)
		st = hvd_wait(hs);
	if (st2 != HVD_OK)
		return st2;
	if (st != HVD_OK)
		return st;
	for (int d = 0; d <= DIM; d++)
		cur.w[d] -= 0.5f * grad[d] / grad[DIM + 1];
	for (int i = 0; i < NTRAIN; i++)
		cur.seen[i] += inc[i];
	cur.pos += (int64_t)n * BATCH;
	cur.step++;
	if (cur.pos >= NTRAIN) {
		int once = 0;

		for (int i = 0; i < NTRAIN; i++)
			once += cur.seen[i] == 1;
		if (r == 0)
			printf("epoch %lld seen-once %d of %d\n",
			       (long long)cur.epoch, once, NTRAIN);
		if (once != NTRAIN)
			bad_epochs++;
		memset(cur.seen, 0, sizeof(cur.seen));
		cur.epoch++;
		cur.pos = 0;
		shuffle(cur.epoch);
	}
	if (r == 0)
		printf("step %lld epoch %lld size %d t=%.6f\n",
		       (long long)cur.step, (long long)cur.epoch, n, wall());
	fflush(stdout);
	return HVD_OK;
}

static hvd_status_t train(void *arg)
{
	(void)arg;
	while (cur.epoch < epochs || hvd_size() < until_size) {
		hvd_status_t st = step();

		if (st != HVD_OK)
			return st;
		if (cur.step % commit_every == 0) {
			saved = cur; /* commit: the copy, then the check */
			st = hvd_elastic_check_hosts();
			if (st != HVD_OK)
				return st;
		}
		if (step_ms) {
			struct timespec ts = {step_ms / 1000,
					      (step_ms % 1000) * 1000000L};

			nanosleep(&ts, NULL);
		}
	}
	return HVD_OK;
}

static void restore(void *arg)
{
	(void)arg;
	cur = saved;
	shuffle(cur.epoch);
}

static hvd_status_t sync_state(void *arg)
{
	hvd_status_t st;

	(void)arg;
	st = hvd_broadcast(&cur, sizeof(cur), HVD_UINT8, 0);
	if (st != HVD_OK)
		return st;
	saved = cur;
	shuffle(cur.epoch);
	printf("sync epoch %u rank %d size %d hash %016llx\n",
	       hvd_elastic_epoch(), hvd_rank(), hvd_size(),
	       (unsigned long long)hash_state(&cur));
	fflush(stdout);
	return HVD_OK;
}

static void on_reset(void *arg)
{
	(void)arg;
	resets++;
	printf("reset epoch %u rank %d size %d t=%.6f\n", hvd_elastic_epoch(),
	       hvd_rank(), hvd_size(), wall());
	fflush(stdout);
}

int main(int argc, char **argv)
{
	hvd_elastic_hooks_t hooks = {train, restore, sync_state, on_reset};
	const char *e;
	hvd_status_t st;

	if (argc > 1)
		epochs = atoi(argv[1]);
	if ((e = getenv("ELASTIC_STEP_MS")))
		step_ms = atoi(e);
	if ((e = getenv("ELASTIC_UNTIL_SIZE")))
		until_size = atoi(e);
	if ((e = getenv("ELASTIC_COMMIT")) && atoi(e) > 0)
		commit_every = atoi(e);
	setvbuf(stdout, NULL, _IOLBF, 0);
	make_data();
	shuffle(0);
	st = hvd_init();
	if (st != HVD_OK) {
		fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
		return st == HVD_ERR_REMOVED ? 4 : 1;
	}
	printf("start rank %d size %d pid %d epoch %u\n", hvd_rank(),
	       hvd_size(), (int)getpid(), hvd_elastic_epoch());
	st = hvd_elastic_run(&hooks, NULL);
	if (st == HVD_ERR_TOO_FEW_RANKS) {
		printf("too-few rank %d size %d epoch %lld\n", hvd_rank(),
		       hvd_size(), (long long)cur.epoch);
		fprintf(stderr, "%s\n", hvd_last_error());
		hvd_finalize();
		return 3;
	}
	if (st != HVD_OK) {
		fprintf(stderr, "rank %d: %s\n", hvd_rank(), hvd_last_error());
		if (st == HVD_ERR_REMOVED) {
			hvd_finalize();
			return 4;
		}
		hvd_finalize();
		return 1;
	}
	if (hvd_rank() == 0)
		printf("done size %d steps %lld resets %d acc %.4f\n",
		       hvd_size(), (long long)cur.step, resets, accuracy());
	hvd_finalize();
	return bad_epochs ? 1 : 0;
}

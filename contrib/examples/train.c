/*
 * train.c - data-parallel training with libhvd and its checkpointer.
 *
 * Softmax regression (64 pixels + bias -> 10 classes, SGD with momentum) on
 * the 8x8 handwritten digits set (data/digits.csv.gz, 1797 samples).  The
 * first 1500 samples are for training, split evenly between the ranks; the
 * last 297 are the test set.  Every step each rank computes the gradient of
 * its mini-batch, hvd_allreduce sums them (float64, the same order on every
 * run), and every rank applies the same update, so the weights stay
 * identical everywhere.
 *
 * Checkpointed state: the weights and momentum (replicated), each rank's
 * shuffled order of its shard and its random generator (per rank), and a
 * metadata line with the epoch.  Everything that influences the result is
 * in the checkpoint, so a run killed at any step and restarted ends with
 * weights bit-identical to an uninterrupted run with the same seed (the
 * "weights checksum" line).
 *
 * With --async the checkpoint is written in the background in overlap mode:
 * the staging copy of the state runs while the next step computes its
 * gradient (which only reads the weights), and hvd_ckpt_fence() holds the
 * update until the copy is taken.
 *
 *	srun --horovod=ckpt-every=50 -n 2 ./train --steps 400
 *	hvdrun -np 2 ./train --ckpt-dir /var/tmp/ck --ckpt-every 50
 *
 * Exit status: 0 done, HVD_CKPT_EXIT_STATUS (85) stopped by SIGTERM/SIGUSR1
 * after a checkpoint (requeue and it resumes), 1 error.
 */
#include <hvd.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TRAIN_DATA
#define TRAIN_DATA "data/digits.csv.gz"
#endif

#define NFEAT 64
#define NIN (NFEAT + 1) /* with the bias */
#define NCLASS 10
#define NSAMPLES 1797
#define NTRAIN 1500

struct opts {
	long steps;
	int batch;
	uint64_t seed;
	double lr, momentum;
	const char *data;
	const char *ckpt_dir;
	long ckpt_every;
	int keep;
	int async;
	long crash_at;   /* tests: SIGKILL this process at that step */
	long sleep_ms;   /* tests: slow each step down               */
	long print_every;
};

static double x[NSAMPLES][NIN];
static int y[NSAMPLES];

/* splitmix64: small, good, and its state is one word to checkpoint */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int load_data(const char *path)
{
	char cmd[4200], line[1024];
	size_t len = strlen(path);
	int gz = len > 3 && strcmp(path + len - 3, ".gz") == 0;
	FILE *f;
	int n = 0;

	if (access(path, R_OK) != 0) {
		fprintf(stderr, "train: cannot read the data set %s: %s (give "
			"--data PATH to contrib/examples/data/digits.csv.gz)\n",
			path, strerror(errno));
		return -1;
	}
	if (gz) {
		snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
		f = popen(cmd, "r");
	} else {
		f = fopen(path, "r");
	}
	if (!f) {
		fprintf(stderr, "train: cannot open %s\n", path);
		return -1;
	}
	while (n < NSAMPLES && fgets(line, sizeof(line), f)) {
		char *p = line, *end;

		for (int j = 0; j <= NFEAT; j++) {
			long v = strtol(p, &end, 10);

			if (end == p || (j < NFEAT && *end != ',')) {
				fprintf(stderr, "train: %s line %d: expected "
					"65 comma-separated integers\n", path,
					n + 1);
				goto err;
			}
			if (j < NFEAT)
				x[n][j] = (double)v / 16.0;
			else
				y[n] = (int)v;
			p = end + 1;
		}
		if (y[n] < 0 || y[n] >= NCLASS)
			goto err;
		x[n][NFEAT] = 1.0;
		n++;
	}
	if (gz)
		pclose(f);
	else
		fclose(f);
	if (n != NSAMPLES) {
		fprintf(stderr, "train: %s: %d samples, expected %d\n", path, n,
			NSAMPLES);
		return -1;
	}
	return 0;
err:
	if (gz)
		pclose(f);
	else
		fclose(f);
	return -1;
}

/* Softmax probabilities of sample i; returns the loss -log p[y]. */
static double forward(const double *w, int i, double *p)
{
	double mx = -INFINITY, sum = 0;

	for (int k = 0; k < NCLASS; k++) {
		double z = 0;

		for (int j = 0; j < NIN; j++)
			z += w[k * NIN + j] * x[i][j];
		p[k] = z;
		if (z > mx)
			mx = z;
	}
	for (int k = 0; k < NCLASS; k++) {
		p[k] = exp(p[k] - mx);
		sum += p[k];
	}
	for (int k = 0; k < NCLASS; k++)
		p[k] /= sum;
	return -log(p[y[i]] > 1e-300 ? p[y[i]] : 1e-300);
}

static double accuracy(const double *w)
{
	int good = 0;
	double p[NCLASS];

	for (int i = NTRAIN; i < NSAMPLES; i++) {
		int best = 0;

		forward(w, i, p);
		for (int k = 1; k < NCLASS; k++)
			if (p[k] > p[best])
				best = k;
		good += best == y[i];
	}
	return (double)good / (NSAMPLES - NTRAIN);
}

static uint64_t checksum(const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static void shuffle(int *perm, int n, uint64_t *rng)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(next_rand(rng) % (uint64_t)(i + 1));
		int t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
}

static void usage(void)
{
	printf("usage: train [--steps N] [--batch B] [--seed S] [--lr LR]\n"
	       "             [--ckpt-dir DIR] [--ckpt-every N] [--keep K] "
	       "[--async]\n"
	       "             [--data PATH] [--print-every N]\n"
	       "Checkpoint defaults come from HOROVOD_CHECKPOINT_DIR/EVERY/KEEP "
	       "(srun --horovod=ckpt-every=N,ckpt-dir=PATH).\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->steps = 400;
	o->batch = 32;
	o->seed = 42;
	o->lr = 0.2;
	o->momentum = 0.9;
	o->data = getenv("HVD_TRAIN_DATA") ? getenv("HVD_TRAIN_DATA")
					   : TRAIN_DATA;
	o->crash_at = -1;
	o->print_every = 50;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--async") == 0) {
			o->async = 1;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage();
			exit(0);
		}
		if (!v) {
			fprintf(stderr, "train: %s needs a value\n", a);
			return -1;
		}
		i++;
		if (strcmp(a, "--steps") == 0)
			o->steps = atol(v);
		else if (strcmp(a, "--batch") == 0)
			o->batch = atoi(v);
		else if (strcmp(a, "--seed") == 0)
			o->seed = strtoull(v, NULL, 10);
		else if (strcmp(a, "--lr") == 0)
			o->lr = atof(v);
		else if (strcmp(a, "--data") == 0)
			o->data = v;
		else if (strcmp(a, "--ckpt-dir") == 0)
			o->ckpt_dir = v;
		else if (strcmp(a, "--ckpt-every") == 0)
			o->ckpt_every = atol(v);
		else if (strcmp(a, "--keep") == 0)
			o->keep = atoi(v);
		else if (strcmp(a, "--crash-at") == 0)
			o->crash_at = atol(v);
		else if (strcmp(a, "--sleep-ms") == 0)
			o->sleep_ms = atol(v);
		else if (strcmp(a, "--print-every") == 0)
			o->print_every = atol(v);
		else {
			fprintf(stderr, "train: unknown option %s\n", a);
			usage();
			return -1;
		}
	}
	if (o->steps < 1 || o->batch < 1 || o->print_every < 1) {
		fprintf(stderr, "train: --steps, --batch and --print-every "
			"must be positive\n");
		return -1;
	}
	return 0;
}

#define CHECK(call)                                                            \
	do {                                                                   \
		hvd_status_t st_ = (call);                                     \
		if (st_ != HVD_OK) {                                           \
			fprintf(stderr, "train: [%d] %s: %s: %s\n", rank,      \
				#call, hvd_status_name(st_),                   \
				hvd_last_error());                             \
			goto err;                                              \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	static double w[NCLASS * NIN], mom[NCLASS * NIN];
	static double grad[NCLASS * NIN + 1];
	hvd_ckpt_config_t cfg = { 0 };
	hvd_ckpt_t *ck = NULL;
	struct opts o;
	int rank = 0, size, shard, *perm = NULL, stop = 0, status = 1;
	uint64_t rng;
	long step = 0, start;
	char meta[128];
	double t0, first_loss = -1, last_loss = 0, first_acc;

	if (parse(argc, argv, &o) != 0)
		return 2;
	CHECK(hvd_init());
	rank = hvd_rank();
	size = hvd_size();
	if (load_data(o.data) != 0)
		goto err;
	shard = NTRAIN / size;
	perm = malloc(sizeof(*perm) * (size_t)shard);
	if (!perm)
		goto err;
	/* initial state, the same on every rank for the replicated part */
	rng = o.seed;
	for (int i = 0; i < NCLASS * NIN; i++)
		w[i] = ((double)(next_rand(&rng) >> 11) / 9007199254740992.0 -
			0.5) * 0.02;
	rng = o.seed * 1000003ULL + (uint64_t)rank;
	for (int i = 0; i < shard; i++)
		perm[i] = rank * shard + i;
	shuffle(perm, shard, &rng);

	cfg.dir = o.ckpt_dir;
	cfg.every = o.ckpt_every;
	cfg.keep = o.keep;
	cfg.async = o.async;
	cfg.overlap = o.async; /* we call hvd_ckpt_fence() before updates */
	if (!cfg.dir && !getenv("HOROVOD_CHECKPOINT_DIR"))
		cfg.dir = "train-ckpt";
	CHECK(hvd_ckpt_open(&cfg, &ck));
	CHECK(hvd_ckpt_register(ck, "weights", w, sizeof(w),
				HVD_CKPT_REPLICATED));
	CHECK(hvd_ckpt_register(ck, "momentum", mom, sizeof(mom),
				HVD_CKPT_REPLICATED));
	CHECK(hvd_ckpt_register(ck, "shard_order", perm,
				sizeof(*perm) * (size_t)shard,
				HVD_CKPT_PER_RANK));
	CHECK(hvd_ckpt_register(ck, "rng", &rng, sizeof(rng),
				HVD_CKPT_PER_RANK));
	CHECK(hvd_ckpt_restore(ck, &start));
	first_acc = accuracy(w);
	if (rank == 0) {
		if (start > 0) {
			size_t mlen = 0;

			memset(meta, 0, sizeof(meta));
			hvd_ckpt_get_meta(ck, meta, sizeof(meta) - 1, &mlen);
			printf("train: resumed from checkpoint step %ld (%s)\n",
			       start, meta);
		} else {
			printf("train: %s\n", hvd_last_error()[0]
				       ? hvd_last_error()
				       : "starting from step 0");
		}
		printf("train: %d ranks, %d training samples each, batch %d, "
		       "%ld steps, test accuracy %.3f\n", size, shard, o.batch,
		       o.steps, first_acc);
		fflush(stdout);
	}
	t0 = (double)clock() / CLOCKS_PER_SEC;
	for (step = start + 1; step <= o.steps; step++) {
		long pos = ((step - 1) * o.batch) % shard;
		double p[NCLASS], loss = 0;

		memset(grad, 0, sizeof(grad));
		for (int b = 0; b < o.batch; b++) {
			int i = perm[(pos + b) % shard];

			loss += forward(w, i, p);
			for (int k = 0; k < NCLASS; k++) {
				double d = p[k] - (k == y[i]);

				for (int j = 0; j < NIN; j++)
					grad[k * NIN + j] += d * x[i][j];
			}
		}
		grad[NCLASS * NIN] = loss;
		CHECK(hvd_allreduce(HVD_IN_PLACE, grad, NCLASS * NIN + 1,
				    HVD_FLOAT64, HVD_SUM));
		/* about to modify the checkpointed state (weights, momentum,
		 * then the shard order and the generator): the background
		 * copy of the last checkpoint must be taken first */
		CHECK(hvd_ckpt_fence(ck));
		for (int j = 0; j < NCLASS * NIN; j++) {
			double g = grad[j] / (double)(o.batch * size);

			mom[j] = o.momentum * mom[j] + g;
			w[j] -= o.lr * mom[j];
		}
		loss = grad[NCLASS * NIN] / (double)(o.batch * size);
		if (first_loss < 0)
			first_loss = loss;
		last_loss = loss;
		/* a new epoch of this rank's shard: reshuffle */
		if ((pos + o.batch) >= shard)
			shuffle(perm, shard, &rng);
		if (rank == 0 && (step % o.print_every == 0 || step == o.steps)) {
			printf("step %5ld  loss %.4f  test accuracy %.3f\n",
			       step, loss, accuracy(w));
			fflush(stdout);
		}
		if (step == o.crash_at) {
			fprintf(stderr, "train: [%d] killing myself at step "
				"%ld (--crash-at)\n", rank, step);
			raise(SIGKILL);
		}
		snprintf(meta, sizeof(meta), "epoch %ld",
			 (step * o.batch) / shard);
		CHECK(hvd_ckpt_set_meta(ck, meta, strlen(meta) + 1));
		CHECK(hvd_ckpt_step(ck, step, &stop));
		if (stop)
			break;
		if (o.sleep_ms > 0) {
			struct timespec ts = { o.sleep_ms / 1000,
					       (o.sleep_ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	CHECK(hvd_ckpt_close(ck));
	ck = NULL;
	if (rank == 0) {
		if (stop)
			printf("train: stop requested at step %ld: checkpoint "
			       "written, exiting with status %d to be "
			       "requeued\n", step, HVD_CKPT_EXIT_STATUS);
		else
			printf("train: done: %ld steps (%ld in this run, %.2f s "
			       "CPU), loss %.4f -> %.4f, test accuracy %.3f -> "
			       "%.3f\n", o.steps, o.steps - start,
			       (double)clock() / CLOCKS_PER_SEC - t0,
			       first_loss < 0 ? 0 : first_loss, last_loss,
			       first_acc, accuracy(w));
		printf("train: weights checksum %016llx\n",
		       (unsigned long long)checksum(w, sizeof(w)));
		printf("train: checkpoints in %s (hvd-ckpt list %s)\n",
		       cfg.dir ? cfg.dir : getenv("HOROVOD_CHECKPOINT_DIR"),
		       cfg.dir ? cfg.dir : getenv("HOROVOD_CHECKPOINT_DIR"));
		fflush(stdout);
	}
	status = stop ? HVD_CKPT_EXIT_STATUS : 0;
err:
	if (ck)
		hvd_ckpt_close(ck);
	free(perm);
	hvd_finalize();
	return status;
}

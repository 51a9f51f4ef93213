/*
 * ckpt-bench.c - checkpoint write speed against dd, in the same run.
 *
 *	hvdrun -np 2 ckpt-bench [--size 1G] [--dir /var/tmp] [--reps 3]
 *
 * Works in DIR/hvd-ckpt-bench (emptied before and removed after).
 *
 * State of SIZE bytes in all (SIZE/N per rank, per-rank buffers).  Prints:
 *   dd    `dd if=/dev/zero of=DIR/dd.bin bs=16M conv=fsync` of the same
 *         bytes to the same file system (rank 0, the others wait);
 *   sync  hvd_ckpt_save(): write, fsync, commit on every rank; GB/s and the
 *         ratio to dd (target >= 0.7);
 *   async time the training loop is blocked per checkpoint (the save that
 *         stages, plus the steps of 20 ms until the commit), as a fraction
 *         of the synchronous write time (target <= 10%); a final
 *         hvd_ckpt_wait() still needed is reported apart.
 * Best of --reps for each.  A benchmark, not a test: the numbers depend on
 * the disk and on whatever else the machine is doing.
 */
#include <hvd.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double max_all(double v)
{
	hvd_allreduce(HVD_IN_PLACE, &v, 1, HVD_FLOAT64, HVD_MAX);
	return v;
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'G': case 'g': v *= 1 << 30; break;
	case 'M': case 'm': v *= 1 << 20; break;
	case 'K': case 'k': v *= 1 << 10; break;
	default: break;
	}
	return (size_t)v;
}

static double run_dd(const char *dir, size_t bytes)
{
	char of[8500], count[64];
	double t0 = now();
	pid_t pid;
	int status;

	snprintf(of, sizeof(of), "of=%s/dd.bin", dir);
	snprintf(count, sizeof(count), "count=%zu", bytes >> 24);
	pid = fork();
	if (pid == 0) {
		execlp("dd", "dd", "if=/dev/zero", of, "bs=16M", count,
		       "conv=fsync", "status=none", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || status != 0) {
		fprintf(stderr, "ckpt-bench: dd failed\n");
		return -1;
	}
	t0 = now() - t0;
	snprintf(of, sizeof(of), "%s/dd.bin", dir);
	unlink(of);
	return t0;
}

int main(int argc, char **argv)
{
	const char *dir = "/var/tmp";
	size_t total = (size_t)1 << 30, mine;
	int reps = 3, rank, size;
	double best_dd = 1e30, best_sync = 1e30, best_async = 1e30;
	double best_wait = 0;
	unsigned char *buf;
	hvd_ckpt_config_t cfg = { 0 };
	hvd_ckpt_t *ck;
	long step = 0, restored;
	char path[4200];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--size") == 0)
			total = parse_size(argv[i + 1]);
		else if (strcmp(argv[i], "--dir") == 0)
			dir = argv[i + 1];
		else if (strcmp(argv[i], "--reps") == 0)
			reps = atoi(argv[i + 1]);
	}
	if (hvd_init() != HVD_OK) {
		fprintf(stderr, "ckpt-bench: hvd_init: %s\n", hvd_last_error());
		return 1;
	}
	rank = hvd_rank();
	size = hvd_size();
	total = (total >> 24) << 24; /* whole 16 MiB blocks, for dd */
	mine = total / (size_t)size;
	buf = malloc(mine);
	if (!buf || total == 0) {
		fprintf(stderr, "ckpt-bench: cannot allocate %zu bytes\n", mine);
		return 1;
	}
	for (size_t i = 0; i < mine; i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13) ^ (unsigned char)rank;
	unsetenv("HOROVOD_CHECKPOINT_EVERY");
	/* a directory of its own, emptied first: older checkpoints of higher
	 * steps would count as the newest */
	snprintf(path, sizeof(path), "%s/hvd-ckpt-bench", dir);
	dir = path;
	if (rank == 0) {
		char cmd[4300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "ckpt-bench: cannot clean %s\n", dir);
	}
	hvd_barrier();
	if (rank == 0)
		printf("ckpt-bench: %d ranks, %.0f MiB of state (%.0f MiB per "
		       "rank), %s, best of %d\n", size, total / 1048576.0,
		       mine / 1048576.0, dir, reps);

	for (int async = 0; async <= 1; async++) {
		cfg.dir = dir;
		cfg.keep = 1;
		cfg.async = async;
		if (hvd_ckpt_open(&cfg, &ck) != HVD_OK ||
		    hvd_ckpt_register(ck, "state", buf, mine,
				      HVD_CKPT_PER_RANK) != HVD_OK) {
			fprintf(stderr, "ckpt-bench: %s\n", hvd_last_error());
			return 1;
		}
		/* what a training program does first; in async mode it
		 * also prepares the staging memory */
		if (hvd_ckpt_restore(ck, &restored) != HVD_OK) {
			fprintf(stderr, "ckpt-bench: restore: %s\n",
				hvd_last_error());
			return 1;
		}
		for (int r = 0; r < reps; r++) {
			double t, blocked = 0, t_end, staged, waited;
			int stop;

			if (!async) {
				hvd_barrier();
				if (rank == 0) {
					t = run_dd(dir, total);
					if (t > 0 && t < best_dd)
						best_dd = t;
				}
				hvd_barrier();
			}
			t = now();
			if (hvd_ckpt_save(ck, ++step) != HVD_OK) {
				fprintf(stderr, "ckpt-bench: save: %s\n",
					hvd_last_error());
				return 1;
			}
			blocked = now() - t;
			staged = blocked;
			if (!async) {
				blocked = max_all(blocked);
				if (blocked < best_sync)
					best_sync = blocked;
				continue;
			}
			/* training steps of 20 ms until the write is
			 * committed (every = 0: step() only polls); the
			 * same number on every rank, as step() is collective */
			t_end = max_all(3 * best_sync + 1) / 0.02;
			for (long k = 0; k < (long)t_end; k++) {
				struct timespec ts = { 0, 20000000L };

				nanosleep(&ts, NULL);
				t = now();
				hvd_ckpt_step(ck, step, &stop);
				blocked += now() - t;
			}
			t = now();
			hvd_ckpt_wait(ck);
			waited = max_all(now() - t);
			if (getenv("CKPT_BENCH_VERBOSE"))
				fprintf(stderr, "rank %d: save (staging copy) "
					"%.3f s, steps (polls, commit) %.3f s, "
					"final wait %.3f s\n", rank, staged,
					blocked - staged, waited);
			blocked = max_all(blocked);
			if (blocked < best_async) {
				best_async = blocked;
				best_wait = waited;
			}
		}
		hvd_ckpt_close(ck);
	}
	if (rank == 0) {
		printf("dd conv=fsync   %8.3f s  %6.2f GB/s\n", best_dd,
		       total / best_dd / 1e9);
		printf("sync checkpoint %8.3f s  %6.2f GB/s  %.2fx dd "
		       "(target >= 0.7x)\n", best_sync,
		       total / best_sync / 1e9, best_dd / best_sync);
		printf("async blocked   %8.3f s  %5.1f%% of the synchronous "
		       "write (target <= 10%%; staging copy + commit)\n",
		       best_async, 100 * best_async / best_sync);
		if (best_wait > 0.001)
			printf("async: the write was still running after %.1f s "
			       "of steps: hvd_ckpt_wait() %.3f s more\n",
			       3 * best_sync + 1, best_wait);
	}
	if (rank == 0) {
		char cmd[4300];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "ckpt-bench: cannot clean %s\n", dir);
	}
	free(buf);
	hvd_finalize();
	return 0;
}

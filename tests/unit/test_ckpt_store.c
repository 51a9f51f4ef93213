/*
 * test_ckpt_store.c - the checkpointer on real files, as a world of one:
 * save/restore, metadata, verification and fallback (flipped byte,
 * truncated file, missing manifest, stale `latest`), crash leftovers,
 * retention, async mode, stop signals chained to the program's handler,
 * per-rank state restored on another world size.
 *
 * Through libhvd's public API only, linked against libhvd itself: the
 * checkpointer tested is the one programs get, and a program that never
 * calls hvd_init() is a world of one there.  (Compiling the checkpointer's
 * sources into the test instead would need doubles of the collectives, and
 * a second copy of hvd_last_error() would take the place of libhvd's.)
 */
#include "config.h"

#include "tap.h"

#include <hvd.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define N 5000

static char root[256];
static float w[N];
static double rngstate[4];

static void fill(long step)
{
	for (int i = 0; i < N; i++)
		w[i] = (float)(step * 1000 + i);
	for (int i = 0; i < 4; i++)
		rngstate[i] = (double)step + i / 10.0;
}

static int check(long step)
{
	for (int i = 0; i < N; i++)
		if (w[i] != (float)(step * 1000 + i))
			return 0;
	for (int i = 0; i < 4; i++)
		if (rngstate[i] != (double)step + i / 10.0)
			return 0;
	return 1;
}

static hvd_ckpt_t *open_dir(const char *dir, int keep, int async)
{
	hvd_ckpt_config_t cfg = { .dir = dir, .every = 10, .keep = keep,
				  .async = async };
	hvd_ckpt_t *c = NULL;

	if (hvd_ckpt_open(&cfg, &c) != HVD_OK) {
		diag("open %s: %s", dir, hvd_last_error());
		return NULL;
	}
	hvd_ckpt_register(c, "weights", w, sizeof(w), HVD_CKPT_REPLICATED);
	hvd_ckpt_register(c, "rng", rngstate, sizeof(rngstate),
			  HVD_CKPT_PER_RANK);
	return c;
}

static long restore(const char *dir, int keep)
{
	hvd_ckpt_t *c = open_dir(dir, keep, 0);
	long step = -1;

	fill(999999);
	if (!c)
		return -2;
	if (hvd_ckpt_restore(c, &step) != HVD_OK) {
		diag("restore: %s", hvd_last_error());
		step = -3;
	}
	hvd_ckpt_close(c);
	return step;
}

static void path(char *buf, size_t n, const char *dir, long step,
		 const char *file)
{
	snprintf(buf, n, "%s/step-%08ld/%s", dir, step, file);
}

/* The whole of a small file, NUL-terminated (NULL when unreadable). */
static char *slurp(const char *p, size_t *len)
{
	FILE *f = fopen(p, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = n + 8192);

			if (!nb)
				break;
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);

		if (r == 0)
			break;
		n += r;
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static void spit(const char *p, const char *text, size_t len)
{
	FILE *f;

	unlink(p);
	f = fopen(p, "w");
	if (!f || fwrite(text, 1, len, f) != len)
		diag("cannot write %s", p);
	if (f)
		fclose(f);
}

/* DIR/latest without its newline ("" when absent). */
static void read_latest(const char *dir, char *out, size_t n)
{
	char p[400], *text;

	snprintf(p, sizeof(p), "%s/latest", dir);
	text = slurp(p, NULL);
	snprintf(out, n, "%s", text ? text : "");
	out[strcspn(out, "\n")] = '\0';
	free(text);
}

static void write_latest(const char *dir, const char *name)
{
	char p[400], line[300];

	snprintf(p, sizeof(p), "%s/latest", dir);
	snprintf(line, sizeof(line), "%s\n", name);
	spit(p, line, strlen(line));
}

static void flip_byte(const char *p, off_t off)
{
	int fd = open(p, O_RDWR);
	unsigned char ch;

	if (fd < 0 || pread(fd, &ch, 1, off) != 1)
		return;
	ch ^= 0x40;
	if (pwrite(fd, &ch, 1, off) != 1)
		diag("flip failed");
	close(fd);
}

static void save_steps(const char *dir, int keep, long from, long to)
{
	hvd_ckpt_t *c = open_dir(dir, keep, 0);

	for (long s = from; c && s <= to; s++) {
		int stop;

		fill(s);
		if (hvd_ckpt_step(c, s, &stop) != HVD_OK)
			diag("step %ld: %s", s, hvd_last_error());
	}
	hvd_ckpt_close(c);
}

static int count_dirs(const char *dir, const char *prefix)
{
	char cmd[600], out[64] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "ls -1 %s | grep -c '^%s' || true", dir,
		 prefix);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (!fgets(out, sizeof(out), f))
		out[0] = '\0';
	pclose(f);
	return atoi(out);
}

static void test_basic(void)
{
	char dir[300], p[400], latest[64];
	const char meta[] = "epoch=7 cursor=1234";
	char got[64];
	size_t len = 0;
	hvd_ckpt_t *c;
	long step = -1;
	int stop = 1;

	snprintf(dir, sizeof(dir), "%s/basic", root);
	c = open_dir(dir, 3, 0);
	ok(c != NULL, "open creates the directory");
	ok(hvd_ckpt_restore(c, &step) == HVD_OK && step == 0,
	   "nothing to restore: step 0");
	ok(strstr(hvd_last_error(), "no checkpoint") != NULL,
	   "and says why: %s", hvd_last_error());
	ok(hvd_ckpt_register(c, "late", w, 4, HVD_CKPT_REPLICATED) ==
		   HVD_ERR_INVALID_ARG,
	   "register after restore refused");
	fill(5);
	ok(hvd_ckpt_step(c, 5, &stop) == HVD_OK && stop == 0,
	   "step 5: not due");
	ok(count_dirs(dir, "step-") == 0, "nothing written");
	fill(10);
	hvd_ckpt_set_meta(c, meta, sizeof(meta));
	ok(hvd_ckpt_step(c, 10, &stop) == HVD_OK, "step 10: written");
	read_latest(dir, latest, sizeof(latest));
	is_str(latest, "step-00000010", "latest names it");
	path(p, sizeof(p), dir, 10, "MANIFEST");
	ok(access(p, F_OK) == 0, "manifest present");
	ok(count_dirs(dir, "step-00000010.partial") == 0,
	   "no partial left behind");
	hvd_ckpt_close(c);

	c = open_dir(dir, 3, 0);
	fill(0);
	ok(hvd_ckpt_restore(c, &step) == HVD_OK && step == 10,
	   "restored step 10");
	ok(check(10), "buffers hold step 10's data");
	ok(hvd_ckpt_get_meta(c, got, sizeof(got), &len) == HVD_OK &&
		   len == sizeof(meta) && memcmp(got, meta, len) == 0,
	   "metadata restored");
	ok(hvd_ckpt_get_meta(c, got, 4, &len) == HVD_ERR_INVALID_ARG,
	   "too small a buffer for the metadata refused");
	hvd_ckpt_close(c);
}

static void test_corruption(void)
{
	char dir[300], p[400], latest[64];
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/corrupt", root);
	save_steps(dir, 5, 1, 40); /* steps 10, 20, 30, 40 */
	ok(restore(dir, 5) == 40 && check(40), "newest restored when intact");

	path(p, sizeof(p), dir, 40, "replicated.bin");
	flip_byte(p, 1234);
	ok(restore(dir, 5) == 30 && check(30),
	   "flipped byte in step 40: falls back to 30");

	path(p, sizeof(p), dir, 30, "rank-00000.bin");
	stat(p, &sb);
	if (truncate(p, sb.st_size - 1) != 0)
		diag("truncate failed");
	ok(restore(dir, 5) == 20 && check(20),
	   "truncated file in step 30: falls back to 20");

	path(p, sizeof(p), dir, 20, "MANIFEST");
	unlink(p);
	ok(restore(dir, 5) == 10 && check(10),
	   "missing manifest in step 20: falls back to 10");
	read_latest(dir, latest, sizeof(latest));
	is_str(latest, "step-00000010", "stale latest repaired on restore");

	path(p, sizeof(p), dir, 10, "rank-00000.bin");
	unlink(p);
	ok(restore(dir, 5) == 0, "missing data file: nothing left to restore");
	ok(check(999999), "buffers untouched when nothing verifies");
}

static void test_stale_latest_and_leftovers(void)
{
	char dir[300], p[400];

	snprintf(dir, sizeof(dir), "%s/leftover", root);
	save_steps(dir, 3, 1, 20);
	/* a crash after the rename but before `latest` was updated */
	write_latest(dir, "step-00000010");
	/* and a crash in the middle of a later write */
	snprintf(p, sizeof(p), "%s/step-00000030.partial-99-1", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/step-00000030.partial-99-1/rank-00000.bin",
		 dir);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	ok(restore(dir, 3) == 20 && check(20),
	   "partial ignored, newest complete restored despite stale latest");
	ok(count_dirs(dir, "step-00000030.partial") == 0,
	   "partial directory from the crash cleaned");
}

static void test_retention(void)
{
	char dir[300];

	snprintf(dir, sizeof(dir), "%s/retention", root);
	save_steps(dir, 2, 1, 60);
	is_int(count_dirs(dir, "step-"), 2, "keep 2: two checkpoints left");
	ok(restore(dir, 2) == 60, "newest kept");
	save_steps(dir, 1, 61, 70);
	is_int(count_dirs(dir, "step-"), 1, "keep 1: one left");
	ok(restore(dir, 1) == 70, "and it is the newest");
}

static void test_async(void)
{
	char dir[300];
	hvd_ckpt_t *c;
	long step;

	snprintf(dir, sizeof(dir), "%s/async", root);
	c = open_dir(dir, 3, 1);
	for (long s = 1; c && s <= 30; s++) {
		int stop;

		fill(s);
		ok(hvd_ckpt_step(c, s, &stop) == HVD_OK || (diag("%s",
		   hvd_last_error()), 0), "async step %ld", s);
		/* the staging copy was taken: changing the buffers now must
		 * not change what is written */
		fill(s + 500);
	}
	ok(hvd_ckpt_wait(c) == HVD_OK, "wait flushes");
	hvd_ckpt_close(c);
	step = restore(dir, 3);
	ok(step == 30 && check(30), "async checkpoint of step 30 restored "
	   "with the data of step 30 (got step %ld)", step);
}

/* Overlap mode: the writer takes the staging copy (50 ms late, test hook)
 * while the program goes on; hvd_ckpt_fence() holds the program until the
 * copy is taken, so the buffers overwritten right after it do not leak
 * into the checkpoint. */
static void test_overlap(void)
{
	hvd_ckpt_config_t cfg = { .every = 10, .keep = 3, .async = 1,
				  .overlap = 1 };
	char dir[300], path[400];
	hvd_ckpt_t *c = NULL;
	long step;

	snprintf(dir, sizeof(dir), "%s/overlap", root);
	cfg.dir = dir;
	ok(hvd_ckpt_fence(NULL) == HVD_ERR_INVALID_ARG, "fence(NULL) refused");
	setenv("HVD_CKPT_TEST_DELAY_MS", "50", 1);
	if (hvd_ckpt_open(&cfg, &c) != HVD_OK)
		diag("open %s: %s", dir, hvd_last_error());
	unsetenv("HVD_CKPT_TEST_DELAY_MS");
	if (c) {
		hvd_ckpt_register(c, "weights", w, sizeof(w),
				  HVD_CKPT_REPLICATED);
		hvd_ckpt_register(c, "rng", rngstate, sizeof(rngstate),
				  HVD_CKPT_PER_RANK);
	}
	ok(c && hvd_ckpt_fence(c) == HVD_OK, "fence with nothing in flight");
	for (long s = 1; c && s <= 30; s++) {
		int stop, good;

		good = hvd_ckpt_fence(c) == HVD_OK;
		fill(s);
		good = good && hvd_ckpt_step(c, s, &stop) == HVD_OK;
		if (!good || s % 10 == 0)
			ok(good || (diag("%s", hvd_last_error()), 0),
			   "overlap: steps to %ld", s);
	}
	ok(c && hvd_ckpt_wait(c) == HVD_OK, "overlap: wait flushes");
	hvd_ckpt_close(c);
	step = restore(dir, 3);
	ok(step == 30 && check(30), "overlap: checkpoint of step 30 holds "
	   "step 30's data (got step %ld)", step);
	snprintf(path, sizeof(path), "rm -rf %s/step-00000030", dir);
	if (system(path) != 0)
		diag("%s failed", path);
	step = restore(dir, 3);
	ok(step == 20 && check(20), "overlap: checkpoint of step 20 holds "
	   "step 20's data, not the next step's (got step %ld)", step);
}

static volatile sig_atomic_t own_handler_calls;

static void own_handler(int sig)
{
	(void)sig;
	own_handler_calls++;
}

static void test_signal(void)
{
	char dir[300];
	struct sigaction sa;
	hvd_ckpt_t *c;
	int stop = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	sigaction(SIGUSR1, &sa, NULL);
	snprintf(dir, sizeof(dir), "%s/signal", root);
	c = open_dir(dir, 3, 0);
	hvd_ckpt_close(c);
	sigaction(SIGUSR1, NULL, &sa);
	ok(sa.sa_handler == own_handler,
	   "no stop requested: close restores the program's handler");
	c = open_dir(dir, 3, 0);
	fill(3);
	ok(hvd_ckpt_step(c, 3, &stop) == HVD_OK && !stop, "no stop yet");
	raise(SIGUSR1);
	ok(hvd_ckpt_stop_requested(), "stop requested after SIGUSR1");
	is_int(own_handler_calls, 1, "the program's own handler still ran");
	fill(4);
	ok(hvd_ckpt_step(c, 4, &stop) == HVD_OK && stop == 1,
	   "next step writes and says stop");
	hvd_ckpt_close(c);
	raise(SIGUSR1);
	is_int(own_handler_calls, 2, "after a stop, close keeps the handler: "
	       "a second SIGUSR1 does not kill, the program's handler runs");
	ok(restore(dir, 3) == 4 && check(4),
	   "off-schedule checkpoint of step 4 restored");
}

/* A 1-rank manifest rewritten as 2 ranks would have written it: world_size
 * 2, rank-00001.bin listed (a copy of rank 0's line), checksum recomputed
 * (the last line checksums every byte before it). */
static void make_two_ranks(const char *mpath)
{
	char *text = slurp(mpath, NULL), *out, *line, *save = NULL;
	size_t len = 0, cap;

	if (!text) {
		diag("cannot read %s", mpath);
		return;
	}
	cap = strlen(text) + 256;
	out = calloc(1, cap);
	for (line = strtok_r(text, "\n", &save); line && out;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "checksum ", 9) == 0)
			break;
		if (strcmp(line, "world_size 1") == 0)
			line = "world_size 2";
		else if (strcmp(line, "files 2") == 0)
			line = "files 3";
		len += (size_t)snprintf(out + len, cap - len, "%s\n", line);
		if (strncmp(line, "file rank-00000.bin ", 20) == 0)
			len += (size_t)snprintf(out + len, cap - len,
						"file rank-00001.bin %s\n",
						line + 20);
	}
	if (out) {
		unsigned long long sum = XXH3_64bits(out, len);

		len += (size_t)snprintf(out + len, cap - len,
					"checksum %016llx\n", sum);
		if (!strstr(out, "files 3\nfile replicated.bin") ||
		    !strstr(out, "file rank-00001.bin"))
			diag("%s: not the layout expected", mpath);
		spit(mpath, out, len);
	}
	free(out);
	free(text);
}

static void test_world_size(void)
{
	char dir[300], p[400];
	hvd_ckpt_t *c;
	long step;

	/* rewrite a good checkpoint's manifest as if 2 ranks wrote it */
	snprintf(dir, sizeof(dir), "%s/worldsize", root);
	save_steps(dir, 3, 1, 10);
	snprintf(p, sizeof(p), "%s/step-00000010/MANIFEST", dir);
	make_two_ranks(p);
	c = open_dir(dir, 3, 0);
	ok(hvd_ckpt_restore(c, &step) == HVD_ERR_MISMATCH,
	   "per-rank state of 2 ranks on 1 rank: a clear error");
	ok(strstr(hvd_last_error(), "written by 2 ranks") != NULL,
	   "message: %s", hvd_last_error());
	hvd_ckpt_close(c);

	/* replicated-only state restores on any world size */
	c = NULL;
	{
		hvd_ckpt_config_t cfg = { .dir = dir, .keep = 3 };

		hvd_ckpt_open(&cfg, &c);
	}
	hvd_ckpt_register(c, "weights", w, sizeof(w), HVD_CKPT_REPLICATED);
	ok(hvd_ckpt_restore(c, &step) == HVD_ERR_MISMATCH,
	   "a different set of buffers is a clear error too");
	hvd_ckpt_close(c);
}

/* Sharded buffers as a world of one: the whole array is rank 0's block;
 * saved into shard-00000.bin (0600), format 2, restored; bad arguments. */
static void test_sharded(void)
{
	hvd_ckpt_config_t cfg = { .keep = 2 };
	uint64_t tab[10], got[10], first = 99;
	char dir[300], p[400];
	struct stat sb;
	hvd_ckpt_t *c;
	long step;
	FILE *f;
	char line[64] = "";

	snprintf(dir, sizeof(dir), "%s/sharded", root);
	cfg.dir = dir;
	is_int(hvd_ckpt_shard_range(10, 0, 1, &first), 10,
	       "one rank holds the whole array");
	is_int(first, 0, "from element 0");
	is_int(hvd_ckpt_shard_range(10, 2, 4, &first), 2, "10 over 4: rank 2 "
	       "holds 2");
	is_int(first, 6, "from element 6");
	for (int i = 0; i < 10; i++)
		tab[i] = 0x1111111111111111ULL * (uint64_t)i;
	ok(hvd_ckpt_open(&cfg, &c) == HVD_OK, "open");
	ok(hvd_ckpt_register(c, "t", tab, sizeof(tab), HVD_CKPT_SHARDED) ==
		   HVD_ERR_INVALID_ARG &&
		   strstr(hvd_last_error(), "hvd_ckpt_register_sharded") != NULL,
	   "HVD_CKPT_SHARDED through hvd_ckpt_register: refused, naming the "
	   "function to use");
	ok(hvd_ckpt_register_sharded(c, "t", tab, 0, 8) == HVD_ERR_INVALID_ARG,
	   "count 0 refused");
	ok(hvd_ckpt_register_sharded(c, "t", tab, 10, 0) == HVD_ERR_INVALID_ARG,
	   "elem 0 refused");
	ok(hvd_ckpt_register_sharded(c, "t", NULL, 10, 8) ==
		   HVD_ERR_INVALID_ARG, "NULL for a block of 10 refused");
	ok(hvd_ckpt_register_sharded(c, "t", tab, UINT64_MAX / 4, 8) ==
		   HVD_ERR_INVALID_ARG, "an array that overflows refused");
	ok(hvd_ckpt_register_sharded(c, "t", tab, 10, sizeof(tab[0])) ==
		   HVD_OK, "register_sharded");
	hvd_ckpt_register(c, "weights", w, sizeof(w), HVD_CKPT_REPLICATED);
	ok(hvd_ckpt_save(c, 5) == HVD_OK, "save: %s", hvd_last_error());
	hvd_ckpt_close(c);
	snprintf(p, sizeof(p), "%s/step-00000005/shard-00000.bin", dir);
	ok(stat(p, &sb) == 0 && sb.st_size == sizeof(tab) &&
		   (sb.st_mode & 0777) == 0600,
	   "shard-00000.bin: the block, mode 0600");
	snprintf(p, sizeof(p), "%s/step-00000005/MANIFEST", dir);
	f = fopen(p, "r");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	is_str(line, "hvd-checkpoint 2\n", "manifest format 2");
	memset(got, 0, sizeof(got));
	ok(hvd_ckpt_open(&cfg, &c) == HVD_OK, "open again");
	hvd_ckpt_register_sharded(c, "t", got, 10, sizeof(got[0]));
	hvd_ckpt_register(c, "weights", w, sizeof(w), HVD_CKPT_REPLICATED);
	ok(hvd_ckpt_restore(c, &step) == HVD_OK && step == 5,
	   "restore: step 5");
	ok(memcmp(got, tab, sizeof(tab)) == 0, "the block restored");
	hvd_ckpt_close(c);
	/* another element size (or count) is another array */
	ok(hvd_ckpt_open(&cfg, &c) == HVD_OK, "open a third time");
	hvd_ckpt_register_sharded(c, "t", got, 20, 4);
	hvd_ckpt_register(c, "weights", w, sizeof(w), HVD_CKPT_REPLICATED);
	ok(hvd_ckpt_restore(c, &step) == HVD_ERR_MISMATCH &&
		   strstr(hvd_last_error(), "(sharded, 10 elements of 8 bytes), "
			  "this program registered \"t\" (sharded, 20 "
			  "elements of 4 bytes)") != NULL,
	   "the same bytes as 20 elements of 4: a mismatch (%s)",
	   hvd_last_error());
	hvd_ckpt_close(c);
}

static void test_errors(void)
{
	hvd_ckpt_config_t cfg = { 0 };
	hvd_ckpt_t *c;

	unsetenv("HOROVOD_CHECKPOINT_DIR");
	ok(hvd_ckpt_open(&cfg, &c) == HVD_ERR_INVALID_ARG,
	   "no directory: error");
	ok(strstr(hvd_last_error(), "HOROVOD_CHECKPOINT_DIR") != NULL,
	   "message names the variable");
	setenv("HOROVOD_CHECKPOINT_DIR", root, 1);
	setenv("HOROVOD_CHECKPOINT_EVERY", "7", 1);
	setenv("HOROVOD_CHECKPOINT_KEEP", "4", 1);
	ok(hvd_ckpt_open(NULL, &c) == HVD_OK, "defaults from the environment");
	hvd_ckpt_register(c, "weights", w, sizeof(w), HVD_CKPT_REPLICATED);
	for (long s = 1; s <= 35; s++) {
		int stop;

		if (hvd_ckpt_step(c, s, &stop) != HVD_OK)
			diag("step %ld: %s", s, hvd_last_error());
		if (s == 7)
			ok(count_dirs(root, "step-") == 1 &&
				   count_dirs(root, "step-00000007") == 1,
			   "dir and every from HOROVOD_CHECKPOINT_*: step 7, "
			   "and only it, written there");
	}
	is_int(count_dirs(root, "step-"), 4,
	       "keep from HOROVOD_CHECKPOINT_KEEP: 4 of 5 checkpoints left");
	hvd_ckpt_close(c);
	ok(hvd_ckpt_open(NULL, &c) == HVD_OK, "open again");
	ok(hvd_ckpt_register(c, "bad name", w, 4, HVD_CKPT_REPLICATED) ==
		   HVD_ERR_INVALID_ARG, "bad buffer name refused");
	hvd_ckpt_register(c, "a", w, 4, HVD_CKPT_REPLICATED);
	ok(hvd_ckpt_register(c, "a", w, 4, HVD_CKPT_REPLICATED) ==
		   HVD_ERR_DUPLICATE_NAME, "duplicate name refused");
	hvd_ckpt_close(c);
	setenv("HOROVOD_SIZE", "2", 1);
	ok(hvd_ckpt_open(NULL, &c) == HVD_ERR_NOT_INITIALIZED,
	   "HOROVOD_SIZE=2 without hvd_init: refused");
	unsetenv("HOROVOD_SIZE");
}

int main(void)
{
	char cmd[300];
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";

	snprintf(root, sizeof(root), "%s/test_ckpt_store.%ld", base,
		 (long)getpid());
	/* ours, 0700: test_errors uses it as a checkpoint directory itself
	 * (made by the checkpointer, in a sticky directory as a root job's
	 * intermediate directory, it would be 1777: a shared parent) */
	if (mkdir(root, 0700) != 0)
		diag("mkdir %s failed", root);
	setenv("HOROVOD_LOG_LEVEL", "error", 0);
	test_basic();
	test_corruption();
	test_stale_latest_and_leftovers();
	test_retention();
	test_sharded();
	test_async();
	test_overlap();
	test_world_size();
	test_errors();
	/* last: a stop request stays for the life of the process (every
	 * later step would checkpoint) */
	test_signal();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		diag("cleanup of %s failed", root);
	return done_testing();
}

/*
 * ckpt.c - the checkpointer: open, register, metadata, save/step/wait/close.
 * The commit protocol is in ckpt_commit.c, async mode (the checkpoint in
 * flight) in ckpt_async.c, staging memory (async, GPU buffers) in
 * ckpt_stage.c, restore in ckpt_restore.c.
 *
 * Every hvd_ckpt_step() costs one small allreduce, which carries the stop
 * flag and, in async mode, the progress of the checkpoint in flight: the
 * collectives of the commit must be issued in the same order on every
 * rank, so they run on the caller's thread, when that allreduce says every
 * rank is ready for them.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* The collectives are implemented by another part of libhvd; referencing
 * them weakly lets the pure checkpointer (and its unit tests) link without
 * them, in which case it runs as a world of one. */
#pragma weak hvd_is_initialized
#pragma weak hvd_allreduce
#pragma weak hvd_rank
#pragma weak hvd_size
#pragma weak hvd_local_size
#pragma weak hvd_allreduce_async
#pragma weak hvd_wait

static int world_up(void)
{
	return hvd_is_initialized && hvd_allreduce && hvd_is_initialized();
}

hvd_status_t ckpt_allreduce(hvd_ckpt_t *c, int64_t *v, size_t n, hvd_op_t op)
{
	hvd_status_t st;

	if (c->size <= 1)
		return HVD_OK;
	st = hvd_allreduce(HVD_IN_PLACE, v, n, HVD_INT64, op);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	return HVD_OK;
}

/* ------------------------------------------------------- per-step poll */

/* The per-step allreduce (stop flag, progress of the checkpoint in flight)
 * is pipelined where the engine is there: posted at the end of a step on
 * the engine (its own communicator: it never mixes with the program's
 * blocking collectives), its answer taken at the start of the next step.
 * So hvd_ckpt_step() does not hold every rank to the slowest one at every
 * step: jitter of up to a step costs nothing.  What the answer says is as
 * of the post; every other collective entry point drops it first, since a
 * save, wait, close or restore changes what it was about (a stop flag in
 * it is not lost: it stays set and goes out with the next post). */
static int pipelined(hvd_ckpt_t *c)
{
	return c->size > 1 && hvd_allreduce_async && hvd_wait;
}

static void poll_values(hvd_ckpt_t *c, int64_t *v)
{
	v[0] = ckpt_signals_pending();
	ckpt_async_poll(c, &v[1], &v[2]);
}

static hvd_status_t poll_post(hvd_ckpt_t *c)
{
	char name[128];
	hvd_status_t st;

	poll_values(c, c->poll_v);
	ckpt_fmt(name, sizeof(name), "hvd.ckpt.%s.poll", c->tag);
	st = hvd_allreduce_async(name, HVD_IN_PLACE, c->poll_v, 3, HVD_INT64,
				 HVD_MAX, NULL, &c->poll_h);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	c->poll_posted = 1;
	return HVD_OK;
}

/* The answer of the poll in flight; when none is, v says "nothing to do":
 * no stop, and busy (the first step after a save, wait, close or restore
 * must not take the silence for "every writer is done"). */
static hvd_status_t poll_take(hvd_ckpt_t *c, int64_t *v)
{
	hvd_status_t st;

	v[0] = 0;
	v[1] = 1;
	v[2] = 0;
	if (!c->poll_posted)
		return HVD_OK;
	c->poll_posted = 0;
	st = hvd_wait(c->poll_h);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	memcpy(v, c->poll_v, 3 * sizeof(*v));
	return HVD_OK;
}

hvd_status_t ckpt_poll_drop(hvd_ckpt_t *c)
{
	int64_t v[3];

	return poll_take(c, v);
}

void ckpt_path(hvd_ckpt_t *c, char *buf, size_t n, const char *name)
{
	ckpt_fmt(buf, n, "%s/%s", c->dir, name);
}

/* ------------------------------------------------------------ test knobs */

static hvd_ckpt_t *hook_ckpt;

static void write_hook(const char *path, uint64_t written)
{
	hvd_ckpt_t *c = hook_ckpt;

	if (c && written && written >= (uint64_t)ckpt_write_chunk)
		ckpt_test_point(c, "mid-file",
				c->in_flight ? c->w.step : -1);
}

void ckpt_test_point(hvd_ckpt_t *c, const char *point, long step)
{
	if (c->delay_ms > 0) {
		struct timespec ts = { c->delay_ms / 1000,
				       (c->delay_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
	if (!c->crash_point[0] || strcmp(c->crash_point, point) != 0)
		return;
	if ((c->crash_step >= 0 && step >= 0 && step != c->crash_step) ||
	    (c->crash_rank >= 0 && c->crash_rank != c->rank))
		return;
	fprintf(stderr, "hvd: [%d] test: crashing at %s (step %ld)\n",
		c->rank, point, step);
	raise(SIGKILL);
}

/* HVD_CKPT_TEST_CRASH=point[:step[:rank]], HVD_CKPT_TEST_DELAY_MS=n,
 * HVD_CKPT_TEST_CHUNK=bytes: for the crash-injection tests only. */
static void read_test_knobs(hvd_ckpt_t *c)
{
	const char *v = getenv("HVD_CKPT_TEST_CRASH");

	c->crash_step = -1;
	c->crash_rank = -1;
	if (v && *v) {
		char buf[96], *p, *q;

		ckpt_fmt(buf, sizeof(buf), "%s", v);
		p = strchr(buf, ':');
		if (p) {
			*p++ = '\0';
			c->crash_step = strtol(p, &q, 10);
			if (*q == ':')
				c->crash_rank = (int)strtol(q + 1, NULL, 10);
		}
		ckpt_fmt(c->crash_point, sizeof(c->crash_point), "%s", buf);
	}
	c->delay_ms = hvd_env_long("HVD_CKPT_TEST_DELAY_MS", 0);
	if (getenv("HVD_CKPT_TEST_CHUNK"))
		ckpt_write_chunk = hvd_env_size("HVD_CKPT_TEST_CHUNK",
						ckpt_write_chunk);
	if (c->crash_point[0] || getenv("HVD_CKPT_TEST_CHUNK")) {
		hook_ckpt = c;
		ckpt_write_hook = write_hook;
	}
}

/* ------------------------------------------------------------------ open */

static void copy_token(char *dst, size_t n, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < n; i++)
		dst[i] = (src[i] > ' ' && src[i] < 127) ? src[i] : '_';
	dst[i] = '\0';
}

hvd_status_t hvd_ckpt_open(const hvd_ckpt_config_t *config,
			   hvd_ckpt_t **ckpt)
{
	const char *dir;
	hvd_ckpt_t *c;
	hvd_status_t st;
	int64_t v[3];
	size_t len;

	if (!ckpt)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_open: ckpt is NULL");
	*ckpt = NULL;
	dir = config && config->dir ? config->dir
				    : getenv("HOROVOD_CHECKPOINT_DIR");
	if (!dir || !*dir)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_open: no checkpoint directory: pass "
				 "config->dir, set HOROVOD_CHECKPOINT_DIR, or "
				 "run under srun --horovod=ckpt-dir=PATH");
	len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len + 64 >= PATH_MAX)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_open: checkpoint directory name is "
				 "too long (%zu bytes)", len);
	c = calloc(1, sizeof(*c));
	if (!c)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd_ckpt_open: out of "
				 "memory");
	memcpy(c->dir, dir, len);
	c->dir[len] = '\0';
	c->every = config && config->every > 0
			   ? config->every
			   : hvd_env_long("HOROVOD_CHECKPOINT_EVERY", 0);
	if (c->every < 0) {
		hvd_log(HVD_LOG_WARNING, "HOROVOD_CHECKPOINT_EVERY=%ld: "
			"expected a number of steps >= 0; using 0 (only on a "
			"stop request)", c->every);
		c->every = 0;
	}
	c->keep = config && config->keep > 0
			  ? config->keep
			  : (int)hvd_env_long("HOROVOD_CHECKPOINT_KEEP", 3);
	if (c->keep < 1) {
		hvd_log(HVD_LOG_WARNING, "HOROVOD_CHECKPOINT_KEEP=%d: expected "
			"at least 1; keeping 1", c->keep);
		c->keep = 1;
	}
	c->async = (config && config->async) ||
		   hvd_env_bool("HOROVOD_CHECKPOINT_ASYNC", 0);
	/* only from the config, never from the environment: it is safe only
	 * in a program that calls hvd_ckpt_fence() */
	c->overlap = c->async && config && config->overlap;
	c->last_step = -1;
	c->restored_step = -1;
	c->prune_step = -1;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->copy_cv, NULL);
	copy_token(c->job, sizeof(c->job), getenv("SLURM_JOB_ID"));
	if (!c->job[0])
		ckpt_fmt(c->job, sizeof(c->job), "-");

	if (world_up()) {
		c->rank = hvd_rank();
		c->size = hvd_size();
	} else {
		long size = hvd_env_long("HOROVOD_SIZE", 1);

		if (size > 1) {
			st = hvd_error(HVD_ERR_NOT_INITIALIZED,
				       "hvd_ckpt_open: HOROVOD_SIZE=%ld but "
				       "hvd_init() was not called: call it "
				       "before hvd_ckpt_open() so that the "
				       "ranks write one checkpoint together",
				       size);
			goto err_free;
		}
		c->rank = 0;
		c->size = 1;
	}
	read_test_knobs(c);
	{
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		int local = world_up() && hvd_local_size ? hvd_local_size() : 1;
		long def = cpus > 0 && local > 0 ? cpus / local : 1;

		if (def > 4)
			def = 4;
		c->copy_threads = (int)hvd_env_long(
			"HOROVOD_CHECKPOINT_COPY_THREADS", def < 1 ? 1 : def);
		if (c->copy_threads < 1)
			c->copy_threads = 1;
	}

	/* The partial-directory tag: rank 0's pid and clock, so that a crashed
	 * run's leftovers are told apart from this run's write in flight. */
	v[0] = c->rank == 0 ? (int64_t)getpid() : 0;
	v[1] = c->rank == 0 ? (int64_t)(hvd_now_ns() & 0xffffffffffULL) : 0;
	st = ckpt_allreduce(c, v, 2, HVD_SUM);
	if (st != HVD_OK)
		goto err_free;
	ckpt_fmt(c->tag, sizeof(c->tag), "%lld-%llx", (long long)v[0],
		 (unsigned long long)v[1]);

	/* Every rank must be able to write there: say so now, not at the
	 * first checkpoint an hour into training. */
	st = ckpt_mkdirs(c->dir);
	if (st == HVD_OK && access(c->dir, W_OK | X_OK) != 0)
		st = ckpt_errno(errno, "cannot write in", c->dir);
	v[0] = st == HVD_OK ? INT64_MAX : c->rank;
	if (st != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	if (ckpt_allreduce(c, v, 1, HVD_MIN) != HVD_OK)
		goto err_free;
	if (v[0] != INT64_MAX) {
		if (st == HVD_OK)
			st = hvd_error(HVD_ERR_IO,
				       "hvd_ckpt_open: rank %lld cannot use the "
				       "checkpoint directory %s (its message "
				       "says why)", (long long)v[0], c->dir);
		goto err_free;
	}
	if (hvd_env_bool("HOROVOD_CHECKPOINT_SIGNALS", 1)) {
		st = ckpt_signals_install();
		if (st != HVD_OK)
			goto err_free;
	}
	hvd_log(HVD_LOG_INFO, "checkpoint: dir %s, every %ld, keep %d, %s, "
		"rank %d of %d", c->dir, c->every, c->keep,
		c->overlap ? "async, overlapped staging copy"
			   : c->async ? "async" : "sync", c->rank, c->size);
	*ckpt = c;
	return HVD_OK;
err_free:
	if (hook_ckpt == c) {
		hook_ckpt = NULL;
		ckpt_write_hook = NULL;
	}
	pthread_cond_destroy(&c->copy_cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return st;
}

hvd_status_t hvd_ckpt_register(hvd_ckpt_t *c, const char *name, void *buf,
			       size_t bytes, hvd_ckpt_kind_t kind)
{
	struct ckpt_reg *nr;

	if (!c || !buf || bytes == 0)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: %s", !c ? "ckpt is NULL"
				 : !buf ? "buf is NULL" : "bytes is 0");
	if (!ckpt_name_valid(name))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: name \"%s\": expected 1 to "
				 "%d characters of A-Z a-z 0-9 _ . : / + -",
				 name ? name : "(null)", CKPT_NAME_MAX);
	if (kind != HVD_CKPT_REPLICATED && kind != HVD_CKPT_PER_RANK)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: %s: kind %d is neither "
				 "HVD_CKPT_REPLICATED nor HVD_CKPT_PER_RANK",
				 name, (int)kind);
	if (c->frozen)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: %s: register every buffer "
				 "before the first restore or save", name);
	for (size_t i = 0; i < c->nregs; i++)
		if (strcmp(c->regs[i].name, name) == 0)
			return hvd_error(HVD_ERR_DUPLICATE_NAME,
					 "hvd_ckpt_register: buffer \"%s\" is "
					 "already registered", name);
	nr = realloc(c->regs, (c->nregs + 1) * sizeof(*nr));
	if (!nr)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd_ckpt_register: out "
				 "of memory");
	c->regs = nr;
	nr = &c->regs[c->nregs++];
	memset(nr, 0, sizeof(*nr));
	ckpt_fmt(nr->name, sizeof(nr->name), "%s", name);
	nr->buf = buf;
	nr->bytes = bytes;
	nr->kind = kind;
	nr->device = ckpt_dev_is_device(buf);
	c->has_device |= nr->device;
	if (kind == HVD_CKPT_REPLICATED) {
		nr->offset = c->repl_bytes;
		c->repl_bytes += bytes;
	} else {
		nr->offset = c->rank_bytes;
		c->rank_bytes += bytes;
	}
	return HVD_OK;
}

hvd_status_t hvd_ckpt_set_meta(hvd_ckpt_t *c, const void *meta, size_t bytes)
{
	unsigned char *p = NULL;

	if (!c || (bytes && !meta))
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_set_meta: %s",
				 !c ? "ckpt is NULL" : "meta is NULL");
	if (bytes > CKPT_META_MAX)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_set_meta: %zu bytes, at most %u "
				 "(keep large state in a registered buffer)",
				 bytes, CKPT_META_MAX);
	if (bytes) {
		p = malloc(bytes);
		if (!p)
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "hvd_ckpt_set_meta: out of memory");
		memcpy(p, meta, bytes);
	}
	pthread_mutex_lock(&c->mu);
	free(c->meta);
	c->meta = p;
	c->meta_len = bytes;
	pthread_mutex_unlock(&c->mu);
	return HVD_OK;
}

hvd_status_t hvd_ckpt_get_meta(hvd_ckpt_t *c, void *meta, size_t max,
			       size_t *bytes)
{
	if (!c || (max && !meta))
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_get_meta: %s",
				 !c ? "ckpt is NULL" : "meta is NULL");
	if (bytes)
		*bytes = c->have_loaded_meta ? c->loaded_meta_len : 0;
	if (!c->have_loaded_meta)
		return hvd_error(HVD_OK, "hvd_ckpt_get_meta: no checkpoint was "
				 "restored, so there is no metadata");
	if (c->loaded_meta_len > max)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_get_meta: the metadata is %zu bytes, "
				 "the buffer %zu", c->loaded_meta_len, max);
	if (c->loaded_meta_len)
		memcpy(meta, c->loaded_meta, c->loaded_meta_len);
	return HVD_OK;
}

/* ------------------------------------------------------------- registry */

hvd_status_t ckpt_freeze(hvd_ckpt_t *c)
{
	XXH3_state_t *xs;
	uint64_t h;
	int64_t v[2];
	hvd_status_t st;

	if (c->frozen)
		return HVD_OK;
	if (c->nregs == 0)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "checkpoint: no buffer registered: call "
				 "hvd_ckpt_register() first");
	xs = XXH3_createState();
	if (!xs)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	XXH3_64bits_reset(xs);
	for (size_t i = 0; i < c->nregs; i++) {
		uint64_t sz = c->regs[i].bytes, kind = c->regs[i].kind;

		XXH3_64bits_update(xs, c->regs[i].name,
				   strlen(c->regs[i].name) + 1);
		XXH3_64bits_update(xs, &sz, sizeof(sz));
		XXH3_64bits_update(xs, &kind, sizeof(kind));
	}
	h = XXH3_64bits_digest(xs) >> 2;
	XXH3_freeState(xs);
	v[0] = (int64_t)h;
	v[1] = -(int64_t)h;
	st = ckpt_allreduce(c, v, 2, HVD_MIN);
	if (st != HVD_OK)
		return st;
	if (v[0] != -v[1])
		return hvd_error(HVD_ERR_MISMATCH,
				 "checkpoint: the ranks registered different "
				 "buffers (names, kinds, sizes or order differ; "
				 "this rank has %zu buffers, first \"%s\"): "
				 "every rank must register the same ones",
				 c->nregs, c->regs[0].name);
	c->frozen = 1;
	/* async: allocate and touch the staging memory now, so that the first
	 * checkpoint does not pay for page faults inside the training loop */
	if (c->async) {
		st = ckpt_stage_prepare(c);
		if (st != HVD_OK)
			return st;
	}
	return HVD_OK;
}

static hvd_status_t save(hvd_ckpt_t *c, long step)
{
	struct ckpt_write w;
	hvd_status_t st, prev;
	double t0 = hvd_now();

	if (step < 0 || step > CKPT_STEP_MAX)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "checkpoint: step %ld out of range 0..%ld",
				 step, CKPT_STEP_MAX);
	st = ckpt_poll_drop(c);
	if (st == HVD_OK)
		st = ckpt_freeze(c);
	if (st != HVD_OK)
		return st;
	/* the previous write's failure is reported, and this one is still
	 * written (every rank saw the same failure: they stay in step) */
	prev = ckpt_async_flush(c);
	if (prev != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	if (c->async) {
		st = ckpt_async_start(c, step);
		c->last_blocked = hvd_now() - t0;
		return st != HVD_OK ? st : prev;
	}
	st = ckpt_write_begin(c, &w, step);
	if (st == HVD_OK && c->has_device)
		st = ckpt_stage(c, CKPT_STAGE_ALL);
	if (st == HVD_OK) {
		ckpt_write_local(c, &w, c->has_device);
	} else {
		w.status = st;
		ckpt_fmt(w.error, sizeof(w.error), "%s", hvd_last_error());
	}
	st = ckpt_commit(c, &w);
	ckpt_write_done(&w);
	c->last_blocked = hvd_now() - t0;
	return st != HVD_OK ? st : prev;
}

hvd_status_t hvd_ckpt_save(hvd_ckpt_t *c, long step)
{
	if (!c)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_save: ckpt is "
				 "NULL");
	return save(c, step);
}

hvd_status_t hvd_ckpt_step(hvd_ckpt_t *c, long step, int *stop)
{
	hvd_status_t st = HVD_OK, st2;
	int64_t v[3];
	int due;

	if (stop)
		*stop = 0;
	if (!c)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_step: ckpt is "
				 "NULL");
	/* one small allreduce per step: did any rank get a stop signal; is
	 * any rank's part of the checkpoint in flight still running, and did
	 * one fail?  Pipelined: the answer to the previous step's post. */
	if (pipelined(c)) {
		st = poll_take(c, v);
	} else {
		poll_values(c, v);
		st = ckpt_allreduce(c, v, 3, HVD_MAX);
	}
	if (st != HVD_OK)
		return st;
	c->last_blocked = 0;
	if (c->in_flight && v[1] == 0)
		st = ckpt_async_advance(c, v[2]);
	ckpt_async_catch_up(c, step);
	due = v[0] || (c->every > 0 && step % c->every == 0);
	if (due && step != c->last_step) {
		st2 = save(c, step);
		if (st == HVD_OK)
			st = st2;
	}
	if (v[0]) {
		st2 = ckpt_async_flush(c);
		if (st == HVD_OK)
			st = st2;
		if (stop)
			*stop = 1;
		if (c->rank == 0)
			hvd_log(HVD_LOG_WARNING,
				"checkpoint: stop requested (SIGTERM/SIGUSR1): "
				"checkpoint of step %ld %s; exit with status %d "
				"so that a requeued job resumes", step,
				st == HVD_OK ? "written" : "FAILED",
				HVD_CKPT_EXIT_STATUS);
	} else if (pipelined(c)) {
		st2 = poll_post(c);
		if (st == HVD_OK)
			st = st2;
	}
	return st;
}

/* Everything in flight, per-step poll and checkpoint, finished now. */
static hvd_status_t drain(hvd_ckpt_t *c)
{
	hvd_status_t st = ckpt_poll_drop(c), st2 = ckpt_async_flush(c);

	return st != HVD_OK ? st : st2;
}

hvd_status_t hvd_ckpt_wait(hvd_ckpt_t *c)
{
	if (!c)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_wait: ckpt is "
				 "NULL");
	return drain(c);
}

hvd_status_t hvd_ckpt_close(hvd_ckpt_t *c)
{
	hvd_status_t st;

	if (!c)
		return HVD_OK;
	st = drain(c);
	if (c->prune_step >= 0)
		ckpt_prune(c->dir, c->keep, c->prune_step, NULL, NULL);
	if (hook_ckpt == c) {
		hook_ckpt = NULL;
		ckpt_write_hook = NULL;
	}
	if (hvd_env_bool("HOROVOD_CHECKPOINT_SIGNALS", 1))
		ckpt_signals_remove();
	pthread_cond_destroy(&c->copy_cv);
	pthread_mutex_destroy(&c->mu);
	free(c->regs);
	free(c->meta);
	free(c->loaded_meta);
	ckpt_stage_free(c, c->stage_repl);
	ckpt_stage_free(c, c->stage_rank);
	free(c);
	return st;
}

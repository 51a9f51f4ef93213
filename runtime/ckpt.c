/*
 * ckpt.c - the checkpointer: open, register, write and commit, async mode.
 *
 * Commit protocol (every rank calls save/step with the same step):
 *   1. each rank writes its files into DIR/step-N.partial-TAG and fsyncs
 *      them (rank 0 also writes replicated.bin);
 *   2. allreduce MIN: did every rank succeed?  (no: rank 0 removes the
 *      partial directory, every rank returns an error, nothing changed);
 *   3. allreduce SUM gathers each file's XXH3 checksum on every rank;
 *   4. rank 0 writes MANIFEST, fsyncs it and the directory, renames the
 *      directory to DIR/step-N, fsyncs DIR, then replaces DIR/latest
 *      (temp + rename + fsync) and prunes old checkpoints;
 *   5. allreduce MAX of rank 0's status: every rank returns the same answer.
 * A crash anywhere before the rename leaves only a partial directory, which
 * restore ignores and retention removes; after the rename the checkpoint is
 * complete and durable.  The manifest's own checksum and the per-file
 * checksums catch everything else (torn or edited files).
 *
 * Async mode: step/save copy the registered buffers into staging memory
 * and start a writer thread that does step 1 only.  Steps 2-5 need
 * collectives, which must be issued in the same order on every rank, so
 * they run on the caller's thread: at each later step every rank reports
 * whether its writer is done (the same allreduce that carries the stop
 * flag), and when all are, the write is committed.  At most one write is
 * in flight: a checkpoint due while one is in flight waits for it.
 */
#include "config.h"

#include "ckpt_internal.h"
#include "device.h"

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
		ckpt_test_point(c, "mid-file", c->in_flight ? c->w.step : -1);
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
	c->last_step = -1;
	c->restored_step = -1;
	c->prune_step = -1;
	pthread_mutex_init(&c->mu, NULL);
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
		c->async ? "async" : "sync", c->rank, c->size);
	*ckpt = c;
	return HVD_OK;
err_free:
	if (hook_ckpt == c) {
		hook_ckpt = NULL;
		ckpt_write_hook = NULL;
	}
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

static hvd_status_t stage_prepare(hvd_ckpt_t *c);

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
		st = stage_prepare(c);
		if (st != HVD_OK)
			return st;
	}
	return HVD_OK;
}

/* ---------------------------------------------------------------- write */

static void *stage_alloc(hvd_ckpt_t *c, size_t bytes);
static void stage_free(hvd_ckpt_t *c, void *p);

static hvd_status_t stage_prepare(hvd_ckpt_t *c)
{
	c->stage_pinned = c->has_device && cuda_host_alloc;
	if (c->repl_bytes && c->rank == 0 && !c->stage_repl) {
		c->stage_repl = stage_alloc(c, c->repl_bytes);
		if (!c->stage_repl)
			goto err_oom;
		memset(c->stage_repl, 0, c->repl_bytes);
	}
	if (c->rank_bytes && !c->stage_rank) {
		c->stage_rank = stage_alloc(c, c->rank_bytes);
		if (!c->stage_rank)
			goto err_oom;
		memset(c->stage_rank, 0, c->rank_bytes);
	}
	return HVD_OK;
err_oom:
	return hvd_error(HVD_ERR_NO_MEMORY,
			 "checkpoint: cannot allocate %llu bytes of staging "
			 "memory (async mode keeps a copy of the state): use "
			 "synchronous checkpoints or more memory",
			 (unsigned long long)(c->rank == 0 ? c->repl_bytes +
							   c->rank_bytes
							 : c->rank_bytes));
}

/* The staging copy is what async mode costs the training loop: large ones
 * are split between a few threads, since one core cannot saturate the
 * memory bandwidth of a server (HOROVOD_CHECKPOINT_COPY_THREADS, default:
 * the cores per local rank, at most 4). */
#define PAR_COPY_MIN (16u << 20)
#define PAR_COPY_MAX 16

struct copy_piece {
	void *dst;
	const void *src;
	size_t n;
};

static void *copy_main(void *arg)
{
	struct copy_piece *p = arg;

	memcpy(p->dst, p->src, p->n);
	return NULL;
}

static void par_copy(void *dst, const void *src, size_t n, int threads)
{
	struct copy_piece piece[PAR_COPY_MAX];
	pthread_t tid[PAR_COPY_MAX];
	int started[PAR_COPY_MAX] = { 0 };
	size_t per, off = 0;

	if (threads > PAR_COPY_MAX)
		threads = PAR_COPY_MAX;
	if (threads <= 1 || n < PAR_COPY_MIN) {
		memcpy(dst, src, n);
		return;
	}
	per = (n / (size_t)threads + 4095) & ~(size_t)4095;
	for (int i = 0; i < threads; i++) {
		piece[i].dst = (char *)dst + off;
		piece[i].src = (const char *)src + off;
		piece[i].n = off >= n ? 0 : (n - off < per ? n - off : per);
		off += piece[i].n;
	}
	for (int i = 1; i < threads; i++)
		started[i] = pthread_create(&tid[i], NULL, copy_main,
					    &piece[i]) == 0;
	copy_main(&piece[0]);
	for (int i = 1; i < threads; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			copy_main(&piece[i]); /* no thread: do it here */
	}
}

static hvd_status_t stage(hvd_ckpt_t *c)
{
	hvd_status_t st = stage_prepare(c);

	if (st != HVD_OK)
		return st;
	for (size_t i = 0; i < c->nregs; i++) {
		const struct ckpt_reg *r = &c->regs[i];
		unsigned char *dst;

		if (r->kind == HVD_CKPT_REPLICATED && c->rank != 0)
			continue;
		dst = (r->kind == HVD_CKPT_REPLICATED ? c->stage_repl
						      : c->stage_rank) +
		      r->offset;
		if (r->device) {
			st = ckpt_dev_copy(dst, r->buf, r->bytes, 1);
			if (st != HVD_OK)
				return hvd_error_prefix(st, "checkpoint: "
							"staging %s", r->name);
		} else {
			par_copy(dst, r->buf, r->bytes, c->copy_threads);
		}
	}
	return HVD_OK;
}

static hvd_status_t write_one(hvd_ckpt_t *c, struct ckpt_write *w,
			      const char *name, hvd_ckpt_kind_t kind,
			      const unsigned char *staged, uint64_t *hash)
{
	struct ckpt_part *parts;
	char path[PATH_MAX];
	size_t n = 0;
	hvd_status_t st;

	parts = calloc(c->nregs + 1, sizeof(*parts));
	if (!parts)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	if (staged) {
		parts[n].buf = staged;
		parts[n++].bytes = kind == HVD_CKPT_REPLICATED ? c->repl_bytes
							       : c->rank_bytes;
	} else {
		for (size_t i = 0; i < c->nregs; i++) {
			if (c->regs[i].kind != kind)
				continue;
			parts[n].buf = c->regs[i].buf;
			parts[n++].bytes = c->regs[i].bytes;
		}
	}
	ckpt_fmt(path, sizeof(path), "%s/%s", w->partial, name);
	if (unlink(path) != 0 && errno != ENOENT)
		st = ckpt_errno(errno, "cannot replace", path);
	else
		st = ckpt_write_file(path, parts, n, hash);
	free(parts);
	return st;
}

/* Step 1 of the protocol: this rank's files, durable, in the partial
 * directory.  Runs on the caller's thread or on the writer thread; the
 * message is kept in w->error because hvd_last_error() is per thread. */
static void write_local(hvd_ckpt_t *c, struct ckpt_write *w, int staged)
{
	hvd_status_t st = HVD_OK;
	char name[CKPT_FILE_NAME_MAX];

	w->error[0] = '\0';
	if (mkdir(w->partial, 0755) != 0 && errno != EEXIST)
		st = ckpt_errno(errno, "cannot create directory", w->partial);
	ckpt_test_point(c, "begin", w->step);
	if (st == HVD_OK && c->rank == 0 && c->repl_bytes)
		st = write_one(c, w, CKPT_REPLICATED_FILE, HVD_CKPT_REPLICATED,
			       staged ? c->stage_repl : NULL, &w->repl_hash);
	if (st == HVD_OK && c->rank_bytes) {
		ckpt_rank_file(name, sizeof(name), c->rank);
		st = write_one(c, w, name, HVD_CKPT_PER_RANK,
			       staged ? c->stage_rank : NULL, &w->rank_hash);
	}
	if (st == HVD_OK)
		st = ckpt_fsync_dir(w->partial);
	if (st == HVD_OK)
		ckpt_test_point(c, "written", w->step);
	w->status = st;
	if (st != HVD_OK)
		ckpt_fmt(w->error, sizeof(w->error), "%s", hvd_last_error());
}

/* Step 4, rank 0: manifest, rename, latest, retention. */
static hvd_status_t publish(hvd_ckpt_t *c, struct ckpt_write *w,
			    const int64_t *hashes)
{
	struct ckpt_manifest m = { 0 };
	char final[PATH_MAX], name[64], path[PATH_MAX];
	struct ckpt_part part;
	hvd_status_t st;
	uint64_t mhash;
	size_t len, fi = 0;
	char *text;

	m.version = CKPT_FORMAT_VERSION;
	m.step = w->step;
	m.world_size = c->size;
	m.created = (long long)time(NULL);
	ckpt_fmt(m.job, sizeof(m.job), "%s", c->job);
	m.replicated_bytes = c->repl_bytes;
	m.per_rank_bytes = c->rank_bytes;
	m.nbuffers = c->nregs;
	m.buffers = calloc(c->nregs, sizeof(*m.buffers));
	if (!m.buffers)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	for (size_t i = 0; i < c->nregs; i++) {
		ckpt_fmt(m.buffers[i].name, sizeof(m.buffers[i].name), "%s",
			 c->regs[i].name);
		m.buffers[i].kind = c->regs[i].kind;
		m.buffers[i].offset = c->regs[i].offset;
		m.buffers[i].bytes = c->regs[i].bytes;
	}
	st = ckpt_manifest_layout(&m);
	if (st != HVD_OK)
		goto err_free;
	if (c->repl_bytes)
		m.files[fi++].hash = (uint64_t)hashes[0];
	for (int r = 0; c->rank_bytes && r < c->size; r++)
		m.files[fi++].hash = (uint64_t)hashes[1 + r];
	m.meta = w->meta;
	m.meta_len = w->meta_len;
	st = ckpt_manifest_format(&m, &text, &len);
	m.meta = NULL;
	m.meta_len = 0;
	if (st != HVD_OK)
		goto err_free;
	ckpt_fmt(path, sizeof(path), "%s/%s", w->partial, CKPT_MANIFEST_NAME);
	unlink(path);
	part.buf = text;
	part.bytes = len;
	st = ckpt_write_file(path, &part, 1, &mhash);
	free(text);
	if (st == HVD_OK)
		st = ckpt_fsync_dir(w->partial);
	if (st != HVD_OK)
		goto err_free;
	ckpt_test_point(c, "manifest", w->step);

	ckpt_dir_name(name, sizeof(name), w->step, NULL);
	ckpt_path(c, final, sizeof(final), name);
	if (rename(w->partial, final) != 0) {
		if (errno != EEXIST && errno != ENOTEMPTY) {
			st = ckpt_errno(errno, "cannot rename into place",
					final);
			goto err_free;
		}
		/* The same step was saved before (a restarted run saving the
		 * step it resumed from): swap atomically where the file system
		 * can, and drop the old one. */
		if (renameat2(AT_FDCWD, w->partial, AT_FDCWD, final,
			      RENAME_EXCHANGE) != 0) {
			char old[PATH_MAX];

			ckpt_fmt(old, sizeof(old), "%s.partial-replaced", final);
			if (rename(final, old) != 0 ||
			    rename(w->partial, final) != 0) {
				st = ckpt_errno(errno, "cannot replace", final);
				goto err_free;
			}
		}
	}
	st = ckpt_fsync_dir(c->dir);
	if (st != HVD_OK)
		goto err_free;
	ckpt_test_point(c, "renamed", w->step);
	st = ckpt_write_latest(c->dir, name);
	if (st != HVD_OK)
		goto err_free;
	ckpt_test_point(c, "latest", w->step);
	/* a failed prune is a warning (logged), not a failed checkpoint */
	/* protect what was just written even when older runs left higher
	 * steps behind (a fresh start in a used directory).  Async: deleting
	 * old checkpoints (seconds for big ones) is left to the next writer
	 * thread or to close, off the training loop. */
	if (c->async)
		c->prune_step = w->step;
	else
		ckpt_prune(c->dir, c->keep, w->step, NULL, NULL);
	hvd_error_clear();
	st = HVD_OK;
err_free:
	ckpt_manifest_free(&m);
	return st;
}

/* Steps 2-5, on every rank, after write_local finished everywhere. */
static hvd_status_t commit(hvd_ckpt_t *c, struct ckpt_write *w)
{
	int64_t v[1], *hashes;
	hvd_status_t st, st2;

	v[0] = w->status == HVD_OK ? INT64_MAX : c->rank;
	if (w->status != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", w->error);
	st = ckpt_allreduce(c, v, 1, HVD_MIN);
	if (st != HVD_OK)
		return st;
	if (v[0] != INT64_MAX) {
		if (c->rank == 0) {
			const char *base = strrchr(w->partial, '/');

			ckpt_remove_dir(c->dir, base ? base + 1 : w->partial);
		}
		if (w->status != HVD_OK)
			return hvd_error(w->status, "%s", w->error);
		return hvd_error(HVD_ERR_IO,
				 "checkpoint step %ld not written: rank %lld "
				 "could not write its files (its message says "
				 "why); the previous checkpoint is intact",
				 w->step, (long long)v[0]);
	}
	hashes = calloc((size_t)c->size + 1, sizeof(*hashes));
	if (!hashes)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	if (c->rank == 0)
		hashes[0] = (int64_t)w->repl_hash;
	hashes[1 + c->rank] = (int64_t)w->rank_hash;
	st = ckpt_allreduce(c, hashes, (size_t)c->size + 1, HVD_SUM);
	if (st != HVD_OK) {
		free(hashes);
		return st;
	}
	v[0] = 0;
	if (c->rank == 0) {
		st = publish(c, w, hashes);
		v[0] = st;
		if (st != HVD_OK)
			hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	}
	free(hashes);
	st2 = ckpt_allreduce(c, v, 1, HVD_MAX);
	if (st2 != HVD_OK)
		return st2;
	if (v[0] != HVD_OK) {
		if (c->rank == 0)
			return st;
		return hvd_error((hvd_status_t)v[0],
				 "checkpoint step %ld not committed: rank 0 "
				 "failed (its message says why)", w->step);
	}
	c->last_step = w->step;
	/* a newer checkpoint exists now: the restored one may age out */
	c->restored_step = -1;
	hvd_log(HVD_LOG_INFO, "checkpoint: step %ld committed (%.3f s)",
		w->step, hvd_now() - w->started);
	return HVD_OK;
}

static void *writer_main(void *arg)
{
	hvd_ckpt_t *c = arg;
	sigset_t set;

	/* leave SIGTERM/SIGUSR1 to the application's threads */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (c->prune_step >= 0) {
		/* rank 0 only: the previous commit's retention; this run's
		 * partial directories are the write starting now on the
		 * other ranks: keep them */
		ckpt_prune(c->dir, c->keep, c->prune_step, c->tag, NULL);
		c->prune_step = -1;
	}
	write_local(c, &c->w, 1);
	__atomic_store_n(&c->thread_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static hvd_status_t finish_async(hvd_ckpt_t *c)
{
	hvd_status_t st;

	if (!c->in_flight)
		return HVD_OK;
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	c->thread_started = 0;
	c->in_flight = 0;
	st = commit(c, &c->w);
	free(c->w.meta);
	c->w.meta = NULL;
	return st;
}

static hvd_status_t begin_write(hvd_ckpt_t *c, struct ckpt_write *w,
				long step)
{
	char name[128];

	memset(w, 0, sizeof(*w));
	w->step = step;
	w->started = hvd_now();
	ckpt_dir_name(name, sizeof(name), step, c->tag);
	ckpt_path(c, w->partial, sizeof(w->partial), name);
	pthread_mutex_lock(&c->mu);
	if (c->meta_len) {
		w->meta = malloc(c->meta_len);
		if (!w->meta) {
			pthread_mutex_unlock(&c->mu);
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "checkpoint: out of memory");
		}
		memcpy(w->meta, c->meta, c->meta_len);
		w->meta_len = c->meta_len;
	}
	pthread_mutex_unlock(&c->mu);
	return HVD_OK;
}

static hvd_status_t save(hvd_ckpt_t *c, long step)
{
	struct ckpt_write w;
	hvd_status_t st, prev;
	double t0 = hvd_now();
	int err;

	if (step < 0 || step > CKPT_STEP_MAX)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "checkpoint: step %ld out of range 0..%ld",
				 step, CKPT_STEP_MAX);
	st = ckpt_freeze(c);
	if (st != HVD_OK)
		return st;
	/* the previous write's failure is reported, and this one is still
	 * written (every rank saw the same failure: they stay in step) */
	prev = finish_async(c);
	if (prev != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	if (c->async) {
		st = begin_write(c, &c->w, step);
		if (st == HVD_OK)
			st = stage(c);
		if (st == HVD_OK) {
			c->thread_done = 0;
			err = pthread_create(&c->thread, NULL, writer_main, c);
			if (err)
				st = hvd_error(HVD_ERR_INTERNAL, "checkpoint: "
					       "cannot start the writer thread: "
					       "%s", strerror(err));
		}
		c->thread_started = st == HVD_OK;
		if (st != HVD_OK) {
			/* the other ranks' writes are under way: this rank's
			 * failure joins the agreement at the commit, as if its
			 * writer had failed (collectives stay in step) */
			c->w.status = st;
			ckpt_fmt(c->w.error, sizeof(c->w.error), "%s",
				 hvd_last_error());
			c->thread_done = 1;
		}
		c->in_flight = 1;
		c->last_blocked = hvd_now() - t0;
		return prev;
	}
	st = begin_write(c, &w, step);
	if (st == HVD_OK && c->has_device)
		st = stage(c);
	if (st == HVD_OK) {
		write_local(c, &w, c->has_device);
	} else {
		w.status = st;
		ckpt_fmt(w.error, sizeof(w.error), "%s", hvd_last_error());
	}
	st = commit(c, &w);
	free(w.meta);
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
	int64_t v[2];
	int due;

	if (stop)
		*stop = 0;
	if (!c)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_step: ckpt is "
				 "NULL");
	/* one small allreduce per step: did any rank get a stop signal, is
	 * any rank's background write still running? */
	v[0] = ckpt_signals_pending();
	v[1] = c->in_flight &&
	       !__atomic_load_n(&c->thread_done, __ATOMIC_ACQUIRE);
	st = ckpt_allreduce(c, v, 2, HVD_MAX);
	if (st != HVD_OK)
		return st;
	c->last_blocked = 0;
	if (c->in_flight && v[1] == 0)
		st = finish_async(c);
	due = v[0] || (c->every > 0 && step % c->every == 0);
	if (due && step != c->last_step) {
		st2 = save(c, step);
		if (st == HVD_OK)
			st = st2;
	}
	if (v[0]) {
		st2 = finish_async(c);
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
	}
	return st;
}

hvd_status_t hvd_ckpt_wait(hvd_ckpt_t *c)
{
	if (!c)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_wait: ckpt is "
				 "NULL");
	return finish_async(c);
}

hvd_status_t hvd_ckpt_close(hvd_ckpt_t *c)
{
	hvd_status_t st;

	if (!c)
		return HVD_OK;
	st = finish_async(c);
	if (c->prune_step >= 0)
		ckpt_prune(c->dir, c->keep, c->prune_step, NULL, NULL);
	if (hook_ckpt == c) {
		hook_ckpt = NULL;
		ckpt_write_hook = NULL;
	}
	if (hvd_env_bool("HOROVOD_CHECKPOINT_SIGNALS", 1))
		ckpt_signals_remove();
	pthread_mutex_destroy(&c->mu);
	free(c->regs);
	free(c->meta);
	free(c->loaded_meta);
	stage_free(c, c->stage_repl);
	stage_free(c, c->stage_rank);
	free(c);
	return st;
}

/* --------------------------------------------------------- GPU hooks */

/* Device buffers go through host memory: the GPU path's hooks (device.h,
 * weak: NULL in a build without CUDA) copy them; staging for them is
 * page-locked when the GPU path can allocate it. */
int ckpt_dev_is_device(const void *ptr)
{
	return hvd_device_ptr(ptr);
}

hvd_status_t ckpt_dev_copy(void *dst, const void *src, size_t n, int to_host)
{
	if (to_host && cuda_memcpy_to_host)
		return cuda_memcpy_to_host(dst, src, n);
	if (!to_host && cuda_memcpy_to_device)
		return cuda_memcpy_to_device(dst, src, n);
	return hvd_error(HVD_ERR_UNSUPPORTED,
			 "checkpoint: device memory needs libhvd built with "
			 "CUDA");
}

static void *stage_alloc(hvd_ckpt_t *c, size_t bytes)
{
	void *p = NULL;

	if (c->has_device && cuda_host_alloc &&
	    cuda_host_alloc(&p, bytes) == HVD_OK)
		return p;
	return malloc(bytes);
}

static void stage_free(hvd_ckpt_t *c, void *p)
{
	if (p && c->stage_pinned && cuda_host_free)
		cuda_host_free(p);
	else
		free(p);
}

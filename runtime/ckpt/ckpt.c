/*
 * ckpt.c - the checkpointer's front: open (settings, world, directory,
 * signals), save, step, wait, close.  What a checkpoint holds is in
 * ckpt_registry.c, the commit protocol in ckpt_commit.c, async mode (the
 * checkpoint in flight) in ckpt_async.c, staging memory (async, GPU
 * buffers) in ckpt_stage.c, restore in ckpt_restore.c, agreement between
 * ranks in ckpt_coll.c.  Calls go one way: this file and ckpt_restore.c
 * call the others, never the reverse.
 *
 * Every hvd_ckpt_step() costs one small allreduce, which carries the stop
 * flag and, in async mode, the progress of the checkpoint in flight: the
 * collectives of the commit must be issued in the same order on every
 * rank, so they run on the caller's thread, when that allreduce says every
 * rank is ready for them.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"
#include "net/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ open */

static void copy_token(char *dst, size_t n, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < n; i++)
		dst[i] = (src[i] > ' ' && src[i] < 127) ? src[i] : '_';
	dst[i] = '\0';
}

/* The directory: config->dir, else HOROVOD_CHECKPOINT_DIR; trailing
 * slashes dropped, room left for the names below it. */
static hvd_status_t settings_dir(char *out, const hvd_ckpt_config_t *config)
{
	const char *dir = config && config->dir
				  ? config->dir
				  : getenv("HOROVOD_CHECKPOINT_DIR");
	size_t len;

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
	memcpy(out, dir, len);
	out[len] = '\0';
	return HVD_OK;
}

/* every, keep, async, overlap: the config's, else the environment's. */
static void settings(hvd_ckpt_t *c, const hvd_ckpt_config_t *config)
{
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
	copy_token(c->job, sizeof(c->job), getenv("SLURM_JOB_ID"));
	if (!c->job[0])
		ckpt_fmt(c->job, sizeof(c->job), "-");
	/* the node as Slurm names it (the mini-cluster's nodes share one
	 * host name), else the host name */
	copy_token(c->node, sizeof(c->node), getenv("SLURMD_NODENAME"));
	if (!c->node[0] && gethostname(c->node, sizeof(c->node) - 1) != 0)
		ckpt_fmt(c->node, sizeof(c->node), "?");
}

/* Staging copy threads: the cores per rank of the job on this machine,
 * at most 4.  The cores are those the ranks may run on (the union of
 * their affinity masks, net/transport.c), not the machine's: in a cgroup
 * or under a binding narrower than the node, more threads than that
 * only take turns on the same cores. */
static void settings_copy_threads(hvd_ckpt_t *c)
{
	long cpus = transport_host_cpus();
	long ranks = hvd_is_initialized() ? transport_host_ranks() : 1;
	long def = ranks > 0 ? cpus / ranks : 1;

	if (def > 4)
		def = 4;
	c->copy_threads = (int)hvd_env_long("HOROVOD_CHECKPOINT_COPY_THREADS",
					    def < 1 ? 1 : def);
	if (c->copy_threads < 1)
		c->copy_threads = 1;
}

/* The partial-directory tag: rank 0's pid and clock, so that a crashed
 * run's leftovers are told apart from this run's write in flight. */
static hvd_status_t agree_tag(hvd_ckpt_t *c)
{
	int64_t v[3] = { 0, 0, 0 };

	if (c->rank == 0) {
		uint64_t token = 0;

		v[0] = (int64_t)getpid();
		v[1] = (int64_t)(hvd_now_ns() & 0xffffffffffULL);
		/* the directory's token (same_dir_everywhere): random, or
		 * at least this run's (a short read of getrandom) */
		if (getrandom(&token, sizeof(token), 0) != sizeof(token))
			token ^= (uint64_t)hvd_now_ns() ^
				 (uint64_t)getpid() << 40;
		v[2] = (int64_t)(token >> 1);
	}
	HVD_CHECK(ckpt_allreduce(c, v, 3, HVD_SUM));
	ckpt_fmt(c->tag, sizeof(c->tag), "%lld-%llx", (long long)v[0],
		 (unsigned long long)v[1]);
	c->dir_token = (uint64_t)v[2];
	return HVD_OK;
}

/* Rank 0 holds the directory's lock while the checkpointer is open; what
 * it writes there names it to a second run. */
static hvd_status_t lock_dir(hvd_ckpt_t *c)
{
	char holder[512], when[32], step[80] = "";
	const char *sid = getenv("SLURM_STEP_ID");
	time_t now = time(NULL);
	struct tm tm;

	if (!localtime_r(&now, &tm) ||
	    !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm))
		ckpt_fmt(when, sizeof(when), "%lld", (long long)now);
	if (strcmp(c->job, "-") != 0)
		ckpt_fmt(step, sizeof(step), ", Slurm job %s%s%s", c->job,
			 sid ? "." : "", sid ? sid : "");
	ckpt_fmt(holder, sizeof(holder), "pid %ld on %s%s, %d rank%s, since "
		 "%s\ntoken %016llx\n", (long)getpid(), c->node, step,
		 c->size, c->size == 1 ? "" : "s", when,
		 (unsigned long long)c->dir_token);
	return ckpt_dir_lock(&c->dir, holder, &c->lock_fd);
}

/* Does this rank see rank 0's directory: the token rank 0 wrote into its
 * lock file? */
static int sees_rank0_dir(hvd_ckpt_t *c)
{
	unsigned long long token;
	const char *line;
	char *text;
	size_t len;
	int same;

	if (ckpt_read_small(&c->dir, CKPT_LOCK_NAME, 4096, &text, &len) !=
	    HVD_OK)
		return 0;
	line = strstr(text, "\ntoken ");
	same = line && sscanf(line + 7, "%16llx", &token) == 1 &&
	       token == c->dir_token;
	free(text);
	return same;
}

/* One record per rank in the gather of same_dir_everywhere. */
struct dir_view {
	int32_t other;          /* 1: another directory than rank 0's */
	char node[60];
};

/* "node2 (rank 1), node3 (ranks 2, 5)": the ranks with v[r].other. */
static void other_nodes(const struct dir_view *v, int size, char *buf,
			size_t n)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int r = 0; r < size && len + 16 < n; r++) {
		int first = 1, count = 0;

		if (!v[r].other)
			continue;
		for (int q = 0; q < r && first; q++)
			if (v[q].other && strcmp(v[q].node, v[r].node) == 0)
				first = 0;
		if (!first)
			continue;
		for (int q = r; q < size; q++)
			count += v[q].other && strcmp(v[q].node, v[r].node) == 0;
		len += (size_t)snprintf(buf + len, n - len, "%s%.59s (rank%s",
					len ? ", " : "", v[r].node,
					count > 1 ? "s" : "");
		for (int q = r, k = 0; q < size && len + 16 < n; q++)
			if (v[q].other && strcmp(v[q].node, v[r].node) == 0)
				len += (size_t)snprintf(buf + len, n - len,
							"%s%d", k++ ? ", " : " ",
							q);
		len += (size_t)snprintf(buf + len, n - len, ")");
	}
	if (len + 16 >= n)
		ckpt_fmt(buf + n - 5, 5, "...");
}

/* Only rank 0 writes the manifest and renames: a directory that is not
 * the same one on every node (a node-local /tmp or /var/tmp behind one
 * path) would take checkpoints the other nodes can never restore.  Rank
 * 0's token is in its lock file (written and fsynced before the barrier
 * of check_dir); every rank reads it back (after the barrier: NFS's
 * close-to-open consistency gives it the new contents) and the ranks
 * gather who saw another directory, to name the nodes. */
static hvd_status_t same_dir_everywhere(hvd_ckpt_t *c)
{
	struct dir_view mine = { 0 }, *all;
	char nodes[512];
	hvd_status_t st;
	int others = 0;

	if (c->size <= 1)
		return HVD_OK;
	mine.other = c->rank != 0 && !sees_rank0_dir(c);
	ckpt_fmt(mine.node, sizeof(mine.node), "%s", c->node);
	all = calloc((size_t)c->size, sizeof(*all));
	if (!all)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd_ckpt_open: out of "
				 "memory");
	st = hvd_allgather(&mine, all, sizeof(mine), HVD_UINT8);
	if (st != HVD_OK) {
		free(all);
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	}
	for (int r = 0; r < c->size; r++)
		others += all[r].other != 0;
	if (others) {
		other_nodes(all, c->size, nodes, sizeof(nodes));
		st = hvd_error(HVD_ERR_IO,
			       "checkpoint: %s is not the same directory on "
			       "every node: %s see%s another one than rank 0 on "
			       "%.59s (a file system of each node's own, such "
			       "as /tmp or /var/tmp?); only rank 0 commits "
			       "checkpoints, so the other nodes could never "
			       "restore them: use a directory on a file system "
			       "every node shares (/scratch/$USER/..., "
			       "$HOME/...)", c->dir.path, nodes,
			       others > 1 ? "" : "s", all[0].node);
	}
	free(all);
	return st;
}

/* Every rank must be able to write there: say so now, not at the first
 * checkpoint an hour into training. */
static hvd_status_t check_dir(hvd_ckpt_t *c)
{
	hvd_status_t st;
	int64_t v[1];

	st = ckpt_dir_open(&c->dir, c->dir.path, CKPT_OPEN_CREATE);
	if (st == HVD_OK &&
	    faccessat(c->dir.fd, ".", W_OK | X_OK, AT_EACCESS) != 0)
		st = ckpt_errno(errno, "cannot write in", c->dir.path);
	if (st == HVD_OK && c->rank == 0)
		st = lock_dir(c);
	v[0] = st == HVD_OK ? INT64_MAX : c->rank;
	if (st != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	HVD_CHECK(ckpt_allreduce(c, v, 1, HVD_MIN));
	if (v[0] == INT64_MAX)
		return HVD_OK;
	if (st != HVD_OK)
		return st;
	return hvd_error(HVD_ERR_IO,
			 "hvd_ckpt_open: rank %lld cannot use the checkpoint "
			 "directory %s (its message says why)",
			 (long long)v[0], c->dir.path);
}

static void ckpt_free(hvd_ckpt_t *c)
{
	ckpt_inject_release(c);
	if (c->lock_fd >= 0)
		close(c->lock_fd); /* releases the lock */
	ckpt_dir_close(&c->dir);
	pthread_cond_destroy(&c->copy_cv);
	pthread_mutex_destroy(&c->mu);
	free(c->regs);
	free(c->meta);
	free(c->loaded_meta);
	ckpt_stage_free(c, c->stage_repl);
	ckpt_stage_free(c, c->stage_rank);
	ckpt_stage_free(c, c->stage_shard);
	free(c);
}

hvd_status_t hvd_ckpt_open(const hvd_ckpt_config_t *config,
			   hvd_ckpt_t **ckpt)
{
	hvd_ckpt_t *c;
	hvd_status_t st;

	if (!ckpt)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_open: ckpt is NULL");
	*ckpt = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd_ckpt_open: out of "
				 "memory");
	c->dir.fd = -1;
	c->lock_fd = -1;
	c->last_step = -1;
	c->restored_step = -1;
	c->prune_step = -1;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->copy_cv, NULL);
	HVD_CHECK_GOTO(settings_dir(c->dir.path, config), st, err_free);
	settings(c, config);
	HVD_CHECK_GOTO(ckpt_world_init(c), st, err_free);
	ckpt_inject_setup(c);
	settings_copy_threads(c);
	HVD_CHECK_GOTO(agree_tag(c), st, err_free);
	HVD_CHECK_GOTO(check_dir(c), st, err_free);
	HVD_CHECK_GOTO(same_dir_everywhere(c), st, err_free);
	if (hvd_env_bool("HOROVOD_CHECKPOINT_SIGNALS", 1)) {
		HVD_CHECK_GOTO(ckpt_signals_install(), st, err_free);
		c->signals = 1;
	}
	hvd_log(HVD_LOG_INFO, "checkpoint: dir %s, every %ld, keep %d, %s, "
		"%d copy thread%s, rank %d of %d", c->dir.path, c->every,
		c->keep,
		c->overlap ? "async, overlapped staging copy"
			   : c->async ? "async" : "sync",
		c->copy_threads, c->copy_threads == 1 ? "" : "s", c->rank,
		c->size);
	*ckpt = c;
	return HVD_OK;
err_free:
	ckpt_free(c);
	return st;
}

/* ------------------------------------------------------- save and step */

/* This rank's part of the per-step allreduce MAX: its stop signal (0:
 * none), and whether its part of the checkpoint in flight is busy or
 * failed. */
static void poll_values(hvd_ckpt_t *c, int64_t v[3])
{
	v[0] = ckpt_signals_pending();
	ckpt_async_poll(c, &v[1], &v[2]);
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
	if (ckpt_poll_pipelined(c)) {
		st = ckpt_poll_take(c, v);
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
		ckpt_signals_agreed((int)v[0]);
		st2 = ckpt_async_flush(c);
		if (st == HVD_OK)
			st = st2;
		if (stop)
			*stop = 1;
		if (c->rank == 0)
			hvd_log(HVD_LOG_WARNING,
				"checkpoint: stop requested (%s): checkpoint of "
				"step %ld %s; exit with status %d so that a "
				"requeued job resumes",
				v[0] == SIGTERM ? "SIGTERM" : v[0] == SIGUSR1
				? "SIGUSR1" : "SIGTERM/SIGUSR1", step,
				st == HVD_OK ? "written" : "FAILED",
				HVD_CKPT_EXIT_STATUS);
	} else if (ckpt_poll_pipelined(c)) {
		poll_values(c, v);
		st2 = ckpt_poll_post(c, v);
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
		ckpt_prune(&c->dir, c->keep, c->prune_step, NULL, NULL);
	if (c->signals)
		ckpt_signals_remove();
	ckpt_free(c);
	return st;
}

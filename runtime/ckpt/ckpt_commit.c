/*
 * ckpt_commit.c - writing one checkpoint: this rank's files, then the
 * agreement and rank 0's commit.
 *
 * Commit protocol (every rank calls save/step with the same step):
 *   1. each rank writes its files into DIR/step-N.partial-TAG and fsyncs
 *      them (rank 0 also writes replicated.bin): files 0600, the
 *      directory 0700, every name reached relative to DIR's descriptor;
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
 * Synchronous mode runs 2-5 in one go (ckpt_commit).  Async mode
 * (ckpt_async.c) takes step 2's answer from the per-step allreduce, runs
 * step 4 in a thread on rank 0 and takes step 5's answer from a later
 * per-step allreduce: the same steps in the same order, off the loop.
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

static hvd_status_t write_one(hvd_ckpt_t *c, const struct ckpt_dir *pd,
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
				   : kind == HVD_CKPT_SHARDED  ? c->shard_bytes
							       : c->rank_bytes;
	} else {
		for (size_t i = 0; i < c->nregs; i++) {
			if (c->regs[i].kind != kind || c->regs[i].bytes == 0)
				continue;
			parts[n].buf = c->regs[i].buf;
			parts[n++].bytes = c->regs[i].bytes;
		}
	}
	if (unlinkat(pd->fd, name, 0) != 0 && errno != ENOENT) {
		ckpt_fmt(path, sizeof(path), "%s/%s", pd->path, name);
		st = ckpt_errno(errno, "cannot replace", path);
	} else {
		st = ckpt_write_file(pd, name, parts, n, hash);
	}
	free(parts);
	return st;
}

/* Step 1 of the protocol: this rank's files, durable, in the partial
 * directory.  Runs on the caller's thread or on the writer thread; the
 * message is kept in w->error because hvd_last_error() is per thread. */
void ckpt_write_local(hvd_ckpt_t *c, struct ckpt_write *w, int staged)
{
	char name[CKPT_FILE_NAME_MAX];
	struct ckpt_dir pd = { .fd = -1 };
	hvd_status_t st;

	w->error[0] = '\0';
	/* every rank makes it (the first one wins, the others open it) */
	st = ckpt_dir_make(&c->dir, w->partial, &pd);
	ckpt_inject_point(c, "begin", w->step);
	if (st == HVD_OK && c->rank == 0 && c->repl_bytes)
		st = write_one(c, &pd, CKPT_REPLICATED_FILE,
			       HVD_CKPT_REPLICATED,
			       staged ? c->stage_repl : NULL, &w->repl_hash);
	if (st == HVD_OK && c->rank_bytes) {
		ckpt_rank_file(name, sizeof(name), c->rank);
		st = write_one(c, &pd, name, HVD_CKPT_PER_RANK,
			       staged ? c->stage_rank : NULL, &w->rank_hash);
	}
	/* every rank writes its shard file, empty when its blocks are */
	if (st == HVD_OK && c->shard_global) {
		ckpt_shard_file(name, sizeof(name), c->rank);
		st = write_one(c, &pd, name, HVD_CKPT_SHARDED,
			       staged ? c->stage_shard : NULL, &w->shard_hash);
	}
	if (st == HVD_OK)
		st = ckpt_fsync_dir(&pd);
	ckpt_dir_close(&pd);
	if (st == HVD_OK)
		ckpt_inject_point(c, "written", w->step);
	w->status = st;
	if (st != HVD_OK)
		ckpt_fmt(w->error, sizeof(w->error), "%s", hvd_last_error());
}

hvd_status_t ckpt_write_begin(hvd_ckpt_t *c, struct ckpt_write *w,
			      long step)
{
	memset(w, 0, sizeof(*w));
	w->step = step;
	w->started = hvd_now();
	ckpt_dir_name(w->partial, sizeof(w->partial), step, c->tag);
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

void ckpt_write_done(struct ckpt_write *w)
{
	free(w->meta);
	w->meta = NULL;
	w->meta_len = 0;
	free(w->hashes);
	w->hashes = NULL;
}

/* Step 4a: the manifest, durable, in the partial directory. */
static hvd_status_t write_manifest(hvd_ckpt_t *c, struct ckpt_write *w,
				   const int64_t *hashes)
{
	struct ckpt_manifest m = { 0 };
	struct ckpt_dir pd = { .fd = -1 };
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
	m.sharded_bytes = c->shard_global;
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
		if (c->regs[i].kind == HVD_CKPT_SHARDED) {
			m.buffers[i].offset = c->regs[i].goffset;
			m.buffers[i].bytes = c->regs[i].count * c->regs[i].elem;
			m.buffers[i].elem = c->regs[i].elem;
		}
	}
	HVD_CHECK_GOTO(ckpt_manifest_layout(&m), st, err_free);
	if (c->repl_bytes)
		m.files[fi++].hash = (uint64_t)hashes[0];
	for (int r = 0; c->rank_bytes && r < c->size; r++)
		m.files[fi++].hash = (uint64_t)hashes[1 + r];
	for (int r = 0; c->shard_global && r < c->size; r++)
		m.files[fi++].hash = (uint64_t)hashes[1 + c->size + r];
	m.meta = w->meta;
	m.meta_len = w->meta_len;
	st = ckpt_manifest_format(&m, &text, &len);
	m.meta = NULL;
	m.meta_len = 0;
	if (st != HVD_OK)
		goto err_free;
	st = ckpt_dir_sub(&c->dir, w->partial, &pd);
	if (st == HVD_OK) {
		unlinkat(pd.fd, CKPT_MANIFEST_NAME, 0);
		part.buf = text;
		part.bytes = len;
		st = ckpt_write_file(&pd, CKPT_MANIFEST_NAME, &part, 1, &mhash);
	}
	free(text);
	if (st == HVD_OK)
		st = ckpt_fsync_dir(&pd);
	ckpt_dir_close(&pd);
err_free:
	ckpt_manifest_free(&m);
	return st;
}

/* Step 4b: the partial directory renamed to its final name, durably. */
static hvd_status_t rename_into_place(hvd_ckpt_t *c, struct ckpt_write *w,
				      const char *name)
{
	const int dfd = c->dir.fd;
	char final[PATH_MAX];

	ckpt_fmt(final, sizeof(final), "%s/%s", c->dir.path, name);
	if (renameat(dfd, w->partial, dfd, name) != 0) {
		if (errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR)
			return ckpt_errno(errno, "cannot rename into place",
					  final);
		/* The same step was saved before (a restarted run saving the
		 * step it resumed from), or something else has the name:
		 * swap atomically where the file system can; what was there
		 * gets the partial name, for retention to judge. */
		if (renameat2(dfd, w->partial, dfd, name,
			      RENAME_EXCHANGE) != 0) {
			char old[300];

			ckpt_fmt(old, sizeof(old), "%s.partial-replaced", name);
			if (renameat(dfd, name, dfd, old) != 0 ||
			    renameat(dfd, w->partial, dfd, name) != 0)
				return ckpt_errno(errno, "cannot replace",
						  final);
		}
	}
	return ckpt_fsync_dir(&c->dir);
}

/* Step 4, rank 0: manifest, rename, latest, retention. */
static hvd_status_t publish(hvd_ckpt_t *c, struct ckpt_write *w,
			    const int64_t *hashes)
{
	char name[64];

	HVD_CHECK(write_manifest(c, w, hashes));
	ckpt_inject_point(c, "manifest", w->step);
	ckpt_dir_name(name, sizeof(name), w->step, NULL);
	HVD_CHECK(rename_into_place(c, w, name));
	ckpt_inject_point(c, "renamed", w->step);
	HVD_CHECK(ckpt_write_latest(&c->dir, name));
	ckpt_inject_point(c, "latest", w->step);
	/* a failed prune is a warning (logged), not a failed checkpoint;
	 * protect what was just written even when older runs left higher
	 * steps behind (a fresh start in a used directory).  Async: deleting
	 * old checkpoints (seconds for big ones) is left to the next writer
	 * thread or to close, so that the ranks learn of this commit without
	 * waiting for it. */
	if (c->async)
		c->prune_step = w->step;
	else
		ckpt_prune(&c->dir, c->keep, w->step, NULL, NULL);
	hvd_error_clear();
	return HVD_OK;
}

/* Step 2's outcome (failed: the lowest rank whose write failed, or -1),
 * then step 3: every file's checksum, in w->hashes. */
hvd_status_t ckpt_agreed(hvd_ckpt_t *c, struct ckpt_write *w,
			 int64_t failed)
{
	hvd_status_t st;

	if (w->status != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", w->error);
	if (failed >= 0) {
		if (c->rank == 0)
			ckpt_remove_dir(&c->dir, w->partial);
		if (w->status != HVD_OK)
			return hvd_error(w->status, "%s", w->error);
		return hvd_error(HVD_ERR_IO,
				 "checkpoint step %ld not written: rank %lld "
				 "could not write its files (its message says "
				 "why); the previous checkpoint is intact",
				 w->step, (long long)failed);
	}
	/* slots: replicated.bin, rank-R.bin for every R, shard-R.bin */
	w->hashes = calloc(2 * (size_t)c->size + 1, sizeof(*w->hashes));
	if (!w->hashes)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	if (c->rank == 0)
		w->hashes[0] = (int64_t)w->repl_hash;
	w->hashes[1 + c->rank] = (int64_t)w->rank_hash;
	w->hashes[1 + c->size + c->rank] = (int64_t)w->shard_hash;
	st = ckpt_allreduce(c, w->hashes, 2 * (size_t)c->size + 1, HVD_SUM);
	if (st != HVD_OK) {
		free(w->hashes);
		w->hashes = NULL;
	}
	return st;
}

/* Step 4 on rank 0, on whichever thread: the outcome in w->pub_status and,
 * since hvd_last_error() is per thread, its message in w->error. */
void ckpt_publish(hvd_ckpt_t *c, struct ckpt_write *w)
{
	w->pub_status = publish(c, w, w->hashes);
	if (w->pub_status != HVD_OK) {
		ckpt_fmt(w->error, sizeof(w->error), "%s", hvd_last_error());
		hvd_log(HVD_LOG_ERROR, "%s", w->error);
	}
}

/* Step 5's outcome: status0 is rank 0's, every rank returns it. */
hvd_status_t ckpt_committed(hvd_ckpt_t *c, struct ckpt_write *w,
			    int64_t status0)
{
	if (status0 != HVD_OK) {
		if (c->rank == 0)
			return hvd_error(w->pub_status, "%s", w->error);
		return hvd_error((hvd_status_t)status0,
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

/* Steps 2-5 at once, on every rank, after write_local finished
 * everywhere. */
hvd_status_t ckpt_commit(hvd_ckpt_t *c, struct ckpt_write *w)
{
	int64_t v[1];
	hvd_status_t st;

	v[0] = w->status == HVD_OK ? INT64_MAX : c->rank;
	st = ckpt_allreduce(c, v, 1, HVD_MIN);
	if (st != HVD_OK)
		return st;
	st = ckpt_agreed(c, w, v[0] == INT64_MAX ? -1 : v[0]);
	if (st != HVD_OK)
		return st;
	v[0] = 0;
	if (c->rank == 0) {
		ckpt_publish(c, w);
		v[0] = w->pub_status;
	}
	st = ckpt_allreduce(c, v, 1, HVD_MAX);
	if (st != HVD_OK)
		return st;
	return ckpt_committed(c, w, v[0]);
}

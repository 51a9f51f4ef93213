/*
 * ckpt_restore.c - all ranks agree on the newest checkpoint that is
 * complete and verifies on every rank, and load it.
 *
 *   1. rank 0 scans DIR and shares the steps of the complete checkpoints
 *      (manifest parses), newest first;
 *   2. for each candidate, every rank checks what it will read (manifest,
 *      registry compatibility, size and checksum of replicated.bin and of
 *      its own rank file); allreduce MAX of a verdict: 0 good, 1 damaged
 *      somewhere (skip, warn naming the file, try the previous one),
 *      2 incompatible (a clear error: other checkpoints would be too);
 *      on another number of ranks than wrote it, the writers' shard files
 *      are verified whole, spread over the ranks, and per-rank buffers
 *      are an error (each rank's own: they cannot be divided);
 *   3. the chosen one is read into the registered buffers, the checksums
 *      checked again while reading (allreduce: every rank loaded it); on
 *      another number of ranks each rank reads its new block of every
 *      sharded buffer from the byte ranges of the writers' shard files
 *      that hold it (ckpt_shard_plan);
 *   4. rank 0 repairs a stale `latest` and removes partial directories
 *      left by crashes (never the restored checkpoint, nor this run's
 *      partial directory: no barrier follows, and the other ranks may
 *      already be writing the next checkpoint into it).
 * Verification reads the data twice (once to verify, once to load) so that
 * the registered buffers are only overwritten by a checkpoint known to be
 * good on every rank; the second read is usually from the page cache.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CANDIDATES 64

enum { VERDICT_OK = 0, VERDICT_SKIP = 1, VERDICT_MISMATCH = 2 };

static const char *kind_str(hvd_ckpt_kind_t kind)
{
	return kind == HVD_CKPT_PER_RANK ? "per-rank"
	       : kind == HVD_CKPT_SHARDED ? "sharded" : "replicated";
}

/* "replicated, 4096 bytes", "sharded, 10 elements of 8 bytes" */
static void describe(char *buf, size_t n, hvd_ckpt_kind_t kind,
		     uint64_t bytes, uint64_t elem)
{
	if (kind == HVD_CKPT_SHARDED && elem)
		ckpt_fmt(buf, n, "sharded, %llu elements of %llu bytes",
			 (unsigned long long)(bytes / elem),
			 (unsigned long long)elem);
	else
		ckpt_fmt(buf, n, "%s, %llu bytes", kind_str(kind),
			 (unsigned long long)bytes);
}

static hvd_status_t check_compat(hvd_ckpt_t *c,
				 const struct ckpt_manifest *m)
{
	if (m->nbuffers != c->nregs) {
		return hvd_error(HVD_ERR_MISMATCH,
				 "checkpoint step %ld holds %zu buffers, this "
				 "program registered %zu: register the same "
				 "buffers as the run that wrote it, or move the "
				 "checkpoint directory away to start afresh",
				 m->step, m->nbuffers, c->nregs);
	}
	for (size_t i = 0; i < c->nregs; i++) {
		const struct ckpt_buffer *b = &m->buffers[i];
		const struct ckpt_reg *r = &c->regs[i];
		/* a sharded buffer is compared as the global array */
		uint64_t rbytes = r->kind == HVD_CKPT_SHARDED
					  ? r->count * r->elem : r->bytes;

		if (strcmp(b->name, r->name) != 0 || b->kind != r->kind ||
		    b->bytes != rbytes ||
		    (r->kind == HVD_CKPT_SHARDED && b->elem != r->elem)) {
			char was[96], is[96];

			describe(was, sizeof(was), b->kind, b->bytes, b->elem);
			describe(is, sizeof(is), r->kind, rbytes, r->elem);
			return hvd_error(HVD_ERR_MISMATCH,
					 "checkpoint step %ld: buffer %zu is "
					 "\"%s\" (%s), this program "
					 "registered \"%s\" (%s): "
					 "register the same buffers, in the same "
					 "order, as the run that wrote it",
					 m->step, i, b->name, was, r->name, is);
		}
	}
	if (c->rank_bytes && m->world_size != c->size) {
		const char *first = "";

		for (size_t i = 0; i < c->nregs; i++)
			if (c->regs[i].kind == HVD_CKPT_PER_RANK) {
				first = c->regs[i].name;
				break;
			}
		return hvd_error(HVD_ERR_MISMATCH,
				 "checkpoint step %ld was written by %d ranks, "
				 "this run has %d: its per-rank buffer \"%s\" "
				 "is each rank's own and cannot be divided "
				 "among %d ranks (restore on %d ranks, or make "
				 "it HVD_CKPT_REPLICATED if every rank holds "
				 "the same, or hvd_ckpt_register_sharded() if "
				 "it is this rank's block of one array)",
				 m->step, m->world_size, c->size, first,
				 c->size, m->world_size);
	}
	return HVD_OK;
}

/* Step 2 on another number of ranks: replicated.bin, and the writers'
 * shard files spread over the ranks (rank r checks writers r, r + size,
 * ...), since every rank reads pieces of several of them. */
static hvd_status_t verify_resized(hvd_ckpt_t *c, const struct ckpt_dir *ck,
				   const struct ckpt_manifest *m)
{
	char name[CKPT_FILE_NAME_MAX];
	const struct ckpt_file *f;

	f = ckpt_manifest_file(m, CKPT_REPLICATED_FILE);
	if (f)
		HVD_CHECK(ckpt_verify_file(ck, f, NULL, 0));
	for (int j = c->rank; m->sharded_bytes && j < m->world_size;
	     j += c->size) {
		ckpt_shard_file(name, sizeof(name), j);
		f = ckpt_manifest_file(m, name);
		if (!f)
			return hvd_error(HVD_ERR_CORRUPT, "checkpoint %s: the "
					 "manifest lists no %s", ck->path, name);
		HVD_CHECK(ckpt_verify_file(ck, f, NULL, 0));
	}
	return HVD_OK;
}

/* Step 2 on this rank: what it would read is intact and compatible. */
static int check_candidate(hvd_ckpt_t *c, const struct ckpt_dir *ck,
			   long step, struct ckpt_manifest *m)
{
	hvd_status_t st;

	st = ckpt_read_manifest(ck, m);
	if (st != HVD_OK) {
		hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
		return VERDICT_SKIP;
	}
	if (m->step != step) {
		hvd_log(HVD_LOG_WARNING, "checkpoint %s: its manifest is of "
			"step %ld (renamed or copied?): skipped", ck->path,
			m->step);
		return VERDICT_SKIP;
	}
	st = check_compat(c, m);
	if (st != HVD_OK)
		return VERDICT_MISMATCH;
	if (m->world_size == c->size)
		st = ckpt_verify(ck, m, c->rank);
	else
		st = verify_resized(c, ck, m);
	if (st != HVD_OK) {
		hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
		return VERDICT_SKIP;
	}
	return VERDICT_OK;
}

static hvd_status_t load_file(hvd_ckpt_t *c, const struct ckpt_dir *ck,
			      const struct ckpt_manifest *m,
			      hvd_ckpt_kind_t kind)
{
	char name[CKPT_FILE_NAME_MAX];
	const struct ckpt_file *f;
	struct ckpt_dst *d;
	unsigned char *stage = NULL;
	size_t n = 0;
	hvd_status_t st;

	if (kind == HVD_CKPT_REPLICATED)
		ckpt_fmt(name, sizeof(name), "%s", CKPT_REPLICATED_FILE);
	else if (kind == HVD_CKPT_SHARDED)
		ckpt_shard_file(name, sizeof(name), c->rank);
	else
		ckpt_rank_file(name, sizeof(name), c->rank);
	f = ckpt_manifest_file(m, name);
	if (!f)
		return HVD_OK;
	d = calloc(c->nregs, sizeof(*d));
	if (!d)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	if (c->has_device) {
		/* device buffers are read through host memory */
		stage = malloc(f->size ? f->size : 1);
		if (!stage) {
			free(d);
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "checkpoint: out of memory");
		}
		d[n].buf = stage;
		d[n++].bytes = f->size;
	} else {
		for (size_t i = 0; i < c->nregs; i++) {
			if (c->regs[i].kind != kind || c->regs[i].bytes == 0)
				continue;
			d[n].buf = c->regs[i].buf;
			d[n++].bytes = c->regs[i].bytes;
		}
	}
	st = ckpt_verify_file(ck, f, d, n);
	for (size_t i = 0; st == HVD_OK && stage && i < c->nregs; i++) {
		const struct ckpt_reg *r = &c->regs[i];

		if (r->kind != kind || r->bytes == 0)
			continue;
		if (r->device)
			st = ckpt_dev_copy(r->buf, stage + r->offset, r->bytes,
					   0);
		else
			memcpy(r->buf, stage + r->offset, r->bytes);
	}
	free(stage);
	free(d);
	return st;
}

/* Step 3 on another number of ranks: this rank's new block of every
 * sharded buffer, read piece by piece from the writers' shard files
 * (verified whole in step 2, by one rank each). */
static hvd_status_t load_resharded(hvd_ckpt_t *c, const struct ckpt_dir *ck,
				   const struct ckpt_manifest *m)
{
	struct ckpt_shard_read *rd;
	char name[CKPT_FILE_NAME_MAX];
	unsigned char *tmp = NULL;
	size_t nrd, done = 0;
	hvd_status_t st;

	HVD_CHECK(ckpt_shard_plan(m, c->rank, c->size, &rd, &nrd));
	st = HVD_OK;
	for (size_t i = 0; i < c->nregs && st == HVD_OK; i++) {
		const struct ckpt_reg *r = &c->regs[i];
		unsigned char *dst = r->buf;

		if (r->kind != HVD_CKPT_SHARDED || r->bytes == 0)
			continue;
		if (r->device) {
			tmp = malloc(r->bytes);
			if (!tmp) {
				st = hvd_error(HVD_ERR_NO_MEMORY,
					       "checkpoint: out of memory");
				break;
			}
			dst = tmp;
		}
		for (; done < nrd && rd[done].buf < i; done++)
			;
		for (; st == HVD_OK && done < nrd && rd[done].buf == i;
		     done++) {
			const struct ckpt_shard_read *x = &rd[done];
			const struct ckpt_file *f;

			ckpt_shard_file(name, sizeof(name), x->writer);
			f = ckpt_manifest_file(m, name);
			if (!f || x->dst_off + x->len > r->bytes)
				st = hvd_error(HVD_ERR_CORRUPT,
					       "checkpoint %s: %s does not "
					       "hold %s's block (manifest "
					       "inconsistent)", ck->path, name,
					       r->name);
			else
				st = ckpt_read_range(ck, f, x->file_off,
						     dst + x->dst_off,
						     (size_t)x->len);
		}
		if (st == HVD_OK && r->device)
			st = ckpt_dev_copy(r->buf, tmp, r->bytes, 0);
		free(tmp);
		tmp = NULL;
	}
	free(rd);
	return st;
}

static hvd_status_t finish_restore(hvd_ckpt_t *c, struct ckpt_manifest *m,
				   const char *name)
{
	char latest[256];

	free(c->loaded_meta);
	c->loaded_meta = m->meta;
	c->loaded_meta_len = m->meta_len;
	c->have_loaded_meta = 1;
	m->meta = NULL;
	c->last_step = m->step;
	c->restored_step = m->step;
	c->restored_resized = m->world_size != c->size;
	if (c->rank != 0)
		return HVD_OK;
	if (ckpt_read_latest(&c->dir, latest, sizeof(latest)) != HVD_OK ||
	    strcmp(latest, name) != 0) {
		hvd_log(HVD_LOG_WARNING,
			"checkpoint: %s/%s named \"%s\", the newest good "
			"checkpoint is %s: repairing it (a crash between commit "
			"and pointer update, or a damaged checkpoint)",
			c->dir.path, CKPT_LATEST_NAME, latest, name);
		if (ckpt_write_latest(&c->dir, name) != HVD_OK)
			hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
	}
	ckpt_inject_point(c, "tidy", c->restored_step);
	ckpt_prune(&c->dir, c->keep, c->restored_step, c->tag, NULL);
	return HVD_OK;
}

/* Step 1: rank 0 lists the complete checkpoints, newest first, and every
 * rank gets the list: cand[0] steps in cand[1..]. */
static hvd_status_t candidates(hvd_ckpt_t *c, int64_t *cand)
{
	struct ckpt_entry *e = NULL;
	size_t n = 0;

	if (c->rank == 0) {
		if (ckpt_scan(&c->dir, NULL, &e, &n) != HVD_OK)
			hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
		for (size_t i = 0; i < n && cand[0] < MAX_CANDIDATES; i++)
			if (e[i].state == CKPT_COMPLETE)
				cand[1 + cand[0]++] = e[i].step;
			else if (e[i].state == CKPT_INCOMPLETE)
				hvd_log(HVD_LOG_WARNING, "checkpoint: skipping "
					"%s/%s: no valid %s", c->dir.path,
					e[i].name, CKPT_MANIFEST_NAME);
			else if (e[i].state == CKPT_FOREIGN)
				hvd_log(HVD_LOG_WARNING, "checkpoint: skipping "
					"%s/%s: a symbolic link or not a "
					"directory of yours (never followed)",
					c->dir.path, e[i].name);
		free(e);
	}
	return ckpt_allreduce(c, cand, 1 + MAX_CANDIDATES, HVD_MAX);
}

/* Steps 2-4 for the checkpoint of one step: VERDICT_OK when it is loaded
 * on every rank, VERDICT_SKIP when it failed verification somewhere (the
 * buffers are untouched), VERDICT_MISMATCH with *st the error otherwise. */
static int try_candidate(hvd_ckpt_t *c, long step, hvd_status_t *st)
{
	struct ckpt_manifest m = { 0 };
	struct ckpt_dir ck = { .fd = -1 };
	const char *ckdir = ck.path;
	int ret = VERDICT_MISMATCH;
	char name[64];
	int64_t v[1];

	*st = HVD_OK;
	ckpt_dir_name(name, sizeof(name), step, NULL);
	if (ckpt_dir_sub(&c->dir, name, &ck) == HVD_OK) {
		v[0] = check_candidate(c, &ck, step, &m);
	} else {
		hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
		v[0] = VERDICT_SKIP;
	}
	if (v[0] == VERDICT_MISMATCH) {
		*st = hvd_error_prefix(HVD_ERR_MISMATCH, "%s", ckdir);
		hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	}
	if (ckpt_allreduce(c, v, 1, HVD_MAX) != HVD_OK) {
		*st = hvd_error_prefix(HVD_ERR_PEER_FAILED, "restore");
		goto out;
	}
	if (v[0] == VERDICT_MISMATCH) {
		if (*st != HVD_ERR_MISMATCH)
			*st = hvd_error(HVD_ERR_MISMATCH,
					"checkpoint %s cannot be restored by "
					"this run (another rank's message says "
					"why)", ckdir);
		goto out;
	}
	if (v[0] == VERDICT_SKIP) {
		if (c->rank == 0)
			hvd_log(HVD_LOG_WARNING,
				"checkpoint: %s failed verification on at "
				"least one rank (see the warnings); falling "
				"back to the previous one", ckdir);
		ret = VERDICT_SKIP;
		goto out;
	}
	*st = load_file(c, &ck, &m, HVD_CKPT_REPLICATED);
	if (*st == HVD_OK && m.world_size == c->size)
		*st = load_file(c, &ck, &m, HVD_CKPT_PER_RANK);
	if (*st == HVD_OK && m.world_size == c->size)
		*st = load_file(c, &ck, &m, HVD_CKPT_SHARDED);
	else if (*st == HVD_OK)
		*st = load_resharded(c, &ck, &m);
	v[0] = *st != HVD_OK;
	if (*st != HVD_OK)
		hvd_log(HVD_LOG_ERROR, "%s", hvd_last_error());
	if (ckpt_allreduce(c, v, 1, HVD_MAX) != HVD_OK) {
		*st = hvd_error_prefix(HVD_ERR_PEER_FAILED, "restore");
		goto out;
	}
	if (v[0]) {
		if (*st == HVD_OK)
			*st = hvd_error(HVD_ERR_CORRUPT,
					"checkpoint %s changed while it was "
					"loaded on another rank: the registered "
					"buffers are in an undefined state",
					ckdir);
		goto out;
	}
	*st = finish_restore(c, &m, name);
	if (*st == HVD_OK)
		ret = VERDICT_OK;
out:
	ckpt_manifest_free(&m);
	ckpt_dir_close(&ck);
	return ret;
}

hvd_status_t hvd_ckpt_restore(hvd_ckpt_t *c, long *step)
{
	int64_t cand[1 + MAX_CANDIDATES] = { 0 };
	size_t skipped = 0;
	hvd_status_t st;

	if (!c || !step)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_restore: %s "
				 "is NULL", !c ? "ckpt" : "step");
	*step = 0;
	HVD_CHECK(ckpt_poll_drop(c));
	HVD_CHECK(ckpt_freeze(c));
	if (c->in_flight)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_restore: a "
				 "checkpoint is being written: call "
				 "hvd_ckpt_wait() first");
	HVD_CHECK(candidates(c, cand));
	for (int64_t i = 0; i < cand[0]; i++) {
		switch (try_candidate(c, (long)cand[1 + i], &st)) {
		case VERDICT_SKIP:
			skipped++;
			continue;
		case VERDICT_MISMATCH:
			return st;
		default:
			break;
		}
		*step = (long)cand[1 + i];
		hvd_error_clear();
		if (c->rank == 0)
			hvd_log(skipped ? HVD_LOG_WARNING : HVD_LOG_INFO,
				"checkpoint: restored %s/step-%08ld (step %ld)%s%s",
				c->dir.path, *step, *step, skipped ? " after skipping "
				"newer damaged ones" : "",
				c->restored_resized ? ", written by another "
				"number of ranks (sharded buffers resliced)" : "");
		return HVD_OK;
	}
	if (c->rank == 0 && skipped == 0) {
		ckpt_inject_point(c, "tidy", -1);
		ckpt_prune(&c->dir, c->keep, -1, c->tag, NULL);
	}
	if (cand[0] == 0)
		return hvd_error(HVD_OK, "checkpoint: no checkpoint in %s: "
				 "starting from step 0", c->dir.path);
	return hvd_error(HVD_OK, "checkpoint: none of the %lld checkpoints "
			 "in %s verifies on every rank (see the warnings): "
			 "starting from step 0", (long long)cand[0],
			 c->dir.path);
}

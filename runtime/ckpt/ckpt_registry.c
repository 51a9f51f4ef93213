/*
 * ckpt_registry.c - what a checkpoint holds: the registered buffers, the
 * metadata blob, and the freeze at the first save or restore, where the
 * ranks check that they registered the same buffers (names, kinds, sizes,
 * order) and async mode allocates its staging memory.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static hvd_status_t add_reg(hvd_ckpt_t *c, const char *fn, const char *name,
			    void *buf, size_t bytes, hvd_ckpt_kind_t kind,
			    uint64_t count, uint64_t elem)
{
	struct ckpt_reg *nr;

	if (!ckpt_name_valid(name))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "%s: name \"%s\": expected 1 to "
				 "%d characters of A-Z a-z 0-9 _ . : / + -",
				 fn, name ? name : "(null)", CKPT_NAME_MAX);
	if (c->frozen)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "%s: %s: register every buffer "
				 "before the first restore or save", fn, name);
	for (size_t i = 0; i < c->nregs; i++)
		if (strcmp(c->regs[i].name, name) == 0)
			return hvd_error(HVD_ERR_DUPLICATE_NAME,
					 "%s: buffer \"%s\" is "
					 "already registered", fn, name);
	nr = realloc(c->regs, (c->nregs + 1) * sizeof(*nr));
	if (!nr)
		return hvd_error(HVD_ERR_NO_MEMORY, "%s: out of memory", fn);
	c->regs = nr;
	nr = &c->regs[c->nregs++];
	memset(nr, 0, sizeof(*nr));
	ckpt_fmt(nr->name, sizeof(nr->name), "%s", name);
	nr->buf = buf;
	nr->bytes = bytes;
	nr->kind = kind;
	nr->device = bytes ? ckpt_dev_is_device(buf) : 0;
	c->has_device |= nr->device;
	if (kind == HVD_CKPT_REPLICATED) {
		nr->offset = c->repl_bytes;
		c->repl_bytes += bytes;
	} else if (kind == HVD_CKPT_PER_RANK) {
		nr->offset = c->rank_bytes;
		c->rank_bytes += bytes;
	} else {
		nr->count = count;
		nr->elem = elem;
		nr->offset = c->shard_bytes;
		c->shard_bytes += bytes;
		nr->goffset = c->shard_global;
		c->shard_global += count * elem;
	}
	return HVD_OK;
}

hvd_status_t hvd_ckpt_register(hvd_ckpt_t *c, const char *name, void *buf,
			       size_t bytes, hvd_ckpt_kind_t kind)
{
	if (!c || !buf || bytes == 0)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: %s", !c ? "ckpt is NULL"
				 : !buf ? "buf is NULL" : "bytes is 0");
	if (kind == HVD_CKPT_SHARDED)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: %s: a sharded buffer is "
				 "registered with hvd_ckpt_register_sharded(), "
				 "which gives the global element count and size",
				 name ? name : "(null)");
	if (kind != HVD_CKPT_REPLICATED && kind != HVD_CKPT_PER_RANK)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register: %s: kind %d is neither "
				 "HVD_CKPT_REPLICATED nor HVD_CKPT_PER_RANK",
				 name ? name : "(null)", (int)kind);
	return add_reg(c, "hvd_ckpt_register", name, buf, bytes, kind, 0, 0);
}

hvd_status_t hvd_ckpt_register_sharded(hvd_ckpt_t *c, const char *name,
				       void *buf, uint64_t count, size_t elem)
{
	uint64_t first, n;

	if (!c || count == 0 || elem == 0)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register_sharded: %s",
				 !c ? "ckpt is NULL" : count == 0
				 ? "count is 0" : "elem is 0");
	if (count > UINT64_MAX / elem ||
	    c->shard_global > UINT64_MAX - count * elem)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register_sharded: %s: %llu elements "
				 "of %zu bytes overflow", name ? name : "(null)",
				 (unsigned long long)count, elem);
	ckpt_shard_range(count, c->rank, c->size, &first, &n);
	if (n && !buf)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register_sharded: %s: buf is NULL, "
				 "this rank's block is %llu elements",
				 name ? name : "(null)", (unsigned long long)n);
	if (n > SIZE_MAX / elem)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_ckpt_register_sharded: %s: block too "
				 "large", name ? name : "(null)");
	return add_reg(c, "hvd_ckpt_register_sharded", name, buf,
		       (size_t)(n * elem), HVD_CKPT_SHARDED, count, elem);
}

uint64_t hvd_ckpt_shard_range(uint64_t count, int rank, int size,
			      uint64_t *first)
{
	uint64_t f, n;

	ckpt_shard_range(count, rank, size, &f, &n);
	if (first)
		*first = f;
	return n;
}

size_t hvd_ckpt_sampler_batch(uint64_t epoch_size, uint64_t consumed,
			      int rank, int size, size_t batch, uint64_t *pos)
{
	if (!pos)
		return 0;
	return ckpt_sampler_batch(epoch_size, consumed, rank, size, batch,
				  pos);
}

uint64_t hvd_ckpt_sampler_advance(uint64_t epoch_size, uint64_t consumed,
				  int size, size_t batch)
{
	return ckpt_sampler_advance(epoch_size, consumed, size, batch);
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

		/* a sharded block's size differs between ranks: compare the
		 * global array */
		if (c->regs[i].kind == HVD_CKPT_SHARDED) {
			sz = c->regs[i].count;
			XXH3_64bits_update(xs, &c->regs[i].elem,
					   sizeof(c->regs[i].elem));
		}

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

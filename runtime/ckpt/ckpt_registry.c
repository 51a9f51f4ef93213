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

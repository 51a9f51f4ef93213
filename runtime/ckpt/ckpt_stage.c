/*
 * ckpt_stage.c - staging memory: the copy of the registered buffers that
 * async mode writes in the background, and the path of GPU buffers through
 * host memory.  Allocated and touched once (at the first save or restore),
 * reused by every checkpoint.
 *
 * In async overlap mode the writer thread stages the host buffers while
 * the program computes; buffers in device memory are still staged by the
 * training thread inside save (a device-to-host copy needs the program's
 * device and stream ordering: keeping it there keeps the GPU path's hooks
 * single-threaded, and PCIe copies into page-locked memory are short).
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"
#include "coll/coll.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void *stage_alloc(hvd_ckpt_t *c, size_t bytes);

hvd_status_t ckpt_stage_prepare(hvd_ckpt_t *c)
{
	c->stage_pinned = c->has_device && coll_has_device();
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
	if (c->shard_bytes && !c->stage_shard) {
		c->stage_shard = stage_alloc(c, c->shard_bytes);
		if (!c->stage_shard)
			goto err_oom;
		memset(c->stage_shard, 0, c->shard_bytes);
	}
	return HVD_OK;
err_oom:
	return hvd_error(HVD_ERR_NO_MEMORY,
			 "checkpoint: cannot allocate %llu bytes of staging "
			 "memory (async mode keeps a copy of the state): use "
			 "synchronous checkpoints or more memory",
			 (unsigned long long)((c->rank == 0 ? c->repl_bytes
							    : 0) + c->rank_bytes +
					      c->shard_bytes));
}

/* The staging copy is what async mode costs the training loop: large ones
 * are split between a few threads, since one core cannot saturate the
 * memory bandwidth of a server (HOROVOD_CHECKPOINT_COPY_THREADS, default:
 * the cores the node's ranks may use per rank, at most 4).  The copy
 * streams to memory (non-temporal stores): the staging lines are not read
 * before they are written, which saves a third of the memory traffic, and
 * the program's working set stays in the caches (the 2-core build VM,
 * 512 MiB on each of 2 ranks at once: 30-45 ms against 42-60 ms with
 * memcpy). */
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

	hvd_copy_stream(p->dst, p->src, p->n);
	hvd_stream_fence();
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
		struct copy_piece one = { dst, src, n };

		copy_main(&one);
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

hvd_status_t ckpt_stage(hvd_ckpt_t *c, enum ckpt_stage_which which)
{
	hvd_status_t st = ckpt_stage_prepare(c);

	if (st != HVD_OK)
		return st;
	for (size_t i = 0; i < c->nregs; i++) {
		const struct ckpt_reg *r = &c->regs[i];
		unsigned char *dst;

		if ((r->kind == HVD_CKPT_REPLICATED && c->rank != 0) ||
		    r->bytes == 0)
			continue;
		if ((which == CKPT_STAGE_DEVICE && !r->device) ||
		    (which == CKPT_STAGE_HOST && r->device))
			continue;
		dst = (r->kind == HVD_CKPT_REPLICATED ? c->stage_repl
		       : r->kind == HVD_CKPT_SHARDED  ? c->stage_shard
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


/* --------------------------------------------------------- GPU hooks */

/* Device buffers go through host memory: the collectives' front door
 * copies them through the GPU path (HVD_ERR_UNSUPPORTED in a build
 * without it); staging for them is page-locked. */
int ckpt_dev_is_device(const void *ptr)
{
	return coll_is_device(ptr);
}

hvd_status_t ckpt_dev_copy(void *dst, const void *src, size_t n, int to_host)
{
	return to_host ? coll_to_host(dst, src, n) : coll_to_device(dst, src, n);
}

/* Host staging in huge pages where the kernel gives them (transparent
 * huge pages in "madvise" mode, Debian's default): fewer TLB misses in a
 * copy that touches every page of the state. */
#define STAGE_HUGE (2u << 20)

static void *stage_alloc(hvd_ckpt_t *c, size_t bytes)
{
	void *p = NULL;

	/* Page-locked or nothing: ckpt_stage_free() frees by c->stage_pinned,
	 * so a plain buffer must never stand in for a page-locked one. */
	if (c->stage_pinned)
		return coll_host_alloc(&p, bytes) == HVD_OK ? p : NULL;
	if (bytes < STAGE_HUGE)
		return malloc(bytes);
	if (posix_memalign(&p, STAGE_HUGE, bytes))
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(p, bytes / STAGE_HUGE * STAGE_HUGE, MADV_HUGEPAGE);
#endif
	return p;
}

void ckpt_stage_free(hvd_ckpt_t *c, void *p)
{
	if (p && c->stage_pinned)
		coll_host_free(p);
	else
		free(p);
}

/*
 * ckpt_shard.c - the arithmetic of resharding (pure, see ckpt_manifest.h):
 * which block of a sharded array a rank holds, which byte ranges of the
 * writers' shard files hold a reader's new block, and the global sampler
 * position that lets every sample of an epoch be seen once across a
 * change of size.
 */
#include "config.h"

#include "ckpt/core/ckpt_manifest.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ resharding */

void ckpt_shard_range(uint64_t count, int rank, int size, uint64_t *first,
		      uint64_t *n)
{
	uint64_t q, rem, r;

	if (size < 1 || rank < 0 || rank >= size) {
		*first = 0;
		*n = 0;
		return;
	}
	q = count / (uint64_t)size;
	rem = count % (uint64_t)size;
	r = (uint64_t)rank;
	/* r * q <= count: no overflow */
	*first = r * q + (r < rem ? r : rem);
	*n = q + (r < rem ? 1 : 0);
}

uint64_t ckpt_shard_file_bytes(const struct ckpt_manifest *m, int writer)
{
	uint64_t total = 0, first, n;

	for (size_t i = 0; i < m->nbuffers; i++) {
		const struct ckpt_buffer *b = &m->buffers[i];

		if (b->kind != HVD_CKPT_SHARDED || b->elem == 0)
			continue;
		ckpt_shard_range(b->bytes / b->elem, writer, m->world_size,
				 &first, &n);
		total += n * b->elem;
	}
	return total;
}

hvd_status_t ckpt_shard_plan(const struct ckpt_manifest *m, int rank,
			     int size, struct ckpt_shard_read **reads,
			     size_t *nreads)
{
	const int nw = m->world_size;
	struct ckpt_shard_read *rd = NULL;
	uint64_t *prefix;
	size_t n = 0, cap = 0;

	*reads = NULL;
	*nreads = 0;
	/* prefix[j]: where the current buffer's slice starts in writer j's
	 * file (the slices of the buffers before it come first) */
	prefix = calloc((size_t)nw, sizeof(*prefix));
	if (!prefix)
		goto oom;
	for (size_t i = 0; i < m->nbuffers; i++) {
		const struct ckpt_buffer *b = &m->buffers[i];
		uint64_t count, lo, cnt, hi, wlo, wcnt;

		if (b->kind != HVD_CKPT_SHARDED || b->elem == 0)
			continue;
		count = b->bytes / b->elem;
		ckpt_shard_range(count, rank, size, &lo, &cnt);
		hi = lo + cnt;
		for (int j = 0; j < nw; j++) {
			uint64_t a, z;

			ckpt_shard_range(count, j, nw, &wlo, &wcnt);
			a = lo > wlo ? lo : wlo;
			z = hi < wlo + wcnt ? hi : wlo + wcnt;
			if (a < z) {
				if (n == cap) {
					size_t nc = cap ? 2 * cap : 16;
					struct ckpt_shard_read *p;

					p = realloc(rd, nc * sizeof(*rd));
					if (!p)
						goto oom;
					rd = p;
					cap = nc;
				}
				rd[n].writer = j;
				rd[n].buf = i;
				rd[n].file_off = prefix[j] + (a - wlo) * b->elem;
				rd[n].dst_off = (a - lo) * b->elem;
				rd[n].len = (z - a) * b->elem;
				n++;
			}
			prefix[j] += wcnt * b->elem;
		}
	}
	free(prefix);
	*reads = rd;
	*nreads = n;
	return HVD_OK;
oom:
	free(prefix);
	free(rd);
	return hvd_error(HVD_ERR_NO_MEMORY,
			 "checkpoint: out of memory planning the resharding");
}

size_t ckpt_sampler_batch(uint64_t epoch_size, uint64_t consumed, int rank,
			  int size, size_t batch, uint64_t *pos)
{
	size_t n = 0;
	uint64_t p;

	if (size < 1 || rank < 0 || rank >= size || consumed >= epoch_size ||
	    epoch_size - consumed <= (uint64_t)rank)
		return 0;
	p = consumed + (uint64_t)rank;
	while (n < batch) {
		pos[n++] = p;
		if (epoch_size - p <= (uint64_t)size)
			break;
		p += (uint64_t)size;
	}
	return n;
}

uint64_t ckpt_sampler_advance(uint64_t epoch_size, uint64_t consumed,
			      int size, size_t batch)
{
	uint64_t step;

	if (size < 1 || consumed >= epoch_size)
		return epoch_size;
	step = (uint64_t)batch;
	if (step && (uint64_t)size > UINT64_MAX / step)
		return epoch_size;
	step *= (uint64_t)size;
	return epoch_size - consumed <= step ? epoch_size : consumed + step;
}

/*
 * fusion_plan.c - which responses share one collective (pure).
 *
 * The ordered responses are cut into buckets.  An allreduce joins the
 * earliest open bucket with the same type, reduction, process set, flags
 * (device, fp16 compression) and scale factors while the bucket stays
 * within HOROVOD_FUSION_THRESHOLD bytes (counted as exchanged: float16 when
 * compressing); everything else, and an allreduce as large as the
 * threshold, runs alone.
 *
 * Host allreduces of at least HOROVOD_FUSION_DIRECT_BYTES (default 64 KiB;
 * 0 fuses everything, as Horovod does) also run alone, in the caller's
 * buffers: on host memory the two copies through the fusion buffer cost
 * more than one more collective's latency from about that size on (copies
 * run at a few GB/s, a small collective takes tens of microseconds), so
 * fusion is for the many small tensors.  Device tensors always fuse (the
 * GPU path packs them with one kernel).  Buckets run in the order of their
 * first member, so every rank, given the same list, runs the same collectives
 * in the same order.  Looking past incompatible responses (instead of cutting
 * at the first one) keeps mixed-precision models, whose gradient types
 * interleave, down to one collective per type.
 */
#include "config.h"

#include "engine/core/fusion_plan.h"

#include <stdlib.h>
#include <string.h>

int fusion_compatible(const struct eng_params *a, const struct eng_params *b)
{
	/* Adasum's coefficients are per tensor: each runs alone. */
	return a->kind == EK_ALLREDUCE && b->kind == EK_ALLREDUCE &&
	       a->op != HVD_ADASUM &&
	       a->dtype == b->dtype && a->op == b->op && a->pset == b->pset &&
	       a->flags == b->flags && a->prescale == b->prescale &&
	       a->postscale == b->postscale;
}

static size_t wire_bytes(const struct eng_params *p)
{
	size_t es = hvd_dtype_size((hvd_dtype_t)p->dtype);

	if ((p->flags & EF_COMPRESS) && p->dtype == HVD_FLOAT32)
		es = 2;
	return (size_t)p->count * es;
}

void fusion_plan_free(struct fusion_plan *plan)
{
	for (int i = 0; i < plan->n; i++)
		free(plan->b[i].idx);
	free(plan->b);
	memset(plan, 0, sizeof(*plan));
}

hvd_status_t fusion_plan_build(const struct eng_resp *r, int n,
			       size_t threshold, size_t direct,
			       struct fusion_plan *plan)
{
	int *cap = NULL;

	memset(plan, 0, sizeof(*plan));
	if (!n)
		return HVD_OK;
	plan->b = calloc((size_t)n, sizeof(*plan->b));
	cap = calloc((size_t)n, sizeof(*cap));
	if (!plan->b || !cap)
		goto err_oom;
	for (int i = 0; i < n; i++) {
		size_t bytes = wire_bytes(&r[i].p);
		struct fusion_bucket *b = NULL;

		if (r[i].p.kind == EK_ALLREDUCE && threshold > 0 &&
		    bytes < threshold &&
		    (!direct || bytes < direct || (r[i].p.flags & EF_DEVICE))) {
			for (int j = 0; j < plan->n; j++) {
				struct fusion_bucket *c = &plan->b[j];

				const struct eng_params *h = &r[c->idx[0]].p;
				size_t hb = wire_bytes(h);

				if (fusion_compatible(h, &r[i].p) &&
				    c->bytes + bytes <= threshold &&
				    hb < threshold &&
				    (!direct || hb < direct ||
				     (h->flags & EF_DEVICE))) {
					b = c;
					break;
				}
			}
		}
		if (!b) {
			b = &plan->b[plan->n];
			cap[plan->n] = 4;
			b->idx = malloc(4 * sizeof(*b->idx));
			if (!b->idx)
				goto err_oom;
			b->first = i;
			plan->n++;
		}
		if (b->n == cap[b - plan->b]) {
			int c2 = cap[b - plan->b] * 2;
			int *v = realloc(b->idx, (size_t)c2 * sizeof(*v));

			if (!v)
				goto err_oom;
			b->idx = v;
			cap[b - plan->b] = c2;
		}
		b->idx[b->n++] = i;
		b->bytes += bytes;
	}
	free(cap);
	return HVD_OK;
err_oom:
	free(cap);
	fusion_plan_free(plan);
	return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
}

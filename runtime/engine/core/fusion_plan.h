/*
 * engine/core/fusion_plan.h - which of a cycle's responses share one
 * collective (fusion_plan.c); engine/fusion.c executes the plan.
 */
#ifndef HVD_ENGINE_CORE_FUSION_PLAN_H
#define HVD_ENGINE_CORE_FUSION_PLAN_H

#include "engine/core/request.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* A bucket: a run of responses executed by one collective. */
struct fusion_bucket {
	int first; /* index into the ordered response list */
	int n;	   /* members: idx[0..n-1] */
	int *idx;
	size_t bytes;
};
struct fusion_plan {
	struct fusion_bucket *b;
	int n;
};
/* Groups fusible allreduces (same dtype, op, pset, flags, scale factors)
 * up to threshold bytes, keeping the order of each bucket's first member.
 * Responses that are not allreduces, and host allreduces of direct bytes
 * or more (direct > 0), get a bucket of their own. */
hvd_status_t fusion_plan_build(const struct eng_resp *r, int n,
			       size_t threshold, size_t direct,
			       struct fusion_plan *plan);
void fusion_plan_free(struct fusion_plan *plan);
/* Two allreduce responses can share one collective. */
int fusion_compatible(const struct eng_params *a, const struct eng_params *b);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_FUSION_PLAN_H */

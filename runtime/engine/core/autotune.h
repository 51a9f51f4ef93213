/*
 * engine/core/autotune.h - the fusion threshold / cycle time tuner
 * (HOROVOD_AUTOTUNE, autotune.c), fed by rank 0's executed allreduces.
 */
#ifndef HVD_ENGINE_CORE_AUTOTUNE_H
#define HVD_ENGINE_CORE_AUTOTUNE_H

#include "base/base.h"

#include <stddef.h>
#include <stdio.h>

#pragma GCC visibility push(hidden)

struct autotune {
	int active;
	int tune_fusion, tune_cycle;
	int phase;  /* 0: fusion threshold, 1: cycle time, 2: done */
	int cand;   /* index of the candidate under test */
	int sample; /* samples taken for it */
	int warmup, samples, steps_per_sample;
	double scores[16];
	double best_score;
	size_t best_fusion;
	double best_cycle;
	size_t fusion; /* current values */
	double cycle_ms;
	/* the sample in progress */
	double t_start;
	double bytes;
	int steps;
	char *marker; /* name whose repeats count steps */
	FILE *log;
};
void autotune_init(struct autotune *a, size_t fusion, double cycle_ms,
		   int tune_fusion, int tune_cycle, FILE *log);
void autotune_free(struct autotune *a);
/* Feeds one executed allreduce; returns 1 when new values were chosen
 * (a->fusion, a->cycle_ms) and must be broadcast. */
int autotune_record(struct autotune *a, const char *name, size_t bytes,
		    double now);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_AUTOTUNE_H */

/*
 * autotune.c - online tuning of the fusion threshold and the cycle time
 * (HOROVOD_AUTOTUNE=1), run on rank 0; the engine broadcasts each choice so
 * that every rank switches at the same cycle (cycle.c).
 *
 * Score: allreduced bytes per second over a sample of
 * HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE steps (a step ends when the first
 * tensor of the sample is seen again).  Search: a coordinate sweep - first
 * the fusion threshold over a ladder of sizes, then the cycle time with the
 * best threshold - taking the median of a few samples per candidate after
 * one discarded sample (the switch itself perturbs the first one), and the
 * first HOROVOD_AUTOTUNE_WARMUP_SAMPLES samples of the run are discarded.
 * Horovod uses Bayesian optimisation over the same two knobs; with two
 * knobs and a small ladder a sweep converges in a bounded, predictable
 * number of steps.  A knob set explicitly in the environment is not tuned.
 * HOROVOD_AUTOTUNE_LOG gets one CSV line per candidate.
 */
#include "config.h"

#include "engine/core/autotune.h"

#include <stdlib.h>
#include <string.h>

#define SAMPLES_PER_CAND 3

static const size_t fusion_ladder[] = {
    1u << 20, 4u << 20, 16u << 20, 32u << 20, 64u << 20, 128u << 20,
};
static const double cycle_ladder[] = {0.5, 1.0, 2.5, 5.0, 10.0};
#define NFUSION (int)(sizeof(fusion_ladder) / sizeof(fusion_ladder[0]))
#define NCYCLE (int)(sizeof(cycle_ladder) / sizeof(cycle_ladder[0]))

void autotune_init(struct autotune *a, size_t fusion, double cycle_ms,
		   int tune_fusion, int tune_cycle, FILE *log)
{
	memset(a, 0, sizeof(*a));
	a->fusion = a->best_fusion = fusion;
	a->cycle_ms = a->best_cycle = cycle_ms;
	a->tune_fusion = tune_fusion;
	a->tune_cycle = tune_cycle;
	a->warmup = (int)hvd_env_long("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", 3);
	a->steps_per_sample =
	    (int)hvd_env_long("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", 10);
	if (a->steps_per_sample < 1)
		a->steps_per_sample = 1;
	if (a->warmup < 0)
		a->warmup = 0;
	a->samples = SAMPLES_PER_CAND;
	a->log = log;
	a->phase = tune_fusion ? 0 : tune_cycle ? 1 : 2;
	a->active = a->phase < 2;
	a->cand = -1; /* -1: measuring the starting values */
	if (a->log)
		fprintf(a->log,
			"cycle_time_ms,tensor_fusion_threshold,score\n");
}

void autotune_free(struct autotune *a)
{
	free(a->marker);
	if (a->log)
		fclose(a->log);
	memset(a, 0, sizeof(*a));
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* Moves to the next candidate; returns 1 when the values changed. */
static int next_candidate(struct autotune *a)
{
	double med;

	qsort(a->scores, (size_t)a->sample, sizeof(double), cmp_double);
	med = a->scores[a->sample / 2];
	if (a->log) {
		fprintf(a->log, "%g,%zu,%g\n", a->cycle_ms, a->fusion, med);
		fflush(a->log);
	}
	if (med > a->best_score) {
		a->best_score = med;
		a->best_fusion = a->fusion;
		a->best_cycle = a->cycle_ms;
	}
	a->sample = 0;
	a->cand++;
	if (a->phase == 0 && a->cand >= NFUSION) {
		a->phase = a->tune_cycle ? 1 : 2;
		a->cand = 0;
		a->fusion = a->best_fusion;
	}
	if (a->phase == 1 && a->cand >= NCYCLE) {
		a->phase = 2;
	}
	if (a->phase == 2) {
		a->active = 0;
		a->fusion = a->best_fusion;
		a->cycle_ms = a->best_cycle;
		hvd_log(HVD_LOG_INFO,
			"autotune done: HOROVOD_FUSION_THRESHOLD=%zu "
			"HOROVOD_CYCLE_TIME=%g (%.1f MB/s)",
			a->fusion, a->cycle_ms, a->best_score / 1e6);
		return 1;
	}
	if (a->phase == 0)
		a->fusion = fusion_ladder[a->cand];
	else
		a->cycle_ms = cycle_ladder[a->cand];
	a->sample = -1; /* discard the first sample after a switch */
	return 1;
}

int autotune_record(struct autotune *a, const char *name, size_t bytes,
		    double now)
{
	if (!a->active)
		return 0;
	if (!a->marker) {
		a->marker = strdup(name);
		a->t_start = now;
		a->bytes = 0;
		a->steps = 0;
		return 0;
	}
	if (strcmp(a->marker, name) == 0 && ++a->steps >= a->steps_per_sample) {
		double dt = now - a->t_start;
		double score = dt > 0 ? a->bytes / dt : 0;

		a->t_start = now;
		a->bytes = 0;
		a->steps = 0;
		if (a->warmup > 0) {
			a->warmup--;
		} else if (a->sample < 0) {
			a->sample = 0;
		} else {
			a->scores[a->sample++] = score;
			if (a->sample >= a->samples)
				return next_candidate(a);
		}
	}
	a->bytes += (double)bytes;
	return 0;
}

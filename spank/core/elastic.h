/*
 * elastic.h - what --horovod=elastic needs from the launch, as a pure check.
 *
 * Elastic training goes on when a task dies or a node is lost, so the step
 * must outlive both: srun must not end the step when one task exits with an
 * error (--kill-on-bad-exit / -K / SLURM_KILL_BAD_EXIT, or slurm.conf's
 * KillOnBadExit when srun is given none), and Slurm must not end it when
 * one of its nodes fails (--no-kill / -k, for the step and, in sbatch and
 * salloc, for the job).  The plugin reads what srun, sbatch or salloc
 * parsed (plugin/launcher.c) and refuses before anything is allocated;
 * slurmstepd sees none of it.
 */
#ifndef SPANK_CORE_ELASTIC_H
#define SPANK_CORE_ELASTIC_H

#include <stddef.h>

#include "opt.h"

/* The launch as the launcher understood it; -1: not known. */
struct elastic_launch {
	const char *cmd;	/* "srun", "sbatch" or "salloc" */
	int kill_bad_exit;	/* srun's --kill-on-bad-exit; -1 not given */
	int kill_bad_exit_conf; /* slurm.conf's KillOnBadExit */
	int no_kill;		/* --no-kill given: 1, not: 0 */
	long ntasks;		/* tasks of the step, or -1 */
};

/* An unknown launch: every field -1. */
void elastic_launch_init(struct elastic_launch *l, const char *cmd);

/*
 * 0 when `o` is not elastic or the launch suits it, else -1 with a message
 * naming the option that defeats it and the one to use instead.  What is
 * unknown (-1) is not held against the launch.
 */
int elastic_check(const struct opt *o, const struct elastic_launch *l,
		  char *err, size_t errlen);

#endif /* SPANK_CORE_ELASTIC_H */

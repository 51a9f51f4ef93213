/*
 * args.h - the --horovod option table and the plugin's state in one
 * process (srun, sbatch/salloc or slurmstepd): the admin's policy from the
 * plugstack arguments and the user's option string.
 */
#ifndef SPANK_PLUGIN_ARGS_H
#define SPANK_PLUGIN_ARGS_H

#include <slurm/spank.h>

#include "core/cfg.h"
#include "core/err.h"
#include "core/opt.h"

struct args {
	int used;      /* --horovod was given (or came from #SBATCH) */
	int remote;    /* callbacks ran in slurmstepd */
	struct cfg cfg;
	struct opt opt; /* cfg.defaults overlaid with the user's keys */
	char raw[OPT_MAX_LEN + 1]; /* the user's string, "" if none */
	char err[ERR_LEN + 64];	   /* a refusal deferred to task_init */
};

extern struct args args;

/* Parse the plugstack arguments and log what is wrong with them; 0 or -1. */
int args_check(int ac, char **av);

/* Parse the plugstack arguments and register --horovod (from init). */
int args_init(spank_t sp, int ac, char **av);

#endif /* SPANK_PLUGIN_ARGS_H */

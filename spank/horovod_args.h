/*
 * horovod_args.h - the --horovod option table and the plugin's state in one
 * process (srun, sbatch/salloc or slurmstepd): the admin's policy from the
 * plugstack arguments and the user's option string.
 */
#ifndef HOROVOD_ARGS_H
#define HOROVOD_ARGS_H

#include <slurm/spank.h>

#include "horovod_config.h"
#include "horovod_opt.h"

struct horovod_args {
	int used;      /* --horovod was given (or came from #SBATCH) */
	int remote;    /* callbacks ran in slurmstepd */
	struct hvdcfg cfg;
	struct hvdopt opt; /* cfg.defaults overlaid with the user's keys */
	char raw[HVDOPT_MAX_LEN + 1]; /* the user's string, "" if none */
	char err[HVDOPT_ERR_LEN + 64]; /* a refusal deferred to task_init */
};

extern struct horovod_args horovod_args;

/* Parse the plugstack arguments and log what is wrong with them; 0 or -1. */
int horovod_args_check(int ac, char **av);

/* Parse the plugstack arguments and register --horovod (from init). */
int horovod_args_init(spank_t sp, int ac, char **av);

#endif /* HOROVOD_ARGS_H */

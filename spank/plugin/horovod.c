/*
 * horovod.c - SPANK entry points of horovod.so.  Each callback hands its
 * context to its own file: srun.c (srun, local), alloc.c (sbatch/salloc,
 * allocator), stepd.c (slurmstepd, remote); args.c holds the option table
 * and the admin's policy for all of them.
 * Reading this file tells what runs where.
 */
#include <slurm/spank.h>

#include "args.h"
#include "context.h"

SPANK_PLUGIN(horovod, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
		return srun_init(sp, ac, av);
	case S_CTX_ALLOCATOR:
		return alloc_init(sp, ac, av);
	case S_CTX_REMOTE:
		return stepd_init(sp, ac, av);
	case S_CTX_SLURMD:
		/* Only to log a bad plugstack line when slurmd starts; jobs
		 * are stopped by the other contexts, slurmd keeps running. */
		args_check(ac, av);
		return 0;
	default:
		return 0;
	}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
		return srun_post_opt(sp, ac, av);
	case S_CTX_ALLOCATOR:
		return alloc_post_opt(sp, ac, av);
	default:
		return 0;
	}
}

/* srun only, once the step exists and before it is launched. */
int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_LOCAL)
		return srun_user_init(sp, ac, av);
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_REMOTE)
		return stepd_user_init(sp, ac, av);
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_REMOTE)
		return stepd_task_init(sp, ac, av);
	return 0;
}

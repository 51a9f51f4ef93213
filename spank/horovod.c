/*
 * horovod.c - SPANK entry points of horovod.so.  Each callback hands its
 * context to its own file: horovod_srun.c (srun, local), horovod_alloc.c
 * (sbatch/salloc, allocator), horovod_stepd.c (slurmstepd, remote).
 * Reading this file tells what runs where.
 */
#include <slurm/spank.h>

#include "horovod_args.h"
#include "horovod_context.h"

SPANK_PLUGIN(horovod, 1);

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
		return horovod_srun_init(sp, ac, av);
	case S_CTX_ALLOCATOR:
		return horovod_alloc_init(sp, ac, av);
	case S_CTX_REMOTE:
		return horovod_stepd_init(sp, ac, av);
	case S_CTX_SLURMD:
		/* Only to log a bad plugstack line when slurmd starts; jobs
		 * are stopped by the other contexts, slurmd keeps running. */
		horovod_args_check(ac, av);
		return 0;
	default:
		return 0;
	}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
		return horovod_srun_post_opt(sp, ac, av);
	case S_CTX_ALLOCATOR:
		return horovod_alloc_post_opt(sp, ac, av);
	default:
		return 0;
	}
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_REMOTE)
		return horovod_stepd_user_init(sp, ac, av);
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_REMOTE)
		return horovod_stepd_task_init(sp, ac, av);
	return 0;
}

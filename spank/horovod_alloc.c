/*
 * horovod_alloc.c - sbatch and salloc (allocator context).
 *
 * Only init, the option callback and init_post_opt run here, and no job
 * item is available.  The callback validates the option (sbatch exits 1
 * on a bad one, nothing is queued); Slurm then carries it into the job's
 * environment, and every srun of the script inherits it unless that srun
 * gives its own --horovod.
 */
#include "horovod_args.h"
#include "horovod_context.h"

int horovod_alloc_init(spank_t sp, int ac, char **av)
{
	return horovod_args_init(sp, ac, av);
}

int horovod_alloc_post_opt(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (horovod_args.used)
		slurm_verbose("horovod: --horovod=%s applies to every srun of "
			      "the job that does not give its own",
			      horovod_args.raw);
	return 0;
}

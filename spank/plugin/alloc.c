/*
 * alloc.c - sbatch and salloc (allocator context).
 *
 * Only init, the option callback and init_post_opt run here, and no job
 * item is available.  The callback validates the option (sbatch exits 1
 * on a bad one, nothing is queued); Slurm then carries it into the job's
 * environment, and every srun of the script inherits it unless that srun
 * gives its own --horovod.
 */
#include "args.h"
#include "context.h"

int alloc_init(spank_t sp, int ac, char **av)
{
	return args_init(sp, ac, av);
}

int alloc_post_opt(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (args.used)
		slurm_verbose("horovod: --horovod=%s applies to every srun of "
			      "the job that does not give its own",
			      args.raw);
	return 0;
}

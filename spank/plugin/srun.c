/*
 * srun.c - srun (local context).
 *
 * The option callback has already refused a bad --horovod (srun exits 1
 * before asking for an allocation).  What remains is to say, with srun -v,
 * what the step will get.
 */
#include "args.h"
#include "context.h"

int srun_init(spank_t sp, int ac, char **av)
{
	return args_init(sp, ac, av);
}

int srun_post_opt(spank_t sp, int ac, char **av)
{
	char buf[OPT_MAX_LEN + 64];

	(void)sp;
	(void)ac;
	(void)av;
	if (!args.used)
		return 0;
	opt_format(&args.opt, buf, sizeof(buf));
	slurm_verbose("horovod: --horovod=%s (effective: %s)", args.raw,
		      buf[0] ? buf : "defaults");
	return 0;
}

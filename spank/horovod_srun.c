/*
 * horovod_srun.c - srun (local context).
 *
 * The option callback has already refused a bad --horovod (srun exits 1
 * before asking for an allocation).  What remains is to say, with srun -v,
 * what the step will get.
 */
#include "horovod_args.h"
#include "horovod_context.h"

int horovod_srun_init(spank_t sp, int ac, char **av)
{
	return horovod_args_init(sp, ac, av);
}

int horovod_srun_post_opt(spank_t sp, int ac, char **av)
{
	char buf[HVDOPT_MAX_LEN + 64];

	(void)sp;
	(void)ac;
	(void)av;
	if (!horovod_args.used)
		return 0;
	hvdopt_format(&horovod_args.opt, buf, sizeof(buf));
	slurm_verbose("horovod: --horovod=%s (effective: %s)",
		      horovod_args.raw, buf[0] ? buf : "defaults");
	return 0;
}

/*
 * alloc.c - sbatch and salloc (allocator context).
 *
 * Only init, the option callback and init_post_opt run here, and no job
 * item is available.  The callback validates the option (sbatch exits 1
 * on a bad one, nothing is queued); Slurm then carries it into the job's
 * environment, and every srun of the script inherits it unless that srun
 * gives its own --horovod.  With --horovod=elastic the job itself must
 * outlive a failed node (--no-kill): checked here, on what sbatch or salloc
 * parsed (launcher.c); each srun checks its own options.
 */
#include "config.h" /* _GNU_SOURCE: program_invocation_short_name */

#include "args.h"
#include "context.h"
#include "core/elastic.h"
#include "launcher.h"

#include <errno.h>
#include <string.h>

int alloc_init(spank_t sp, int ac, char **av)
{
	return args_init(sp, ac, av);
}

int alloc_post_opt(spank_t sp, int ac, char **av)
{
	const char *cmd = program_invocation_short_name;

	(void)sp;
	(void)ac;
	(void)av;
	if (!args.used)
		return 0;
	if (args.opt.elastic) {
		struct elastic_launch l;
		char err[ERR_LEN];

		launcher_read(strcmp(cmd, "salloc") == 0 ? "salloc" : "sbatch",
			      &l);
		if (elastic_check(&args.opt, &l, err, sizeof(err))) {
			slurm_error("horovod: %s", err);
			return -1;
		}
	}
	slurm_verbose("horovod: --horovod=%s applies to every srun of the job "
		      "that does not give its own",
		      args.raw);
	return 0;
}

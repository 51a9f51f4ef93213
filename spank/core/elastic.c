/* elastic.c - see elastic.h. */
#include "elastic.h"
#include "err.h"

#include <string.h>

void elastic_launch_init(struct elastic_launch *l, const char *cmd)
{
	l->cmd = cmd;
	l->kill_bad_exit = -1;
	l->kill_bad_exit_conf = -1;
	l->no_kill = -1;
	l->ntasks = -1;
}

int elastic_check(const struct opt *o, const struct elastic_launch *l,
		  char *err, size_t errlen)
{
	int srun = strcmp(l->cmd, "srun") == 0;

	if (!o->elastic)
		return 0;
	if (srun && l->kill_bad_exit > 0) {
		err_set(
		    err, errlen,
		    "--horovod=elastic: srun would end the whole step when "
		    "one task exits with an error (--kill-on-bad-exit, -K or "
		    "SLURM_KILL_BAD_EXIT), and elastic training must go on "
		    "without it; leave that option out, or give "
		    "--kill-on-bad-exit=0");
		return -1;
	}
	if (srun && l->kill_bad_exit < 0 && l->kill_bad_exit_conf > 0) {
		err_set(err, errlen,
			"--horovod=elastic: this cluster ends a step when one "
			"task exits with an error (KillOnBadExit=1 in "
			"slurm.conf), and elastic training must go on without "
			"it; give srun --kill-on-bad-exit=0");
		return -1;
	}
	if (l->no_kill == 0) {
		err_set(
		    err, errlen,
		    "--horovod=elastic: without --no-kill Slurm ends the %s "
		    "when one of its nodes fails, and elastic training must "
		    "go on without it; give %s --no-kill (-k)",
		    srun ? "step" : "job", l->cmd);
		return -1;
	}
	if (o->elastic_min && l->ntasks > 0 &&
	    o->elastic_min > (unsigned long)l->ntasks) {
		err_set(err, errlen,
			"--horovod=elastic,elastic-min=%lu: the step has %ld "
			"task%s; expected elastic-min at most %ld",
			o->elastic_min, l->ntasks, l->ntasks == 1 ? "" : "s",
			l->ntasks);
		return -1;
	}
	return 0;
}

/*
 * args.c - option table, option callback and plugstack policy.
 *
 * The callback runs in srun/sbatch/salloc with remote=0 as soon as Slurm
 * parses --horovod (a refusal there stops the command before anything is
 * allocated or launched), and in slurmstepd with remote=1, as root, before
 * init_post_opt; a refusal there is only logged by Slurm, so it is kept and
 * returned from task_init, which does fail the step.
 */
#include "args.h"

#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct args args;

static int opt_cb(int val, const char *arg, int remote);

static struct spank_option horovod_option = {
	.name = "horovod",
	.arginfo = "KEY=VALUE,...",
	.usage = "[horovod] set ranks, GPU, InfiniBand/NCCL/UCX variables and "
		 "checkpoint settings for every task. Keys: ckpt-every=N, "
		 "ckpt-dir=PATH (%u %j %s %x), ckpt-keep=K, fusion-mb=N, "
		 "cycle-ms=X, cache=N, timeline=PATH, hierarchical=on|off, "
		 "stall-s=N, log=LEVEL, gpu-bind=closest|none, "
		 "cpu-bind=numa|none, net=auto|ib|roce|tcp, elastic, "
		 "elastic-min=N, verbose. "
		 "An srun's own --horovod replaces the one of #SBATCH. "
		 "See horovod(8), hvd-topo(1).",
	.has_arg = 2,
	.val = 0,
	.cb = opt_cb,
};

/*
 * Refuse a ckpt-dir outside the admin's ckpt_roots already in srun/sbatch,
 * so that the job does not wait in the queue only to fail.  The job id and
 * name are not known yet: %j, %s and %x stand for placeholders, which cannot
 * change the outcome (they only fill path components, never climb).
 * slurmstepd checks the real path again.
 */
static int roots_check(const struct opt *o, char *err, size_t errlen)
{
	const struct cfg *cfg = &args.cfg;
	char path[PATH_LEN], why[ERR_LEN], user[64] = "user";
	struct passwd pw, *pwp = NULL;
	char pwbuf[4096];

	if (!cfg->ckpt_roots[0] || !(o->set & (1u << OPT_CKPT_DIR)))
		return 0;
	if (getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
		snprintf(user, sizeof(user), "%s", pw.pw_name);
	if (path_expand(o->ckpt_dir, user, 1, "job", path, sizeof(path), why,
			sizeof(why))) {
		snprintf(err, errlen, "--horovod: ckpt-dir=%.80s: %.80s",
			 o->ckpt_dir, why);
		return -1;
	}
	if (path_under(path, cfg->ckpt_roots))
		return 0;
	snprintf(err, errlen,
		 "--horovod: ckpt-dir=%.60s: outside the directories this site "
		 "allows for checkpoints; expected a ckpt-dir under %.60s",
		 o->ckpt_dir, cfg->ckpt_roots);
	return -1;
}

/*
 * Slurm may call this several times: first with the value inherited from
 * the environment (an #SBATCH --horovod reaches every srun of the script as
 * SLURM_SPANK__SLURM_SPANK_OPTION_horovod_horovod), then with srun's own
 * command line, and on the remote side once from the launch message and
 * once from the job environment.  The last value wins: that is how an
 * srun's --horovod replaces the job's.
 */
static int opt_cb(int val, const char *arg, int remote)
{
	struct args *a = &args;
	struct opt o = a->cfg.defaults;
	char err[ERR_LEN];

	(void)val;
	/* Slurm forwards a bare --horovod as an empty string: defaults. */
	if (arg && arg[0] == '\0')
		arg = NULL;
	a->used = 1;
	a->remote = remote;
	a->err[0] = '\0';
	if (opt_parse(arg, &o, err, sizeof(err))) {
		if (remote) {
			/* Slurm only logs a failed remote callback. */
			snprintf(a->err, sizeof(a->err), "%s", err);
			slurm_error("horovod: %s", err);
			return -1;
		}
		slurm_error("horovod: %s", err);
		return -1;
	}
	if (!remote && roots_check(&o, err, sizeof(err))) {
		slurm_error("horovod: %s", err);
		return -1;
	}
	a->opt = o;
	snprintf(a->raw, sizeof(a->raw), "%s", arg ? arg : "");
	return 0;
}

int args_check(int ac, char **av)
{
	struct args *a = &args;
	char err[512];

	memset(a, 0, sizeof(*a));
	cfg_init(&a->cfg);
	if (cfg_parse(ac, av, &a->cfg, err, sizeof(err))) {
		char line[512] = "";
		size_t n = 0;

		for (int i = 0; i < ac && n < sizeof(line); i++)
			n += (size_t)snprintf(line + n, sizeof(line) - n,
					      " %s", av[i]);
		slurm_error("horovod: plugstack.conf: %s (arguments:%s)", err,
			    line);
		return -1;
	}
	return 0;
}

int args_init(spank_t sp, int ac, char **av)
{
	struct args *a = &args;
	spank_err_t rc;

	if (args_check(ac, av))
		return -1;
	a->opt = a->cfg.defaults;
	rc = spank_option_register(sp, &horovod_option);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("horovod: cannot register --horovod: %s",
			    spank_strerror(rc));
		return -1;
	}
	return 0;
}

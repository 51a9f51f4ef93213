/*
 * launcher.c - what srun, sbatch or salloc parsed, for the checks that need
 * the launch's own options (core/elastic.h).
 *
 * SPANK gives a plugin none of the launcher's options in the local and
 * allocator contexts (no spank_get_item for them; S_JOB_ARGV is the
 * program's command line, and only after the allocation).  But the plugin
 * runs inside the launcher, which exports its parsed options as the global
 * `opt`, and libslurm reads them by name with slurm_option_get() and
 * slurm_option_isset(): the values the launcher acts on, whether they came
 * from the command line (abbreviated or not), #SBATCH lines or SLURM_*
 * input variables.  Here `opt` stays opaque; only those two functions touch
 * it.  They and slurm.conf's KillOnBadExit (the global slurm_conf, whose
 * layout is slurm.h's, the version this plugin was built for) are found with
 * dlsym, so the plugin still loads where they are missing; then only the
 * input variables are read, and srun -v says so.
 */
#include "config.h" /* _GNU_SOURCE: RTLD_DEFAULT */

#include "launcher.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

typedef char *(*option_get_f)(void *opt, const char *name);
typedef bool (*option_isset_f)(void *opt, const char *name);
typedef void (*xfree_f)(void **p);

/* An option's value as the launcher holds it, or NULL; caller frees. */
static char *get(void *opt, const char *name, option_get_f get_f,
		 option_isset_f isset_f)
{
	char *v;

	if (!isset_f(opt, name))
		return NULL;
	v = get_f(opt, name);
	return v;
}

static void release(char *v, xfree_f xfree_fn)
{
	/* libslurm's strings come from its own allocator. */
	if (v && xfree_fn)
		xfree_fn((void **)&v);
}

int launcher_read(const char *cmd, struct elastic_launch *l)
{
	void *opt = dlsym(RTLD_DEFAULT, "opt");
	option_get_f get_f =
	    (option_get_f)(uintptr_t)dlsym(RTLD_DEFAULT, "slurm_option_get");
	option_isset_f isset_f = (option_isset_f)(uintptr_t)dlsym(
	    RTLD_DEFAULT, "slurm_option_isset");
	xfree_f xfree_fn =
	    (xfree_f)(uintptr_t)dlsym(RTLD_DEFAULT, "slurm_xfree");
	slurm_conf_t *conf = dlsym(RTLD_DEFAULT, "slurm_conf");
	const char *e;
	char *v;

	elastic_launch_init(l, cmd);
	if (conf)
		l->kill_bad_exit_conf = conf->kill_on_bad_exit;
	if (!opt || !get_f || !isset_f) {
		/* Only what the environment says, in srun's own terms. */
		e = getenv("SLURM_KILL_BAD_EXIT");
		if (e && strcmp(cmd, "srun") == 0)
			l->kill_bad_exit = atoi(e);
		e = getenv("SLURM_NO_KILL");
		if (e)
			l->no_kill =
			    strcmp(e, "off") != 0 && strcmp(e, "no") != 0;
		slurm_verbose(
		    "horovod: %s's parsed options are not readable "
		    "here: only SLURM_KILL_BAD_EXIT and SLURM_NO_KILL "
		    "were checked for --horovod=elastic",
		    cmd);
		return 0;
	}
	if (strcmp(cmd, "srun") == 0) {
		v = get(opt, "kill-on-bad-exit", get_f, isset_f);
		if (v)
			l->kill_bad_exit = atoi(v);
		release(v, xfree_fn);
	}
	v = get_f(opt, "no-kill"); /* "set" or "unset" */
	if (v)
		l->no_kill = strcmp(v, "set") == 0;
	release(v, xfree_fn);
	v = get(opt, "ntasks", get_f, isset_f);
	if (v && atol(v) > 0)
		l->ntasks = atol(v);
	release(v, xfree_fn);
	return 1;
}

/*
 * stepd.c - slurmstepd (remote context).
 *
 *   init (root)       policy from plugstack, register --horovod
 *   option callback   (root) re-validates the user's string: srun-side
 *                     checks can be bypassed by crafting the launch
 *   user_init         (euid = user) loads the node's topology once; the
 *                     task processes forked afterwards inherit it
 *   task_init         (fully the user, in the task just before exec)
 *                     PMIx check, layout, hints, setenv, optional binding,
 *                     checkpoint directory (created here, as the user,
 *                     never as root), verbose report
 *
 * Errors found before task_init are kept and returned from task_init:
 * Slurm does not fail a step for a failed remote option callback or
 * user_init (SchedMD bug 7573), but it does for task_init, and the task
 * then never starts.
 */
#include "config.h" /* _GNU_SOURCE: CPU_ALLOC, sched_getaffinity */

#include "args.h"
#include "context.h"
#include "core/ckptdir.h"
#include "core/hints.h"
#include "core/layout.h"
#include "core/machine.h"
#include "core/topo.h"
#include "core/vars.h"

#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>

static struct {
	int skip;	     /* a step the plugin leaves alone */
	struct topo *topo;   /* this node, from user_init */
	char err[512];	     /* deferred to task_init */
} stepd;

int stepd_init(spank_t sp, int ac, char **av)
{
	return args_init(sp, ac, av);
}

int stepd_user_init(spank_t sp, int ac, char **av)
{
	uint32_t stepid = 0;
	spank_err_t rc;

	(void)ac;
	(void)av;
	if (!args.used)
		return 0;
	rc = spank_get_item(sp, S_JOB_STEPID, &stepid);
	if (rc != ESPANK_SUCCESS) {
		snprintf(stepd.err, sizeof(stepd.err),
			 "cannot get the step id: %s", spank_strerror(rc));
		return 0;
	}
	/*
	 * The batch script, the extern step and salloc's interactive step are
	 * not training tasks; giving the batch script HOROVOD_RANK=0 would
	 * also leak into every srun it runs, where it would look user-set.
	 */
	if (stepid == SLURM_BATCH_SCRIPT || stepid == SLURM_EXTERN_CONT ||
	    stepid == SLURM_INTERACTIVE_STEP) {
		stepd.skip = 1;
		return 0;
	}
	stepd.topo = calloc(1, sizeof(*stepd.topo));
	if (!stepd.topo) {
		snprintf(stepd.err, sizeof(stepd.err), "out of memory");
		return 0;
	}
	/* The daemon's sysfs, never a path from the job's environment. */
	if (machine_load(stepd.topo, NULL, "/sys", stepd.err,
			 sizeof(stepd.err))) {
		free(stepd.topo);
		stepd.topo = NULL;
	}
	return 0;
}

/* Report a refusal; the caller returns -1, which fails the step. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* slurm_error reaches the task's stderr and the slurmd log. */
	slurm_error("horovod: %s", msg);
	return -1;
}

static int get_u32(spank_t sp, spank_item_t item, uint32_t *v,
		   const char *what)
{
	spank_err_t rc = spank_get_item(sp, item, v);

	if (rc != ESPANK_SUCCESS)
		return fail("cannot get %s from Slurm: %s", what,
			    spank_strerror(rc));
	return 0;
}

static int pmix_check(char *const *env)
{
	const char *mpi = vars_getenv(env, "SLURM_MPI_TYPE");

	if (vars_getenv(env, "PMIX_RANK") ||
	    (mpi && strncmp(mpi, "pmix", 4) == 0))
		return 0;
	return fail("this step was not launched with PMIx (SLURM_MPI_TYPE=%s)"
		    ", so the tasks could not find each other; run srun "
		    "--mpi=pmix, or ask the admin to set MpiDefault=pmix in "
		    "slurm.conf",
		    mpi ? mpi : "unset");
}

static int layout(spank_t sp, char *const *env, struct layout *l)
{
	uint32_t v, uid;
	const char *s;
	unsigned counts[1024], n;
	struct passwd pw, *pwp = NULL;
	char pwbuf[4096];
	cpu_set_t *set;
	size_t setsz;

	memset(l, 0, sizeof(*l));
	if (get_u32(sp, S_TASK_GLOBAL_ID, &l->rank, "the task's rank") ||
	    get_u32(sp, S_JOB_TOTAL_TASK_COUNT, &l->size, "the task count") ||
	    get_u32(sp, S_JOB_LOCAL_TASK_COUNT, &l->local_size,
		    "the local task count") ||
	    get_u32(sp, S_JOB_NODEID, &l->node_id, "the node id") ||
	    get_u32(sp, S_JOB_NNODES, &l->nnodes, "the node count") ||
	    get_u32(sp, S_JOB_ID, &v, "the job id"))
		return -1;
	l->job_id = v;
	if (get_u32(sp, S_JOB_STEPID, &v, "the step id"))
		return -1;
	l->step_id = v;
	{
		int id;
		spank_err_t rc = spank_get_item(sp, S_TASK_ID, &id);

		if (rc != ESPANK_SUCCESS || id < 0)
			return fail("cannot get the local task id: %s",
				    spank_strerror(rc));
		l->local_rank = (unsigned)id;
	}
	/* Cross rank from the per-node task counts; without them (very old
	 * or odd launches) assume one task per local rank on every node. */
	s = vars_getenv(env, "SLURM_STEP_TASKS_PER_NODE");
	if (!s || layout_tasks_per_node(s, counts, 1024, &n) ||
	    n != l->nnodes ||
	    layout_cross(counts, n, l->node_id, l->local_rank, &l->cross_rank,
			 &l->cross_size)) {
		l->cross_rank = l->node_id;
		l->cross_size = l->nnodes;
	}
	s = vars_getenv(env, "SLURMD_NODENAME");
	if (s && strlen(s) < sizeof(l->hostname))
		strcpy(l->hostname, s);
	else if (gethostname(l->hostname, sizeof(l->hostname) - 1))
		l->hostname[0] = '\0';
	layout_master(l, vars_getenv(env, "SLURM_STEP_NODELIST"),
		      vars_getenv(env, LAYOUT_ADDR_VAR),
		      vars_getenv(env, "SLURM_STEP_RESV_PORTS"));
	/* The task child runs in the job's working directory by now. */
	if (!getcwd(l->cwd, sizeof(l->cwd)))
		l->cwd[0] = '\0';
	s = vars_getenv(env, "SLURM_JOB_NAME");
	snprintf(l->job_name, sizeof(l->job_name), "%s", s ? s : "job");
	if (get_u32(sp, S_JOB_UID, &uid, "the job's user"))
		return -1;
	if (getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
		snprintf(l->user, sizeof(l->user), "%s", pw.pw_name);
	else
		snprintf(l->user, sizeof(l->user), "%u", (unsigned)uid);
	/* The CPUs Slurm (cgroup, task/affinity) lets this task use. */
	set = CPU_ALLOC(CPUSET_MAX_CPUS);
	setsz = CPU_ALLOC_SIZE(CPUSET_MAX_CPUS);
	if (set && sched_getaffinity(0, setsz, set) == 0) {
		l->have_allowed = 1;
		for (unsigned c = 0; c < CPUSET_MAX_CPUS; c++)
			if (CPU_ISSET_S(c, setsz, set))
				cpuset_set(&l->allowed, c);
	}
	CPU_FREE(set);
	return 0;
}

static int bind_cpus(const struct cpuset *cpus)
{
	cpu_set_t *set = CPU_ALLOC(CPUSET_MAX_CPUS);
	size_t setsz = CPU_ALLOC_SIZE(CPUSET_MAX_CPUS);
	int rc;

	if (!set)
		return fail("cpu-bind=numa: out of memory");
	CPU_ZERO_S(setsz, set);
	for (unsigned c = 0; c < CPUSET_MAX_CPUS; c++)
		if (cpuset_isset(cpus, c))
			CPU_SET_S(c, setsz, set);
	rc = sched_setaffinity(0, setsz, set);
	CPU_FREE(set);
	if (rc)
		return fail("cpu-bind=numa: sched_setaffinity: %s",
			    strerror(errno));
	return 0;
}

static void report(const struct layout *l, const struct hints *h)
{
	char buf[OPT_MAX_LEN + 64];

	opt_format(&args.opt, buf, sizeof(buf));
	fprintf(stderr, "horovod: rank %u (node %u, local rank %u): "
			"settings: %s\n",
		l->rank, l->node_id, l->local_rank, buf[0] ? buf : "defaults");
	for (int i = 0; i < h->n; i++)
		fprintf(stderr, "horovod: rank %u: %s=%s %s(%s)\n", l->rank,
			h->h[i].name, h->h[i].value,
			h->h[i].action == HINT_KEPT	? "[kept] "
			: h->h[i].action == HINT_FORCED ? "[forced] "
							: "",
			h->h[i].why);
	for (int i = 0; i < h->nnotes; i++)
		fprintf(stderr, "horovod: rank %u: note: %s\n", l->rank,
			h->notes[i]);
	fflush(stderr);
}

int stepd_task_init(spank_t sp, int ac, char **av)
{
	struct layout l;
	struct hints *h = NULL;
	char **env = NULL, err[512];
	spank_err_t rc;
	int ret = -1, handover;

	(void)ac;
	(void)av;
	if (!args.used || stepd.skip)
		return 0;
	if (args.err[0])
		return fail("%s", args.err);
	if (stepd.err[0] || !stepd.topo)
		return fail("cannot read this node's topology: %s",
			    stepd.err[0] ? stepd.err : "user_init did not run");
	rc = spank_get_item(sp, S_JOB_ENV, &env);
	if (rc != ESPANK_SUCCESS)
		return fail("cannot read the task environment: %s",
			    spank_strerror(rc));
	if (pmix_check(env) || layout(sp, env, &l))
		return -1;
	/* `env` is Slurm's array: spank_setenv below may move it. */
	handover = vars_getenv(env, LAYOUT_ADDR_VAR) != NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return fail("out of memory");
	if (hints_compute(stepd.topo, &l, &args.opt, env, &args.cfg, h, err,
			  sizeof(err))) {
		fail("%s", err);
		goto out;
	}
	for (int i = 0; i < h->n; i++) {
		if (h->h[i].action == HINT_KEPT)
			continue;
		rc = spank_setenv(sp, h->h[i].name, h->h[i].value, 1);
		if (rc != ESPANK_SUCCESS) {
			fail("cannot set %s: %s", h->h[i].name,
			     spank_strerror(rc));
			goto out;
		}
	}
	/* srun's hand-over (srun.c) is not for the program: remove it. */
	if (handover)
		spank_unsetenv(sp, LAYOUT_ADDR_VAR);
	if (h->bind && bind_cpus(&h->cpus))
		goto out;
	/* Here we are the job's user, never root (ckptdir.h). */
	if (h->ckpt_dir[0] && ckptdir_make(h->ckpt_dir, getuid(), err,
					   sizeof(err))) {
		fail("ckpt-dir: %s", err);
		goto out;
	}
	if (args.opt.verbose)
		report(&l, h);
	ret = 0;
out:
	free(h);
	return ret;
}

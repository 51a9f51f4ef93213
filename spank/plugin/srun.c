/*
 * srun.c - srun (local context).
 *
 * The option callback has already refused a bad --horovod (srun exits 1
 * before asking for an allocation).  What remains:
 *
 *   init_post_opt     refuse what would defeat --horovod=elastic (srun's
 *                     options, launcher.c), before the allocation; with
 *                     srun -v, say what the step will get
 *   local_user_init   the step exists (job and step ids, its nodes): the
 *                     real task count for elastic-min; look up the NodeAddr
 *                     of the node that runs task 0 for MASTER_ADDR
 *
 * A Slurm NodeName need not resolve (the mini-cluster's node1 does not;
 * many sites name nodes differently from their hosts): torch.distributed's
 * env:// would then wait for its store until it times out.  slurmctld knows
 * the address Slurm itself uses to reach the node, and srun is the one
 * process of the step that can ask for it once: slurmstepd would ask once
 * per node.  srun calls local_user_init before it copies its environment
 * into the launch request, so a variable set here reaches every task;
 * slurmstepd reads it (LAYOUT_ADDR_VAR) and removes it from the task.
 */
#include "args.h"
#include "context.h"
#include "core/elastic.h"
#include "core/layout.h"
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

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
	/* Called once per component of a heterogeneous step, with that
	 * component's options in srun's `opt`. */
	if (args.opt.elastic) {
		struct elastic_launch l;
		char err[ERR_LEN];

		launcher_read("srun", &l);
		if (elastic_check(&args.opt, &l, err, sizeof(err))) {
			slurm_error("horovod: %s", err);
			return -1;
		}
		/* The job's own --no-kill is not among srun's options. */
		if (getenv("SLURM_JOB_ID"))
			slurm_verbose("horovod: --horovod=elastic inside job %s: "
				      "it outlives a failed node only if it was "
				      "allocated with --no-kill as well",
				      getenv("SLURM_JOB_ID"));
	}
	opt_format(&args.opt, buf, sizeof(buf));
	slurm_verbose("horovod: --horovod=%s (effective: %s)", args.raw,
		      buf[0] ? buf : "defaults");
	return 0;
}

/* The node that runs task 0 of the step: with -m arbitrary it need not be
 * the first of the step's node list.  0 or -1 (logged). */
static int rank0_node(uint32_t job, uint32_t step, char *out, size_t len)
{
	slurm_step_id_t id = { .job_id = job, .step_het_comp = NO_VAL,
			       .step_id = step };
	slurm_step_layout_t *sl = slurm_job_step_layout_get(&id);
	hostlist_t hl;
	uint32_t node = 0;
	char *name = NULL;
	int rc = -1;

	if (!sl) {
		slurm_verbose("horovod: cannot get the layout of step %u.%u: "
			      "%s; MASTER_ADDR will be its first node's name",
			      job, step, slurm_strerror(slurm_get_errno()));
		return -1;
	}
	for (uint32_t i = 0; i < sl->node_cnt && sl->tasks && sl->tids; i++)
		for (uint32_t t = 0; t < sl->tasks[i]; t++)
			if (sl->tids[i][t] == 0)
				node = i;
	hl = sl->node_list ? slurm_hostlist_create(sl->node_list) : NULL;
	for (uint32_t i = 0; hl && i <= node; i++) {
		free(name);
		name = slurm_hostlist_shift(hl);
	}
	if (name && strlen(name) < len && layout_addr_ok(name)) {
		strcpy(out, name);
		rc = 0;
	}
	free(name);
	if (hl)
		slurm_hostlist_destroy(hl);
	slurm_job_step_layout_free(sl);
	return rc;
}

/* The NodeAddr of node `name` from slurmctld into out; 0 or -1 (logged
 * with srun -v: the tasks then get the node's name). */
static int node_addr(const char *name, char *out, size_t len)
{
	node_info_msg_t *msg = NULL;
	char node[256];
	int rc = -1;

	snprintf(node, sizeof(node), "%s", name);
	if (slurm_load_node_single(&msg, node, SHOW_ALL) != SLURM_SUCCESS) {
		slurm_verbose("horovod: cannot look up the NodeAddr of %s: %s; "
			      "MASTER_ADDR will be its name",
			      node, slurm_strerror(slurm_get_errno()));
		return -1;
	}
	if (msg && msg->record_count >= 1 && msg->node_array[0].node_addr &&
	    layout_addr_ok(msg->node_array[0].node_addr) &&
	    strlen(msg->node_array[0].node_addr) < len) {
		strcpy(out, msg->node_array[0].node_addr);
		rc = 0;
	} else {
		slurm_verbose("horovod: %s has no usable NodeAddr; MASTER_ADDR "
			      "will be its name",
			      node);
	}
	slurm_free_node_info_msg(msg);
	return rc;
}

int srun_user_init(spank_t sp, int ac, char **av)
{
	char node[256], addr[256], val[520];
	uint32_t job, step, ntasks;

	(void)ac;
	(void)av;
	/* Never pass on a value from this srun's own environment. */
	unsetenv(LAYOUT_ADDR_VAR);
	if (!args.used)
		return 0;
	if (args.opt.elastic && args.opt.elastic_min &&
	    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) ==
		    ESPANK_SUCCESS) {
		struct elastic_launch l;
		char err[ERR_LEN];

		elastic_launch_init(&l, "srun");
		l.ntasks = ntasks;
		if (elastic_check(&args.opt, &l, err, sizeof(err))) {
			slurm_error("horovod: %s", err);
			return -1;
		}
	}
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return 0;
	if (rank0_node(job, step, node, sizeof(node)) ||
	    node_addr(node, addr, sizeof(addr)))
		return 0;
	snprintf(val, sizeof(val), "%s=%s", node, addr);
	if (setenv(LAYOUT_ADDR_VAR, val, 1))
		return 0;
	slurm_verbose("horovod: MASTER_ADDR=%s (NodeAddr of %s, which runs "
		      "task 0)",
		      addr, node);
	return 0;
}

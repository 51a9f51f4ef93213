/*
 * hints.c - the environment of one task (see hints.h).
 *
 * Order of decisions: ranks; GPU, network and CPUs (place.c); runtime
 * knobs.  Every value goes through record_put, which checks it against
 * the task's environment last: a variable the user set is kept unless the
 * admin forces it.
 */
#include "hints.h"
#include "place.h"
#include "record.h"
#include "vars.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct hint *hints_find(const struct hints *h, const char *name)
{
	for (int i = 0; i < h->n; i++)
		if (strcmp(h->h[i].name, name) == 0)
			return &h->h[i];
	return NULL;
}

static void ranks(struct record *c)
{
	const struct layout *l = c->l;

	record_put_uint(c, "HOROVOD_RANK", l->rank,
			"global task id (SLURM_PROCID)");
	record_put_uint(c, "HOROVOD_SIZE", l->size, "tasks in the step");
	record_put_uint(c, "HOROVOD_LOCAL_RANK", l->local_rank,
			"task id on this node (SLURM_LOCALID)");
	record_put_uint(c, "HOROVOD_LOCAL_SIZE", l->local_size,
			"tasks of the step on this node");
	record_put_uint(
	    c, "HOROVOD_CROSS_RANK", l->cross_rank,
	    "this node's place among the %u nodes with a local rank %u",
	    l->cross_size, l->local_rank);
	record_put_uint(c, "HOROVOD_CROSS_SIZE", l->cross_size,
			"nodes with a local rank %u", l->local_rank);
	if (l->hostname[0])
		record_put(c, "HOROVOD_HOSTNAME", l->hostname, "this node");
	record_put_uint(c, "RANK", l->rank, "PyTorch name of HOROVOD_RANK");
	record_put_uint(c, "WORLD_SIZE", l->size,
			"PyTorch name of HOROVOD_SIZE");
	record_put_uint(c, "LOCAL_RANK", l->local_rank,
			"PyTorch name of HOROVOD_LOCAL_RANK");
	record_put_uint(c, "LOCAL_WORLD_SIZE", l->local_size,
			"PyTorch name of HOROVOD_LOCAL_SIZE");
	if (l->master_addr[0] && l->master_addr_from == LAYOUT_ADDR_NODEADDR)
		record_put(c, "MASTER_ADDR", l->master_addr,
			   "NodeAddr of %.64s, which runs rank 0 and so "
			   "torch.distributed's store (looked up by srun)",
			   l->master_node);
	else if (l->master_addr[0])
		record_put(c, "MASTER_ADDR", l->master_addr,
			   "name of the first node of the step (srun handed "
			   "over no NodeAddr for it): it must resolve on "
			   "every node");
	if (l->master_port && l->master_port_from == LAYOUT_PORT_RESERVED)
		record_put_uint(
		    c, "MASTER_PORT", l->master_port,
		    "the last of the ports Slurm reserved for this step "
		    "(SLURM_STEP_RESV_PORTS=%s): no other running step "
		    "has it",
		    l->resv_ports);
	else if (l->master_port)
		record_put_uint(
		    c, "MASTER_PORT", l->master_port,
		    "15000 + (job id * 9889 + step id) mod 16000: "
		    "differs between the steps of the job; unique among "
		    "all steps only with Slurm's MpiParams=ports=");
}

/* "--horovod=KEY=..." or "admin default (default_KEY)" */
static void source(unsigned given, enum opt_key k, char *buf, size_t len)
{
	if (given & (1u << k))
		snprintf(buf, len, "from --horovod=%s", opt_key_name(k));
	else
		snprintf(buf, len, "admin default (default_%s)",
			 opt_key_name(k));
	for (char *p = strstr(buf, "default_"); p && *p; p++)
		if (*p == '-')
			*p = '_';
}

/*
 * The admin's ckpt_roots hold for the directory the task will use, and
 * that is the user's own HOROVOD_CHECKPOINT_DIR when one was exported and
 * not overridden by a forced plugin value: taken from the task's working
 * directory when relative, normalised with '..' refused, and compared
 * component-wise, like ckpt-dir.
 */
static int user_dir_in_roots(struct record *c, char *err, size_t errlen)
{
	const struct hint *hd = hints_find(c->out, "HOROVOD_CHECKPOINT_DIR");
	const char *v = vars_getenv(c->env, "HOROVOD_CHECKPOINT_DIR");
	const char *roots = c->cfg->ckpt_roots;
	char path[PATH_LEN], why[ERR_LEN];
	int n;

	if (!v || !*v || (hd && hd->action != HINT_KEPT))
		return 0;
	if (v[0] != '/' && !c->l->cwd[0]) {
		snprintf(err, errlen,
			 "HOROVOD_CHECKPOINT_DIR=%.100s (exported before srun) "
			 "is relative and the task's working directory is "
			 "unknown; the site allows checkpoints only under %s: "
			 "export an absolute directory under one of them, or "
			 "unset it",
			 v, roots);
		return -1;
	}
	n = v[0] == '/' ? snprintf(path, sizeof(path), "%s", v)
			: snprintf(path, sizeof(path), "%s/%s", c->l->cwd, v);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		snprintf(err, errlen,
			 "HOROVOD_CHECKPOINT_DIR=%.100s (exported before srun) "
			 "is longer than %d bytes; export a shorter directory "
			 "under %s",
			 v, PATH_LEN - 1, roots);
		return -1;
	}
	if (path_normalise(path, why, sizeof(why))) {
		snprintf(
		    err, errlen,
		    "HOROVOD_CHECKPOINT_DIR=%.100s (exported before srun): "
		    "%s; the site allows checkpoints only under %s: export "
		    "a directory under one of them, or unset it",
		    v, why, roots);
		return -1;
	}
	if (!path_under(path, roots)) {
		snprintf(
		    err, errlen,
		    "HOROVOD_CHECKPOINT_DIR=%.100s%s%.200s (exported before "
		    "srun) is outside the directories the admin allows for "
		    "checkpoints (%s); unset it, or export a directory "
		    "under one of them",
		    v, v[0] == '/' ? "" : ", that is ", v[0] == '/' ? "" : path,
		    roots);
		return -1;
	}
	return 0;
}

static int knobs(struct record *c, char *err, size_t errlen)
{
	const struct cfg *cfg = c->cfg;
	const struct layout *l = c->l;
	struct opt eff = *c->o;
	char src[80], v[PATH_LEN], e[ERR_LEN];

	/* A forced variable takes the admin's default over the user's key. */
#define ADMIN(var, k)                                                          \
	do {                                                                   \
		if (cfg_forced(cfg, var) && (cfg->defaults.set & (1u << (k)))) \
			eff.given &= ~(1u << (k));                             \
	} while (0)
	ADMIN("HOROVOD_CHECKPOINT_EVERY", OPT_CKPT_EVERY);
	ADMIN("HOROVOD_FUSION_THRESHOLD", OPT_FUSION_MB);
	ADMIN("HOROVOD_CYCLE_TIME", OPT_CYCLE_MS);
	ADMIN("HOROVOD_CACHE_CAPACITY", OPT_CACHE);
	ADMIN("HOROVOD_STALL_CHECK_TIME_SECONDS", OPT_STALL_S);
	ADMIN("HOROVOD_LOG_LEVEL", OPT_LOG);
	ADMIN("HOROVOD_HIERARCHICAL_ALLREDUCE", OPT_HIERARCHICAL);
	ADMIN("HOROVOD_CHECKPOINT_KEEP", OPT_CKPT_KEEP);
	ADMIN("HOROVOD_CHECKPOINT_DIR", OPT_CKPT_DIR);
	ADMIN("HOROVOD_TIMELINE", OPT_TIMELINE);
#undef ADMIN
#define VAL(k, field)                                                          \
	(eff.given & (1u << (k)) ? c->o->field : cfg->defaults.field)
#define IS(k) (c->o->set & (1u << (k)))
	if (IS(OPT_CKPT_DIR)) {
		source(eff.given, OPT_CKPT_DIR, src, sizeof(src));
		if (path_expand_step(VAL(OPT_CKPT_DIR, ckpt_dir), l->user,
				     l->job_id, l->step_id, l->job_name, v,
				     sizeof(v), e, sizeof(e))) {
			snprintf(err, errlen, "ckpt-dir: %s", e);
			return -1;
		}
		if (cfg->ckpt_roots[0] && !path_under(v, cfg->ckpt_roots)) {
			snprintf(err, errlen,
				 "ckpt-dir=%s is outside the directories the "
				 "admin allows for checkpoints (%s); choose a "
				 "directory under one of them",
				 v, cfg->ckpt_roots);
			return -1;
		}
		record_put(c, "HOROVOD_CHECKPOINT_DIR", v, "%s, expanded%s",
			   src,
			   cfg->ckpt_roots[0] ? ", inside ckpt_roots" : "");
		if (hints_find(c->out, "HOROVOD_CHECKPOINT_DIR")->action !=
		    HINT_KEPT)
			snprintf(c->out->ckpt_dir, sizeof(c->out->ckpt_dir),
				 "%s", v);
	}
	if (cfg->ckpt_roots[0] && user_dir_in_roots(c, err, errlen))
		return -1;
	if (IS(OPT_CKPT_EVERY)) {
		source(eff.given, OPT_CKPT_EVERY, src, sizeof(src));
		record_put_uint(c, "HOROVOD_CHECKPOINT_EVERY",
				VAL(OPT_CKPT_EVERY, ckpt_every), "%s (steps)",
				src);
	}
	if (IS(OPT_CKPT_KEEP)) {
		source(eff.given, OPT_CKPT_KEEP, src, sizeof(src));
		record_put_uint(c, "HOROVOD_CHECKPOINT_KEEP",
				VAL(OPT_CKPT_KEEP, ckpt_keep), "%s", src);
	}
	if (IS(OPT_FUSION_MB)) {
		source(eff.given, OPT_FUSION_MB, src, sizeof(src));
		record_put_uint(c, "HOROVOD_FUSION_THRESHOLD",
				VAL(OPT_FUSION_MB, fusion_mb) * 1048576UL,
				"%s, in bytes", src);
	}
	if (IS(OPT_CYCLE_MS)) {
		source(eff.given, OPT_CYCLE_MS, src, sizeof(src));
		record_put(c, "HOROVOD_CYCLE_TIME", VAL(OPT_CYCLE_MS, cycle_ms),
			   "%s, in milliseconds", src);
	}
	if (IS(OPT_CACHE)) {
		source(eff.given, OPT_CACHE, src, sizeof(src));
		record_put_uint(c, "HOROVOD_CACHE_CAPACITY",
				VAL(OPT_CACHE, cache), "%s", src);
	}
	if (IS(OPT_TIMELINE)) {
		source(eff.given, OPT_TIMELINE, src, sizeof(src));
		if (path_expand_step(VAL(OPT_TIMELINE, timeline), l->user,
				     l->job_id, l->step_id, l->job_name, v,
				     sizeof(v), e, sizeof(e))) {
			snprintf(err, errlen, "timeline: %s", e);
			return -1;
		}
		record_put(c, "HOROVOD_TIMELINE", v, "%s, expanded", src);
	}
	if (IS(OPT_HIERARCHICAL)) {
		source(eff.given, OPT_HIERARCHICAL, src, sizeof(src));
		record_put(c, "HOROVOD_HIERARCHICAL_ALLREDUCE",
			   VAL(OPT_HIERARCHICAL, hierarchical) ? "1" : "0",
			   "%s", src);
	}
	if (IS(OPT_STALL_S)) {
		source(eff.given, OPT_STALL_S, src, sizeof(src));
		record_put_uint(c, "HOROVOD_STALL_CHECK_TIME_SECONDS",
				VAL(OPT_STALL_S, stall_s), "%s", src);
	}
	if (IS(OPT_LOG)) {
		source(eff.given, OPT_LOG, src, sizeof(src));
		record_put(c, "HOROVOD_LOG_LEVEL",
			   opt_log_name(VAL(OPT_LOG, log)), "%s", src);
	}
	if (IS(OPT_ELASTIC)) {
		record_put(c, "HOROVOD_ELASTIC", "1",
			   "from --horovod=elastic: training goes on when "
			   "tasks or nodes are lost");
		if (c->o->elastic_min > l->size) {
			snprintf(
			    err, errlen,
			    "--horovod=elastic,elastic-min=%lu: the step "
			    "has %u task%s; expected elastic-min at most %u",
			    c->o->elastic_min, l->size, l->size == 1 ? "" : "s",
			    l->size);
			return -1;
		}
		if (c->o->elastic_min)
			record_put_uint(
			    c, "HOROVOD_ELASTIC_MIN_SIZE", c->o->elastic_min,
			    "from --horovod=elastic-min: the fewest tasks "
			    "training goes on with");
	}
#undef VAL
#undef IS
	return 0;
}

int hints_compute(const struct topo *t, const struct layout *l,
		  const struct opt *o, char *const *env, const struct cfg *cfg,
		  struct hints *out, char *err, size_t errlen)
{
	struct record c = {t, l, o, env, cfg, out, 0};

	memset(out, 0, sizeof(*out));
	out->gpu = -1;
	out->port = -1;
	ranks(&c);
	place_gpu(&c);
	place_network(&c);
	place_cpus(&c);
	return knobs(&c, err, errlen);
}

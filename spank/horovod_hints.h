/*
 * horovod_hints.h - the environment of one task, as a pure function of
 * (topology, task layout, options, existing environment, admin policy).
 *
 * Each hint is a (variable, value, reason) triple with an action: SET (the
 * plugin exports it), KEPT (the user already set the variable: the user's
 * value stays, the reason says what the plugin would have set) or FORCED
 * (the admin's force= list: exported over the user's value).  The plugin
 * and hvd-topo print exactly these, so what a user reads from hvd-topo is
 * what a task gets.
 */
#ifndef HOROVOD_HINTS_H
#define HOROVOD_HINTS_H

#include <stddef.h>

#include "horovod_config.h"
#include "horovod_layout.h"
#include "horovod_opt.h"
#include "horovod_topo.h"

#define HVDHINT_MAX 48
#define HVDHINT_VAL_LEN HVDOPT_PATH_MAX
#define HVDHINT_WHY_LEN 320

enum hvdhint_action { HVDHINT_SET, HVDHINT_KEPT, HVDHINT_FORCED };

struct hvdhint {
	char name[HVDCFG_VAR_LEN];
	char value[HVDHINT_VAL_LEN]; /* what the task will see */
	char why[HVDHINT_WHY_LEN];
	enum hvdhint_action action;
};

struct hvdhints {
	int n;
	struct hvdhint h[HVDHINT_MAX];
	int gpu;  /* index in topo->gpus of this task's GPU, or -1 */
	int port; /* index in topo->ports of its HCA port, or -1 */
	int bind; /* 1: bind the task to `cpus` (cpu-bind=numa) */
	struct hvd_cpuset cpus;
	char ckpt_dir[HVDOPT_PATH_MAX]; /* to create, or "" */
	int nnotes;
	char notes[4][HVDHINT_WHY_LEN]; /* things verbose should say */
};

/*
 * Compute the hints of one task.  `env` is the task's environment
 * (NULL-terminated "NAME=value" strings, may be NULL).  Returns 0, or -1
 * with a message when the task must not start (ckpt-dir outside the
 * admin's ckpt_roots, a path too long after expansion).
 */
int hvdhints_compute(const struct hvdtopo *t, const struct hvdlayout *l,
		     const struct hvdopt *o, char *const *env,
		     const struct hvdcfg *cfg, struct hvdhints *out, char *err,
		     size_t errlen);

/* Is `name` a variable the plugin may set (for force=)? */
int hvdhints_known_var(const char *name);

/* Value of `name` in an environment array, or NULL. */
const char *hvdhints_getenv(char *const *env, const char *name);

/* The hint for `name`, or NULL. */
const struct hvdhint *hvdhints_find(const struct hvdhints *h,
				    const char *name);

/*
 * Nearest ACTIVE port to GPU `gpu` for `net` (an enum hvdopt_net): the
 * ports whose smallest common ancestor with the GPU is deepest; the GPUs
 * that share the same set of nearest ports take them in turn.  Returns the
 * port index or -1; `why` says how near.
 */
int hvdhints_port_for_gpu(const struct hvdtopo *t, int gpu, int net,
			  char *why, size_t whylen);

#endif /* HOROVOD_HINTS_H */

/*
 * hints.h - the environment of one task, as a pure function of
 * (topology, task layout, options, existing environment, admin policy).
 *
 * Each hint is a (variable, value, reason) triple with an action: SET (the
 * plugin exports it), KEPT (the user already set the variable: the user's
 * value stays, the reason says what the plugin would have set) or FORCED
 * (the admin's force= list: exported over the user's value).  The plugin
 * and hvd-topo print exactly these, so what a user reads from hvd-topo is
 * what a task gets.
 */
#ifndef SPANK_CORE_HINTS_H
#define SPANK_CORE_HINTS_H

#include <stddef.h>

#include "cfg.h"
#include "cpuset.h"
#include "layout.h"
#include "opt.h"
#include "path.h"
#include "topo.h"
#include "vars.h"

#define HINTS_MAX 48
#define HINTS_VAL_LEN PATH_LEN
#define HINTS_WHY_LEN 320
#define HINTS_MAX_NOTES 8

enum hint_action { HINT_SET, HINT_KEPT, HINT_FORCED };

struct hint {
	char name[VARS_NAME_LEN];
	char value[HINTS_VAL_LEN]; /* what the task will see */
	char why[HINTS_WHY_LEN];
	enum hint_action action;
};

struct hints {
	int n;
	struct hint h[HINTS_MAX];
	int gpu;  /* index in topo->gpus of this task's GPU, or -1 */
	int port; /* index in topo->ports of its HCA port, or -1 */
	int bind; /* 1: bind the task to `cpus` (cpu-bind=numa) */
	struct cpuset cpus;
	char ckpt_dir[PATH_LEN]; /* to create, or "" */
	int nnotes;
	char notes[HINTS_MAX_NOTES][HINTS_WHY_LEN]; /* for verbose */
};

/*
 * Compute the hints of one task.  `env` is the task's environment
 * (NULL-terminated "NAME=value" strings, may be NULL).  Returns 0, or -1
 * with a message when the task must not start (ckpt-dir outside the
 * admin's ckpt_roots, a path too long after expansion).
 */
int hints_compute(const struct topo *t, const struct layout *l,
		  const struct opt *o, char *const *env, const struct cfg *cfg,
		  struct hints *out, char *err, size_t errlen);

/* The hint for `name`, or NULL. */
const struct hint *hints_find(const struct hints *h, const char *name);

/*
 * Nearest ACTIVE port to GPU `gpu` for `net` (an enum opt_net): the
 * ports whose smallest common ancestor with the GPU is deepest; the GPUs
 * that share the same set of nearest ports take them in turn.  Returns the
 * port index or -1; `why` says how near.
 */
int hints_port_for_gpu(const struct topo *t, int gpu, int net, char *why,
		       size_t whylen);

#endif /* SPANK_CORE_HINTS_H */

/*
 * hints.h - the environment of one task, as a pure function of
 * (topology, task layout, options, existing environment, admin policy).
 *
 * The hints and their actions are record.h's; the placement (GPU, network,
 * CPUs) is place.c's; this file adds the ranks and the runtime knobs and
 * puts them in order.
 */
#ifndef SPANK_CORE_HINTS_H
#define SPANK_CORE_HINTS_H

#include <stddef.h>

#include "cfg.h"
#include "layout.h"
#include "opt.h"
#include "record.h"
#include "topo.h"

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

#endif /* SPANK_CORE_HINTS_H */

/*
 * record.h - the hints of one task as they are decided, and the one rule
 * every value goes through.
 *
 * Each hint is a (variable, value, reason) triple with an action: SET (the
 * plugin exports it), KEPT (the user already set the variable: the user's
 * value stays, the reason says what the plugin would have set) or FORCED
 * (the admin's force= list: exported over the user's value).  The plugin
 * and hvd-topo print exactly these, so what a user reads from hvd-topo is
 * what a task gets.  record_put applies the rule, so the decisions
 * (place.c, hints.c) only say what they would set and why.
 */
#ifndef SPANK_CORE_RECORD_H
#define SPANK_CORE_RECORD_H

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

/* What the decisions about one task read, and where they write. */
struct record {
	const struct topo *t;
	const struct layout *l;
	const struct opt *o;
	char *const *env; /* the task's environment, may be NULL */
	const struct cfg *cfg;
	struct hints *out;
	int slurms; /* the variable in env is Slurm's, not the user's */
};

/* Record a hint: `value` unless the user set `name` and the admin does not
 * force it; the reason from fmt. */
void record_put(struct record *c, const char *name, const char *value,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void record_put_uint(struct record *c, const char *name, unsigned long v,
		     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Something verbose should say that is not a variable. */
void record_note(struct record *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* snprintf where a cut message is fine (reasons are bounded on purpose). */
void record_printf(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* SPANK_CORE_RECORD_H */

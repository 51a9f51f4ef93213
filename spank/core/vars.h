/*
 * vars.h - the variables the plugin may set, and lookups in a task's
 * environment.
 *
 * The table is the contract between the admin's force= list (cfg.c, which
 * accepts only these names) and the hint computation (hints.c, which sets
 * only these): both depend on this file, neither on the other.  horovod(8)
 * lists the same names, and a unit test holds the two to each other.
 */
#ifndef SPANK_CORE_VARS_H
#define SPANK_CORE_VARS_H

/* Longest variable name, with its NUL. */
#define VARS_NAME_LEN 40

/* Is `name` a variable the plugin may set (for force=)? */
int vars_known(const char *name);

/* The i-th known variable (0, 1, ...), NULL past the end. */
const char *vars_name(int i);

/* Value of `name` in an environment array ("NAME=value", NULL-terminated,
 * may itself be NULL), or NULL. */
const char *vars_getenv(char *const *env, const char *name);

#endif /* SPANK_CORE_VARS_H */

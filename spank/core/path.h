/*
 * path.h - path templates of the --horovod option (ckpt-dir, timeline) and
 * the admin's ckpt_roots, as pure string functions: nothing here touches
 * the file system.
 */
#ifndef SPANK_CORE_PATH_H
#define SPANK_CORE_PATH_H

#include <stddef.h>

/* Longest accepted path, with its terminating NUL. */
#define PATH_LEN 512

/*
 * Normalise an absolute path in place: no "." or ".." component, no "//",
 * no trailing '/', not "/" itself; ".." is refused, never resolved.
 * Returns 0, or -1 with a message.
 */
int path_normalise(char *path, char *err, size_t errlen);

/*
 * Expand %u (user), %j (job id), %s (step id), %x (job name) and %% in a
 * path template and normalise it (path_normalise).  The job name comes
 * from the user: characters other than [A-Za-z0-9._-] become '_', and a
 * name that is "." or ".." becomes "_".  The step id is a number, or
 * "batch", "extern", "interactive" for Slurm's special steps, as in
 * Slurm's own file name patterns.  Returns 0, or -1 with a message.
 */
int path_expand_step(const char *tmpl, const char *user, unsigned long jobid,
		     unsigned long stepid, const char *jobname, char *out,
		     size_t outlen, char *err, size_t errlen);
/* path_expand_step with step 0 (where the step is not known yet). */
int path_expand(const char *tmpl, const char *user, unsigned long jobid,
		const char *jobname, char *out, size_t outlen, char *err,
		size_t errlen);

/*
 * Is `path` (normalised) equal to or below one of the ':'-separated roots?
 * Component-wise: /scratch2 is not under /scratch.  1 yes, 0 no.
 */
int path_under(const char *path, const char *roots);

#endif /* SPANK_CORE_PATH_H */

/*
 * ckptdir.h - create the checkpoint directory without trusting what other
 * users could have put on its path.
 *
 * Shared nodes have shared directories (/var/tmp, /dev/shm, scratch file
 * systems): another user can create the documented path first, make it
 * writable by everyone, or plant a symbolic link in it.  So the path is
 * walked from "/" one component at a time with openat(O_NOFOLLOW |
 * O_DIRECTORY), relative to the directory opened before, and:
 *
 *   - no component may be a symbolic link (not even root's: ckpt-dir and
 *     ckpt_roots must be real paths);
 *   - every directory above the last one must be owned by root or by the
 *     user, and not writable by group or others unless it is owned by root
 *     and sticky (/tmp, /var/tmp): nobody else can then rename or replace
 *     what lies below it;
 *   - what is missing is created with mode 0700 (mkdirat), as the caller;
 *     but in a directory everyone can write (root's and sticky) a user
 *     creates only a directory named after the user, and root a shared
 *     one with mode 1777, as /tmp (libhvd's checkpointer has the same
 *     rule);
 *   - the last directory must be owned by the user and not writable by
 *     group or others.
 *
 * The plugin calls it in task_init, where it runs as the job's user, never
 * as root.
 */
#ifndef SPANK_CORE_CKPTDIR_H
#define SPANK_CORE_CKPTDIR_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Create or check `path` (absolute, normalised: path_normalise) for user
 * `uid`.  Returns 0, or -1 with a message naming the directory, what is
 * wrong with it and what to do.
 */
int ckptdir_make(const char *path, uid_t uid, char *err, size_t errlen);

#endif /* SPANK_CORE_CKPTDIR_H */

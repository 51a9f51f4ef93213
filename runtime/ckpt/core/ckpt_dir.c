/*
 * ckpt_dir.c - the checkpoint directory: opened once, every directory on
 * the way checked as it is opened (the walk), subdirectories reached
 * relative to it, and the lock of one run at a time (see ckpt_store.h;
 * ckpt_store.c's comment has the safety rules both files follow).
 */
#include "config.h"

#include "ckpt/core/ckpt_store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

hvd_status_t ckpt_errno(int err, const char *what, const char *path)
{
	switch (err) {
	case ENOSPC:
	case EDQUOT:
		return hvd_error(HVD_ERR_IO,
				 "checkpoint: %s %s: %s: the file system (or "
				 "your quota) is full; free space or point "
				 "HOROVOD_CHECKPOINT_DIR elsewhere (the previous "
				 "checkpoint is left intact)",
				 what, path, strerror(err));
	case EACCES:
	case EPERM:
	case EROFS:
		return hvd_error(HVD_ERR_IO,
				 "checkpoint: %s %s: %s: no permission to write "
				 "there; check the owner and mode of the "
				 "checkpoint directory or choose another one "
				 "(the previous checkpoint is left intact)",
				 what, path, strerror(err));
	case ELOOP:
		return hvd_error(HVD_ERR_IO,
				 "checkpoint: %s %s: a symbolic link: the "
				 "checkpointer never follows links below the "
				 "checkpoint directory (remove it, or move what "
				 "it points to there)", what, path);
	default:
		return hvd_error(HVD_ERR_IO, "checkpoint: %s %s: %s", what,
				 path, strerror(err));
	}
}
/* ------------------------------------------------------- directories */

void ckpt_dir_path(char *buf, size_t n, const struct ckpt_dir *d,
		   const char *name)
{
	ckpt_fmt(buf, n, "%s/%s", d->path, name);
}

void ckpt_dir_close(struct ckpt_dir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

/* ---------------------------------------------------------- the walk
 *
 * The checkpoint directory and every directory above it are checked as
 * they are opened, one component at a time from / (or the working
 * directory), each relative to the one above and checked on the descriptor
 * opened (so what is checked is what is used):
 *   - a directory above must belong to root or the user, and may be
 *     writable by group or others only when it is root's and sticky (as
 *     /tmp): whoever else can rename entries in it could put a checkpoint
 *     directory of their own in place of ours (the SPANK plugin's
 *     spank/core/ckptdir.c checks the same when it creates the directory);
 *   - the checkpoint directory must belong to the user and be writable by
 *     nobody else: whoever can write in it can replace checkpoints (the
 *     checksums are XXH3, no protection against a forger) or read them;
 *   - a symbolic link on the way is followed only when it belongs to root
 *     or the user; what it leads to is checked like the rest.
 * Missing directories are created 0700, but a directory one user creates
 * in a directory everyone can write (/var/tmp) can only be that user's:
 * another user's job could neither use nor trust it.  So there a user's
 * job creates only the checkpoint directory itself or a directory named
 * after the user (/var/tmp/hvd-ckpt/%u/...); the shared parent of such a
 * layout is root's to create, and a job run by root creates it as /tmp
 * is: root's, mode 1777.
 */

/* Mode bits by which others than the owner may write. */
#define OTHERS_WRITE (S_IWGRP | S_IWOTH)

/* A name that is the user's: the login name or uid as a whole word. */
static int personal(const char *name, uid_t uid)
{
	char ids[2][256];
	struct passwd pw, *res = NULL;
	char buf[1024];

	ckpt_fmt(ids[0], sizeof(ids[0]), "%u", (unsigned)uid);
	ids[1][0] = '\0';
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
		ckpt_fmt(ids[1], sizeof(ids[1]), "%s", pw.pw_name);
	for (int k = 0; k < 2; k++) {
		size_t len = strlen(ids[k]);

		for (const char *p = name; len && (p = strstr(p, ids[k]));
		     p++) {
			int before = p == name || !isalnum((unsigned char)p[-1]);
			int after = !isalnum((unsigned char)p[len]);

			if (before && after)
				return 1;
		}
	}
	return 0;
}

/* A new directory `name` below cur (whose mode is cur_mode; path is the
 * new one's, for messages).  0 or an errno; st set when refused. */
static int create_below(int cur, mode_t cur_mode, const char *name,
			const char *path, const char *parent, int last,
			uid_t uid, hvd_status_t *st)
{
	int shared = (cur_mode & OTHERS_WRITE) != 0, as_tmp = 0;

	if (shared && !last && !personal(name, uid)) {
		if (geteuid() != 0) {
			*st = hvd_error(HVD_ERR_IO,
					"checkpoint: will not create %s: %s is "
					"writable by others, and a directory "
					"one user creates there is of no use "
					"to the others (they could not trust "
					"it, and would be locked out of the "
					"path); ask your admin to create it "
					"(owner root, mode 1777, as /tmp), or "
					"use a path whose directories there "
					"carry your name (%s/%s-$USER/...)",
					path, parent, parent, name);
			return EPERM;
		}
		as_tmp = 1;
	}
	if (mkdirat(cur, name, CKPT_DIR_MODE) != 0)
		return errno;
	/* chmod, not mkdir's mode: the umask must not take the bits away */
	if (as_tmp && fchmodat(cur, name, 01777, 0) != 0)
		return errno;
	return 0;
}

/* Check an open directory (sb) on the way; path for messages. */
static hvd_status_t check_dir(const struct stat *sb, const char *path,
			      int last, uid_t uid)
{
	unsigned mode = (unsigned)sb->st_mode & 07777;

	if (last) {
		if (sb->st_uid != uid)
			return hvd_error(HVD_ERR_IO,
					 "checkpoint: %s belongs to uid %u, not "
					 "to you (uid %u): its owner can read "
					 "and replace what you write there; use "
					 "a directory of your own",
					 path, (unsigned)sb->st_uid,
					 (unsigned)uid);
		if (mode & OTHERS_WRITE)
			return hvd_error(HVD_ERR_IO,
					 "checkpoint: %s is writable by group "
					 "or others (mode %04o): they could "
					 "replace your checkpoints (checksums "
					 "do not stop a forger); chmod go-w %s, "
					 "or use another directory",
					 path, mode, path);
		return HVD_OK;
	}
	if (sb->st_uid != 0 && sb->st_uid != uid)
		return hvd_error(HVD_ERR_IO,
				 "checkpoint: %s, above the checkpoint "
				 "directory, belongs to uid %u: its owner could "
				 "put a directory of their own in place of "
				 "yours; use a path whose directories belong to "
				 "you or to root", path, (unsigned)sb->st_uid);
	if ((mode & OTHERS_WRITE) && !(sb->st_uid == 0 && (mode & S_ISVTX)))
		return hvd_error(HVD_ERR_IO,
				 "checkpoint: %s, above the checkpoint "
				 "directory, is writable by group or others "
				 "(mode %04o) and not a sticky directory of "
				 "root's like /var/tmp: they could rename the "
				 "checkpoint directory and put their own in its "
				 "place; use a directory whose parents only you "
				 "and root can change%s", path, mode,
				 sb->st_uid == uid ? " (chmod go-w it)" : "");
	return HVD_OK;
}

/* One step of the walk: the component name below cur (path so far in
 * path), opened as an O_PATH descriptor into *next and checked. */
static hvd_status_t step_into(int cur, const struct stat *cur_sb,
			      const char *name, char *path, size_t pathsz,
			      int last, unsigned flags, uid_t uid, int *next)
{
	char parent[PATH_MAX];
	hvd_status_t st = HVD_OK;
	struct stat sb;
	int err, fd;

	size_t len = strlen(path);

	/* path so far: "/", "" (relative), or a directory: append name */
	ckpt_fmt(parent, sizeof(parent), "%s", len ? path : ".");
	ckpt_fmt(path + len, pathsz - len, "%s%s",
		 len && path[len - 1] != '/' ? "/" : "", name);
	for (int tries = 0;; tries++) {
		if (fstatat(cur, name, &sb, AT_SYMLINK_NOFOLLOW) == 0)
			break;
		err = errno;
		if (err != ENOENT || !(flags & CKPT_OPEN_CREATE) || tries)
			return ckpt_errno(err, "cannot open directory", path);
		err = create_below(cur, cur_sb->st_mode, name, path, parent,
				   last, uid, &st);
		if (st != HVD_OK)
			return st;
		if (err && err != EEXIST) /* EEXIST: another rank's */
			return ckpt_errno(err, "cannot create directory", path);
	}
	if (S_ISLNK(sb.st_mode)) {
		if (sb.st_uid != 0 && sb.st_uid != uid)
			return hvd_error(HVD_ERR_IO,
					 "checkpoint: %s is a symbolic link "
					 "owned by uid %u: not followed (it "
					 "points wherever its owner likes); use "
					 "the real path", path,
					 (unsigned)sb.st_uid);
		fd = openat(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	} else {
		fd = openat(cur, name,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return ckpt_errno(errno, "cannot open directory", path);
	if (fstat(fd, &sb) != 0) {
		st = ckpt_errno(errno, "cannot stat", path);
		close(fd);
		return st;
	}
	st = check_dir(&sb, path, last, uid);
	if (st != HVD_OK) {
		close(fd);
		return st;
	}
	*next = fd;
	return HVD_OK;
}

/* The walk; on success d->fd is the checkpoint directory, O_RDONLY. */
static hvd_status_t walk(struct ckpt_dir *d, unsigned flags, uid_t uid)
{
	char comps[PATH_MAX], path[PATH_MAX], *save = NULL, *name, *next_name;
	hvd_status_t st = HVD_OK;
	struct stat sb;
	int cur, next = -1;

	ckpt_fmt(comps, sizeof(comps), "%s", d->path);
	ckpt_fmt(path, sizeof(path), "%s", d->path[0] == '/' ? "/" : "");
	cur = open(d->path[0] == '/' ? "/" : ".",
		   O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return ckpt_errno(errno, "cannot open directory",
				  d->path[0] == '/' ? "/" : ".");
	if (fstat(cur, &sb) != 0 ||
	    (st = check_dir(&sb, d->path[0] == '/' ? "/" : ".", 0, uid)) !=
		    HVD_OK) {
		if (st == HVD_OK)
			st = ckpt_errno(errno, "cannot stat", "/");
		close(cur);
		return st;
	}
	for (name = strtok_r(comps, "/", &save); name; name = next_name) {
		next_name = strtok_r(NULL, "/", &save);
		if (strcmp(name, ".") == 0 && next_name)
			continue;
		st = step_into(cur, &sb, name, path, sizeof(path), !next_name,
			       flags, uid, &next);
		if (st != HVD_OK)
			break;
		close(cur);
		cur = next;
		if (fstat(cur, &sb) != 0) {
			st = ckpt_errno(errno, "cannot stat", path);
			break;
		}
	}
	if (st == HVD_OK) {
		d->fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (d->fd < 0)
			st = ckpt_errno(errno, "cannot open directory",
					d->path);
	}
	close(cur);
	return st;
}

hvd_status_t ckpt_dir_open(struct ckpt_dir *d, const char *path,
			   unsigned flags)
{
	struct stat sb;
	uid_t uid = geteuid();

	d->fd = -1;
	if (path != d->path)
		ckpt_fmt(d->path, sizeof(d->path), "%s", path);
	if (!d->path[0])
		return hvd_error(HVD_ERR_INVALID_ARG, "checkpoint: the "
				 "directory name is empty");
	/* hvd-ckpt: the owner's checkpoints (checked again by the walk, on
	 * what it opens) */
	if ((flags & CKPT_OPEN_ANY_OWNER) && stat(d->path, &sb) == 0)
		uid = sb.st_uid;
	HVD_CHECK(walk(d, flags, uid));
	d->uid = uid;
	return HVD_OK;
}

/* Why sb (of d/name) is not a checkpoint directory of d's user; NULL when
 * it is one. */
const char *ckpt_dir_not_ours(const struct ckpt_dir *d,
			      const struct stat *sb, char *why, size_t n)
{
	if (S_ISLNK(sb->st_mode))
		return "a symbolic link (never followed)";
	if (!S_ISDIR(sb->st_mode))
		return "not a directory";
	if (sb->st_uid != d->uid) {
		ckpt_fmt(why, n, "owned by uid %u, not by uid %u",
			 (unsigned)sb->st_uid, (unsigned)d->uid);
		return why;
	}
	return NULL;
}

hvd_status_t ckpt_dir_sub(const struct ckpt_dir *d, const char *name,
			  struct ckpt_dir *sub)
{
	const char *why;
	char buf[64];
	struct stat sb;
	int err;

	sub->fd = -1;
	sub->uid = d->uid;
	ckpt_dir_path(sub->path, sizeof(sub->path), d, name);
	sub->fd = openat(d->fd, name,
			 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub->fd < 0) {
		err = errno;
		if (err == ENOTDIR && fstatat(d->fd, name, &sb,
					      AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(sb.st_mode))
			err = ELOOP;
		if (err == ENOENT)
			return hvd_error(HVD_ERR_IO, "checkpoint: %s does not "
					 "exist", sub->path);
		return ckpt_errno(err, "cannot open directory", sub->path);
	}
	if (fstat(sub->fd, &sb) != 0) {
		err = errno;
		ckpt_dir_close(sub);
		return ckpt_errno(err, "cannot stat", sub->path);
	}
	why = ckpt_dir_not_ours(d, &sb, buf, sizeof(buf));
	if (why) {
		ckpt_dir_close(sub);
		return hvd_error(HVD_ERR_IO, "checkpoint: %s: %s: not touched",
				 sub->path, why);
	}
	return HVD_OK;
}

hvd_status_t ckpt_dir_make(const struct ckpt_dir *d, const char *name,
			   struct ckpt_dir *sub)
{
	char path[PATH_MAX];

	if (mkdirat(d->fd, name, CKPT_DIR_MODE) != 0 && errno != EEXIST) {
		ckpt_dir_path(path, sizeof(path), d, name);
		return ckpt_errno(errno, "cannot create directory", path);
	}
	return ckpt_dir_sub(d, name, sub);
}

hvd_status_t ckpt_fsync_dir(const struct ckpt_dir *d)
{
	if (fsync(d->fd) != 0 && errno != EINVAL)
		return ckpt_errno(errno, "cannot fsync directory", d->path);
	return HVD_OK;
}

/* -------------------------------------------------------------- lock */

/* The first line of what the holder wrote, for the message. */
static void read_holder(int fd, char *buf, size_t n)
{
	ssize_t r = pread(fd, buf, n - 1, 0);

	buf[r > 0 ? r : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < ' ' || (unsigned char)*p > '~')
			*p = '?';
	if (!buf[0])
		ckpt_fmt(buf, n, "a run that has not said who it is yet");
}

hvd_status_t ckpt_dir_lock(const struct ckpt_dir *d, const char *holder,
			   int *fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char path[PATH_MAX], who[512];
	hvd_status_t st;
	struct stat sb;
	size_t len = strlen(holder);
	int lfd, err;

	*fd = -1;
	ckpt_dir_path(path, sizeof(path), d, CKPT_LOCK_NAME);
	lfd = openat(d->fd, CKPT_LOCK_NAME,
		     O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		     CKPT_FILE_MODE);
	if (lfd < 0)
		return ckpt_errno(errno, "cannot open the lock file", path);
	if (fstat(lfd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    sb.st_uid != d->uid) {
		close(lfd);
		return hvd_error(HVD_ERR_IO, "checkpoint: %s is not a regular "
				 "file of uid %u: remove it", path,
				 (unsigned)d->uid);
	}
	if (fcntl(lfd, F_OFD_SETLK, &fl) != 0) {
		err = errno;
		if (err == EAGAIN || err == EACCES) {
			read_holder(lfd, who, sizeof(who));
			close(lfd);
			return hvd_error(HVD_ERR_IO,
					 "checkpoint: %s is in use by another "
					 "run (%s): two runs writing one "
					 "checkpoint directory destroy each "
					 "other's checkpoints; wait for it to "
					 "end, stop it, or give this run a "
					 "directory of its own", d->path, who);
		}
		/* no locks on this file system: say so, and go on */
		hvd_log(HVD_LOG_WARNING, "checkpoint: cannot lock %s (%s): "
			"a second run writing this directory at the same time "
			"would not be noticed", path, strerror(err));
	}
	if (ftruncate(lfd, 0) != 0 ||
	    pwrite(lfd, holder, len, 0) != (ssize_t)len || fsync(lfd) != 0) {
		st = ckpt_errno(errno, "cannot write", path);
		close(lfd);
		return st;
	}
	*fd = lfd;
	return HVD_OK;
}

int ckpt_dir_busy(const struct ckpt_dir *d, char *who, size_t n)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int fd = openat(d->fd, CKPT_LOCK_NAME,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int busy;

	if (fd < 0)
		return 0;
	busy = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	if (busy)
		read_holder(fd, who, n);
	close(fd);
	return busy;
}


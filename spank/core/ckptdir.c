/*
 * ckptdir.c - see ckptdir.h.
 *
 * Directories are held as O_PATH descriptors: walking needs only search
 * permission, like a path lookup, and every step is relative to the
 * directory already checked, so a component renamed or replaced after its
 * check cannot redirect the rest of the walk.  mkdirat runs under umask 077
 * so that what it creates is exactly 0700.
 */
#include "config.h" /* _GNU_SOURCE: O_PATH */

#include "ckptdir.h"
#include "err.h"
#include "path.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "user alice (uid 1000)", or "uid 1000" when the name is unknown. */
static void who(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *pwp = NULL;
	char pwbuf[1024];

	if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
		snprintf(buf, len, "user %.32s (uid %u)", pw.pw_name,
			 (unsigned)uid);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
}

/* A directory above the checkpoint directory: only root and the user may
 * be able to change it, or it is root's and sticky (/tmp). */
static int parent_bad(const struct stat *st, uid_t uid, const char *dir,
		      char *err, size_t errlen)
{
	char owner[64];

	if (st->st_uid != 0 && st->st_uid != uid) {
		who(st->st_uid, owner, sizeof(owner));
		err_set(err, errlen,
			"%.200s belongs to %s, who could rename or replace "
			"what is created below it; choose a directory below "
			"ones that only root and you can change (your home, "
			"or your own directory on a scratch file system)",
			dir, owner);
		return -1;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) &&
	    !(st->st_uid == 0 && (st->st_mode & S_ISVTX))) {
		err_set(err, errlen,
			"%.200s is writable by %s (mode %04o) and is not a "
			"sticky directory of root's like /var/tmp: another "
			"user could replace what is created below it; %s",
			dir, st->st_mode & S_IWOTH ? "everyone" : "its group",
			(unsigned)(st->st_mode & 07777),
			st->st_uid == uid ? "make it writable only by you "
					    "(chmod go-w), or choose another "
					    "ckpt-dir"
					  : "choose another ckpt-dir");
		return -1;
	}
	return 0;
}

/* The checkpoint directory itself: the user's, writable by nobody else. */
static int final_bad(const struct stat *st, uid_t uid, const char *dir,
		     char *err, size_t errlen)
{
	char owner[64];

	if (st->st_uid != uid) {
		who(st->st_uid, owner, sizeof(owner));
		err_set(err, errlen,
			"%.200s already exists and belongs to %s, not to you: "
			"whoever created it can read and replace your "
			"checkpoints; choose another ckpt-dir (or ask them to "
			"remove it)",
			dir, owner);
		return -1;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		err_set(err, errlen,
			"%.200s is writable by %s (mode %04o): they could "
			"replace your checkpoints; make it yours alone (chmod "
			"700 %.200s) or choose another ckpt-dir",
			dir, st->st_mode & S_IWOTH ? "everyone" : "its group",
			(unsigned)(st->st_mode & 07777), dir);
		return -1;
	}
	return 0;
}

/* A name that is the user's: the login name or uid as a whole word
 * ("alice", "hvd-1000", "alice.ckpt"). */
static int personal(const char *name, uid_t uid)
{
	char ids[2][64], pwbuf[1024];
	struct passwd pw, *pwp = NULL;

	snprintf(ids[0], sizeof(ids[0]), "%u", (unsigned)uid);
	ids[1][0] = '\0';
	if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
		snprintf(ids[1], sizeof(ids[1]), "%.63s", pw.pw_name);
	for (int k = 0; k < 2; k++) {
		size_t len = strlen(ids[k]);

		for (const char *q = name; len && (q = strstr(q, ids[k])); q++)
			if ((q == name || !isalnum((unsigned char)q[-1])) &&
			    !isalnum((unsigned char)q[len]))
				return 1;
	}
	return 0;
}

/* Create `name` (not the last component) in the directory fd, whose
 * status is st: 0, -1 (errno says why) or -2 (refused, err says why).  A directory one user creates in a directory everyone
 * can write (/var/tmp) is of no use to the others: they could not trust
 * it and would be locked out of the path.  So there the user's job only
 * creates a directory named after the user, and a shared one is root's to
 * create, as /tmp is (mode 1777) -- the rule libhvd's checkpointer follows
 * when it opens the directory (runtime/ckpt/core/ckpt_store.c). */
static int make_parent(int fd, const struct stat *st, const char *name,
		       const char *dir, uid_t uid, char *err, size_t errlen)
{
	int shared = (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;

	if (shared && !personal(name, uid) && geteuid() != 0) {
		err_set(err, errlen,
			"will not create %.200s: the directory above it is "
			"writable by others, and a directory one user creates "
			"there is of no use to the others (they could not "
			"trust it, and would be locked out of the path); ask "
			"your admin to create it (owner root, mode 1777, as "
			"/tmp), or use a path whose directories there carry "
			"your name (%.200s-$USER/...)",
			dir, dir);
		return -2;
	}
	if (mkdirat(fd, name, 0700))
		return -1;
	/* chmod, not mkdir's mode: the umask must not take the bits away */
	if (shared && !personal(name, uid) && fchmodat(fd, name, 01777, 0))
		return -1;
	return 0;
}

/* Why `name` in directory `dfd` could not be opened as a directory. */
static void open_failed(int dfd, const char *name, const char *dir, int e,
			char *err, size_t errlen)
{
	struct stat st;

	if ((e == ELOOP || e == ENOTDIR) &&
	    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		err_set(err, errlen,
			"%.200s is a symbolic link: the checkpoint directory "
			"is never reached through one (another user could "
			"point it elsewhere); give the real path (readlink -f "
			"%.200s)",
			dir, dir);
	else if (e == ENOTDIR || e == ELOOP)
		err_set(err, errlen,
			"%.200s exists and is not a directory; choose another "
			"ckpt-dir",
			dir);
	else if (e == EACCES)
		err_set(err, errlen,
			"cannot enter %.200s (permission denied); choose a "
			"directory you can reach",
			dir);
	else
		err_set(err, errlen, "cannot open %.200s: %s", dir,
			strerror(e));
}

int ckptdir_make(const char *path, uid_t uid, char *err, size_t errlen)
{
	char buf[PATH_LEN], dir[PATH_LEN] = "";
	const int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	struct stat st;
	char *p;
	int fd, rc = -1;

	if (!path || path[0] != '/' || strlen(path) >= sizeof(buf) ||
	    strcmp(path, "/") == 0) {
		err_set(err, errlen,
			"'%.200s' is not an absolute directory path",
			path ? path : "");
		return -1;
	}
	strcpy(buf, path);
	fd = open("/", flags);
	if (fd < 0 || fstat(fd, &st)) {
		err_set(err, errlen, "cannot open /: %s", strerror(errno));
		goto out;
	}
	if (parent_bad(&st, uid, "/", err, errlen))
		goto out;
	for (p = buf + 1; *p;) {
		char *name = p;
		size_t n = strcspn(p, "/");
		int last, nfd;

		p += n;
		last = *p == '\0';
		if (!last)
			*p++ = '\0';
		if (n == 0 || strcmp(name, ".") == 0 ||
		    strcmp(name, "..") == 0) {
			err_set(err, errlen,
				"'%.200s' is not a normalised path (empty, "
				"'.' or '..' component)",
				path);
			goto out;
		}
		snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/%s",
			 name);
		nfd = openat(fd, name, flags);
		if (nfd < 0 && errno == ENOENT) {
			mode_t old = umask(077);
			int mk = last ? mkdirat(fd, name, 0700)
				      : make_parent(fd, &st, name, dir, uid,
						    err, errlen),
			    e = errno;

			umask(old);
			if (mk == -2)
				goto out;
			if (mk && e != EEXIST) {
				err_set(err, errlen,
					"cannot create %.200s: %s%s", dir,
					strerror(e),
					e == EACCES ? "; choose a directory "
						      "you can create"
						    : "");
				goto out;
			}
			nfd = openat(fd, name, flags);
		}
		if (nfd < 0) {
			open_failed(fd, name, dir, errno, err, errlen);
			goto out;
		}
		close(fd);
		fd = nfd;
		if (fstat(fd, &st)) {
			err_set(err, errlen, "cannot stat %.200s: %s", dir,
				strerror(errno));
			goto out;
		}
		if (last ? final_bad(&st, uid, dir, err, errlen)
			 : parent_bad(&st, uid, dir, err, errlen))
			goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

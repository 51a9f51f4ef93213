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
			int mk = mkdirat(fd, name, 0700), e = errno;

			umask(old);
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

/*
 * ckpt_store.c - durable file writes, scans, verification, retention and
 * the `latest` pointer (see ckpt_store.h).
 *
 * Durability rules followed here (ext4/xfs semantics, the ones that matter
 * on Linux): data is durable after fsync(fd); a new name is durable after
 * fsync of its directory; rename() within one file system is atomic.  So a
 * file is written, fsynced, then its directory fsynced before anything that
 * depends on it is published.
 *
 * Safety rules: a checkpoint directory may hold things we did not put there
 * (another user's, a neighbour's link, an old tool's).  It is opened once,
 * and everything below it is reached with *at() calls relative to that
 * descriptor, with O_NOFOLLOW, and checked on the descriptor it opened
 * (fstat: a real directory or regular file, of the directory's user): so a
 * name swapped for a link between a check and its use is never followed
 * either.  Removal unlinks names (a link is removed, never its target).
 * Files are created 0600 with O_EXCL, directories 0700.
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

#define IO_CHUNK (8u << 20)
#define DIR_MODE 0700
#define FILE_MODE 0600

void (*ckpt_write_hook)(const char *path, uint64_t written);
size_t ckpt_write_chunk = IO_CHUNK;

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

static void join(char *buf, size_t n, const struct ckpt_dir *d,
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
	if (mkdirat(cur, name, DIR_MODE) != 0)
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
static const char *not_ours(const struct ckpt_dir *d, const struct stat *sb,
			    char *why, size_t n)
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
	join(sub->path, sizeof(sub->path), d, name);
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
	why = not_ours(d, &sb, buf, sizeof(buf));
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

	if (mkdirat(d->fd, name, DIR_MODE) != 0 && errno != EEXIST) {
		join(path, sizeof(path), d, name);
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
	join(path, sizeof(path), d, CKPT_LOCK_NAME);
	lfd = openat(d->fd, CKPT_LOCK_NAME,
		     O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		     FILE_MODE);
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

/* ------------------------------------------------------------- files */

static hvd_status_t write_all(int fd, const void *buf, size_t n,
			      const char *path)
{
	const char *p = buf;

	while (n) {
		size_t chunk = n < IO_CHUNK ? n : IO_CHUNK;
		ssize_t w = write(fd, p, chunk);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return ckpt_errno(errno, "cannot write", path);
		}
		if (w == 0)
			return ckpt_errno(ENOSPC, "cannot write", path);
		p += w;
		n -= (size_t)w;
	}
	return HVD_OK;
}

hvd_status_t ckpt_write_file(const struct ckpt_dir *d, const char *name,
			     const struct ckpt_part *parts, size_t nparts,
			     uint64_t *hash)
{
	char path[PATH_MAX];
	XXH3_state_t *xs;
	hvd_status_t st = HVD_OK;
	uint64_t offset = 0;
	int fd;

	join(path, sizeof(path), d, name);
	xs = XXH3_createState();
	if (!xs)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	XXH3_64bits_reset(xs);
	fd = openat(d->fd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    FILE_MODE);
	if (fd < 0) {
		st = ckpt_errno(errno, "cannot create", path);
		goto err_state;
	}
	for (size_t i = 0; i < nparts && st == HVD_OK; i++) {
		/* hash and write chunk by chunk, so the chunk is still in
		 * cache when write() copies it */
		const char *p = parts[i].buf;
		size_t left = parts[i].bytes;
		uint64_t done = 0;

		while (left && st == HVD_OK) {
			size_t chunk = left < ckpt_write_chunk ? left
							       : ckpt_write_chunk;

			XXH3_64bits_update(xs, p, chunk);
			st = write_all(fd, p, chunk, path);
			/* start writing this chunk to disk now, while the next
			 * one is copied: the final fsync then has little left
			 * to do (unsupported on some file systems: harmless) */
			if (st == HVD_OK)
				sync_file_range(fd, (off64_t)(offset), chunk,
						SYNC_FILE_RANGE_WRITE);
			offset += chunk;
			p += chunk;
			left -= chunk;
			done += chunk;
			if (ckpt_write_hook)
				ckpt_write_hook(path, done);
		}
	}
	if (st == HVD_OK && fsync(fd) != 0)
		st = ckpt_errno(errno, "cannot fsync", path);
	if (close(fd) != 0 && st == HVD_OK)
		st = ckpt_errno(errno, "cannot close", path);
	if (st != HVD_OK)
		unlinkat(d->fd, name, 0);
	*hash = XXH3_64bits_digest(xs);
err_state:
	XXH3_freeState(xs);
	return st;
}

hvd_status_t ckpt_write_atomic(const struct ckpt_dir *d, const char *name,
			       const void *buf, size_t len)
{
	char tmp[300], path[PATH_MAX];
	struct ckpt_part part = { buf, len };
	uint64_t hash;

	ckpt_fmt(tmp, sizeof(tmp), ".%s.tmp-%ld", name, (long)getpid());
	unlinkat(d->fd, tmp, 0);
	HVD_CHECK(ckpt_write_file(d, tmp, &part, 1, &hash));
	if (renameat(d->fd, tmp, d->fd, name) != 0) {
		int err = errno;

		join(path, sizeof(path), d, name);
		unlinkat(d->fd, tmp, 0);
		return ckpt_errno(err, "cannot rename into place", path);
	}
	return ckpt_fsync_dir(d);
}

/* Open d/name for reading: a regular file, not through a link (O_NONBLOCK
 * so that a FIFO put there cannot hang the open). */
static int open_regular(const struct ckpt_dir *d, const char *name,
			struct stat *sb, const char *path, hvd_status_t *st)
{
	int fd = openat(d->fd, name,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		*st = errno == ENOENT
			      ? hvd_error(HVD_ERR_CORRUPT, "checkpoint file %s "
					  "is missing", path)
			      : ckpt_errno(errno, "cannot open", path);
		return -1;
	}
	if (fstat(fd, sb) != 0) {
		*st = ckpt_errno(errno, "cannot stat", path);
		close(fd);
		return -1;
	}
	if (!S_ISREG(sb->st_mode)) {
		*st = hvd_error(HVD_ERR_CORRUPT, "checkpoint: %s is not a "
				"regular file: not read", path);
		close(fd);
		return -1;
	}
	return fd;
}

hvd_status_t ckpt_read_small(const struct ckpt_dir *d, const char *name,
			     size_t max, char **buf, size_t *len)
{
	char path[PATH_MAX];
	struct stat sb;
	hvd_status_t st = HVD_OK;
	size_t got = 0;
	char *p;
	int fd;

	join(path, sizeof(path), d, name);
	fd = open_regular(d, name, &sb, path, &st);
	if (fd < 0)
		return st;
	if ((uint64_t)sb.st_size > max) {
		st = hvd_error(HVD_ERR_CORRUPT,
			       "checkpoint: %s is %lld bytes, more than the "
			       "%zu expected", path, (long long)sb.st_size, max);
		goto err_close;
	}
	p = malloc((size_t)sb.st_size + 1);
	if (!p) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
		goto err_close;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t r = read(fd, p + got, (size_t)sb.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st = ckpt_errno(errno, "cannot read", path);
			free(p);
			goto err_close;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	p[got] = '\0';
	*buf = p;
	*len = got;
err_close:
	close(fd);
	return st;
}

hvd_status_t ckpt_read_manifest(const struct ckpt_dir *ck,
				struct ckpt_manifest *m)
{
	char path[PATH_MAX];
	hvd_status_t st;
	struct stat sb;
	char *text;
	size_t len;

	memset(m, 0, sizeof(*m));
	join(path, sizeof(path), ck, CKPT_MANIFEST_NAME);
	if (fstatat(ck->fd, CKPT_MANIFEST_NAME, &sb, AT_SYMLINK_NOFOLLOW) != 0 &&
	    errno == ENOENT)
		return hvd_error(HVD_ERR_CORRUPT,
				 "checkpoint %s: no %s (incomplete: the write "
				 "never committed)", ck->path,
				 CKPT_MANIFEST_NAME);
	HVD_CHECK(ckpt_read_small(ck, CKPT_MANIFEST_NAME, CKPT_MANIFEST_MAX,
				  &text, &len));
	st = ckpt_manifest_parse(text, len, m);
	free(text);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "%s", path);
	return HVD_OK;
}

/* Read n bytes at the current offset into p, hashing them. */
static hvd_status_t read_hash(int fd, char *p, size_t n, XXH3_state_t *xs,
			      const char *path)
{
	while (n) {
		size_t want = n < IO_CHUNK ? n : IO_CHUNK;
		ssize_t r = read(fd, p, want);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return ckpt_errno(errno, "cannot read", path);
		if (r == 0)
			return hvd_error(HVD_ERR_CORRUPT,
					 "checkpoint file %s shrank while being "
					 "read", path);
		XXH3_64bits_update(xs, p, (size_t)r);
		p += r;
		n -= (size_t)r;
	}
	return HVD_OK;
}

hvd_status_t ckpt_verify_file(const struct ckpt_dir *ck,
			      const struct ckpt_file *f,
			      const struct ckpt_dst *dsts, size_t ndst)
{
	char path[PATH_MAX];
	XXH3_state_t *xs = NULL;
	hvd_status_t st = HVD_OK;
	struct stat sb;
	char *bounce = NULL;
	uint64_t hash, total = 0;
	int fd;

	join(path, sizeof(path), ck, f->name);
	for (size_t i = 0; i < ndst; i++)
		total += dsts[i].bytes;
	if (ndst && total != f->size)
		return hvd_error(HVD_ERR_INTERNAL,
				 "checkpoint: %s: loading %llu bytes from a "
				 "file of %llu", path,
				 (unsigned long long)total,
				 (unsigned long long)f->size);
	fd = open_regular(ck, f->name, &sb, path, &st);
	if (fd < 0)
		return st;
	if ((uint64_t)sb.st_size != f->size) {
		st = hvd_error(HVD_ERR_CORRUPT,
			       "checkpoint file %s is %lld bytes, the manifest "
			       "says %llu (truncated or overwritten)",
			       path, (long long)sb.st_size,
			       (unsigned long long)f->size);
		goto err_close;
	}
	xs = XXH3_createState();
	if (!ndst)
		bounce = malloc(IO_CHUNK);
	if (!xs || (!ndst && !bounce)) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
		goto err_free;
	}
	XXH3_64bits_reset(xs);
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (ndst) {
		for (size_t i = 0; i < ndst && st == HVD_OK; i++)
			st = read_hash(fd, dsts[i].buf, dsts[i].bytes, xs,
				       path);
	} else {
		uint64_t left = f->size;

		while (left && st == HVD_OK) {
			size_t n = left < IO_CHUNK ? (size_t)left : IO_CHUNK;

			st = read_hash(fd, bounce, n, xs, path);
			left -= n;
		}
	}
	if (st != HVD_OK)
		goto err_free;
	hash = XXH3_64bits_digest(xs);
	if (hash != f->hash)
		st = hvd_error(HVD_ERR_CORRUPT,
			       "checkpoint file %s: checksum %016llx, the "
			       "manifest says %016llx (corrupted)",
			       path, (unsigned long long)hash,
			       (unsigned long long)f->hash);
err_free:
	free(bounce);
	XXH3_freeState(xs);
err_close:
	close(fd);
	return st;
}

hvd_status_t ckpt_verify(const struct ckpt_dir *ck,
			 const struct ckpt_manifest *m, int rank)
{
	char own[CKPT_FILE_NAME_MAX];

	if (rank >= 0)
		ckpt_rank_file(own, sizeof(own), rank);
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct ckpt_file *f = &m->files[i];

		if (rank >= 0 && strcmp(f->name, CKPT_REPLICATED_FILE) != 0 &&
		    strcmp(f->name, own) != 0)
			continue;
		HVD_CHECK(ckpt_verify_file(ck, f, NULL, 0));
	}
	return HVD_OK;
}

/* ---------------------------------------------------- scan and prune */

/* Read d's entries with their own descriptor (a scan on another thread
 * must not move this one's position). */
static DIR *open_entries(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir;

	if (fd < 0)
		return NULL;
	dir = fdopendir(fd);
	if (!dir)
		close(fd);
	return dir;
}

/* What one entry named like a checkpoint is. */
static void classify(const struct ckpt_dir *d, const char *name,
		     enum ckpt_dir_kind kind, struct ckpt_entry *e)
{
	struct ckpt_dir ck;
	struct ckpt_manifest m;
	char why[64];
	struct stat sb;

	if (fstatat(d->fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
	    not_ours(d, &sb, why, sizeof(why))) {
		e->state = CKPT_FOREIGN;
		return;
	}
	if (kind == CKPT_DIR_PARTIAL) {
		e->state = CKPT_PARTIAL;
		return;
	}
	e->state = CKPT_INCOMPLETE;
	if (ckpt_dir_sub(d, name, &ck) != HVD_OK) {
		e->state = CKPT_FOREIGN; /* swapped since the fstatat */
		return;
	}
	if (ckpt_read_manifest(&ck, &m) == HVD_OK) {
		e->state = CKPT_COMPLETE;
		ckpt_manifest_free(&m);
	}
	ckpt_dir_close(&ck);
}

hvd_status_t ckpt_scan(const struct ckpt_dir *d, const char *own_tag,
		       struct ckpt_entry **entries, size_t *n)
{
	struct ckpt_entry *e = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	DIR *dir;

	*entries = NULL;
	*n = 0;
	dir = open_entries(d->fd);
	if (!dir)
		return ckpt_errno(errno, "cannot read directory", d->path);
	while ((de = readdir(dir)) != NULL) {
		enum ckpt_dir_kind kind;
		const char *tag;
		long step;

		kind = ckpt_dir_parse(de->d_name, &step, &tag);
		if (kind == CKPT_DIR_OTHER ||
		    strlen(de->d_name) >= sizeof(e->name))
			continue;
		if (cnt == cap) {
			struct ckpt_entry *ne;

			cap = cap ? 2 * cap : 16;
			ne = realloc(e, cap * sizeof(*e));
			if (!ne) {
				free(e);
				closedir(dir);
				return hvd_error(HVD_ERR_NO_MEMORY,
						 "checkpoint: out of memory");
			}
			e = ne;
		}
		memset(&e[cnt], 0, sizeof(e[cnt]));
		ckpt_fmt(e[cnt].name, sizeof(e[cnt].name), "%s", de->d_name);
		e[cnt].step = step;
		classify(d, de->d_name, kind, &e[cnt]);
		e[cnt].own = e[cnt].state == CKPT_PARTIAL && own_tag &&
			     strcmp(tag, own_tag) == 0;
		cnt++;
	}
	closedir(dir);
	hvd_error_clear();
	ckpt_entries_sort(e, cnt);
	*entries = e;
	*n = cnt;
	return HVD_OK;
}

hvd_status_t ckpt_remove_dir(const struct ckpt_dir *d, const char *name)
{
	struct ckpt_dir ck;
	struct dirent *de;
	hvd_status_t st = HVD_OK;
	DIR *dir;

	HVD_CHECK(ckpt_dir_sub(d, name, &ck));
	dir = open_entries(ck.fd);
	if (!dir) {
		st = ckpt_errno(errno, "cannot read directory", ck.path);
		goto err_close;
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* a name, never what it points to: a link goes, its target
		 * stays; a directory inside (not ours) fails the rmdir */
		if (unlinkat(ck.fd, de->d_name, 0) != 0 && errno != ENOENT) {
			st = ckpt_errno(errno, "cannot remove a file in",
					ck.path);
			break;
		}
	}
	closedir(dir);
	if (st == HVD_OK && unlinkat(d->fd, name, AT_REMOVEDIR) != 0 &&
	    errno != ENOENT)
		st = ckpt_errno(errno, "cannot remove", ck.path);
err_close:
	ckpt_dir_close(&ck);
	return st;
}

hvd_status_t ckpt_prune(const struct ckpt_dir *d, int keep,
			long protect_step, const char *own_tag,
			size_t *removed)
{
	struct ckpt_entry *e;
	hvd_status_t st, first = HVD_OK;
	size_t n, done = 0;

	HVD_CHECK(ckpt_scan(d, own_tag, &e, &n));
	ckpt_retention_plan(e, n, keep, protect_step);
	for (size_t i = 0; i < n; i++) {
		if (e[i].state == CKPT_FOREIGN)
			hvd_log(HVD_LOG_INFO, "checkpoint: %s/%s is a symbolic "
				"link or not yours: left alone", d->path,
				e[i].name);
		if (!e[i].remove)
			continue;
		hvd_log(HVD_LOG_INFO, "checkpoint: removing %s/%s (%s)",
			d->path, e[i].name,
			e[i].state == CKPT_COMPLETE ? "beyond keep"
			: e[i].state == CKPT_PARTIAL ? "partial, left by a crash"
						     : "incomplete");
		st = ckpt_remove_dir(d, e[i].name);
		if (st == HVD_OK)
			done++;
		else if (first == HVD_OK)
			first = st;
	}
	free(e);
	if (done)
		ckpt_fsync_dir(d);
	if (removed)
		*removed = done;
	if (first != HVD_OK)
		hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
	return first;
}

hvd_status_t ckpt_write_latest(const struct ckpt_dir *d, const char *name)
{
	char line[300];
	int n = snprintf(line, sizeof(line), "%s\n", name);

	return ckpt_write_atomic(d, CKPT_LATEST_NAME, line, (size_t)n);
}

hvd_status_t ckpt_read_latest(const struct ckpt_dir *d, char *name, size_t n)
{
	struct stat sb;
	char *text;
	size_t len;

	name[0] = '\0';
	if (fstatat(d->fd, CKPT_LATEST_NAME, &sb, AT_SYMLINK_NOFOLLOW) != 0 &&
	    errno == ENOENT)
		return HVD_OK;
	HVD_CHECK(ckpt_read_small(d, CKPT_LATEST_NAME, 4096, &text, &len));
	if (len && text[len - 1] == '\n')
		text[--len] = '\0';
	ckpt_fmt(name, n, "%s", text);
	free(text);
	return HVD_OK;
}

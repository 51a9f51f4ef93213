/*
 * ckpt_store.h - file system side of the checkpointer: durable writes with
 * checksums, directory scans, verification, retention and the `latest`
 * pointer.  Local to one process (no collectives, no threads): shared by
 * libhvd's checkpointer (ckpt/) and the hvd-ckpt tool.
 *
 * Every error message names the path and says what to do; ENOSPC and
 * EACCES/EPERM/EROFS get their own wording because they are what users hit.
 */
#ifndef HVD_CKPT_STORE_H
#define HVD_CKPT_STORE_H

#include "ckpt/core/ckpt_manifest.h"

#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#pragma GCC visibility push(hidden)

/* An open checkpoint directory.  Every name below it is reached relative
 * to fd (*at() calls), and never through a symbolic link: a link, or a
 * directory of another user, found where a checkpoint should be is
 * skipped (listed as CKPT_FOREIGN), never followed, read or deleted.
 * Everything the store creates is private: files 0600, directories 0700. */
struct ckpt_dir {
	int fd;                 /* O_RDONLY|O_DIRECTORY; -1: not open       */
	uid_t uid;              /* whose checkpoints these are              */
	char path[PATH_MAX];    /* for messages only                        */
};

/* ckpt_dir_open flags.  CREATE: create the directory and the missing ones
 * above it (mode 0700).  ANY_OWNER (hvd-ckpt): the checkpoints are those
 * of the directory's owner, whoever runs the tool (an admin's prune);
 * otherwise they are the caller's (effective uid). */
#define CKPT_OPEN_CREATE 1u
#define CKPT_OPEN_ANY_OWNER 2u

hvd_status_t ckpt_dir_open(struct ckpt_dir *d, const char *path,
			   unsigned flags);
/* The directory name below d: a real directory of d->uid (a checkpoint, a
 * partial write), opened without following a link.  make: create it first
 * (0700; one that exists is fine if it passes the same checks). */
hvd_status_t ckpt_dir_sub(const struct ckpt_dir *d, const char *name,
			  struct ckpt_dir *sub);
hvd_status_t ckpt_dir_make(const struct ckpt_dir *d, const char *name,
			   struct ckpt_dir *sub);
void ckpt_dir_close(struct ckpt_dir *d);
/* buf = d's path / name, for messages. */
void ckpt_dir_path(char *buf, size_t n, const struct ckpt_dir *d,
		   const char *name);
/* Why sb (of d/name, from fstatat without following) is not a checkpoint
 * directory of d's user; NULL when it is one. */
const char *ckpt_dir_not_ours(const struct ckpt_dir *d,
			      const struct stat *sb, char *why, size_t n);

/* What the checkpointer creates: directories 0700, files 0600. */
#define CKPT_DIR_MODE 0700
#define CKPT_FILE_MODE 0600

/* The directory's lock: an fcntl write lock (open file description) on
 * d/.lock, held while *fd stays open, so that one run at a time writes a
 * checkpoint directory (two would delete each other's partial writes and
 * flip `latest` between them).  holder (one line: who, where, since when)
 * is written into the file for the error a second run gets, which names
 * it.  Where the file system has no locks (some NFS or Lustre mounts): a
 * warning, and HVD_OK with *fd open but unlocked. */
#define CKPT_LOCK_NAME ".lock"
hvd_status_t ckpt_dir_lock(const struct ckpt_dir *d, const char *holder,
			   int *fd);
/* 1 when a run holds d's lock now (who: what it wrote), else 0; creates
 * nothing (hvd-ckpt, possibly root in a user's directory). */
int ckpt_dir_busy(const struct ckpt_dir *d, char *who, size_t n);

/* A piece of a file to write: the file is the concatenation of parts. */
struct ckpt_part {
	const void *buf;
	size_t bytes;
};

/* Test hook, called after each chunk written by ckpt_write_file (NULL in
 * production): lets the crash tests kill a rank in the middle of a file. */
extern void (*ckpt_write_hook)(const char *path, uint64_t written);
/* Bytes per write() (8 MiB; the crash tests make it small). */
extern size_t ckpt_write_chunk;

/* Create d/name (0600, O_EXCL|O_NOFOLLOW: never over an existing file or
 * link), write the parts, fsync, close; *hash is XXH3-64 of the contents.
 * On error the file is removed and the message names it. */
hvd_status_t ckpt_write_file(const struct ckpt_dir *d, const char *name,
			     const struct ckpt_part *parts, size_t nparts,
			     uint64_t *hash);
/* Write a small file atomically: a temporary name, fsync, rename, fsync
 * the directory. */
hvd_status_t ckpt_write_atomic(const struct ckpt_dir *d, const char *name,
			       const void *buf, size_t len);
hvd_status_t ckpt_fsync_dir(const struct ckpt_dir *d);

/* Read a whole small regular file (manifest, latest) of d: malloc'd,
 * NUL-terminated.  A link or anything but a regular file is refused. */
hvd_status_t ckpt_read_small(const struct ckpt_dir *d, const char *name,
			     size_t max, char **buf, size_t *len);
/* Parse ck/MANIFEST (ck: one checkpoint's directory). */
hvd_status_t ckpt_read_manifest(const struct ckpt_dir *ck,
				struct ckpt_manifest *m);

/* Where a verified read puts a file's bytes: the file is read into these
 * in order (their sizes add up to the file's). */
struct ckpt_dst {
	void *buf;
	size_t bytes;
};

/* Check that ck/name has the manifest's size and hash.  With dsts, the
 * contents land there too, so that a verified load reads the data once (the
 * caller must not trust them unless HVD_OK).  HVD_ERR_CORRUPT names the
 * file. */
hvd_status_t ckpt_verify_file(const struct ckpt_dir *ck,
			      const struct ckpt_file *f,
			      const struct ckpt_dst *dsts, size_t ndst);
/* Verify what rank `rank` needs (replicated.bin, its own rank and shard
 * files: a restore on the size that wrote it), or every file when
 * rank < 0. */
hvd_status_t ckpt_verify(const struct ckpt_dir *ck,
			 const struct ckpt_manifest *m, int rank);

/* Read len bytes at off of ck/f->name (a regular file, not through a
 * link, of the manifest's size) into buf, unchecked: a reshard reads
 * pieces of files that whole-file checksums verified before. */
hvd_status_t ckpt_read_range(const struct ckpt_dir *ck,
			     const struct ckpt_file *f, uint64_t off,
			     void *buf, size_t len);

/* Entries of d named like checkpoints, classified and sorted newest
 * first.  own_tag marks this run's partials (NULL: none). */
hvd_status_t ckpt_scan(const struct ckpt_dir *d, const char *own_tag,
		       struct ckpt_entry **entries, size_t *n);
/* Remove a checkpoint directory of d (flat: files then the directory). */
hvd_status_t ckpt_remove_dir(const struct ckpt_dir *d, const char *name);
/* Scan, plan (ckpt_retention_plan) and delete; logs what it removes. */
hvd_status_t ckpt_prune(const struct ckpt_dir *d, int keep,
			long protect_step, const char *own_tag,
			size_t *removed);

/* `latest`: write (atomically) and read ("" when absent). */
hvd_status_t ckpt_write_latest(const struct ckpt_dir *d, const char *name);
hvd_status_t ckpt_read_latest(const struct ckpt_dir *d, char *name,
			      size_t n);

/* Message for an errno on path: "file system full" etc. */
hvd_status_t ckpt_errno(int err, const char *what, const char *path);

#pragma GCC visibility pop

#endif /* HVD_CKPT_STORE_H */

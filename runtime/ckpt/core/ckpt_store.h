/*
 * ckpt_store.h - file system side of the checkpointer: durable writes with
 * checksums, directory scans, verification, retention and the `latest`
 * pointer.  Local to one process (no collectives): shared by libhvd's
 * checkpointer (ckpt.c) and the hvd-ckpt tool.
 *
 * Every error message names the path and says what to do; ENOSPC and
 * EACCES/EPERM/EROFS get their own wording because they are what users hit.
 */
#ifndef HVD_CKPT_STORE_H
#define HVD_CKPT_STORE_H

#include "ckpt/core/ckpt_manifest.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

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

/* Create path (O_EXCL: never over an existing file), write the parts,
 * fsync, close; *hash is XXH3-64 of the contents.  On error the file is
 * removed and the message names path. */
hvd_status_t ckpt_write_file(const char *path, const struct ckpt_part *parts,
			     size_t nparts, uint64_t *hash);
/* Write a small file atomically: path.tmp, fsync, rename, fsync dir. */
hvd_status_t ckpt_write_atomic(const char *dir, const char *name,
			       const void *buf, size_t len);
hvd_status_t ckpt_fsync_dir(const char *path);
/* mkdir -p (0755 & ~umask); existing directories are fine. */
hvd_status_t ckpt_mkdirs(const char *path);

/* Read a whole small file (manifest, latest); malloc'd, NUL-terminated. */
hvd_status_t ckpt_read_small(const char *path, size_t max, char **buf,
			     size_t *len);
/* Parse ckdir/MANIFEST. */
hvd_status_t ckpt_read_manifest(const char *ckdir, struct ckpt_manifest *m);

/* Where a verified read puts a file's bytes: the file is read into these
 * in order (their sizes add up to the file's). */
struct ckpt_dst {
	void *buf;
	size_t bytes;
};

/* Check that ckdir/name has the manifest's size and hash.  With dsts, the
 * contents land there too, so that a verified load reads the data once (the
 * caller must not trust them unless HVD_OK).  HVD_ERR_CORRUPT names the
 * file. */
hvd_status_t ckpt_verify_file(const char *ckdir, const struct ckpt_file *f,
			      const struct ckpt_dst *dsts, size_t ndst);
/* Verify what rank `rank` needs (replicated.bin and its own file), or every
 * file when rank < 0. */
hvd_status_t ckpt_verify(const char *ckdir, const struct ckpt_manifest *m,
			 int rank);

/* Directories of dir, classified and sorted newest first.  own_tag marks
 * this run's partials (NULL: none).  An absent dir gives n = 0. */
hvd_status_t ckpt_scan(const char *dir, const char *own_tag,
		       struct ckpt_entry **entries, size_t *n);
/* Remove a checkpoint directory (flat: files then the directory). */
hvd_status_t ckpt_remove_dir(const char *dir, const char *name);
/* Scan, plan (ckpt_retention_plan) and delete; logs what it removes. */
hvd_status_t ckpt_prune(const char *dir, int keep, long protect_step,
			const char *own_tag, size_t *removed);

/* `latest`: write (atomically) and read ("" when absent). */
hvd_status_t ckpt_write_latest(const char *dir, const char *name);
hvd_status_t ckpt_read_latest(const char *dir, char *name, size_t n);

/* Message for an errno on path: "file system full" etc. */
hvd_status_t ckpt_errno(int err, const char *what, const char *path);

#pragma GCC visibility pop

#endif /* HVD_CKPT_STORE_H */

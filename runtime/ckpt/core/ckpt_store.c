/*
 * ckpt_store.c - durable file writes, scans, verification, retention and
 * the `latest` pointer (see ckpt_store.h); the directory itself, its walk
 * and its lock are ckpt_dir.c's.
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

void (*ckpt_write_hook)(const char *path, uint64_t written);
size_t ckpt_write_chunk = IO_CHUNK;

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

	ckpt_dir_path(path, sizeof(path), d, name);
	xs = XXH3_createState();
	if (!xs)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	XXH3_64bits_reset(xs);
	fd = openat(d->fd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    CKPT_FILE_MODE);
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

		ckpt_dir_path(path, sizeof(path), d, name);
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

/* open_regular for a file the manifest lists as f, of exactly its size. */
static int open_listed(const struct ckpt_dir *d, const struct ckpt_file *f,
		       const char *path, hvd_status_t *st)
{
	struct stat sb;
	int fd = open_regular(d, f->name, &sb, path, st);

	if (fd >= 0 && (uint64_t)sb.st_size != f->size) {
		*st = hvd_error(HVD_ERR_CORRUPT,
				"checkpoint file %s is %lld bytes, the "
				"manifest says %llu (truncated or "
				"overwritten)",
				path, (long long)sb.st_size,
				(unsigned long long)f->size);
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

	ckpt_dir_path(path, sizeof(path), d, name);
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
	ckpt_dir_path(path, sizeof(path), ck, CKPT_MANIFEST_NAME);
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
	char *bounce = NULL;
	uint64_t hash, total = 0;
	int fd;

	ckpt_dir_path(path, sizeof(path), ck, f->name);
	for (size_t i = 0; i < ndst; i++)
		total += dsts[i].bytes;
	if (ndst && total != f->size)
		return hvd_error(HVD_ERR_INTERNAL,
				 "checkpoint: %s: loading %llu bytes from a "
				 "file of %llu", path,
				 (unsigned long long)total,
				 (unsigned long long)f->size);
	fd = open_listed(ck, f, path, &st);
	if (fd < 0)
		return st;
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
	close(fd);
	return st;
}

hvd_status_t ckpt_verify(const struct ckpt_dir *ck,
			 const struct ckpt_manifest *m, int rank)
{
	char own[CKPT_FILE_NAME_MAX], shard[CKPT_FILE_NAME_MAX];

	if (rank >= 0) {
		ckpt_rank_file(own, sizeof(own), rank);
		ckpt_shard_file(shard, sizeof(shard), rank);
	}
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct ckpt_file *f = &m->files[i];

		if (rank >= 0 && strcmp(f->name, CKPT_REPLICATED_FILE) != 0 &&
		    strcmp(f->name, own) != 0 && strcmp(f->name, shard) != 0)
			continue;
		HVD_CHECK(ckpt_verify_file(ck, f, NULL, 0));
	}
	return HVD_OK;
}

hvd_status_t ckpt_read_range(const struct ckpt_dir *ck,
			     const struct ckpt_file *f, uint64_t off,
			     void *buf, size_t len)
{
	char path[PATH_MAX];
	hvd_status_t st = HVD_OK;
	char *p = buf;
	int fd;

	ckpt_dir_path(path, sizeof(path), ck, f->name);
	if (off > f->size || len > f->size - off)
		return hvd_error(HVD_ERR_CORRUPT,
				 "checkpoint file %s: %zu bytes at %llu are "
				 "beyond its %llu bytes", path, len,
				 (unsigned long long)off,
				 (unsigned long long)f->size);
	fd = open_listed(ck, f, path, &st);
	if (fd < 0)
		return st;
	while (len) {
		size_t want = len < IO_CHUNK ? len : IO_CHUNK;
		ssize_t r = pread(fd, p, want, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st = ckpt_errno(errno, "cannot read", path);
			goto out;
		}
		if (r == 0) {
			st = hvd_error(HVD_ERR_CORRUPT, "checkpoint file %s "
				       "shrank while being read", path);
			goto out;
		}
		p += r;
		off += (uint64_t)r;
		len -= (size_t)r;
	}
out:
	close(fd);
	return st;
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
	    ckpt_dir_not_ours(d, &sb, why, sizeof(why))) {
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

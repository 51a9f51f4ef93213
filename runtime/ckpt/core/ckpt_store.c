/*
 * ckpt_store.c - durable file writes, scans, verification, retention and
 * the `latest` pointer (see ckpt_store.h).
 *
 * Durability rules followed here (ext4/xfs semantics, the ones that matter
 * on Linux): data is durable after fsync(fd); a new name is durable after
 * fsync of its directory; rename() within one file system is atomic.  So a
 * file is written, fsynced, then its directory fsynced before anything that
 * depends on it is published.
 */
#include "config.h"

#include "ckpt/core/ckpt_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define IO_CHUNK (8u << 20)

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
	default:
		return hvd_error(HVD_ERR_IO, "checkpoint: %s %s: %s", what,
				 path, strerror(err));
	}
}

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

hvd_status_t ckpt_write_file(const char *path, const struct ckpt_part *parts,
			     size_t nparts, uint64_t *hash)
{
	XXH3_state_t *xs;
	hvd_status_t st = HVD_OK;
	uint64_t offset = 0;
	int fd;

	xs = XXH3_createState();
	if (!xs)
		return hvd_error(HVD_ERR_NO_MEMORY, "checkpoint: out of memory");
	XXH3_64bits_reset(xs);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
		unlink(path);
	*hash = XXH3_64bits_digest(xs);
err_state:
	XXH3_freeState(xs);
	return st;
}

hvd_status_t ckpt_fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	hvd_status_t st = HVD_OK;

	if (fd < 0)
		return ckpt_errno(errno, "cannot open directory", path);
	if (fsync(fd) != 0 && errno != EINVAL)
		st = ckpt_errno(errno, "cannot fsync directory", path);
	close(fd);
	return st;
}

hvd_status_t ckpt_write_atomic(const char *dir, const char *name,
			       const void *buf, size_t len)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	struct ckpt_part part = { buf, len };
	uint64_t hash;
	hvd_status_t st;

	ckpt_fmt(path, sizeof(path), "%s/%s", dir, name);
	ckpt_fmt(tmp, sizeof(tmp), "%s/.%s.tmp-%ld", dir, name, (long)getpid());
	unlink(tmp);
	st = ckpt_write_file(tmp, &part, 1, &hash);
	if (st != HVD_OK)
		return st;
	if (rename(tmp, path) != 0) {
		st = ckpt_errno(errno, "cannot rename into place", path);
		unlink(tmp);
		return st;
	}
	return ckpt_fsync_dir(dir);
}

hvd_status_t ckpt_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "checkpoint: directory name is empty or too "
				 "long");
	memcpy(buf, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
			hvd_status_t st = ckpt_errno(errno, "cannot create "
						     "directory", buf);
			return st;
		}
		if (i < n)
			buf[i] = '/';
	}
	return HVD_OK;
}

hvd_status_t ckpt_read_small(const char *path, size_t max, char **buf,
			     size_t *len)
{
	struct stat sb;
	hvd_status_t st = HVD_OK;
	size_t got = 0;
	char *p;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ckpt_errno(errno, "cannot open", path);
	if (fstat(fd, &sb) != 0) {
		st = ckpt_errno(errno, "cannot stat", path);
		goto err_close;
	}
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

hvd_status_t ckpt_read_manifest(const char *ckdir, struct ckpt_manifest *m)
{
	char path[PATH_MAX];
	hvd_status_t st;
	char *text;
	size_t len;

	ckpt_fmt(path, sizeof(path), "%s/%s", ckdir, CKPT_MANIFEST_NAME);
	st = ckpt_read_small(path, CKPT_MANIFEST_MAX, &text, &len);
	if (st != HVD_OK) {
		if (access(path, F_OK) != 0)
			return hvd_error(HVD_ERR_CORRUPT,
					 "checkpoint %s: no %s (incomplete: "
					 "the write never committed)",
					 ckdir, CKPT_MANIFEST_NAME);
		return st;
	}
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

hvd_status_t ckpt_verify_file(const char *ckdir, const struct ckpt_file *f,
			      const struct ckpt_dst *dsts, size_t ndst)
{
	char path[PATH_MAX];
	XXH3_state_t *xs = NULL;
	hvd_status_t st = HVD_OK;
	struct stat sb;
	char *bounce = NULL;
	uint64_t hash, total = 0;
	int fd;

	for (size_t i = 0; i < ndst; i++)
		total += dsts[i].bytes;
	if (ndst && total != f->size)
		return hvd_error(HVD_ERR_INTERNAL,
				 "checkpoint: %s/%s: loading %llu bytes from a "
				 "file of %llu", ckdir, f->name,
				 (unsigned long long)total,
				 (unsigned long long)f->size);
	ckpt_fmt(path, sizeof(path), "%s/%s", ckdir, f->name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return hvd_error(HVD_ERR_CORRUPT,
					 "checkpoint file %s is missing", path);
		return ckpt_errno(errno, "cannot open", path);
	}
	if (fstat(fd, &sb) != 0) {
		st = ckpt_errno(errno, "cannot stat", path);
		goto err_close;
	}
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

hvd_status_t ckpt_verify(const char *ckdir, const struct ckpt_manifest *m,
			 int rank)
{
	char own[CKPT_FILE_NAME_MAX];

	if (rank >= 0)
		ckpt_rank_file(own, sizeof(own), rank);
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct ckpt_file *f = &m->files[i];
		hvd_status_t st;

		if (rank >= 0 && strcmp(f->name, CKPT_REPLICATED_FILE) != 0 &&
		    strcmp(f->name, own) != 0)
			continue;
		st = ckpt_verify_file(ckdir, f, NULL, 0);
		if (st != HVD_OK)
			return st;
	}
	return HVD_OK;
}

hvd_status_t ckpt_scan(const char *dir, const char *own_tag,
		       struct ckpt_entry **entries, size_t *n)
{
	struct ckpt_entry *e = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	*entries = NULL;
	*n = 0;
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return HVD_OK;
		return ckpt_errno(errno, "cannot open directory", dir);
	}
	while ((de = readdir(d)) != NULL) {
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
				closedir(d);
				return hvd_error(HVD_ERR_NO_MEMORY,
						 "checkpoint: out of memory");
			}
			e = ne;
		}
		memset(&e[cnt], 0, sizeof(e[cnt]));
		ckpt_fmt(e[cnt].name, sizeof(e[cnt].name), "%s", de->d_name);
		e[cnt].step = step;
		if (kind == CKPT_DIR_PARTIAL) {
			e[cnt].state = CKPT_PARTIAL;
			e[cnt].own = own_tag && strcmp(tag, own_tag) == 0;
		} else {
			char ckdir[PATH_MAX];
			struct ckpt_manifest m;

			ckpt_fmt(ckdir, sizeof(ckdir), "%s/%s", dir,
				 de->d_name);
			if (ckpt_read_manifest(ckdir, &m) == HVD_OK) {
				e[cnt].state = CKPT_COMPLETE;
				ckpt_manifest_free(&m);
			} else {
				e[cnt].state = CKPT_INCOMPLETE;
			}
		}
		cnt++;
	}
	closedir(d);
	hvd_error_clear();
	ckpt_entries_sort(e, cnt);
	*entries = e;
	*n = cnt;
	return HVD_OK;
}

hvd_status_t ckpt_remove_dir(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct dirent *de;
	int dfd;
	DIR *d;

	ckpt_fmt(path, sizeof(path), "%s/%s", dir, name);
	d = opendir(path);
	if (!d) {
		if (errno == ENOENT)
			return HVD_OK;
		return ckpt_errno(errno, "cannot open directory", path);
	}
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dfd, de->d_name, 0) != 0 && errno != ENOENT) {
			int err = errno;

			closedir(d);
			return ckpt_errno(err, "cannot remove a file in", path);
		}
	}
	closedir(d);
	if (rmdir(path) != 0 && errno != ENOENT)
		return ckpt_errno(errno, "cannot remove", path);
	return HVD_OK;
}

hvd_status_t ckpt_prune(const char *dir, int keep, long protect_step,
			const char *own_tag, size_t *removed)
{
	struct ckpt_entry *e;
	hvd_status_t st, first = HVD_OK;
	size_t n, done = 0;

	st = ckpt_scan(dir, own_tag, &e, &n);
	if (st != HVD_OK)
		return st;
	ckpt_retention_plan(e, n, keep, protect_step);
	for (size_t i = 0; i < n; i++) {
		if (!e[i].remove)
			continue;
		hvd_log(HVD_LOG_INFO, "checkpoint: removing %s/%s (%s)", dir,
			e[i].name,
			e[i].state == CKPT_COMPLETE ? "beyond keep"
			: e[i].state == CKPT_PARTIAL ? "partial, left by a crash"
						     : "incomplete");
		st = ckpt_remove_dir(dir, e[i].name);
		if (st == HVD_OK)
			done++;
		else if (first == HVD_OK)
			first = st;
	}
	free(e);
	if (done)
		ckpt_fsync_dir(dir);
	if (removed)
		*removed = done;
	if (first != HVD_OK)
		hvd_log(HVD_LOG_WARNING, "%s", hvd_last_error());
	return first;
}

hvd_status_t ckpt_write_latest(const char *dir, const char *name)
{
	char line[300];
	int n = snprintf(line, sizeof(line), "%s\n", name);

	return ckpt_write_atomic(dir, CKPT_LATEST_NAME, line, (size_t)n);
}

hvd_status_t ckpt_read_latest(const char *dir, char *name, size_t n)
{
	char path[PATH_MAX];
	hvd_status_t st;
	char *text;
	size_t len;

	name[0] = '\0';
	ckpt_fmt(path, sizeof(path), "%s/%s", dir, CKPT_LATEST_NAME);
	if (access(path, F_OK) != 0)
		return HVD_OK;
	st = ckpt_read_small(path, 4096, &text, &len);
	if (st != HVD_OK)
		return st;
	if (len && text[len - 1] == '\n')
		text[--len] = '\0';
	ckpt_fmt(name, n, "%s", text);
	free(text);
	return HVD_OK;
}

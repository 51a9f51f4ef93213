/*
 * rendezvous.c - the elastic join file (api/rendezvous.h): its format, its
 * directory, and reading and writing it without trusting the path.
 *
 * The directory is opened with O_NOFOLLOW | O_DIRECTORY and checked on the
 * descriptor (a directory, owned by this user, no access for group or
 * others); the file is then opened relative to that descriptor with
 * O_NOFOLLOW and checked the same way (a regular file, ours, 0600).  A
 * neighbour who can write a parent directory can at most make the file
 * disappear (the newcomer then starts a world of its own and says so); it
 * cannot make us read a file it wrote, since that file would be its own.
 */
#include "config.h"

#include "api/rendezvous.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC_WORD "hvd-elastic-rendezvous "
#define MAGIC_LINE MAGIC_WORD "4"
#define DIR_NAME ".hvd-elastic"

/* ------------------------------------------------------------- pure */

static const char hexd[] = "0123456789abcdef";

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int put_hex(char *buf, size_t len, size_t *off, const uint8_t *p,
		   size_t n)
{
	if (*off + 2 * n >= len)
		return -1;
	for (size_t i = 0; i < n; i++) {
		buf[(*off)++] = hexd[p[i] >> 4];
		buf[(*off)++] = hexd[p[i] & 15];
	}
	return 0;
}

static int plain(const char *s)
{
	for (; *s; s++)
		if (*s <= ' ' || *s > '~')
			return 0;
	return 1;
}

hvd_status_t rdv_format(const struct rdv_info *in, char *buf, size_t len,
			size_t *out)
{
	const char *node = in->node[0] && plain(in->node) ? in->node : "-";
	size_t off;
	int n;

	if (!plain(in->job) || !plain(in->step) || !in->job[0] ||
	    !in->step[0] || in->addr_len > RDV_ADDR_MAX || in->pid < 0)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: cannot write a rendezvous for "
				 "job '%s', step '%s'",
				 in->job, in->step);
	n = snprintf(buf, len,
		     MAGIC_LINE "\njob %s\nrestart %ld\nstep %s\nepoch %u\n"
				"token ",
		     in->job, in->restart, in->step, in->epoch);
	if (n < 0 || (size_t)n >= len)
		goto err_small;
	off = (size_t)n;
	if (put_hex(buf, len, &off, in->token, RDV_TOKEN_BYTES) ||
	    off + 5 >= len)
		goto err_small;
	memcpy(buf + off, "\nkey ", 5);
	off += 5;
	if (put_hex(buf, len, &off, in->key, RDV_KEY_BYTES))
		goto err_small;
	n = snprintf(buf + off, len - off,
		     "\nnode %s\npid %ld\npidns %llu\naddr ", node, in->pid,
		     (unsigned long long)in->pidns);
	if (n < 0 || (size_t)n >= len - off)
		goto err_small;
	off += (size_t)n;
	if (put_hex(buf, len, &off, in->addr, in->addr_len) || off + 1 >= len)
		goto err_small;
	buf[off++] = '\n';
	buf[off] = '\0';
	*out = off;
	return HVD_OK;
err_small:
	return hvd_error(HVD_ERR_INVALID_ARG,
			 "hvd: elastic: rendezvous text longer than %zu bytes",
			 len);
}

void rdv_info_free(struct rdv_info *r)
{
	free(r->addr);
	r->addr = NULL;
	r->addr_len = 0;
}

/* The next line of text, which must start with "key ": its value (up to
 * the newline) in [*v, *v + *vlen). */
static int next_line(const char **p, const char *end, const char *key,
		     const char **v, size_t *vlen)
{
	size_t klen = strlen(key);
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));

	if (!nl || (size_t)(nl - *p) < klen + 1 ||
	    memcmp(*p, key, klen) != 0 || (*p)[klen] != ' ')
		return -1;
	*v = *p + klen + 1;
	*vlen = (size_t)(nl - *v);
	*p = nl + 1;
	return 0;
}

static int get_str(const char *v, size_t vlen, char *out, size_t max)
{
	if (vlen == 0 || vlen >= max)
		return -1;
	memcpy(out, v, vlen);
	out[vlen] = '\0';
	return plain(out) ? 0 : -1;
}

static int get_num(const char *v, size_t vlen, long *out)
{
	char tmp[32], *e;

	if (get_str(v, vlen, tmp, sizeof(tmp)))
		return -1;
	errno = 0;
	*out = strtol(tmp, &e, 10);
	return errno || *e || *out < 0 ? -1 : 0;
}

static int get_hex(const char *v, size_t vlen, uint8_t *out, size_t n)
{
	if (vlen != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(v[2 * i]), lo = hexval(v[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* A first line that is not ours: another libhvd's file (a step of the
 * job started with another installation) says so, anything else is
 * malformed. */
static hvd_status_t other_version(const char *text, size_t len)
{
	size_t n = sizeof(MAGIC_WORD) - 1, k = n;

	while (k < len && k < n + 8 && text[k] >= '0' && text[k] <= '9')
		k++;
	if (len > k && k > n && text[k] == '\n' &&
	    memcmp(text, MAGIC_WORD, n) == 0)
		return hvd_error(HVD_ERR_CORRUPT,
				 "hvd: elastic: the rendezvous file is of "
				 "version %.*s, and this libhvd reads version "
				 "%s: every step of a job must run the same "
				 "libhvd",
				 (int)(k - n), text + n, MAGIC_LINE + n);
	return hvd_error(HVD_ERR_CORRUPT,
			 "hvd: elastic: the rendezvous file is malformed at "
			 "the first line");
}

hvd_status_t rdv_parse(const char *text, size_t len, struct rdv_info *out)
{
	const char *p = text, *end = text + len, *v, *what;
	size_t vlen;
	long num;

	memset(out, 0, sizeof(*out));
	if (len < sizeof(MAGIC_LINE) ||
	    memcmp(p, MAGIC_LINE "\n", sizeof(MAGIC_LINE)) != 0)
		return other_version(text, len);
	p += sizeof(MAGIC_LINE);
	what = "job";
	if (next_line(&p, end, "job", &v, &vlen) ||
	    get_str(v, vlen, out->job, sizeof(out->job)))
		goto err;
	what = "restart";
	if (next_line(&p, end, "restart", &v, &vlen) ||
	    get_num(v, vlen, &out->restart))
		goto err;
	what = "step";
	if (next_line(&p, end, "step", &v, &vlen) ||
	    get_str(v, vlen, out->step, sizeof(out->step)))
		goto err;
	what = "epoch";
	if (next_line(&p, end, "epoch", &v, &vlen) || get_num(v, vlen, &num) ||
	    num > 0xffffffffL)
		goto err;
	out->epoch = (unsigned)num;
	what = "token";
	if (next_line(&p, end, "token", &v, &vlen) ||
	    get_hex(v, vlen, out->token, RDV_TOKEN_BYTES))
		goto err;
	what = "key";
	if (next_line(&p, end, "key", &v, &vlen) ||
	    get_hex(v, vlen, out->key, RDV_KEY_BYTES))
		goto err;
	what = "node";
	if (next_line(&p, end, "node", &v, &vlen) ||
	    get_str(v, vlen, out->node, sizeof(out->node)))
		goto err;
	if (strcmp(out->node, "-") == 0)
		out->node[0] = '\0';
	what = "pid";
	if (next_line(&p, end, "pid", &v, &vlen) || get_num(v, vlen, &num) ||
	    num > 0x7fffffffL)
		goto err;
	out->pid = num;
	what = "pidns";
	if (next_line(&p, end, "pidns", &v, &vlen) || get_num(v, vlen, &num))
		goto err;
	out->pidns = (uint64_t)num;
	what = "addr";
	if (next_line(&p, end, "addr", &v, &vlen) || vlen % 2 ||
	    vlen / 2 > RDV_ADDR_MAX || vlen == 0)
		goto err;
	out->addr_len = vlen / 2;
	out->addr = malloc(out->addr_len);
	if (!out->addr)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	if (get_hex(v, vlen, out->addr, out->addr_len))
		goto err;
	what = "the end";
	if (p != end)
		goto err;
	return HVD_OK;
err:
	rdv_info_free(out);
	return hvd_error(HVD_ERR_CORRUPT,
			 "hvd: elastic: the rendezvous file is malformed at "
			 "%s",
			 what);
}

void rdv_job_name(const char *job, char *out, size_t len)
{
	size_t i = 0;

	for (; job && job[i] && i + 1 < len; i++) {
		char c = job[i];

		out[i] = (char)((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
						(c >= '0' && c <= '9') || c == '-'
					? c
					: '_');
	}
	out[i] = '\0';
	if (!i)
		snprintf(out, len, "local");
}

/* ------------------------------------------------------------ files */

int rdv_dir(char *out, size_t len, char *why, size_t whylen)
{
	const char *d = getenv("HOROVOD_ELASTIC_DIR");
	const char *ck = getenv("HOROVOD_CHECKPOINT_DIR");
	const char *sub = getenv("SLURM_SUBMIT_DIR");
	int n;

	if (d && *d)
		n = snprintf(out, len, "%s", d);
	else if (ck && *ck)
		n = snprintf(out, len, "%s/" DIR_NAME, ck);
	else if (sub && *sub)
		n = snprintf(out, len, "%s/" DIR_NAME, sub);
	else {
		snprintf(why, whylen,
			 "no directory for the join rendezvous: set "
			 "HOROVOD_ELASTIC_DIR (or HOROVOD_CHECKPOINT_DIR) to "
			 "a directory the nodes share");
		return 0;
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(why, whylen, "the rendezvous directory's path is too "
				      "long");
		return 0;
	}
	return 1;
}

static hvd_status_t private_fd(int fd, int want_dir, const char *path)
{
	struct stat sb;

	if (fstat(fd, &sb) != 0)
		return hvd_error(HVD_ERR_IO, "hvd: elastic: stat %s: %s", path,
				 strerror(errno));
	if (want_dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))
		return hvd_error(HVD_ERR_IO,
				 "hvd: elastic: %s is not a %s", path,
				 want_dir ? "directory" : "regular file");
	if (sb.st_uid != geteuid() || (sb.st_mode & 077))
		return hvd_error(HVD_ERR_IO,
				 "hvd: elastic: %s is not private to this user "
				 "(owner uid %u, mode %04o; expected uid %u, "
				 "mode %s): remove it or set "
				 "HOROVOD_ELASTIC_DIR to a directory of your own",
				 path, (unsigned)sb.st_uid,
				 (unsigned)(sb.st_mode & 07777),
				 (unsigned)geteuid(), want_dir ? "0700" : "0600");
	return HVD_OK;
}

/* The directory as a descriptor, made (0700) when create and missing. */
static hvd_status_t open_dir(const char *dir, int create, int *fd)
{
	hvd_status_t st;

	*fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && errno == ENOENT && create) {
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			return hvd_error(HVD_ERR_IO,
					 "hvd: elastic: cannot create the "
					 "rendezvous directory %s: %s",
					 dir, strerror(errno));
		*fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (*fd < 0)
		return hvd_error(HVD_ERR_IO,
				 "hvd: elastic: cannot open the rendezvous "
				 "directory %s: %s%s",
				 dir, strerror(errno),
				 errno == ELOOP || errno == ENOTDIR
				     ? " (a symbolic link is not followed)"
				     : "");
	st = private_fd(*fd, 1, dir);
	if (st != HVD_OK) {
		close(*fd);
		*fd = -1;
	}
	return st;
}

static void file_name(const char *job, char *out, size_t len)
{
	char j[64];

	rdv_job_name(job, j, sizeof(j));
	snprintf(out, len, "join-%s", j);
}

hvd_status_t rdv_write(const char *dir, const struct rdv_info *in)
{
	char name[96], tmp[128], *text;
	size_t n, done = 0;
	int dfd, fd;
	hvd_status_t st;

	text = malloc(RDV_FILE_MAX);
	if (!text)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	st = rdv_format(in, text, RDV_FILE_MAX, &n);
	if (st == HVD_OK)
		st = open_dir(dir, 1, &dfd);
	if (st != HVD_OK) {
		free(text);
		return st;
	}
	file_name(in->job, name, sizeof(name));
	snprintf(tmp, sizeof(tmp), ".%s.%ld", name, (long)getpid());
	unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600);
	if (fd < 0) {
		st = hvd_error(HVD_ERR_IO, "hvd: elastic: cannot create %s/%s: %s",
			       dir, tmp, strerror(errno));
		goto out;
	}
	while (done < n) {
		ssize_t w = write(fd, text + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			st = hvd_error(HVD_ERR_IO,
				       "hvd: elastic: writing %s/%s: %s", dir,
				       tmp, strerror(errno));
			break;
		}
		done += (size_t)w;
	}
	if (st == HVD_OK && fsync(fd) != 0)
		st = hvd_error(HVD_ERR_IO, "hvd: elastic: fsync %s/%s: %s", dir,
			       tmp, strerror(errno));
	close(fd);
	if (st == HVD_OK && renameat(dfd, tmp, dfd, name) != 0)
		st = hvd_error(HVD_ERR_IO,
			       "hvd: elastic: cannot rename %s/%s to %s: %s",
			       dir, tmp, name, strerror(errno));
	if (st != HVD_OK)
		unlinkat(dfd, tmp, 0);
out:
	close(dfd);
	free(text);
	return st;
}

hvd_status_t rdv_read(const char *dir, const char *job, struct rdv_info *out,
		      int *missing)
{
	char name[96], path[4200], *text = NULL;
	ssize_t got = 0;
	int dfd, fd;
	hvd_status_t st;

	*missing = 0;
	memset(out, 0, sizeof(*out));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 && errno == ENOENT) {
		*missing = 1;
		return hvd_error(HVD_ERR_IO, "hvd: elastic: no directory %s",
				 dir);
	}
	if (dfd >= 0)
		close(dfd);
	HVD_CHECK(open_dir(dir, 0, &dfd));
	file_name(job, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0) {
		*missing = errno == ENOENT;
		return hvd_error(HVD_ERR_IO, "hvd: elastic: cannot open %s: %s",
				 path, strerror(errno));
	}
	st = private_fd(fd, 0, path);
	if (st == HVD_OK) {
		text = malloc(RDV_FILE_MAX);
		if (!text)
			st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	while (st == HVD_OK) {
		ssize_t r = read(fd, text + got, (size_t)(RDV_FILE_MAX - got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			st = hvd_error(HVD_ERR_IO, "hvd: elastic: reading %s: %s",
				       path, strerror(errno));
		if (r <= 0)
			break;
		got += r;
		if (got == RDV_FILE_MAX)
			st = hvd_error(HVD_ERR_CORRUPT,
				       "hvd: elastic: %s is larger than a "
				       "rendezvous file can be",
				       path);
	}
	close(fd);
	if (st == HVD_OK)
		st = rdv_parse(text, (size_t)got, out);
	if (st == HVD_OK && strcmp(out->job, job[0] ? job : "local") != 0) {
		st = hvd_error(HVD_ERR_CORRUPT,
			       "hvd: elastic: %s is for job %s, not %s", path,
			       out->job, job);
		rdv_info_free(out);
	}
	free(text);
	return st;
}

void rdv_remove(const char *dir, const char *job, const char *step)
{
	struct rdv_info r;
	char name[96];
	int missing, dfd;

	if (rdv_read(dir, job, &r, &missing) != HVD_OK)
		return;
	if (strcmp(r.step, step) == 0 &&
	    open_dir(dir, 0, &dfd) == HVD_OK) {
		file_name(job, name, sizeof(name));
		unlinkat(dfd, name, 0);
		close(dfd);
	}
	rdv_info_free(&r);
}

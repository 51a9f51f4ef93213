/*
 * timeline.c - the Chrome trace ("Trace Event Format") writer.
 *
 * Horovod's layout: every tensor is a trace "process" (pid from 1, in
 * order of first sight, named by a process_name metadata event) and its
 * life is a stack of B/E spans: NEGOTIATE_<OP>, then <OP> with activities
 * (MEMCPY_IN_FUSION_BUFFER, UCX_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER, ...)
 * nested inside.  Timestamps are microseconds since the timeline started.
 *
 * Crash safety: the file is a JSON array written one event per line, each
 * line after the first starting with ',' - so the file is always a valid
 * array prefix, and appending "]" to whatever complete lines a crash left
 * makes it valid JSON (doc/timeline.md).  A normal close writes the "]".
 * Events are buffered by the engine thread during a cycle and written with
 * one write(2) per cycle, so there is no writer thread and no lock.
 */
#include "config.h"

#include "engine/timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static void emit(struct timeline *t, const char *fmt, ...) HVD_PRINTF(2, 3);

static void emit(struct timeline *t, const char *fmt, ...)
{
	struct wbuf *w = &t->buf;
	char line[1024];
	size_t need;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	need = w->len + (size_t)n + 2;
	if (need > w->cap) {
		size_t cap = w->cap ? w->cap : 65536;
		uint8_t *d;

		while (cap < need)
			cap *= 2;
		d = realloc(w->data, cap);
		if (!d)
			return;
		w->data = d;
		w->cap = cap;
	}
	/* ',' leads every line but the first: the file is always a valid
	 * array prefix. */
	if (!t->first_event)
		w->data[w->len++] = ',';
	t->first_event = 0;
	memcpy(w->data + w->len, line, (size_t)n);
	w->len += (size_t)n;
	w->data[w->len++] = '\n';
	if (w->len >= (1u << 20))
		timeline_flush(t);
}

static long long now_us(const struct timeline *t)
{
	return (long long)((hvd_now() - t->t0) * 1e6);
}

/* JSON string body: escape quotes, backslashes and control bytes. */
static void json_escape(char *dst, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s && o + 7 < len; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			dst[o++] = '\\';
			dst[o++] = (char)ch;
		} else if (ch < 0x20) {
			o += (size_t)snprintf(dst + o, len - o, "\\u%04x", ch);
		} else {
			dst[o++] = (char)ch;
		}
	}
	dst[o] = '\0';
}

/* The timeline's path is often in a shared directory (/var/tmp), where
 * another user can plant something at it first: a symbolic link to one of
 * our files (or, when we run as root, anyone's), a hard link, a FIFO that
 * would block the open, a file of their own that they can read.  So the
 * file is created 0600 without following a link (O_NOFOLLOW), and a file
 * that is already there (the same HOROVOD_TIMELINE run after run, as in
 * Horovod) is only truncated once it is known to be a regular file of our
 * own with no other name; it is then made 0600 too.  O_NONBLOCK makes a
 * FIFO fail to open (or open and be refused) instead of waiting for a
 * reader. */
static int open_private(const char *path)
{
	struct stat st;
	int fd =
	    open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		 0600);

	if (fd < 0) {
		int err = errno;

		/* (some kernels refuse a link in a sticky directory with
		 * EACCES before O_NOFOLLOW's ELOOP) */
		if (err == ELOOP ||
		    (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)))
			hvd_error(HVD_ERR_IO,
				  "hvd: the timeline file %s is a symbolic "
				  "link, and libhvd does not write through "
				  "links: remove it or set HOROVOD_TIMELINE to "
				  "another path",
				  path);
		else if (err == ENXIO)
			hvd_error(HVD_ERR_IO,
				  "hvd: the timeline file %s is not a regular "
				  "file (a FIFO): remove it or set "
				  "HOROVOD_TIMELINE to another path",
				  path);
		else
			hvd_error(HVD_ERR_IO,
				  "hvd: cannot open the timeline file %s: %s "
				  "(check HOROVOD_TIMELINE)",
				  path, strerror(err));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		hvd_error(HVD_ERR_IO,
			  "hvd: cannot stat the timeline file %s: %s", path,
			  strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		hvd_error(HVD_ERR_IO,
			  "hvd: the timeline file %s is not a regular file: "
			  "remove it or set HOROVOD_TIMELINE to another path",
			  path);
	} else if (st.st_uid != geteuid()) {
		hvd_error(HVD_ERR_IO,
			  "hvd: the timeline file %s belongs to uid %u, not to "
			  "this user (uid %u), who would overwrite it: remove "
			  "it or set HOROVOD_TIMELINE to another path",
			  path, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if (st.st_nlink != 1) {
		hvd_error(HVD_ERR_IO,
			  "hvd: the timeline file %s has another name (%lu "
			  "hard links), which would be overwritten too: remove "
			  "it or set HOROVOD_TIMELINE to another path",
			  path, (unsigned long)st.st_nlink);
	} else if (ftruncate(fd, 0) != 0 ||
		   ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0) ||
		   fcntl(fd, F_SETFL, 0) != 0) {
		hvd_error(HVD_ERR_IO,
			  "hvd: cannot prepare the timeline file "
			  "%s: %s",
			  path, strerror(errno));
	} else {
		return fd;
	}
	close(fd);
	return -1;
}

hvd_status_t timeline_open(struct timeline *t, const char *path,
			   int mark_cycles)
{
	struct timeval tv;

	memset(t, 0, sizeof(*t));
	t->fd = open_private(path);
	if (t->fd < 0)
		return HVD_ERR_IO;
	namemap_init(&t->pids);
	t->mark_cycles = mark_cycles;
	t->t0 = hvd_now();
	t->first_event = 1;
	gettimeofday(&tv, NULL);
	if (write(t->fd, "[\n", 2) != 2) {
		close(t->fd);
		t->fd = -1;
		return hvd_error(HVD_ERR_IO, "hvd: cannot write %s: %s", path,
				 strerror(errno));
	}
	emit(t,
	     "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, "
	     "\"args\": {\"start_time_since_epoch_in_micros\": %lld}}",
	     (long long)tv.tv_sec * 1000000LL + tv.tv_usec);
	emit(t, "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": 0, "
		"\"args\": {\"sort_index\": 0}}");
	timeline_flush(t);
	return HVD_OK;
}

int timeline_active(const struct timeline *t)
{
	return t->t0 > 0 && t->fd >= 0;
}

static int pid_of(struct timeline *t, const char *tensor)
{
	intptr_t pid = (intptr_t)namemap_get(&t->pids, tensor);
	char esc[512];
	char *key;

	if (pid)
		return (int)pid;
	if (t->nnames == t->capnames) {
		int cap = t->capnames ? t->capnames * 2 : 64;
		char **v = realloc(t->names, (size_t)cap * sizeof(*v));

		if (!v)
			return 0;
		t->names = v;
		t->capnames = cap;
	}
	key = strdup(tensor);
	if (!key)
		return 0;
	t->names[t->nnames++] = key;
	pid = t->nnames;
	namemap_put(&t->pids, key, (void *)pid);
	json_escape(esc, sizeof(esc), tensor);
	emit(t,
	     "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
	     "\"args\": {\"name\": \"%s\"}}",
	     (int)pid, esc);
	emit(t,
	     "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, "
	     "\"args\": {\"sort_index\": %d}}",
	     (int)pid, (int)pid);
	return (int)pid;
}

void timeline_begin(struct timeline *t, const char *tensor, const char *what)
{
	int pid;

	if (!timeline_active(t))
		return;
	pid = pid_of(t, tensor);
	emit(t, "{\"ph\": \"B\", \"name\": \"%s\", \"ts\": %lld, \"pid\": %d}",
	     what, now_us(t), pid);
}

void timeline_end(struct timeline *t, const char *tensor, const char *dtype,
		  uint64_t count)
{
	int pid;

	if (!timeline_active(t))
		return;
	pid = pid_of(t, tensor);
	if (dtype)
		emit(t,
		     "{\"ph\": \"E\", \"ts\": %lld, \"pid\": %d, \"args\": "
		     "{\"dtype\": \"%s\", \"shape\": \"[%llu]\"}}",
		     now_us(t), pid, dtype, (unsigned long long)count);
	else
		emit(t, "{\"ph\": \"E\", \"ts\": %lld, \"pid\": %d}", now_us(t),
		     pid);
}

void timeline_instant(struct timeline *t, const char *tensor, const char *what)
{
	if (!timeline_active(t))
		return;
	emit(t,
	     "{\"ph\": \"X\", \"name\": \"%s\", \"ts\": %lld, \"pid\": %d, "
	     "\"dur\": 0}",
	     what, now_us(t), pid_of(t, tensor));
}

void timeline_mark_cycle(struct timeline *t)
{
	if (!timeline_active(t) || !t->mark_cycles)
		return;
	emit(t,
	     "{\"ph\": \"i\", \"name\": \"CYCLE_START\", \"ts\": %lld, "
	     "\"s\": \"g\"}",
	     now_us(t));
}

void timeline_flush(struct timeline *t)
{
	size_t off = 0;

	if (t->fd < 0 || !t->buf.len)
		return;
	while (off < t->buf.len) {
		ssize_t n = write(t->fd, t->buf.data + off, t->buf.len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			hvd_log(HVD_LOG_WARNING,
				"timeline write failed: %s; timeline stopped",
				strerror(errno));
			close(t->fd);
			t->fd = -1;
			t->t0 = 0;
			break;
		}
		off += (size_t)n;
	}
	t->buf.len = 0;
}

void timeline_close(struct timeline *t)
{
	if (t->fd >= 0 && t->t0 > 0) {
		timeline_flush(t);
		if (t->fd >= 0 && write(t->fd, "]\n", 2) != 2)
			hvd_log(HVD_LOG_WARNING, "timeline: cannot close: %s",
				strerror(errno));
	}
	if (t->fd >= 0)
		close(t->fd);
	for (int i = 0; i < t->nnames; i++)
		free(t->names[i]);
	free(t->names);
	namemap_free(&t->pids);
	wbuf_free(&t->buf);
	memset(t, 0, sizeof(*t));
	t->fd = -1;
}

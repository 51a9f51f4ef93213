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

#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

hvd_status_t timeline_open(struct timeline *t, const char *path,
			   int mark_cycles)
{
	struct timeval tv;

	memset(t, 0, sizeof(*t));
	t->fd = -1;
	t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (t->fd < 0)
		return hvd_error(HVD_ERR_IO,
				 "hvd: cannot open the timeline file %s: %s "
				 "(check HOROVOD_TIMELINE)",
				 path, strerror(errno));
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

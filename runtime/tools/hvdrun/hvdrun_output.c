/*
 * hvdrun_output.c - forward the ranks' output a whole line at a time.
 *
 * Each stream of each rank has its own buffer.  Only complete lines leave
 * it, each written with one writev() together with its "[rank] " prefix, so
 * lines of different ranks never interleave, whatever the ranks' own
 * buffering.  A line longer than HVDRUN_LINE_MAX is written in pieces (each
 * piece prefixed) rather than held without bound.  At end of stream a last
 * unterminated line is written; with a prefix it gets a newline so the next
 * prefix starts a line.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tools/hvdrun/hvdrun.h"

/* Write all of iov[] (blocking); a closed reader makes the sink broken. */
static int write_all(struct hvdrun_sink *sink, struct iovec *iov, int n)
{
	while (n > 0 && !sink->broken) {
		ssize_t w = writev(sink->fd, iov, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				/* Our stdout was left non-blocking by whoever
				 * started us: wait instead of spinning. */
				struct pollfd p = {sink->fd, POLLOUT, 0};

				poll(&p, 1, -1);
				continue;
			}
			/* Nobody reads our output any more (EPIPE) or it
			 * cannot be written: keep running the job. */
			sink->broken = 1;
			return -1;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return sink->broken ? -1 : 0;
}

static int emit(struct hvdrun_sink *sink, const char *prefix, const char *p,
		size_t n, int add_newline)
{
	struct iovec iov[3];
	int k = 0;

	if (prefix && *prefix) {
		iov[k].iov_base = (void *)prefix;
		iov[k++].iov_len = strlen(prefix);
	}
	iov[k].iov_base = (void *)p;
	iov[k++].iov_len = n;
	if (add_newline) {
		iov[k].iov_base = (void *)"\n";
		iov[k++].iov_len = 1;
	}
	return write_all(sink, iov, k);
}

int hvdrun_linebuf_feed(struct hvdrun_linebuf *lb, const char *data, size_t n,
			struct hvdrun_sink *sink, const char *prefix)
{
	const char *p = data, *end = data + n;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (nl && lb->len == 0) {
			/* Common case: a whole line straight from data. */
			emit(sink, prefix, p, (size_t)(nl - p + 1), 0);
			p = nl + 1;
			continue;
		}
		size_t take = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);

		if (lb->len + take > lb->cap) {
			size_t cap = lb->cap ? lb->cap : 4096;
			char *b;

			while (cap < lb->len + take)
				cap *= 2;
			b = realloc(lb->buf, cap);
			if (!b)
				return -1;
			lb->buf = b;
			lb->cap = cap;
		}
		memcpy(lb->buf + lb->len, p, take);
		lb->len += take;
		p += take;
		if (nl) {
			emit(sink, prefix, lb->buf, lb->len, 0);
			lb->len = 0;
		} else if (lb->len >= HVDRUN_LINE_MAX) {
			emit(sink, prefix, lb->buf, lb->len, prefix && *prefix);
			lb->len = 0;
		}
	}
	return 0;
}

int hvdrun_linebuf_flush(struct hvdrun_linebuf *lb, struct hvdrun_sink *sink,
			 const char *prefix)
{
	int rc = 0;

	if (lb->len)
		rc = emit(sink, prefix, lb->buf, lb->len, prefix && *prefix);
	lb->len = 0;
	return rc;
}

void hvdrun_linebuf_free(struct hvdrun_linebuf *lb)
{
	free(lb->buf);
	lb->buf = NULL;
	lb->len = lb->cap = 0;
}

/*
 * The engine's timeline writer (engine/timeline.c) without processes: the
 * file format (an open JSON array of complete lines while running, closed
 * by "]"), escaping, event names, and the errors of an unusable path.
 */
#include "engine/timeline.h"
#include "hvd.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_timeline(void)
{
	char path[] = "/var/tmp/test_engine_tl.XXXXXX";
	struct timeline t;
	char buf[8192];
	FILE *f;
	size_t n;
	int fd = mkstemp(path);

	close(fd);
	ok(timeline_open(&t, path, 1) == HVD_OK, "timeline: opens");
	timeline_mark_cycle(&t);
	timeline_begin(&t, "g\"1", "NEGOTIATE_ALLREDUCE");
	timeline_instant(&t, "g\"1", "0");
	timeline_end(&t, "g\"1", NULL, 0);
	timeline_begin(&t, "g\"1", "ALLREDUCE");
	timeline_end(&t, "g\"1", "float32", 7);
	timeline_flush(&t);
	f = fopen(path, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	ok(n > 3 && buf[0] == '[' && buf[n - 1] == '\n' && buf[n - 2] == '}',
	   "timeline: an open array of complete lines while running");
	ok(strstr(buf, "\"name\": \"g\\\"1\"") != NULL,
	   "timeline: tensor names are JSON-escaped");
	ok(strstr(buf, "CYCLE_START") && strstr(buf, "NEGOTIATE_ALLREDUCE") &&
	       strstr(buf, "\"shape\": \"[7]\""),
	   "timeline: cycle marks, negotiation and shapes");
	timeline_close(&t);
	f = fopen(path, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	ok(n > 2 && strcmp(buf + n - 2, "]\n") == 0, "timeline: closed with ]");
	unlink(path);
	ok(timeline_open(&t, "/nonexistent/dir/tl.json", 0) == HVD_ERR_IO &&
	       strstr(hvd_last_error(), "/nonexistent/dir/tl.json"),
	   "timeline: unwritable path names the file: %s", hvd_last_error());
}

int main(void)
{
	test_timeline();
	return done_testing();
}

/*
 * The engine's timeline writer (engine/timeline.c) without processes: the
 * file format (an open JSON array of complete lines while running, closed
 * by "]"), escaping, event names, the errors of an unusable path, and what
 * another user can plant at the path in a shared directory (issue 16): the
 * file is created 0600, never through a link, and only a regular file of
 * our own with no other name is overwritten.
 */
#include "engine/timeline.h"
#include "hvd.h"
#include "tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* ------------------------------------------------ hostile neighbours */

#define NOBODY 65534

static char dir[] = "/var/tmp/test_timeline.XXXXXX";
static char victim[256], trap_path[256];

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

/* The file's first bytes, "" when it cannot be read. */
static const char *contents(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

static int file_is(const char *path, const char *text)
{
	return strcmp(contents(path), text) == 0;
}

/* Runs fn(arg) as another user, as the attack would be: as nobody when
 * this test runs as root, else as ourselves (the checks are the same). */
static int as_neighbour(void (*fn)(const char *), const char *arg)
{
	pid_t pid = fork();
	int status = -1;

	if (pid == 0) {
		if (geteuid() == 0 &&
		    (setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
			_exit(2);
		fn(arg);
		_exit(0);
	}
	return pid > 0 && waitpid(pid, &status, 0) == pid &&
	       WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void plant_link(const char *target)
{
	if (symlink(target, trap_path) != 0)
		_exit(3);
}

static void plant_fifo(const char *unused)
{
	(void)unused;
	if (mkfifo(trap_path, 0666) != 0)
		_exit(3);
}

/* Opens the timeline at trap_path: 1 when it was refused with an
 * HVD_ERR_IO that names the path and contains why. */
static int refused(const char *why)
{
	struct timeline t;
	hvd_status_t st = timeline_open(&t, trap_path, 0);

	if (st == HVD_OK) {
		timeline_close(&t);
		return 0;
	}
	return st == HVD_ERR_IO && strstr(hvd_last_error(), trap_path) &&
	       strstr(hvd_last_error(), why);
}

static void test_hostile(void)
{
	struct timeline t;
	struct stat st;
	hvd_status_t s;

	if (!mkdtemp(dir)) {
		skip(8, "cannot make a directory in /var/tmp");
		return;
	}
	chmod(dir, 01777); /* a shared, sticky directory, as /var/tmp */
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(trap_path, sizeof(trap_path), "%s/timeline.json", dir);
	umask(022);

	s = timeline_open(&t, trap_path, 0);
	ok(s == HVD_OK && stat(trap_path, &st) == 0 &&
	       (st.st_mode & 0777) == 0600,
	   "a new timeline file is 0600 (umask 022)");
	if (s == HVD_OK)
		timeline_close(&t);
	chmod(trap_path, 0644);
	put_file(trap_path, "old contents, longer than the new ones\n");
	s = timeline_open(&t, trap_path, 0);
	if (s == HVD_OK)
		timeline_close(&t);
	ok(s == HVD_OK && stat(trap_path, &st) == 0 &&
	       (st.st_mode & 0777) == 0600 &&
	       strncmp(contents(trap_path), "[\n", 2) == 0 &&
	       !strstr(contents(trap_path), "old contents"),
	   "our own 0644 file from an earlier run: overwritten, now 0600");
	unlink(trap_path);

	put_file(victim, "precious\n");
	if (!as_neighbour(plant_link, victim))
		skip(1, "cannot make a symbolic link here");
	else
		ok(refused("symbolic link") && file_is(victim, "precious\n"),
		   "a symbolic link planted at the path is refused, its "
		   "target untouched: %s",
		   hvd_last_error());
	unlink(trap_path);
	unlink(victim);
	if (!as_neighbour(plant_link, victim))
		skip(1, "cannot make a symbolic link here");
	else
		ok(refused("symbolic link") && access(victim, F_OK) != 0,
		   "a dangling link is refused and creates nothing");
	unlink(trap_path);

	put_file(victim, "precious\n");
	if (link(victim, trap_path) == 0)
		ok(refused("hard links") && file_is(victim, "precious\n"),
		   "a file with another name (hard link) is refused: %s",
		   hvd_last_error());
	else
		skip(1, "cannot make a hard link here");
	unlink(trap_path);
	unlink(victim);

	if (!as_neighbour(plant_fifo, NULL)) {
		skip(1, "cannot make a FIFO here");
	} else {
		alarm(20); /* before the fix, opening a FIFO blocked for ever */
		ok(refused("not a regular file"),
		   "a FIFO is refused at once, not waited on: %s",
		   hvd_last_error());
		alarm(0);
	}
	unlink(trap_path);

	if (geteuid() == 0) {
		put_file(trap_path, "nobody's\n");
		if (chown(trap_path, NOBODY, NOBODY) != 0)
			skip(1, "cannot chown to nobody");
		else
			ok(refused("belongs to uid") &&
			       file_is(trap_path, "nobody's\n"),
			   "another user's file is refused, not truncated: "
			   "%s",
			   hvd_last_error());
		unlink(trap_path);
	} else {
		skip(1, "not root: cannot make a file of another user");
	}
	ok(rmdir(dir) == 0, "nothing left behind");
}

int main(void)
{
	test_timeline();
	test_hostile();
	return done_testing();
}

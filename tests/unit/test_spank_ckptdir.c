/*
 * The checkpoint directory the plugin creates (spank/core/ckptdir.c),
 * against a hostile neighbour: user nobody prepares the shared directory
 * (a world-writable or foreign parent, a directory made for the victim
 * beforehand, a symbolic link), then user daemon, the victim, asks for its
 * checkpoint directory there.  Each attack must be refused with a message
 * naming the directory, and leave nothing of the victim's behind it; the
 * ordinary cases must create exactly 0700 directories owned by the victim.
 * Needs root (to act as the two users); the tree lives in /var/tmp.
 */
#include "config.h"

#include "core/ckptdir.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char base[256];
static uid_t nobody, victim;
static gid_t nobody_g, victim_g;

/* Run fn(arg) as uid/gid in a child; its status and message come back. */
static int as_user(uid_t uid, gid_t gid, int (*fn)(const char *, char *),
		   const char *arg, char *msg, size_t len)
{
	int fds[2], st = 0;
	pid_t pid;
	ssize_t n;
	char buf[1024];

	if (pipe(fds))
		return -99;
	pid = fork();
	if (pid == 0) {
		char m[900] = "";
		int rc;

		close(fds[0]);
		if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
			_exit(98);
		rc = fn(arg, m);
		n = snprintf(buf, sizeof(buf), "%d %s", rc, m);
		if (write(fds[1], buf, (size_t)n) != n)
			_exit(97);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	waitpid(pid, &st, 0);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -99;
	buf[n] = '\0';
	snprintf(msg, len, "%s", strchr(buf, ' ') ? strchr(buf, ' ') + 1 : "");
	return atoi(buf);
}

static int do_make(const char *path, char *m)
{
	return ckptdir_make(path, getuid(), m, 900);
}

static int do_make_umask0(const char *path, char *m)
{
	umask(0);
	return ckptdir_make(path, getuid(), m, 900);
}

/* "mkdir DIR MODE" / "link TARGET NAME" / "file NAME" as the caller. */
static int do_prep(const char *cmd, char *m)
{
	char a[512], b[512];
	unsigned mode;

	if (sscanf(cmd, "mkdir %511s %o", a, &mode) == 2)
		return mkdir(a, 0700) || chmod(a, mode) ? -1 : 0;
	if (sscanf(cmd, "link %511s %511s", a, b) == 2)
		return symlink(a, b);
	if (sscanf(cmd, "file %511s", a) == 1) {
		int fd = open(a, O_CREAT | O_WRONLY | O_EXCL, 0600);

		return fd < 0 ? -1 : close(fd);
	}
	snprintf(m, 900, "bad prep %s", cmd);
	return -1;
}

static void prep(uid_t uid, gid_t gid, const char *fmt, const char *a,
		 const char *b)
{
	char cmd[1100], msg[900];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	if (as_user(uid, gid, do_prep, cmd, msg, sizeof(msg)))
		diag("setup failed: %s (%s)", cmd, msg);
}

/* The victim asks for base/rel: status and message. */
static int victim_make(const char *rel, char *msg, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	return as_user(victim, victim_g, do_make, path, msg, len);
}

static int entries(const char *rel)
{
	char path[512];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static int mode_owner(const char *rel, unsigned *mode, uid_t *uid)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", base, rel);
	if (lstat(path, &st))
		return -1;
	*mode = st.st_mode & 07777;
	*uid = st.st_uid;
	return 0;
}

static void attacks(void)
{
	char msg[900], d[512], t[512];

	/* 1. The documented /var/tmp/hvd-ckpt/%u, made by someone else
	 *    first and opened to everyone. */
	snprintf(d, sizeof(d), "%s/shared/hvd-ckpt", base);
	prep(nobody, nobody_g, "mkdir %s 0777", d, NULL);
	ok(victim_make("shared/hvd-ckpt/daemon/7", msg, sizeof(msg)) == -1,
	   "nobody's world-writable hvd-ckpt: refused");
	ok(strstr(msg, "shared/hvd-ckpt belongs to user nobody") != NULL,
	   "... naming the directory and its owner: %s", msg);
	is_int(entries("shared/hvd-ckpt"), 0, "... and nothing created in it");

	/* 2. The victim's own directory, made beforehand by nobody, 0777,
	 *    in a directory the victim owns. */
	prep(victim, victim_g, "mkdir %s/shared/mine 0700", base, NULL);
	snprintf(d, sizeof(d), "%s/shared/mine", base);
	if (chmod(d, 0733))
		diag("chmod: %s", strerror(errno));
	prep(nobody, nobody_g, "mkdir %s/shared/mine/ckpt 0777", base, NULL);
	if (chmod(d, 0700))
		diag("chmod: %s", strerror(errno));
	ok(victim_make("shared/mine/ckpt", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "shared/mine/ckpt already exists and belongs "
			   "to user nobody") &&
	       strstr(msg, "not to you"),
	   "a checkpoint directory made by nobody: refused: %s", msg);

	/* 3. A symbolic link planted on the path. */
	snprintf(t, sizeof(t), "%s/target", base);
	if (mkdir(t, 0755))
		diag("mkdir %s: %s", t, strerror(errno));
	snprintf(d, sizeof(d), "%s/shared/link", base);
	prep(nobody, nobody_g, "link %s %s", t, d);
	ok(victim_make("shared/link/ckpt", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "shared/link is a symbolic link"),
	   "a planted symbolic link: refused: %s", msg);
	is_int(entries("target"), 0, "... nothing created where it points");
	ok(as_user(0, 0, do_make, t, msg, sizeof(msg)) == 0,
	   "the link's target itself is fine for root");
	snprintf(d, sizeof(d), "%s/shared/link", base);
	ok(as_user(0, 0, do_make, d, msg, sizeof(msg)) == -1,
	   "a link as the last component is refused too, even for root: %s",
	   msg);

	/* 4. A directory of nobody's that only nobody can write. */
	prep(nobody, nobody_g, "mkdir %s/shared/nb 0755", base, NULL);
	ok(victim_make("shared/nb/victim", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "shared/nb belongs to user nobody"),
	   "below another user's directory: refused: %s", msg);

	/* 5. Group- and world-writable directories of the victim's own. */
	prep(victim, victim_g, "mkdir %s/shared/open 0777", base, NULL);
	ok(victim_make("shared/open", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "writable by everyone (mode 0777)") &&
	       strstr(msg, "chmod 700"),
	   "the victim's own 0777 directory: refused, says chmod 700: %s", msg);
	prep(victim, victim_g, "mkdir %s/shared/grp 0770", base, NULL);
	ok(victim_make("shared/grp/x", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "writable by its group") &&
	       strstr(msg, "chmod go-w"),
	   "below the victim's group-writable directory: refused: %s", msg);

	/* 6. Something that is not a directory. */
	prep(victim, victim_g, "file %s/shared/file", base, NULL);
	ok(victim_make("shared/file", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "not a directory"),
	   "a file: refused: %s", msg);
	ok(victim_make("shared/file/x", msg, sizeof(msg)) == -1 &&
	       strstr(msg, "not a directory"),
	   "below a file: refused: %s", msg);

	/* Root's own jobs are refused there too: nobody owns hvd-ckpt. */
	snprintf(d, sizeof(d), "%s/shared/hvd-ckpt/root", base);
	ok(as_user(0, 0, do_make, d, msg, sizeof(msg)) == -1,
	   "root asking below nobody's directory: refused");
}

static void ordinary(void)
{
	char msg[900], path[512];
	unsigned mode = 0;
	uid_t uid = 0;

	int rc;

	rc = victim_make("shared/daemon/ckpt/17", msg, sizeof(msg));
	ok(rc == 0, "a new directory in a sticky root directory: created%s%s",
	   msg[0] ? ": " : "", msg);
	rc = mode_owner("shared/daemon", &mode, &uid);
	ok(rc == 0 && mode == 0700 && uid == victim,
	   "parents created 0700, owned by the user (%o, uid %u)", mode,
	   (unsigned)uid);
	rc = mode_owner("shared/daemon/ckpt/17", &mode, &uid);
	ok(rc == 0 && mode == 0700 && uid == victim,
	   "the directory 0700, owned by the user (%o, uid %u)", mode,
	   (unsigned)uid);
	ok(victim_make("shared/daemon/ckpt/17", msg, sizeof(msg)) == 0,
	   "the same again: it exists, still fine");
	snprintf(path, sizeof(path), "%s/shared/daemon-um/a", base);
	rc = as_user(victim, victim_g, do_make_umask0, path, msg, sizeof(msg));
	if (rc == 0)
		rc = mode_owner("shared/daemon-um/a", &mode, &uid);
	ok(rc == 0 && mode == 0700, "with umask 0 still 0700 (%o)", mode);
	/* A shared parent of everyone's directories (/var/tmp/hvd-ckpt):
	 * a user would lock the others out, so only root makes it, as /tmp. */
	ok(victim_make("shared/hvd-ckpt2/daemon/1", msg, sizeof(msg)) == -1 &&
		   strstr(msg, "ask your admin") &&
		   entries("shared") >= 0 && mode_owner("shared/hvd-ckpt2",
							&mode, &uid) < 0,
	   "a user's job does not create a shared parent in a directory "
	   "everyone can write: %s",
	   msg);
	snprintf(path, sizeof(path), "%s/shared/hvd-ckpt3/root/1", base);
	rc = as_user(0, 0, do_make, path, msg, sizeof(msg));
	if (rc == 0)
		rc = mode_owner("shared/hvd-ckpt3", &mode, &uid);
	ok(rc == 0 && mode == 01777 && uid == 0,
	   "root's job creates it root's, mode 1777 (%o, uid %u)", mode,
	   (unsigned)uid);
	ok(victim_make("shared/hvd-ckpt3/daemon/1", msg, sizeof(msg)) == 0,
	   "... where the next user's job then makes its own%s%s",
	   msg[0] ? ": " : "", msg);
	ok(as_user(victim, victim_g, do_make, "relative/x", msg, sizeof(msg)) ==
		   -1 &&
	       strstr(msg, "not an absolute"),
	   "a relative path is refused: %s", msg);
	snprintf(path, sizeof(path), "%s/shared/../x", base);
	ok(as_user(victim, victim_g, do_make, path, msg, sizeof(msg)) == -1,
	   "a path with '..' is refused: %s", msg);
}

int main(void)
{
	struct passwd *pw;
	char cmd[600], shared[300];

	if (geteuid() != 0)
		skip_all("needs root to act as users nobody and daemon");
	pw = getpwnam("nobody");
	if (!pw)
		skip_all("no user nobody");
	nobody = pw->pw_uid;
	nobody_g = pw->pw_gid;
	pw = getpwnam("daemon");
	if (!pw)
		skip_all("no user daemon");
	victim = pw->pw_uid;
	victim_g = pw->pw_gid;
	snprintf(base, sizeof(base), "/var/tmp/hvd-ckptdir.XXXXXX");
	if (!mkdtemp(base) || chmod(base, 0755))
		skip_all("cannot make a directory in /var/tmp");
	/* Like /var/tmp: root's, writable by all, sticky. */
	snprintf(shared, sizeof(shared), "%s/shared", base);
	if (mkdir(shared, 0700) || chmod(shared, 01777))
		skip_all("cannot make %s", shared);
	attacks();
	ordinary();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		diag("could not remove %s", base);
	return done_testing();
}

/*
 * test_shm_segment.c - a shared-memory segment (runtime/coll/shm) someone
 * else made: the members' checks of a segment's file and header
 * (shm_segment_check) against crafted headers, modes, sizes and owners,
 * and, as root, another user (nobody) pre-creating the name a victim's
 * group used to get, with a header whose layout goes past the file (the
 * members used to map it and crash).
 *
 * The collectives themselves are test_shm.c.
 */
#include "config.h"

#include "comm/comm.h"
#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"
#include "shm_members.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every header the creator makes passes the members' check: the two
 * bounds agree, for knob values far outside the usual ones too. */
static void check_params_accepted(void)
{
	static const int ns[] = {1, 2, 3, 7, 64, 1000};
	static const long nbufs[] = {-1, 0, 2, 4, 64, 1000};
	static const size_t chunks[] = {0, 1, 4096, 1 << 20, (size_t)1 << 40,
					SIZE_MAX};
	static const size_t smalls[] = {0, 1, 32 << 10, (size_t)1 << 40};
	int bad = 0, total = 0;
	char why[200];

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (size_t b = 0; b < sizeof(nbufs) / sizeof(nbufs[0]); b++)
			for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]);
			     c++)
				for (size_t d = 0;
				     d < sizeof(smalls) / sizeof(smalls[0]);
				     d++) {
					struct shm_header h;

					shm_params(ns[a], nbufs[b], chunks[c],
						   smalls[d], &h);
					h.magic = SHM_MAGIC;
					total++;
					if (shm_header_check(&h, ns[a], why,
							     sizeof(why))) {
						if (!bad++)
							diag("n %d nbuf %ld chunk "
							     "%zu small %zu: %s",
							     ns[a], nbufs[b],
							     chunks[c],
							     smalls[d], why);
					}
				}
	ok(bad == 0, "every header the creator makes passes the check (%d of "
		     "%d refused)", bad, total);
}

/* Headers another user could write: each one is refused. */
static const char *const crafted[] = {
    "no magic",
    "another member count",
    "member count 0",
    "1 pipeline buffer",
    "65 pipeline buffers",
    "2^32-1 pipeline buffers",
    "chunk 0",
    "chunk not a multiple of 64 n",
    "chunk 1 GiB (pipeline past the segment limit)",
    "chunk 2^63 (sizes overflow)",
    "small 16 MiB + 64",
    "small not a multiple of 64",
    "small 2^62 (sizes overflow)",
    "size one byte short",
    "size 8 KiB (the layout goes past it)",
    "size 2^63",
};

static void craft(struct shm_header *x, int i)
{
	switch (i) {
	case 0: x->magic = 0; break;
	case 1: x->n = 3; break;
	case 2: x->n = 0; break;
	case 3: x->nbuf = 1; break;
	case 4: x->nbuf = 65; break;
	case 5: x->nbuf = UINT32_MAX; break;
	case 6: x->chunk = 0; break;
	case 7: x->chunk += 64; break;
	case 8: x->chunk = 1ull << 30; break;
	case 9: x->chunk = 1ull << 63; break;
	case 10: x->small_max = (16u << 20) + 64; break;
	case 11: x->small_max = 1000; break;
	case 12: x->small_max = 1ull << 62; break;
	case 13: x->size -= 1; break;
	case 14: x->size = 8192; break;
	default: x->size = 1ull << 63; break;
	}
}

static void check_crafted_headers(void)
{
	const int ncases = (int)(sizeof(crafted) / sizeof(crafted[0]));
	struct shm_header good, h;
	char why[200];
	int refused = 0;

	shm_params(2, 4, 1 << 20, 32 << 10, &good);
	good.magic = SHM_MAGIC;
	ok(shm_header_check(&good, 2, why, sizeof(why)) == 0,
	   "the default header of 2 members passes");
	for (int i = 0; i < ncases; i++) {
		h = good;
		craft(&h, i);
		if (shm_header_check(&h, 2, why, sizeof(why)) != 0)
			refused++;
		else
			diag("accepted: %s", crafted[i]);
	}
	ok(refused == ncases, "%d crafted headers refused, of %d (last: %s)",
	   refused, ncases, why);
}

static int segment_ok(int fd, const char *what, int want_ok)
{
	struct shm_header h;
	char why[200] = "";
	int r = shm_segment_check(fd, 2, &h, why, sizeof(why));

	if ((r == 0) != want_ok)
		diag("%s: %s", what, r == 0 ? "accepted" : why);
	return (r == 0) == want_ok;
}

/* The file itself: owner, mode, type and size. */
static void check_segment_files(void)
{
	struct shm_header h;
	char name[96];
	int fd, p[2];
	int fine = 1;

	shm_params(2, 4, 64 << 10, 4 << 10, &h);
	h.magic = SHM_MAGIC;
	snprintf(name, sizeof(name), "/hvd-test-shm-%d-check", (int)getpid());
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0) {
		ok(0, "shm_open(%s): %s", name, strerror(errno));
		ok(0, "(skipped)");
		ok(0, "(skipped)");
		ok(0, "(skipped)");
		return;
	}
	shm_unlink(name);
	fchmod(fd, 0600);
	if (ftruncate(fd, (off_t)h.size) != 0 ||
	    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		fine = 0;
	ok(fine && segment_ok(fd, "a file of ours, 0600", 1),
	   "a segment of this uid with mode 0600 and the layout's size passes");

	fine = 1;
	fchmod(fd, 0666);
	fine &= segment_ok(fd, "mode 0666", 0);
	fchmod(fd, 0640);
	fine &= segment_ok(fd, "mode 0640", 0);
	fchmod(fd, 0400);
	fine &= segment_ok(fd, "mode 0400", 0);
	fchmod(fd, 04600);
	fine &= segment_ok(fd, "mode 04600", 0);
	fchmod(fd, 0600);
	ok(fine, "modes 0666, 0640, 0400 and 04600 refused");

	fine = 1;
	fine &= ftruncate(fd, (off_t)h.size + 4096) == 0 &&
		segment_ok(fd, "a page longer than the header says", 0);
	fine &= ftruncate(fd, (off_t)h.size - 4096) == 0 &&
		segment_ok(fd, "a page shorter than the header says", 0);
	fine &= ftruncate(fd, 16) == 0 &&
		segment_ok(fd, "shorter than a header", 0);
	fine &= pipe(p) == 0 && segment_ok(p[0], "a pipe", 0);
	close(p[0]);
	close(p[1]);
	ok(fine, "a size other than the header's, a short file and a pipe "
		 "refused");

	if (ftruncate(fd, (off_t)h.size) != 0 ||
	    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		ok(0, "cannot restore the test segment");
	} else if (geteuid() != 0) {
		ok(1, "# SKIP another owner: needs root to chown");
	} else {
		ok(fchown(fd, 65534, 65534) == 0 &&
			   segment_ok(fd, "owned by nobody", 0),
		   "a segment owned by another user (nobody) refused");
	}
	close(fd);
}

#define VICTIM_UID 4242

/* A victim member (uid VICTIM_UID): set up with key, run allreduces of a
 * few sizes, check the results; exit status 0 when all were right. */
static void victim_member(int me, int n, const char *key)
{
	struct member m = {me, n};
	shm_group_t *g;
	hvd_status_t st;
	static float x[1 << 18], y[1 << 18];
	static const size_t sizes[] = {1, 100, 1 << 12, 1 << 18};
	long bad = 0;

	if (setgroups(0, NULL) || setgid(VICTIM_UID) || setuid(VICTIM_UID))
		_exit(3);
	st = shm_group_create(key, me, n, test_barrier, test_bcast, &m, &g);
	sh->status[me] = st;
	if (st != HVD_OK)
		note(me, "create: %s", hvd_last_error());
	/* as coll_topo.c: everyone or no one uses the group */
	test_barrier(&m);
	for (int r = 0; r < n; r++) {
		if (sh->status[r] == HVD_OK)
			continue;
		if (st == HVD_OK) {
			note(me, "made, but not on member %d: destroying it",
			     r);
			shm_group_destroy(g);
		}
		_exit(1);
	}
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (size_t i = 0; i < sizes[k]; i++)
			x[i] = (float)((int)(i % 13) + me);
		st = shm_allreduce(g, x, y, sizes[k], HVD_FLOAT32, HVD_SUM,
				   1.0);
		for (size_t i = 0; i < sizes[k]; i++)
			bad += st != HVD_OK ||
			       y[i] != (float)(n * (int)(i % 13) +
					       n * (n - 1) / 2);
		sh->checked[me][0] += (long)sizes[k];
	}
	sh->wrong[me][0] = bad;
	if (bad)
		note(me, "%ld wrong (%s)", bad, hvd_last_error());
	shm_group_destroy(g);
	_exit(bad ? 1 : 0);
}

/* Another user (nobody) creates the name the segment of a victim's group
 * used to have, "/hvd-<uid>-<key>", before the group is made, mode 0666,
 * with a header whose layout goes far past the file.  Before the name had
 * random bits, local rank 0 could not create it (nor, in sticky /dev/shm,
 * remove it), the others attached the attacker's file, took its layout
 * and crashed writing past the mapping (or unmapped what the header
 * said).  Now the members never open that name and compute right
 * results; the attacker's file is left as it was. */
static void check_attack(void)
{
	const int n = 2;
	char key[96], old_name[160];
	struct shm_header h;
	pid_t pids[MAXN], a;
	int ws, fine = 1, fd;
	long checked = 0, wrong = 0;
	struct stat sb;

	if (geteuid() != 0) {
		ok(1, "# SKIP attack by another user: needs root to run as "
		      "nobody and uid %d",
		   VICTIM_UID);
		return;
	}
	memset(sh, 0, sizeof(*sh));
	snprintf(key, sizeof(key), "test-shm-%d-attack", (int)getpid());
	snprintf(old_name, sizeof(old_name), "/hvd-%d-%s", VICTIM_UID, key);
	a = fork();
	if (a == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(3);
		fd = shm_open(old_name, O_CREAT | O_EXCL | O_RDWR, 0666);
		if (fd < 0)
			_exit(4);
		memset(&h, 0, sizeof(h));
		h.magic = SHM_MAGIC;
		h.n = (uint32_t)n;
		h.nbuf = 64;
		h.chunk = 1ull << 30;
		h.small_max = 1ull << 30;
		h.size = 8192; /* = the file's size: the old check */
		h.attached = 1; /* so that the other member's count adds up */
		if (fchmod(fd, 0666) || ftruncate(fd, 8192) ||
		    pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
			_exit(5);
		_exit(0);
	}
	waitpid(a, &ws, 0);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		ok(0, "the attacker (nobody) could not create /dev/shm%s "
		      "(status %d)",
		   old_name, ws);
		shm_unlink(old_name);
		return;
	}
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(60);
			victim_member(r, n, key);
		}
	}
	for (int r = 0; r < n; r++) {
		waitpid(pids[r], &ws, 0);
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
			fine = 0;
			diag("victim member %d: %s %d", r,
			     WIFSIGNALED(ws) ? "killed by signal"
					     : "exit status",
			     WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
		}
		if (sh->msg[r][0])
			diag("victim member %d: %s", r, sh->msg[r]);
		checked += sh->checked[r][0];
		wrong += sh->wrong[r][0];
	}
	ok(fine && checked > 0 && wrong == 0,
	   "a segment name pre-created by nobody (mode 0666, a header past "
	   "the file): the group is made elsewhere, results right (%ld "
	   "checked, %ld wrong)",
	   checked, wrong);
	fd = shm_open(old_name, O_RDONLY, 0);
	ok(fd >= 0 && fstat(fd, &sb) == 0 && sb.st_uid == 65534 &&
		   sb.st_size == 8192 && (sb.st_mode & 0777) == 0666,
	   "the attacker's file is left alone");
	if (fd >= 0)
		close(fd);
	shm_unlink(old_name);
}

int main(void)
{
	shared_map();
	plan(3 + 4 + 2);

	check_params_accepted();
	check_crafted_headers();
	check_segment_files();
	check_attack();
	return done_testing();
}

/*
 * hvd-ckpt - inspect, verify and prune libhvd checkpoint directories.
 *
 *	hvd-ckpt list DIR          step, size, time and state of each one
 *	hvd-ckpt verify DIR [STEP] sizes and checksums; exit 0 when all good
 *	hvd-ckpt show DIR [STEP]   a manifest (default: the newest complete)
 *	hvd-ckpt prune DIR K       keep the newest K complete checkpoints
 *
 * A pure file tool: it reads what libhvd wrote, with the same code
 * (ckpt_manifest.c, ckpt_store.c), and needs no PMIx or running job.  It
 * is run by admins as root on users' directories: DIR is opened once and
 * everything below it is reached without following links, and only the
 * checkpoints of DIR's owner are looked at (ckpt_store.h).
 * Exit status: 0 success, 1 something is damaged, 2 usage or I/O error.
 */
#include "config.h"

#include "ckpt/core/ckpt_store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *to)
{
	fprintf(to,
		"usage: hvd-ckpt list DIR\n"
		"       hvd-ckpt verify DIR [STEP]\n"
		"       hvd-ckpt show DIR [STEP] | show DIR/step-NNNNNNNN\n"
		"       hvd-ckpt prune DIR K\n"
		"DIR is a checkpoint directory (HOROVOD_CHECKPOINT_DIR).\n"
		"Exit status: 0 all good, 1 damaged checkpoints found, "
		"2 usage or I/O error.\n");
}

static int parse_long(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return errno || end == s || *end || *out < 0 ? -1 : 0;
}

static void human(char *buf, size_t n, unsigned long long bytes)
{
	const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		ckpt_fmt(buf, n, "%llu B", bytes);
	else
		ckpt_fmt(buf, n, "%.1f %s", v, unit[u]);
}

static void fmt_time(char *buf, size_t n, long long t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm) ||
	    !strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm))
		ckpt_fmt(buf, n, "?");
}

static unsigned long long manifest_bytes(const struct ckpt_manifest *m)
{
	unsigned long long sum = 0;

	for (size_t i = 0; i < m->nfiles; i++)
		sum += m->files[i].size;
	return sum;
}

static const char *state_name(enum ckpt_state s)
{
	switch (s) {
	case CKPT_COMPLETE:
		return "complete";
	case CKPT_PARTIAL:
		return "partial";
	case CKPT_FOREIGN:
		return "ignored (a link, or not the owner's)";
	default:
		return "incomplete";
	}
}

static int cmd_list(const struct ckpt_dir *dir)
{
	struct ckpt_entry *e;
	char latest[256];
	size_t n;

	if (ckpt_scan(dir, NULL, &e, &n) != HVD_OK) {
		fprintf(stderr, "hvd-ckpt: %s\n", hvd_last_error());
		return 2;
	}
	ckpt_read_latest(dir, latest, sizeof(latest));
	printf("%-34s %12s %6s %10s %-19s %s\n", "NAME", "STEP", "RANKS",
	       "SIZE", "CREATED", "STATE");
	for (size_t i = 0; i < n; i++) {
		char size[32] = "-", when[32] = "-", ranks[16] = "-";
		struct ckpt_manifest m;
		struct ckpt_dir ck;
		struct stat sb;

		if (e[i].state == CKPT_COMPLETE &&
		    ckpt_dir_sub(dir, e[i].name, &ck) == HVD_OK) {
			if (ckpt_read_manifest(&ck, &m) == HVD_OK) {
				human(size, sizeof(size), manifest_bytes(&m));
				fmt_time(when, sizeof(when), m.created);
				ckpt_fmt(ranks, sizeof(ranks), "%d",
					 m.world_size);
				ckpt_manifest_free(&m);
			}
			ckpt_dir_close(&ck);
		} else if (fstatat(dir->fd, e[i].name, &sb,
				   AT_SYMLINK_NOFOLLOW) == 0) {
			fmt_time(when, sizeof(when), (long long)sb.st_mtime);
		}
		printf("%-34s %12ld %6s %10s %-19s %s%s\n", e[i].name,
		       e[i].step, ranks, size, when, state_name(e[i].state),
		       strcmp(latest, e[i].name) == 0 ? " (latest)" : "");
	}
	if (n == 0)
		printf("(no checkpoints in %s)\n", dir->path);
	free(e);
	return 0;
}

/* The `latest` pointer must name the newest complete checkpoint. */
static int check_latest(const struct ckpt_dir *dir,
			const struct ckpt_entry *e, size_t n)
{
	char latest[256];
	const char *newest = NULL;

	for (size_t i = 0; i < n && !newest; i++)
		if (e[i].state == CKPT_COMPLETE)
			newest = e[i].name;
	if (ckpt_read_latest(dir, latest, sizeof(latest)) != HVD_OK) {
		printf("latest: UNREADABLE: %s\n", hvd_last_error());
		return 1;
	}
	if (!newest && !latest[0])
		return 0;
	if (!latest[0]) {
		printf("latest: MISSING (newest complete is %s)\n", newest);
		return 1;
	}
	if (!newest || strcmp(latest, newest) != 0) {
		printf("latest: STALE: names %s, newest complete is %s\n",
		       latest, newest ? newest : "(none)");
		return 1;
	}
	printf("latest: ok (%s)\n", latest);
	return 0;
}

static int cmd_verify(const struct ckpt_dir *dir, long only)
{
	struct ckpt_entry *e;
	int bad = 0, checked = 0;
	size_t n;

	if (ckpt_scan(dir, NULL, &e, &n) != HVD_OK) {
		fprintf(stderr, "hvd-ckpt: %s\n", hvd_last_error());
		return 2;
	}
	for (size_t i = 0; i < n; i++) {
		struct ckpt_manifest m;
		struct ckpt_dir ck;

		if (only >= 0 && e[i].step != only)
			continue;
		if (e[i].state == CKPT_PARTIAL) {
			printf("%s: partial (not committed; ignored by "
			       "restore, removed by prune)\n", e[i].name);
			continue;
		}
		if (e[i].state == CKPT_FOREIGN) {
			printf("%s: ignored: a symbolic link or not a "
			       "directory of the owner's (never followed, "
			       "never removed)\n", e[i].name);
			continue;
		}
		checked++;
		if (ckpt_dir_sub(dir, e[i].name, &ck) != HVD_OK) {
			printf("%s: BAD: %s\n", e[i].name, hvd_last_error());
			bad++;
			continue;
		}
		if (ckpt_read_manifest(&ck, &m) != HVD_OK) {
			printf("%s: BAD: %s\n", e[i].name, hvd_last_error());
			ckpt_dir_close(&ck);
			bad++;
			continue;
		}
		if (m.step != e[i].step) {
			printf("%s: BAD: its manifest is of step %ld (renamed "
			       "or copied?)\n", e[i].name, m.step);
			bad++;
		} else if (ckpt_verify(&ck, &m, -1) != HVD_OK) {
			printf("%s: BAD: %s\n", e[i].name, hvd_last_error());
			bad++;
		} else {
			printf("%s: ok (%zu files, %llu bytes)\n", e[i].name,
			       m.nfiles, manifest_bytes(&m));
		}
		ckpt_manifest_free(&m);
		ckpt_dir_close(&ck);
	}
	if (only >= 0 && checked == 0) {
		fprintf(stderr, "hvd-ckpt: no checkpoint of step %ld in %s\n",
			only, dir->path);
		free(e);
		return 2;
	}
	if (only < 0)
		bad += check_latest(dir, e, n);
	free(e);
	printf("%s\n", bad ? "verify: damaged checkpoints found"
			   : "verify: all good");
	return bad ? 1 : 0;
}

static int cmd_show(const struct ckpt_dir *dir, long only)
{
	char name[32], when[32];
	struct ckpt_manifest m;
	struct ckpt_dir ck = { .fd = -1 };
	struct ckpt_entry *e;
	const struct ckpt_dir *src = dir;
	struct stat sb;
	size_t n;
	long step = -1;

	/* DIR may be one checkpoint (hvd-ckpt show DIR/step-00000100) */
	if (only < 0 && fstatat(dir->fd, CKPT_MANIFEST_NAME, &sb,
				AT_SYMLINK_NOFOLLOW) == 0)
		goto show;
	if (ckpt_scan(dir, NULL, &e, &n) != HVD_OK) {
		fprintf(stderr, "hvd-ckpt: %s\n", hvd_last_error());
		return 2;
	}
	for (size_t i = 0; i < n && step < 0; i++)
		if ((e[i].state == CKPT_COMPLETE ||
		     e[i].state == CKPT_INCOMPLETE) &&
		    (only >= 0 ? e[i].step == only
			       : e[i].state == CKPT_COMPLETE))
			step = e[i].step;
	free(e);
	if (step < 0) {
		fprintf(stderr, "hvd-ckpt: %s in %s\n",
			only >= 0 ? "no such step" : "no complete checkpoint",
			dir->path);
		return 2;
	}
	ckpt_dir_name(name, sizeof(name), step, NULL);
	if (ckpt_dir_sub(dir, name, &ck) != HVD_OK) {
		printf("%s/%s: BAD: %s\n", dir->path, name, hvd_last_error());
		return 1;
	}
	src = &ck;
show:
	if (ckpt_read_manifest(src, &m) != HVD_OK) {
		printf("%s: BAD: %s\n", src->path, hvd_last_error());
		ckpt_dir_close(&ck);
		return 1;
	}
	fmt_time(when, sizeof(when), m.created);
	printf("checkpoint: %s\nformat:     %d\nstep:       %ld\n"
	       "world size: %d\ncreated:    %s\njob:        %s\n",
	       src->path, m.version, m.step, m.world_size, when, m.job);
	printf("buffers:    %zu (replicated %llu bytes, per rank %llu "
	       "bytes, sharded %llu bytes)\n", m.nbuffers,
	       (unsigned long long)m.replicated_bytes,
	       (unsigned long long)m.per_rank_bytes,
	       (unsigned long long)m.sharded_bytes);
	for (size_t i = 0; i < m.nbuffers; i++) {
		const struct ckpt_buffer *b = &m.buffers[i];

		printf("  %-10s %-32s offset %llu, %llu bytes",
		       b->kind == HVD_CKPT_PER_RANK  ? "per-rank"
		       : b->kind == HVD_CKPT_SHARDED ? "sharded"
						     : "replicated",
		       b->name, (unsigned long long)b->offset,
		       (unsigned long long)b->bytes);
		if (b->kind == HVD_CKPT_SHARDED)
			printf(" (%llu elements of %llu bytes, split over "
			       "%d ranks)", (unsigned long long)(b->bytes /
								b->elem),
			       (unsigned long long)b->elem, m.world_size);
		printf("\n");
	}
	printf("files:      %zu\n", m.nfiles);
	for (size_t i = 0; i < m.nfiles; i++)
		printf("  %-16s %14llu bytes  xxh3 %016llx\n", m.files[i].name,
		       (unsigned long long)m.files[i].size,
		       (unsigned long long)m.files[i].hash);
	printf("metadata:   %zu bytes", m.meta_len);
	for (size_t i = 0; i < m.meta_len && i < 32; i++)
		printf("%s%02x", i ? "" : " ", m.meta[i]);
	printf("%s\n", m.meta_len > 32 ? "..." : "");
	ckpt_manifest_free(&m);
	ckpt_dir_close(&ck);
	return 0;
}

static int cmd_prune(const struct ckpt_dir *dir, long keep)
{
	size_t removed = 0;
	hvd_status_t st;
	char who[512];

	if (keep < 1) {
		fprintf(stderr, "hvd-ckpt: prune: K must be at least 1 (the "
			"newest complete checkpoint is always kept)\n");
		return 2;
	}
	if (ckpt_dir_busy(dir, who, sizeof(who))) {
		fprintf(stderr, "hvd-ckpt: prune: %s is in use by a running "
			"job (%s): its retention is already at work; prune "
			"when it has ended\n", dir->path, who);
		return 2;
	}
	st = ckpt_prune(dir, (int)keep, -1, NULL, &removed);
	printf("prune: removed %zu director%s from %s, keeping the newest "
	       "%ld complete\n", removed, removed == 1 ? "y" : "ies",
	       dir->path, keep);
	if (st != HVD_OK) {
		fprintf(stderr, "hvd-ckpt: %s\n", hvd_last_error());
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd, *dir;
	struct ckpt_dir d;
	long arg = -1;
	int rc;

	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 ||
			  strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		printf("hvd-ckpt (%s) %s, checkpoint format %d\n", PACKAGE_NAME,
		       PACKAGE_VERSION, CKPT_FORMAT_VERSION);
		return 0;
	}
	if (argc < 3 || argc > 4) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	dir = argv[2];
	if (argc == 4 && parse_long(argv[3], &arg) != 0) {
		fprintf(stderr, "hvd-ckpt: %s: expected a number >= 0, found "
			"\"%s\"\n", cmd, argv[3]);
		return 2;
	}
	if (!(strcmp(cmd, "list") == 0 && argc == 3) &&
	    strcmp(cmd, "verify") != 0 && strcmp(cmd, "show") != 0 &&
	    !(strcmp(cmd, "prune") == 0 && argc == 4)) {
		fprintf(stderr, "hvd-ckpt: unknown command or wrong arguments: "
			"%s\n", cmd);
		usage(stderr);
		return 2;
	}
	if (ckpt_dir_open(&d, dir, CKPT_OPEN_ANY_OWNER) != HVD_OK) {
		fprintf(stderr, "hvd-ckpt: %s\n", hvd_last_error());
		return 2;
	}
	if (strcmp(cmd, "list") == 0)
		rc = cmd_list(&d);
	else if (strcmp(cmd, "verify") == 0)
		rc = cmd_verify(&d, arg);
	else if (strcmp(cmd, "show") == 0)
		rc = cmd_show(&d, arg);
	else
		rc = cmd_prune(&d, arg);
	ckpt_dir_close(&d);
	return rc;
}

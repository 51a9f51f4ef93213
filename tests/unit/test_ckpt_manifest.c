/*
 * test_ckpt_manifest.c - the checkpoint manifest format, its strict parser,
 * directory names and retention planning (pure functions).
 */
#include "config.h"

#include "ckpt/core/ckpt_manifest.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

static void sample(struct ckpt_manifest *m, struct ckpt_buffer *b)
{
	memset(m, 0, sizeof(*m));
	m->version = CKPT_FORMAT_VERSION;
	m->step = 1200;
	m->world_size = 3;
	m->created = 1764480000;
	strcpy(m->job, "4242");
	memset(b, 0, 3 * sizeof(*b));
	strcpy(b[0].name, "weights");
	b[0].kind = HVD_CKPT_REPLICATED;
	b[0].bytes = 4096;
	strcpy(b[1].name, "rng");
	b[1].kind = HVD_CKPT_PER_RANK;
	b[1].bytes = 16;
	strcpy(b[2].name, "optim/adam.m");
	b[2].kind = HVD_CKPT_REPLICATED;
	b[2].offset = 4096;
	b[2].bytes = 100;
	m->buffers = b;
	m->nbuffers = 3;
	m->replicated_bytes = 4196;
	m->per_rank_bytes = 16;
	m->meta = (unsigned char *)"epoch=3\n\001";
	m->meta_len = 9;
}

static int parses(const char *text, size_t len)
{
	struct ckpt_manifest m;
	hvd_status_t st = ckpt_manifest_parse(text, len, &m);

	if (st == HVD_OK)
		ckpt_manifest_free(&m);
	return st == HVD_OK;
}

static void test_roundtrip(void)
{
	struct ckpt_manifest m, p;
	struct ckpt_buffer b[3];
	char *text;
	size_t len;

	sample(&m, b);
	ok(ckpt_manifest_layout(&m) == HVD_OK, "layout");
	is_int(m.nfiles, 4, "replicated.bin + 3 rank files");
	is_str(m.files[0].name, "replicated.bin", "first file");
	is_str(m.files[3].name, "rank-00002.bin", "last file");
	for (size_t i = 0; i < m.nfiles; i++)
		m.files[i].hash = 0x0123456789abcdefULL + i;
	ok(ckpt_manifest_format(&m, &text, &len) == HVD_OK, "format");
	ok(strstr(text, "hvd-checkpoint 1\nstep 1200\n") == text,
	   "starts with magic and step");
	ok(ckpt_manifest_parse(text, len, &p) == HVD_OK, "parse back: %s",
	   hvd_last_error());
	is_int(p.step, 1200, "step");
	is_int(p.world_size, 3, "world size");
	is_str(p.job, "4242", "job");
	is_int(p.nbuffers, 3, "buffers");
	is_str(p.buffers[2].name, "optim/adam.m", "buffer name");
	is_int(p.buffers[1].kind, HVD_CKPT_PER_RANK, "buffer kind");
	is_int(p.files[2].hash, 0x0123456789abcdefULL + 2, "file hash");
	ok(p.meta_len == 9 && memcmp(p.meta, "epoch=3\n\001", 9) == 0,
	   "binary metadata survives");
	ok(ckpt_manifest_file(&p, "rank-00001.bin") != NULL, "file lookup");
	ok(ckpt_manifest_file(&p, "rank-00003.bin") == NULL,
	   "no file for a rank beyond world size");
	ckpt_manifest_free(&p);

	/* every single-byte change and every truncation is rejected */
	{
		int flips = 0, truncs = 0;

		for (size_t i = 0; i < len; i++) {
			char saved = text[i];

			text[i] = (char)(saved ^ 0x01);
			flips += !parses(text, len);
			text[i] = saved;
		}
		for (size_t i = 0; i < len; i++)
			truncs += !parses(text, i);
		is_int(flips, len, "all %zu one-bit flips detected", len);
		is_int(truncs, len, "all %zu truncations detected", len);
	}
	ok(!parses(text, len) == 0, "original still parses");
	{
		char *longer = malloc(len + 2);

		memcpy(longer, text, len);
		memcpy(longer + len, "x\n", 2);
		ok(!parses(longer, len + 2), "trailing data rejected");
		ok(strstr(hvd_last_error(), "after the checksum") != NULL,
		   "message: %s", hvd_last_error());
		free(longer);
	}
	free(text);
	free(m.files);
}

/* A manifest that checksums correctly but lies about the layout. */
static void test_semantics(void)
{
	struct ckpt_manifest m;
	struct ckpt_buffer b[3];
	char *text;
	size_t len;

	sample(&m, b);
	ckpt_manifest_layout(&m);
	b[2].offset = 4000; /* overlapping */
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "overlapping buffers rejected");
	ok(strstr(hvd_last_error(), "contiguous") != NULL, "message: %s",
	   hvd_last_error());
	free(text);
	b[2].offset = 4096;
	m.files[1].size = 15; /* a rank file of the wrong size */
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "file size not matching per_rank_bytes");
	free(text);
	m.files[1].size = 16;
	strcpy(b[1].name, "weights");
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "duplicate buffer name rejected");
	free(text);
	strcpy(b[1].name, "rng");
	m.world_size = 2;
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "file count not matching world size");
	free(text);
	ok(!parses("hvd-checkpoint 2\n", 17), "future version rejected");
	ok(strstr(hvd_last_error(), "version 2") != NULL, "message: %s",
	   hvd_last_error());
	ok(!parses("", 0), "empty manifest rejected");
	/* the checksum is no MAC: ckpt_manifest_format makes it right for
	 * anything, so the parser itself must refuse bytes the C string
	 * functions would read differently (found by fuzz_ckpt_manifest) */
	m.world_size = 3;
	strcpy(m.job, "42\00142");
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "a control byte in a field refused, although "
	   "the checksum is right");
	ok(strstr(hvd_last_error(), "line 5: a byte that is not printable") !=
		   NULL, "message: %s", hvd_last_error());
	free(text);
	strcpy(m.job, "42\37742");
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "a byte above 0x7e refused too");
	free(text);
	strcpy(m.job, "4242");
	ckpt_manifest_format(&m, &text, &len);
	ok(parses(text, len), "and the same manifest with a plain job id "
	   "parses");
	free(text);
	free(m.files);
}

static void test_names(void)
{
	char buf[128];
	const char *tag;
	long step = -1;

	ckpt_dir_name(buf, sizeof(buf), 100, NULL);
	is_str(buf, "step-00000100", "final name");
	ckpt_dir_name(buf, sizeof(buf), 7, "123-ab");
	is_str(buf, "step-00000007.partial-123-ab", "partial name");
	is_int(ckpt_dir_parse("step-00000100", &step, &tag), CKPT_DIR_FINAL,
	       "final parsed");
	is_int(step, 100, "its step");
	is_int(ckpt_dir_parse("step-00000007.partial-123-ab", &step, &tag),
	       CKPT_DIR_PARTIAL, "partial parsed");
	is_str(tag, "123-ab", "its tag");
	is_int(ckpt_dir_parse("step-123456789012", &step, &tag),
	       CKPT_DIR_OTHER, "too many digits: not ours");
	is_int(ckpt_dir_parse("step-0001", &step, &tag), CKPT_DIR_OTHER,
	       "too few digits: not ours");
	is_int(ckpt_dir_parse("step-00000001.bak", &step, &tag),
	       CKPT_DIR_OTHER, "other suffix: not ours");
	is_int(ckpt_dir_parse("latest", &step, &tag), CKPT_DIR_OTHER,
	       "latest is not a checkpoint");
	ok(ckpt_name_valid("layer1/weight:0"), "valid buffer name");
	ok(!ckpt_name_valid("has space"), "space rejected");
	ok(!ckpt_name_valid(""), "empty rejected");
}

static void add(struct ckpt_entry *e, size_t *n, long step,
		enum ckpt_state state, int own)
{
	memset(&e[*n], 0, sizeof(e[*n]));
	ckpt_dir_name(e[*n].name, sizeof(e[*n].name), step,
		      state == CKPT_PARTIAL ? "t" : NULL);
	e[*n].step = step;
	e[*n].state = state;
	e[*n].own = own;
	(*n)++;
}

static int removed(const struct ckpt_entry *e, size_t n, long step,
		   enum ckpt_state state)
{
	for (size_t i = 0; i < n; i++)
		if (e[i].step == step && e[i].state == state)
			return e[i].remove;
	return -1;
}

static void test_retention(void)
{
	struct ckpt_entry e[16];
	size_t n = 0;

	add(e, &n, 100, CKPT_COMPLETE, 0);
	add(e, &n, 400, CKPT_COMPLETE, 0);
	add(e, &n, 200, CKPT_COMPLETE, 0);
	add(e, &n, 300, CKPT_COMPLETE, 0);
	add(e, &n, 500, CKPT_PARTIAL, 0);
	add(e, &n, 450, CKPT_INCOMPLETE, 0);
	add(e, &n, 50, CKPT_INCOMPLETE, 0);
	add(e, &n, 600, CKPT_PARTIAL, 1);
	is_int(ckpt_retention_plan(e, n, 2, -1), 4, "4 to remove");
	is_int(e[0].step, 600, "sorted newest first");
	ok(!removed(e, n, 400, CKPT_COMPLETE) && !removed(e, n, 300,
							   CKPT_COMPLETE),
	   "newest 2 complete kept");
	ok(removed(e, n, 200, CKPT_COMPLETE) && removed(e, n, 100,
							 CKPT_COMPLETE),
	   "older complete removed");
	is_int(removed(e, n, 500, CKPT_PARTIAL), 1, "crash partial removed");
	is_int(removed(e, n, 600, CKPT_PARTIAL), 0, "own in-flight kept");
	is_int(removed(e, n, 450, CKPT_INCOMPLETE), 0,
	       "newer incomplete kept for inspection");
	is_int(removed(e, n, 50, CKPT_INCOMPLETE), 1, "old incomplete removed");

	ckpt_retention_plan(e, n, 2, 100);
	is_int(removed(e, n, 100, CKPT_COMPLETE), 0,
	       "the restored checkpoint is never removed");
	is_int(removed(e, n, 200, CKPT_COMPLETE), 1, "others still are");
	ckpt_retention_plan(e, n, 0, -1);
	is_int(removed(e, n, 400, CKPT_COMPLETE), 0,
	       "keep 0 still keeps the newest complete");
	is_int(removed(e, n, 300, CKPT_COMPLETE), 1, "keep 0 acts as keep 1");
	n = 0;
	add(e, &n, 10, CKPT_PARTIAL, 0);
	add(e, &n, 20, CKPT_INCOMPLETE, 0);
	is_int(ckpt_retention_plan(e, n, 3, -1), 1,
	       "no complete one: only the partial goes");
	n = 0;
	add(e, &n, 30, CKPT_COMPLETE, 0);
	add(e, &n, 20, CKPT_FOREIGN, 0);
	add(e, &n, 10, CKPT_FOREIGN, 0);
	is_int(ckpt_retention_plan(e, n, 1, -1), 0,
	       "links and other users' directories are never removed");
}

/* A manifest whose header claims `count` lines of `key` ("buffers" or
 * "files") and then ends.  Nothing is checksummed yet when the count is
 * read: an attacker's 50-byte file must not make the parser allocate for a
 * million entries. */
static size_t huge_count(char *buf, size_t n, const char *key,
			 unsigned long count)
{
	int len = snprintf(buf, n,
			   "hvd-checkpoint 1\nstep 1\nworld_size 1\n"
			   "created 0\njob -\nreplicated_bytes 0\n"
			   "per_rank_bytes 0\n%s%lu\n", strcmp(key, "files") == 0
			   ? "buffers 0\nfiles " : "buffers ", count);

	return (size_t)len;
}

/* Virtual memory of this process now, in bytes. */
static unsigned long long vm_bytes(void)
{
	unsigned long long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%llu", &pages) != 1)
			pages = 0;
		fclose(f);
	}
	return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

static void test_counts(void)
{
	struct ckpt_manifest m;
	char text[512];
	size_t len;
	hvd_status_t st;

	len = huge_count(text, sizeof(text), "buffers", 1000000);
	st = ckpt_manifest_parse(text, len, &m);
	is_int(st, HVD_ERR_CORRUPT, "buffers 1000000 in a short file: corrupt");
	ok(strstr(hvd_last_error(), "line 8: 1000000 buffers cannot fit in "
		  "the 0 bytes left") != NULL,
	   "refused at the count line, for the bytes left: %s",
	   hvd_last_error());
	len = huge_count(text, sizeof(text), "files", 2000000);
	st = ckpt_manifest_parse(text, len, &m);
	is_int(st, HVD_ERR_CORRUPT, "files 2000000 in a short file: corrupt");
	ok(strstr(hvd_last_error(), "line 9: 2000000 files cannot fit") !=
		   NULL, "refused at the count line: %s", hvd_last_error());
#ifdef HAVE_ASAN
	skip(2, "ASan reserves more address space than RLIMIT_AS would leave");
#else
	{
		/* with 64 MiB of address space to spare, a parser that
		 * allocates from the counts (152 MB and 96 MB here) fails
		 * with out of memory instead */
		struct rlimit old, lim;

		getrlimit(RLIMIT_AS, &old);
		lim = old;
		lim.rlim_cur = vm_bytes() + (64ull << 20);
		if (lim.rlim_cur > old.rlim_max)
			lim.rlim_cur = old.rlim_max;
		setrlimit(RLIMIT_AS, &lim);
		len = huge_count(text, sizeof(text), "buffers", 1000000);
		st = ckpt_manifest_parse(text, len, &m);
		len = huge_count(text, sizeof(text), "files", 2000000);
		hvd_status_t st2 = ckpt_manifest_parse(text, len, &m);
		setrlimit(RLIMIT_AS, &old);
		ok(st == HVD_ERR_CORRUPT, "buffers: no allocation from the "
		   "count (64 MiB of address space left: %s)",
		   hvd_status_name(st));
		ok(st2 == HVD_ERR_CORRUPT, "files: no allocation from the count "
		   "(%s)", hvd_status_name(st2));
	}
#endif
}

int main(void)
{
	test_roundtrip();
	test_semantics();
	test_names();
	test_retention();
	test_counts();
	return done_testing();
}

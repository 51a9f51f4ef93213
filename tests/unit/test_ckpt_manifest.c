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
	ok(!parses("hvd-checkpoint 3\n", 17), "future version rejected");
	ok(strstr(hvd_last_error(), "version 3") != NULL, "message: %s",
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

#ifndef HAVE_ASAN
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
#endif

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

/* ------------------------------------------------------------ resharding */

static void test_shard_range(void)
{
	int bad_cover = 0, bad_balance = 0, cases = 0;

	for (uint64_t count = 0; count <= 60; count++) {
		for (int size = 1; size <= 9; size++) {
			uint64_t next = 0, first, n;

			for (int r = 0; r < size; r++) {
				ckpt_shard_range(count, r, size, &first, &n);
				if (first != next)
					bad_cover++;
				if (n != count / size +
					     ((uint64_t)r < count % size))
					bad_balance++;
				next = first + n;
			}
			if (next != count)
				bad_cover++;
			cases++;
		}
	}
	is_int(bad_cover, 0, "blocks of %d (count, size) cases are "
	       "contiguous and cover the array", cases);
	is_int(bad_balance, 0, "the first count %% size ranks hold one more");
	{
		uint64_t first, n;

		ckpt_shard_range(10, 3, 4, &first, &n);
		ok(first == 8 && n == 2, "10 over 4: rank 3 holds [8, 10)");
		ckpt_shard_range(10, 1, 4, &first, &n);
		ok(first == 3 && n == 3, "10 over 4: rank 1 holds [3, 6)");
		ckpt_shard_range(2, 2, 3, &first, &n);
		ok(first == 2 && n == 0, "2 over 3: rank 2 holds nothing");
		ckpt_shard_range(UINT64_MAX, 999999, 1000000, &first, &n);
		ok(first + n == UINT64_MAX, "no overflow at the top");
		ckpt_shard_range(10, 4, 4, &first, &n);
		ok(n == 0, "a rank out of range holds nothing");
	}
}

/* Three sharded arrays (and a replicated buffer between them) written by
 * nw ranks, resliced for every rank of every size 1..9: the bytes each
 * rank reassembles are its block of the global arrays, every destination
 * byte written exactly once. */
#define NSH 3
static const uint64_t sh_count[NSH] = { 23, 5, 2 };
static const uint64_t sh_elem[NSH] = { 8, 3, 12 };

static unsigned char gbyte(int buf, uint64_t i)
{
	return (unsigned char)(buf * 101 + i * 7 + (i >> 8));
}

static void shard_manifest(struct ckpt_manifest *m, struct ckpt_buffer *b,
			   int nw)
{
	uint64_t off = 0;

	memset(m, 0, sizeof(*m));
	memset(b, 0, (NSH + 1) * sizeof(*b));
	m->version = CKPT_FORMAT_SHARDED;
	m->step = 7;
	m->world_size = nw;
	strcpy(m->job, "-");
	for (int k = 0, i = 0; i < NSH + 1; i++) {
		if (i == 1) {
			strcpy(b[i].name, "weights");
			b[i].kind = HVD_CKPT_REPLICATED;
			b[i].bytes = 64;
			m->replicated_bytes = 64;
			continue;
		}
		snprintf(b[i].name, sizeof(b[i].name), "shard%d", k);
		b[i].kind = HVD_CKPT_SHARDED;
		b[i].offset = off;
		b[i].bytes = sh_count[k] * sh_elem[k];
		b[i].elem = sh_elem[k];
		off += b[i].bytes;
		k++;
	}
	m->buffers = b;
	m->nbuffers = NSH + 1;
	m->sharded_bytes = off;
}

/* The bytes of writer j's shard file, as ckpt_write_local lays them out. */
static unsigned char *writer_file(const struct ckpt_manifest *m, int j,
				  uint64_t *len)
{
	unsigned char *f = malloc(ckpt_shard_file_bytes(m, j) + 1);
	uint64_t n = 0;

	for (size_t i = 0, k = 0; i < m->nbuffers; i++) {
		const struct ckpt_buffer *b = &m->buffers[i];
		uint64_t first, cnt;

		if (b->kind != HVD_CKPT_SHARDED)
			continue;
		ckpt_shard_range(b->bytes / b->elem, j, m->world_size, &first,
				 &cnt);
		for (uint64_t x = 0; x < cnt * b->elem; x++)
			f[n++] = gbyte((int)k, first * b->elem + x);
		k++;
	}
	*len = n;
	return f;
}

static void test_shard_plan(void)
{
	int bad_layout = 0, bad_bytes = 0, bad_cover = 0, plans = 0;

	for (int nw = 1; nw <= 8; nw++) {
		struct ckpt_manifest m;
		struct ckpt_buffer b[NSH + 1];
		unsigned char *files[8];
		uint64_t flen[8];

		shard_manifest(&m, b, nw);
		if (ckpt_manifest_layout(&m) != HVD_OK ||
		    m.nfiles != 1 + (size_t)nw)
			bad_layout++;
		for (int j = 0; j < nw; j++) {
			files[j] = writer_file(&m, j, &flen[j]);
			if (m.nfiles == 1 + (size_t)nw &&
			    m.files[1 + j].size != flen[j])
				bad_layout++;
		}
		for (int size = 1; size <= 9; size++) {
			for (int r = 0; r < size; r++) {
				struct ckpt_shard_read *rd;
				size_t nrd;
				unsigned char *dst[NSH + 1] = { 0 };
				unsigned char *hits[NSH + 1] = { 0 };
				uint64_t first[NSH + 1], cnt[NSH + 1];

				if (ckpt_shard_plan(&m, r, size, &rd, &nrd) !=
				    HVD_OK) {
					bad_cover++;
					continue;
				}
				plans++;
				for (size_t i = 0; i < m.nbuffers; i++) {
					if (b[i].kind != HVD_CKPT_SHARDED)
						continue;
					ckpt_shard_range(b[i].bytes / b[i].elem,
							 r, size, &first[i],
							 &cnt[i]);
					dst[i] = calloc(1, cnt[i] * b[i].elem + 1);
					hits[i] = calloc(1, cnt[i] * b[i].elem + 1);
				}
				for (size_t x = 0; x < nrd; x++) {
					const struct ckpt_shard_read *q = &rd[x];
					size_t i = q->buf;

					if (b[i].kind != HVD_CKPT_SHARDED ||
					    q->writer < 0 || q->writer >= nw ||
					    q->file_off + q->len > flen[q->writer] ||
					    q->dst_off + q->len >
						    cnt[i] * b[i].elem) {
						bad_cover++;
						continue;
					}
					memcpy(dst[i] + q->dst_off,
					       files[q->writer] + q->file_off,
					       q->len);
					for (uint64_t y = 0; y < q->len; y++)
						hits[i][q->dst_off + y]++;
				}
				for (size_t i = 0, k = 0; i < m.nbuffers; i++) {
					if (b[i].kind != HVD_CKPT_SHARDED)
						continue;
					for (uint64_t y = 0;
					     y < cnt[i] * b[i].elem; y++) {
						bad_cover += hits[i][y] != 1;
						bad_bytes += dst[i][y] !=
							     gbyte((int)k,
								   first[i] *
								   b[i].elem + y);
					}
					free(dst[i]);
					free(hits[i]);
					k++;
				}
				free(rd);
			}
		}
		for (int j = 0; j < nw; j++)
			free(files[j]);
		free(m.files);
	}
	is_int(bad_layout, 0, "shard file sizes in the layout match what "
	       "each of 1..8 writers holds");
	is_int(plans, 8 * 45, "a plan for every rank of sizes 1..9 from "
	       "1..8 writers");
	is_int(bad_cover, 0, "every destination byte read exactly once, "
	       "within the files");
	is_int(bad_bytes, 0, "every rank reassembles its new block of the "
	       "global arrays");
}

static void test_shard_format(void)
{
	struct ckpt_manifest m, p;
	struct ckpt_buffer b[NSH + 1];
	char *text;
	size_t len;

	shard_manifest(&m, b, 3);
	ok(ckpt_manifest_layout(&m) == HVD_OK, "sharded layout");
	is_str(m.files[1].name, "shard-00000.bin", "shard files after "
	       "replicated.bin");
	for (size_t i = 0; i < m.nfiles; i++)
		m.files[i].hash = 0xfedcba9876543210ULL - i;
	ok(ckpt_manifest_format(&m, &text, &len) == HVD_OK, "format");
	ok(strstr(text, "hvd-checkpoint 2\n") == text,
	   "format 2 when there are sharded buffers");
	ok(strstr(text, "\nsharded_bytes 223\n") != NULL &&
	   strstr(text, "\nbuffer sharded shard1 184 15 3\n") != NULL,
	   "sharded_bytes and the element size written");
	ok(ckpt_manifest_parse(text, len, &p) == HVD_OK, "parse back: %s",
	   hvd_last_error());
	ok(p.sharded_bytes == 223 && p.buffers[2].kind == HVD_CKPT_SHARDED &&
	   p.buffers[2].elem == 3 && p.buffers[2].bytes == 15,
	   "sharded buffer read back");
	ckpt_manifest_free(&p);
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
		is_int(flips, len, "format 2: all %zu one-bit flips detected",
		       len);
		is_int(truncs, len, "format 2: all %zu truncations detected",
		       len);
	}
	free(text);
	/* lies with a right checksum */
	b[2].bytes = 16; /* not a multiple of 3 */
	m.sharded_bytes = 224;
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "sharded size not a multiple of its element "
	   "refused");
	ok(strstr(hvd_last_error(), "multiple of its element") != NULL,
	   "message: %s", hvd_last_error());
	free(text);
	b[2].bytes = 15;
	m.sharded_bytes = 223;
	m.files[2].size++;
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "a shard file of the wrong size refused");
	free(text);
	m.files[2].size--;
	m.sharded_bytes = 0; /* written as format 1: no sharded buffers */
	ckpt_manifest_format(&m, &text, &len);
	ok(!parses(text, len), "a sharded buffer in format 1 refused");
	ok(strstr(hvd_last_error(), "format 2 only") != NULL, "message: %s",
	   hvd_last_error());
	free(text);
	ok(!parses("hvd-checkpoint 2\nstep 1\nworld_size 1\ncreated 0\n"
		   "job -\nreplicated_bytes 0\nper_rank_bytes 0\n"
		   "sharded_bytes 0\n", 105), "format 2 without sharded bytes "
	   "refused (one spelling: that is format 1)");
	ok(strstr(hvd_last_error(), "format 2 without") != NULL, "message: %s",
	   hvd_last_error());
	free(m.files);
	/* format 1 stays format 1 (older libhvd reads it) */
	{
		struct ckpt_buffer b1[3];

		sample(&m, b1);
		ckpt_manifest_layout(&m);
		ckpt_manifest_format(&m, &text, &len);
		ok(strstr(text, "hvd-checkpoint 1\n") == text &&
		   strstr(text, "sharded") == NULL,
		   "no sharded buffer: format 1, byte for byte as before");
		free(text);
		free(m.files);
	}
}

/* The global sampler position across 4 -> 3 -> 2 ranks (and other
 * sequences): every position of the epoch taken exactly once. */
static void test_sampler(void)
{
	static const int sizes[][3] = { { 4, 3, 2 }, { 2, 5, 1 }, { 3, 3, 3 },
					{ 1, 7, 4 } };
	static const uint64_t epochs[] = { 0, 1, 7, 100, 101, 257 };
	static const size_t batches[] = { 1, 3, 8 };
	int bad = 0, runs = 0;
	uint64_t pos[8];

	for (size_t si = 0; si < 4; si++)
	for (size_t ei = 0; ei < 6; ei++)
	for (size_t bi = 0; bi < 3; bi++) {
		uint64_t e = epochs[ei], consumed = 0;
		size_t batch = batches[bi];
		unsigned char *seen = calloc(e + 1, 1);
		int steps = 0;

		/* run 3 steps at each size, the last size to the end */
		for (int phase = 0; phase < 3; phase++) {
			int size = sizes[si][phase];

			for (int k = 0; consumed < e && (phase == 2 || k < 3);
			     k++) {
				uint64_t taken = 0, before = consumed;

				for (int r = 0; r < size; r++) {
					size_t n = ckpt_sampler_batch(
						e, consumed, r, size, batch, pos);

					for (size_t x = 0; x < n; x++) {
						if (pos[x] >= e ||
						    pos[x] < consumed)
							bad++;
						else
							seen[pos[x]]++;
					}
					taken += n;
				}
				consumed = ckpt_sampler_advance(e, consumed,
								size, batch);
				if (taken != consumed - before)
					bad++;
				steps++;
				if (steps > 10000)
					break;
			}
		}
		for (uint64_t x = 0; x < e; x++)
			bad += seen[x] != 1;
		bad += consumed != e;
		free(seen);
		runs++;
	}
	is_int(bad, 0, "%d runs over size changes: every sample of the "
	       "epoch exactly once", runs);
	is_int(ckpt_sampler_advance(10, 8, 4, 3), 10, "advance stops at the "
	       "end of the epoch");
	is_int(ckpt_sampler_batch(10, 8, 2, 4, 3, pos), 0,
	       "a rank past the end takes nothing");
	is_int(ckpt_sampler_batch(10, 8, 1, 4, 3, pos), 1, "the last short "
	       "step: rank 1 takes one");
	is_int(pos[0], 9, "position 9");
	is_int(ckpt_sampler_batch(10, 0, 1, 4, 3, pos), 3, "rank 1 of 4, "
	       "batch 3: three positions");
	ok(pos[0] == 1 && pos[1] == 5 && pos[2] == 9, "1, 5, 9");
}

int main(void)
{
	test_roundtrip();
	test_semantics();
	test_names();
	test_retention();
	test_counts();
	test_shard_range();
	test_shard_plan();
	test_shard_format();
	test_sampler();
	return done_testing();
}

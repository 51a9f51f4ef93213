/*
 * ckpt_manifest.c - manifest text format, directory names and retention
 * planning (pure functions, see ckpt_manifest.h).
 *
 * The manifest is line-based text so that people can read it (cat, hvd-ckpt
 * show) and so that a torn or edited one is easy to detect:
 *
 *	hvd-checkpoint 1
 *	step 100
 *	world_size 2
 *	created 1764480000
 *	job 4242
 *	replicated_bytes 4096
 *	per_rank_bytes 16
 *	buffers 2
 *	buffer replicated weights 0 4096
 *	buffer per-rank rng 0 16
 *	files 3
 *	file replicated.bin 4096 0123456789abcdef
 *	file rank-00000.bin 16 ...
 *	file rank-00001.bin 16 ...
 *	meta 5 x68656c6c6f
 *	checksum 0123456789abcdef
 *
 * Format 2 (written only when there are sharded buffers) has a line
 * "sharded_bytes N" after per_rank_bytes, buffer lines
 * "buffer sharded NAME OFFSET BYTES ELEM" (offset and bytes in the
 * concatenation of the global arrays, ELEM bytes per element, the unit of
 * the split) and, after the rank files, "file shard-00000.bin ..." for
 * every rank, each holding that rank's blocks of the sharded arrays.
 *
 * Keys come in exactly this order, separated by one space, every line ends
 * with '\n', numbers are plain decimal, hashes 16 lower-case hex digits
 * (XXH3 64-bit).  The last line checksums every byte before it.  Anything
 * else is HVD_ERR_CORRUPT with the line number: a parser that accepts
 * "almost right" would let a torn checkpoint be loaded.
 */
#include "config.h"

#include "ckpt/core/ckpt_manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void ckpt_fmt(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
}

int ckpt_name_valid(const char *name)
{
	size_t n;

	if (!name)
		return 0;
	n = strlen(name);
	if (n == 0 || n > CKPT_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr("_.:/+-", c)))
			return 0;
	}
	return 1;
}

void ckpt_rank_file(char *buf, size_t n, int rank)
{
	ckpt_fmt(buf, n, "rank-%05d.bin", rank);
}

void ckpt_shard_file(char *buf, size_t n, int rank)
{
	ckpt_fmt(buf, n, "shard-%05d.bin", rank);
}

/* Every writer's shard file size at once: O(buffers + ranks), since a
 * forged manifest may list a million of each (the checksum is no MAC).
 * Writer j holds q*elem bytes of every buffer, plus elem more of those
 * whose remainder exceeds j: a suffix sum over the remainders. */
static hvd_status_t shard_sizes(const struct ckpt_manifest *m,
				uint64_t **sizes)
{
	const size_t nw = (size_t)m->world_size;
	uint64_t *extra, base = 0, run = 0;

	*sizes = NULL;
	extra = calloc(nw + 1, sizeof(*extra));
	if (!extra)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "checkpoint manifest: out of memory");
	for (size_t i = 0; i < m->nbuffers; i++) {
		const struct ckpt_buffer *b = &m->buffers[i];
		uint64_t count;

		if (b->kind != HVD_CKPT_SHARDED || b->elem == 0)
			continue;
		count = b->bytes / b->elem;
		base += count / nw * b->elem;
		extra[count % nw] += b->elem;
	}
	/* extra[k] += extra[k+1] ...: sizes[j] = base + sum over k > j */
	for (size_t k = nw; k-- > 0;) {
		uint64_t e = extra[k];

		extra[k] = base + run;
		run += e;
	}
	*sizes = extra;
	return HVD_OK;
}

hvd_status_t ckpt_manifest_layout(struct ckpt_manifest *m)
{
	size_t n = 0, i = 0;

	if (m->replicated_bytes)
		n++;
	if (m->per_rank_bytes)
		n += (size_t)m->world_size;
	if (m->sharded_bytes)
		n += (size_t)m->world_size;
	free(m->files);
	m->files = NULL;
	m->nfiles = 0;
	if (n == 0)
		return HVD_OK;
	m->files = calloc(n, sizeof(*m->files));
	if (!m->files)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "checkpoint manifest: out of memory for %zu files",
				 n);
	if (m->replicated_bytes) {
		ckpt_fmt(m->files[i].name, sizeof(m->files[i].name), "%s",
			 CKPT_REPLICATED_FILE);
		m->files[i++].size = m->replicated_bytes;
	}
	if (m->per_rank_bytes) {
		for (int r = 0; r < m->world_size; r++) {
			ckpt_rank_file(m->files[i].name,
				       sizeof(m->files[i].name), r);
			m->files[i++].size = m->per_rank_bytes;
		}
	}
	if (m->sharded_bytes) {
		uint64_t *sizes;
		hvd_status_t st = shard_sizes(m, &sizes);

		if (st != HVD_OK) {
			free(m->files);
			m->files = NULL;
			return st;
		}
		for (int r = 0; r < m->world_size; r++) {
			ckpt_shard_file(m->files[i].name,
					sizeof(m->files[i].name), r);
			m->files[i++].size = sizes[r];
		}
		free(sizes);
	}
	m->nfiles = n;
	return HVD_OK;
}

/* ------------------------------------------------------------------ format */

struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
};

static void sb_grow(struct sbuf *b, size_t need)
{
	char *np;
	size_t cap;

	if (b->oom || b->len + need + 1 <= b->cap)
		return;
	cap = b->cap ? b->cap : 1024;
	while (cap < b->len + need + 1)
		cap *= 2;
	np = realloc(b->p, cap);
	if (!np) {
		b->oom = 1;
		return;
	}
	b->p = np;
	b->cap = cap;
}

static void HVD_PRINTF(2, 3) sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	sb_grow(b, (size_t)n);
	if (b->oom)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static const char *kind_name(hvd_ckpt_kind_t kind)
{
	return kind == HVD_CKPT_PER_RANK ? "per-rank"
	       : kind == HVD_CKPT_SHARDED ? "sharded" : "replicated";
}

hvd_status_t ckpt_manifest_format(const struct ckpt_manifest *m, char **text,
				  size_t *len)
{
	static const char hex[] = "0123456789abcdef";
	struct sbuf b = { 0 };
	uint64_t sum;

	int sharded = m->sharded_bytes != 0;

	sb_printf(&b, "%s %d\n", CKPT_MAGIC,
		  sharded ? CKPT_FORMAT_SHARDED : CKPT_FORMAT_VERSION);
	sb_printf(&b, "step %ld\n", m->step);
	sb_printf(&b, "world_size %d\n", m->world_size);
	sb_printf(&b, "created %lld\n", m->created);
	sb_printf(&b, "job %s\n", m->job[0] ? m->job : "-");
	sb_printf(&b, "replicated_bytes %llu\n",
		  (unsigned long long)m->replicated_bytes);
	sb_printf(&b, "per_rank_bytes %llu\n",
		  (unsigned long long)m->per_rank_bytes);
	if (sharded)
		sb_printf(&b, "sharded_bytes %llu\n",
			  (unsigned long long)m->sharded_bytes);
	sb_printf(&b, "buffers %zu\n", m->nbuffers);
	for (size_t i = 0; i < m->nbuffers; i++) {
		sb_printf(&b, "buffer %s %s %llu %llu",
			  kind_name(m->buffers[i].kind), m->buffers[i].name,
			  (unsigned long long)m->buffers[i].offset,
			  (unsigned long long)m->buffers[i].bytes);
		if (m->buffers[i].kind == HVD_CKPT_SHARDED)
			sb_printf(&b, " %llu",
				  (unsigned long long)m->buffers[i].elem);
		sb_printf(&b, "\n");
	}
	sb_printf(&b, "files %zu\n", m->nfiles);
	for (size_t i = 0; i < m->nfiles; i++)
		sb_printf(&b, "file %s %llu %016llx\n", m->files[i].name,
			  (unsigned long long)m->files[i].size,
			  (unsigned long long)m->files[i].hash);
	sb_printf(&b, "meta %zu x", m->meta_len);
	sb_grow(&b, 2 * m->meta_len + 1);
	if (!b.oom) {
		for (size_t i = 0; i < m->meta_len; i++) {
			b.p[b.len++] = hex[m->meta[i] >> 4];
			b.p[b.len++] = hex[m->meta[i] & 15];
		}
		b.p[b.len++] = '\n';
		b.p[b.len] = '\0';
	}
	if (!b.oom) {
		sum = XXH3_64bits(b.p, b.len);
		sb_printf(&b, "checksum %016llx\n", (unsigned long long)sum);
	}
	if (b.oom) {
		free(b.p);
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "checkpoint manifest: out of memory");
	}
	*text = b.p;
	*len = b.len;
	return HVD_OK;
}

/* ------------------------------------------------------------------- parse */

struct cursor {
	const char *p, *end;
	int line;
	const char *tok[6];
	size_t tlen[6];
	int ntok;
};

static hvd_status_t bad(const struct cursor *c, const char *what)
{
	return hvd_error(HVD_ERR_CORRUPT,
			 "checkpoint manifest line %d: %s (the manifest is "
			 "damaged or not written by libhvd: this checkpoint "
			 "cannot be trusted)",
			 c->line, what);
}

/* Split the next line into space-separated tokens (at most max; the last
 * takes the rest of the line when rest is set). */
static hvd_status_t next_line(struct cursor *c, const char *key, int ntok)
{
	const char *nl, *s;

	c->line++;
	if (c->p >= c->end)
		return bad(c, key ? key : "unexpected end");
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	if (!nl)
		return bad(c, "last line not terminated (file truncated?)");
	/* printable ASCII only: a NUL or control byte would let two spellings
	 * (one the C string functions see, one on disk) pass for one */
	for (s = c->p; s < nl; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return bad(c, "a byte that is not printable ASCII");
	c->ntok = 0;
	s = c->p;
	while (s <= nl) {
		const char *e = s;

		while (e < nl && *e != ' ')
			e++;
		if (e == s)
			return bad(c, "empty field or stray space");
		if (c->ntok == 6)
			return bad(c, "too many fields");
		c->tok[c->ntok] = s;
		c->tlen[c->ntok++] = (size_t)(e - s);
		s = e + 1;
	}
	c->p = nl + 1;
	if (ntok && c->ntok != ntok) {
		char msg[128];

		ckpt_fmt(msg, sizeof(msg), "expected %d fields starting with "
			 "\"%s\", found %d", ntok, key, c->ntok);
		return bad(c, msg);
	}
	if (key && (c->tlen[0] != strlen(key) ||
		    memcmp(c->tok[0], key, c->tlen[0]) != 0)) {
		char msg[128];

		ckpt_fmt(msg, sizeof(msg), "expected key \"%s\"", key);
		return bad(c, msg);
	}
	return HVD_OK;
}

static int tok_is(const struct cursor *c, int i, const char *s)
{
	return c->tlen[i] == strlen(s) && memcmp(c->tok[i], s, c->tlen[i]) == 0;
}

/* Plain decimal, no sign, no leading zero, no overflow. */
static int parse_u64(const struct cursor *c, int i, uint64_t max,
		     uint64_t *out)
{
	uint64_t v = 0;

	if (c->tlen[i] == 0 || c->tlen[i] > 20 ||
	    (c->tok[i][0] == '0' && c->tlen[i] > 1))
		return -1;
	for (size_t k = 0; k < c->tlen[i]; k++) {
		unsigned d = (unsigned char)c->tok[i][k] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

static int parse_hash(const struct cursor *c, int i, uint64_t *out)
{
	uint64_t v = 0;

	if (c->tlen[i] != 16)
		return -1;
	for (int k = 0; k < 16; k++) {
		int d = hexval(c->tok[i][k]);

		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

static int copy_tok(const struct cursor *c, int i, char *dst, size_t n)
{
	if (c->tlen[i] >= n)
		return -1;
	memcpy(dst, c->tok[i], c->tlen[i]);
	dst[c->tlen[i]] = '\0';
	return 0;
}

/* A line "key N" with N <= max. */
static hvd_status_t num(struct cursor *c, const char *key, uint64_t max,
			uint64_t *out)
{
	char msg[96];

	HVD_CHECK(next_line(c, key, 2));
	if (parse_u64(c, 1, max, out) == 0)
		return HVD_OK;
	ckpt_fmt(msg, sizeof(msg), "bad number for \"%s\"", key);
	return bad(c, msg);
}

static hvd_status_t check_layout(struct cursor *c, struct ckpt_manifest *m)
{
	uint64_t off[3] = { 0, 0, 0 };
	struct ckpt_manifest want = *m;
	hvd_status_t st;

	for (size_t i = 0; i < m->nbuffers; i++) {
		const struct ckpt_buffer *b = &m->buffers[i];
		int k = b->kind == HVD_CKPT_PER_RANK  ? 1
			: b->kind == HVD_CKPT_SHARDED ? 2 : 0;

		if (k == 2 && (b->elem == 0 || b->bytes == 0 ||
			       b->bytes % b->elem != 0))
			return bad(c, "sharded buffer: size not a positive "
				   "multiple of its element size");
		if (b->offset != off[k])
			return bad(c, "buffer offsets are not contiguous");
		if (b->bytes > UINT64_MAX - off[k])
			return bad(c, "buffer size overflows");
		off[k] += b->bytes;
		for (size_t j = 0; j < i; j++)
			if (strcmp(m->buffers[j].name, b->name) == 0)
				return bad(c, "duplicate buffer name");
	}
	if (off[0] != m->replicated_bytes || off[1] != m->per_rank_bytes ||
	    off[2] != m->sharded_bytes)
		return bad(c, "buffer sizes do not add up to replicated_bytes, "
			   "per_rank_bytes and sharded_bytes");
	/* the count first: world_size alone must not size an allocation
	 * (the checksum is no MAC: a forged manifest passes it), nfiles is
	 * bounded by the bytes of the file */
	if ((m->replicated_bytes ? 1u : 0u) +
		    (m->per_rank_bytes ? (size_t)m->world_size : 0u) +
		    (m->sharded_bytes ? (size_t)m->world_size : 0u) !=
	    m->nfiles)
		return bad(c, "wrong number of files for world_size and sizes");
	want.files = NULL;
	want.nfiles = 0;
	st = ckpt_manifest_layout(&want);
	if (st != HVD_OK)
		return st;
	if (want.nfiles != m->nfiles) {
		free(want.files);
		return bad(c, "wrong number of files for world_size and sizes");
	}
	for (size_t i = 0; i < m->nfiles; i++) {
		if (strcmp(want.files[i].name, m->files[i].name) != 0 ||
		    want.files[i].size != m->files[i].size) {
			free(want.files);
			return bad(c, "file list does not match world_size "
				   "and sizes");
		}
	}
	free(want.files);
	return HVD_OK;
}

/* The lines before the buffers: version, step, world, time, job, sizes. */
static hvd_status_t parse_header(struct cursor *c, struct ckpt_manifest *m)
{
	uint64_t v;

	HVD_CHECK(next_line(c, CKPT_MAGIC, 2));
	if (parse_u64(c, 1, 1000, &v))
		return bad(c, "bad format version");
	if (v != CKPT_FORMAT_VERSION && v != CKPT_FORMAT_SHARDED)
		return hvd_error(HVD_ERR_CORRUPT,
				 "checkpoint manifest: format version %llu, this "
				 "libhvd reads versions %d and %d (use the libhvd "
				 "that wrote it)",
				 (unsigned long long)v, CKPT_FORMAT_VERSION,
				 CKPT_FORMAT_SHARDED);
	m->version = (int)v;
	HVD_CHECK(num(c, "step", CKPT_STEP_MAX, &v));
	m->step = (long)v;
	HVD_CHECK(num(c, "world_size", CKPT_WORLD_MAX, &v));
	m->world_size = (int)v;
	if (m->world_size < 1)
		return bad(c, "world_size must be at least 1");
	HVD_CHECK(num(c, "created", (uint64_t)INT64_MAX, &v));
	m->created = (long long)v;
	HVD_CHECK(next_line(c, "job", 2));
	if (copy_tok(c, 1, m->job, sizeof(m->job)))
		return bad(c, "job id too long");
	HVD_CHECK(num(c, "replicated_bytes", UINT64_MAX, &m->replicated_bytes));
	HVD_CHECK(num(c, "per_rank_bytes", UINT64_MAX, &m->per_rank_bytes));
	if (m->version == CKPT_FORMAT_SHARDED) {
		HVD_CHECK(num(c, "sharded_bytes", UINT64_MAX,
			      &m->sharded_bytes));
		/* one spelling: without sharded buffers it is format 1 */
		if (m->sharded_bytes == 0)
			return bad(c, "format 2 without sharded bytes");
	}
	return HVD_OK;
}

/* Counts are read before anything is checksummed: bound each by the lines
 * the bytes left could hold before allocating for it, so that a short
 * file claiming a million entries is refused at once, not after a large
 * allocation (the shortest lines are "buffer per-rank a 0 0" and "file a
 * 0 " with 16 hex digits). */
#define MIN_BUFFER_LINE 22
#define MIN_FILE_LINE 26

static hvd_status_t fits(struct cursor *c, uint64_t n, const char *what,
			 size_t min_line)
{
	size_t left = (size_t)(c->end - c->p);
	char msg[128];

	if (n <= left / min_line)
		return HVD_OK;
	ckpt_fmt(msg, sizeof(msg), "%llu %s cannot fit in the %zu bytes left",
		 (unsigned long long)n, what, left);
	return bad(c, msg);
}

static hvd_status_t parse_buffers(struct cursor *c, struct ckpt_manifest *m)
{
	uint64_t n;

	HVD_CHECK(num(c, "buffers", 1000000, &n));
	HVD_CHECK(fits(c, n, "buffers", MIN_BUFFER_LINE));
	if (n) {
		m->buffers = calloc(n, sizeof(*m->buffers));
		if (!m->buffers)
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "checkpoint manifest: out of memory");
	}
	m->nbuffers = (size_t)n;
	for (size_t i = 0; i < m->nbuffers; i++) {
		struct ckpt_buffer *b = &m->buffers[i];

		HVD_CHECK(next_line(c, "buffer", 0));
		if (c->ntok < 2)
			return bad(c, "buffer line without a kind");
		if (tok_is(c, 1, "replicated"))
			b->kind = HVD_CKPT_REPLICATED;
		else if (tok_is(c, 1, "per-rank"))
			b->kind = HVD_CKPT_PER_RANK;
		else if (tok_is(c, 1, "sharded") &&
			 m->version == CKPT_FORMAT_SHARDED)
			b->kind = HVD_CKPT_SHARDED;
		else
			return bad(c, "buffer kind is not replicated/per-rank"
				   "/sharded (sharded: format 2 only)");
		if (c->ntok != (b->kind == HVD_CKPT_SHARDED ? 6 : 5))
			return bad(c, b->kind == HVD_CKPT_SHARDED
				   ? "expected 6 fields in a sharded buffer line"
				   : "expected 5 fields in a buffer line");
		if (b->kind == HVD_CKPT_SHARDED &&
		    parse_u64(c, 5, UINT64_MAX, &b->elem))
			return bad(c, "bad element size");
		if (copy_tok(c, 2, b->name, sizeof(b->name)) ||
		    !ckpt_name_valid(b->name))
			return bad(c, "bad buffer name");
		if (parse_u64(c, 3, UINT64_MAX, &b->offset) ||
		    parse_u64(c, 4, UINT64_MAX, &b->bytes))
			return bad(c, "bad buffer offset or size");
	}
	return HVD_OK;
}

static hvd_status_t parse_files(struct cursor *c, struct ckpt_manifest *m)
{
	uint64_t n;

	HVD_CHECK(num(c, "files", 2000000, &n));
	HVD_CHECK(fits(c, n, "files", MIN_FILE_LINE));
	if (n) {
		m->files = calloc(n, sizeof(*m->files));
		if (!m->files)
			return hvd_error(HVD_ERR_NO_MEMORY,
					 "checkpoint manifest: out of memory");
	}
	m->nfiles = (size_t)n;
	for (size_t i = 0; i < m->nfiles; i++) {
		struct ckpt_file *f = &m->files[i];

		HVD_CHECK(next_line(c, "file", 4));
		if (copy_tok(c, 1, f->name, sizeof(f->name)) ||
		    parse_u64(c, 2, UINT64_MAX, &f->size) ||
		    parse_hash(c, 3, &f->hash))
			return bad(c, "bad file entry");
	}
	return HVD_OK;
}

/* Hex with an 'x' in front, so that an empty blob is "meta 0 x". */
static hvd_status_t parse_meta(struct cursor *c, struct ckpt_manifest *m)
{
	uint64_t v;

	HVD_CHECK(next_line(c, "meta", 3));
	if (parse_u64(c, 1, CKPT_META_MAX, &v) || c->tlen[2] != 2 * v + 1 ||
	    c->tok[2][0] != 'x')
		return bad(c, "bad meta length or encoding");
	m->meta = malloc(v ? (size_t)v : 1);
	if (!m->meta)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "checkpoint manifest: out of memory");
	m->meta_len = (size_t)v;
	for (size_t i = 0; i < m->meta_len; i++) {
		int hi = hexval(c->tok[2][1 + 2 * i]);
		int lo = hexval(c->tok[2][2 + 2 * i]);

		if (hi < 0 || lo < 0)
			return bad(c, "bad hex digit in meta");
		m->meta[i] = (unsigned char)(hi << 4 | lo);
	}
	return HVD_OK;
}

/* The last line: the checksum of every byte before it, then nothing. */
static hvd_status_t parse_checksum(struct cursor *c, const char *text)
{
	const char *sum_start = c->p;
	uint64_t want;

	HVD_CHECK(next_line(c, "checksum", 2));
	if (parse_hash(c, 1, &want))
		return bad(c, "bad checksum field");
	if (XXH3_64bits(text, (size_t)(sum_start - text)) != want)
		return bad(c, "checksum mismatch (manifest edited or torn)");
	if (c->p != c->end) {
		c->line++;
		return bad(c, "data after the checksum line");
	}
	return HVD_OK;
}

hvd_status_t ckpt_manifest_parse(const char *text, size_t len,
				 struct ckpt_manifest *m)
{
	struct cursor c = { .p = text, .end = text + len };
	hvd_status_t st;

	memset(m, 0, sizeof(*m));
	if (len > CKPT_MANIFEST_MAX)
		return bad(&c, "manifest too large");
	HVD_CHECK_GOTO(parse_header(&c, m), st, err);
	HVD_CHECK_GOTO(parse_buffers(&c, m), st, err);
	HVD_CHECK_GOTO(parse_files(&c, m), st, err);
	HVD_CHECK_GOTO(parse_meta(&c, m), st, err);
	HVD_CHECK_GOTO(parse_checksum(&c, text), st, err);
	HVD_CHECK_GOTO(check_layout(&c, m), st, err);
	return HVD_OK;
err:
	ckpt_manifest_free(m);
	return st;
}

void ckpt_manifest_free(struct ckpt_manifest *m)
{
	free(m->buffers);
	free(m->files);
	free(m->meta);
	m->buffers = NULL;
	m->files = NULL;
	m->meta = NULL;
	m->nbuffers = m->nfiles = m->meta_len = 0;
}

const struct ckpt_file *ckpt_manifest_file(const struct ckpt_manifest *m,
					   const char *name)
{
	for (size_t i = 0; i < m->nfiles; i++)
		if (strcmp(m->files[i].name, name) == 0)
			return &m->files[i];
	return NULL;
}

/* ------------------------------------------------------------------- names */

void ckpt_dir_name(char *buf, size_t n, long step, const char *partial_tag)
{
	if (partial_tag)
		ckpt_fmt(buf, n, "step-%08ld.partial-%s", step, partial_tag);
	else
		ckpt_fmt(buf, n, "step-%08ld", step);
}

enum ckpt_dir_kind ckpt_dir_parse(const char *name, long *step,
				  const char **tag)
{
	const char *p = name + 5;
	long v = 0;
	int digits = 0;

	if (strncmp(name, "step-", 5) != 0)
		return CKPT_DIR_OTHER;
	while (*p >= '0' && *p <= '9') {
		if (++digits > 11)
			return CKPT_DIR_OTHER;
		v = v * 10 + (*p++ - '0');
	}
	if (digits < 8)
		return CKPT_DIR_OTHER;
	*step = v;
	if (*p == '\0') {
		if (tag)
			*tag = NULL;
		return CKPT_DIR_FINAL;
	}
	if (strncmp(p, ".partial-", 9) == 0 && p[9] != '\0') {
		if (tag)
			*tag = p + 9;
		return CKPT_DIR_PARTIAL;
	}
	return CKPT_DIR_OTHER;
}

/* --------------------------------------------------------------- retention */

static int entry_cmp(const void *a, const void *b)
{
	const struct ckpt_entry *x = a, *y = b;

	if (x->step != y->step)
		return x->step > y->step ? -1 : 1;
	if (x->state != y->state)
		return x->state < y->state ? -1 : 1;
	return strcmp(x->name, y->name);
}

void ckpt_entries_sort(struct ckpt_entry *e, size_t n)
{
	if (n > 1)
		qsort(e, n, sizeof(*e), entry_cmp);
}

size_t ckpt_retention_plan(struct ckpt_entry *e, size_t n, int keep,
			   long protect_step)
{
	size_t marked = 0;
	int kept = 0;
	long oldest_kept = -1;

	if (keep < 1)
		keep = 1;
	ckpt_entries_sort(e, n);
	for (size_t i = 0; i < n; i++) {
		e[i].remove = 0;
		if (e[i].state != CKPT_COMPLETE)
			continue;
		if (kept < keep || (kept == 0) ||
		    e[i].step == protect_step) {
			kept++;
			oldest_kept = e[i].step;
		} else {
			e[i].remove = 1;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (e[i].state == CKPT_PARTIAL && !e[i].own)
			e[i].remove = 1;
		if (e[i].state == CKPT_INCOMPLETE && oldest_kept >= 0 &&
		    e[i].step < oldest_kept)
			e[i].remove = 1;
		marked += (size_t)e[i].remove;
	}
	return marked;
}

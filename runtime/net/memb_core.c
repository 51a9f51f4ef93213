/*
 * memb_core.c - the elastic agreement's messages and decisions (pure; the
 * contract is net/memb_core.h).
 *
 * Wire format, native byte order (a job runs on one architecture):
 *
 *   header   u32 magic, u16 type, u16 version, u32 epoch, i32 sender,
 *            u32 total length
 *   peer     i32 old_rank, pid, pmix_local_rank, pmix_rank, u32 pidns
 *            low and high half; str node_key, str nspace, bytes addr
 *   PROPOSE  header, i32 nranks, bytes failed, quiet and doubt bitmaps,
 *            peer
 *   DECIDE   header, i32 status, i32 min_size, str world, i32 n, n x peer
 *   JOIN     header, 16 token bytes, str jobid, i32 step_size,
 *            i32 step_rank, bytes reply address, peer
 *   REMOVED  header, str reason
 *   HELLO    header
 *
 * str and bytes are a u32 length and the bytes (no terminator on the
 * wire); every decoder checks each length against what is left and
 * against the field it fills.
 */
#include "config.h"

#include "net/memb_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct memb_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t version;
	uint32_t epoch;
	int32_t sender;
	uint32_t len;
};

/* ------------------------------------------------------------ writing */

void memb_buf_free(struct memb_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static void put(struct memb_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *q;

		while (cap < b->len + n)
			cap *= 2;
		q = realloc(b->p, cap);
		if (!q) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void put_u32(struct memb_buf *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

static void put_i32(struct memb_buf *b, int32_t v)
{
	put(b, &v, sizeof(v));
}

static void put_bytes(struct memb_buf *b, const void *p, uint32_t n)
{
	put_u32(b, n);
	put(b, p, n);
}

static void put_str(struct memb_buf *b, const char *s)
{
	put_bytes(b, s, (uint32_t)strlen(s));
}

static void begin(struct memb_buf *b, int type, uint32_t epoch,
		  int32_t sender)
{
	struct memb_hdr h = {MEMB_MAGIC, (uint16_t)type, MEMB_VERSION, epoch,
			     sender, 0};

	b->len = 0;
	b->oom = 0;
	put(b, &h, sizeof(h));
}

static hvd_status_t finish(struct memb_buf *b)
{
	uint32_t len = (uint32_t)b->len;

	if (b->oom)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: elastic: out of memory for a message");
	memcpy(b->p + offsetof(struct memb_hdr, len), &len, sizeof(len));
	return HVD_OK;
}

static hvd_status_t check_peer(const struct memb_peer *p)
{
	if (strnlen(p->node_key, sizeof(p->node_key)) >= sizeof(p->node_key) ||
	    strnlen(p->nspace, sizeof(p->nspace)) >= sizeof(p->nspace) ||
	    p->addr_len > MEMB_ADDR_MAX || (!p->addr && p->addr_len))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: a member record does not fit "
				 "the message format");
	return HVD_OK;
}

static void put_peer(struct memb_buf *b, const struct memb_peer *p)
{
	put_i32(b, p->old_rank);
	put_i32(b, p->pid);
	put_i32(b, p->pmix_local_rank);
	put_i32(b, p->pmix_rank);
	put_u32(b, (uint32_t)p->pidns);
	put_u32(b, (uint32_t)(p->pidns >> 32));
	put_str(b, p->node_key);
	put_str(b, p->nspace);
	put_bytes(b, p->addr, p->addr_len);
}

hvd_status_t memb_encode_propose(struct memb_buf *b,
				 const struct memb_propose *m)
{
	if (m->nranks <= 0 || m->nranks > MEMB_MAX_RANKS)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: %d ranks", (int)m->nranks);
	if (!m->failed || !m->quiet || !m->doubt)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: a proposal without its sets");
	HVD_CHECK(check_peer(&m->self));
	begin(b, MEMB_PROPOSE, m->epoch, m->sender);
	put_i32(b, m->nranks);
	put_bytes(b, m->failed, (uint32_t)((m->nranks + 7) / 8));
	put_bytes(b, m->quiet, (uint32_t)((m->nranks + 7) / 8));
	put_bytes(b, m->doubt, (uint32_t)((m->nranks + 7) / 8));
	put_peer(b, &m->self);
	return finish(b);
}

hvd_status_t memb_encode_decide(struct memb_buf *b,
				const struct memb_decide *m)
{
	if (m->n < 0 || m->n > MEMB_MAX_RANKS ||
	    strnlen(m->world, sizeof(m->world)) >= sizeof(m->world))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: a decision of %d ranks does "
				 "not fit the message format",
				 (int)m->n);
	for (int i = 0; i < m->n; i++)
		HVD_CHECK(check_peer(&m->peers[i]));
	begin(b, MEMB_DECIDE, m->epoch, m->sender);
	put_i32(b, m->status);
	put_i32(b, m->min_size);
	put_str(b, m->world);
	put_i32(b, m->n);
	for (int i = 0; i < m->n; i++)
		put_peer(b, &m->peers[i]);
	return finish(b);
}

hvd_status_t memb_encode_join(struct memb_buf *b, uint32_t epoch,
			      const struct memb_join *m)
{
	if (strnlen(m->jobid, sizeof(m->jobid)) >= sizeof(m->jobid) ||
	    m->reply_addr_len > MEMB_ADDR_MAX ||
	    (!m->reply_addr && m->reply_addr_len))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: a join request does not fit "
				 "the message format");
	HVD_CHECK(check_peer(&m->self));
	begin(b, MEMB_JOIN, epoch, -1);
	put(b, m->token, MEMB_TOKEN_BYTES);
	put_str(b, m->jobid);
	put_i32(b, m->step_size);
	put_i32(b, m->step_rank);
	put_bytes(b, m->reply_addr, m->reply_addr_len);
	put_peer(b, &m->self);
	return finish(b);
}

hvd_status_t memb_encode_removed(struct memb_buf *b, uint32_t epoch,
				 int32_t sender, const char *reason)
{
	char r[MEMB_REASON_MAX];

	snprintf(r, sizeof(r), "%s", reason ? reason : "");
	begin(b, MEMB_REMOVED, epoch, sender);
	put_str(b, r);
	return finish(b);
}

hvd_status_t memb_encode_hello(struct memb_buf *b, uint32_t epoch,
			       int32_t sender)
{
	begin(b, MEMB_HELLO, epoch, sender);
	return finish(b);
}

/* ------------------------------------------------------------ reading */

struct rd {
	const uint8_t *p;
	size_t len, off;
	int bad;
};

static const void *take(struct rd *r, size_t n)
{
	const void *q;

	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	q = r->p + r->off;
	r->off += n;
	return q;
}

static int32_t get_i32(struct rd *r)
{
	const void *q = take(r, 4);
	int32_t v = 0;

	if (q)
		memcpy(&v, q, 4);
	return v;
}

static uint32_t get_u32(struct rd *r)
{
	return (uint32_t)get_i32(r);
}

/* A string into dst[max]: refused when it does not fit with its
 * terminator, or holds a NUL. */
static void get_str(struct rd *r, char *dst, size_t max)
{
	uint32_t n = get_u32(r);
	const char *q;

	if (r->bad || n >= max) {
		r->bad = 1;
		return;
	}
	q = take(r, n);
	if (!q)
		return;
	if (memchr(q, '\0', n)) {
		r->bad = 1;
		return;
	}
	memcpy(dst, q, n);
	dst[n] = '\0';
}

/* A UCX address (at most MEMB_ADDR_MAX bytes), malloc'ed. */
static void get_addr(struct rd *r, void **addr, uint32_t *addr_len)
{
	uint32_t n = get_u32(r);
	const void *q;

	if (r->bad || n > MEMB_ADDR_MAX) {
		r->bad = 1;
		return;
	}
	q = take(r, n);
	if (!q)
		return;
	*addr = malloc(n ? n : 1);
	if (!*addr) {
		r->bad = 2; /* out of memory */
		return;
	}
	memcpy(*addr, q, n);
	*addr_len = n;
}

static void get_peer(struct rd *r, struct memb_peer *p)
{
	memset(p, 0, sizeof(*p));
	p->old_rank = get_i32(r);
	p->pid = get_i32(r);
	p->pmix_local_rank = get_i32(r);
	p->pmix_rank = get_i32(r);
	p->pidns = get_u32(r);
	p->pidns |= (uint64_t)get_u32(r) << 32;
	get_str(r, p->node_key, sizeof(p->node_key));
	get_str(r, p->nspace, sizeof(p->nspace));
	get_addr(r, &p->addr, &p->addr_len);
}

int memb_type_of(const void *msg, size_t len)
{
	struct memb_hdr h;

	if (!msg || len < sizeof(h))
		return -1;
	memcpy(&h, msg, sizeof(h));
	if (h.magic != MEMB_MAGIC || h.version != MEMB_VERSION ||
	    h.len != len || h.type == 0 || h.type >= MEMB_NTYPES)
		return -1;
	return h.type;
}

static hvd_status_t open_rd(struct rd *r, const void *msg, size_t len,
			    int type, struct memb_hdr *h)
{
	if (memb_type_of(msg, len) != type)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: a message that is not a valid "
				 "message of type %d (%zu bytes)",
				 type, len);
	r->p = msg;
	r->len = len;
	r->off = sizeof(*h);
	r->bad = 0;
	memcpy(h, msg, sizeof(*h));
	return HVD_OK;
}

static hvd_status_t close_rd(struct rd *r, const char *what)
{
	if (r->bad == 2)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: elastic: out of memory reading a %s",
				 what);
	if (r->bad || r->off != r->len)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: elastic: a malformed %s (%zu bytes)",
				 what, r->len);
	return HVD_OK;
}

void memb_peer_free(struct memb_peer *p)
{
	free(p->addr);
	p->addr = NULL;
	p->addr_len = 0;
}

hvd_status_t memb_peer_copy(struct memb_peer *dst, const struct memb_peer *src)
{
	*dst = *src;
	dst->addr = malloc(src->addr_len ? src->addr_len : 1);
	if (!dst->addr) {
		dst->addr_len = 0;
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	if (src->addr_len)
		memcpy(dst->addr, src->addr, src->addr_len);
	return HVD_OK;
}

hvd_status_t memb_decode_propose(const void *msg, size_t len,
				 struct memb_propose *m)
{
	struct memb_hdr h = {0};
	struct rd r = {0};
	uint8_t **sets[3] = {&m->failed, &m->quiet, &m->doubt};
	hvd_status_t st;

	memset(m, 0, sizeof(*m));
	HVD_CHECK(open_rd(&r, msg, len, MEMB_PROPOSE, &h));
	m->epoch = h.epoch;
	m->sender = h.sender;
	m->nranks = get_i32(&r);
	if (m->nranks <= 0 || m->nranks > MEMB_MAX_RANKS || h.sender < 0 ||
	    h.sender >= m->nranks)
		r.bad = 1;
	for (int i = 0; i < 3 && !r.bad; i++) {
		uint32_t nb = get_u32(&r);
		const void *q;

		if (nb != (uint32_t)((m->nranks + 7) / 8))
			r.bad = 1;
		q = take(&r, r.bad ? 0 : nb);
		if (!q)
			break;
		*sets[i] = malloc(nb);
		if (*sets[i])
			memcpy(*sets[i], q, nb);
		else
			r.bad = 2;
	}
	if (!r.bad)
		get_peer(&r, &m->self);
	st = close_rd(&r, "proposal");
	if (st != HVD_OK)
		memb_propose_free(m);
	return st;
}

void memb_propose_free(struct memb_propose *m)
{
	free(m->failed);
	free(m->quiet);
	free(m->doubt);
	m->failed = m->quiet = m->doubt = NULL;
	memb_peer_free(&m->self);
}

hvd_status_t memb_decode_decide(const void *msg, size_t len,
				struct memb_decide *m)
{
	struct memb_hdr h = {0};
	struct rd r = {0};
	hvd_status_t st;

	memset(m, 0, sizeof(*m));
	HVD_CHECK(open_rd(&r, msg, len, MEMB_DECIDE, &h));
	m->epoch = h.epoch;
	m->sender = h.sender;
	m->status = get_i32(&r);
	m->min_size = get_i32(&r);
	get_str(&r, m->world, sizeof(m->world));
	m->n = get_i32(&r);
	/* Each record takes at least 28 bytes: no count past the message. */
	if (m->n < 0 || m->n > MEMB_MAX_RANKS ||
	    (size_t)m->n > (r.len - r.off) / 28)
		r.bad = 1;
	if (!r.bad) {
		m->peers = calloc((size_t)(m->n ? m->n : 1), sizeof(*m->peers));
		if (!m->peers)
			r.bad = 2;
	}
	for (int i = 0; !r.bad && i < m->n; i++)
		get_peer(&r, &m->peers[i]);
	st = close_rd(&r, "decision");
	if (st != HVD_OK)
		memb_decide_free(m);
	return st;
}

void memb_decide_free(struct memb_decide *m)
{
	for (int i = 0; m->peers && i < m->n; i++)
		memb_peer_free(&m->peers[i]);
	free(m->peers);
	m->peers = NULL;
	m->n = 0;
}

hvd_status_t memb_decode_join(const void *msg, size_t len, uint32_t *epoch,
			      struct memb_join *m)
{
	struct memb_hdr h = {0};
	struct rd r = {0};
	const void *q;
	hvd_status_t st;

	memset(m, 0, sizeof(*m));
	HVD_CHECK(open_rd(&r, msg, len, MEMB_JOIN, &h));
	*epoch = h.epoch;
	q = take(&r, MEMB_TOKEN_BYTES);
	if (q)
		memcpy(m->token, q, MEMB_TOKEN_BYTES);
	get_str(&r, m->jobid, sizeof(m->jobid));
	m->step_size = get_i32(&r);
	m->step_rank = get_i32(&r);
	if (m->step_size <= 0 || m->step_size > MEMB_MAX_RANKS ||
	    m->step_rank < 0 || m->step_rank >= m->step_size)
		r.bad = 1;
	if (!r.bad)
		get_addr(&r, &m->reply_addr, &m->reply_addr_len);
	if (!r.bad)
		get_peer(&r, &m->self);
	if (!r.bad && m->self.old_rank != -1)
		r.bad = 1;
	st = close_rd(&r, "join request");
	if (st != HVD_OK)
		memb_join_free(m);
	return st;
}

void memb_join_free(struct memb_join *m)
{
	free(m->reply_addr);
	m->reply_addr = NULL;
	m->reply_addr_len = 0;
	memb_peer_free(&m->self);
}

hvd_status_t memb_decode_removed(const void *msg, size_t len, char *reason,
				 size_t reason_len)
{
	struct memb_hdr h;
	char buf[MEMB_REASON_MAX];
	struct rd r;

	buf[0] = '\0';
	HVD_CHECK(open_rd(&r, msg, len, MEMB_REMOVED, &h));
	get_str(&r, buf, sizeof(buf));
	HVD_CHECK(close_rd(&r, "removal notice"));
	snprintf(reason, reason_len, "%s", buf);
	return HVD_OK;
}

hvd_status_t memb_decode_hello(const void *msg, size_t len, uint32_t *epoch,
			       int32_t *sender)
{
	struct memb_hdr h = {0};
	struct rd r = {0};

	HVD_CHECK(open_rd(&r, msg, len, MEMB_HELLO, &h));
	*epoch = h.epoch;
	*sender = h.sender;
	return close_rd(&r, "hello");
}

/* ---------------------------------------------------------- decisions */

int memb_quorum(int nranks, const uint8_t *out, const uint8_t *quiet,
		const uint8_t *in)
{
	int alive = 0, kept = 0, lowest = -1;

	for (int r = 0; r < nranks; r++) {
		if (memb_bit(out, r) && !memb_bit(quiet, r))
			continue; /* known dead: no side has it */
		alive++;
		if (lowest < 0)
			lowest = r;
		kept += memb_bit(in, r);
	}
	if (2 * kept != alive)
		return 2 * kept > alive;
	return lowest >= 0 && memb_bit(in, lowest);
}

int memb_coordinator(const uint8_t *failed, int n)
{
	for (int r = 0; r < n; r++)
		if (!memb_bit(failed, r))
			return r;
	return -1;
}

hvd_status_t memb_order(int nranks, const uint8_t *failed,
			struct memb_peer *const *survivors,
			struct memb_peer *const *newcomers, int nnew,
			struct memb_peer ***order, int *n)
{
	struct memb_peer **o;
	int k = 0;

	o = malloc((size_t)(nranks + nnew + 1) * sizeof(*o));
	if (!o)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int r = 0; r < nranks; r++)
		if (survivors[r] && !memb_bit(failed, r))
			o[k++] = survivors[r];
	for (int i = 0; i < nnew; i++)
		if (newcomers[i])
			o[k++] = newcomers[i];
	*order = o;
	*n = k;
	return HVD_OK;
}

int memb_step_complete(const struct memb_join *const *joins, int njoins,
		       const char *nspace, int step_size)
{
	int found = 0;

	if (step_size <= 0)
		return 0;
	for (int want = 0; want < step_size; want++) {
		int have = 0;

		for (int i = 0; i < njoins && !have; i++)
			have = joins[i] && joins[i]->step_rank == want &&
			       strcmp(joins[i]->self.nspace, nspace) == 0;
		found += have;
	}
	return found == step_size;
}

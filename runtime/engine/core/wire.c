/*
 * wire.c - the coordinator's messages: a rank's requests and the
 * coordinator's responses, as little-endian byte strings (every rank of a
 * job runs the same build on the same kind of host, so the layout is
 * simply fixed-width fields in order; strings are length-prefixed).
 *
 * Decoding never trusts a length: a truncated or malformed message marks
 * the reader bad and the caller reports HVD_ERR_INTERNAL.
 */
#include "config.h"

#include "engine/core/wire.h"

#include <stdlib.h>
#include <string.h>

void wbuf_free(struct wbuf *w)
{
	free(w->data);
	memset(w, 0, sizeof(*w));
}

static void put(struct wbuf *w, const void *p, size_t n)
{
	if (w->oom)
		return;
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		uint8_t *d;

		while (cap < w->len + n)
			cap *= 2;
		d = realloc(w->data, cap);
		if (!d) {
			w->oom = 1;
			return;
		}
		w->data = d;
		w->cap = cap;
	}
	memcpy(w->data + w->len, p, n);
	w->len += n;
}

static void get(struct rbuf *b, void *p, size_t n)
{
	if (b->bad || (size_t)(b->end - b->p) < n) {
		b->bad = 1;
		memset(p, 0, n);
		return;
	}
	memcpy(p, b->p, n);
	b->p += n;
}

void wire_put_u32(struct wbuf *w, uint32_t v) { put(w, &v, sizeof(v)); }

uint32_t wire_get_u32(struct rbuf *b)
{
	uint32_t v;

	get(b, &v, sizeof(v));
	return v;
}

static void put_str(struct wbuf *w, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) + 1 : 0;

	wire_put_u32(w, n);
	if (n)
		put(w, s, n);
}

static char *get_str(struct rbuf *b)
{
	uint32_t n = wire_get_u32(b);
	char *s;

	if (!n || b->bad)
		return NULL;
	if ((size_t)(b->end - b->p) < n || b->p[n - 1] != '\0') {
		b->bad = 1;
		return NULL;
	}
	s = malloc(n);
	if (!s) {
		b->bad = 1;
		return NULL;
	}
	memcpy(s, b->p, n);
	b->p += n;
	return s;
}

static void *get_array(struct rbuf *b, uint32_t n, size_t elem)
{
	void *a;

	if (!n || b->bad)
		return NULL;
	if ((size_t)(b->end - b->p) / elem < n) {
		b->bad = 1;
		return NULL;
	}
	a = malloc((size_t)n * elem);
	if (!a) {
		b->bad = 1;
		return NULL;
	}
	get(b, a, (size_t)n * elem);
	return a;
}

void wire_put_req(struct wbuf *w, const struct eng_req *r)
{
	put(w, &r->p, sizeof(r->p));
	put(w, &r->age, sizeof(r->age));
	wire_put_u32(w, r->group_size);
	wire_put_u32(w, r->nranks);
	if (r->nranks)
		put(w, r->ranks, r->nranks * sizeof(*r->ranks));
	wire_put_u32(w, r->ndims);
	if (r->ndims)
		put(w, r->dims, r->ndims * sizeof(*r->dims));
	put_str(w, r->name);
	put_str(w, r->group);
}

int wire_get_req(struct rbuf *b, struct eng_req *r)
{
	memset(r, 0, sizeof(*r));
	get(b, &r->p, sizeof(r->p));
	get(b, &r->age, sizeof(r->age));
	r->group_size = wire_get_u32(b);
	r->nranks = wire_get_u32(b);
	r->ranks = get_array(b, r->nranks, sizeof(*r->ranks));
	r->ndims = wire_get_u32(b);
	if (r->ndims > HVD_MAX_DIMS)
		b->bad = 1;
	r->dims = get_array(b, r->ndims, sizeof(*r->dims));
	r->name = get_str(b);
	r->group = get_str(b);
	if (b->bad || !r->name || r->p.kind >= EK_ERROR) {
		eng_req_free(r);
		b->bad = 1;
		return -1;
	}
	return 0;
}

void wire_put_resp(struct wbuf *w, const struct eng_resp *r)
{
	put(w, &r->p, sizeof(r->p));
	put(w, &r->status, sizeof(r->status));
	put(w, &r->joined, sizeof(r->joined));
	put(w, &r->last_joined, sizeof(r->last_joined));
	wire_put_u32(w, r->group_size);
	wire_put_u32(w, r->ncounts);
	if (r->ncounts)
		put(w, r->counts, r->ncounts * sizeof(*r->counts));
	wire_put_u32(w, r->nranks);
	if (r->nranks)
		put(w, r->ranks, r->nranks * sizeof(*r->ranks));
	put_str(w, r->name);
	put_str(w, r->group);
	put_str(w, r->message);
}

int wire_get_resp(struct rbuf *b, struct eng_resp *r)
{
	memset(r, 0, sizeof(*r));
	get(b, &r->p, sizeof(r->p));
	get(b, &r->status, sizeof(r->status));
	get(b, &r->joined, sizeof(r->joined));
	get(b, &r->last_joined, sizeof(r->last_joined));
	r->group_size = wire_get_u32(b);
	r->ncounts = wire_get_u32(b);
	r->counts = get_array(b, r->ncounts, sizeof(*r->counts));
	r->nranks = wire_get_u32(b);
	r->ranks = get_array(b, r->nranks, sizeof(*r->ranks));
	r->name = get_str(b);
	r->group = get_str(b);
	r->message = get_str(b);
	if (b->bad || !r->name || r->p.kind >= EK_COUNT) {
		eng_resp_free(r);
		b->bad = 1;
		return -1;
	}
	return 0;
}

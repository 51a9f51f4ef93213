/*
 * Fuzz target for the engine's wire decoder (runtime/engine/core/wire.c):
 * the requests every rank sends the coordinator and the responses it
 * broadcasts.  The first byte says which (even: requests, odd:
 * responses); the rest is decoded as a stream of them, as cycle.c does,
 * until the end or the first malformed one.
 *
 * Beyond "no crash, no leak": a refused message marks the reader bad; an
 * accepted one has a name, NUL-terminated strings, arrays exactly when
 * their counts say so and a kind in range; encoding it and decoding that
 * gives the same message, whose encoding is the same bytes again; a
 * response's deep copy encodes the same.
 *
 * libFuzzer:  make -C tests fuzz-wire (clang -fsanitize=fuzzer,...)
 * replay:     built with -DHVD_FUZZ_MAIN and replay.c (replay.h), one TAP
 *             result per file named on the command line (the corpus
 *             replay of make check);
 *             --write-seeds DIR writes the seed corpus (a few real
 *             requests and responses) into DIR.
 */
#include "config.h"

#include "engine/core/wire.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the last input gave, for the replay's TAP lines. */
static int n_ok, n_bad;

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "fuzz_wire: %s:%d: %s\n", __FILE__,    \
				__LINE__, #c);                                 \
			abort();                                               \
		}                                                              \
	} while (0)

static void check_str(const char *s)
{
	if (s)
		CHECK(strlen(s) < (size_t)1 << 31);
}

static int same_bytes(const struct wbuf *a, const struct wbuf *b)
{
	return a->len == b->len && !a->oom && !b->oom &&
	       (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static void one_req(struct rbuf *b)
{
	struct eng_req r, r2;
	struct wbuf w1 = {0}, w2 = {0};
	struct rbuf b2;

	if (wire_get_req(b, &r) != 0) {
		CHECK(b->bad);
		n_bad++;
		return;
	}
	n_ok++;
	CHECK(r.name && r.p.kind < EK_ERROR);
	CHECK((r.nranks == 0) == (r.ranks == NULL));
	check_str(r.name);
	check_str(r.group);
	wire_put_req(&w1, &r);
	b2.p = w1.data;
	b2.end = w1.data + w1.len;
	b2.bad = 0;
	CHECK(wire_get_req(&b2, &r2) == 0 && b2.p == b2.end);
	CHECK(!strcmp(r.name, r2.name) && r.nranks == r2.nranks &&
	      (!r.group) == (!r2.group) &&
	      (!r.group || !strcmp(r.group, r2.group)) &&
	      !memcmp(&r.p, &r2.p, sizeof(r.p)));
	wire_put_req(&w2, &r2);
	CHECK(same_bytes(&w1, &w2));
	eng_req_free(&r);
	eng_req_free(&r2);
	wbuf_free(&w1);
	wbuf_free(&w2);
}

static void one_resp(struct rbuf *b)
{
	struct eng_resp r, r2, c;
	struct wbuf w1 = {0}, w2 = {0}, w3 = {0};
	struct rbuf b2;

	if (wire_get_resp(b, &r) != 0) {
		CHECK(b->bad);
		n_bad++;
		return;
	}
	n_ok++;
	CHECK(r.name && r.p.kind < EK_COUNT);
	CHECK((r.nranks == 0) == (r.ranks == NULL));
	CHECK((r.ncounts == 0) == (r.counts == NULL));
	check_str(r.name);
	check_str(r.group);
	check_str(r.message);
	(void)eng_kind_name(r.p.kind);
	wire_put_resp(&w1, &r);
	b2.p = w1.data;
	b2.end = w1.data + w1.len;
	b2.bad = 0;
	CHECK(wire_get_resp(&b2, &r2) == 0 && b2.p == b2.end);
	wire_put_resp(&w2, &r2);
	CHECK(same_bytes(&w1, &w2));
	CHECK(eng_resp_copy(&c, &r) == HVD_OK);
	wire_put_resp(&w3, &c);
	CHECK(same_bytes(&w1, &w3));
	eng_resp_free(&r);
	eng_resp_free(&r2);
	eng_resp_free(&c);
	wbuf_free(&w1);
	wbuf_free(&w2);
	wbuf_free(&w3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rbuf b;
	int resp;

	n_ok = n_bad = 0;
	if (size < 1)
		return 0;
	resp = data[0] & 1;
	b.p = data + 1;
	b.end = data + size;
	b.bad = 0;
	/* at most 64 messages: a stream of tiny ones is no deeper */
	for (int i = 0; i < 64 && !b.bad && b.p < b.end; i++) {
		if (resp)
			one_resp(&b);
		else
			one_req(&b);
	}
	return 0;
}

#ifdef HVD_FUZZ_MAIN
#include "replay.h"

/* One seed: the kind byte, then the encoded messages. */
static int write_seed(const char *dir, const char *name, int resp,
		      const struct wbuf *w)
{
	unsigned char k = (unsigned char)resp;

	return fuzz_write_seed(dir, name, &k, 1, w->data, w->len);
}

/* A few messages as the engine sends them. */
static int write_seeds(const char *dir)
{
	int32_t ranks[] = {0, 2, 3};
	uint64_t counts[] = {4, 0, 7, 1};
	struct eng_req q;
	struct eng_resp s;
	struct wbuf w = {0};
	int bad = 0;

	memset(&q, 0, sizeof(q));
	q.p.kind = EK_ALLREDUCE;
	q.p.dtype = HVD_FLOAT32;
	q.p.op = HVD_AVERAGE;
	q.p.count = 1000;
	q.p.prescale = q.p.postscale = 1.0;
	q.age = 0.25;
	q.name = "DistributedOptimizer.Allreduce.grad.layer1.weight";
	wire_put_req(&w, &q);
	bad |= write_seed(dir, "req-allreduce", 0, &w);
	q.p.kind = EK_BROADCAST;
	q.p.root = 2;
	q.name = "broadcast.model.state";
	q.group_size = 3;
	q.group = "broadcast.model.a";
	wire_put_req(&w, &q); /* two in a row */
	bad |= write_seed(dir, "req-two", 0, &w);
	wbuf_free(&w);
	memset(&q, 0, sizeof(q));
	q.p.kind = EK_PSET_ADD;
	q.nranks = 3;
	q.ranks = ranks;
	q.name = "pset.add";
	wire_put_req(&w, &q);
	bad |= write_seed(dir, "req-pset-add", 0, &w);
	wbuf_free(&w);

	memset(&s, 0, sizeof(s));
	s.p.kind = EK_ALLGATHER;
	s.p.dtype = HVD_INT64;
	s.p.count = 12;
	s.ncounts = 4;
	s.counts = counts;
	s.name = "allgather.indices";
	wire_put_resp(&w, &s);
	bad |= write_seed(dir, "resp-allgather", 1, &w);
	wbuf_free(&w);
	memset(&s, 0, sizeof(s));
	s.p.kind = EK_ERROR;
	s.status = HVD_ERR_MISMATCH;
	s.name = "grad.bias";
	s.message = "mismatched count: 16 on ranks 0,2-3; 15 on rank 1";
	wire_put_resp(&w, &s);
	s.p.kind = EK_JOIN;
	s.status = 0;
	s.last_joined = 3;
	s.message = NULL;
	s.name = "join";
	wire_put_resp(&w, &s);
	bad |= write_seed(dir, "resp-error-join", 1, &w);
	wbuf_free(&w);
	memset(&s, 0, sizeof(s));
	s.p.kind = EK_PSET_ADD;
	s.p.pset = 2;
	s.nranks = 3;
	s.ranks = ranks;
	s.name = "pset.add";
	s.group_size = 2;
	s.group = "g";
	wire_put_resp(&w, &s);
	bad |= write_seed(dir, "resp-pset-add", 1, &w);
	wbuf_free(&w);
	return bad;
}

static const char *summary(void)
{
	static char s[64];

	snprintf(s, sizeof(s), "%d decoded, %d refused", n_ok, n_bad);
	return s;
}

const struct fuzz_replay fuzz_replay = {
    .summary = summary,
    .write_seeds = write_seeds,
};
#endif

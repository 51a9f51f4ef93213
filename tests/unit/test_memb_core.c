/*
 * test_memb_core.c - the elastic agreement's messages and decisions
 * (runtime/net/memb_core.c, pure): every message survives a round trip;
 * every truncation, a lying length, a string without room for its
 * terminator, a count past the message and random damage are refused
 * without reading past the buffer; the coordinator is the lowest live rank;
 * survivors come before newcomers, in old rank order; a step is let in only
 * whole.
 */
#include "net/memb_core.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fill_peer(struct memb_peer *p, int old, const char *key,
		      const char *ns, size_t alen)
{
	memset(p, 0, sizeof(*p));
	p->old_rank = old;
	p->pid = 1000 + old;
	p->pidns = 0xeffffffcull + (uint64_t)old * 0x100000001ull;
	p->pmix_local_rank = old % 2;
	p->pmix_rank = old;
	snprintf(p->node_key, sizeof(p->node_key), "%s", key);
	snprintf(p->nspace, sizeof(p->nspace), "%s", ns);
	p->addr = malloc(alen);
	for (size_t i = 0; i < alen; i++)
		((uint8_t *)p->addr)[i] = (uint8_t)(i * 7 + (size_t)old);
	p->addr_len = (uint32_t)alen;
}

static int same_peer(const struct memb_peer *a, const struct memb_peer *b)
{
	return a->old_rank == b->old_rank && a->pid == b->pid &&
	       a->pidns == b->pidns &&
	       a->pmix_local_rank == b->pmix_local_rank &&
	       a->pmix_rank == b->pmix_rank &&
	       !strcmp(a->node_key, b->node_key) &&
	       !strcmp(a->nspace, b->nspace) && a->addr_len == b->addr_len &&
	       !memcmp(a->addr, b->addr, a->addr_len);
}

/* Every prefix of msg (and msg with one byte more) is refused by dec. */
static int refuses_truncations(const struct memb_buf *b,
			       int (*dec)(const void *, size_t))
{
	uint8_t *copy = malloc(b->len + 1);
	int bad = 0;

	for (size_t n = 0; n < b->len; n++) {
		memcpy(copy, b->p, n);
		bad += dec(copy, n) == 0;
	}
	memcpy(copy, b->p, b->len);
	copy[b->len] = 0;
	bad += dec(copy, b->len + 1) == 0;
	free(copy);
	return bad == 0;
}

/* 0 when decoding succeeded. */
static int dec_propose(const void *m, size_t n)
{
	struct memb_propose p;

	if (memb_decode_propose(m, n, &p) != HVD_OK)
		return 1;
	memb_propose_free(&p);
	return 0;
}

static int dec_decide(const void *m, size_t n)
{
	struct memb_decide d;

	if (memb_decode_decide(m, n, &d) != HVD_OK)
		return 1;
	memb_decide_free(&d);
	return 0;
}

static int dec_join(const void *m, size_t n)
{
	struct memb_join j;
	uint32_t e;

	if (memb_decode_join(m, n, &e, &j) != HVD_OK)
		return 1;
	memb_join_free(&j);
	return 0;
}

/* The total length sits at bytes 16..19 of the header; a message whose
 * fields are rewritten must carry it too. */
static void set_len_field(uint8_t *m, size_t len)
{
	uint32_t l = (uint32_t)len;

	memcpy(m + 16, &l, 4);
}

static void test_propose(void)
{
	struct memb_propose p = {0}, q;
	struct memb_buf b = {0};
	uint8_t failed[2] = {0x05, 0x02}; /* ranks 0, 2, 9 */
	uint8_t quiet[2] = {0x00, 0x02};  /* 9 only went silent */
	uint8_t doubt[2] = {0x40, 0x00};  /* 6 is suspected */

	p.epoch = 7;
	p.sender = 3;
	p.nranks = 10;
	p.failed = failed;
	ok(memb_encode_propose(&b, &p) != HVD_OK,
	   "a proposal without its quiet and doubt sets is refused");
	memb_buf_free(&b);
	p.quiet = quiet;
	p.doubt = doubt;
	fill_peer(&p.self, 3, "vm#node2", "slurm.pmix.12.0", 300);
	ok(memb_encode_propose(&b, &p) == HVD_OK, "a proposal encodes");
	is_int(memb_type_of(b.p, b.len), MEMB_PROPOSE, "... as a proposal");
	ok(memb_decode_propose(b.p, b.len, &q) == HVD_OK &&
		   q.epoch == 7 && q.sender == 3 && q.nranks == 10 &&
		   !memcmp(q.failed, failed, 2) && !memcmp(q.quiet, quiet, 2) &&
		   !memcmp(q.doubt, doubt, 2) && same_peer(&q.self, &p.self),
	   "... and decodes to the same proposal");
	memb_propose_free(&q);
	ok(refuses_truncations(&b, dec_propose),
	   "every truncation of a proposal is refused");
	/* A sender outside the world it claims. */
	{
		uint8_t *m = malloc(b.len);
		int32_t bad = 12;

		memcpy(m, b.p, b.len);
		memcpy(m + 12, &bad, 4);
		ok(dec_propose(m, b.len) != 0,
		   "a proposal from rank 12 of a 10-rank world is refused");
		free(m);
	}
	memb_peer_free(&p.self);
	memb_buf_free(&b);
}

static void test_decide(void)
{
	struct memb_decide d = {0}, e;
	struct memb_buf b = {0};
	struct memb_peer peers[3];
	int good = 1;

	fill_peer(&peers[0], 0, "a#n0", "ns1", 100);
	fill_peer(&peers[1], 2, "b#n1", "ns1", 1);
	fill_peer(&peers[2], -1, "c#n2", "ns2", 0);
	d.epoch = 8;
	d.sender = 0;
	d.status = HVD_OK;
	d.min_size = 2;
	snprintf(d.world, sizeof(d.world), "ns1@8");
	d.n = 3;
	d.peers = peers;
	ok(memb_encode_decide(&b, &d) == HVD_OK, "a decision encodes");
	ok(memb_decode_decide(b.p, b.len, &e) == HVD_OK && e.n == 3 &&
		   e.epoch == 8 && e.min_size == 2 && !strcmp(e.world, "ns1@8"),
	   "... and decodes: epoch, minimum, world name, 3 members");
	for (int i = 0; i < 3 && e.peers; i++)
		good &= same_peer(&e.peers[i], &peers[i]);
	ok(good, "... the members in order, addresses byte for byte (also "
		 "an empty one)");
	memb_decide_free(&e);
	ok(refuses_truncations(&b, dec_decide),
	   "every truncation of a decision is refused");
	/* A count of a million members in a message of a few hundred bytes:
	 * refused before anything is allocated for them. */
	{
		uint8_t *m = malloc(b.len);
		size_t off = 20 + 4 + 4 + 4 + strlen("ns1@8");
		int32_t n = 1000000;

		memcpy(m, b.p, b.len);
		memcpy(m + off, &n, 4);
		ok(dec_decide(m, b.len) != 0,
		   "a decision claiming 1000000 members in %zu bytes is "
		   "refused",
		   b.len);
		free(m);
	}
	/* A node key whose length says 400: no room in node_key[300]. */
	{
		struct memb_buf c = {0};
		struct memb_decide one = d;
		size_t key_off;
		uint32_t n = 400;

		one.n = 1;
		memb_encode_decide(&c, &one);
		/* header, status, min_size, world, n, then the peer: four
		 * i32 and the two halves of pidns before its node key. */
		key_off = 20 + 4 + 4 + 4 + strlen("ns1@8") + 4 + 16 + 8;
		memcpy(c.p + key_off, &n, 4);
		ok(dec_decide(c.p, c.len) != 0,
		   "a node key longer than its field is refused");
		memb_buf_free(&c);
	}
	for (int i = 0; i < 3; i++)
		memb_peer_free(&peers[i]);
	memb_buf_free(&b);
}

static void test_join_and_removed(void)
{
	struct memb_join j = {0}, k;
	struct memb_buf b = {0};
	char reason[64];
	uint32_t ep = 0;
	uint8_t reply[40];

	for (int i = 0; i < 16; i++)
		j.token[i] = (uint8_t)(i * 17);
	snprintf(j.jobid, sizeof(j.jobid), "4242");
	j.step_size = 2;
	j.step_rank = 1;
	memset(reply, 0xab, sizeof(reply));
	j.reply_addr = reply;
	j.reply_addr_len = sizeof(reply);
	fill_peer(&j.self, -1, "vm#node3", "slurm.pmix.4242.1", 64);
	ok(memb_encode_join(&b, 5, &j) == HVD_OK, "a join request encodes");
	ok(memb_decode_join(b.p, b.len, &ep, &k) == HVD_OK && ep == 5 &&
		   !memcmp(k.token, j.token, 16) && !strcmp(k.jobid, "4242") &&
		   k.step_size == 2 && k.step_rank == 1 &&
		   k.reply_addr_len == sizeof(reply) &&
		   !memcmp(k.reply_addr, reply, sizeof(reply)) &&
		   same_peer(&k.self, &j.self),
	   "... and decodes: token, job, step rank, both addresses");
	memb_join_free(&k);
	ok(refuses_truncations(&b, dec_join),
	   "every truncation of a join request is refused");
	memb_peer_free(&j.self);
	/* A join request may only describe a newcomer. */
	fill_peer(&j.self, 0, "x", "y", 4);
	memb_encode_join(&b, 5, &j);
	ok(dec_join(b.p, b.len) != 0,
	   "a join request that claims an old rank (0) is refused");
	memb_peer_free(&j.self);
	j.step_rank = 2;
	fill_peer(&j.self, -1, "x", "y", 4);
	memb_encode_join(&b, 5, &j);
	ok(dec_join(b.p, b.len) != 0,
	   "a join request of step rank 2 of 2 is refused");
	memb_peer_free(&j.self);

	ok(memb_encode_removed(&b, 3, 0, "too late") == HVD_OK &&
		   memb_decode_removed(b.p, b.len, reason, sizeof(reason)) ==
			   HVD_OK &&
		   !strcmp(reason, "too late"),
	   "a removal notice carries its reason");
	ok(memb_encode_hello(&b, 3, 1) == HVD_OK &&
		   memb_type_of(b.p, b.len) == MEMB_HELLO,
	   "a hello is a hello");
	{
		uint32_t e = 0;
		int32_t snd = -1;

		ok(memb_decode_hello(b.p, b.len, &e, &snd) == HVD_OK &&
			   e == 3 && snd == 1,
		   "... and names its epoch and sender");
	}
	/* Another type's decoder refuses it. */
	ok(dec_decide(b.p, b.len) != 0 && dec_propose(b.p, b.len) != 0,
	   "a hello is neither a decision nor a proposal");
	memb_buf_free(&b);
}

/* Random damage: flipped bytes, with the length field kept consistent so
 * that the decoders' own checks are what is tested.  Nothing may crash;
 * what decodes must be self-consistent (the frees run). */
static void test_damage(void)
{
	struct memb_decide d = {0};
	struct memb_buf b = {0};
	struct memb_peer peers[2];
	uint64_t s = 99;
	int decoded = 0, trials = 20000;

	fill_peer(&peers[0], 0, "a", "ns", 32);
	fill_peer(&peers[1], 1, "b", "ns", 32);
	d.n = 2;
	d.peers = peers;
	snprintf(d.world, sizeof(d.world), "w");
	memb_encode_decide(&b, &d);
	for (int t = 0; t < trials; t++) {
		uint8_t *m = malloc(b.len);
		int flips = 1 + (int)(s % 4);

		memcpy(m, b.p, b.len);
		for (int f = 0; f < flips; f++) {
			s = s * 6364136223846793005ULL + 1442695040888963407ULL;
			m[20 + (s >> 33) % (b.len - 20)] ^=
			    (uint8_t)(1u << ((s >> 20) & 7));
		}
		set_len_field(m, b.len);
		decoded += dec_decide(m, b.len) == 0;
		decoded += dec_propose(m, b.len) == 0;
		free(m);
	}
	ok(1, "%d damaged decisions: no crash (%d still decoded)", trials,
	   decoded);
	memb_peer_free(&peers[0]);
	memb_peer_free(&peers[1]);
	memb_buf_free(&b);
}

/* in/out/quiet from strings of 'k' (kept), 'q' (out, silent), 'd' (out,
 * dead), one character a rank. */
static int quorum_of(const char *v)
{
	uint8_t in[4] = {0}, out[4] = {0}, quiet[4] = {0};
	int n = (int)strlen(v);

	for (int r = 0; r < n; r++) {
		if (v[r] == 'k')
			memb_set_bit(in, r);
		else
			memb_set_bit(out, r);
		if (v[r] == 'q')
			memb_set_bit(quiet, r);
	}
	return memb_quorum(n, out, quiet, in);
}

static void test_quorum(void)
{
	static const struct {
		const char *v;
		int want;
		const char *what;
	} t[] = {
	    {"kkq", 1, "2 of 3 kept, 1 silent: the majority goes on"},
	    {"kqq", 0, "1 of 3 kept, 2 silent: a minority stops"},
	    {"kdd", 1, "1 of 3 kept, 2 dead: it goes on (nobody is beyond a "
		       "partition)"},
	    {"kq", 1, "1 of 2, the other silent: a tie, and this side has "
		      "rank 0: it goes on"},
	    {"qk", 0, "1 of 2, rank 0 silent: a tie without rank 0 stops"},
	    {"dk", 1, "1 of 2, rank 0 dead: it goes on"},
	    {"dqkk", 1, "2 of the 3 not dead: the majority"},
	    {"dkqk", 1, "rank 0 dead, rank 1 the lowest alive: its half of a "
			"tie goes on"},
	    {"dqkkqk", 1, "3 of the 5 not dead kept: it goes on"},
	    {"dqqkk", 0, "2 of 4 not dead, without the lowest of them (rank "
			 "1): it stops"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		is_int(quorum_of(t[i].v), t[i].want, "%s (%s)", t[i].what,
		       t[i].v);
}

static void test_decisions(void)
{
	uint8_t failed[2] = {0};
	struct memb_peer p[6], nc[2], *surv[6], *newc[2], **order;
	int n;

	is_int(memb_coordinator(failed, 6), 0, "nobody failed: rank 0 "
					       "coordinates");
	memb_set_bit(failed, 0);
	memb_set_bit(failed, 1);
	is_int(memb_coordinator(failed, 6), 2,
	       "ranks 0 and 1 failed: rank 2 coordinates");
	memset(failed, 0x3f, 1);
	is_int(memb_coordinator(failed, 6), -1, "everyone failed: nobody");

	memset(failed, 0, sizeof(failed));
	memb_set_bit(failed, 1);
	memb_set_bit(failed, 4);
	for (int r = 0; r < 6; r++) {
		memset(&p[r], 0, sizeof(p[r]));
		p[r].old_rank = r;
		surv[r] = &p[r];
	}
	surv[3] = NULL; /* alive as far as anyone knows, but never proposed */
	for (int i = 0; i < 2; i++) {
		memset(&nc[i], 0, sizeof(nc[i]));
		nc[i].old_rank = -1;
		nc[i].pid = 50 + i;
		newc[i] = &nc[i];
	}
	ok(memb_order(6, failed, surv, newc, 2, &order, &n) == HVD_OK &&
		   n == 5 && order[0] == &p[0] && order[1] == &p[2] &&
		   order[2] == &p[5] && order[3] == &nc[0] &&
		   order[4] == &nc[1],
	   "next world: survivors 0, 2, 5 in old order (failed 1, 4 and "
	   "silent 3 out), then the newcomers");
	free(order);
	test_quorum();
	{
		struct memb_join a = {0}, b = {0}, c = {0};
		const struct memb_join *js[3] = {&a, &b, &c};

		snprintf(a.self.nspace, sizeof(a.self.nspace), "s1");
		snprintf(b.self.nspace, sizeof(b.self.nspace), "s1");
		snprintf(c.self.nspace, sizeof(c.self.nspace), "s2");
		a.step_rank = 0;
		b.step_rank = 2;
		c.step_rank = 1;
		ok(!memb_step_complete(js, 3, "s1", 3),
		   "a step of 3 with ranks 0 and 2 asking: not let in");
		b.step_rank = 1;
		c.step_rank = 2; /* another step's rank 2 does not count */
		ok(!memb_step_complete(js, 3, "s1", 3),
		   "... nor with another step's rank 2");
		ok(memb_step_complete(js, 3, "s1", 2),
		   "a step of 2 with ranks 0 and 1 asking: let in");
	}
}

int main(void)
{
	plan(39);
	test_propose();
	test_decide();
	test_join_and_removed();
	test_damage();
	test_decisions();
	return done_testing();
}

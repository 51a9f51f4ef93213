/*
 * The engine's pure cores (engine/core/, compiled in alone), without
 * processes: name map, wire encoding, response cache (hit/miss/invalid,
 * LRU eviction, bit reuse), the coordinator (readiness, order, every
 * mismatch field, join, groups, process-set mismatch), fusion plan,
 * process-set spec parsing, stall report, autotune sweep.
 */
#include "engine/core/autotune.h"
#include "engine/core/fusion_plan.h"
#include "engine/core/namemap.h"
#include "engine/core/negotiate.h"
#include "engine/core/pset_spec.h"
#include "engine/core/request.h"
#include "engine/core/response_cache.h"
#include "engine/core/stall.h"
#include "engine/core/wire.h"
#include "hvd.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct eng_req *req(const char *name, int kind, int dtype,
			   uint64_t count)
{
	struct eng_req *r = calloc(1, sizeof(*r));

	r->p.kind = (uint8_t)kind;
	r->p.dtype = (uint8_t)dtype;
	r->p.count = count;
	r->p.prescale = r->p.postscale = 1.0;
	r->name = strdup(name);
	return r;
}

/* The coordinator's view of the process sets, as the engine hands it in:
 * set 0 is the world {0,1,2}, set 1 is {0,2}. */
static const int set_members[2][3] = {{1, 1, 1}, {1, 0, 1}};

static int member(void *arg, int32_t pset, int rank)
{
	(void)arg;
	return pset >= 0 && pset < 2 && rank >= 0 && rank < 3 &&
	       set_members[pset][rank];
}

static int set_size(void *arg, int32_t pset)
{
	int n = 0;

	for (int r = 0; r < 3; r++)
		n += member(arg, pset, r);
	return n;
}

static void coord_setup(struct coord *c, int size)
{
	coord_init(c, size);
	c->is_member = member;
	c->set_size = set_size;
}

static void test_namemap(void)
{
	struct namemap m;
	char keys[2000][16];
	int ok_all = 1;

	namemap_init(&m);
	for (int i = 0; i < 2000; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		namemap_put(&m, keys[i], (void *)(intptr_t)(i + 1));
	}
	for (int i = 0; i < 2000; i += 2)
		namemap_del(&m, keys[i]);
	for (int i = 0; i < 2000; i++)
		if ((intptr_t)namemap_get(&m, keys[i]) != (i % 2 ? i + 1 : 0))
			ok_all = 0;
	ok(ok_all && m.n == 1000, "namemap: 2000 puts, 1000 deletes");
	namemap_free(&m);
}

static void test_wire(void)
{
	struct eng_req *q = req("grad/conv1", EK_ALLGATHER, HVD_FLOAT32, 77);
	struct eng_resp r = {0}, r2;
	struct eng_req q2;
	struct wbuf w = {0};
	struct rbuf b;
	uint64_t counts[3] = {1, 2, 3};

	q->group = strdup("g");
	q->group_size = 3;
	q->age = 1.5;
	wire_put_req(&w, q);
	b = (struct rbuf){w.data, w.data + w.len, 0};
	ok(wire_get_req(&b, &q2) == 0 && strcmp(q2.name, "grad/conv1") == 0 &&
	       q2.p.count == 77 && q2.group_size == 3 &&
	       strcmp(q2.group, "g") == 0 && q2.age == 1.5,
	   "wire: request round trip");
	eng_req_free(&q2);
	b = (struct rbuf){w.data, w.data + w.len - 3, 0};
	ok(wire_get_req(&b, &q2) < 0, "wire: truncated request refused");
	wbuf_free(&w);
	r.p = q->p;
	r.name = q->name;
	r.counts = counts;
	r.ncounts = 3;
	r.message = "msg";
	wire_put_resp(&w, &r);
	b = (struct rbuf){w.data, w.data + w.len, 0};
	ok(wire_get_resp(&b, &r2) == 0 && r2.ncounts == 3 &&
	       r2.counts[2] == 3 && strcmp(r2.message, "msg") == 0,
	   "wire: response round trip");
	eng_resp_free(&r2);
	wbuf_free(&w);
	eng_req_free(q);
	free(q);
}

static void resp_of(struct eng_resp *r, const char *name, uint64_t count)
{
	memset(r, 0, sizeof(*r));
	r->p.kind = EK_ALLREDUCE;
	r->p.dtype = HVD_FLOAT32;
	r->p.count = count;
	r->p.prescale = r->p.postscale = 1.0;
	r->name = (char *)name;
}

static void test_cache(void)
{
	struct rcache c;
	struct eng_resp r;
	struct eng_params p;
	int bit = -1, b0, b1, b2, b3;
	void *ev = (void *)1;

	rc_init(&c, 3);
	resp_of(&r, "a", 10);
	b0 = rc_put(&c, &r, &ev);
	resp_of(&r, "b", 20);
	b1 = rc_put(&c, &r, NULL);
	resp_of(&r, "c", 30);
	b2 = rc_put(&c, &r, NULL);
	is_int(b0 * 100 + b1 * 10 + b2, 12, "cache: bits 0, 1, 2 in order");
	ok(ev == NULL, "cache: nothing evicted below capacity");
	p = r.p;
	p.count = 20;
	is_int(rc_lookup(&c, "b", &p, 0, &bit), RC_HIT, "cache: hit");
	is_int(bit, 1, "cache: hit reports its bit");
	p.count = 21;
	is_int(rc_lookup(&c, "b", &p, 0, &bit), RC_INVALID,
	       "cache: same name, other count is invalid");
	p.count = 20;
	p.dtype = HVD_FLOAT64;
	is_int(rc_lookup(&c, "b", &p, 0, &bit), RC_INVALID,
	       "cache: same name, other type is invalid");
	p.dtype = r.p.dtype;
	p.shape = 77;
	is_int(rc_lookup(&c, "b", &p, 0, &bit), RC_INVALID,
	       "cache: same name, other shape is invalid");
	is_int(rc_lookup(&c, "zz", &p, 0, &bit), RC_MISS, "cache: miss");
	/* a is the least recently used unless touched */
	rc_touch(&c, b0);
	rc_entry_at(&c, b1)->pending = &c;
	resp_of(&r, "d", 40);
	b3 = rc_put(&c, &r, &ev);
	is_int(b3, 1, "cache: full, the LRU entry (b) gives its bit to d");
	ok(ev == &c, "cache: the evicted entry's pending op is handed back");
	p = r.p;
	p.count = 20;
	is_int(rc_lookup(&c, "b", &p, 0, &bit), RC_MISS, "cache: b is gone");
	rc_erase(&c, 2);
	is_int(c.nbits, 2, "cache: erasing the top bit shortens the vector");
	rc_erase(&c, 0);
	resp_of(&r, "e", 50);
	is_int(rc_put(&c, &r, NULL), 0, "cache: the lowest free bit is reused");
	rc_free(&c);
	rc_init(&c, 0);
	resp_of(&r, "a", 1);
	is_int(rc_put(&c, &r, NULL), -1, "cache: capacity 0 caches nothing");
	is_int(rc_lookup(&c, "a", &r.p, 0, &bit), RC_MISS,
	       "cache: capacity 0 always misses");
	rc_free(&c);
}

static void mismatch(const char *what, void (*mod)(struct eng_req *), int kind,
		     const char *needle)
{
	struct coord c;
	struct resp_list l = {0};
	struct eng_req *a = req("t", kind, HVD_FLOAT32, 8);
	struct eng_req *b = req("t", kind, HVD_FLOAT32, 8);
	struct eng_req *d = req("t", kind, HVD_FLOAT32, 8);

	coord_setup(&c, 3);
	mod(b);
	coord_add(&c, 0, a, 0);
	coord_add(&c, 1, b, 0);
	coord_add(&c, 2, d, 0);
	coord_collect(&c, &l);
	ok(l.n == 1 && l.v[0].p.kind == EK_ERROR &&
	       l.v[0].status == HVD_ERR_MISMATCH && l.v[0].message &&
	       strstr(l.v[0].message, needle),
	   "mismatch %s: %s", what,
	   l.n && l.v[0].message ? l.v[0].message : "(none)");
	resp_list_free(&l);
	coord_free(&c);
}

static void m_dtype(struct eng_req *r) { r->p.dtype = HVD_FLOAT16; }
static void m_count(struct eng_req *r) { r->p.count = 9; }
static void m_op(struct eng_req *r) { r->p.op = HVD_MAX; }
static void m_root(struct eng_req *r) { r->p.root = 1; }
static void m_scale(struct eng_req *r) { r->p.prescale = 0.5; }
static void m_kind(struct eng_req *r) { r->p.kind = EK_ALLGATHER; }
static void m_pset(struct eng_req *r) { r->p.pset = 1; }
static void m_dev(struct eng_req *r) { r->p.flags = EF_DEVICE; }
static void m_comp(struct eng_req *r) { r->p.flags = EF_COMPRESS; }
static void m_shape(struct eng_req *r)
{
	r->ndims = 2;
	r->dims = malloc(2 * sizeof(*r->dims));
	r->dims[0] = 2;
	r->dims[1] = 4;
	r->p.shape = 0x2a1;
}

static void test_coordinator(void)
{
	struct coord c;
	struct resp_list l = {0};
	struct eng_req *g;

	coord_setup(&c, 3);
	/* Ranks submit x, y in different orders; ready in first-seen
	 * order once all three have them. */
	coord_add(&c, 0, req("y", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_add(&c, 0, req("x", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_add(&c, 1, req("x", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_collect(&c, &l);
	is_int(l.n, 0, "coordinator: nothing ready before every rank");
	coord_add(&c, 2, req("x", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_add(&c, 1, req("y", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_add(&c, 2, req("y", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_collect(&c, &l);
	ok(l.n == 2 && !strcmp(l.v[0].name, "y") && !strcmp(l.v[1].name, "x"),
	   "coordinator: ready in first-seen order (y, x)");
	resp_list_free(&l);
	/* Process set 1 = {0, 2}: ready without rank 1. */
	g = req("p", EK_ALLGATHER, HVD_INT32, 5);
	g->p.pset = 1;
	coord_add(&c, 0, g, 0);
	g = req("p", EK_ALLGATHER, HVD_INT32, 7);
	g->p.pset = 1;
	coord_add(&c, 2, g, 0);
	coord_collect(&c, &l);
	ok(l.n == 1 && l.v[0].p.kind == EK_ALLGATHER && l.v[0].ncounts == 2 &&
	       l.v[0].counts[0] == 5 && l.v[0].counts[1] == 7,
	   "coordinator: process set {0,2} allgather, counts per set rank");
	resp_list_free(&l);
	/* Join: rank 1 joins, z is ready with ranks 0 and 2, zeros. */
	coord_add(&c, 1, req("__hvd_join", EK_JOIN, 0, 0), 0);
	coord_add(&c, 0, req("z", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_add(&c, 2, req("z", EK_ALLREDUCE, HVD_FLOAT32, 4), 0);
	coord_add(&c, 0, req("w", EK_BROADCAST, HVD_FLOAT32, 4), 0);
	coord_add(&c, 2, req("w", EK_BROADCAST, HVD_FLOAT32, 4), 0);
	coord_collect(&c, &l);
	ok(l.n == 2 && l.v[0].p.kind == EK_ALLREDUCE && l.v[0].joined == 1 &&
	       l.v[1].p.kind == EK_ERROR,
	   "coordinator: with rank 1 joined, allreduce runs (1 joined), "
	   "broadcast is refused");
	resp_list_free(&l);
	coord_add(&c, 0, req("__hvd_join", EK_JOIN, 0, 0), 0);
	coord_add(&c, 2, req("__hvd_join", EK_JOIN, 0, 0), 0);
	coord_collect(&c, &l);
	ok(l.n == 1 && l.v[0].p.kind == EK_JOIN && l.v[0].last_joined == 2,
	   "coordinator: all joined -> JOIN response, last rank 2");
	resp_list_free(&l);
	/* Groups leave whole. */
	for (int r = 0; r < 3; r++) {
		g = req("ga", EK_ALLREDUCE, HVD_FLOAT32, 1);
		g->group = strdup("ga");
		g->group_size = 2;
		coord_add(&c, r, g, 0);
	}
	coord_collect(&c, &l);
	is_int(l.n, 0, "coordinator: half a group waits");
	for (int r = 0; r < 3; r++) {
		g = req("gb", EK_ALLREDUCE, HVD_FLOAT32, 1);
		g->group = strdup("ga");
		g->group_size = 2;
		coord_add(&c, r, g, 0);
	}
	coord_collect(&c, &l);
	is_int(l.n, 2, "coordinator: a complete group leaves together");
	resp_list_free(&l);
	/* Process-set add with different lists on different ranks. */
	for (int r = 0; r < 3; r++) {
		g = req("__hvd_pset.0", EK_PSET_ADD, 0, 0);
		g->nranks = 2;
		g->ranks = malloc(2 * sizeof(int));
		g->ranks[0] = 0;
		g->ranks[1] = r == 2 ? 2 : 1;
		coord_add(&c, r, g, 0);
	}
	coord_collect(&c, &l);
	ok(l.n == 1 && l.v[0].status == HVD_ERR_PROCESS_SET &&
	       strstr(l.v[0].message, "[0,1] on ranks 0-1; [0,2] on rank 2"),
	   "coordinator: differing process sets: %s",
	   l.n ? l.v[0].message : "");
	resp_list_free(&l);
	/* Stall report: q waits for rank 1. */
	{
		char msg[512];

		coord_add(&c, 0, req("q", EK_ALLREDUCE, HVD_FLOAT32, 1), 100);
		coord_add(&c, 2, req("q", EK_ALLREDUCE, HVD_FLOAT32, 1), 100);
		is_int(stall_check(&c, 101, 5, 10, msg, sizeof(msg)), 0,
		       "stall: nothing before the warning time");
		is_int(stall_check(&c, 106, 5, 10, msg, sizeof(msg)), 0,
		       "stall: warned but not shut down at 6 s");
		is_int(stall_check(&c, 111, 5, 10, msg, sizeof(msg)), 1,
		       "stall: shutdown at 11 s");
		ok(strstr(msg, "'q'") && strstr(msg, "rank 1"),
		   "stall: message names the tensor and the missing rank: %s",
		   msg);
	}
	coord_free(&c);
	mismatch("type", m_dtype, EK_ALLREDUCE,
		 "float32 on ranks 0,2; float16 on rank 1");
	mismatch("count", m_count, EK_ALLREDUCE,
		 "count for ALLREDUCE 't': 8 on ranks 0,2; 9 on rank 1");
	mismatch("reduction", m_op, EK_ALLREDUCE, "reduction");
	mismatch("root", m_root, EK_BROADCAST, "root rank");
	mismatch("scale factors", m_scale, EK_ALLREDUCE,
		 "(1, 1) on ranks 0,2; (0.5, 1) on rank 1");
	mismatch("operation", m_kind, EK_ALLREDUCE,
		 "ALLREDUCE on ranks 0,2; ALLGATHER on rank 1");
	mismatch("process set", m_pset, EK_ALLREDUCE, "process set");
	mismatch("device", m_dev, EK_ALLREDUCE,
		 "CPU on ranks 0,2; GPU on rank 1");
	mismatch("compression", m_comp, EK_ALLREDUCE, "fp16 compression");
	mismatch("shape", m_shape, EK_ALLREDUCE,
		 "mismatched shape for ALLREDUCE 't': none given on ranks "
		 "0,2; [2, 4] on rank 1");
	mismatch("allgather shape", m_shape, EK_ALLGATHER, "[*, 4] on rank 1");
}

static void test_fusion_plan(void)
{
	struct eng_resp r[6];
	struct fusion_plan p;

	for (int i = 0; i < 6; i++)
		resp_of(&r[i], "x", 100); /* 400 bytes each */
	r[1].p.dtype = HVD_FLOAT64;	  /* interleaved type */
	r[3].p.kind = EK_BROADCAST;
	r[4].p.prescale = 2.0;
	fusion_plan_build(r, 6, 1000, 0, &p);
	ok(p.n == 5 && p.b[0].n == 2 && p.b[0].idx[1] == 2,
	   "fusion: float32 0 and 2 fuse past the float64 in between");
	ok(p.b[p.n - 1].n == 1 && p.b[p.n - 1].idx[0] == 5,
	   "fusion: the threshold (1000 B) starts a new bucket");
	fusion_plan_free(&p);
	fusion_plan_build(r, 6, 0, 0, &p);
	is_int(p.n, 6, "fusion: threshold 0 disables fusion");
	fusion_plan_free(&p);
	fusion_plan_build(r, 6, 1 << 20, 400, &p);
	is_int(p.n, 6, "fusion: host tensors of the direct size run alone");
	fusion_plan_free(&p);
	r[0].p.flags = EF_DEVICE;
	fusion_plan_build(r, 6, 1 << 20, 0, &p);
	ok(p.b[0].n == 1, "fusion: host and device never share a bucket");
	fusion_plan_free(&p);
}

static void test_pset_parse(void)
{
	int **s, *n, ns;
	char err[256];

	ok(pset_parse("0,1;2-3", 4, &s, &n, &ns, err, sizeof(err)) == HVD_OK &&
	       ns == 2 && n[0] == 2 && n[1] == 2 && s[1][1] == 3,
	   "pset: \"0,1;2-3\" is two sets");
	for (int i = 0; i < ns; i++)
		free(s[i]);
	free(s);
	free(n);
	ok(pset_parse("0,4", 4, &s, &n, &ns, err, sizeof(err)) ==
		   HVD_ERR_INVALID_ARG &&
	       strstr(err, "rank 4 is outside"),
	   "pset: rank out of range: %s", err);
	ok(pset_parse("1,1", 4, &s, &n, &ns, err, sizeof(err)) ==
		   HVD_ERR_INVALID_ARG &&
	       strstr(err, "duplicate rank 1"),
	   "pset: duplicate: %s", err);
	ok(pset_parse("0;x", 4, &s, &n, &ns, err, sizeof(err)) ==
	       HVD_ERR_INVALID_ARG,
	   "pset: garbage: %s", err);
	ok(pset_parse("", 4, &s, &n, &ns, err, sizeof(err)) == HVD_OK &&
	       ns == 0,
	   "pset: empty spec, no sets");
}

static void test_autotune(void)
{
	struct autotune a;
	int changes = 0;
	double t = 0;

	setenv("HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "1", 1);
	setenv("HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "2", 1);
	autotune_init(&a, 128u << 20, 1.0, 1, 1, NULL);
	/* throughput peaks at 16 MiB and 2.5 ms */
	for (int step = 0; step < 2000 && a.active; step++) {
		double mb = (double)a.fusion / (1 << 20);
		double speed = 1e4 / (1 + fabs(mb - 16)) +
			       1e4 / (1 + 10 * fabs(a.cycle_ms - 2.5));

		t += 1.0;
		changes +=
		    autotune_record(&a, "first", (size_t)(speed * 1e3), t);
		changes += autotune_record(&a, "second", 0, t);
	}
	ok(!a.active && a.fusion == 16u << 20 && a.cycle_ms == 2.5,
	   "autotune: finds 16 MiB / 2.5 ms (got %zu / %g, %d switches)",
	   a.fusion, a.cycle_ms, changes);
	autotune_free(&a);
}

int main(void)
{
	test_namemap();
	test_wire();
	test_cache();
	test_coordinator();
	test_fusion_plan();
	test_pset_parse();
	test_autotune();
	return done_testing();
}

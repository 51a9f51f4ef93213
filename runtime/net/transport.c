/*
 * transport.c - the transport's face: bring-up and shutdown of the UCX
 * objects (net/ucx.c), the peer table (net/peers.c) and the failure
 * notices (net/notice.c), and transfers: tagged send/receive with
 * completion tracking and failure detection while waiting.
 *
 * A dead peer is noticed by, in order of speed: the endpoint error
 * callback (UCP_ERR_HANDLING_MODE_PEER), a PMIx process-termination event
 * (bootstrap.c calls transport_mark_failed), a liveness check of the pids
 * of peers on this node, a notice from another rank, and finally no
 * progress for HOROVOD_PEER_TIMEOUT seconds.  Any of them fails the
 * running collective on every survivor: each survivor checks the failed
 * set while waiting, so a rank that only waits on live (but stuck) peers
 * errors out too.
 */
#include "config.h"

#include "net/auth.h"
#include "net/lane.h"
#include "net/notice.h"
#include "net/peers.h"
#include "net/refusal.h"
#include "net/rreduce.h"
#include "net/transport.h"
#include "net/ucx.h"

#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tp_op {
	struct tp_req *req;  /* NULL once completed                  */
	struct lane_op *lop; /* on the TCP lane instead (net/lane.h) */
	int peer;            /* comm rank                            */
	int recv;
	int done;
	ucs_status_t status;
	size_t expect, length;
	struct tail_iov *tail; /* a UCX send's gather (xfer_send_tail) */
};

/* What UCX reads a send with a tail from until the send completes: the
 * two pieces, and the tail's copy. */
struct tail_iov {
	ucp_dt_iov_t iov[2];
	char tail[XFER_TAIL_MAX];
};

/* HVD_POLL_SPIN_US, HVD_POLL_YIELD_US: see wait_until */
static double spin_s = 10e-6, yield_s = 200e-6;

/* The receive-reduce datatype (xfer_recv_reduce), made on first use. */
static ucp_datatype_t rr_dt;
static int rr_ok = -1; /* -1 not yet, 0 unavailable, 1 made */
static pthread_mutex_t rr_lock = PTHREAD_MUTEX_INITIALIZER;

hvd_status_t transport_init(void **addr, size_t *addr_len)
{
	return ucx_init(addr, addr_len);
}

/*
 * One machine?  Several nodes of a job can be one machine: the
 * mini-cluster's nodes are network namespaces of one host (and their
 * PMIx host names differ).  Then what goes "between nodes" crosses no
 * network, and a waiting rank that spins holds a core that a rank of
 * another "node" needs.  Each rank hashes the kernel's boot id (one per
 * running kernel: the same in every namespace and container of a
 * machine, different on another machine) and the ranks agree on the
 * smallest and the largest hash: equal means every rank runs on this
 * machine.  A dissemination exchange (min and max are idempotent) of
 * log2(size) rounds on a context of its own, before any communicator
 * exists.  The same rounds agree whether the job is crowded: some node
 * has more ranks than CPUs, or the one machine has more of the job's
 * ranks than CPUs.  Mixed jobs (some nodes sharing machines, some not)
 * count as separate machines.
 *
 * "CPUs" are those the job's ranks may run on, not those the machine
 * has: on a shared node a job's cgroup may hold 4 cores of 64, and 8
 * ranks there wait for one another like 8 ranks on a 4-core machine.
 * Each rank's affinity mask says where it may run; the ranks of a node
 * OR theirs together first (a dissemination among them), and the rounds
 * over the job OR the nodes' sets (meaningful on one machine only, where
 * CPU numbers name the same CPUs).
 */
#define TP_SETUP_CTX 0xfffeu /* NOTICE_CTX - 1; only during hvd_init */

static int one_machine;     /* every rank of the job on this machine */
static int host_ranks = 1;  /* ranks of the job on this machine      */
static long host_cpus;      /* the CPUs they may use (0: unknown)     */
static int job_crowded;     /* agreed: some machine's job ranks > CPUs */

/* What the machine comparison's rounds carry: minima, and a union. */
struct machine_msg {
	uint64_t v[3]; /* boot hash, ~boot hash, 0 if some node crowded */
	cpu_set_t cpus;
};

static uint64_t boot_hash(void)
{
	char id[128] = "";
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (f) {
		if (!fgets(id, sizeof(id), f))
			id[0] = '\0';
		fclose(f);
	}
	if (!id[0]) /* unknown: a value of its own, "another machine" */
		snprintf(id, sizeof(id), "%d.%ld", (int)getpid(),
			 (long)(hvd_now() * 1e9));
	for (const char *p = id; *p && *p != '\n'; p++) {
		h ^= (unsigned char)*p;
		h *= 1099511628211ull;
	}
	return h;
}

/* The CPUs this rank may run on; all online ones where the kernel would
 * not say. */
static void own_cpus(cpu_set_t *set)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(set);
	if (sched_getaffinity(0, sizeof(*set), set) == 0 &&
	    CPU_COUNT(set) > 0)
		return;
	CPU_ZERO(set);
	for (long c = 0; c < (n > 0 ? n : 1) && c < CPU_SETSIZE; c++)
		CPU_SET((int)c, set);
}

/*
 * The union of the affinity masks of this node's ranks, in set: a
 * dissemination among them (OR is idempotent), ceil(log2(local size))
 * rounds.  One transfer on every rank, even alone on its node, so that
 * the setup group's sequence numbers stay in step.
 */
static hvd_status_t node_cpus(struct xfer *x, const struct hvd_world *w,
			      cpu_set_t *set)
{
	int n = w->local_size, me = w->local_rank, *loc;
	hvd_status_t st = HVD_OK;

	if (n < 2 || !w->node_of || !w->local_rank_of)
		return HVD_OK;
	loc = malloc((size_t)n * sizeof(*loc));
	if (!loc)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int i = 0; i < n; i++)
		loc[i] = -1;
	for (int r = 0; r < w->size; r++)
		if (w->node_of[r] == w->node_id && w->local_rank_of[r] >= 0 &&
		    w->local_rank_of[r] < n)
			loc[w->local_rank_of[r]] = r;
	for (int i = 0; i < n; i++)
		if (loc[i] < 0)
			st = hvd_error(HVD_ERR_INTERNAL,
				       "hvd: local rank %d of %d has no rank",
				       i, n);
	for (int k = 1; k < n && st == HVD_OK; k <<= 1) {
		cpu_set_t in;

		st = xfer_sendrecv(x, loc[(me + k) % n], set, sizeof(*set),
				   loc[(me - k + n) % n], &in, sizeof(in));
		if (st == HVD_OK)
			CPU_OR(set, set, &in);
	}
	free(loc);
	return st;
}

/*
 * The TCP lane's addresses (net/lane.h), every rank's to every rank: a
 * Bruck allgather, log2(size) rounds, on the setup group after the
 * machine comparison.  rot[i] is rank (me + i)'s entry.
 */
static hvd_status_t lane_exchange(struct xfer *x, const struct hvd_world *w,
				  const struct lane_addr *mine)
{
	int n = w->size, me = w->rank;
	struct lane_addr *rot = malloc((size_t)n * sizeof(*rot));
	struct lane_addr *all = malloc((size_t)n * sizeof(*all));
	hvd_status_t st = HVD_OK;

	if (!rot || !all) {
		free(rot);
		free(all);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	rot[0] = *mine;
	for (int k = 1; k < n && st == HVD_OK; k <<= 1) {
		int cnt = k < n - k ? k : n - k;

		st = xfer_sendrecv(x, (me - k + n) % n, rot,
				   (size_t)cnt * sizeof(*rot), (me + k) % n,
				   rot + k, (size_t)cnt * sizeof(*rot));
	}
	if (st == HVD_OK) {
		for (int i = 0; i < n; i++)
			all[(me + i) % n] = rot[i];
		st = lane_start(all, n);
	}
	free(rot);
	free(all);
	return st;
}

static hvd_status_t agree_machine(const struct hvd_world *w)
{
	struct net_group g;
	struct xfer x;
	struct machine_msg m, in;
	struct lane_addr mine;
	hvd_status_t st;

	one_machine = 0;
	host_ranks = w->local_size > 0 ? w->local_size : 1;
	memset(&m, 0, sizeof(m));
	own_cpus(&m.cpus);
	host_cpus = CPU_COUNT(&m.cpus);
	job_crowded = transport_host_oversubscribed();
	if (w->size < 2)
		return HVD_OK;
	memset(&g, 0, sizeof(g));
	g.rank = w->rank;
	g.size = w->size;
	g.ctx = TP_SETUP_CTX;
	g.world_ranks = malloc((size_t)w->size * sizeof(int));
	if (!g.world_ranks)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int r = 0; r < w->size; r++)
		g.world_ranks[r] = r;
	st = lane_open(&mine, w->size, w->rank, w->local_size == w->size);
	if (st != HVD_OK) {
		free(g.world_ranks);
		return st;
	}
	xfer_begin(&x, &g);
	st = node_cpus(&x, w, &m.cpus);
	st = st == HVD_OK ? xfer_end(&x) : (xfer_end(&x), st);
	host_cpus = CPU_COUNT(&m.cpus);
	m.v[0] = boot_hash();
	m.v[1] = ~m.v[0]; /* the minimum of ~h is ~(the maximum of h) */
	m.v[2] = transport_host_oversubscribed() ? 0 : 1;
	if (st == HVD_OK) {
		xfer_begin(&x, &g);
		for (int k = 1; k < w->size; k <<= 1) {
			if (xfer_sendrecv(&x, (w->rank + k) % w->size, &m,
					  sizeof(m),
					  (w->rank - k + w->size) % w->size,
					  &in, sizeof(in)) != HVD_OK)
				break;
			for (int i = 0; i < 3; i++)
				m.v[i] = in.v[i] < m.v[i] ? in.v[i] : m.v[i];
			CPU_OR(&m.cpus, &m.cpus, &in.cpus);
		}
		st = xfer_end(&x);
	}
	if (st == HVD_OK && m.v[0] == ~m.v[1]) {
		one_machine = 1;
		host_ranks = w->size;
		host_cpus = CPU_COUNT(&m.cpus); /* every rank's, agreed */
	}
	if (st == HVD_OK) {
		/* The same answer on every rank: from the agreed values
		 * only. */
		job_crowded = m.v[2] == 0 || (one_machine && w->size > host_cpus);
		if (job_crowded)
			lane_crowded(&mine);
		xfer_begin(&x, &g);
		st = lane_exchange(&x, w, &mine);
		st = st == HVD_OK ? xfer_end(&x) : (xfer_end(&x), st);
	}
	free(g.world_ranks);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hvd: comparing machines");
	hvd_log(HVD_LOG_DEBUG,
		"%d ranks of the job on this %s, on %ld CPU%s they may use%s",
		host_ranks, one_machine ? "machine" : "node", host_cpus,
		host_cpus == 1 ? "" : "s",
		job_crowded ? "; the job is crowded" : "");
	return HVD_OK;
}

int transport_host_ranks(void)
{
	return host_ranks;
}

int transport_lane_everywhere(void)
{
	return lane_everywhere();
}

long transport_host_cpus(void)
{
	cpu_set_t set;

	if (host_cpus > 0)
		return host_cpus;
	own_cpus(&set);
	return CPU_COUNT(&set);
}

int transport_host_oversubscribed(void)
{
	return host_cpus > 0 && host_ranks > host_cpus;
}

int transport_job_crowded(void)
{
	return job_crowded;
}


hvd_status_t transport_set_peers(const struct hvd_world *w,
				 struct bootstrap_peer *peers)
{
	HVD_CHECK(peers_init(w, peers));
	HVD_CHECK(notice_start());
	refusal_start();
	spin_s = hvd_env_double("HVD_POLL_SPIN_US", 10) * 1e-6;
	yield_s = hvd_env_double("HVD_POLL_YIELD_US", 200) * 1e-6;
	if (spin_s < 0)
		spin_s = 0;
	if (yield_s < 0)
		yield_s = 0;
	HVD_CHECK(ucx_set_peers(w));
	return transport_agree_world(w);
}

/* The body of this rank's mismatch notices (mismatch_tell): its world
 * rank.  A send's buffer must outlive it, and these are never waited
 * for. */
static int32_t tell_body = -1;

hvd_status_t transport_agree_world(const struct hvd_world *w)
{
	tell_body = w->rank;
	HVD_CHECK(agree_machine(w));
	ucx_set_oversubscribed(transport_host_oversubscribed());
	return HVD_OK;
}

void transport_finalize(int fence)
{
	lane_close();
	notice_cancel();
	ucx_finalize(fence, refusal_finalizing);
	notice_free();
	refusal_free();
	peers_free();
	auth_clear();
	pthread_mutex_lock(&rr_lock);
	if (rr_ok > 0)
		ucp_dt_destroy(rr_dt);
	rr_ok = -1;
	pthread_mutex_unlock(&rr_lock);
}

/* ------------------------------------------------------ transfers */

static _Thread_local int background, patient;
static atomic_int foreground; /* foreground collectives in flight */

void transport_set_background(void)
{
	background = 1;
}

void transport_set_patient(int on)
{
	patient = on;
}

int transport_is_background(void)
{
	return background;
}

int transport_foreground_busy(void)
{
	return atomic_load_explicit(&foreground, memory_order_relaxed) > 0;
}

void xfer_begin(struct xfer *x, struct net_group *g)
{
	uint32_t seq = g->seq++;

	memset(x, 0, sizeof(*x));
	x->fg = !background;
	if (x->fg)
		atomic_fetch_add_explicit(&foreground, 1, memory_order_relaxed);
	x->g = g;
	x->me = g->rank;
	x->tag_base = tp_tag(g->ctx, seq, 0);
	x->st = g->broken;
	x->told = g->broken != HVD_OK; /* told the others when it broke */
	x->last_progress = hvd_now();
	x->next_check = x->last_progress + 0.05;
}

struct xfer_kept {
	struct xfer_kept *next;
	max_align_t data[];
};

void *xfer_keep(struct xfer *x, size_t len)
{
	struct xfer_kept *k = malloc(sizeof(*k) + len);

	if (!k) {
		if (x->st == HVD_OK)
			x->st = hvd_error(HVD_ERR_NO_MEMORY,
					  "hvd: out of memory");
		return NULL;
	}
	k->next = x->kept;
	x->kept = k;
	return k->data;
}

static struct tp_op *new_op(struct xfer *x, int peer, int *idx)
{
	if (x->nops == x->cap) {
		int cap = x->cap ? x->cap * 2 : 16;
		struct tp_op *o = realloc(x->ops, (size_t)cap * sizeof(*o));

		if (!o) {
			x->st = hvd_error(HVD_ERR_NO_MEMORY,
					  "hvd: out of memory");
			return NULL;
		}
		x->ops = o;
		x->cap = cap;
	}
	*idx = x->nops++;
	memset(&x->ops[*idx], 0, sizeof(struct tp_op));
	x->ops[*idx].peer = peer;
	return &x->ops[*idx];
}

static hvd_status_t peer_error(struct xfer *x, int w, const char *fmt,
			       const char *detail)
{
	char why[256];

	snprintf(why, sizeof(why), fmt, detail);
	return hvd_error(HVD_ERR_PEER_FAILED, "hvd: rank %d failed: %s", w,
			 why);
}

/* Whether a message of len bytes to or from group rank peer goes by the
 * TCP lane: the same answer on both sides. */
static int on_lane(const struct xfer *x, int peer, size_t len)
{
	return !x->lane_off &&
	       lane_wants(x->g->world_ranks[peer], len, x->one_way);
}

static int post_send(struct xfer *x, int peer, const void *buf, size_t len,
		     const void *tail, size_t tail_len, size_t route)
{
	ucp_request_param_t prm;
	struct tp_op *op;
	ucp_ep_h ep;
	void *r;
	int idx, w;

	if (x->st != HVD_OK)
		return -1;
	if (tail_len > XFER_TAIL_MAX) {
		x->st = hvd_error(HVD_ERR_INVALID_ARG,
				  "hvd: internal: a tail of %zu bytes (at "
				  "most %d)",
				  tail_len, XFER_TAIL_MAX);
		return -1;
	}
	op = new_op(x, peer, &idx);
	if (!op)
		return -1;
	w = x->g->world_ranks[peer];
	if (on_lane(x, peer, route)) {
		op->lop = lane_send_tail(
		    w, auth_tag(x->tag_base | (uint64_t)x->me), buf, len,
		    tail, tail_len, &x->st);
		return op->lop ? idx : -1;
	}
	ep = ucx_ep(w, &x->st);
	if (!ep)
		return -1;
	ucx_bytes_send_params(&prm);
	if (tail_len) {
		struct tail_iov *t = malloc(sizeof(*t));

		if (!t) {
			op->done = 1;
			x->st = hvd_error(HVD_ERR_NO_MEMORY,
					  "hvd: out of memory");
			return -1;
		}
		memcpy(t->tail, tail, tail_len);
		t->iov[0].buffer = (void *)buf;
		t->iov[0].length = len;
		t->iov[1].buffer = t->tail;
		t->iov[1].length = tail_len;
		op->tail = t;
		prm.datatype = ucp_dt_make_iov();
		r = ucp_tag_send_nbx(ep, t->iov, 2,
				     auth_tag(x->tag_base | (uint64_t)x->me),
				     &prm);
	} else {
		r = ucp_tag_send_nbx(ep, buf, len,
				     auth_tag(x->tag_base | (uint64_t)x->me),
				     &prm);
	}
	if (r == NULL) {
		op->done = 1;
	} else if (UCS_PTR_IS_ERR(r)) {
		op->done = 1;
		op->status = UCS_PTR_STATUS(r);
		x->st = peer_error(x, w, "sending to it failed (%s)",
				   UCS_MSG(op->status));
		return -1;
	} else {
		op->req = r;
	}
	return idx;
}

int xfer_send(struct xfer *x, int peer, const void *buf, size_t len)
{
	return post_send(x, peer, buf, len, NULL, 0, len);
}

int xfer_send_as(struct xfer *x, int peer, const void *buf, size_t len,
		 size_t route)
{
	return post_send(x, peer, buf, len, NULL, 0, route);
}

int xfer_send_tail(struct xfer *x, int peer, const void *buf, size_t len,
		   const void *tail, size_t tail_len)
{
	return post_send(x, peer, buf, len, tail, tail_len, len + tail_len);
}

/* A receive's op (NULL: x->st says why). */
static struct tp_op *new_recv(struct xfer *x, int peer, size_t len, int *idx)
{
	struct tp_op *op;

	if (x->st != HVD_OK)
		return NULL;
	op = new_op(x, peer, idx);
	if (op) {
		op->recv = 1;
		op->expect = len;
	}
	return op;
}

static int post_recv(struct xfer *x, int peer, void *buf, size_t count,
		     ucp_datatype_t dt, size_t len)
{
	ucp_request_param_t prm;
	ucp_tag_recv_info_t info;
	struct tp_op *op;
	void *r;
	int idx;

	op = new_recv(x, peer, len, &idx);
	if (!op)
		return -1;
	memset(&prm, 0, sizeof(prm));
	/* UCX 1.13 leaves recv_info unset when a receive completes at once
	 * from the unexpected queue: always take the callback, which
	 * reports the length (needed to detect mismatched counts). */
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			   UCP_OP_ATTR_FIELD_DATATYPE |
			   UCP_OP_ATTR_FIELD_RECV_INFO |
			   UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	prm.cb.recv = ucx_recv_cb;
	prm.datatype = dt;
	prm.recv_info.tag_info = &info;
	info.length = 0;
	r = ucp_tag_recv_nbx(ucx_worker, buf, count,
			     auth_tag(x->tag_base | (uint64_t)(unsigned)peer),
			     ~(uint64_t)0, &prm);
	if (r == NULL) {
		op->done = 1;
		op->length = info.length;
	} else if (UCS_PTR_IS_ERR(r)) {
		op->done = 1;
		op->status = UCS_PTR_STATUS(r);
		x->st = hvd_error(HVD_ERR_TRANSPORT,
				  "hvd: posting a receive from rank %d "
				  "failed (%s)",
				  x->g->world_ranks[peer],
				  UCS_MSG(op->status));
		return -1;
	} else {
		op->req = r;
	}
	return idx;
}

/* A receive on the TCP lane. */
static int lane_post(struct xfer *x, int peer, void *buf, size_t len)
{
	struct tp_op *op;
	int idx;

	op = new_recv(x, peer, len, &idx);
	if (!op)
		return -1;
	op->lop = lane_recv(x->g->world_ranks[peer],
			    auth_tag(x->tag_base | (uint64_t)(unsigned)peer),
			    buf, len, &x->st);
	return op->lop ? idx : -1;
}

int xfer_recv(struct xfer *x, int peer, void *buf, size_t len)
{
	return xfer_recv_as(x, peer, buf, len, len);
}

int xfer_recv_as(struct xfer *x, int peer, void *buf, size_t len,
		 size_t route)
{
	if (x->st == HVD_OK && on_lane(x, peer, route))
		return lane_post(x, peer, buf, len);
	return post_recv(x, peer, buf, len, ucp_dt_make_contig(1), len);
}

/*
 * Receiving into a reduction (net/rreduce.h): a UCX generic datatype whose
 * unpack() folds each fragment into the destination as UCX copies it out
 * of its receive buffer, instead of a copy into scratch memory and a pass
 * over it afterwards.  The descriptors live on the xfer until xfer_end.
 */
static ucs_status_t rr_unpack_cb(void *state, size_t off, const void *p,
				 size_t len)
{
	return rr_unpack(state, off, p, len) ? UCS_ERR_MESSAGE_TRUNCATED
					      : UCS_OK;
}

static void *rr_start_unpack(void *context, void *buffer, size_t count)
{
	(void)context;
	(void)count;
	return buffer;
}

static void *rr_start_pack(void *context, const void *buffer, size_t count)
{
	(void)context;
	(void)count;
	return (void *)buffer; /* never sent with */
}

static size_t rr_packed_size(void *state)
{
	return ((struct rr_desc *)state)->len;
}

static size_t rr_pack(void *state, size_t off, void *dest, size_t max)
{
	(void)state;
	(void)off;
	(void)dest;
	(void)max;
	return 0;
}

static void rr_finish(void *state)
{
	(void)state;
}

static void rr_create(void)
{
	static const ucp_generic_dt_ops_t ops = {
		.start_pack = rr_start_pack,
		.start_unpack = rr_start_unpack,
		.packed_size = rr_packed_size,
		.pack = rr_pack,
		.unpack = rr_unpack_cb,
		.finish = rr_finish,
	};

	rr_ok = hvd_env_bool("HVD_RECV_REDUCE", 1) &&
		ucp_dt_create_generic(&ops, NULL, &rr_dt) == UCS_OK;
}

int xfer_recv_reduce_ok(void)
{
	pthread_mutex_lock(&rr_lock);
	if (rr_ok < 0)
		rr_create();
	pthread_mutex_unlock(&rr_lock);
	return rr_ok > 0;
}

int xfer_recv_reduce(struct xfer *x, int peer, void *dst, const void *src,
		     size_t count, hvd_dtype_t dt, hvd_op_t op)
{
	struct rr_desc *d;
	size_t esz = hvd_dtype_size(dt);

	if (x->st != HVD_OK)
		return -1;
	if (!xfer_recv_reduce_ok() || esz > 8) {
		x->st = hvd_error(HVD_ERR_INTERNAL,
				  "hvd: receive-reduce is not available");
		return -1;
	}
	d = malloc(sizeof(*d));
	if (!d) {
		x->st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		return -1;
	}
	rr_init(d, dst, src, count, dt, op);
	d->next = x->rr;
	x->rr = d;
	if (on_lane(x, peer, d->len)) {
		/* The sender would use the lane: the algorithm must turn it
		 * off on every rank (it cannot reduce in place). */
		x->st = hvd_error(HVD_ERR_INTERNAL,
				  "hvd: a receive-reduce of %zu bytes with "
				  "the TCP lane on",
				  d->len);
		return -1;
	}
	return post_recv(x, peer, d, 1, rr_dt, d->len);
}

static void rr_free(struct xfer *x)
{
	while (x->rr) {
		struct rr_desc *d = x->rr;

		x->rr = d->next;
		rr_release(d);
		free(d);
	}
}

/* Move a finished request's result into the op; 1 when done. */
static int op_test(struct tp_op *op)
{
	struct tp_req *r = op->req;

	if (op->done)
		return 1;
	if (op->lop) {
		static const ucs_status_t st[3] = {
			UCS_OK, UCS_ERR_MESSAGE_TRUNCATED,
			UCS_ERR_CONNECTION_RESET};
		int s;

		if (!lane_test(op->lop, &s, &op->length))
			return 0;
		op->lop = NULL;
		op->status = st[s < 0 || s > 2 ? 2 : s];
		op->done = 1;
		return 1;
	}
	if (!atomic_load_explicit(&r->done, memory_order_acquire))
		return 0;
	op->status = r->status;
	op->length = r->length;
	atomic_store_explicit(&r->done, 0, memory_order_relaxed);
	ucp_request_free(r);
	op->req = NULL;
	op->done = 1;
	return 1;
}

static hvd_status_t op_result(struct xfer *x, struct tp_op *op)
{
	int w = x->g->world_ranks[op->peer];

	if (op->status == UCS_ERR_MESSAGE_TRUNCATED)
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: rank %d sent more than the %zu bytes "
				 "expected: ranks called the collective with "
				 "different counts or types",
				 w, op->expect);
	if (op->status != UCS_OK) {
		int f;

		/* A failure notice that came before the error (a peer's
		 * timeout, told as it gave up) names the rank that failed
		 * first; the error itself may only be that peer leaving. */
		notice_poll();
		f = transport_group_failed(x->g);
		if (f >= 0)
			return peer_error(x, f, "%s", transport_fail_reason(f));
		return peer_error(x, w, "transfer failed (%s)",
				  UCS_MSG(op->status));
	}
	if (op->recv && op->length != op->expect)
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: rank %d sent %zu bytes where %zu were "
				 "expected: ranks called the collective with "
				 "different counts or types",
				 w, op->length, op->expect);
	return HVD_OK;
}

/*
 * A receive that waits on one path while its message came by the other:
 * the two ends picked different paths because the sizes differ.  A
 * second without a change first, so a message merely slower on one path
 * than the next one on the other is not taken for it.
 */
#define TP_STRADDLE_S 1.0

static int straddles(struct xfer *x, struct tp_op *op)
{
	uint64_t tag = auth_tag(x->tag_base | (uint64_t)(unsigned)op->peer);
	int w = x->g->world_ranks[op->peer];
	ucp_tag_recv_info_t info;

	if (!op->lop)
		return lane_holds(w, tag, TP_STRADDLE_S);
	return lane_quiet(op->lop, TP_STRADDLE_S) &&
	       ucp_tag_probe_nb(ucx_worker, tag, ~(uint64_t)0, 0, &info) !=
		       NULL;
}

/*
 * Mismatch notices.  A rank that finds the calls of a collective apart (a
 * message of another size, the counts rs_direct carries) knows it only
 * from the peers it talks to, and a third member may wait on a peer that
 * has already given up: 3 ranks, an allreduce of 32768 floats on rank 0
 * (the ring) and 32769 on the others (the direct one), rank 2 waited
 * for rank 0's block until rank 0 exited, at worst HOROVOD_PEER_TIMEOUT.
 * So the rank that finds it sends every other member its world rank on
 * the collective's own tag with the source field all ones (no group
 * rank), fire and forget; a waiter looks for one at each watch (every
 * 50 ms).  The tag holds the group's context, so a notice reaches only
 * its group's collectives, and the collective's sequence number, which
 * the waiter does not match: a rank that completed the collective the
 * others found apart (two ranks' reducescatter of 16384 and 16385
 * floats, whose block 1 is 8192 either way) fails its next one there at
 * once, where it waited for the peer timeout on a peer that no longer
 * sends.  Context ids are not reused within a world, and a new world
 * (an elastic re-forming) has a new worker, without the old messages.
 */
#define TP_TELL_SRC 0xffffffu

static void mismatch_tell(struct xfer *x)
{
	/* An endpoint that cannot be made records its own error: the
	 * caller's stays the mismatch's. */
	char *kept = strdup(hvd_last_error());

	for (int i = 0; i < x->g->size; i++)
		ucx_send_forget(x->g->world_ranks[i], &tell_body,
				sizeof(tell_body),
				auth_tag(x->tag_base | TP_TELL_SRC));
	if (kept && strcmp(kept, hvd_last_error()) != 0)
		hvd_error(HVD_ERR_MISMATCH, "%s", kept);
	free(kept);
}

/* A member's mismatch notice about x's collective: HVD_ERR_MISMATCH. */
static hvd_status_t mismatch_told(struct xfer *x)
{
	ucp_tag_recv_info_t info;
	ucp_tag_message_h m;
	uint64_t any_seq = ~((uint64_t)0xffffffu << TP_SRC_BITS);
	int32_t who = -1, *buf;
	size_t got = 0;
	int earlier;

	m = ucp_tag_probe_nb(ucx_worker, auth_tag(x->tag_base | TP_TELL_SRC),
			     any_seq, 1, &info);
	if (!m)
		return HVD_OK;
	earlier = ((auth_tag(info.sender_tag) ^ x->tag_base) & ~any_seq) != 0;
	x->told = 1;
	buf = ucx_recv_probed(m, sizeof(*buf), &got);
	if (buf && got == sizeof(*buf))
		who = *buf;
	free(buf);
	if (who < 0 || who >= peers_count())
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: another rank found the ranks' calls "
				 "of %s apart: ranks called it with "
				 "different counts or types",
				 earlier ? "an earlier collective on this "
					   "communicator"
					 : "this collective");
	return hvd_error(HVD_ERR_MISMATCH,
			 "hvd: rank %d found the ranks' calls of %s apart "
			 "(its error says how): ranks called it with "
			 "different counts or types",
			 (int)who,
			 earlier ? "an earlier collective on this communicator, "
				   "which this rank completed,"
				 : "this collective");
}

/*
 * For a timeout's message, what of the peer's waits here unmatched on
 * this group's context: the first such message's sequence number and
 * size against this collective's, or that there is none.  A later call's
 * message says the peer went on without this one's reaching us; this
 * call's own number on a receive of the other path is a straddle.
 */
static void unmatched(const struct xfer *x, const struct tp_op *op,
		      char *out, size_t len)
{
	/* the context and source fields, any sequence number */
	const uint64_t mask = tp_tag(~0u, 0, ~0u);
	const uint64_t seq = tp_tag(0, ~0u, 0);
	uint64_t tag = auth_tag(x->tag_base | (uint64_t)(unsigned)op->peer);
	ucp_tag_recv_info_t info;

	if (!ucp_tag_probe_nb(ucx_worker, tag, mask, 0, &info)) {
		snprintf(out, len, "; nothing of its waits here unmatched");
		return;
	}
	snprintf(out, len,
		 "; its message of call %lu (%zu bytes) waits here "
		 "unmatched, this is call %lu",
		 (unsigned long)(((info.sender_tag ^ auth_tag_key) & seq) >>
				 TP_SRC_BITS),
		 info.length,
		 (unsigned long)((x->tag_base & seq) >> TP_SRC_BITS));
}

/* Periodic checks while waiting: failed members, dead local pids,
 * members' mismatch notices, and the progress timeout.  Returns an error
 * status or HVD_OK. */
static hvd_status_t watch(struct xfer *x, struct tp_op *waiting, double now)
{
	int f;

	x->next_check = now + 0.05;
	peers_check_local_pids(x->g);
	notice_poll();
	f = transport_group_failed(x->g);
	/* A rank outside this communicator counts too: the hierarchical
	 * algorithms wait on live peers that wait on the dead one, and
	 * without elasticity a failure anywhere ends the job's
	 * collectives. */
	if (f < 0)
		f = transport_any_failed();
	if (f >= 0)
		return peer_error(x, f, "%s", transport_fail_reason(f));
	if (waiting->recv && !waiting->done && straddles(x, waiting)) {
		int w = x->g->world_ranks[waiting->peer];

		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: rank %d sent a message of another size "
				 "than the %zu bytes expected: ranks called "
				 "the collective with different counts or "
				 "types",
				 w, waiting->expect);
	}
	if (peers_launcher_failed())
		return hvd_error(HVD_ERR_PEER_FAILED,
				 "hvd: lost the connection to the PMIx server "
				 "(the launcher died)");
	/* a refusal first: it names the cause, where a member's notice
	 * may only have come from it */
	if (x->fg) {
		char why[480];

		if (refusal_watch(why, sizeof(why)) != HVD_OK)
			return hvd_error(HVD_ERR_MISMATCH, "hvd: %s", why);
	}
	if (mismatch_told(x) != HVD_OK)
		return HVD_ERR_MISMATCH;
	if (now - x->last_progress > transport_peer_timeout()) {
		int w = x->g->world_ranks[waiting->peer];
		char why[256], seen[96];

		unmatched(x, waiting, seen, sizeof(seen));
		snprintf(why, sizeof(why),
			 "no progress from it for %.0f s "
			 "(HOROVOD_PEER_TIMEOUT)%s",
			 transport_peer_timeout(), seen);
		/* A suspicion: the peer may itself wait on another.  Told
		 * to every rank at once (a failure notice), so that ranks
		 * waiting on this one, or on others behind it, stop now
		 * rather than each a timeout later: in an elastic job they
		 * all reach the re-forming together, and its wait for a
		 * rank it never hears can be one timeout, not two. */
		peers_mark(w, why, 1, PEER_SUSPECT);
		notice_poll();
		return peer_error(x, w, "%s", why);
	}
	return HVD_OK;
}

/*
 * Waiting.  Spin on ucp_worker_progress while something happens, and for
 * spin_us (HVD_POLL_SPIN_US) after the last event; then block in the
 * kernel on the worker's event fd until data arrives, a socket has room
 * again or the next liveness check is due.  Blocking is what makes the
 * transport fast on a loaded node: a waiter that spins holds a core its
 * peer (or the kernel's network processing) needs, while a woken waiter
 * runs at once.  Measured with ucx_perftest tag_lat over TCP between two
 * network namespaces of one loaded 2-core machine: 256 KiB 4.6 ms polling,
 * 75 us blocking; 2 MiB 15 ms and 4.5 ms.
 *
 * Without the event fd (HVD_POLL_BLOCK=0, or UCX without WAKEUP) the old
 * way: spin, yield, then nap 20 us per poll after 1 ms of nothing.
 * Returns 1 while the waiter is still in its spinning phase.
 *
 * A patient waiter (transport_set_patient) blocks at once.  The engine's
 * negotiation while nothing of this rank's is pending, after one that
 * found nothing anywhere, is one (engine/cycle.c): the peers'
 * vectors come when their own cycles do, up to a cycle time later, and
 * spinning and yielding through up to 210 us of each 1 ms cycle cost an
 * idle job a tenth of a CPU per rank or more, taken from whatever else
 * ran there.  Two netns nodes x 1 rank, a CPU each, hvd_init then 10 s
 * of nothing: 0.58-2.35 -> 0.47-0.65 CPU seconds a rank.  OpenMPI's phase
 * of `hvd-bench --compare mpi` with HVD_POLL_SPIN_US=1000 ran 50-75%
 * slower beside the spinning idle engine, and as fast as with the
 * default once it blocked.
 */
static int wait_idle(unsigned *idle, double *idle_since, int *napping,
		     const struct xfer *x, double now)
{
	double t, spin = patient ? 0 : spin_s, yield = patient ? 0 : yield_s;

	if (*idle == 1)
		*idle_since = now;
	t = now - *idle_since;
	if (t < spin && !ucx_yield_always())
		return 1; /* still spinning */
	if (t >= spin + yield) {
		double left = x->next_check - now;
		int ms = left > 0 ? (int)(left * 1e3) + 1 : 1;
		int lfd = lane_busy() ? lane_poll_fd() : -1;

		if (lfd >= 0)
			ms = lane_block_ms(ms);
		if (ucx_block(ms > 50 ? 50 : ms, lfd))
			return 0;
		/* No event fd: nap after a millisecond of nothing, because
		 * under CFS sched_yield alone does not give the core to the
		 * peer we wait for. */
		if (t > 1e-3)
			*napping = 1;
	}
	if (*napping)
		hvd_sleep_us(20);
	else
		sched_yield();
	return 0;
}

/*
 * A background thread (the engine's) that waits while a collective of
 * the caller's runs (transport_foreground_busy) stands aside: the
 * caller's thread progresses the worker, which completes our requests
 * too, so we look at them after a sleep of ASIDE_MIN_US instead of
 * taking the worker's lock from under it.  Past ASIDE_LONG_S of that the
 * wait is most likely an idle engine's cycle waiting for peers that
 * defer theirs just as long (engine_start.c), and the sleep doubles up
 * to ASIDE_MAX_US: the root of a 2-rank 512 B broadcast loop (two netns
 * nodes, a CPU per rank) had its engine take its CPU 2,700 times a
 * second with the sleep fixed, about 300 times with it doubling.
 */
#define ASIDE_MIN_US 200u
#define ASIDE_MAX_US 3200u
#define ASIDE_LONG_S 2e-3

/* Until op idx is done, or op idx2 (when >= 0), or with idx < 0 every
 * op; *which says which of idx and idx2 finished. */
static hvd_status_t wait_until(struct xfer *x, int idx, int idx2, int *which)
{
	unsigned idle = 0, iter = 0, aside_us = ASIDE_MIN_US;
	double idle_since = 0, aside_since = 0;
	int napping = 0, spinning = 0;

	if (x->st != HVD_OK)
		return x->st;
	for (;;) {
		struct tp_op *pending = NULL;
		double now = 0;
		unsigned n;

		if (idx >= 0) {
			struct tp_op *op = &x->ops[idx];

			if (op_test(op) ||
			    (idx2 >= 0 && op_test(op = &x->ops[idx2]))) {
				if (which)
					*which = (int)(op - x->ops);
				x->last_progress = hvd_now();
				return x->st = op_result(x, op);
			}
			pending = op;
		} else {
			while (x->first_pending < x->nops) {
				struct tp_op *op = &x->ops[x->first_pending];

				if (!op_test(op))
					break;
				x->st = op_result(x, op);
				if (x->st != HVD_OK)
					return x->st;
				x->first_pending++;
				x->last_progress = 0; /* re-read below */
			}
			if (x->first_pending == x->nops)
				return HVD_OK;
			pending = &x->ops[x->first_pending];
		}
		if (background && transport_foreground_busy()) {
			if (aside_since == 0)
				aside_since = hvd_now();
			hvd_sleep_us(aside_us);
			now = hvd_now();
			if (now - aside_since > ASIDE_LONG_S &&
			    aside_us < ASIDE_MAX_US)
				aside_us *= 2;
			idle = 0;
		} else {
			aside_us = ASIDE_MIN_US;
			aside_since = 0;
			n = ucp_worker_progress(ucx_worker);
			if (lane_busy())
				n += (unsigned)lane_progress();
			if (n) {
				idle = 0;
				napping = 0;
				ucx_wake_sleepers();
			} else {
				++idle;
			}
			/* The clock is read at every eighth poll while
			 * spinning: at 8 bytes it was 5% of a rank's CPU. */
			if (idle ? idle == 1 || !spinning || (idle & 7) == 0
				 : (++iter & 63) == 0 || x->last_progress == 0)
				now = hvd_now();
			if (idle && now != 0)
				spinning = wait_idle(&idle, &idle_since,
						     &napping, x, now);
		}
		if (now != 0) {
			if (x->last_progress == 0)
				x->last_progress = now;
			if (now >= x->next_check) {
				x->st = watch(x, pending, now);
				if (x->st != HVD_OK)
					return x->st;
			}
		}
	}
}

hvd_status_t xfer_wait(struct xfer *x, int idx)
{
	if (idx < 0)
		return x->st != HVD_OK ? x->st
				       : hvd_error(HVD_ERR_INTERNAL,
						   "hvd: wait on no operation");
	return wait_until(x, idx, -1, NULL);
}

int xfer_wait_either(struct xfer *x, int a, int b)
{
	int which = -1;

	if (a < 0 || b < 0) {
		if (x->st == HVD_OK)
			x->st = hvd_error(HVD_ERR_INTERNAL,
					  "hvd: wait on no operation");
		return -1;
	}
	if (wait_until(x, a, b, &which) != HVD_OK)
		return -1;
	return which;
}

int xfer_test(struct xfer *x, int idx)
{
	struct tp_op *op;

	if (x->st != HVD_OK || idx < 0)
		return -1;
	op = &x->ops[idx];
	if (!op_test(op)) {
		ucp_worker_progress(ucx_worker);
		if (lane_busy())
			lane_progress();
		if (!op_test(op))
			return 0;
	}
	x->last_progress = hvd_now();
	x->st = op_result(x, op);
	return x->st == HVD_OK ? 1 : -1;
}

hvd_status_t xfer_waitall(struct xfer *x)
{
	return wait_until(x, -1, -1, NULL);
}

hvd_status_t xfer_sendrecv(struct xfer *x, int dst, const void *sbuf,
			   size_t slen, int src, void *rbuf, size_t rlen)
{
	int r = xfer_recv(x, src, rbuf, rlen);
	int s = xfer_send(x, dst, sbuf, slen);

	if (r < 0 || s < 0)
		return x->st;
	if (xfer_wait(x, r) != HVD_OK)
		return x->st;
	return xfer_wait(x, s);
}

/*
 * A send UCX has not finished may still read its buffer.  Over shared
 * memory a message that does not fit the peer's FIFO waits in UCX and is
 * copied out of the caller's buffer as room comes, by whichever thread
 * progresses the worker next: a rank that returned HVD_ERR_MISMATCH
 * with such a send in flight, whose caller then freed the buffer, died
 * in UCX's ucp_dt_pack when its engine progressed (4 ranks, a direct
 * reducescatter of 144001 against 144003 floats, 1 run in 6).  UCX
 * cannot cancel a send, so on an error the sends in flight to live peers
 * get up to DRAIN_S to finish, this rank progressing (the peers progress
 * too, in their own error paths and engines).  What is left after it is
 * a send to a failed peer, or a rendezvous whose receive the peer
 * cancelled, which reads nothing until it is taken: never.
 */
#define DRAIN_S 0.5

/* Wait for the sends (recv 0) or the cancelled receives (1) still in
 * flight with live peers, for up to DRAIN_S, progressing. */
static void drain(struct xfer *x, int recv)
{
	double until = hvd_now() + DRAIN_S;

	for (;;) {
		int left = 0;

		for (int i = 0; i < x->nops; i++) {
			struct tp_op *op = &x->ops[i];

			if (!op->recv != !recv || !op->req || op_test(op) ||
			    peers_failed(x->g->world_ranks[op->peer]))
				continue;
			left++;
		}
		if (!left || hvd_now() > until)
			return;
		ucp_worker_progress(ucx_worker);
	}
}

/*
 * Receives cancelled after an error.  A receive UCX already matched to a
 * message of several fragments goes on until the last one is in: it
 * writes the buffer, or calls the receive-reduce's unpack (which reads
 * its descriptor), however it was cancelled.  So they are drained as the
 * sends are (the rest of a message from a live peer is on its way).
 * What is still in flight then (from a failed peer, or after DRAIN_S) is
 * released, and what it points at must not be freed: the number of such
 * receives.
 */
static int release_recvs(struct xfer *x)
{
	int left = 0;

	drain(x, 1);
	for (int i = 0; i < x->nops; i++) {
		struct tp_op *op = &x->ops[i];

		if (!op->recv || !op->req)
			continue;
		atomic_store(&op->req->done, 0);
		ucp_request_free(op->req);
		op->req = NULL;
		op->done = 1;
		left++;
	}
	return left;
}

hvd_status_t xfer_end(struct xfer *x)
{
	int in_flight = 0;

	if (x->st == HVD_OK)
		xfer_waitall(x);
	if (x->st != HVD_OK) {
		drain(x, 0);
		if (x->st == HVD_ERR_MISMATCH && !x->told)
			mismatch_tell(x);
		/* Abandon what is still in flight: cancel receives (their
		 * buffers go back to the caller) and release everything;
		 * UCX calls no callback on a released request. */
		for (int i = 0; i < x->nops; i++) {
			struct tp_op *op = &x->ops[i];

			if (op->lop) {
				lane_cancel(op->lop);
				op->lop = NULL;
				op->done = 1;
				continue;
			}
			if (op->done || !op->req)
				continue;
			if (op->recv) {
				ucp_request_cancel(ucx_worker, op->req);
				continue; /* release_recvs */
			}
			op->tail = NULL; /* leaked: UCX may still read it */
			atomic_store(&op->req->done, 0);
			ucp_request_free(op->req);
			op->req = NULL;
			op->done = 1;
		}
		in_flight = release_recvs(x);
		if (x->st == HVD_ERR_PEER_FAILED ||
		    x->st == HVD_ERR_MISMATCH)
			x->g->broken = x->st;
	}
	for (int i = 0; i < x->nops; i++)
		free(x->ops[i].tail);
	free(x->ops);
	x->ops = NULL;
	x->nops = x->cap = 0;
	if (in_flight) {
		/* What a receive still in flight may write or call back
		 * into: leaked, not freed under it. */
		x->rr = NULL;
		x->kept = NULL;
	}
	rr_free(x); /* after every request is released */
	while (x->kept) {
		struct xfer_kept *k = x->kept;

		x->kept = k->next;
		free(k);
	}
	if (x->fg) {
		x->fg = 0;
		atomic_fetch_sub_explicit(&foreground, 1, memory_order_relaxed);
	}
	return x->st;
}

/*
 * transport.c - UCX (ucp) point-to-point layer: context, worker, lazy
 * endpoints, tagged send/receive with completion tracking, failure
 * detection, and a clean shutdown.
 *
 * Completion state lives inside the UCX request (request_size), so that an
 * operation abandoned after a peer failure can be released with
 * ucp_request_free() and UCX will never call back into memory we freed.
 *
 * A dead peer is noticed by, in order of speed: the endpoint error
 * callback (UCP_ERR_HANDLING_MODE_PEER), a PMIx process-termination event
 * (bootstrap.c calls transport_mark_failed), a liveness check of the pids
 * of peers on this node, and finally no progress for HOROVOD_PEER_TIMEOUT
 * seconds.  Any of them fails the running collective on every survivor:
 * each survivor checks the failed set of its communicator while waiting,
 * so a rank that only waits on live (but stuck) peers errors out too.
 */
#include "config.h"

#include "net/transport.h"
#include "comm/comm_impl.h"
#include "net/transport_impl.h"

#include <ucp/api/ucp.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

struct tp_op {
	struct tp_req *req;  /* NULL once completed                  */
	int peer;            /* comm rank                            */
	int recv;
	int done;
	ucs_status_t status;
	size_t expect, length;
};

static ucp_context_h context;
ucp_worker_h worker;
static ucp_address_t *my_addr;
static size_t my_addr_len;
struct peer *peers;
int npeers = -1, my_rank = -1;
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_int launcher_failed;
static double peer_timeout = 60.0;

static int yield_always;
static int err_peer_local; /* HVD_UCX_PEER_ERRORS=1: PEER mode on-node */


double transport_peer_timeout(void)
{
	return peer_timeout;
}

static void req_init(void *request)
{
	struct tp_req *r = request;

	atomic_init(&r->done, 0);
	r->status = UCS_OK;
	r->length = 0;
}

hvd_status_t transport_init(void **addr, size_t *addr_len)
{
	ucp_config_t *config;
	ucp_params_t params;
	ucp_worker_params_t wparams;
	ucp_worker_attr_t attr;
	ucs_status_t s;
	long ncpu;

	peer_timeout = hvd_env_double("HOROVOD_PEER_TIMEOUT", 60.0);
	if (peer_timeout <= 0)
		peer_timeout = 60.0;
	s = ucp_config_read(NULL, NULL, &config);
	if (s != UCS_OK)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_config_read failed (%s): check the "
				 "UCX_* environment variables",
				 UCS_MSG(s));
	memset(&params, 0, sizeof(params));
	params.field_mask = UCP_PARAM_FIELD_FEATURES |
			    UCP_PARAM_FIELD_REQUEST_SIZE |
			    UCP_PARAM_FIELD_REQUEST_INIT |
			    UCP_PARAM_FIELD_MT_WORKERS_SHARED;
	params.features = UCP_FEATURE_TAG;
	params.request_size = sizeof(struct tp_req);
	params.request_init = req_init;
	params.mt_workers_shared = 0;
	s = ucp_init(&params, config, &context);
	ucp_config_release(config);
	if (s != UCS_OK)
		return hvd_error(HVD_ERR_TRANSPORT, "hvd: ucp_init failed (%s)",
				 UCS_MSG(s));

	/* The engine thread runs collectives on its own communicator while
	 * the user thread may call the blocking API: one worker, MULTI. */
	memset(&wparams, 0, sizeof(wparams));
	wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wparams.thread_mode = UCS_THREAD_MODE_MULTI;
	s = ucp_worker_create(context, &wparams, &worker);
	if (s != UCS_OK) {
		ucp_cleanup(context);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_worker_create failed (%s)",
				 UCS_MSG(s));
	}
	attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
	if (ucp_worker_query(worker, &attr) != UCS_OK ||
	    attr.thread_mode != UCS_THREAD_MODE_MULTI) {
		ucp_worker_destroy(worker);
		ucp_cleanup(context);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: the UCX worker is not thread-safe: UCX "
				 "must be built with --enable-mt");
	}
	s = ucp_worker_get_address(worker, &my_addr, &my_addr_len);
	if (s != UCS_OK) {
		ucp_worker_destroy(worker);
		ucp_cleanup(context);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_worker_get_address failed (%s)",
				 UCS_MSG(s));
	}
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	(void)ncpu;
	*addr = my_addr;
	*addr_len = my_addr_len;
	return HVD_OK;
}

/*
 * Connect to every peer and wait until each connection is wired up, here in
 * hvd_init while this is the only thread on the worker.  Lazily, the
 * wireup ran while the engine thread and the caller's thread both
 * progressed and sent on the new endpoints, and once (shared mini-cluster,
 * tests/slurm/ckpt_signal.sh, loaded machine) both threads of both ranks
 * waited 60 s for messages that never came, a second into the job; that
 * race in UCX 1.13's wireup is the suspected cause (not reproduced in
 * about 200 loaded runs since).  Flushing an endpoint completes once its
 * wireup has.  Above
 * HVD_EAGER_CONNECT_MAX ranks (default 256) endpoints stay lazy, so that
 * big jobs do not open a connection per pair; HVD_EAGER_CONNECT=0 turns it
 * off.
 */
static hvd_status_t connect_all(const struct hvd_world *w)
{
	long max = hvd_env_long("HVD_EAGER_CONNECT_MAX", 256);
	void **reqs;
	hvd_status_t st = HVD_OK;
	double deadline;
	int left;

	if (w->size < 2 || w->size > max ||
	    !hvd_env_bool("HVD_EAGER_CONNECT", 1))
		return HVD_OK;
	reqs = calloc((size_t)w->size, sizeof(*reqs));
	if (!reqs)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	/* From the next rank on, so that not every rank starts with 0. */
	for (int i = 1; i < w->size && st == HVD_OK; i++) {
		int r = (w->rank + i) % w->size;
		ucp_request_param_t prm;
		ucp_ep_h ep = tp_get_ep(r, &st);
		void *q;

		if (!ep)
			break;
		memset(&prm, 0, sizeof(prm));
		q = ucp_ep_flush_nbx(ep, &prm);
		if (UCS_PTR_IS_ERR(q))
			st = hvd_error(HVD_ERR_PEER_FAILED,
				       "hvd: cannot connect to rank %d: "
				       "ucp_ep_flush failed (%s)",
				       r, UCS_MSG(UCS_PTR_STATUS(q)));
		else
			reqs[r] = q;
	}
	deadline = hvd_now() + peer_timeout;
	do {
		ucp_worker_progress(worker);
		left = 0;
		for (int r = 0; r < w->size; r++) {
			ucs_status_t s;

			if (!reqs[r])
				continue;
			s = ucp_request_check_status(reqs[r]);
			if (s == UCS_INPROGRESS) {
				left++;
				continue;
			}
			ucp_request_free(reqs[r]);
			reqs[r] = NULL;
			if (s != UCS_OK && st == HVD_OK)
				st = hvd_error(HVD_ERR_PEER_FAILED,
					       "hvd: cannot connect to rank %d "
					       "(%s)",
					       r, UCS_MSG(s));
		}
		if (left && yield_always)
			sched_yield();
	} while (left && hvd_now() < deadline);
	for (int r = 0; r < w->size; r++) {
		if (!reqs[r])
			continue;
		if (st == HVD_OK)
			st = hvd_error(HVD_ERR_PEER_FAILED,
				       "hvd: rank %d did not answer the "
				       "connection within %.0f s "
				       "(HOROVOD_PEER_TIMEOUT); did it call "
				       "hvd_init()?",
				       r, peer_timeout);
		ucp_request_free(reqs[r]); /* UCX releases it when done */
	}
	free(reqs);
	return st;
}

hvd_status_t transport_set_peers(const struct hvd_world *w,
				 struct bootstrap_peer *bp)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	peers = calloc((size_t)w->size, sizeof(*peers));
	if (!peers)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int r = 0; r < w->size; r++) {
		atomic_init(&peers[r].ep, NULL);
		atomic_init(&peers[r].failed, 0);
		atomic_init(&peers[r].announce, 0);
		/* Take ownership of the address buffer. */
		peers[r].addr = bp[r].addr;
		bp[r].addr = NULL;
		peers[r].pid = bp[r].pid;
		peers[r].local = w->node_of[r] == w->node_id;
	}
	npeers = w->size;
	my_rank = w->rank;
	/* Oversubscribed (more ranks here than cores): waiting ranks must
	 * give their core away at once or the rank they wait for never
	 * runs.  HVD_POLL_YIELD=1 forces it. */
	yield_always = hvd_env_bool("HVD_POLL_YIELD",
				    ncpu > 0 && w->local_size > ncpu);
	err_peer_local = hvd_env_bool("HVD_UCX_PEER_ERRORS", 0);
	tp_post_abort_recv();
	return connect_all(w);
}

/* ------------------------------------------------------- failures */

ucp_ep_h tp_get_ep(int w, hvd_status_t *st)
{
	ucp_ep_h ep = atomic_load_explicit(&peers[w].ep, memory_order_acquire);
	ucp_ep_params_t p;
	ucs_status_t s;

	if (ep)
		return ep;
	pthread_mutex_lock(&ep_lock);
	ep = atomic_load(&peers[w].ep);
	if (!ep) {
		memset(&p, 0, sizeof(p));
		p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
			       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			       UCP_EP_PARAM_FIELD_ERR_HANDLER;
		p.address = peers[w].addr;
		/* UCX 1.13's shared-memory transports (posix, sysv, cma)
		 * have no peer failure handling: asking for it on a node
		 * leaves only TCP loopback, ~100x slower at 4 KiB.  Peers
		 * on this node are watched through their pids instead. */
		p.err_mode = peers[w].local && !err_peer_local
				     ? UCP_ERR_HANDLING_MODE_NONE
				     : UCP_ERR_HANDLING_MODE_PEER;
		p.err_handler.cb = tp_ep_error;
		p.err_handler.arg = (void *)(intptr_t)w;
		s = ucp_ep_create(worker, &p, &ep);
		if (s != UCS_OK) {
			ep = NULL;
			*st = hvd_error(HVD_ERR_TRANSPORT,
					"hvd: cannot connect to rank %d: "
					"ucp_ep_create failed (%s)",
					w, UCS_MSG(s));
		} else {
			atomic_store_explicit(&peers[w].ep, ep,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&ep_lock);
	return ep;
}

/* ------------------------------------------------------- operations */

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
	struct tp_req *r = request;

	(void)user_data;
	r->status = status;
	atomic_store_explicit(&r->done, 1, memory_order_release);
}

void tp_recv_cb(void *request, ucs_status_t status,
		const ucp_tag_recv_info_t *info, void *user_data)
{
	struct tp_req *r = request;

	(void)user_data;
	r->status = status;
	r->length = info ? info->length : 0;
	atomic_store_explicit(&r->done, 1, memory_order_release);
}

void xfer_begin(struct xfer *x, hvd_comm_t *comm)
{
	uint32_t seq = comm->seq++;

	memset(x, 0, sizeof(*x));
	x->comm = comm;
	x->me = comm->rank;
	x->tag_base = tp_tag(comm->ctx, seq, 0);
	x->st = comm->broken;
	x->last_progress = hvd_now();
	x->next_check = x->last_progress + 0.05;
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

int xfer_send(struct xfer *x, int peer, const void *buf, size_t len)
{
	ucp_request_param_t prm;
	struct tp_op *op;
	ucp_ep_h ep;
	void *r;
	int idx, w;

	if (x->st != HVD_OK)
		return -1;
	op = new_op(x, peer, &idx);
	if (!op)
		return -1;
	w = x->comm->world_ranks[peer];
	ep = tp_get_ep(w, &x->st);
	if (!ep)
		return -1;
	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			   UCP_OP_ATTR_FIELD_DATATYPE;
	prm.cb.send = send_cb;
	prm.datatype = ucp_dt_make_contig(1);
	r = ucp_tag_send_nbx(ep, buf, len, x->tag_base | (uint64_t)x->me,
			     &prm);
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

int xfer_recv(struct xfer *x, int peer, void *buf, size_t len)
{
	ucp_request_param_t prm;
	ucp_tag_recv_info_t info;
	struct tp_op *op;
	void *r;
	int idx;

	if (x->st != HVD_OK)
		return -1;
	op = new_op(x, peer, &idx);
	if (!op)
		return -1;
	op->recv = 1;
	op->expect = len;
	memset(&prm, 0, sizeof(prm));
	/* UCX 1.13 leaves recv_info unset when a receive completes at once
	 * from the unexpected queue: always take the callback, which
	 * reports the length (needed to detect mismatched counts). */
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			   UCP_OP_ATTR_FIELD_DATATYPE |
			   UCP_OP_ATTR_FIELD_RECV_INFO |
			   UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	prm.cb.recv = tp_recv_cb;
	prm.datatype = ucp_dt_make_contig(1);
	prm.recv_info.tag_info = &info;
	info.length = 0;
	r = ucp_tag_recv_nbx(worker, buf, len,
			     x->tag_base | (uint64_t)(unsigned)peer,
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
				  x->comm->world_ranks[peer],
				  UCS_MSG(op->status));
		return -1;
	} else {
		op->req = r;
	}
	return idx;
}

/* Move a finished request's result into the op; 1 when done. */
static int op_test(struct tp_op *op)
{
	struct tp_req *r = op->req;

	if (op->done)
		return 1;
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
	int w = x->comm->world_ranks[op->peer];

	if (op->status == UCS_ERR_MESSAGE_TRUNCATED)
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: rank %d sent more than the %zu bytes "
				 "expected: ranks called the collective with "
				 "different counts or types",
				 w, op->expect);
	if (op->status != UCS_OK) {
		int f = transport_comm_failed(x->comm);

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

/* Periodic checks while waiting: failed members, dead local pids, and
 * the progress timeout.  Returns an error status or HVD_OK. */
static hvd_status_t watch(struct xfer *x, struct tp_op *waiting, double now)
{
	int f;

	x->next_check = now + 0.05;
	tp_check_local_pids(x->comm);
	tp_poll_abort();
	f = transport_comm_failed(x->comm);
	/* A rank outside this communicator counts too: the hierarchical
	 * algorithms wait on live peers that wait on the dead one, and
	 * without elasticity a failure anywhere ends the job's
	 * collectives. */
	if (f < 0)
		f = tp_any_failed();
	if (f >= 0)
		return peer_error(x, f, "%s", transport_fail_reason(f));
	if (atomic_load(&launcher_failed))
		return hvd_error(HVD_ERR_PEER_FAILED,
				 "hvd: lost the connection to the PMIx server "
				 "(the launcher died)");
	if (now - x->last_progress > peer_timeout) {
		int w = x->comm->world_ranks[waiting->peer];
		char why[160];

		snprintf(why, sizeof(why),
			 "no progress from it for %.0f s "
			 "(HOROVOD_PEER_TIMEOUT)",
			 peer_timeout);
		tp_mark_failed(w, why, 0);
		return peer_error(x, w, "%s", why);
	}
	return HVD_OK;
}

static hvd_status_t wait_until(struct xfer *x, int idx)
{
	unsigned idle = 0, iter = 0;
	double idle_since = 0;
	int napping = 0;

	if (x->st != HVD_OK)
		return x->st;
	for (;;) {
		struct tp_op *pending = NULL;
		unsigned n;

		if (idx >= 0) {
			struct tp_op *op = &x->ops[idx];

			if (op_test(op)) {
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
			/* Also collect errors of later ops early. */
		}
		n = ucp_worker_progress(worker);
		if (n) {
			idle = 0;
		} else if (++idle > 2000 || yield_always) {
			/* Spin, then yield, then after a millisecond of
			 * nothing nap briefly: on a node with more busy
			 * ranks than cores (or a loaded one) the peer we
			 * wait for needs our core, and sched_yield alone
			 * does not give it away under CFS. */
			if (idle == 2001)
				idle_since = hvd_now();
			if (idle > 2001 && (idle & 63) == 0 &&
			    hvd_now() - idle_since > 1e-3)
				napping = 1;
			if (napping) {
				struct timespec ts = {0, 20000};

				nanosleep(&ts, NULL);
			} else {
				sched_yield();
			}
		}
		if (n)
			napping = 0;
		if ((++iter & 63) == 0 || x->last_progress == 0) {
			double now = hvd_now();

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
	return wait_until(x, idx);
}

hvd_status_t xfer_waitall(struct xfer *x)
{
	return wait_until(x, -1);
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

hvd_status_t xfer_end(struct xfer *x)
{
	if (x->st == HVD_OK)
		xfer_waitall(x);
	if (x->st != HVD_OK) {
		/* Abandon what is still in flight: cancel receives (their
		 * buffers go back to the caller) and release everything;
		 * UCX calls no callback on a released request. */
		for (int i = 0; i < x->nops; i++) {
			struct tp_op *op = &x->ops[i];

			if (op->done || !op->req)
				continue;
			if (op->recv)
				ucp_request_cancel(worker, op->req);
			atomic_store(&op->req->done, 0);
			ucp_request_free(op->req);
			op->req = NULL;
			op->done = 1;
		}
		if (x->st == HVD_ERR_PEER_FAILED ||
		    x->st == HVD_ERR_MISMATCH)
			x->comm->broken = x->st;
	}
	free(x->ops);
	x->ops = NULL;
	x->nops = x->cap = 0;
	return x->st;
}

/* ------------------------------------------------------- shutdown */

void transport_finalize(int fence)
{
	void **reqs = NULL;
	int nreq = 0;
	volatile int fenced = 1;
	double deadline;

	if (!worker)
		return;
	tp_abort_cancel();
	if (peers)
		reqs = calloc((size_t)npeers, sizeof(*reqs));
	for (int r = 0; peers && r < npeers; r++) {
		ucp_ep_h ep = atomic_load(&peers[r].ep);
		ucp_request_param_t prm;
		void *q;

		if (!ep)
			continue;
		memset(&prm, 0, sizeof(prm));
		prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
		prm.flags = atomic_load(&peers[r].failed)
				    ? UCP_EP_CLOSE_FLAG_FORCE
				    : 0; /* flush */
		q = ucp_ep_close_nbx(ep, &prm);
		if (q && !UCS_PTR_IS_ERR(q) && reqs)
			reqs[nreq++] = q;
		atomic_store(&peers[r].ep, NULL);
	}
	/* Keep progressing until every rank has closed: a rank that
	 * stopped progressing could leave its peers' flushes hanging. */
	if (fence && bootstrap_fence_nb(&fenced) != HVD_OK)
		fenced = 1;
	deadline = hvd_now() + (fence ? 30.0 : 5.0);
	for (;;) {
		int left = 0;

		ucp_worker_progress(worker);
		for (int i = 0; i < nreq; i++) {
			if (!reqs[i])
				continue;
			if (ucp_request_check_status(reqs[i]) ==
			    UCS_INPROGRESS) {
				left++;
			} else {
				ucp_request_free(reqs[i]);
				reqs[i] = NULL;
			}
		}
		if ((!left && __atomic_load_n(&fenced, __ATOMIC_ACQUIRE)) ||
		    hvd_now() > deadline)
			break;
		if (yield_always)
			sched_yield();
	}
	if (!__atomic_load_n(&fenced, __ATOMIC_ACQUIRE))
		hvd_log(HVD_LOG_WARNING,
			"finalize: not every rank reached hvd_finalize() "
			"within 30 s");
	for (int i = 0; i < nreq; i++)
		if (reqs[i])
			ucp_request_free(reqs[i]);
	free(reqs);
	for (int r = 0; peers && r < npeers; r++)
		free(peers[r].addr);
	free(peers);
	peers = NULL;
	npeers = -1;
	ucp_worker_release_address(worker, my_addr);
	ucp_worker_destroy(worker);
	ucp_cleanup(context);
	worker = NULL;
	context = NULL;
	atomic_store(&launcher_failed, 0);
}

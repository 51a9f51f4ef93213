/*
 * ucx.c - the UCX (ucp) objects of the process: context, worker, the
 * endpoints, the request callbacks, and a clean shutdown.
 *
 * One context (UCP_FEATURE_TAG) and one worker in UCS_THREAD_MODE_MULTI:
 * the engine thread runs collectives on its own communicator while the
 * user's thread may call the blocking API.  Endpoints are made on first
 * use (or all at once in hvd_init for small jobs, ucx_connect_all), with
 * an error callback that records the peer as failed.
 */
#include "config.h"

#include "net/bootstrap.h"
#include "net/lane_if.h"
#include "net/peers.h"
#include "net/ucx.h"

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

ucp_worker_h ucx_worker;
static ucp_context_h context;
static ucp_address_t *my_addr;
static size_t my_addr_len;
static _Atomic(ucp_ep_h) *eps;
static int neps;
static pthread_mutex_t ep_lock = PTHREAD_MUTEX_INITIALIZER;
static double peer_timeout = 60.0;
static int yield_always;
static int err_peer_local; /* HVD_UCX_PEER_ERRORS=1: PEER mode on-node */
static int efd = -1;       /* the worker's event fd (UCP_FEATURE_WAKEUP) */
static atomic_int sleepers; /* threads blocked in ucx_block()         */
static int wakeup;          /* the context has UCP_FEATURE_WAKEUP     */

/* The event fd of the current worker, or -1 (no WAKEUP, or UCX has none). */
static void worker_efd(void)
{
	efd = -1;
	if (wakeup && ucp_worker_get_efd(ucx_worker, &efd) != UCS_OK)
		efd = -1;
}

double transport_peer_timeout(void)
{
	return peer_timeout;
}

int ucx_peer_errors_local(void)
{
	return err_peer_local;
}

int ucx_yield_always(void)
{
	return yield_always;
}

static void req_init(void *request)
{
	struct tp_req *r = request;

	atomic_init(&r->done, 0);
	r->status = UCS_OK;
	r->length = 0;
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	/* A connection that timed out or found no route says the peer
	 * went silent; the others (reset, refused) that its host answered. */
	enum peer_gone kind = status == UCS_ERR_ENDPOINT_TIMEOUT ||
				      status == UCS_ERR_TIMED_OUT ||
				      status == UCS_ERR_UNREACHABLE
				  ? PEER_QUIET
				  : PEER_DEAD;
	char why[128];

	(void)ep;
	snprintf(why, sizeof(why), "UCX reported its connection failed (%s)",
		 UCS_MSG(status));
	peers_mark((int)(intptr_t)arg, why, 1, kind);
}

/*
 * KEEPCNT=5, KEEPINTVL=HOROVOD_PEER_TIMEOUT/5 (UCX: 3 probes 2 s apart,
 * after KEEPIDLE, 10 s without traffic): UCX's TCP transport turns on the
 * kernel's keepalive for each connection, and a connection whose probes
 * go unanswered fails its endpoint with "Endpoint timeout", which libhvd
 * takes as the peer's death.  A connection idle for 10 s (a rank's
 * endpoint to a node-mate of its peer, say) was failed 6 s into any
 * network outage, a link or switch failover for one; with
 * HOROVOD_PEER_TIMEOUT at 60 s the job was meant to ride out a minute.
 * Measured, 2 netns nodes x 2, the nodes cut apart for 20 s: every rank
 * failed 15.6 s after the cut (rank 0 naming rank 3, which it sends
 * nothing); with these values the job went on.  A dead node is still
 * found: by the keepalive within KEEPIDLE + HOROVOD_PEER_TIMEOUT, and by
 * the collective that waits on it within HOROVOD_PEER_TIMEOUT.
 */
#define KEEP_PROBES 5

static void keepalive_config(ucp_config_t *config)
{
	char intvl[32], cnt[16];
	double ms = peer_timeout * 1e3 / KEEP_PROBES;

	if (getenv("UCX_TCP_KEEPINTVL") || getenv("UCX_TCP_KEEPCNT"))
		return;
	snprintf(intvl, sizeof(intvl), "%.0fms", ms < 1000 ? 1000 : ms);
	snprintf(cnt, sizeof(cnt), "%d", KEEP_PROBES);
	ucp_config_modify(config, "KEEPINTVL", intvl);
	ucp_config_modify(config, "KEEPCNT", cnt);
}

/*
 * Our defaults for four UCX settings, unless the user set them (UCX_...),
 * and two more for TCP's keepalive (keepalive_config, above):
 *
 * USE_MT_MUTEX=y: the worker is shared by the engine thread and the
 * caller's thread, and UCX's default spinlock burns the waiting thread's
 * core while the other holds the worker (copying a received fragment, say).
 * Measured across two netns nodes (16 MiB allreduce, 2 ranks): 30% of the
 * samples of a rank were pthread_spin_lock in the engine thread; with the
 * mutex none, and the allreduce went from 0.66x to 1.04x OpenMPI's time in
 * the same runs.
 *
 * RNDV_THRESH=512K: over TCP UCX has no zero-copy receive for endpoints
 * with peer failure handling (no rma lane), so its rendezvous only adds a
 * round trip (RTS, RTR, then the data as active messages) to what the
 * eager protocol moves the same way; its automatic threshold is 19 KB.  The
 * algorithms post receives ahead and bound their sends in flight, so an
 * eager segment rarely waits in the unexpected queue.  Measured, 2 netns
 * nodes: allreduce 32 KiB 47 -> 23 us, 256 KiB 477 -> 163 us.  Not on a
 * machine with RDMA devices (InfiniBand, RoCE: /sys/class/infiniband),
 * where rendezvous reads the data zero-copy and UCX's own threshold is
 * the one to keep.
 *
 * TCP_TX_SEG_SIZE=64K, TCP_RX_SEG_SIZE=256K (UCX: 8K and 64K; set as
 * TX_SEG_SIZE and RX_SEG_SIZE, the names within the transport): over TCP
 * every eager fragment is one TX segment with its own headers and send
 * call, so a 256K ring segment went as 32 of them.  Measured on a quiet
 * machine, 2 netns nodes x 1 rank, medians of 3 alternations each:
 * allreduce 64 KiB 42.7 -> 33.8 us, 256 KiB 138 -> 108 us, 1 MiB 662 ->
 * 574 us, 4 MiB 3.28 -> 2.40 ms, 16 MiB 14.8 -> 13.3 ms; 128K/512K and
 * 256K/1M were no better.  Buffers come from UCX's pools as a connection
 * sends or receives, not per endpoint up front.  Not with RDMA devices,
 * where TCP carries no data.
 */
int ucx_uses_rdma(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d)))
		found = e->d_name[0] != '.';
	closedir(d);
	return found && lane_if_rdma_allowed(getenv("UCX_TLS"),
					     getenv("UCX_NET_DEVICES"));
}

static void tune_config(ucp_config_t *config)
{
	/* UCP's name, the variable a user sets, our value, and whether it
	 * is for TCP and Ethernet only (not where RDMA devices carry the
	 * data).  A transport's setting goes in by its name within the
	 * transport: UCP hands it to every transport that has it, and only
	 * TCP has the two segment sizes. */
	static const struct {
		const char *name, *var, *value;
		int no_rdma;
	} mine[] = {
		{"USE_MT_MUTEX", "UCX_USE_MT_MUTEX", "y", 0},
		{"RNDV_THRESH", "UCX_RNDV_THRESH", "512K", 1},
		{"TX_SEG_SIZE", "UCX_TCP_TX_SEG_SIZE", "64K", 1},
		{"RX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE", "256K", 1},
	};
	int rdma = ucx_uses_rdma();

	for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++)
		if (!getenv(mine[i].var) && !(mine[i].no_rdma && rdma))
			ucp_config_modify(config, mine[i].name, mine[i].value);
	keepalive_config(config);
}

#define WORKER_RETRIES 40

/* UCX 1.13 fails the worker when its POSIX shared-memory transport
 * finds no room in /dev/shm for its receive FIFO and descriptors (about
 * 5 MiB a rank: 2 ranks fail in 8 MiB and fit in 10; a container's
 * /dev/shm, or one that other jobs filled): say how much room there is
 * and what to do.  The same statuses can come from the heap, so the
 * message gives the room and lets the reader judge. */
static hvd_status_t no_room_error(ucs_status_t s)
{
	struct statvfs sv;

	if (statvfs("/dev/shm", &sv) != 0)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_worker_create failed (%s)",
				 UCS_MSG(s));
	return hvd_error(HVD_ERR_TRANSPORT,
			 "hvd: ucp_worker_create failed (%s); /dev/shm has "
			 "%llu KiB free, and UCX's shared-memory transport "
			 "needs about 5 MiB there for each rank on the node: "
			 "if that is short, free or enlarge /dev/shm, or "
			 "leave that transport out with UCX_TLS=^posix",
			 UCS_MSG(s),
			 (unsigned long long)sv.f_bavail *
				 (unsigned long long)sv.f_frsize / 1024);
}

/* A thread-safe worker on ctx, and its address; "No such device" is
 * tried again up to retries times, 50 ms apart. */
static hvd_status_t worker_open(ucp_context_h ctx, ucp_worker_h *wk,
				ucp_address_t **addr, size_t *addr_len,
				int retries)
{
	ucp_worker_params_t wparams;
	ucp_worker_attr_t attr;
	ucs_status_t s;

	/* The engine thread runs collectives on its own communicator while
	 * the user thread may call the blocking API: one worker, MULTI. */
	memset(&wparams, 0, sizeof(wparams));
	wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wparams.thread_mode = UCS_THREAD_MODE_MULTI;
	/* UCX 1.13 was seen to fail a worker with "No such device" for a
	 * second or so at a time on a machine whose network interfaces other
	 * jobs were adding and removing (every transport's interface
	 * enumeration failing at once): try again for a while. */
	for (int tries = 0;; tries++) {
		struct timespec ts = {0, 50 * 1000 * 1000};

		s = ucp_worker_create(ctx, &wparams, wk);
		if (s != UCS_ERR_NO_DEVICE || tries >= retries)
			break;
		if (tries == 0)
			hvd_log(HVD_LOG_INFO,
				"ucp_worker_create: %s; trying again",
				UCS_MSG(s));
		nanosleep(&ts, NULL);
	}
	/* Which status a full /dev/shm gives depends on which of UCX's
	 * allocations meets it first: the receive FIFO's ("No resources")
	 * or its descriptor pool's ("Out of memory"); ranks racing for the
	 * last pages get either. */
	if (s == UCS_ERR_NO_RESOURCE || s == UCS_ERR_NO_MEMORY)
		return no_room_error(s);
	if (s != UCS_OK)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_worker_create failed (%s)",
				 UCS_MSG(s));
	attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
	if (ucp_worker_query(*wk, &attr) != UCS_OK ||
	    attr.thread_mode != UCS_THREAD_MODE_MULTI) {
		ucp_worker_destroy(*wk);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: the UCX worker is not thread-safe: UCX "
				 "must be built with --enable-mt");
	}
	s = ucp_worker_get_address(*wk, addr, addr_len);
	if (s != UCS_OK) {
		ucp_worker_destroy(*wk);
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_worker_get_address failed (%s)",
				 UCS_MSG(s));
	}
	return HVD_OK;
}

/* A context on the devices there are now; *wk: whether it has WAKEUP. */
static hvd_status_t context_open(ucp_context_h *ctx, int *wk)
{
	ucp_config_t *config;
	ucp_params_t params;
	ucs_status_t s;

	s = ucp_config_read(NULL, NULL, &config);
	if (s != UCS_OK)
		return hvd_error(HVD_ERR_TRANSPORT,
				 "hvd: ucp_config_read failed (%s): check the "
				 "UCX_* environment variables",
				 UCS_MSG(s));
	tune_config(config);
	memset(&params, 0, sizeof(params));
	params.field_mask = UCP_PARAM_FIELD_FEATURES |
			    UCP_PARAM_FIELD_REQUEST_SIZE |
			    UCP_PARAM_FIELD_REQUEST_INIT |
			    UCP_PARAM_FIELD_MT_WORKERS_SHARED;
	/* WAKEUP: waiters block in the kernel on the worker's event fd
	 * (ucx_block) instead of spinning; HVD_POLL_BLOCK=0 leaves it out. */
	params.features = UCP_FEATURE_TAG;
	if (hvd_env_bool("HVD_POLL_BLOCK", 1))
		params.features |= UCP_FEATURE_WAKEUP;
	params.request_size = sizeof(struct tp_req);
	params.request_init = req_init;
	params.mt_workers_shared = 0;
	s = ucp_init(&params, config, ctx);
	if (s != UCS_OK && (params.features & UCP_FEATURE_WAKEUP)) {
		params.features &= ~(uint64_t)UCP_FEATURE_WAKEUP;
		s = ucp_init(&params, config, ctx);
	}
	ucp_config_release(config);
	if (s != UCS_OK)
		return hvd_error(HVD_ERR_TRANSPORT, "hvd: ucp_init failed (%s)",
				 UCS_MSG(s));
	*wk = (params.features & UCP_FEATURE_WAKEUP) != 0;
	return HVD_OK;
}

hvd_status_t ucx_init(void **addr, size_t *addr_len)
{
	hvd_status_t st;

	peer_timeout = hvd_env_double("HOROVOD_PEER_TIMEOUT", 60.0);
	if (peer_timeout <= 0)
		peer_timeout = 60.0;
	HVD_CHECK(context_open(&context, &wakeup));
	st = worker_open(context, &ucx_worker, &my_addr, &my_addr_len,
			 WORKER_RETRIES);
	if (st != HVD_OK) {
		ucp_cleanup(context);
		context = NULL;
		return st;
	}
	atomic_init(&sleepers, 0);
	worker_efd();
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
		ucp_ep_h ep = ucx_ep(r, &st);
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
		ucp_worker_progress(ucx_worker);
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

void ucx_set_oversubscribed(int oversubscribed)
{
	/* Oversubscribed (more ranks on this machine than cores): waiting
	 * ranks must give their core away at once or the rank they wait for
	 * never runs.  HVD_POLL_YIELD=1 forces it. */
	yield_always = hvd_env_bool("HVD_POLL_YIELD", oversubscribed);
}

hvd_status_t ucx_set_peers(const struct hvd_world *w)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* Until the transport knows whether the nodes share this machine:
	 * the ranks of this node against its cores. */
	ucx_set_oversubscribed(ncpu > 0 && w->local_size > ncpu);
	err_peer_local = hvd_env_bool("HVD_UCX_PEER_ERRORS", 0);
	eps = calloc((size_t)w->size, sizeof(*eps));
	if (!eps)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory for %d endpoints",
				 w->size);
	for (int r = 0; r < w->size; r++)
		atomic_init(&eps[r], NULL);
	neps = w->size;
	return connect_all(w);
}

ucp_ep_h ucx_ep(int w, hvd_status_t *st)
{
	ucp_ep_h ep = atomic_load_explicit(&eps[w], memory_order_acquire);
	ucp_ep_params_t p;
	ucs_status_t s;

	if (ep)
		return ep;
	if (!eps || w < 0 || w >= neps) {
		*st = hvd_error(HVD_ERR_INTERNAL,
				"hvd: no endpoint for rank %d (of %d)", w, neps);
		return NULL;
	}
	pthread_mutex_lock(&ep_lock);
	ep = atomic_load(&eps[w]);
	if (!ep) {
		memset(&p, 0, sizeof(p));
		p.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
			       UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			       UCP_EP_PARAM_FIELD_ERR_HANDLER;
		p.address = peers_addr(w);
		/* UCX 1.13's shared-memory transports (posix, sysv, cma)
		 * have no peer failure handling: asking for it on a node
		 * leaves only TCP loopback, ~100x slower at 4 KiB.  Peers
		 * on this node are watched through their pids instead. */
		p.err_mode = peers_local(w) && !err_peer_local
				     ? UCP_ERR_HANDLING_MODE_NONE
				     : UCP_ERR_HANDLING_MODE_PEER;
		p.err_handler.cb = ep_error;
		p.err_handler.arg = (void *)(intptr_t)w;
		s = ucp_ep_create(ucx_worker, &p, &ep);
		if (s != UCS_OK) {
			ep = NULL;
			*st = hvd_error(HVD_ERR_TRANSPORT,
					"hvd: cannot connect to rank %d: "
					"ucp_ep_create failed (%s)",
					w, UCS_MSG(s));
		} else {
			atomic_store_explicit(&eps[w], ep,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&ep_lock);
	return ep;
}

int ucx_block(int timeout_ms, int extra_fd)
{
	struct pollfd p[2] = {{.fd = efd, .events = POLLIN},
			      {.fd = extra_fd, .events = POLLIN}};
	ucs_status_t s;

	if (efd < 0)
		return 0;
	/* Counted before arming: a thread whose progress consumes our
	 * event from now on signals the worker, and a signal that comes
	 * before the arm makes the arm return BUSY. */
	atomic_fetch_add(&sleepers, 1);
	s = ucp_worker_arm(ucx_worker);
	if (s == UCS_OK)
		poll(p, extra_fd >= 0 ? 2 : 1, timeout_ms);
	atomic_fetch_sub(&sleepers, 1);
	return s == UCS_OK || s == UCS_ERR_BUSY;
}

void ucx_wake_sleepers(void)
{
	if (atomic_load_explicit(&sleepers, memory_order_relaxed) > 0)
		ucp_worker_signal(ucx_worker);
}

void ucx_send_forget(int w, const void *buf, size_t len, uint64_t tag)
{
	hvd_status_t st = HVD_OK;
	ucp_request_param_t prm;
	ucp_ep_h ep;
	void *r;

	if (w == peers_self() || peers_failed(w) || !(ep = ucx_ep(w, &st)))
		return;
	memset(&prm, 0, sizeof(prm));
	r = ucp_tag_send_nbx(ep, buf, len, tag, &prm);
	if (r && !UCS_PTR_IS_ERR(r))
		ucp_request_free(r);
}

void ucx_bytes_send_params(ucp_request_param_t *prm)
{
	memset(prm, 0, sizeof(*prm));
	prm->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_DATATYPE;
	prm->cb.send = ucx_send_cb;
	prm->datatype = ucp_dt_make_contig(1);
}

void ucx_bytes_recv_params(ucp_request_param_t *prm)
{
	memset(prm, 0, sizeof(*prm));
	prm->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			    UCP_OP_ATTR_FIELD_DATATYPE |
			    UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	prm->cb.recv = ucx_recv_cb;
	prm->datatype = ucp_dt_make_contig(1);
}

void *ucx_recv_probed(ucp_tag_message_h m, size_t len, size_t *got)
{
	ucp_request_param_t prm;
	struct tp_req *r;
	void *buf = malloc(len ? len : 1);
	double until;
	int done;

	ucx_bytes_recv_params(&prm);
	r = buf ? ucp_tag_msg_recv_nbx(ucx_worker, buf, len, m, &prm) : NULL;
	if (!r || UCS_PTR_IS_ERR(r)) {
		free(buf);
		return NULL;
	}
	until = hvd_now() + 0.1;
	while (!(done = atomic_load(&r->done)) && hvd_now() < until)
		ucp_worker_progress(ucx_worker);
	if (done && r->status == UCS_OK)
		*got = r->length;
	else if (done)
		*got = (size_t)-1;
	atomic_store(&r->done, 0);
	ucp_request_free(r);
	if (!done)
		return NULL; /* UCX may still write it */
	if (*got == (size_t)-1) {
		free(buf);
		return NULL;
	}
	return buf;
}

void ucx_send_cb(void *request, ucs_status_t status, void *user_data)
{
	struct tp_req *r = request;

	(void)user_data;
	r->status = status;
	atomic_store_explicit(&r->done, 1, memory_order_release);
}

void ucx_recv_cb(void *request, ucs_status_t status,
		const ucp_tag_recv_info_t *info, void *user_data)
{
	struct tp_req *r = request;

	(void)user_data;
	r->status = status;
	r->length = info ? info->length : 0;
	atomic_store_explicit(&r->done, 1, memory_order_release);
}

/* Close every endpoint (force: all of them; else those of failed peers,
 * the others flushed); *reqs gets the closes still in flight, the return
 * value their number. */
static int close_eps(int force, void ***reqs)
{
	void **q = eps ? calloc((size_t)neps, sizeof(*q)) : NULL;
	int n = 0;

	for (int r = 0; eps && r < neps; r++) {
		ucp_ep_h ep = atomic_load(&eps[r]);
		ucp_request_param_t prm;
		void *c;

		if (!ep)
			continue;
		memset(&prm, 0, sizeof(prm));
		prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
		prm.flags = force || peers_failed(r) ? UCP_EP_CLOSE_FLAG_FORCE
						     : 0; /* flush */
		c = ucp_ep_close_nbx(ep, &prm);
		if (c && !UCS_PTR_IS_ERR(c) && q)
			q[n++] = c;
		atomic_store(&eps[r], NULL);
	}
	*reqs = q;
	return n;
}

int ucx_reqs_left(void **reqs, int n)
{
	int left = 0;

	for (int i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		if (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS) {
			left++;
		} else {
			ucp_request_free(reqs[i]);
			reqs[i] = NULL;
		}
	}
	return left;
}

/* Progress once and free the closes that completed; how many are left. */
static int reap_closes(void **reqs, int n)
{
	ucp_worker_progress(ucx_worker);
	return ucx_reqs_left(reqs, n);
}

/* Free what is left of the closes, and the endpoint table. */
static void end_closes(void **reqs, int n)
{
	for (int i = 0; i < n; i++)
		if (reqs[i])
			ucp_request_free(reqs[i]);
	free(reqs);
	free((void *)eps);
	eps = NULL;
	neps = 0;
}

/*
 * Messages nobody received, in w's unexpected queue: what a collective
 * that failed left behind (its peers' blocks, a mismatch notice).
 * Destroying the worker warned once for each ("UCX WARN unexpected
 * tag-receive descriptor ... was not matched") after an error the caller
 * had already been given.  Each is taken in, truncated into a few bytes,
 * and dropped; a receive that has not ended after limit seconds in all
 * (a rendezvous whose sender is gone) is cancelled, and the rest left to
 * the warnings.
 */
static void drop_unexpected(ucp_worker_h w, double limit)
{
	/* Not on the stack: a cancelled receive is only released with the
	 * worker, after this returns. */
	static char sink[64];
	double deadline = hvd_now() + limit;
	ucp_tag_recv_info_t info;
	ucp_tag_message_h m;
	int n = 0;

	while ((m = ucp_tag_probe_nb(w, 0, 0, 1, &info)) != NULL) {
		ucp_request_param_t prm;
		struct tp_req *r;

		ucx_bytes_recv_params(&prm);
		r = ucp_tag_msg_recv_nbx(w, sink, sizeof(sink), m, &prm);
		if (UCS_PTR_IS_ERR(r) || !r)
			continue;
		while (!atomic_load(&r->done) && hvd_now() < deadline)
			ucp_worker_progress(w);
		if (!atomic_load(&r->done)) {
			ucp_request_cancel(w, r);
			ucp_worker_progress(w);
		}
		ucp_request_free(r);
		n++;
		if (hvd_now() >= deadline)
			break;
	}
	if (n)
		hvd_log(HVD_LOG_DEBUG, "dropped %d message%s nobody received",
			n, n == 1 ? "" : "s");
}

/* Phase one of a fenced finalize: until every rank has reached
 * hvd_finalize(), this rank may still be needed, to answer another's
 * refused call (net/refusal.h) that this rank made and completed; its
 * endpoints stay open, and waiting() answers.  The fence goes through
 * PMIx and a refusal's words through UCX: a rank that sent words joins
 * the fence only once waiting() says every rank has them.  0 when some
 * rank did not come within limit seconds. */
static int all_arrived(int (*waiting)(void), double limit)
{
	volatile int fenced = 1;
	double deadline = hvd_now() + limit;

	while (waiting && !waiting() && hvd_now() < deadline) {
		ucp_worker_progress(ucx_worker);
		if (yield_always)
			sched_yield();
	}
	if (bootstrap_fence_nb(&fenced) != HVD_OK)
		return 1; /* said why; the second fence will not wait either */
	while (!__atomic_load_n(&fenced, __ATOMIC_ACQUIRE) &&
	       hvd_now() < deadline) {
		ucp_worker_progress(ucx_worker);
		if (waiting)
			waiting();
		if (yield_always)
			sched_yield();
	}
	return __atomic_load_n(&fenced, __ATOMIC_ACQUIRE);
}

void ucx_finalize(int fence, int (*waiting)(void))
{
	void **reqs;
	int nreq, late = 0;
	volatile int fenced = 1;
	double deadline;

	if (!ucx_worker)
		return;
	if (fence && !all_arrived(waiting, 30.0)) {
		late = 1;
		fence = 0;
	}
	nreq = close_eps(0, &reqs);
	/* Keep progressing until every rank has closed: a rank that
	 * stopped progressing could leave its peers' flushes hanging.
	 * After a failure, 1 s: the endpoints of failed ranks are closed
	 * by force, and what a flush still waits for then is a rank cut off
	 * without being named (a cut node's other ranks), whose flush
	 * never ends, or data of the collective that failed, which nobody
	 * will take.  With 5 s there, every rank of a 2 x 2 job whose nodes
	 * were cut apart exited 5 s after its error. */
	if (fence && bootstrap_fence_nb(&fenced) != HVD_OK)
		fenced = 1;
	if (fence)
		deadline = hvd_now() + 30.0;
	else if (late || transport_any_failed() >= 0)
		deadline = hvd_now() + 1.0;
	else
		deadline = hvd_now() + 5.0;
	for (;;) {
		int left = reap_closes(reqs, nreq);

		if ((!left && __atomic_load_n(&fenced, __ATOMIC_ACQUIRE)) ||
		    hvd_now() > deadline)
			break;
		if (yield_always)
			sched_yield();
	}
	if (late || !__atomic_load_n(&fenced, __ATOMIC_ACQUIRE))
		hvd_log(HVD_LOG_WARNING,
			"finalize: not every rank reached hvd_finalize() "
			"within 30 s");
	end_closes(reqs, nreq);
	drop_unexpected(ucx_worker, 1.0);
	ucp_worker_release_address(ucx_worker, my_addr);
	ucp_worker_destroy(ucx_worker);
	ucx_worker_discard();
	ucp_cleanup(context);
	efd = -1;
	ucx_worker = NULL;
	context = NULL;
}

/* ------------------------------------------------- elastic re-forming */

/*
 * A new world (net/membership.c) gets a new worker on the same context.
 * The next worker is made while the current one still carries the
 * agreement (its address travels in the agreement), and the switch
 * abandons the current one: every endpoint force-closed, the worker
 * destroyed with whatever it still held (messages of collectives that a
 * failure cut short, in its unexpected queue).  So no message of the old
 * world can ever match a receive of the new one, whatever the context ids
 * and sequence numbers: the new world's tags start afresh.
 */
static ucp_worker_h next_worker;
static ucp_address_t *next_addr;
static size_t next_addr_len;
/* A context of its own for the next worker, when the current context's
 * devices are no longer all there (see ucx_worker_prepare). */
static ucp_context_h next_context;
static int next_wakeup;

/*
 * A context lists the devices there were at ucp_init, and every worker
 * opens an interface on each: once one of them is gone, no worker can be
 * made on it again (UCS_ERR_NO_DEVICE, for good).  Seen when a network
 * interface present at hvd_init was removed (the mini-cluster's --netns
 * bridge and veths, another test's, going at its stop): the survivors
 * of a failure could not make the next world's worker and re-formed
 * again and again until killed.  Then the next world gets a fresh
 * context on the devices there are now, and the current one goes at the
 * switch with its worker.  The current context gets one try: the fresh
 * one's are what covers a failure that passes (worker_open), and
 * waiting out all of them on a context that cannot succeed held every
 * re-forming after such a removal 2 s.
 */
hvd_status_t ucx_worker_prepare(void **addr, size_t *addr_len)
{
	hvd_status_t st;

	if (!next_worker) {
		st = worker_open(context, &next_worker, &next_addr,
				 &next_addr_len, 0);
		if (st != HVD_OK) {
			hvd_log(HVD_LOG_WARNING,
				"elastic: %s: making the next world's worker "
				"on a new UCX context (a device UCX found at "
				"hvd_init may be gone)",
				hvd_last_error());
			next_worker = NULL;
			HVD_CHECK(context_open(&next_context, &next_wakeup));
			st = worker_open(next_context, &next_worker, &next_addr,
					 &next_addr_len, WORKER_RETRIES);
			if (st != HVD_OK) {
				next_worker = NULL;
				ucp_cleanup(next_context);
				next_context = NULL;
				return st;
			}
		}
	}
	*addr = next_addr;
	*addr_len = next_addr_len;
	return HVD_OK;
}

void ucx_worker_discard(void)
{
	if (!next_worker)
		return;
	ucp_worker_release_address(next_worker, next_addr);
	ucp_worker_destroy(next_worker);
	next_worker = NULL;
	next_addr = NULL;
	next_addr_len = 0;
	if (next_context)
		ucp_cleanup(next_context);
	next_context = NULL;
}

void ucx_worker_address(void **addr, size_t *addr_len)
{
	*addr = my_addr;
	*addr_len = my_addr_len;
}

ucp_worker_h ucx_worker_next(void)
{
	return next_worker;
}

void ucx_worker_switch(void)
{
	void **reqs;
	int nreq;
	double deadline;

	if (!next_worker)
		return;
	nreq = close_eps(1, &reqs);
	/* A forced close does not wait for the peer; a second is plenty. */
	deadline = hvd_now() + 1.0;
	while (nreq && reap_closes(reqs, nreq) && hvd_now() < deadline)
		;
	end_closes(reqs, nreq);
	/* the new world waits: a tenth of a second at most */
	drop_unexpected(ucx_worker, 0.1);
	ucp_worker_release_address(ucx_worker, my_addr);
	ucp_worker_destroy(ucx_worker);
	if (next_context) {
		ucp_cleanup(context);
		context = next_context;
		wakeup = next_wakeup;
		next_context = NULL;
	}
	ucx_worker = next_worker;
	worker_efd();
	my_addr = next_addr;
	my_addr_len = next_addr_len;
	next_worker = NULL;
	next_addr = NULL;
	next_addr_len = 0;
}

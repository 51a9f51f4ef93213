/*
 * nccl_comm.c - NCCL communicators of the GPU path and the wait that never
 * hangs.
 *
 * A struct cuda_comm is one group of ranks on one device: an NCCL
 * communicator per stream (HOROVOD_NUM_NCCL_STREAMS; stream 0's comes from
 * a unique id that rank 0 makes and the bootstrap broadcasts, the others
 * are ncclCommSplit children of it), an event per stream, scratch device
 * buffers (the fusion buffer and a staging one), and, on first use by the
 * hierarchical allreduce, node-local and cross-node communicators split
 * from it.
 *
 * Every NCCL communicator is nonblocking (ncclConfig_t.blocking = 0), so
 * that no NCCL call can block forever: a call that returns ncclInProgress
 * is waited for by polling ncclCommGetAsyncError, and an operation's end
 * is waited for by polling its CUDA event together with the async error of
 * each communicator it used, and past its spinning every 50 ms the rest of
 * the job (watch_job: a failed rank, another rank's refusal).  An NCCL
 * error, a CUDA error, such a finding or a wait longer than
 * HOROVOD_PEER_TIMEOUT aborts all of the cuda_comm's communicators
 * (ncclCommAbort) and marks it failed: the failing call returns the error,
 * and so does every later call, naming the first failure.
 *
 * Streams are created blocking (not cudaStreamNonBlocking) on purpose: the
 * API is blocking and takes no stream, so work the caller queued on the
 * legacy default stream must be complete before NCCL reads the buffers.
 */
#include "config.h"

#include "cuda/cuda.h"
#include "cuda/cuda_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STREAMS 16

struct cuda_comm {
	int rank, size, device;
	int nstreams;
	unsigned long seq;
	ncclComm_t nccl[MAX_STREAMS];
	cudaStream_t stream[MAX_STREAMS];
	cudaEvent_t done[MAX_STREAMS];
	int *node_of; /* [size] */
	int failed;
	char failure[512];
	void *scratch[2];
	size_t scratch_bytes[2];
	int hier; /* 0 not tried, 1 local/cross ready, -1 not possible */
	struct cuda_comm *local, *cross;
};

int cuda_comm_rank(const struct cuda_comm *cc) { return cc->rank; }

int cuda_comm_size(const struct cuda_comm *cc) { return cc->size; }

int cuda_comm_device(const struct cuda_comm *cc) { return cc->device; }

ncclComm_t cuda_comm_nccl(const struct cuda_comm *cc) { return cc->nccl[0]; }

/* Polls a wait spins before it yields (pause_briefly) and before it
 * looks at the rest of the job (watch_job). */
#define WAIT_SPINS 200

static void pause_briefly(unsigned long spins)
{
	struct timespec ts = {0, 50000};

	/* Spin first (small ops finish in microseconds), then yield, then
	 * sleep so that a long wait does not eat a core. */
	if (spins < WAIT_SPINS)
		return;
	if (spins < 2000) {
		sched_yield();
		return;
	}
	nanosleep(&ts, NULL);
}

/* How often a long wait looks at the rest of the job: as often as the
 * shared-memory waits (net/watch.h). */
#define WATCH_EVERY 0.05

static cuda_watch_fn watch;

void cuda_set_watch(cuda_watch_fn fn)
{
	watch = fn;
}

/* A wait past its spinning, every WATCH_EVERY: what the collectives'
 * check finds (a rank that failed anywhere in the job, another rank's
 * refusal of this call) ends it now, where NCCL would wait for the
 * missing rank until HOROVOD_PEER_TIMEOUT. */
static hvd_status_t watch_job(const char *what, unsigned long spins,
			      double *next)
{
	char why[480];
	hvd_status_t st;
	double now;

	if (!watch || spins < WAIT_SPINS || (now = hvd_now()) < *next)
		return HVD_OK;
	*next = now + WATCH_EVERY;
	st = watch(why, sizeof(why));
	if (st != HVD_OK)
		return hvd_error(st, "%s: %s", what, why);
	return HVD_OK;
}

/* Wait until a nonblocking communicator has no call in progress. */
static hvd_status_t nccl_wait_ready(ncclComm_t comm, double timeout,
				    const char *what)
{
	double deadline = hvd_now() + timeout, next = 0;
	unsigned long spins = 0;
	hvd_status_t st;
	ncclResult_t r;

	for (;;) {
		ncclResult_t q = ncclCommGetAsyncError(comm, &r);

		if (q != ncclSuccess)
			return nccl_error_at(q, "ncclCommGetAsyncError",
					     __FILE__, __LINE__);
		if (r == ncclSuccess)
			return HVD_OK;
		if (r != ncclInProgress)
			return hvd_error(HVD_ERR_NCCL,
					 "%s: %s (NCCL %d); NCCL: %s", what,
					 ncclGetErrorString(r), (int)r,
					 ncclGetLastError(comm));
		if (hvd_now() > deadline)
			return hvd_error(HVD_ERR_TIMEOUT,
					 "%s: not finished after %g s "
					 "(HOROVOD_PEER_TIMEOUT): a peer is "
					 "missing, dead or stuck",
					 what, timeout);
		if ((st = watch_job(what, spins, &next)) != HVD_OK)
			return st;
		pause_briefly(spins++);
	}
}

hvd_status_t cuda_nccl_ready(struct cuda_comm *cc, ncclComm_t comm,
			     const char *what)
{
	hvd_status_t st = nccl_wait_ready(comm, cuda_settings()->timeout, what);

	if (st != HVD_OK)
		cuda_comm_abort(cc, hvd_last_error());
	return st;
}

static void abort_nccl(struct cuda_comm *cc)
{
	for (int i = 0; i < MAX_STREAMS; i++)
		if (cc->nccl[i]) {
			(void)ncclCommAbort(cc->nccl[i]);
			cc->nccl[i] = NULL;
		}
}

void cuda_comm_abort(struct cuda_comm *cc, const char *why)
{
	if (!cc)
		return;
	if (!cc->failed) {
		cc->failed = 1;
		snprintf(cc->failure, sizeof(cc->failure), "%s",
			 why && *why ? why : "aborted");
		hvd_log(HVD_LOG_ERROR,
			"GPU path: aborting NCCL communicator (rank %d of %d): "
			"%s",
			cc->rank, cc->size, cc->failure);
	}
	abort_nccl(cc);
	if (cc->local)
		cuda_comm_abort(cc->local, why);
	if (cc->cross)
		cuda_comm_abort(cc->cross, why);
}

static ncclConfig_t nonblocking_config(void)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

	cfg.blocking = 0;
	return cfg;
}

static hvd_status_t comm_alloc(int rank, int size, const int *node_of,
			       int nstreams, struct cuda_comm **out)
{
	struct cuda_comm *cc = calloc(1, sizeof(*cc));
	hvd_status_t st = HVD_OK;

	if (!cc)
		return hvd_error(HVD_ERR_NO_MEMORY, "GPU communicator");
	cc->rank = rank;
	cc->size = size;
	cc->nstreams = nstreams;
	cc->node_of = calloc((size_t)size, sizeof(int));
	if (!cc->node_of) {
		free(cc);
		return hvd_error(HVD_ERR_NO_MEMORY, "GPU communicator");
	}
	if (node_of)
		memcpy(cc->node_of, node_of, (size_t)size * sizeof(int));
	CUDACHECK(cudaGetDevice(&cc->device), st, err);
	for (int i = 0; i < cc->nstreams; i++) {
		CUDACHECK(cudaStreamCreate(&cc->stream[i]), st, err);
		CUDACHECK(cudaEventCreateWithFlags(&cc->done[i],
						   cudaEventDisableTiming),
			  st, err);
	}
	*out = cc;
	return HVD_OK;
err:
	cuda_comm_destroy(cc);
	return st;
}

/* Streams 1.. get children of stream 0's communicator (collective). */
static hvd_status_t split_streams(struct cuda_comm *cc)
{
	ncclConfig_t cfg = nonblocking_config();
	hvd_status_t st = HVD_OK;

	for (int i = 1; i < cc->nstreams; i++) {
		NCCLCHECK(
		    ncclCommSplit(cc->nccl[0], 0, cc->rank, &cc->nccl[i], &cfg),
		    st, err);
		st = cuda_nccl_ready(cc, cc->nccl[0], "ncclCommSplit (stream)");
		if (st == HVD_OK && cc->nccl[i])
			st = cuda_nccl_ready(cc, cc->nccl[i],
					     "ncclCommSplit (stream)");
		if (st != HVD_OK)
			return st;
	}
	return HVD_OK;
err:
	cuda_comm_abort(cc, hvd_last_error());
	return st;
}

hvd_status_t cuda_comm_create(const struct cuda_boot *boot,
			      struct cuda_comm **out)
{
	struct {
		int ok;
		char why[200];
		ncclUniqueId id;
	} msg;
	ncclConfig_t cfg = nonblocking_config();
	struct cuda_comm *cc = NULL;
	const char *why;
	hvd_status_t st;
	ncclResult_t r;

	*out = NULL;
	if (!boot || boot->size < 1 || boot->rank < 0 ||
	    boot->rank >= boot->size || !boot->bcast)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "GPU communicator: bad bootstrap");
	/* Rank 0 always broadcasts, even after a failure of its own, so
	 * that nobody waits for an id that never comes. */
	memset(&msg, 0, sizeof(msg));
	if (boot->rank == 0) {
		if (cuda_device_count(&why) == 0) {
			snprintf(msg.why, sizeof(msg.why), "%s", why);
		} else if ((r = ncclGetUniqueId(&msg.id)) != ncclSuccess) {
			snprintf(msg.why, sizeof(msg.why),
				 "ncclGetUniqueId: %s; NCCL: %s",
				 ncclGetErrorString(r), ncclGetLastError(NULL));
		} else {
			msg.ok = 1;
		}
	}
	st = boot->bcast(boot->ctx, &msg, sizeof(msg), 0);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "sharing the NCCL unique id");
	if (!msg.ok)
		return hvd_error(HVD_ERR_NCCL,
				 "rank 0 could not make an NCCL unique id: %s",
				 msg.why);
	if (cuda_device_count(&why) == 0)
		return hvd_error(HVD_ERR_CUDA, "no usable CUDA device: %s",
				 why);
	st = comm_alloc(boot->rank, boot->size, boot->node_of,
			cuda_settings()->num_streams, &cc);
	if (st != HVD_OK)
		return st;
	NCCLCHECK(ncclCommInitRankConfig(&cc->nccl[0], boot->size, msg.id,
					 boot->rank, &cfg),
		  st, err);
	st = cuda_nccl_ready(cc, cc->nccl[0], "ncclCommInitRankConfig");
	if (st != HVD_OK)
		goto err;
	st = split_streams(cc);
	if (st != HVD_OK)
		goto err;
	hvd_log(HVD_LOG_DEBUG,
		"GPU path: NCCL communicator rank %d of %d on device %d, "
		"%d stream(s)",
		cc->rank, cc->size, cc->device, cc->nstreams);
	*out = cc;
	return HVD_OK;
err:
	cuda_comm_abort(cc, hvd_last_error());
	cuda_comm_destroy(cc);
	return st;
}

/* nstreams: the local/cross communicators of the hierarchical allreduce
 * need one (they run on the parent's streams). */
static hvd_status_t split(struct cuda_comm *parent, int color, int key,
			  const int *node_of, int nstreams,
			  struct cuda_comm **out)
{
	ncclConfig_t cfg = nonblocking_config();
	struct cuda_comm *cc = NULL;
	ncclComm_t child = NULL;
	hvd_status_t st = HVD_OK;
	int rank, size;

	*out = NULL;
	if (parent->failed)
		return hvd_error(HVD_ERR_NCCL,
				 "GPU communicator failed earlier: %s",
				 parent->failure);
	CUDACHECK_RET(cudaSetDevice(parent->device));
	NCCLCHECK(ncclCommSplit(parent->nccl[0],
				color < 0 ? NCCL_SPLIT_NOCOLOR : color, key,
				&child, &cfg),
		  st, err_parent);
	st = cuda_nccl_ready(parent, parent->nccl[0], "ncclCommSplit");
	if (st != HVD_OK)
		goto err_child;
	if (color < 0)
		return HVD_OK;
	st = nccl_wait_ready(child, cuda_settings()->timeout, "ncclCommSplit");
	if (st != HVD_OK)
		goto err_child;
	NCCLCHECK(ncclCommUserRank(child, &rank), st, err_child);
	NCCLCHECK(ncclCommCount(child, &size), st, err_child);
	st = comm_alloc(rank, size, node_of, nstreams, &cc);
	if (st != HVD_OK)
		goto err_child;
	cc->nccl[0] = child;
	st = split_streams(cc);
	if (st != HVD_OK) {
		cuda_comm_destroy(cc);
		return st;
	}
	*out = cc;
	return HVD_OK;
err_parent:
	cuda_comm_abort(parent, hvd_last_error());
err_child:
	if (child)
		(void)ncclCommAbort(child);
	return st;
}

hvd_status_t cuda_comm_split_nccl(struct cuda_comm *parent, int color, int key,
				  const int *node_of, struct cuda_comm **out)
{
	return split(parent, color, key, node_of, cuda_settings()->num_streams,
		     out);
}

void cuda_comm_destroy(struct cuda_comm *cc)
{
	double timeout;

	if (!cc)
		return;
	timeout = cuda_settings()->timeout;
	(void)cudaSetDevice(cc->device);
	if (cc->local)
		cuda_comm_destroy(cc->local);
	if (cc->cross)
		cuda_comm_destroy(cc->cross);
	/* Finalize flushes outstanding work; if it fails or takes too long
	 * the communicator is aborted instead of waited for. */
	for (int i = 0; i < MAX_STREAMS && !cc->failed; i++) {
		ncclResult_t r;

		if (!cc->nccl[i])
			continue;
		r = ncclCommFinalize(cc->nccl[i]);
		if ((r != ncclSuccess && r != ncclInProgress) ||
		    nccl_wait_ready(cc->nccl[i], timeout, "ncclCommFinalize") !=
			HVD_OK) {
			cc->failed = 1;
			break;
		}
		(void)ncclCommDestroy(cc->nccl[i]);
		cc->nccl[i] = NULL;
	}
	abort_nccl(cc);
	for (int i = 0; i < MAX_STREAMS; i++) {
		if (cc->done[i])
			(void)cudaEventDestroy(cc->done[i]);
		if (cc->stream[i])
			(void)cudaStreamDestroy(cc->stream[i]);
	}
	for (int i = 0; i < 2; i++)
		if (cc->scratch[i])
			(void)cudaFree(cc->scratch[i]);
	(void)cudaGetLastError();
	free(cc->node_of);
	free(cc);
}

hvd_status_t cuda_comm_scratch(struct cuda_comm *cc, int slot, size_t bytes,
			       void **p)
{
	if (bytes == 0)
		bytes = 1;
	if (cc->scratch_bytes[slot] < bytes) {
		/* Round up so that slowly growing requests do not
		 * reallocate every time. */
		size_t want = bytes + bytes / 4 + 4096;

		if (cc->scratch[slot]) {
			/* Blocking ops finished: nothing still uses it. */
			(void)cudaFree(cc->scratch[slot]);
			cc->scratch[slot] = NULL;
			cc->scratch_bytes[slot] = 0;
		}
		CUDACHECK_RET(cudaSetDevice(cc->device));
		CUDACHECK_RET(cudaMalloc(&cc->scratch[slot], want));
		cc->scratch_bytes[slot] = want;
	}
	*p = cc->scratch[slot];
	return HVD_OK;
}

int cuda_hier_layout(const int *node_of, int size, int rank, int *node,
		     int *local_rank, int *nodes, int *local_size)
{
	int *count = calloc((size_t)size, sizeof(int));
	int *index = malloc((size_t)size * sizeof(int));
	int n_nodes = 0, ls = -1;

	if (!count || !index) {
		free(count);
		free(index);
		return -1;
	}
	*node = -1;
	*local_rank = 0;
	for (int r = 0; r < size; r++) {
		int n = -1;

		for (int q = 0; q < r && n < 0; q++)
			if (node_of[q] == node_of[r])
				n = index[q];
		if (n < 0)
			n = n_nodes++;
		index[r] = n;
		if (r == rank) {
			*node = n;
			*local_rank = count[n];
		}
		count[n]++;
	}
	for (int n = 0; n < n_nodes; n++) {
		if (ls < 0)
			ls = count[n];
		if (count[n] != ls)
			ls = 0;
	}
	free(count);
	free(index);
	*nodes = n_nodes;
	*local_size = ls;
	return n_nodes >= 2 && ls >= 2;
}

hvd_status_t cuda_comm_hier(struct cuda_comm *cc, struct cuda_comm **local,
			    struct cuda_comm **cross)
{
	int my_node, my_local, nodes, local_size, ok;
	hvd_status_t st;

	*local = *cross = NULL;
	if (cc->hier < 0)
		return HVD_OK;
	if (cc->hier > 0) {
		*local = cc->local;
		*cross = cc->cross;
		return HVD_OK;
	}
	/* Every rank computes the same answer from the same node_of, so all
	 * take the same branch (the splits are collective). */
	ok = cuda_hier_layout(cc->node_of, cc->size, cc->rank, &my_node,
			      &my_local, &nodes, &local_size);
	if (ok < 0)
		return hvd_error(HVD_ERR_NO_MEMORY, "hierarchical allreduce");
	if (!ok) {
		/* One node, one rank per node, or uneven nodes: the flat
		 * allreduce is what NCCL would do anyway. */
		hvd_log(HVD_LOG_INFO,
			"HOROVOD_HIERARCHICAL_ALLREDUCE: %d node(s), %s ranks "
			"per node: using the flat allreduce",
			nodes, local_size > 0 ? "even" : "uneven");
		cc->hier = -1;
		return HVD_OK;
	}
	st = split(cc, my_node, cc->rank, NULL, 1, &cc->local);
	if (st == HVD_OK)
		st = split(cc, my_local, cc->rank, NULL, 1, &cc->cross);
	if (st != HVD_OK)
		return st;
	cc->hier = 1;
	*local = cc->local;
	*cross = cc->cross;
	return HVD_OK;
}

/* ---------------------------------------------------------- operations */

hvd_status_t cuda_op_begin(struct cuda_comm *cc, const char *name,
			   struct cuda_op *op)
{
	memset(op, 0, sizeof(*op));
	op->prev_device = -1;
	if (cc->failed)
		return hvd_error(HVD_ERR_NCCL,
				 "%s: the GPU communicator was aborted after "
				 "an earlier failure: %s",
				 name, cc->failure);
	/* The caller's current device is restored at the end (when that
	 * creates no context there). */
	if (cudaGetDevice(&op->prev_device) != cudaSuccess)
		op->prev_device = -1;
	if (op->prev_device != cc->device)
		CUDACHECK_RET(cudaSetDevice(cc->device));
	op->cc = cc;
	op->idx = (int)(cc->seq++ % (unsigned long)cc->nstreams);
	op->stream = cc->stream[op->idx];
	op->nccl = cc->nccl[op->idx];
	op->name = name;
	cuda_range_push(name);
	/* after the work of the streams the submitters handed over */
	return cuda_stream_before(op->stream);
}

static hvd_status_t poll_async(struct cuda_op *op)
{
	ncclComm_t comms[3] = {op->nccl, op->extra[0], op->extra[1]};

	for (int i = 0; i < 3; i++) {
		ncclResult_t r = ncclSuccess;

		if (!comms[i])
			continue;
		if (ncclCommGetAsyncError(comms[i], &r) != ncclSuccess)
			r = ncclInternalError;
		if (r != ncclSuccess && r != ncclInProgress)
			return hvd_error(HVD_ERR_NCCL,
					 "%s: NCCL failed while running: %s "
					 "(NCCL %d); NCCL: %s",
					 op->name, ncclGetErrorString(r),
					 (int)r, ncclGetLastError(comms[i]));
	}
	return HVD_OK;
}

static hvd_status_t wait_event(struct cuda_op *op)
{
	double deadline = hvd_now() + cuda_settings()->timeout, next = 0;
	cudaEvent_t ev = op->cc->done[op->idx];
	unsigned long spins = 0;
	hvd_status_t st;

	CUDACHECK_RET(cudaEventRecord(ev, op->stream));
	for (;;) {
		cudaError_t err = cudaEventQuery(ev);

		if (err == cudaSuccess)
			return HVD_OK;
		if (err != cudaErrorNotReady)
			return cuda_error_at(err, "cudaEventQuery", __FILE__,
					     __LINE__);
		st = poll_async(op);
		if (st != HVD_OK)
			return st;
		if (hvd_now() > deadline)
			return hvd_error(HVD_ERR_TIMEOUT,
					 "%s: not finished after %g s "
					 "(HOROVOD_PEER_TIMEOUT): a peer is "
					 "missing, dead or stuck",
					 op->name, cuda_settings()->timeout);
		if ((st = watch_job(op->name, spins, &next)) != HVD_OK)
			return st;
		pause_briefly(spins++);
	}
}

hvd_status_t cuda_op_end(struct cuda_op *op, hvd_status_t st)
{
	struct cuda_comm *cc = op->cc;
	ncclComm_t comms[3] = {op->nccl, op->extra[0], op->extra[1]};

	if (!cc)
		return st;
	/* Nonblocking communicators may still be enqueueing the last call:
	 * the event must go in after it. */
	for (int i = 0; i < 3 && st == HVD_OK; i++)
		if (comms[i])
			st = nccl_wait_ready(comms[i], cuda_settings()->timeout,
					     op->name);
	if (st == HVD_OK)
		st = wait_event(op);
	cuda_stream_after(op->stream, cc->done[op->idx], st == HVD_OK);
	cuda_range_pop();
	if (st != HVD_OK)
		cuda_comm_abort(cc, hvd_last_error());
	if (op->prev_device >= 0 && op->prev_device != cc->device &&
	    cuda_context_active(op->prev_device))
		(void)cudaSetDevice(op->prev_device);
	return st;
}

/*
 * transport_fail.c - the transport's failure detector: the failed set,
 * liveness checks of the pids of peers on this node, the UCX endpoint
 * error callback, and failure notices exchanged between ranks.
 *
 * In-band failure notices: every rank keeps one receive posted on a
 * context id no communicator gets; a rank that sees a peer die tells all
 * the others, because PMIx servers (Slurm's among them) do not always
 * deliver process-termination events to clients, and a survivor that
 * only waits on a live peer stuck behind the dead one would otherwise
 * wait for the timeout, or blame the wrong rank.
 */
#include "config.h"

#include "comm/comm_impl.h"
#include "net/transport.h"
#include "net/transport_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define ABORT_CTX 0xffffu
static int32_t abort_in[2];
static struct tp_req *abort_req;
static pthread_mutex_t abort_lock = PTHREAD_MUTEX_INITIALIZER;

void tp_mark_failed(int rank, const char *why, int announce)
{
	if (rank < 0) {
		atomic_store(&launcher_failed, 1);
		return;
	}
	if (!peers || rank >= npeers || rank == my_rank)
		return;
	if (atomic_load(&peers[rank].failed))
		return;
	snprintf(peers[rank].why, sizeof(peers[rank].why), "%s", why);
	atomic_store(&peers[rank].failed, 1);
	if (announce)
		atomic_store(&peers[rank].announce, 1);
	hvd_log(HVD_LOG_DEBUG, "rank %d failed: %s", rank, why);
}

void transport_mark_failed(int rank, const char *why)
{
	tp_mark_failed(rank, why, 1);
}

const char *transport_fail_reason(int rank)
{
	if (!peers || rank < 0 || rank >= npeers)
		return "unknown";
	return peers[rank].why;
}

int transport_comm_failed(const hvd_comm_t *comm)
{
	for (int i = 0; i < comm->size; i++) {
		int w = comm->world_ranks[i];

		if (atomic_load_explicit(&peers[w].failed,
					 memory_order_relaxed))
			return w;
	}
	return -1;
}

int tp_any_failed(void)
{
	for (int w = 0; peers && w < npeers; w++)
		if (atomic_load_explicit(&peers[w].failed,
					 memory_order_relaxed))
			return w;
	return -1;
}

void tp_check_local_pids(const hvd_comm_t *comm)
{
	for (int i = 0; i < comm->size; i++) {
		int w = comm->world_ranks[i];

		if (w == my_rank || !peers[w].local ||
		    atomic_load(&peers[w].failed))
			continue;
		if (hvd_pid_dead(peers[w].pid)) {
			char why[96];

			snprintf(why, sizeof(why),
				 "its process (pid %d on this node) is gone",
				 (int)peers[w].pid);
			transport_mark_failed(w, why);
		}
	}
}

int transport_check_failed(const hvd_comm_t *comm)
{
	tp_check_local_pids(comm);
	return transport_comm_failed(comm);
}

void tp_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	char why[128];

	(void)ep;
	snprintf(why, sizeof(why), "UCX reported its connection failed (%s)",
		 UCS_MSG(status));
	transport_mark_failed((int)(intptr_t)arg, why);
}

void tp_post_abort_recv(void)
{
	ucp_request_param_t prm;
	void *r;

	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			   UCP_OP_ATTR_FIELD_DATATYPE |
			   UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	prm.cb.recv = tp_recv_cb;
	prm.datatype = ucp_dt_make_contig(1);
	r = ucp_tag_recv_nbx(worker, abort_in, sizeof(abort_in),
			     (uint64_t)ABORT_CTX << 48, (uint64_t)0xffff << 48,
			     &prm);
	abort_req = UCS_PTR_IS_ERR(r) ? NULL : r;
}

/* Take in notices from other ranks, send ours. */
void tp_poll_abort(void)
{
	if (pthread_mutex_trylock(&abort_lock))
		return;
	while (abort_req && atomic_load(&abort_req->done)) {
		int ok = abort_req->status == UCS_OK &&
			 abort_req->length == sizeof(abort_in);
		char why[200];

		atomic_store(&abort_req->done, 0);
		ucp_request_free(abort_req);
		abort_req = NULL;
		if (ok && abort_in[0] >= 0 && abort_in[0] < npeers &&
		    abort_in[1] >= 0 && abort_in[1] < npeers) {
			snprintf(why, sizeof(why), "rank %d reports it gone",
				 (int)abort_in[1]);
			tp_mark_failed(abort_in[0], why, 0);
		}
		tp_post_abort_recv();
	}
	for (int f = 0; f < npeers; f++) {
		if (!atomic_load(&peers[f].announce))
			continue;
		atomic_store(&peers[f].announce, 0);
		peers[f].msg[0] = f;
		peers[f].msg[1] = my_rank;
		for (int w = 0; w < npeers; w++) {
			hvd_status_t st = HVD_OK;
			ucp_request_param_t prm;
			ucp_ep_h ep;
			void *r;

			if (w == my_rank || atomic_load(&peers[w].failed))
				continue;
			ep = tp_get_ep(w, &st);
			if (!ep)
				continue;
			memset(&prm, 0, sizeof(prm));
			r = ucp_tag_send_nbx(ep, peers[f].msg,
					     sizeof(peers[f].msg),
					     (uint64_t)ABORT_CTX << 48 |
						     (uint64_t)my_rank,
					     &prm);
			/* Fire and forget: msg stays valid until the end. */
			if (r && !UCS_PTR_IS_ERR(r))
				ucp_request_free(r);
		}
	}
	pthread_mutex_unlock(&abort_lock);
}

void tp_abort_cancel(void)
{
	pthread_mutex_lock(&abort_lock);
	if (abort_req) {
		ucp_request_cancel(worker, abort_req);
		atomic_store(&abort_req->done, 0);
		ucp_request_free(abort_req);
		abort_req = NULL;
	}
	pthread_mutex_unlock(&abort_lock);
}

/*
 * notice.c - failure notices: {failed rank, reporter} pairs sent to every
 * live rank, fire and forget, and taken in by the one receive every rank
 * keeps posted (net/notice.h says why they exist).
 */
#include "config.h"

#include "net/notice.h"
#include "net/peers.h"
#include "net/ucx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t notice_in[2];
static struct tp_req *notice_req;
/* Send buffers, one per failed rank: a send's buffer must stay valid
 * until it completes, and fire-and-forget sends are never waited for,
 * so these live until the worker is gone. */
static int32_t (*notice_out)[2];
static pthread_mutex_t notice_lock = PTHREAD_MUTEX_INITIALIZER;

static void post_recv(void)
{
	ucp_request_param_t prm;
	void *r;

	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
			   UCP_OP_ATTR_FIELD_DATATYPE |
			   UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
	prm.cb.recv = ucx_recv_cb;
	prm.datatype = ucp_dt_make_contig(1);
	r = ucp_tag_recv_nbx(ucx_worker, notice_in, sizeof(notice_in),
			     (uint64_t)NOTICE_CTX << 48,
			     (uint64_t)0xffff << 48, &prm);
	notice_req = UCS_PTR_IS_ERR(r) ? NULL : r;
}

hvd_status_t notice_start(void)
{
	int n = peers_count();

	notice_out = calloc((size_t)(n > 0 ? n : 1), sizeof(*notice_out));
	if (!notice_out)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: out of memory for failure notices");
	post_recv();
	return HVD_OK;
}

static void take_in(void)
{
	int n = peers_count();

	while (notice_req && atomic_load(&notice_req->done)) {
		int ok = notice_req->status == UCS_OK &&
			 notice_req->length == sizeof(notice_in);
		char why[200];

		atomic_store(&notice_req->done, 0);
		ucp_request_free(notice_req);
		notice_req = NULL;
		if (ok && notice_in[0] >= 0 && notice_in[0] < n &&
		    notice_in[1] >= 0 && notice_in[1] < n) {
			snprintf(why, sizeof(why), "rank %d reports it gone",
				 (int)notice_in[1]);
			peers_mark_failed(notice_in[0], why, 0);
		}
		post_recv();
	}
}

static void send_out(int f)
{
	int n = peers_count(), me = peers_self();

	notice_out[f][0] = f;
	notice_out[f][1] = me;
	for (int w = 0; w < n; w++) {
		hvd_status_t st = HVD_OK;
		ucp_request_param_t prm;
		ucp_ep_h ep;
		void *r;

		if (w == me || peers_failed(w))
			continue;
		ep = ucx_ep(w, &st);
		if (!ep)
			continue;
		memset(&prm, 0, sizeof(prm));
		r = ucp_tag_send_nbx(ep, notice_out[f], sizeof(notice_out[f]),
				     (uint64_t)NOTICE_CTX << 48 |
					     (uint64_t)me,
				     &prm);
		if (r && !UCS_PTR_IS_ERR(r))
			ucp_request_free(r);
	}
}

void notice_poll(void)
{
	int f;

	if (pthread_mutex_trylock(&notice_lock))
		return;
	take_in();
	while (notice_out && (f = peers_take_announce()) >= 0)
		send_out(f);
	pthread_mutex_unlock(&notice_lock);
}

void notice_cancel(void)
{
	pthread_mutex_lock(&notice_lock);
	if (notice_req) {
		ucp_request_cancel(ucx_worker, notice_req);
		atomic_store(&notice_req->done, 0);
		ucp_request_free(notice_req);
		notice_req = NULL;
	}
	pthread_mutex_unlock(&notice_lock);
}

void notice_free(void)
{
	free(notice_out);
	notice_out = NULL;
}

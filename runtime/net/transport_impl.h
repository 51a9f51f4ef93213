/*
 * transport_impl.h - state shared by transport.c (operations) and
 * transport_fail.c (failure detection).  Private to those two files.
 */
#ifndef HVD_TRANSPORT_IMPL_H
#define HVD_TRANSPORT_IMPL_H

#include "net/transport.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucp/api/ucp.h>

#pragma GCC visibility push(hidden)

struct tp_req {
	atomic_int done;
	ucs_status_t status;
	size_t length;
};

struct peer {
	_Atomic(ucp_ep_h) ep;
	void *addr;
	pid_t pid;
	int local;           /* on this node: pid checks apply       */
	atomic_int failed;
	atomic_int announce; /* to tell the other ranks (watch())  */
	int32_t msg[2];      /* {failed rank, reporter}: send buffer */
	char why[200];
};

extern ucp_worker_h worker;
extern struct peer *peers;
extern int npeers, my_rank;
extern atomic_int launcher_failed;

#define UCS_MSG(s) ucs_status_string(s)

ucp_ep_h tp_get_ep(int w, hvd_status_t *st);
void tp_recv_cb(void *request, ucs_status_t status,
		const ucp_tag_recv_info_t *info, void *user_data);
/* Record a failure; announce: tell the other ranks (tp_poll_abort). */
void tp_mark_failed(int rank, const char *why, int announce);
int tp_any_failed(void);
void tp_check_local_pids(const hvd_comm_t *comm);
void tp_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status);
/* Failure notices: keep the receive posted, take in and send notices
 * (called while waiting), cancel at finalize. */
void tp_post_abort_recv(void);
void tp_poll_abort(void);
void tp_abort_cancel(void);

#pragma GCC visibility pop

#endif /* HVD_TRANSPORT_IMPL_H */

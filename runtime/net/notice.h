/*
 * net/notice.h - failure notices between ranks.  Private to net/.
 *
 * Every rank keeps one receive posted on a context id no communicator
 * gets; a rank that sees a peer die tells all the others, because PMIx
 * servers (Slurm's among them) do not always deliver process-termination
 * events to clients, and a survivor that only waits on a live peer stuck
 * behind the dead one would otherwise wait for the timeout, or blame the
 * wrong rank.
 */
#ifndef HVD_NET_NOTICE_H
#define HVD_NET_NOTICE_H

#include "base/base.h"

#pragma GCC visibility push(hidden)

/* The context id of notices: the last one (net/transport.h). */
#define NOTICE_CTX 0xffffu

/* Post the first receive (after the peer table and endpoints are up). */
hvd_status_t notice_start(void);
/* Take in notices from other ranks and send ours (called while waiting;
 * one thread at a time does the work, the others return at once). */
void notice_poll(void);
/* Cancel the posted receive (before the endpoints close). */
void notice_cancel(void);
/* Free the send buffers (after the worker is gone). */
void notice_free(void);

#pragma GCC visibility pop

#endif /* HVD_NET_NOTICE_H */

/*
 * net/memb_wire.h - the elastic agreement's messages on the wire
 * (memb_wire.c): keyed tags, sends that outlive their call, endpoints to
 * processes outside the peer table, probed receives.  Private to net/;
 * membership.c runs the agreement over it.
 */
#ifndef HVD_NET_MEMB_WIRE_H
#define HVD_NET_MEMB_WIRE_H

#include "base/base.h"
#include "net/memb_core.h"

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#pragma GCC visibility push(hidden)

/* A message's tag: context (16 bits), the epoch and type (24), the
 * source (24); keyed on the wire by memb_send and memb_take. */
uint64_t memb_tag(uint32_t ctx, uint32_t epoch, int type, int src);
/* Any source, this epoch and type. */
#define MASK_EXACT (~(uint64_t)0xffffffu)
/* Any source and epoch, this type (newcomers do not know the epoch). */
#define MASK_TYPE (((uint64_t)0xffffu << 48) | ((uint64_t)0xfu << 24))

/* 200 us asleep, between polls. */
void memb_nap(void);

/* Fire a copy of b to ep (kept until the send completes). */
void memb_send(ucp_ep_h ep, uint64_t tag, const struct memb_buf *b);
/* Free the copies whose send completed. */
void memb_reap_sends(void);
/* Free every copy: the worker they were posted on is gone. */
void memb_sends_release(void);
/* Flush eps[0..n) (NULLs skipped): wait until each flush completed, its
 * peer is known gone (gone(arg, i) nonzero, asked every 50 ms; gone may
 * be NULL) or limit seconds passed.  Returns how many were still in
 * progress, to peers not known gone, when it gave up. */
int memb_flush(ucp_ep_h *eps, int n, double limit,
	       int (*gone)(void *arg, int i), void *arg);

/* An endpoint to an address outside the peer table (a newcomer, or the
 * running world's rank 0 for a newcomer); failed becomes 1 when UCX
 * reports the connection broken or, for a peer on this node (pid > 0:
 * its pid; over shared memory, without UCX's failure handling), when
 * memb_ep_gone finds its process gone. */
struct memb_ep {
	ucp_ep_h ep;
	volatile int failed;
	int pid;
	double pid_next; /* when memb_ep_gone looks at the pid again */
};
hvd_status_t memb_ep_open(struct memb_ep *x, const void *addr, long pid);
/* memb_flush's gone for arg = an array of memb_ep: x[i].failed, after
 * x[i]'s pid is checked. */
int memb_ep_gone(void *arg, int i);
void memb_ep_close(struct memb_ep *x);

/* Take one message matching tag/mask if there is one: 1 with *buf
 * (malloc'ed), *len (the MAC taken off) and *stag; 0 when none; -1 when
 * receiving it failed or its MAC did not verify (dropped; the latter
 * logged and counted). */
int memb_take(uint64_t tag, uint64_t mask, void **buf, size_t *len,
	      uint64_t *stag);

/* Messages memb_take dropped for their MAC, since the process started. */
unsigned long memb_dropped(void);

#pragma GCC visibility pop

#endif /* HVD_NET_MEMB_WIRE_H */

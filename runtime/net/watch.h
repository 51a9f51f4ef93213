/*
 * net/watch.h - a failure anywhere in the job, for waits that are not
 * the transport's own transfers (the shared-memory collectives, through
 * shm_group_set_check).
 *
 * A rank that sleeps in a shared-memory wait progresses nothing else: if
 * the rank it waits for left the collective because a rank on another
 * node died, the news (an endpoint error, a failure notice) only arrives
 * when someone progresses the worker.  transport_watch() does one round
 * of what a waiting transfer does every 50 ms.
 */
#ifndef HVD_NET_WATCH_H
#define HVD_NET_WATCH_H

#include "base/base.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* Progress the worker once, take in failure notices (and send ours),
 * check the pids of every rank on this node; the first failed world rank
 * (why[len]: who and how), or -1.  Safe from any thread; nothing when the
 * transport is down. */
int transport_watch(char *why, size_t len);

#pragma GCC visibility pop

#endif /* HVD_NET_WATCH_H */

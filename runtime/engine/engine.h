/*
 * engine.h - the engine's own types, shared by its modules: handles, the
 * engine state, and the calls between the engine's files.  The pure parts
 * have their headers in core/ and know nothing of what is here.
 *
 *   engine.c          public async API, handles, the submission queue,
 *                     groups, join, process-set calls, timeline control
 *   engine_start.c    engine_start/engine_stop and the background thread
 *   cycle.c           one cycle: cache bit vectors, the coordinator
 *                     exchange
 *   execute.c         execution order, special responses, cache upkeep
 *   pending.c         this rank's pending ops: add, finish, fail, uncache
 *   fusion.c          execution of a fusion bucket (fused or plain)
 *   pset.c, pset.h    the process-set table and its communicators
 *   timeline.c, .h    Chrome trace writer
 *   core/             pure, no threads or communicators:
 *     request.c       request/response types, the response list
 *     wire.c          request/response encoding
 *     namemap.c       string -> pointer hash map
 *     response_cache.c  name+parameters -> cache bit, LRU
 *     negotiate.c     the coordinator's table: readiness, validation,
 *                     mismatch messages, join, groups
 *     stall.c         stall inspector report
 *     fusion_plan.c   which responses share one collective
 *     autotune.c      fusion threshold / cycle time tuner
 *     pset_spec.c     process-set spec parsing, rank-list checks
 *
 * Invariants every module relies on:
 *   - only the engine thread touches pending ops, the cache, the
 *     coordinator table, process-set communicators and the timeline;
 *     caller threads only touch the submission queue (under eng->lock)
 *     and a handle's completion fields;
 *   - every rank executes the same response list in the same order, and
 *     changes its cache in the same order, so cache bits agree everywhere.
 */
#ifndef HVD_ENGINE_H
#define HVD_ENGINE_H

#include "base/base.h"
#include "coll/coll.h"
#include "engine/core/autotune.h"
#include "engine/core/fusion_plan.h"
#include "engine/core/namemap.h"
#include "engine/core/negotiate.h"
#include "engine/core/request.h"
#include "engine/core/response_cache.h"
#include "engine/core/stall.h"
#include "engine/core/wire.h"
#include "engine/pset.h"
#include "engine/timeline.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------ handles */

enum op_state {
	OS_QUEUED = 0, /* in the submission queue */
	OS_NEW,	       /* drained, not yet classified */
	OS_HIT,	       /* cache hit: waiting for the bit on all ranks */
	OS_SEND,       /* to be sent to the coordinator this cycle */
	OS_SENT,       /* waiting for the coordinator's response */
};

struct hvd_handle {
	struct eng_params p;
	char *name;
	const void *sendbuf;
	void *recvbuf;
	hvd_callback_t cb;
	void *cb_arg;
	uint32_t group_size;
	char *group;
	int32_t *ranks; /* pset add */
	uint32_t nranks;
	int64_t *dims; /* the dimensions checked across ranks (hvd_opts_t) */
	uint32_t ndims;
	double t_enqueue;
	/* engine thread */
	int state;
	int bit;
	struct hvd_handle *next; /* queue link */
	int pending_idx;	 /* index in the pending array */
	/* completion: status/message/results are written before done */
	int done; /* atomic */
	hvd_status_t status;
	char *message;
	size_t result_count;
	int result_int;
	int internal; /* join / pset ops: not user names */
	int tl_neg;   /* a NEGOTIATE span is open on the timeline */
	/* device ops submitted under hvd_stream_set: the caller's stream
	 * and an event marking its work at submission (engine/stream.c) */
	void *dev_stream;
	void *dev_event;
};

/* engine/stream.c: the calling thread's stream (hvd_stream_set) for a
 * device op being submitted: records the event h->dev_event on it. */
hvd_status_t engine_stream_mark(struct hvd_handle *h);
/* Engine thread, around the device collective of ops[0..n-1] (NULL
 * entries skipped): order it after their streams, then clear. */
void engine_stream_order(struct hvd_handle **ops, const int *idx, int n);
void engine_stream_clear(void);

/* Completes h with st (message copied, may be NULL): runs the callback,
 * wakes waiters. */
void engine_complete(struct hvd_handle *h, hvd_status_t st, const char *msg);
/* Engine thread: gather the wake-ups of completions until
 * engine_wake_flush() (on: 1) or wake at each one (0). */
void engine_wake_defer(int on);
void engine_wake_flush(void);

/* ------------------------------------------------------------- engine */

struct engine {
	/* configuration (identical on all ranks: rank 0's values) */
	size_t fusion_threshold;
	size_t fusion_direct; /* HOROVOD_FUSION_DIRECT_BYTES */
	double cycle_ms;
	int cache_capacity;
	double stall_warn, stall_shutdown;
	int stall_disable;
	int elastic; /* HOROVOD_ELASTIC: a peer's failure is recovered from */

	hvd_comm_t *comm; /* the engine's duplicate of the world */
	int rank, size;

	pthread_t thread;
	int thread_started;
	pthread_mutex_t lock; /* queue, name set, commands */
	pthread_cond_t wake;  /* engine thread sleeps here */
	pthread_cond_t done_cond;
	int sleeping;
	unsigned submits; /* bumped (atomically) by every submission */
	struct hvd_handle *q_head, *q_tail;
	struct namemap inflight; /* names queued or pending on this rank */
	int stop_requested;
	int dead; /* engine thread gone: new ops fail */
	hvd_status_t dead_status;
	char dead_message[512];
	int nwaiters;
	int max_spinners; /* threads that may spin in hvd_wait */

	/* timeline commands from callers */
	int tl_cmd; /* 0 none, 1 start, 2 stop */
	struct timeline tl_new;
	int tl_cmd_done;

	/* engine thread only */
	struct hvd_handle **pending;
	int npending, cappending;
	struct namemap pending_names;
	struct rcache cache;
	struct coord coord; /* used on rank 0 */
	struct pset_table psets;
	struct timeline tl;
	struct autotune at;
	int joined;
	struct hvd_handle *join_op;
	int pset_seq; /* add/remove calls so far (names them) */
	void *fusion_buf;
	size_t fusion_cap;
	void *zero_buf;
	size_t zero_cap;
	double last_stall_check;
	int stall_shutdown_pending;
	int at_sync; /* rank 0: autotune values to broadcast */
	char stall_message[512];
	unsigned long cycles;
	int hot;	  /* start the next cycle at once */
	int quiet;	  /* the last negotiation found nothing on any rank */
	double quiet_since; /* start of the first of those quiet cycles */
	double idle_max_s;  /* HVD_ENGINE_IDLE_MAX_MS (engine_start.c) */
	int worked;	  /* the last cycle executed something */
	unsigned long long idle_spin_ns; /* HVD_ENGINE_SPIN_US */
	double hot_since; /* last progress while ops were pending */
};

extern struct engine *hvd_engine;

/* Nothing of this rank's waits on the next cycle: no op of its pending,
 * not joined, no autotune values to send.  Engine thread. */
static inline int engine_nothing_waits(const struct engine *e)
{
	return e->npending == 0 && !e->joined && !e->at_sync;
}

/* Hooks called by hvd_init (at its end) and hvd_finalize (at its start). */
hvd_status_t engine_start(void);
void engine_stop(void);

/* cycle.c: one cycle; returns 0 to go on, 1 when the engine must stop. */
int cycle_run(struct engine *e);

/* pending.c: this rank's pending ops (engine thread).  Adds a drained op
 * (-1 when out of memory). */
int pending_add(struct engine *e, struct hvd_handle *h);
/* Completes a pending op and forgets it. */
void pending_finish(struct engine *e, struct hvd_handle *h, hvd_status_t st,
		    const char *msg);
/* Fails every pending and queued op, and marks the engine dead (new ops
 * fail at once with st and msg). */
void pending_fail_all(struct engine *e, hvd_status_t st, const char *msg);
/* Sends a pending op back to the coordinator path (its bit is gone). */
void pending_uncache(struct engine *e, struct hvd_handle *h);

/* execute.c: one response of the cycle's list. */
struct cycle_item {
	int bit; /* cache bit it came from, -1 when new */
	int order;
};
/* Orders, fuses and runs the list (taking its contents); returns 1 when
 * the engine must stop. */
int cycle_execute(struct engine *e, struct resp_list *l,
		  struct cycle_item *items);

/* fusion.c: executes one bucket of the ordered responses; ops[i] is this
 * rank's op for responses[i] (NULL when joined: zeros). */
hvd_status_t fusion_execute(struct engine *e, const struct eng_resp *r,
			    struct hvd_handle **ops,
			    const struct fusion_bucket *b, char *msg,
			    size_t msglen);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_H */

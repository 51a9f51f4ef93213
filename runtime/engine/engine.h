/*
 * engine.h - the engine's internal types, shared by its modules:
 *
 *   engine.c          public async API, handles, the submission queue,
 *                     groups, join, process-set calls, timeline control
 *   engine_start.c    engine_start/engine_stop and the background thread
 *   cycle.c           one cycle: cache bit vectors, the coordinator
 *                     exchange
 *   execute.c         execution order, special responses, cache upkeep
 *   negotiate.c       the coordinator's table: readiness, validation,
 *                     mismatch messages, join, groups (pure)
 *   wire.c            request/response encoding (pure)
 *   response_cache.c  name+parameters -> cache bit, LRU (pure)
 *   fusion.c          fusion plan (pure) and fused/plain execution
 *   pset.c            process sets: spec parsing (pure), the set table
 *   timeline.c        Chrome trace writer
 *   stall.c           stall inspector report (pure)
 *   autotune.c        fusion threshold / cycle time tuner (pure)
 *   namemap.c         string -> pointer hash map
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

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#pragma GCC visibility push(hidden)

/* Operation kinds: requests use the first ones, responses all. */
enum eng_kind {
	EK_ALLREDUCE = 0,
	EK_ALLGATHER,
	EK_BROADCAST,
	EK_ALLTOALL,
	EK_REDUCESCATTER,
	EK_JOIN,
	EK_PSET_ADD,
	EK_PSET_REMOVE,
	EK_ERROR,    /* response only: the op fails on every rank */
	EK_SHUTDOWN, /* response only: stall shutdown of the engine */
	EK_COUNT
};
/* "ALLREDUCE", ... (Horovod's request/response type names). */
const char *eng_kind_name(int kind);

#define EF_COMPRESS 1u /* float32 exchanged as float16 */
#define EF_DEVICE 2u   /* buffers are device memory */

/* What must agree between ranks for one named op. */
struct eng_params {
	uint8_t kind, dtype, op, flags;
	int32_t root;	  /* broadcast root, a world rank */
	int32_t pset;	  /* process set id */
	int32_t priority; /* not validated: the first submitter's wins */
	uint64_t count;
	double prescale, postscale;
};

/* A rank's request for one op, as the coordinator sees it. */
struct eng_req {
	struct eng_params p;
	double age;	     /* seconds since the op was enqueued */
	uint32_t group_size; /* >1: member of a group of that size */
	uint32_t nranks;     /* pset add: the members */
	int32_t *ranks;
	char *name;
	char *group; /* group key (smallest member name) or NULL */
};

/* What every rank executes (or fails) for one op. */
struct eng_resp {
	struct eng_params p;
	int32_t status;	     /* EK_ERROR/EK_SHUTDOWN: an hvd_status_t */
	int32_t joined;	     /* members that joined and contribute zeros */
	int32_t last_joined; /* EK_JOIN: the last rank to join */
	uint32_t group_size;
	uint32_t ncounts; /* allgather: count of each set rank */
	uint64_t *counts;
	uint32_t nranks; /* pset add: members (p.pset is the new id) */
	int32_t *ranks;
	char *name;
	char *group;
	char *message; /* EK_ERROR/EK_SHUTDOWN */
};

void eng_req_free(struct eng_req *r);
void eng_resp_free(struct eng_resp *r);
/* Deep copy; HVD_ERR_NO_MEMORY on failure. */
hvd_status_t eng_resp_copy(struct eng_resp *dst, const struct eng_resp *src);

/* ------------------------------------------------------------ namemap */

struct namemap {
	struct namemap_slot {
		const char *key; /* not owned */
		void *val;
		uint64_t hash;
	} * slots;
	size_t cap, n, tomb;
};
void namemap_init(struct namemap *m);
void namemap_free(struct namemap *m);
void *namemap_get(const struct namemap *m, const char *key);
/* key must stay valid while present (usually the value's own name). */
hvd_status_t namemap_put(struct namemap *m, const char *key, void *val);
void *namemap_del(struct namemap *m, const char *key);

/* ------------------------------------------------------------- wire */

struct wbuf {
	uint8_t *data;
	size_t len, cap;
	int oom;
};
struct rbuf {
	const uint8_t *p, *end;
	int bad;
};
void wbuf_free(struct wbuf *w);
void wire_put_req(struct wbuf *w, const struct eng_req *r);
void wire_put_resp(struct wbuf *w, const struct eng_resp *r);
/* 0 on success, -1 on a malformed or truncated message. */
int wire_get_req(struct rbuf *b, struct eng_req *r);
int wire_get_resp(struct rbuf *b, struct eng_resp *r);
void wire_put_u32(struct wbuf *w, uint32_t v);
uint32_t wire_get_u32(struct rbuf *b);

/* ------------------------------------------------------ process sets */

struct pset {
	int32_t id;
	int n;
	int *ranks;	  /* world ranks, ascending */
	int my_rank;	  /* -1: not a member */
	hvd_comm_t *comm; /* members only */
};

struct pset_table {
	struct pset **sets; /* by id; NULL for free ids */
	int cap;
	int32_t next_id;
	int dynamic; /* HOROVOD_DYNAMIC_PROCESS_SETS */
};

/* Parse "0,1;2,3" (ranks may also be ranges "0-3") into sets of sorted,
 * distinct world ranks.  Returns HVD_ERR_INVALID_ARG with a message in
 * err on a malformed spec, a rank outside [0, world_size) or a duplicate. */
hvd_status_t pset_parse(const char *spec, int world_size, int ***sets,
			int **sizes, int *nsets, char *err, size_t errlen);
/* Sort and check a rank list in place ("duplicate rank 3", ...). */
hvd_status_t pset_check_ranks(int *ranks, int n, int world_size, char *err,
			      size_t errlen);
uint64_t pset_hash(const int *ranks, int n);
struct pset *pset_get(const struct pset_table *t, int32_t id);
/* Adds a set under id (creating its communicator on members). */
hvd_status_t pset_table_add(struct pset_table *t, int32_t id, const int *ranks,
			    int n, int world_rank, hvd_comm_t *engine_comm);
void pset_table_remove(struct pset_table *t, int32_t id);
void pset_table_free(struct pset_table *t);
int pset_is_member(const struct pset_table *t, int32_t id, int world_rank);

/* ------------------------------------------------------ response cache */

enum { RC_MISS = 0, RC_HIT, RC_INVALID };

struct rc_entry {
	struct eng_resp resp;
	int bit;
	struct rc_entry *prev, *next; /* LRU: head is most recent */
	void *pending;		      /* this rank's op waiting on the bit */
};

struct rcache {
	int capacity;
	int nbits; /* bits in use: 0..nbits-1 (some may be free) */
	struct rc_entry **by_bit;
	int *free_bits; /* stack, lowest bit on top */
	int nfree;
	struct rc_entry *head, *tail;
	int count;
	struct namemap names;
	int warned_evict;
};

hvd_status_t rc_init(struct rcache *c, int capacity);
void rc_free(struct rcache *c);
/* Is (name, p) cached?  set_rank: the caller's rank in p->pset (for the
 * allgather count).  *bit is set for RC_HIT and RC_INVALID. */
int rc_lookup(const struct rcache *c, const char *name,
	      const struct eng_params *p, int set_rank, int *bit);
/* Insert or refresh r (copied).  When an entry had to go (capacity), its
 * bit is reused and *evicted (if not NULL) receives its pending pointer,
 * or NULL.  Returns the bit, or -1 when out of memory. */
int rc_put(struct rcache *c, const struct eng_resp *r, void **evicted);
void rc_erase(struct rcache *c, int bit);
void rc_touch(struct rcache *c, int bit);
struct rc_entry *rc_entry_at(const struct rcache *c, int bit);

/* --------------------------------------------------------- coordinator */

struct coord_entry {
	char *name;
	struct eng_req **reqs; /* [world size], NULL where not submitted */
	int count;
	double first_seen; /* coordinator clock */
	int timeline_started;
	struct coord_entry *next, *prev; /* first-seen order */
};

/* Membership lookup for readiness: 1 when world rank r is in set id. */
typedef int (*coord_member_fn)(void *arg, int32_t pset, int rank);
typedef int (*coord_set_size_fn)(void *arg, int32_t pset);

struct coord {
	int size;
	struct namemap table;
	struct coord_entry *first, *last;
	int nentries;
	int *joined; /* [size] */
	int njoined;
	int last_joined;
	coord_member_fn is_member;
	coord_set_size_fn set_size;
	void *member_arg;
	/* timeline hooks (NULL when off) */
	void (*on_first)(void *arg, const char *name, int kind, double t);
	void (*on_rank)(void *arg, const char *name, int rank, double t);
	void (*on_ready)(void *arg, const char *name, double t);
	void *tl_arg;
};

struct resp_list {
	struct eng_resp *v;
	int n, cap;
};
void resp_list_free(struct resp_list *l);
/* Appends a zeroed response; NULL when out of memory. */
struct eng_resp *resp_list_push(struct resp_list *l);

hvd_status_t coord_init(struct coord *c, int size);
void coord_free(struct coord *c);
/* Takes ownership of req. */
hvd_status_t coord_add(struct coord *c, int rank, struct eng_req *req,
		       double now);
/* Moves the ready entries out of the table as responses (first-seen
 * order; groups held until complete), errors included. */
hvd_status_t coord_collect(struct coord *c, struct resp_list *out);
/* Describes missing ranks for stall reporting (stall.c). */
struct stall_report;

/* ------------------------------------------------------------- stall */

/* Writes the warning for entries older than warn seconds; returns how many
 * are older than shutdown (>0) seconds; msg gets a one-line summary for
 * the error status when so. */
int stall_check(const struct coord *c, double now, double warn, double shutdown,
		char *msg, size_t msglen);

/* ------------------------------------------------------------- fusion */

/* A bucket: a run of responses executed by one collective. */
struct fusion_bucket {
	int first; /* index into the ordered response list */
	int n;	   /* members: idx[0..n-1] */
	int *idx;
	size_t bytes;
};
struct fusion_plan {
	struct fusion_bucket *b;
	int n;
};
/* Groups fusible allreduces (same dtype, op, pset, flags, scale factors)
 * up to threshold bytes, keeping the order of each bucket's first member.
 * Responses that are not allreduces, and host allreduces of direct bytes
 * or more (direct > 0), get a bucket of their own. */
hvd_status_t fusion_plan_build(const struct eng_resp *r, int n,
			       size_t threshold, size_t direct,
			       struct fusion_plan *plan);
void fusion_plan_free(struct fusion_plan *plan);
/* Two allreduce responses can share one collective. */
int fusion_compatible(const struct eng_params *a, const struct eng_params *b);

/* ----------------------------------------------------------- timeline */

struct timeline {
	int fd;
	int mark_cycles;
	double t0;
	struct namemap pids; /* tensor name -> pid (intptr) */
	char **names;	     /* owned keys */
	int nnames, capnames;
	struct wbuf buf;
	int first_event;
};
hvd_status_t timeline_open(struct timeline *t, const char *path,
			   int mark_cycles);
int timeline_active(const struct timeline *t);
void timeline_begin(struct timeline *t, const char *tensor, const char *what);
void timeline_end(struct timeline *t, const char *tensor, const char *dtype,
		  uint64_t count);
void timeline_instant(struct timeline *t, const char *tensor,
		      const char *what); /* X event of zero duration */
void timeline_mark_cycle(struct timeline *t);
/* Writes out what is buffered (one write per cycle). */
void timeline_flush(struct timeline *t);
/* Closes the JSON array and the file. */
void timeline_close(struct timeline *t);

/* ----------------------------------------------------------- autotune */

struct autotune {
	int active;
	int tune_fusion, tune_cycle;
	int phase;  /* 0: fusion threshold, 1: cycle time, 2: done */
	int cand;   /* index of the candidate under test */
	int sample; /* samples taken for it */
	int warmup, samples, steps_per_sample;
	double scores[16];
	double best_score;
	size_t best_fusion;
	double best_cycle;
	size_t fusion; /* current values */
	double cycle_ms;
	/* the sample in progress */
	double t_start;
	double bytes;
	int steps;
	char *marker; /* name whose repeats count steps */
	FILE *log;
};
void autotune_init(struct autotune *a, size_t fusion, double cycle_ms,
		   int tune_fusion, int tune_cycle, FILE *log);
void autotune_free(struct autotune *a);
/* Feeds one executed allreduce; returns 1 when new values were chosen
 * (a->fusion, a->cycle_ms) and must be broadcast. */
int autotune_record(struct autotune *a, const char *name, size_t bytes,
		    double now);

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

	hvd_comm_t *comm; /* the engine's duplicate of the world */
	int rank, size;

	pthread_t thread;
	int thread_started;
	pthread_mutex_t lock; /* queue, name set, commands */
	pthread_cond_t wake;  /* engine thread sleeps here */
	pthread_cond_t done_cond;
	int sleeping;
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
	double hot_since; /* last progress while ops were pending */
};

extern struct engine *hvd_engine;

/* Hooks called by hvd_init (at its end) and hvd_finalize (at its start). */
hvd_status_t engine_start(void);
void engine_stop(void);

/* cycle.c: one cycle; returns 0 to go on, 1 when the engine must stop. */
int cycle_run(struct engine *e);
/* Fails every pending op (engine thread). */
void cycle_fail_all(struct engine *e, hvd_status_t st, const char *msg);
/* Completes a pending op and forgets it. */
void cycle_finish(struct engine *e, struct hvd_handle *h, hvd_status_t st,
		  const char *msg);
/* Sends a pending op back to the coordinator path (its bit is gone). */
void cycle_uncache(struct engine *e, struct hvd_handle *h);

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

/*
 * ckpt_internal.h - the checkpointer object and the functions its files
 * share.  The files call one way, top first:
 *
 *   ckpt.c (open, save, step, wait, close), ckpt_restore.c
 *   ckpt_async.c       the checkpoint in flight (async mode)
 *   ckpt_commit.c      writing one checkpoint: files, agreement, commit
 *   ckpt_registry.c    registered buffers, metadata, the freeze
 *   ckpt_stage.c       staging memory, device buffers
 *   ckpt_coll.c        the world, agreement between ranks, per-step poll
 *   ckpt_inject.c      fault injection for the crash tests
 *   ckpt_signal.c      SIGTERM/SIGUSR1 into a stop request
 *   ckpt/core/         manifest and store (files; no threads, no ranks)
 *
 * Agreement between ranks goes through the public collectives (ckpt_coll.c).
 * When libhvd is not initialised the checkpointer runs as a world of one (a
 * plain program), and refuses to when HOROVOD_SIZE says there are more ranks.
 */
#ifndef HVD_CKPT_INTERNAL_H
#define HVD_CKPT_INTERNAL_H

#include "ckpt/core/ckpt_store.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>

#pragma GCC visibility push(hidden)

struct ckpt_reg {
	char name[CKPT_NAME_MAX + 1];
	void *buf;
	size_t bytes;           /* sharded: of this rank's block      */
	hvd_ckpt_kind_t kind;
	uint64_t offset;        /* within its file                    */
	uint64_t count, elem;   /* sharded: global elements, their size */
	uint64_t goffset;       /* sharded: in the concatenated arrays */
	int device;             /* GPU memory: staged through host    */
};

/* One checkpoint being written (sync: on the stack; async: in flight). */
struct ckpt_write {
	long step;
	char partial[128];      /* step-N.partial-TAG, in the directory */
	hvd_status_t status;    /* of this rank's local write         */
	char error[1024];       /* its message (the writer thread's)  */
	uint64_t repl_hash;     /* rank 0                             */
	uint64_t rank_hash;
	uint64_t shard_hash;    /* shard-R.bin                        */
	unsigned char *meta;    /* copy taken when the write started  */
	size_t meta_len;
	double started;         /* hvd_now() at start                 */
	double blocked;         /* seconds the caller was held        */
	int64_t *hashes;        /* agreed: every file's checksum      */
	hvd_status_t pub_status; /* rank 0's step 4 (message: error)  */
};

/* Where the checkpoint in flight is (async; the same on every rank, since
 * every change follows an agreement). */
enum ckpt_phase {
	CKPT_IDLE = 0,
	CKPT_WRITING,           /* writer threads: copy (overlap), write */
	CKPT_PUBLISHING,        /* all written: rank 0's thread commits  */
};

struct hvd_ckpt {
	struct ckpt_dir dir;    /* open from open to close (fd, path)  */
	long every;
	int keep;
	int async;
	int overlap;            /* async: the writer stages host buffers */
	int rank, size;
	int local_size;         /* ranks on this node                 */
	int signals;            /* SIGTERM/SIGUSR1 handler installed  */
	char tag[64];           /* partial-directory tag of this run  */
	char job[64];
	char node[64];          /* this rank's node, for messages     */
	int lock_fd;            /* rank 0: the directory's lock, or -1 */
	uint64_t dir_token;     /* rank 0's, in the lock file: same dir? */

	struct ckpt_reg *regs;
	size_t nregs;
	uint64_t repl_bytes, rank_bytes;
	uint64_t shard_bytes;   /* this rank's blocks (shard-R.bin)   */
	uint64_t shard_global;  /* the sharded arrays' global bytes   */
	int frozen;             /* registry fixed by the first write  */
	int has_device;

	unsigned char *meta;    /* set_meta                           */
	size_t meta_len;
	unsigned char *loaded_meta;
	size_t loaded_meta_len;
	int have_loaded_meta;

	long last_step;         /* last committed or restored; -1     */
	long restored_step;     /* protected from retention; -1       */
	int restored_resized;   /* it was written by another size    */
	long prune_step;        /* async: retention to run, or -1     */

	/* staging (async, device buffers) */
	unsigned char *stage_repl, *stage_rank, *stage_shard;
	int stage_pinned;
	int copy_threads;       /* staging memcpy split between them  */
	/* the checkpoint in flight (async) */
	int in_flight;          /* enum ckpt_phase                      */
	int thread_started;     /* in flight without a thread: failed  */
	pthread_t thread;       /* the writer, then rank 0's publisher */
	struct ckpt_write w;
	int thread_done;        /* __atomic: the thread's work is done */
	int thread_tid;         /* __atomic: its tid once it lowered its
				   priority (0: it did not)           */
	int thread_nice0;       /* the program's nice value it started at */
	int copy_done;          /* under mu: staging copy taken (fence) */
	pthread_cond_t copy_cv;
	pthread_mutex_t mu;     /* meta, copy_done                     */
	/* the per-step allreduce, pipelined (ckpt_coll.c) */
	hvd_handle_t poll_h;
	int poll_posted;
	int64_t poll_v[3];

	/* test knobs (HVD_CKPT_TEST_CRASH, HVD_CKPT_TEST_DELAY_MS) */
	char crash_point[32];
	long crash_step;
	int crash_rank;
	long delay_ms;
	double last_blocked;    /* seconds step/save held the caller  */
};

/* The world (ckpt_coll.c): rank, size and local size from libhvd, or a
 * world of one without hvd_init() (HVD_ERR_NOT_INITIALIZED when
 * HOROVOD_SIZE says otherwise). */
hvd_status_t ckpt_world_init(hvd_ckpt_t *c);
/* Blocking allreduce of small int64 buffers: a no-op in a world of one. */
hvd_status_t ckpt_allreduce(hvd_ckpt_t *c, int64_t *v, size_t n, hvd_op_t op);
/* The per-step allreduce MAX of 3 values: pipelined (more than one rank)
 * it is posted at the end of a step and taken at the start of the next;
 * take without a post in flight gives "nothing to do" (no stop, busy).
 * drop: take and forget (every collective entry point but hvd_ckpt_step:
 * what it says may no longer hold after it). */
int ckpt_poll_pipelined(const hvd_ckpt_t *c);
hvd_status_t ckpt_poll_post(hvd_ckpt_t *c, const int64_t v[3]);
hvd_status_t ckpt_poll_take(hvd_ckpt_t *c, int64_t v[3]);
hvd_status_t ckpt_poll_drop(hvd_ckpt_t *c);

/* Fault injection (ckpt_inject.c): read the HVD_CKPT_TEST_* knobs at open
 * (arming the store's write hook), release at close; a point sleeps and/or
 * SIGKILLs this process when the knobs name it. */
void ckpt_inject_setup(hvd_ckpt_t *c);
void ckpt_inject_release(hvd_ckpt_t *c);
void ckpt_inject_point(hvd_ckpt_t *c, const char *point, long step);

/* Registry (ckpt_registry.c): freeze it at the first save/restore and
 * check that every rank registered the same buffers (names, kinds, sizes,
 * order); async: allocate the staging memory. */
hvd_status_t ckpt_freeze(hvd_ckpt_t *c);

/* Writing (ckpt_commit.c): start (step, partial name, metadata copy);
 * step 1 of the protocol on this rank (from the staging copy when staged);
 * steps 2-5 on every rank, at once (ckpt_commit) or in three parts that
 * async mode spreads over steps: ckpt_agreed (step 2's outcome, failed =
 * the lowest rank that failed or -1, known on every rank; then step 3),
 * ckpt_publish (step 4 on rank 0, any thread) and
 * ckpt_committed (step 5's outcome: rank 0's status, on every rank).
 * ckpt_write_done frees what a write holds. */
hvd_status_t ckpt_write_begin(hvd_ckpt_t *c, struct ckpt_write *w,
			      long step);
void ckpt_write_local(hvd_ckpt_t *c, struct ckpt_write *w, int staged);
hvd_status_t ckpt_commit(hvd_ckpt_t *c, struct ckpt_write *w);
hvd_status_t ckpt_agreed(hvd_ckpt_t *c, struct ckpt_write *w,
			 int64_t failed);
void ckpt_publish(hvd_ckpt_t *c, struct ckpt_write *w);
hvd_status_t ckpt_committed(hvd_ckpt_t *c, struct ckpt_write *w,
			    int64_t status0);
void ckpt_write_done(struct ckpt_write *w);

/* Async mode (ckpt_async.c): start the checkpoint of step (after a flush:
 * nothing in flight); the two values this rank puts in the per-step
 * allreduce MAX (busy: its part still runs; fail: how it failed), and the
 * next phase once no rank is busy (fail: the MAX); flush everything now
 * (collective, like the others). */
hvd_status_t ckpt_async_start(hvd_ckpt_t *c, long step);
void ckpt_async_poll(hvd_ckpt_t *c, int64_t *busy, int64_t *fail);
/* At each step: a background write still running half-way to the next
 * due checkpoint gets its priority back (HVD_CKPT_WRITER_NICE). */
void ckpt_async_catch_up(hvd_ckpt_t *c, long step);
hvd_status_t ckpt_async_advance(hvd_ckpt_t *c, int64_t fail);
hvd_status_t ckpt_async_flush(hvd_ckpt_t *c);

/* Staging (ckpt_stage.c): allocate and touch once; copy the registered
 * buffers in (which: those in device memory, in host memory, or all);
 * free. */
enum ckpt_stage_which {
	CKPT_STAGE_ALL,
	CKPT_STAGE_DEVICE,
	CKPT_STAGE_HOST,
};
hvd_status_t ckpt_stage_prepare(hvd_ckpt_t *c);
hvd_status_t ckpt_stage(hvd_ckpt_t *c, enum ckpt_stage_which which);
void ckpt_stage_free(hvd_ckpt_t *c, void *p);

/* Signals (ckpt_signal.c): installed at the first open, counted. */
hvd_status_t ckpt_signals_install(void);
void ckpt_signals_remove(void);
/* A stop the ranks agreed on (the per-step allreduce's MAX: another
 * rank's signal): the handler stays, as after this rank's own. */
void ckpt_signals_agreed(int sig);
/* The stop signal that arrived on this rank (SIGTERM over SIGUSR1), 0
 * when none did. */
int ckpt_signals_pending(void);

/* GPU: is_device says whether a pointer is device memory; copy moves n
 * bytes between device and host (to_host = 1: dst is host).  Both go to
 * the GPU path's hooks (device.h) and fail cleanly without it. */
int ckpt_dev_is_device(const void *ptr);
hvd_status_t ckpt_dev_copy(void *dst, const void *src, size_t n, int to_host);

#pragma GCC visibility pop

#endif /* HVD_CKPT_INTERNAL_H */

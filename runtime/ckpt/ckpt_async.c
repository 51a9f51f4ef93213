/*
 * ckpt_async.c - async mode: the checkpoint in flight, off the training
 * loop.
 *
 * A checkpoint goes through two phases, each run by a thread while the
 * program trains, each ended by the per-step allreduce of hvd_ckpt_step()
 * (which carries, besides the stop flag, whether this rank's thread is
 * still busy and how it failed):
 *
 *   WRITING     save() takes the staging copy (or, in overlap mode, leaves
 *               it to the writer, and hvd_ckpt_fence() waits for it), and
 *               the writer thread of every rank writes its files (step 1).
 *               When no rank is busy, the allreduce has told every rank
 *               whether all writes succeeded (step 2); the checksums are
 *               gathered (step 3, one more small allreduce) and rank 0
 *               starts its publisher thread.
 *   PUBLISHING  rank 0's thread writes the manifest, renames and replaces
 *               `latest` (step 4).  When it is done, the next allreduce
 *               carries its status to every rank (step 5).  Retention is
 *               left to the next writer thread (or close).
 *
 * The phase is the same on every rank (each change follows an agreement),
 * so every rank issues the same collectives.  At most one checkpoint is in
 * flight: a save while one is in flight, hvd_ckpt_wait(), hvd_ckpt_close()
 * and a stop request flush it synchronously (ckpt_async_flush).  The
 * on-disk order of the commit is that of synchronous mode (ckpt_commit.c).
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The staging copy is taken: wake hvd_ckpt_fence(). */
static void copy_taken(hvd_ckpt_t *c)
{
	pthread_mutex_lock(&c->mu);
	c->copy_done = 1;
	pthread_cond_broadcast(&c->copy_cv);
	pthread_mutex_unlock(&c->mu);
}

/* Leave SIGTERM/SIGUSR1 to the application's threads. */
static void block_stop_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

/* The write and the commit are on nobody's critical path: where cores are
 * short they yield to the training threads (HVD_CKPT_WRITER_NICE, default
 * 10; per thread: Linux's nice is per thread).  But a job whose training
 * threads keep every core busy would starve them, and the next checkpoint
 * would wait for the previous write: so a write still running half-way to
 * the next due checkpoint gets its priority back (ckpt_async_catch_up; a
 * CPU-bound 2-rank test, 96 MiB per rank every 5 steps of 150 ms: blocked
 * 0.10-0.12 s per checkpoint with nice 10 throughout, 0.014-0.028 s at
 * nice 0). */
static void yield_cpu(hvd_ckpt_t *c)
{
	long nice = hvd_env_long("HVD_CKPT_WRITER_NICE", 10);
	/* syscall: glibc before 2.30 (RHEL 8) has no gettid() */
	int tid = (int)syscall(SYS_gettid);
	int nice0;

	if (nice <= 0)
		return;
	/* the program's nice value, which the thread inherited */
	errno = 0;
	nice0 = getpriority(PRIO_PROCESS, (id_t)tid);
	if (errno != 0 || nice0 >= 19)
		return;
	/* only a priority it can get back: an unprivileged thread may not
	 * lower its nice value again unless RLIMIT_NICE allows it (default
	 * 0: it does not), and a writer stuck at nice 10 is what the catch-up
	 * is there to prevent.  One step down and back up tells; where it
	 * cannot come back the writer stays one step down. */
	if (setpriority(PRIO_PROCESS, (id_t)tid, nice0 + 1) != 0)
		return;
	if (setpriority(PRIO_PROCESS, (id_t)tid, nice0) != 0) {
		hvd_log(HVD_LOG_DEBUG,
			"checkpoint: the writer stays at nice %d, not %d: "
			"it could not get the program's priority back (%s; "
			"RLIMIT_NICE, ulimit -e, of %d allows it)",
			nice0 + 1, nice0 + (int)nice, strerror(errno),
			20 - nice0);
		return;
	}
	c->thread_nice0 = nice0;
	if (setpriority(PRIO_PROCESS, (id_t)tid,
			nice0 + nice > 19 ? 19 : nice0 + (int)nice) != 0) {
		hvd_log(HVD_LOG_DEBUG, "checkpoint: writer priority: %s",
			strerror(errno));
		return;
	}
	__atomic_store_n(&c->thread_tid, tid, __ATOMIC_RELEASE);
}

void ckpt_async_catch_up(hvd_ckpt_t *c, long step)
{
	int tid;

	if (c->in_flight != CKPT_WRITING || c->every <= 0 ||
	    step - c->w.step < (c->every + 1) / 2 ||
	    __atomic_load_n(&c->thread_done, __ATOMIC_ACQUIRE))
		return;
	tid = __atomic_exchange_n(&c->thread_tid, 0, __ATOMIC_ACQ_REL);
	/* the thread is still running (not done), so the tid is its own */
	if (tid > 0 &&
	    setpriority(PRIO_PROCESS, (id_t)tid, c->thread_nice0) != 0)
		hvd_log(HVD_LOG_DEBUG, "checkpoint: writer priority: %s",
			strerror(errno));
}

static void *writer_main(void *arg)
{
	hvd_ckpt_t *c = arg;
	hvd_status_t st = HVD_OK;

	block_stop_signals();
	if (c->overlap) {
		/* the program computes (reading the buffers) meanwhile, and
		 * calls hvd_ckpt_fence() before it modifies them */
		ckpt_inject_point(c, "copy", c->w.step);
		st = ckpt_stage(c, CKPT_STAGE_HOST);
		copy_taken(c);
	}
	yield_cpu(c);
	if (c->prune_step >= 0) {
		/* rank 0 only: the previous commit's retention; this run's
		 * partial directories are the write starting now on the
		 * other ranks: keep them */
		ckpt_prune(&c->dir, c->keep, c->prune_step, c->tag, NULL);
		c->prune_step = -1;
	}
	if (st == HVD_OK) {
		ckpt_write_local(c, &c->w, 1);
	} else {
		c->w.status = st;
		ckpt_fmt(c->w.error, sizeof(c->w.error), "%s",
			 hvd_last_error());
	}
	__atomic_store_n(&c->thread_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *publisher_main(void *arg)
{
	hvd_ckpt_t *c = arg;

	block_stop_signals();
	yield_cpu(c);
	ckpt_publish(c, &c->w);
	__atomic_store_n(&c->thread_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Start this phase's thread; 0 or pthread_create's error. */
static int spawn(hvd_ckpt_t *c, void *(*fn)(void *))
{
	int err;

	__atomic_store_n(&c->thread_done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->thread_tid, 0, __ATOMIC_RELAXED);
	err = pthread_create(&c->thread, NULL, fn, c);
	c->thread_started = err == 0;
	return err;
}

static void join(hvd_ckpt_t *c)
{
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	c->thread_started = 0;
}

static void end(hvd_ckpt_t *c)
{
	join(c);
	ckpt_write_done(&c->w);
	c->in_flight = CKPT_IDLE;
}

hvd_status_t ckpt_async_start(hvd_ckpt_t *c, long step)
{
	hvd_status_t st;
	int err;

	c->copy_done = 0;
	st = ckpt_write_begin(c, &c->w, step);
	if (st == HVD_OK)
		st = ckpt_stage_prepare(c);
	/* overlap: only device buffers here (see ckpt_stage.c), the writer
	 * stages the rest */
	if (st == HVD_OK)
		st = ckpt_stage(c, c->overlap ? CKPT_STAGE_DEVICE
					      : CKPT_STAGE_ALL);
	if (!c->overlap || st != HVD_OK)
		c->copy_done = 1;
	c->thread_started = 0;
	if (st == HVD_OK) {
		err = spawn(c, writer_main);
		if (err)
			st = hvd_error(HVD_ERR_INTERNAL, "checkpoint: cannot "
				       "start the writer thread: %s",
				       strerror(err));
	}
	if (st != HVD_OK) {
		/* the other ranks' writes are under way: this rank's failure
		 * joins the agreement, as if its writer had failed
		 * (collectives stay in step) */
		c->w.status = st;
		ckpt_fmt(c->w.error, sizeof(c->w.error), "%s",
			 hvd_last_error());
		c->copy_done = 1;
		__atomic_store_n(&c->thread_done, 1, __ATOMIC_RELEASE);
	}
	c->in_flight = CKPT_WRITING;
	return HVD_OK;
}

/* This rank's part of the per-step allreduce MAX.  Writing: fail is
 * size - rank for a failed write, so that the MAX names the lowest failed
 * rank.  Publishing: only rank 0 has a part; fail is its status. */
void ckpt_async_poll(hvd_ckpt_t *c, int64_t *busy, int64_t *fail)
{
	int done = __atomic_load_n(&c->thread_done, __ATOMIC_ACQUIRE);

	*busy = 0;
	*fail = 0;
	if (c->in_flight == CKPT_WRITING) {
		*busy = !done;
		if (done && c->w.status != HVD_OK)
			*fail = c->size - c->rank;
	} else if (c->in_flight == CKPT_PUBLISHING && c->rank == 0) {
		*busy = !done;
		if (done)
			*fail = c->w.pub_status;
	}
}

/* No rank is busy: fail is the MAX of ckpt_async_poll's. */
hvd_status_t ckpt_async_advance(hvd_ckpt_t *c, int64_t fail)
{
	hvd_status_t st;
	int err;

	if (c->in_flight == CKPT_PUBLISHING) {
		join(c);
		st = ckpt_committed(c, &c->w, fail);
		end(c);
		return st;
	}
	if (c->in_flight != CKPT_WRITING)
		return HVD_OK;
	join(c);
	st = ckpt_agreed(c, &c->w, fail ? c->size - fail : -1);
	if (st != HVD_OK) {
		end(c);
		return st;
	}
	c->in_flight = CKPT_PUBLISHING;
	if (c->rank != 0)
		return HVD_OK;
	err = spawn(c, publisher_main);
	if (err) {
		hvd_log(HVD_LOG_WARNING, "checkpoint: cannot start the "
			"publisher thread (%s): committing on this thread",
			strerror(err));
		ckpt_publish(c, &c->w);
		__atomic_store_n(&c->thread_done, 1, __ATOMIC_RELEASE);
	}
	return HVD_OK;
}

hvd_status_t ckpt_async_flush(hvd_ckpt_t *c)
{
	hvd_status_t st;
	int64_t v[1];

	switch (c->in_flight) {
	case CKPT_WRITING:
		join(c);
		st = ckpt_commit(c, &c->w);
		end(c);
		return st;
	case CKPT_PUBLISHING:
		join(c);
		v[0] = c->rank == 0 ? c->w.pub_status : 0;
		st = ckpt_allreduce(c, v, 1, HVD_MAX);
		if (st == HVD_OK)
			st = ckpt_committed(c, &c->w, v[0]);
		end(c);
		return st;
	default:
		return HVD_OK;
	}
}

hvd_status_t hvd_ckpt_fence(hvd_ckpt_t *c)
{
	if (!c)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd_ckpt_fence: ckpt "
				 "is NULL");
	if (c->in_flight != CKPT_WRITING)
		return HVD_OK;
	/* a condition variable, not a spin: the copy needs the core */
	pthread_mutex_lock(&c->mu);
	while (!c->copy_done)
		pthread_cond_wait(&c->copy_cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	return HVD_OK;
}

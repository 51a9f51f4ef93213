/*
 * ckpt_coll.c - the checkpointer's agreement between ranks: which world it
 * runs in, its small blocking allreduce, and the pipelined per-step poll.
 * The bottom of the checkpointer: every other file of ckpt/ agrees through
 * these, and they call nothing of ckpt/ but the object's fields.
 *
 * Agreement goes through libhvd's public collectives (hvd_allreduce on
 * small int64 buffers, hvd_allreduce_async on the engine for the poll).
 * When libhvd is not initialised the checkpointer runs as a world of one
 * (a plain program) and issues none, and it refuses to when HOROVOD_SIZE
 * says there are more ranks: each would write its own checkpoint.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <string.h>

hvd_status_t ckpt_world_init(hvd_ckpt_t *c)
{
	long size;

	if (hvd_is_initialized()) {
		c->rank = hvd_rank();
		c->size = hvd_size();
		c->local_size = hvd_local_size();
		return HVD_OK;
	}
	size = hvd_env_long("HOROVOD_SIZE", 1);
	if (size > 1)
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd_ckpt_open: HOROVOD_SIZE=%ld but "
				 "hvd_init() was not called: call it before "
				 "hvd_ckpt_open() so that the ranks write one "
				 "checkpoint together", size);
	c->rank = 0;
	c->size = 1;
	c->local_size = 1;
	return HVD_OK;
}

hvd_status_t ckpt_allreduce(hvd_ckpt_t *c, int64_t *v, size_t n, hvd_op_t op)
{
	hvd_status_t st;

	if (c->size <= 1)
		return HVD_OK;
	st = hvd_allreduce(HVD_IN_PLACE, v, n, HVD_INT64, op);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	return HVD_OK;
}

/* ------------------------------------------------------- per-step poll */

/* The per-step allreduce (stop flag, progress of the checkpoint in flight)
 * is pipelined where there is more than one rank: posted at the end of a
 * step on the engine (its own communicator: it never mixes with the
 * program's blocking collectives), its answer taken at the start of the
 * next step.  So hvd_ckpt_step() does not hold every rank to the slowest
 * one at every step: jitter of up to a step costs nothing.  What the answer
 * says is as of the post; every other collective entry point drops it
 * first, since a save, wait, close or restore changes what it was about (a
 * stop flag in it is not lost: it stays set and goes out with the next
 * post). */
int ckpt_poll_pipelined(const hvd_ckpt_t *c)
{
	return c->size > 1;
}

hvd_status_t ckpt_poll_post(hvd_ckpt_t *c, const int64_t v[3])
{
	char name[128];
	hvd_status_t st;

	memcpy(c->poll_v, v, sizeof(c->poll_v));
	ckpt_fmt(name, sizeof(name), "hvd.ckpt.%s.poll", c->tag);
	st = hvd_allreduce_async(name, HVD_IN_PLACE, c->poll_v, 3, HVD_INT64,
				 HVD_MAX, NULL, &c->poll_h);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	c->poll_posted = 1;
	return HVD_OK;
}

hvd_status_t ckpt_poll_take(hvd_ckpt_t *c, int64_t v[3])
{
	hvd_status_t st;

	v[0] = 0;
	v[1] = 1;
	v[2] = 0;
	if (!c->poll_posted)
		return HVD_OK;
	c->poll_posted = 0;
	st = hvd_wait(c->poll_h);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "checkpoint: agreement between "
					"ranks failed");
	memcpy(v, c->poll_v, sizeof(c->poll_v));
	return HVD_OK;
}

hvd_status_t ckpt_poll_drop(hvd_ckpt_t *c)
{
	int64_t v[3];

	return ckpt_poll_take(c, v);
}

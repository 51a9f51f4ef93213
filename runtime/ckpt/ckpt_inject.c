/*
 * ckpt_inject.c - fault injection for the crash tests: sleep and/or
 * SIGKILL this process at a named point of the commit protocol.
 *
 *	HVD_CKPT_TEST_CRASH=point[:step[:rank]]  kill at that point
 *	HVD_CKPT_TEST_DELAY_MS=n                 sleep n ms at every point
 *	HVD_CKPT_TEST_CHUNK=bytes                write size (mid-file points)
 *
 * Points: copy (the overlap writer, before its staging copy), begin,
 * mid-file (after each written chunk), written, manifest, renamed, latest,
 * and tidy (rank 0, at the end of a restore, before it removes what
 * crashes left while the other ranks may already be saving).
 * Unset in production: then a point is two tests of zero.
 */
#include "config.h"

#include "ckpt/ckpt_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The store's write hook has no context argument: the one checkpointer
 * that armed it (tests open one at a time). */
static hvd_ckpt_t *hook_ckpt;

static void write_hook(const char *path, uint64_t written)
{
	hvd_ckpt_t *c = hook_ckpt;

	(void)path;
	if (c && written && written >= (uint64_t)ckpt_write_chunk)
		ckpt_inject_point(c, "mid-file",
				  c->in_flight ? c->w.step : -1);
}

void ckpt_inject_point(hvd_ckpt_t *c, const char *point, long step)
{
	if (c->delay_ms > 0) {
		struct timespec ts = { c->delay_ms / 1000,
				       (c->delay_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
	if (!c->crash_point[0] || strcmp(c->crash_point, point) != 0)
		return;
	if ((c->crash_step >= 0 && step >= 0 && step != c->crash_step) ||
	    (c->crash_rank >= 0 && c->crash_rank != c->rank))
		return;
	fprintf(stderr, "hvd: [%d] test: crashing at %s (step %ld)\n",
		c->rank, point, step);
	raise(SIGKILL);
}

void ckpt_inject_setup(hvd_ckpt_t *c)
{
	const char *v = getenv("HVD_CKPT_TEST_CRASH");

	c->crash_step = -1;
	c->crash_rank = -1;
	if (v && *v) {
		char buf[96], *p, *q;

		ckpt_fmt(buf, sizeof(buf), "%s", v);
		p = strchr(buf, ':');
		if (p) {
			*p++ = '\0';
			c->crash_step = strtol(p, &q, 10);
			if (*q == ':')
				c->crash_rank = (int)strtol(q + 1, NULL, 10);
		}
		ckpt_fmt(c->crash_point, sizeof(c->crash_point), "%s", buf);
	}
	c->delay_ms = hvd_env_long("HVD_CKPT_TEST_DELAY_MS", 0);
	if (getenv("HVD_CKPT_TEST_CHUNK"))
		ckpt_write_chunk = hvd_env_size("HVD_CKPT_TEST_CHUNK",
						ckpt_write_chunk);
	if (c->crash_point[0] || getenv("HVD_CKPT_TEST_CHUNK")) {
		hook_ckpt = c;
		ckpt_write_hook = write_hook;
	}
}

void ckpt_inject_release(hvd_ckpt_t *c)
{
	if (hook_ckpt == c) {
		hook_ckpt = NULL;
		ckpt_write_hook = NULL;
	}
}

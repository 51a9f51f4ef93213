/*
 * shm_share.c - how data that peers read is written into the segment:
 * through the caches or streamed to memory, chosen per call by
 * measurement.
 */
#include "config.h"

#include "coll/shm/shm.h"
#include "coll/shm/shm_group.h"

/*
 * Data a peer reads (the copy-in, the reduced slice, the broadcast root's
 * steps) is either written through the caches, so that the peer takes it
 * from this core's cache, or streamed to memory with non-temporal stores,
 * so that the peer reads it from memory.  The first is faster while the
 * two CPUs share a cache at full speed; the second does not depend on
 * cache-to-cache transfers, which slow down 4-5x when the CPUs are far
 * apart (other sockets, or a virtual machine whose vCPUs the host moves:
 * measured on the 2-core build VM, a 96 MiB average 13 ms through the
 * caches in one phase, 58-82 ms in another, where streaming took 18 ms).
 * So, with HOROVOD_SHM_SHARE=auto (the default), each member keeps the
 * recent bandwidth of its large calls in the mode it uses, tries the other
 * mode at the second large call, then after SHARE_PROBE large calls,
 * twice as many after each probe that did not win (up to SHARE_PROBE_MAX),
 * and at once when two calls in a row run at half the usual bandwidth,
 * and switches when that is 25% faster.  The choice is local (the flags
 * and fences are the same either way): members follow the same sequence
 * of calls, so they probe together. */
#define SHARE_MIN (1u << 20) /* calls from this size are measured */
#define SHARE_PROBE 16	   /* calls between probes */
#define SHARE_PROBE_MAX 512 /* ... after probes that did not win */

void shm_share_begin(shm_group_t *g, size_t bytes)
{
	int c = 0;

	g->share_now = g->share_mode;
	g->share_t0 = 0;
	if (g->share_policy >= 0 || bytes < SHARE_MIN)
		return;
	/* sizes compare with sizes: classes of 1, 2, 4, ... 128+ MiB */
	while (c < 7 && bytes >= ((size_t)SHARE_MIN << (c + 1)))
		c++;
	g->share_class = c;
	/* the second large call already tries the other mode */
	++g->share_calls;
	if (g->share_probe || g->share_calls == 2 ||
	    (g->share_next && g->share_calls >= g->share_next))
		g->share_now = !g->share_mode;
	g->share_probe = 0;
	g->share_t0 = hvd_now();
}

void shm_share_end(shm_group_t *g, size_t bytes)
{
	double dt, bw, *cur;

	if (g->share_t0 == 0)
		return;
	dt = hvd_now() - g->share_t0;
	bw = dt > 0 ? (double)bytes / dt / 1e9 : 0;
	cur = &g->share_bw[g->share_mode][g->share_class];
	if (g->share_now != g->share_mode) {
		/* a probe: each one that does not win makes the next wait
		 * twice as long (up to SHARE_PROBE_MAX calls), since a probe
		 * of the worse mode costs a slower call; a change of pace
		 * (below) still looks again at once */
		int win = *cur > 0 && bw > 1.25 * *cur;

		if (g->share_interval < SHARE_PROBE)
			g->share_interval = SHARE_PROBE;
		if (win)
			g->share_interval = SHARE_PROBE;
		else if (*cur > 0 && g->share_interval < SHARE_PROBE_MAX)
			g->share_interval *= 2;
		g->share_next = g->share_calls + g->share_interval;
		g->share_slow = 0;
		g->share_bw[g->share_now][g->share_class] = bw;
		if (win) {
			g->share_mode = g->share_now;
			if (hvd_log_enabled(HVD_LOG_DEBUG))
				hvd_log(HVD_LOG_DEBUG,
					"shared memory: data for peers now "
					"%s (%.2f GB/s against %.2f)",
					g->share_mode ? "streamed" : "cached",
					bw, *cur);
		}
		return;
	}
	/* two calls in a row at half the usual speed: a change of pace,
	 * look again at once */
	g->share_slow = *cur > 0 && bw < 0.5 * *cur ? g->share_slow + 1 : 0;
	if (g->share_slow >= 2) {
		g->share_probe = 1;
		g->share_slow = 0;
	}
	*cur = *cur > 0 ? 0.75 * *cur + 0.25 * bw : bw;
}

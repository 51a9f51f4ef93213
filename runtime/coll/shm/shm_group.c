/*
 * shm_group.c - what shm_group.h declares out of line: the slow part of
 * waiting on a peer's flag, and the error exit that marks the group failed (shm.c's comment, "Waiting").
 */
#include "config.h"

#include "coll/shm/shm_group.h"

#include <stdarg.h>
#include <stdio.h>

hvd_status_t shm_fail(shm_group_t *g, hvd_status_t st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->failmsg, sizeof(g->failmsg), fmt, ap);
	va_end(ap);
	g->failed = st;
	return hvd_error(st, "%s", g->failmsg);
}

/* Member r's pid where this process can watch it, else 0 (a member in
 * another pid namespace: then only its silence counts). */
static pid_t member_pid(const shm_group_t *g, int r)
{
	pid_t pid = (pid_t)__atomic_load_n(&g->ctl[r].pid, __ATOMIC_ACQUIRE);

	return hvd_pid_here(pid, g->ctl[r].pidns);
}

/* A member other than this one that is alive and waiting on the network
 * (shm_away): 1 + its local rank, or 0. */
static int away_member(shm_group_t *g)
{
	for (int r = 0; r < g->n; r++)
		if (r != g->rank &&
		    __atomic_load_n(&g->ctl[r].away, __ATOMIC_ACQUIRE) &&
		    !hvd_pid_dead(member_pid(g, r)))
			return r + 1;
	return 0;
}

/* The slow part of a wait: sleep on the flag's futex (the publisher wakes
 * us), waking every 20 ms to check for a dead or silent peer, and for a
 * failure elsewhere in the job (g->check).  flag belongs to member peer.
 * The time without progress counts from the last tick at which a member
 * was away on the network: the wait may be on one that waits for it. */
hvd_status_t shm_wait_slow(shm_group_t *g, struct shm_flag *f, uint64_t want,
			  int peer)
{
	const struct timespec tick = {0, 20 * 1000 * 1000};
	double t0 = hvd_now(), now;
	hvd_status_t st = HVD_OK;
	uint32_t dead;
	uint64_t v;

	__atomic_add_fetch(&f->sleepers, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		v = __atomic_load_n(&f->seq, __ATOMIC_SEQ_CST);
		if (v >= want)
			break;
		futex(futex_word(f), FUTEX_WAIT, (uint32_t)v, &tick);
		if (__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) >= want)
			break;
		now = hvd_now();
		dead = __atomic_load_n(&g->hdr->dead, __ATOMIC_ACQUIRE);
		if (dead) {
			st = shm_fail(g, HVD_ERR_PEER_FAILED,
				  "shared-memory %s: local rank %u died (seen "
				  "by another member); the group is unusable",
				  g->what, dead - 1);
			break;
		}
		if (hvd_pid_dead(member_pid(g, peer))) {
			__atomic_store_n(&g->hdr->dead, (uint32_t)peer + 1,
					 __ATOMIC_RELEASE);
			st = shm_fail(g, HVD_ERR_PEER_FAILED,
				  "shared-memory %s: local rank %d (pid %lld) "
				  "exited in the middle of the collective; the "
				  "group is unusable",
				  g->what, peer, (long long)g->ctl[peer].pid);
			break;
		}
		if (g->check) {
			char why[480];
			hvd_status_t cs;

			why[0] = '\0';
			cs = g->check(g->check_arg, why, sizeof(why));
			if (cs != HVD_OK) {
				st = shm_fail(g, cs, "shared-memory %s: %s",
					      g->what, why);
				break;
			}
		}
		if (away_member(g))
			t0 = now;
		if (now - t0 > g->timeout) {
			st = shm_fail(g, HVD_ERR_TIMEOUT,
				  "shared-memory %s: local rank %d (pid %lld) "
				  "made no progress for %.0f s "
				  "(HOROVOD_PEER_TIMEOUT); is it stuck or "
				  "calling collectives in a different order?",
				  g->what, peer, (long long)g->ctl[peer].pid,
				  g->timeout);
			break;
		}
	}
	__atomic_sub_fetch(&f->sleepers, 1, __ATOMIC_SEQ_CST);
	/* The acquire that orders our reads of the peer's data: a load of
	 * the flag itself rather than a fence, which ThreadSanitizer does not
	 * model (gcc refuses the fence under -fsanitize=thread); seq only
	 * grows, so this load still sees want. */
	(void)__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
	return st;
}

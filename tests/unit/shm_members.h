/*
 * shm_members.h - what the members of a test group share, for the tests of
 * runtime/coll/shm (test_shm.c, test_shm_segment.c): the shared page the
 * parent reads the members' results from, and the set-up callbacks
 * shm_group_create needs (barrier and broadcast through that page).
 *
 * Header-only, as tap.h, so that each test stays one program of its own.
 */
#ifndef HVD_TEST_SHM_MEMBERS_H
#define HVD_TEST_SHM_MEMBERS_H

#include "comm/comm.h"
#include "coll/shm/shm_group.h"
#include "tap.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAXN 8	/* members of a group, at most */
#define NKINDS 6 /* collectives checked (test_shm.c's kind_names) */

struct shared {
	uint64_t barrier;
	unsigned char bcast[64];
	int n;
	long wrong[MAXN][NKINDS];
	long checked[MAXN][NKINDS];
	int status[MAXN];
	char msg[MAXN][256];
};

static struct shared *sh;

/* The set-up callbacks' argument: the member's place in the group. */
struct member {
	int me, n;
};

static inline hvd_status_t test_barrier(void *arg)
{
	int n = ((struct member *)arg)->n;
	uint64_t t = __atomic_fetch_add(&sh->barrier, 1, __ATOMIC_ACQ_REL);
	uint64_t target = (t / (uint64_t)n + 1) * (uint64_t)n;

	while (__atomic_load_n(&sh->barrier, __ATOMIC_ACQUIRE) < target)
		sched_yield();
	return HVD_OK;
}

static inline hvd_status_t test_bcast(void *arg, void *buf, size_t bytes)
{
	struct member *m = arg;

	if (bytes > sizeof(sh->bcast))
		return hvd_error(HVD_ERR_INVALID_ARG, "test_bcast: %zu bytes",
				 bytes);
	if (m->me == 0)
		memcpy(sh->bcast, buf, bytes);
	test_barrier(arg);
	if (m->me != 0)
		memcpy(buf, sh->bcast, bytes);
	test_barrier(arg);
	return HVD_OK;
}

static inline void note(int me, const char *fmt, ...) HVD_PRINTF(2, 3);

static inline void note(int me, const char *fmt, ...)
{
	va_list ap;

	if (sh->msg[me][0])
		return;
	va_start(ap, fmt);
	vsnprintf(sh->msg[me], sizeof(sh->msg[me]), fmt, ap);
	va_end(ap);
}

/* Map the shared page (skips the whole test without one, or without a
 * writable /dev/shm). */
static inline void shared_map(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		skip_all("cannot map shared memory: %s", strerror(errno));
	if (access("/dev/shm", W_OK) != 0)
		skip_all("/dev/shm is not writable: POSIX shared memory is "
			 "unavailable here");
}

#endif

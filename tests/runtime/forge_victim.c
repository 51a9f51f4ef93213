/*
 * forge_victim.c - the job side of tests/runtime/forge.sh: ranks that run
 * allreduces and check every result while a process outside the job
 * (forge_attacker, as nobody) sends them forged failure notices or data.
 *
 *	forge_victim DIR attacked    rank 0 leaves rank 1's address record
 *	                             (DIR/addr) for the attacker, and with
 *	                             FORGE_GIVE_TAG_KEY=1 the tag key too
 *	                             (DIR/tagkey, as if it had been read off
 *	                             the wire), then DIR/ready; every rank
 *	                             waits for DIR/go and runs allreduces
 *	                             until one of them sees DIR/done (they
 *	                             agree by an allreduce), one rank now and then
 *	                             late (the others then wait long enough
 *	                             to look at notices)
 *	forge_victim DIR kill        the last rank dies in its 50th
 *	                             allreduce; the others report how fast
 *	                             they failed
 *
 * Each rank prints one line "rank R: N allreduces, W wrong, STATUS after
 * T s: message" and exits 0 when nothing went wrong (attacked), or when
 * it failed with HVD_ERR_PEER_FAILED (kill).
 */
#include "net/siphash.h"
#include "runtime/forge_files.h"

#include <hvd.h>
#include <pmix.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int exists(const char *dir, const char *name)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* What an attacker would have to find out by other means: rank 1's
 * record (its UCX address is in it) and, if asked, the tag key. */
static int leak(const char *dir)
{
	pmix_proc_t me, p;
	pmix_value_t *v = NULL;
	char hex[17];

	if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS)
		return -1;
	PMIX_LOAD_PROCID(&p, me.nspace, 1);
	if (PMIx_Get(&p, "hvd.peer", NULL, 0, &v) != PMIX_SUCCESS || !v ||
	    v->type != PMIX_BYTE_OBJECT)
		return -1;
	if (forge_write_file(dir, "addr", v->data.bo.bytes, v->data.bo.size))
		return -1;
	PMIX_VALUE_RELEASE(v);
	v = NULL;
	if (getenv("FORGE_GIVE_TAG_KEY")) {
		static const char what[] = "hvd tag key v1";

		PMIX_LOAD_PROCID(&p, me.nspace, 0);
		if (PMIx_Get(&p, "hvd.key", NULL, 0, &v) != PMIX_SUCCESS ||
		    !v || v->type != PMIX_BYTE_OBJECT ||
		    v->data.bo.size != 16) {
			fprintf(stderr, "forge_victim: no job key in PMIx\n");
			return -1;
		}
		snprintf(hex, sizeof(hex), "%016llx",
			 (unsigned long long)siphash24(
			     (const uint8_t *)v->data.bo.bytes, what,
			     sizeof(what) - 1));
		PMIX_VALUE_RELEASE(v);
		if (forge_write_file(dir, "tagkey", hex, 16))
			return -1;
	}
	PMIx_Finalize(NULL, 0);
	return forge_write_file(dir, "ready", "", 0);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 2 ? argv[1] : NULL;
	int kill_mode = argc > 2 && !strcmp(argv[2], "kill");
	static int32_t a[16], b[16];
	static float x[1 << 16], y[1 << 16];
	hvd_status_t st = HVD_OK;
	long iters = 0, wrong = 0;
	double t0, t_fail = 0;
	int rank, size;

	if (!dir) {
		fprintf(stderr, "usage: forge_victim DIR attacked|kill\n");
		return 2;
	}
	if (hvd_init() != HVD_OK) {
		fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
		return 1;
	}
	rank = hvd_rank();
	size = hvd_size();
	if (!kill_mode) {
		if (rank == 0 && leak(dir) != 0) {
			fprintf(stderr, "forge_victim: cannot leave rank 1's "
					"address for the attacker\n");
			return 1;
		}
		t0 = now();
		while (!exists(dir, "go") && now() - t0 < 60)
			usleep(10000);
	}
	t0 = now();
	for (;;) {
		double t;

		if (kill_mode && iters >= 1000000)
			break;
		if (!kill_mode && iters % 16 == 0) {
			/* every rank stops at the same iteration: one that
			 * saw DIR/done alone would leave the others waiting */
			int32_t seen = exists(dir, "done") || now() - t0 > 60;
			int32_t any = 0;

			st = hvd_allreduce(&seen, &any, 1, HVD_INT32, HVD_MAX);
			if (st != HVD_OK) {
				t_fail = 0;
				break;
			}
			if (any)
				break;
		}
		if (kill_mode && rank == size - 1 && iters == 50) {
			usleep(100000); /* the others wait inside */
			kill(getpid(), SIGKILL);
		}
		/* a straggler now and then: the others wait long enough
		 * (over 50 ms) to look for failures, notices included */
		if (!kill_mode && iters % 32 == 31 &&
		    rank == (int)(iters / 32 % size))
			usleep(60000);
		for (int i = 0; i < 16; i++)
			a[i] = rank * 1000 + i;
		t = now();
		st = hvd_allreduce(a, b, 16, HVD_INT32, HVD_SUM);
		for (int i = 0; st == HVD_OK && i < 16; i++)
			wrong += b[i] != 1000 * size * (size - 1) / 2 + size * i;
		if (st == HVD_OK && iters % 8 == 0) {
			for (int i = 0; i < 1 << 16; i++)
				x[i] = (float)(i % 7 + rank);
			st = hvd_allreduce(x, y, 1 << 16, HVD_FLOAT32,
					   HVD_SUM);
			for (int i = 0; st == HVD_OK && i < 1 << 16; i++)
				wrong += y[i] != (float)(size * (i % 7) +
							 size * (size - 1) / 2);
		}
		if (st != HVD_OK) {
			t_fail = now() - t;
			break;
		}
		iters++;
	}
	printf("rank %d: %ld allreduces, %ld wrong, %s after %.2f s: %s\n", rank,
	       iters, wrong, hvd_status_name(st), st ? t_fail : now() - t0,
	       st ? hvd_last_error() : "");
	fflush(stdout);
	if (st != HVD_OK) {
		/* outlive the launcher's stop so that the others report */
		sleep(2);
		return kill_mode && st == HVD_ERR_PEER_FAILED ? 0 : 1;
	}
	hvd_finalize();
	return wrong || kill_mode ? 1 : 0;
}

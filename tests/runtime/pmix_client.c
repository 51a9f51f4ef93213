/*
 * pmix_client.c - a PMIx client that checks what hvdrun (or any PMIx
 * launcher) serves, for tests/runtime/hvdrun_*.sh.
 *
 *   pmix_client [--lines N] [--exit RANK:CODE]... [--stagger MS]
 *               [--crash RANK:MODE] [--wait-term] [--watch]
 *
 * Without options: PMIx_Init, check rank/size/local info against each other
 * and against this host, Put a value (global and local scope), Commit,
 * Fence with PMIX_COLLECT_DATA, Get and check every peer's values and
 * placement, Fence again, Finalize, print "rank R/N: ok".  Any mismatch is
 * printed ("rank R: ...: expected X, found Y") and the exit code is 1.
 *
 *   --lines N        each rank also prints N numbered stdout lines
 *   --exit R:C       rank R exits with code C after PMIx_Finalize (repeat
 *                    for several ranks)
 *   --stagger MS     rank r exits r*MS milliseconds after PMIx_Finalize
 *   --crash R:MODE   after the first fence, rank R: kill (SIGKILL itself),
 *                    segv, exit (exit 3 without PMIx_Finalize), exit0
 *                    (exit 0 without PMIx_Finalize), abort
 *                    (PMIx_Abort with status 5); the other ranks then wait
 *                    in a fence that cannot complete
 *   --wait-term      after the exchange, print "rank R waiting", then wait
 *                    for SIGTERM/SIGINT; print "rank R got signal S", exit 0
 *   --watch          register for PMIx termination events; when one comes,
 *                    print "rank R: event E for rank X" and exit 7
 *   --pubsub         also check PMIx_Publish/Lookup/Unpublish: rank 0
 *                    publishes, all look up, the last rank's duplicate
 *                    publish fails, rank 0 unpublishes, lookups fail
 */
#define _GNU_SOURCE
#include <pmix.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pmix_proc_t me;
static int failures;
static sigset_t term_set;

#define FAIL(...)                                                              \
	do {                                                                   \
		printf("rank %u: ", me.rank);                                  \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		fflush(stdout);                                                \
		failures++;                                                    \
	} while (0)

static pmix_value_t *get(pmix_rank_t rank, const char *key)
{
	pmix_proc_t p;
	pmix_value_t *v = NULL;
	pmix_status_t rc;

	PMIX_LOAD_PROCID(&p, me.nspace, rank);
	rc = PMIx_Get(&p, key, NULL, 0, &v);
	if (rc != PMIX_SUCCESS) {
		FAIL("PMIx_Get(rank %d, %s): %s",
		     rank == PMIX_RANK_WILDCARD ? -1 : (int)rank, key,
		     PMIx_Error_string(rc));
		return NULL;
	}
	return v;
}

/* Integer value of any unsigned/signed integer PMIx type; -1 on failure. */
static long get_int(pmix_rank_t rank, const char *key)
{
	pmix_value_t *v = get(rank, key);
	long x = -1;

	if (!v)
		return -1;
	switch (v->type) {
	case PMIX_UINT32:
		x = (long)v->data.uint32;
		break;
	case PMIX_UINT16:
		x = v->data.uint16;
		break;
	case PMIX_PROC_RANK:
		x = (long)v->data.rank;
		break;
	case PMIX_INT:
		x = v->data.integer;
		break;
	default:
		FAIL("%s has PMIx type %d, expected an integer", key, v->type);
	}
	PMIX_VALUE_RELEASE(v);
	return x;
}

static char *get_str(pmix_rank_t rank, const char *key)
{
	pmix_value_t *v = get(rank, key);
	char *s = NULL;

	if (!v)
		return NULL;
	if (v->type == PMIX_STRING)
		s = strdup(v->data.string);
	else
		FAIL("%s has PMIx type %d, expected a string", key, v->type);
	PMIX_VALUE_RELEASE(v);
	return s;
}

static void expect_int(const char *what, long found, long expected)
{
	if (found != expected)
		FAIL("%s: expected %ld, found %ld", what, expected, found);
}

static void fence(int collect)
{
	pmix_info_t info;
	pmix_proc_t all;
	bool yes = true;
	pmix_status_t rc;

	PMIX_LOAD_PROCID(&all, me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	rc = PMIx_Fence(&all, 1, collect ? &info : NULL, collect ? 1 : 0);
	if (rc != PMIX_SUCCESS)
		FAIL("PMIx_Fence: %s", PMIx_Error_string(rc));
	PMIX_INFO_DESTRUCT(&info);
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
		     pmix_info_t info[], size_t ninfo, pmix_info_t results[],
		     size_t nresults,
		     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	long who = source ? (long)source->rank : -1;

	for (size_t i = 0; i < ninfo; i++)
		if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC))
			who = (long)info[i].value.data.proc->rank;
	printf("rank %u: event %s for rank %ld\n", me.rank,
	       PMIx_Error_string(status), who);
	fflush(stdout);
	_exit(7);
}

/* Publish/Lookup/Unpublish through the server (MPI_Publish_name's path). */
static void pubsub(long size)
{
	pmix_info_t info;
	pmix_pdata_t pd;
	pmix_status_t rc;
	char val[64];

	snprintf(val, sizeof(val), "published by rank %u", me.rank);
	if (me.rank == 0) {
		PMIX_INFO_LOAD(&info, "hvdtest.pub", val, PMIX_STRING);
		rc = PMIx_Publish(&info, 1);
		if (rc != PMIX_SUCCESS)
			FAIL("PMIx_Publish: %s", PMIx_Error_string(rc));
		PMIX_INFO_DESTRUCT(&info);
	}
	fence(0);
	PMIX_PDATA_CONSTRUCT(&pd);
	PMIX_LOAD_KEY(pd.key, "hvdtest.pub");
	rc = PMIx_Lookup(&pd, 1, NULL, 0);
	if (rc != PMIX_SUCCESS)
		FAIL("PMIx_Lookup: %s", PMIx_Error_string(rc));
	else if (pd.value.type != PMIX_STRING ||
		 strcmp(pd.value.data.string, "published by rank 0") ||
		 pd.proc.rank != 0)
		FAIL("PMIx_Lookup: expected 'published by rank 0' from rank "
		     "0, found type %d from rank %u",
		     pd.value.type, pd.proc.rank);
	PMIX_PDATA_DESTRUCT(&pd);
	fence(0);
	if (me.rank == size - 1 && size > 1) {
		PMIX_INFO_LOAD(&info, "hvdtest.pub", val, PMIX_STRING);
		rc = PMIx_Publish(&info, 1);
		if (rc != PMIX_ERR_DUPLICATE_KEY)
			FAIL("publishing a published key: expected %s, "
			     "found %s",
			     PMIx_Error_string(PMIX_ERR_DUPLICATE_KEY),
			     PMIx_Error_string(rc));
		PMIX_INFO_DESTRUCT(&info);
	}
	/* The duplicate must be refused before rank 0 unpublishes: without
	 * this fence the server may serve the unpublish first, and then the
	 * "duplicate" is a fresh publish that the last lookup finds. */
	fence(0);
	if (me.rank == 0) {
		rc = PMIx_Unpublish(NULL, NULL, 0);
		if (rc != PMIX_SUCCESS)
			FAIL("PMIx_Unpublish: %s", PMIx_Error_string(rc));
	}
	fence(0);
	PMIX_PDATA_CONSTRUCT(&pd);
	PMIX_LOAD_KEY(pd.key, "hvdtest.pub");
	rc = PMIx_Lookup(&pd, 1, NULL, 0);
	if (rc != PMIX_ERR_NOT_FOUND)
		FAIL("PMIx_Lookup after Unpublish: expected %s, found %s",
		     PMIx_Error_string(PMIX_ERR_NOT_FOUND),
		     PMIx_Error_string(rc));
	PMIX_PDATA_DESTRUCT(&pd);
	fence(0);
}


int main(int argc, char **argv)
{
	int lines = 0, crash_rank = -1, stagger = 0, code = 0;
	int wait_term = 0, watch = 0, do_pubsub = 0;
	char crash_mode[16] = "";
	char host[256], key[64], want[128], *s;
	long size, r;
	pmix_status_t rc;
	pmix_value_t val;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lines") && i + 1 < argc) {
			lines = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--exit") && i + 1 < argc) {
			int er = -1, ec = 0;

			sscanf(argv[++i], "%d:%d", &er, &ec);
			if (PMIx_Initialized() || er < 0) {
				fprintf(stderr, "pmix_client: bad --exit\n");
				return 2;
			}
			if (er == atoi(getenv("PMIX_RANK") ? getenv("PMIX_RANK")
							   : "-1"))
				code = ec;
		} else if (!strcmp(argv[i], "--stagger") && i + 1 < argc) {
			stagger = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--crash") && i + 1 < argc) {
			sscanf(argv[++i], "%d:%15s", &crash_rank, crash_mode);
		} else if (!strcmp(argv[i], "--wait-term")) {
			wait_term = 1;
		} else if (!strcmp(argv[i], "--watch")) {
			watch = 1;
		} else if (!strcmp(argv[i], "--pubsub")) {
			do_pubsub = 1;
		} else {
			fprintf(stderr, "pmix_client: unknown argument %s\n",
				argv[i]);
			return 2;
		}
	}
	if (wait_term) {
		/* blocked before PMIx starts its threads, so that they
		 * inherit the mask, and taken with sigwait: a handler could
		 * run on a PMIx thread while the main thread sleeps on */
		sigemptyset(&term_set);
		sigaddset(&term_set, SIGTERM);
		sigaddset(&term_set, SIGINT);
		pthread_sigmask(SIG_BLOCK, &term_set, NULL);
	}

	rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		printf("pmix_client: PMIx_Init: %s (run me under hvdrun)\n",
		       PMIx_Error_string(rc));
		return 1;
	}
	if (watch) {
		pmix_status_t codes[] = {PMIX_ERR_PROC_TERM_WO_SYNC,
					 PMIX_EVENT_PROC_TERMINATED,
					 PMIX_ERR_PROC_ABORTED_BY_SIG};

		rc = PMIx_Register_event_handler(codes, 3, NULL, 0, on_event,
						 NULL, NULL);
		if (rc < 0)
			FAIL("PMIx_Register_event_handler: %s",
			     PMIx_Error_string(rc));
	}

	/* Job and own placement. */
	size = get_int(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
	expect_int("PMIX_UNIV_SIZE",
		   get_int(PMIX_RANK_WILDCARD, PMIX_UNIV_SIZE), size);
	expect_int("PMIX_LOCAL_SIZE",
		   get_int(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE), size);
	expect_int("PMIX_NUM_NODES",
		   get_int(PMIX_RANK_WILDCARD, PMIX_NUM_NODES), 1);
	expect_int("PMIX_LOCAL_RANK", get_int(me.rank, PMIX_LOCAL_RANK),
		   me.rank);
	expect_int("PMIX_NODE_RANK", get_int(me.rank, PMIX_NODE_RANK), me.rank);
	expect_int("PMIX_NODEID", get_int(me.rank, PMIX_NODEID), 0);
	expect_int("PMIX_APPNUM", get_int(me.rank, PMIX_APPNUM), 0);
	if (size < 1 || me.rank >= (pmix_rank_t)size)
		FAIL("rank %u outside a job of size %ld", me.rank, size);
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	s = get_str(me.rank, PMIX_HOSTNAME);
	if (s && strcmp(s, host))
		FAIL("PMIX_HOSTNAME: expected %s, found %s", host, s);
	free(s);
	s = get_str(PMIX_RANK_WILDCARD, PMIX_LOCAL_PEERS);
	if (s) {
		char peers[65536];
		size_t len = 0;

		peers[0] = '\0';
		for (r = 0; r < size && len < sizeof(peers) - 16; r++)
			len +=
			    (size_t)snprintf(peers + len, sizeof(peers) - len,
					     r ? ",%ld" : "%ld", r);
		if (strcmp(s, peers))
			FAIL("PMIX_LOCAL_PEERS: expected %s, found %s", peers,
			     s);
		free(s);
	}

	/* Exchange: one global and one local value per rank. */
	snprintf(want, sizeof(want), "global value of rank %u", me.rank);
	PMIX_VALUE_LOAD(&val, want, PMIX_STRING);
	rc = PMIx_Put(PMIX_GLOBAL, "hvdtest.g", &val);
	PMIX_VALUE_DESTRUCT(&val);
	if (rc != PMIX_SUCCESS)
		FAIL("PMIx_Put: %s", PMIx_Error_string(rc));
	snprintf(want, sizeof(want), "local value of rank %u", me.rank);
	PMIX_VALUE_LOAD(&val, want, PMIX_STRING);
	rc = PMIx_Put(PMIX_LOCAL, "hvdtest.l", &val);
	PMIX_VALUE_DESTRUCT(&val);
	if (rc != PMIX_SUCCESS)
		FAIL("PMIx_Put: %s", PMIx_Error_string(rc));
	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS)
		FAIL("PMIx_Commit: %s", PMIx_Error_string(rc));
	fence(1);

	if ((long)me.rank == crash_rank) {
		printf("rank %u crashing (%s)\n", me.rank, crash_mode);
		fflush(stdout);
		if (!strcmp(crash_mode, "kill"))
			kill(getpid(), SIGKILL);
		else if (!strcmp(crash_mode, "segv")) {
			/* die by the signal even where a sanitizer has
			 * its own SIGSEGV handler (which reports and exits
			 * 1) */
			signal(SIGSEGV, SIG_DFL);
			raise(SIGSEGV);
		}
		else if (!strcmp(crash_mode, "exit"))
			exit(3);
		else if (!strcmp(crash_mode, "exit0"))
			exit(0);
		else if (!strcmp(crash_mode, "abort"))
			PMIx_Abort(5, "pmix_client was asked to abort", NULL,
				   0);
		pause();
	}
	if (crash_rank >= 0) {
		/* Survivors block here until hvdrun acts. */
		/* PMIx 4.2 completes a local fence without a participant that
		 * died (PMIX_ERR_PARTIAL_SUCCESS, sometimes PMIX_SUCCESS),
		 * so a fence is no barrier here: wait for hvdrun to act
		 * (event with --watch, else SIGTERM). */
		rc = PMIx_Fence(NULL, 0, NULL, 0);
		printf("rank %u: fence after the crash of rank %d: %s\n",
		       me.rank, crash_rank, PMIx_Error_string(rc));
		fflush(stdout);
		for (;;)
			pause();
	}

	for (r = 0; r < size; r++) {
		snprintf(key, sizeof(key), "rank %ld PMIX_LOCAL_RANK", r);
		expect_int(key, get_int((pmix_rank_t)r, PMIX_LOCAL_RANK), r);
		snprintf(key, sizeof(key), "rank %ld PMIX_NODEID", r);
		expect_int(key, get_int((pmix_rank_t)r, PMIX_NODEID), 0);
		s = get_str((pmix_rank_t)r, "hvdtest.g");
		snprintf(want, sizeof(want), "global value of rank %ld", r);
		if (s && strcmp(s, want))
			FAIL("hvdtest.g of rank %ld: expected '%s', found "
			     "'%s'",
			     r, want, s);
		free(s);
		s = get_str((pmix_rank_t)r, "hvdtest.l");
		snprintf(want, sizeof(want), "local value of rank %ld", r);
		if (s && strcmp(s, want))
			FAIL("hvdtest.l of rank %ld: expected '%s', found "
			     "'%s'",
			     r, want, s);
		free(s);
	}
	fence(0);
	if (do_pubsub)
		pubsub(size);

	for (int i = 0; i < lines; i++)
		printf("rank %u line %d of %d: the quick brown fox jumps over "
		       "the lazy dog\n",
		       me.rank, i, lines);

	if (wait_term) {
		printf("rank %u waiting\n", me.rank);
		fflush(stdout);
		int sig = 0;

		while (sigwait(&term_set, &sig) != 0)
			;
		/* out before PMIx_Finalize: on a loaded machine hvdrun may
		 * SIGKILL a rank still finalizing after --grace, and a line
		 * left in the stdio buffer would be lost with it */
		printf("rank %u got signal %d\n", me.rank, sig);
		fflush(stdout);
		PMIx_Finalize(NULL, 0);
		return 0;
	}

	rc = PMIx_Finalize(NULL, 0);
	if (rc != PMIX_SUCCESS)
		FAIL("PMIx_Finalize: %s", PMIx_Error_string(rc));
	if (failures)
		return 1;
	printf("rank %u/%ld: ok\n", me.rank, size);
	if (stagger)
		usleep((useconds_t)stagger * 1000 * me.rank);
	return code;
}

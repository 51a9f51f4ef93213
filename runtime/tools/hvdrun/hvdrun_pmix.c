/*
 * hvdrun_pmix.c - the PMIx server side of hvdrun.
 *
 * Only the public PMIx server API (pmix_server.h) is used, so that hvdrun
 * works with any PMIx >= 4 build.  All ranks are local, which keeps the host
 * module small:
 *   - fence_nb: every participant is on this server, so by the time the
 *     library calls us all contributions are in; hand the collected blob
 *     straight back (PMIx 4.2 usually completes local-only fences itself,
 *     see pmix_server_fence_localonly_opt, but the upcall must be right when
 *     it is used).
 *   - direct_modex: there is no other server to ask; answer "not found".
 *   - client_connected/finalized/abort: record the fact for the main thread
 *     (the exit policy depends on whether a rank finalized) and wake it.
 * Upcalls run on the PMIx progress thread: they never block and never call
 * blocking PMIx functions; the main thread acts on what they record.
 *
 * Job registration gives clients every key a PMIx client library or MPI
 * expects to Get: job-level sizes and maps, the node (hostname, node id,
 * local peers) and one info array per rank (local/node/app rank, node id,
 * hostname), following the PMIx 4 conventions for registered job data.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>
#include <pmix_server.h>

#include "tools/hvdrun/hvdrun.h"

static struct hvdrun_shared *shared;
static int verbosity;

/* Blocking wait for a PMIx operation that completes through a callback. */
struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	pmix_status_t status;
};

#define WAITER_INIT                                                            \
	{                                                                      \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,        \
		    PMIX_SUCCESS                                               \
	}

static void waiter_cb(pmix_status_t status, void *cbdata)
{
	struct waiter *w = cbdata;

	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->done = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* rc is what the non-blocking call returned. */
static pmix_status_t waiter_wait(struct waiter *w, pmix_status_t rc)
{
	if (rc == PMIX_OPERATION_SUCCEEDED)
		return PMIX_SUCCESS;
	if (rc != PMIX_SUCCESS)
		return rc;
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return w->status;
}

static void wake_main(void)
{
	char c = 1;
	ssize_t rc;

	/* The pipe is non-blocking: if it is full, the main loop is awake
	 * anyway. */
	rc = write(shared->wake_fd, &c, 1);
	(void)rc;
}

static int rank_ok(const pmix_proc_t *proc)
{
	return proc && proc->rank < (pmix_rank_t)shared->np;
}

/* ---- the host module */

static pmix_status_t up_connected(const pmix_proc_t *proc, void *server_object,
				  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	if (rank_ok(proc)) {
		pthread_mutex_lock(&shared->lock);
		shared->connected[proc->rank] = 1;
		pthread_mutex_unlock(&shared->lock);
		if (verbosity)
			fprintf(stderr, "hvdrun: rank %u connected\n",
				proc->rank);
	}
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, cbdata);
	return PMIX_SUCCESS;
}

static pmix_status_t up_finalized(const pmix_proc_t *proc, void *server_object,
				  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	if (rank_ok(proc)) {
		pthread_mutex_lock(&shared->lock);
		shared->finalized[proc->rank] = 1;
		pthread_mutex_unlock(&shared->lock);
		if (verbosity)
			fprintf(stderr, "hvdrun: rank %u finalized\n",
				proc->rank);
	}
	/* The client blocks in PMIx_Finalize until this is called. */
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, cbdata);
	return PMIX_SUCCESS;
}

static pmix_status_t up_abort(const pmix_proc_t *proc, void *server_object,
			      int status, const char msg[], pmix_proc_t procs[],
			      size_t nprocs, pmix_op_cbfunc_t cbfunc,
			      void *cbdata)
{
	pthread_mutex_lock(&shared->lock);
	if (shared->abort_rank < 0 && rank_ok(proc)) {
		shared->abort_rank = (int)proc->rank;
		shared->abort_status = status;
		snprintf(shared->abort_msg, sizeof(shared->abort_msg), "%s",
			 msg ? msg : "");
	}
	pthread_mutex_unlock(&shared->lock);
	wake_main();
	/* Release the caller; the main thread stops the job (all of it,
	 * whatever procs[] says: a partial abort is not supported). */
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, cbdata);
	return PMIX_SUCCESS;
}

static pmix_status_t up_fence_nb(const pmix_proc_t procs[], size_t nprocs,
				 const pmix_info_t info[], size_t ninfo,
				 char *data, size_t ndata,
				 pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	char *copy;

	pthread_mutex_lock(&shared->lock);
	shared->fences++;
	pthread_mutex_unlock(&shared->lock);
	if (verbosity > 1)
		fprintf(stderr, "hvdrun: fence of %zu procs, %zu bytes\n",
			nprocs, ndata);
	/* Single server: the local contributions are the whole result, with
	 * or without PMIX_COLLECT_DATA.  The library may thread-shift the
	 * callback, so hand it a copy that it releases when done. */
	copy = ndata ? malloc(ndata) : NULL;
	if (ndata && !copy) {
		if (cbfunc)
			cbfunc(PMIX_ERR_NOMEM, NULL, 0, cbdata, NULL, NULL);
		return PMIX_SUCCESS;
	}
	if (ndata)
		memcpy(copy, data, ndata);
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, copy, ndata, cbdata, free, copy);
	else
		free(copy);
	return PMIX_SUCCESS;
}

static pmix_status_t up_dmodex(const pmix_proc_t *proc,
			       const pmix_info_t info[], size_t ninfo,
			       pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	/* Every proc is local, so the library already has all there is. */
	if (cbfunc)
		cbfunc(PMIX_ERR_NOT_FOUND, NULL, 0, cbdata, NULL, NULL);
	return PMIX_SUCCESS;
}

static pmix_server_module_t module = {
    .client_connected = up_connected,
    .client_finalized = up_finalized,
    .abort = up_abort,
    .fence_nb = up_fence_nb,
    .direct_modex = up_dmodex,
};

/* ---- job registration */

#define CHECK(call)                                                            \
	do {                                                                   \
		pmix_status_t rc_ = (call);                                    \
		if (rc_ != PMIX_SUCCESS) {                                     \
			fprintf(stderr, "hvdrun: %s failed: %s (%s:%d)\n",     \
				#call, PMIx_Error_string(rc_), __FILE__,       \
				__LINE__);                                     \
			goto err;                                              \
		}                                                              \
	} while (0)

/* Append a pmix_data_array_t of the infos on `sub` to `list` under key. */
static pmix_status_t add_array(void *list, const char *key, void *sub)
{
	pmix_data_array_t da;
	pmix_status_t rc;

	memset(&da, 0, sizeof(da));
	rc = PMIx_Info_list_convert(sub, &da);
	if (rc != PMIX_SUCCESS)
		return rc;
	rc = PMIx_Info_list_add(list, key, &da, PMIX_DATA_ARRAY);
	PMIx_Data_array_destruct(&da);
	return rc;
}

static char *rank_list(int np)
{
	size_t cap = (size_t)np * 6 + 16, len = 0;
	char *s = malloc(cap);
	int r;

	if (!s)
		return NULL;
	s[0] = '\0';
	for (r = 0; r < np; r++)
		len +=
		    (size_t)snprintf(s + len, cap - len, r ? ",%d" : "%d", r);
	return s;
}

static int register_job(struct hvdrun_server *srv, int np)
{
	char host[256], cwd[4096], nsdir[4096 + 256 + 2];
	char *peers = NULL, *nodemap = NULL, *procmap = NULL;
	void *job = NULL, *sub = NULL;
	pmix_data_array_t da;
	pmix_info_t *info;
	size_t ninfo;
	uint32_t one = 1, zero32 = 0, size = (uint32_t)np;
	pmix_rank_t r0 = 0;
	bool no = false;
	int r, ret = -1;
	struct waiter w = WAITER_INIT;

	memset(&da, 0, sizeof(da));
	if (gethostname(host, sizeof(host)))
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	snprintf(nsdir, sizeof(nsdir), "%s/%s", srv->tmpdir, srv->nspace);

	peers = rank_list(np);
	if (!peers)
		goto err;
	CHECK(PMIx_generate_regex(host, &nodemap));
	CHECK(PMIx_generate_ppn(peers, &procmap));

	job = PMIx_Info_list_start();
	if (!job)
		goto err;
	/* Job level. */
	CHECK(PMIx_Info_list_add(job, PMIX_JOBID, srv->nspace, PMIX_STRING));
	CHECK(PMIx_Info_list_add(job, PMIX_UNIV_SIZE, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(job, PMIX_JOB_SIZE, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(job, PMIX_MAX_PROCS, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(job, PMIX_SPAWNED, &no, PMIX_BOOL));
	CHECK(PMIx_Info_list_add(job, PMIX_JOB_NUM_APPS, &one, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(job, PMIX_NUM_NODES, &one, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(job, PMIX_NODE_MAP, nodemap, PMIX_REGEX));
	CHECK(PMIx_Info_list_add(job, PMIX_PROC_MAP, procmap, PMIX_REGEX));
	CHECK(PMIx_Info_list_add(job, PMIX_LOCAL_SIZE, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(job, PMIX_LOCAL_PEERS, peers, PMIX_STRING));
	CHECK(PMIx_Info_list_add(job, PMIX_LOCALLDR, &r0, PMIX_PROC_RANK));
	CHECK(PMIx_Info_list_add(job, PMIX_TMPDIR, srv->tmpdir, PMIX_STRING));
	CHECK(PMIx_Info_list_add(job, PMIX_NSDIR, nsdir, PMIX_STRING));

	/* The one app. */
	sub = PMIx_Info_list_start();
	CHECK(PMIx_Info_list_add(sub, PMIX_APPNUM, &zero32, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(sub, PMIX_APP_SIZE, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(sub, PMIX_APPLDR, &r0, PMIX_PROC_RANK));
	CHECK(PMIx_Info_list_add(sub, PMIX_WDIR, cwd, PMIX_STRING));
	CHECK(add_array(job, PMIX_APP_INFO_ARRAY, sub));
	PMIx_Info_list_release(sub);

	/* The one node. */
	sub = PMIx_Info_list_start();
	CHECK(PMIx_Info_list_add(sub, PMIX_NODEID, &zero32, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(sub, PMIX_HOSTNAME, host, PMIX_STRING));
	CHECK(PMIx_Info_list_add(sub, PMIX_NODE_SIZE, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(sub, PMIX_LOCAL_SIZE, &size, PMIX_UINT32));
	CHECK(PMIx_Info_list_add(sub, PMIX_LOCAL_PEERS, peers, PMIX_STRING));
	CHECK(PMIx_Info_list_add(sub, PMIX_LOCALLDR, &r0, PMIX_PROC_RANK));
	CHECK(add_array(job, PMIX_NODE_INFO_ARRAY, sub));
	PMIx_Info_list_release(sub);

	/* One array per rank; PMIX_RANK must come first. */
	for (r = 0; r < np; r++) {
		pmix_rank_t rank = (pmix_rank_t)r;
		uint16_t lr = (uint16_t)r;

		sub = PMIx_Info_list_start();
		CHECK(
		    PMIx_Info_list_add(sub, PMIX_RANK, &rank, PMIX_PROC_RANK));
		CHECK(PMIx_Info_list_add(sub, PMIX_GLOBAL_RANK, &rank,
					 PMIX_PROC_RANK));
		CHECK(PMIx_Info_list_add(sub, PMIX_APP_RANK, &rank,
					 PMIX_PROC_RANK));
		CHECK(
		    PMIx_Info_list_add(sub, PMIX_APPNUM, &zero32, PMIX_UINT32));
		CHECK(
		    PMIx_Info_list_add(sub, PMIX_LOCAL_RANK, &lr, PMIX_UINT16));
		CHECK(
		    PMIx_Info_list_add(sub, PMIX_NODE_RANK, &lr, PMIX_UINT16));
		CHECK(
		    PMIx_Info_list_add(sub, PMIX_NODEID, &zero32, PMIX_UINT32));
		CHECK(
		    PMIx_Info_list_add(sub, PMIX_HOSTNAME, host, PMIX_STRING));
		CHECK(PMIx_Info_list_add(sub, PMIX_REINCARNATION, &zero32,
					 PMIX_UINT32));
		CHECK(add_array(job, PMIX_PROC_INFO_ARRAY, sub));
		PMIx_Info_list_release(sub);
	}
	sub = NULL;

	CHECK(PMIx_Info_list_convert(job, &da));
	info = da.array;
	ninfo = da.size;
	CHECK(
	    waiter_wait(&w, PMIx_server_register_nspace(srv->nspace, np, info,
							ninfo, waiter_cb, &w)));
	srv->registered = 1;
	ret = 0;
err:
	if (da.array)
		PMIx_Data_array_destruct(&da);
	if (sub)
		PMIx_Info_list_release(sub);
	if (job)
		PMIx_Info_list_release(job);
	free(nodemap);
	free(procmap);
	free(peers);
	return ret;
}

int hvdrun_pmix_init(struct hvdrun_server *srv, struct hvdrun_shared *sh,
		     int np, int verbose)
{
	pmix_info_t info[4];
	pmix_rank_t srank = 0;
	char srvns[64];
	bool no = false;
	struct waiter w = WAITER_INIT;

	shared = sh;
	verbosity = verbose;
	snprintf(srv->nspace, sizeof(srv->nspace), "hvdrun.%ld",
		 (long)getpid());
	snprintf(srvns, sizeof(srvns), "hvdrun-server.%ld", (long)getpid());

	PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, srv->tmpdir, PMIX_STRING);
	PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, srv->tmpdir, PMIX_STRING);
	PMIX_INFO_LOAD(&info[2], PMIX_SERVER_NSPACE, srvns, PMIX_STRING);
	PMIX_INFO_LOAD(&info[3], PMIX_SERVER_RANK, &srank, PMIX_PROC_RANK);
	(void)no;
	hvdrun_pubsub_install(&module);
	CHECK(PMIx_server_init(&module, info, 4));
	srv->initialized = 1;

	if (register_job(srv, np))
		goto err;
	CHECK(waiter_wait(&w, PMIx_server_setup_local_support(
				  srv->nspace, NULL, 0, waiter_cb, &w)));
	return 0;
err:
	return -1;
}

int hvdrun_pmix_setup_rank(struct hvdrun_server *srv, int rank, char ***env)
{
	pmix_proc_t proc;
	struct waiter w = WAITER_INIT;

	PMIX_LOAD_PROCID(&proc, srv->nspace, (pmix_rank_t)rank);
	/* Register before the fork so a fast client never connects to a
	 * server that does not know it yet. */
	CHECK(waiter_wait(&w,
			  PMIx_server_register_client(&proc, getuid(), getgid(),
						      NULL, waiter_cb, &w)));
	CHECK(PMIx_server_setup_fork(&proc, env));
	return 0;
err:
	return -1;
}

/* Notification data lives until PMIx says it is done with it. */
struct notice {
	pmix_info_t info[3];
	pmix_proc_t proc;
};

static void notice_done(pmix_status_t status, void *cbdata)
{
	struct notice *n = cbdata;

	PMIX_INFO_DESTRUCT(&n->info[0]);
	PMIX_INFO_DESTRUCT(&n->info[1]);
	PMIX_INFO_DESTRUCT(&n->info[2]);
	free(n);
}

void hvdrun_pmix_notify_term(struct hvdrun_server *srv, int rank, int exit_code,
			     int signo)
{
	struct notice *n = calloc(1, sizeof(*n));
	pmix_status_t rc;
	bool yes = true;

	if (!n)
		return;
	PMIX_LOAD_PROCID(&n->proc, srv->nspace, (pmix_rank_t)rank);
	PMIX_INFO_LOAD(&n->info[0], PMIX_EVENT_AFFECTED_PROC, &n->proc,
		       PMIX_PROC);
	PMIX_INFO_LOAD(&n->info[1], PMIX_EXIT_CODE, &exit_code, PMIX_INT);
	/* We are about to stop the whole job. */
	PMIX_INFO_LOAD(&n->info[2], PMIX_EVENT_TERMINATE_JOB, &yes, PMIX_BOOL);
	(void)signo;
	/* The source is the dead rank, so that PMIX_RANGE_NAMESPACE means
	 * its job: every surviving rank. */
	rc =
	    PMIx_Notify_event(PMIX_ERR_PROC_TERM_WO_SYNC, &n->proc,
			      PMIX_RANGE_NAMESPACE, n->info, 3, notice_done, n);
	if (rc == PMIX_OPERATION_SUCCEEDED) {
		notice_done(PMIX_SUCCESS, n);
	} else if (rc != PMIX_SUCCESS) {
		fprintf(stderr,
			"hvdrun: cannot notify the ranks that rank "
			"%d terminated: %s\n",
			rank, PMIx_Error_string(rc));
		notice_done(rc, n);
	}
}

void hvdrun_pmix_fini(struct hvdrun_server *srv)
{
	if (srv->registered) {
		struct waiter w = WAITER_INIT;

		PMIx_server_deregister_nspace(srv->nspace, waiter_cb, &w);
		waiter_wait(&w, PMIX_SUCCESS);
		srv->registered = 0;
	}
	if (srv->initialized) {
		PMIx_server_finalize();
		srv->initialized = 0;
	}
}

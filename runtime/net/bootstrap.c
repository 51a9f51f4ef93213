/*
 * bootstrap.c - PMIx client: ranks, the address exchange and process-death
 * events.
 *
 * Every launcher we support (srun --mpi=pmix, hvdrun, mpirun/prterun) is a
 * PMIx server, so PMIx is the one source of truth for rank and size.  The
 * node-local picture is NOT taken from launcher-specific keys: every rank
 * publishes one blob {node key, PMIx local rank, pid, UCX worker address},
 * we fence with PMIX_COLLECT_DATA, read every peer's blob and compute node
 * ids, local and cross ranks with the same pure function everywhere
 * (bootstrap_layout), so that the answer is the same under every launcher.
 *
 * The node key is "hostname#nodeid": under the Slurm mini-cluster several
 * slurmd run on one host with distinct PMIx node ids, and they must count
 * as distinct nodes (they have distinct private /tmp, hence distinct PMIx
 * rendezvous directories).
 *
 * Rank 0 also Puts the job's key (net/auth.h) before the same fence, and
 * every rank Gets it from rank 0 after it: the PMIx server gives a job's
 * data only to the job's processes, and the exchange costs no extra
 * round.
 */
#include "config.h"

#include "net/auth.h"
#include "net/bootstrap.h"

#include <pmix.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOB_KEY "hvd.peer"
#define JOB_KEY "hvd.key"

static pmix_proc_t myproc;
static int pmix_up;
/*
 * PMIx calls on_registered and on_event on its progress thread.  ev_lock
 * orders them against init and finalize: finalize clears fail_cb under
 * it, so no failure is delivered into tables the layers above have
 * already freed (the handler stays registered until the deregistration
 * that follows), and it waits for the registration's answer so that the
 * handler it deregisters is known.
 */
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ev_cond = PTHREAD_COND_INITIALIZER;
enum { EV_NONE, EV_PENDING, EV_REGISTERED, EV_REFUSED };
static int ev_state;
static size_t evhdlr_id;
static bootstrap_fail_fn fail_cb;
static int world_size;
/* No PMIx server and no sign of a parallel launch: one rank on its own
 * (as Horovod runs without horovodrun). */
static int singleton;

#define PMIX_ERRMSG(rc) PMIx_Error_string(rc)

/* ------------------------------------------------------------ events */

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *src,
		     pmix_info_t info[], size_t ninfo, pmix_info_t *results,
		     size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
		     void *cbdata)
{
	const pmix_proc_t *who = src;
	char why[160];
	int exit_code = 0, have_code = 0;

	for (size_t i = 0; i < ninfo; i++) {
		if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) &&
		    info[i].value.type == PMIX_PROC)
			who = info[i].value.data.proc;
		else if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) &&
			 info[i].value.type == PMIX_INT) {
			exit_code = info[i].value.data.integer;
			have_code = 1;
		}
	}
	pthread_mutex_lock(&ev_lock);
	if (!fail_cb) {
		/* finalizing: the tables a failure is recorded in are gone */
	} else if (status == PMIX_ERR_LOST_CONNECTION ||
		   status == PMIX_ERR_LOST_CONNECTION_TO_SERVER) {
		fail_cb(-1, "lost the connection to the PMIx server "
			    "(the launcher died)");
	} else if (who && PMIX_CHECK_NSPACE(who->nspace, myproc.nspace) &&
		   who->rank != myproc.rank &&
		   who->rank < (pmix_rank_t)world_size) {
		if (src && src->rank != who->rank &&
		    PMIX_CHECK_NSPACE(src->nspace, myproc.nspace))
			snprintf(why, sizeof(why),
				 "rank %u saw its process gone (PMIx event)",
				 src->rank);
		else if (have_code)
			snprintf(why, sizeof(why),
				 "PMIx reports it terminated (%s, exit code "
				 "%d)",
				 PMIx_Error_string(status), exit_code);
		else
			snprintf(why, sizeof(why),
				 "PMIx reports it terminated (%s)",
				 PMIx_Error_string(status));
		fail_cb((int)who->rank, why);
	}
	pthread_mutex_unlock(&ev_lock);
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, NULL, 0, NULL, NULL, cbdata);
}

static void on_registered(pmix_status_t status, size_t refid, void *cbdata)
{
	(void)cbdata;
	pthread_mutex_lock(&ev_lock);
	evhdlr_id = refid;
	ev_state = status == PMIX_SUCCESS ? EV_REGISTERED : EV_REFUSED;
	pthread_cond_broadcast(&ev_cond);
	pthread_mutex_unlock(&ev_lock);
}

/* The registration's answer, for at most 10 s (it is a local round trip
 * to the PMIx server; a server that does not answer leaves the handler
 * unknown, and finalize then has nothing to deregister). */
static int wait_registered(void)
{
	struct timespec until;
	int st;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&ev_lock);
	while (ev_state == EV_PENDING &&
	       pthread_cond_timedwait(&ev_cond, &ev_lock, &until) == 0)
		;
	st = ev_state;
	pthread_mutex_unlock(&ev_lock);
	return st;
}

/* -------------------------------------------------------------- init */

static hvd_status_t check_env_rank(const char *name, long pmix_value,
				   const struct hvd_world *w)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return HVD_OK;
	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || *end || x != pmix_value)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: %s=%s but PMIx says this process is "
				 "rank %d of %d (namespace %s): the variable "
				 "was set for another launch; unset "
				 "HOROVOD_RANK/HOROVOD_SIZE or start the "
				 "program with the launcher that set them",
				 name, v, w->rank, w->size, w->nspace);
	return HVD_OK;
}

/* A launcher started several tasks (so a singleton would silently train
 * N copies alone): say which variable tells, else NULL. */
static const char *launched_parallel(void)
{
	static char why[96];
	static const char *const vars[] = {"SLURM_STEP_NUM_TASKS",
					   "SLURM_NTASKS", "HOROVOD_SIZE",
					   "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
					   "WORLD_SIZE"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);

		if (v && *v && strcmp(v, "1") != 0) {
			snprintf(why, sizeof(why), "%s=%s", vars[i], v);
			return why;
		}
	}
	return NULL;
}

hvd_status_t bootstrap_init(struct hvd_world *w, bootstrap_fail_fn on_fail)
{
	pmix_status_t rc;
	pmix_value_t *val = NULL;
	pmix_proc_t wild;
	pmix_status_t codes[] = {PMIX_ERR_PROC_TERM_WO_SYNC,
				 PMIX_EVENT_PROC_TERMINATED,
				 PMIX_ERR_LOST_CONNECTION,
				 PMIX_ERR_LOST_CONNECTION_TO_SERVER};
	hvd_status_t st;

	rc = PMIx_Init(&myproc, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		const char *many = launched_parallel();

		if (!many && !getenv("PMIX_NAMESPACE")) {
			singleton = 1;
			w->rank = 0;
			w->size = world_size = 1;
			snprintf(w->nspace, sizeof(w->nspace),
				 "singleton-%ld", (long)getpid());
			hvd_log(HVD_LOG_INFO,
				"no PMIx server: running as a single rank");
			st = check_env_rank("HOROVOD_RANK", 0, w);
			if (st == HVD_OK)
				st = check_env_rank("HOROVOD_SIZE", 1, w);
			if (st != HVD_OK)
				singleton = 0;
			return st;
		}
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Init failed (%s)%s%s: no PMIx "
				 "server found; start the program with srun "
				 "--mpi=pmix, hvdrun -np N or mpirun",
				 PMIX_ERRMSG(rc), many ? " although " : "",
				 many ? many : "");
	}
	pmix_up = 1;
	PMIX_LOAD_PROCID(&wild, myproc.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || !val) {
		st = hvd_error(HVD_ERR_BOOTSTRAP,
			       "hvd: PMIx_Get(PMIX_JOB_SIZE) failed (%s)",
			       PMIX_ERRMSG(rc));
		goto err_fini;
	}
	w->size = val->type == PMIX_UINT32 ? (int)val->data.uint32
					   : (int)val->data.integer;
	PMIX_VALUE_RELEASE(val);
	w->rank = (int)myproc.rank;
	world_size = w->size;
	snprintf(w->nspace, sizeof(w->nspace), "%s", myproc.nspace);
	if (w->size <= 0 || w->rank >= w->size) {
		st = hvd_error(HVD_ERR_BOOTSTRAP,
			       "hvd: PMIx gave rank %d of job size %d",
			       w->rank, w->size);
		goto err_fini;
	}
	st = check_env_rank("HOROVOD_RANK", w->rank, w);
	if (st == HVD_OK)
		st = check_env_rank("HOROVOD_SIZE", w->size, w);
	if (st != HVD_OK)
		goto err_fini;

	pthread_mutex_lock(&ev_lock);
	fail_cb = on_fail;
	ev_state = EV_PENDING;
	pthread_mutex_unlock(&ev_lock);
	PMIx_Register_event_handler(codes, sizeof(codes) / sizeof(codes[0]),
				    NULL, 0, on_event, on_registered, NULL);
	if (wait_registered() != EV_REGISTERED)
		hvd_log(HVD_LOG_DEBUG,
			"PMIx did not register the failure handler: failures "
			"are the transport's to see");
	return HVD_OK;

err_fini:
	PMIx_Finalize(NULL, 0);
	pmix_up = 0;
	return st;
}

static void get_node_key(char *key, size_t len, char *host, size_t hlen)
{
	pmix_value_t *val = NULL;
	long nodeid = -1;

	host[0] = '\0';
	if (PMIx_Get(&myproc, PMIX_HOSTNAME, NULL, 0, &val) == PMIX_SUCCESS &&
	    val) {
		if (val->type == PMIX_STRING && val->data.string)
			snprintf(host, hlen, "%s", val->data.string);
		PMIX_VALUE_RELEASE(val);
	}
	if (!host[0] && gethostname(host, hlen) != 0)
		snprintf(host, hlen, "localhost");
	host[hlen - 1] = '\0';
	val = NULL;
	if (PMIx_Get(&myproc, PMIX_NODEID, NULL, 0, &val) == PMIX_SUCCESS &&
	    val) {
		if (val->type == PMIX_UINT32)
			nodeid = (long)val->data.uint32;
		else if (val->type == PMIX_INT)
			nodeid = val->data.integer;
		PMIX_VALUE_RELEASE(val);
	}
	snprintf(key, len, "%s#%ld", host, nodeid);
}

static int get_pmix_local_rank(void)
{
	pmix_value_t *val = NULL;
	int lr = -1;

	if (PMIx_Get(&myproc, PMIX_LOCAL_RANK, NULL, 0, &val) == PMIX_SUCCESS &&
	    val) {
		if (val->type == PMIX_UINT16)
			lr = val->data.uint16;
		else if (val->type == PMIX_INT)
			lr = val->data.integer;
		PMIX_VALUE_RELEASE(val);
	}
	return lr;
}

static hvd_status_t put_blob(const char *key, const void *addr,
			     size_t addr_len)
{
	struct bootstrap_peer me;
	pmix_value_t v;
	pmix_status_t rc;
	size_t len;
	void *buf;

	memset(&me, 0, sizeof(me));
	snprintf(me.node_key, sizeof(me.node_key), "%s", key);
	me.node_key_len = (int)strlen(me.node_key);
	me.pmix_local_rank = get_pmix_local_rank();
	me.pid = getpid();
	me.pidns = hvd_pidns();
	me.addr = (void *)addr;
	me.addr_len = addr_len;
	buf = bootstrap_blob_encode(&me, &len);
	if (!buf)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = buf;
	v.data.bo.size = len;
	rc = PMIx_Put(PMIX_GLOBAL, BLOB_KEY, &v);
	free(buf);
	if (rc != PMIX_SUCCESS)
		return hvd_error(HVD_ERR_BOOTSTRAP, "hvd: PMIx_Put failed (%s)",
				 PMIX_ERRMSG(rc));
	return HVD_OK;
}

static hvd_status_t get_blob(int r, struct bootstrap_peer *p)
{
	pmix_proc_t proc;
	pmix_value_t *val = NULL;
	pmix_status_t rc;
	hvd_status_t st;

	PMIX_LOAD_PROCID(&proc, myproc.nspace, (pmix_rank_t)r);
	rc = PMIx_Get(&proc, BLOB_KEY, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || !val)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Get of rank %d's address failed "
				 "(%s)",
				 r, PMIX_ERRMSG(rc));
	if (val->type != PMIX_BYTE_OBJECT)
		st = hvd_error(HVD_ERR_BOOTSTRAP,
			       "hvd: rank %d published an address record of "
			       "PMIx type %d, not bytes (another libhvd "
			       "version?)",
			       r, (int)val->type);
	else
		st = bootstrap_blob_decode(val->data.bo.bytes,
					   val->data.bo.size, p);
	PMIX_VALUE_RELEASE(val);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "hvd: rank %d's address record",
					r);
	return HVD_OK;
}

/* Rank 0's part of the key exchange: draw the job's key, publish it. */
static hvd_status_t put_job_key(void)
{
	uint8_t key[AUTH_KEY_BYTES];
	pmix_value_t v;
	pmix_status_t rc;

	HVD_CHECK(auth_draw_key(key));
	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)key;
	v.data.bo.size = sizeof(key);
	rc = PMIx_Put(PMIX_GLOBAL, JOB_KEY, &v);
	memset(key, 0, sizeof(key));
	if (rc != PMIX_SUCCESS)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Put of the job's key failed (%s)",
				 PMIX_ERRMSG(rc));
	return HVD_OK;
}

/* Every rank, after the fence: the key rank 0 published. */
static hvd_status_t get_job_key(void)
{
	pmix_proc_t proc;
	pmix_value_t *val = NULL;
	pmix_status_t rc;
	hvd_status_t st = HVD_OK;

	PMIX_LOAD_PROCID(&proc, myproc.nspace, 0);
	rc = PMIx_Get(&proc, JOB_KEY, NULL, 0, &val);
	if (rc != PMIX_SUCCESS || !val)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Get of the job's key from rank 0 "
				 "failed (%s): is rank 0 another libhvd "
				 "version?",
				 PMIX_ERRMSG(rc));
	if (val->type != PMIX_BYTE_OBJECT ||
	    val->data.bo.size != AUTH_KEY_BYTES)
		st = hvd_error(HVD_ERR_BOOTSTRAP,
			       "hvd: rank 0 published a job key of %zu bytes "
			       "(PMIx type %d), expected %d bytes: another "
			       "libhvd version?",
			       val->type == PMIX_BYTE_OBJECT
				       ? val->data.bo.size
				       : (size_t)0,
			       (int)val->type, AUTH_KEY_BYTES);
	else
		auth_set_key((const uint8_t *)val->data.bo.bytes);
	if (val->type == PMIX_BYTE_OBJECT && val->data.bo.bytes)
		memset(val->data.bo.bytes, 0, val->data.bo.size);
	PMIX_VALUE_RELEASE(val);
	return st;
}

static hvd_status_t singleton_exchange(struct hvd_world *w, const void *addr,
				       size_t addr_len,
				       struct bootstrap_peer **out)
{
	struct bootstrap_peer *p = calloc(1, sizeof(*p));
	const char *key = w->hostname;
	uint8_t job_key[AUTH_KEY_BYTES];
	hvd_status_t st;

	if (!p)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	st = auth_draw_key(job_key);
	if (st != HVD_OK) {
		free(p);
		return st;
	}
	auth_set_key(job_key);
	memset(job_key, 0, sizeof(job_key));
	if (gethostname(w->hostname, sizeof(w->hostname)) != 0)
		snprintf(w->hostname, sizeof(w->hostname), "localhost");
	w->hostname[sizeof(w->hostname) - 1] = '\0';
	snprintf(p->node_key, sizeof(p->node_key), "%s", w->hostname);
	p->pmix_local_rank = 0;
	p->pid = getpid();
	p->pidns = hvd_pidns();
	p->addr_len = addr_len;
	p->addr = malloc(addr_len ? addr_len : 1);
	if (!p->addr) {
		free(p);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	memcpy(p->addr, addr, addr_len);
	st = bootstrap_layout(w, &key, NULL);
	if (st != HVD_OK) {
		bootstrap_peers_free(p, 1);
		return st;
	}
	*out = p;
	return HVD_OK;
}

hvd_status_t bootstrap_exchange(struct hvd_world *w, const void *addr,
				size_t addr_len, struct bootstrap_peer **out)
{
	struct bootstrap_peer *peers;
	const char **keys = NULL;
	int *lrs = NULL;
	char key[sizeof(((struct bootstrap_peer *)0)->node_key)];
	pmix_info_t info;
	pmix_status_t rc;
	hvd_status_t st;
	bool collect = true;

	if (singleton)
		return singleton_exchange(w, addr, addr_len, out);
	get_node_key(key, sizeof(key) - 1, w->hostname, sizeof(w->hostname));
	st = put_blob(key, addr, addr_len);
	if (st == HVD_OK && w->rank == 0)
		st = put_job_key();
	if (st != HVD_OK)
		return st;
	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Commit failed (%s)",
				 PMIX_ERRMSG(rc));
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	rc = PMIx_Fence(NULL, 0, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	if (rc != PMIX_SUCCESS)
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Fence (address exchange) failed "
				 "(%s): did every rank call hvd_init()?",
				 PMIX_ERRMSG(rc));
	st = get_job_key();
	if (st != HVD_OK)
		return st;
	peers = calloc((size_t)w->size, sizeof(*peers));
	keys = calloc((size_t)w->size, sizeof(*keys));
	lrs = calloc((size_t)w->size, sizeof(*lrs));
	if (!peers || !keys || !lrs) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto err_free;
	}
	for (int r = 0; r < w->size; r++) {
		st = get_blob(r, &peers[r]);
		if (st != HVD_OK)
			goto err_free;
		keys[r] = peers[r].node_key;
		lrs[r] = peers[r].pmix_local_rank;
	}
	st = bootstrap_layout(w, keys, lrs);
	if (st != HVD_OK)
		goto err_free;
	free(keys);
	free(lrs);
	*out = peers;
	return HVD_OK;

err_free:
	free(keys);
	free(lrs);
	if (peers)
		bootstrap_peers_free(peers, w->size);
	return st;
}

hvd_status_t bootstrap_fence(void)
{
	pmix_status_t rc;

	if (singleton)
		return HVD_OK;
	rc = PMIx_Fence(NULL, 0, NULL, 0);

	if (rc != PMIX_SUCCESS)
		return hvd_error(HVD_ERR_BOOTSTRAP, "hvd: PMIx_Fence failed (%s)",
				 PMIX_ERRMSG(rc));
	return HVD_OK;
}

static void fence_done(pmix_status_t status, void *cbdata)
{
	(void)status;
	__atomic_store_n((volatile int *)cbdata, 1, __ATOMIC_RELEASE);
}

hvd_status_t bootstrap_fence_nb(volatile int *done)
{
	pmix_status_t rc;

	*done = 0;
	if (singleton) {
		*done = 1;
		return HVD_OK;
	}
	rc = PMIx_Fence_nb(NULL, 0, NULL, 0, fence_done, (void *)done);
	if (rc != PMIX_SUCCESS) {
		*done = 1;
		return hvd_error(HVD_ERR_BOOTSTRAP,
				 "hvd: PMIx_Fence_nb failed (%s)",
				 PMIX_ERRMSG(rc));
	}
	return HVD_OK;
}

void bootstrap_finalize(void)
{
	singleton = 0;
	if (!pmix_up)
		return;
	pthread_mutex_lock(&ev_lock);
	fail_cb = NULL;
	pthread_mutex_unlock(&ev_lock);
	if (wait_registered() == EV_REGISTERED)
		PMIx_Deregister_event_handler(evhdlr_id, NULL, NULL);
	pthread_mutex_lock(&ev_lock);
	ev_state = EV_NONE;
	pthread_mutex_unlock(&ev_lock);
	PMIx_Finalize(NULL, 0);
	pmix_up = 0;
}

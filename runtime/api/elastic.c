/*
 * elastic.c - elastic training (include/hvd.h, hvd_elastic_*): libhvd
 * re-formed around the processes that are left, or that join, without a
 * new launch.
 *
 * A re-forming, on every live rank at once:
 *   1. the engine stops (its thread has usually stopped already, on the
 *      failure) and every pending operation completes with its error;
 *   2. the next world's worker is made, and its address goes into the
 *      agreement over the current worker (net/membership.h): who is in,
 *      in which order, under which epoch;
 *   3. the old world goes: its communicators (shared memory, NCCL), then
 *      its worker and every endpoint on it (net/reform.h), so nothing of
 *      the old world can reach the new one;
 *   4. the world is filled from the decision (ranks in old-rank order,
 *      newcomers after; node, local and cross ranks computed again by
 *      bootstrap_layout), the world communicator made, the engine started
 *      with fresh caches; shared memory and NCCL come back on first use.
 * A member that dies during it makes the new world's first collectives
 * fail; the re-forming then runs again, within HOROVOD_ELASTIC_TIMEOUT.
 *
 * Growing: rank 0 of a world writes the rendezvous file (api/rendezvous.h)
 * after hvd_init and after each re-forming.  A later srun step of the same
 * job finds it in hvd_init (elastic_init), asks rank 0 to join, and waits;
 * rank 0 sees the request at the program's next commit
 * (hvd_elastic_check_hosts), every rank gets HVD_HOSTS_UPDATED, and the
 * re-forming that follows takes the newcomers in.
 */
#include "config.h"

#include "api/elastic.h"
#include "api/rendezvous.h"
#include "coll/coll.h"
#include "engine/engine.h"
#include "net/auth.h"
#include "net/bootstrap.h"
#include "net/membership.h"
#include "net/reform.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static struct {
	int enabled;       /* HOROVOD_ELASTIC                             */
	int min_size;      /* HOROVOD_ELASTIC_MIN_SIZE (1)                */
	double timeout;    /* HOROVOD_ELASTIC_TIMEOUT (600 s)             */
	/* this process, as the first world knew it */
	char first_nspace[256];
	int pmix_rank, pmix_local_rank;
	char node_key[MEMB_KEY_MAX];
	/* the rendezvous */
	int have_dir;
	char dir[4096];
	char job[64];
	long restart;
	uint8_t token[MEMB_TOKEN_BYTES];
	int have_token;
	int published;
	/* why this process has no world: a re-forming failed after the old
	 * world was taken down (rebuild), so nothing is left to re-form;
	 * kept from that failure until hvd_finalize */
	char lost[400];
} el;

static void read_knobs(void)
{
	el.enabled = hvd_env_bool("HOROVOD_ELASTIC", 0);
	el.min_size = (int)hvd_env_long("HOROVOD_ELASTIC_MIN_SIZE", 1);
	if (el.min_size < 1)
		el.min_size = 1;
	el.timeout = hvd_env_double("HOROVOD_ELASTIC_TIMEOUT", 600.0);
	if (el.timeout <= 0)
		el.timeout = 600.0;
}

int hvd_elastic_enabled(void)
{
	return hvd_world() ? el.enabled : hvd_env_bool("HOROVOD_ELASTIC", 0);
}

int hvd_elastic_min_size(void)
{
	if (!hvd_world())
		read_knobs();
	return el.min_size;
}

unsigned hvd_elastic_epoch(void)
{
	const struct hvd_world *w = hvd_world();

	return w ? w->epoch : 0;
}

static hvd_status_t need_elastic(const char *fn)
{
	if (!hvd_world() || !comm_world()) {
		if (el.lost[0])
			return hvd_error(HVD_ERR_NOT_INITIALIZED,
					 "hvd: %s(): this process has no world "
					 "since its last re-forming failed "
					 "(%s): call hvd_finalize() and exit",
					 fn, el.lost);
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd: %s() called before hvd_init() (or after "
				 "hvd_finalize())",
				 fn);
	}
	if (!el.enabled)
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd: %s(): elastic training is off: set "
				 "HOROVOD_ELASTIC=1 (srun --horovod=elastic, "
				 "hvdrun --elastic)",
				 fn);
	return HVD_OK;
}

/* ------------------------------------------------------ the rendezvous */

/* Rank 0: tell later steps where this world is.  Not fatal: without the
 * file only growing is impossible, and the log says why. */
static void publish(void)
{
	const struct hvd_world *w = hvd_world();
	struct rdv_info r;
	void *addr;
	size_t len;
	hvd_status_t st;

	if (!el.have_dir || w->rank != 0)
		return;
	if (!el.have_token) {
		if (getrandom(el.token, sizeof(el.token), 0) !=
		    (ssize_t)sizeof(el.token)) {
			hvd_log(HVD_LOG_WARNING,
				"elastic: no random token (%s): steps cannot "
				"join this one",
				strerror(errno));
			return;
		}
		el.have_token = 1;
	}
	memset(&r, 0, sizeof(r));
	snprintf(r.job, sizeof(r.job), "%s", el.job);
	r.restart = el.restart;
	snprintf(r.step, sizeof(r.step), "%s", el.first_nspace);
	r.epoch = w->epoch;
	memcpy(r.token, el.token, sizeof(r.token));
	auth_get_key(r.key);
	snprintf(r.node, sizeof(r.node), "%s", el.node_key);
	r.pid = (long)getpid();
	r.pidns = hvd_pidns();
	reform_current_addr(&addr, &len);
	r.addr = addr;
	r.addr_len = len;
	st = rdv_write(el.dir, &r);
	if (st != HVD_OK) {
		hvd_log(HVD_LOG_WARNING,
			"elastic: steps cannot join this one: %s",
			hvd_last_error());
		return;
	}
	el.published = 1;
	hvd_log(HVD_LOG_INFO, "elastic: rendezvous for job %s in %s (epoch %u)",
		el.job, el.dir, w->epoch);
}

/* The pid of the rank 0 that wrote r when it runs on this node, else 0
 * (memb_ep_open: over shared memory, watched by its pid). */
static long rank0_local_pid(const struct rdv_info *r)
{
	return memb_local_pid(r->node, r->pid, r->pidns, el.node_key);
}

/* A step's rank 0 in hvd_init: a live world of this job to join? */
static int find_world(struct rdv_info *r)
{
	int missing;

	if (rdv_read(el.dir, el.job, r, &missing) != HVD_OK) {
		if (!missing)
			hvd_log(HVD_LOG_WARNING,
				"elastic: ignoring the rendezvous: %s",
				hvd_last_error());
		return 0;
	}
	if (r->restart != el.restart ||
	    strcmp(r->step, el.first_nspace) == 0) {
		rdv_info_free(r);
		return 0;
	}
	if (!memb_reachable(r->addr, rank0_local_pid(r), 5.0)) {
		hvd_log(HVD_LOG_INFO,
			"elastic: the world of step %s (rendezvous in %s) is "
			"gone: this step starts a world of its own",
			r->step, el.dir);
		rdv_info_free(r);
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------- re-forming */

/* This process as it goes into the next world; addr: its next worker. */
static void describe_self(struct memb_peer *p, void *addr, size_t len)
{
	const struct hvd_world *w = hvd_world();

	memset(p, 0, sizeof(*p));
	p->old_rank = w->rank;
	p->pid = (int32_t)getpid();
	p->pidns = hvd_pidns();
	p->pmix_local_rank = el.pmix_local_rank;
	p->pmix_rank = el.pmix_rank;
	snprintf(p->node_key, sizeof(p->node_key), "%s", el.node_key);
	snprintf(p->nspace, sizeof(p->nspace), "%s", el.first_nspace);
	p->addr = addr;
	p->addr_len = (uint32_t)len;
}

/* Steps 3 and 4: the old world goes, the decided one comes up. */
static hvd_status_t rebuild(struct memb_decide *d, int idx)
{
	char host[256];
	struct hvd_world *w;
	struct bootstrap_peer *bp;
	const char **keys;
	int *lrs, *pmix_of, n = d->n;
	hvd_status_t st, tst;

	snprintf(host, sizeof(host), "%s", hvd_world()->hostname);
	comm_world_destroy();
	bp = calloc((size_t)n, sizeof(*bp));
	keys = calloc((size_t)n, sizeof(*keys));
	lrs = calloc((size_t)n, sizeof(*lrs));
	pmix_of = calloc((size_t)n, sizeof(*pmix_of));
	if (!bp || !keys || !lrs || !pmix_of) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct memb_peer *p = &d->peers[i];

		keys[i] = p->node_key;
		lrs[i] = p->pmix_local_rank;
		pmix_of[i] = strcmp(p->nspace, el.first_nspace) == 0
				     ? p->pmix_rank
				     : -1;
		snprintf(bp[i].node_key, sizeof(bp[i].node_key), "%s",
			 p->node_key);
		bp[i].pmix_local_rank = p->pmix_local_rank;
		bp[i].pid = p->pid;
		bp[i].pidns = p->pidns;
		bp[i].addr = p->addr; /* taken */
		bp[i].addr_len = p->addr_len;
		p->addr = NULL;
		p->addr_len = 0;
	}
	w = world_begin();
	w->rank = idx;
	w->size = n;
	w->epoch = d->epoch;
	snprintf(w->nspace, sizeof(w->nspace), "%s", d->world);
	snprintf(w->hostname, sizeof(w->hostname), "%s", host);
	st = bootstrap_layout(w, keys, lrs);
	if (st != HVD_OK)
		goto out;
	/* A member that does not answer the connection (it died since the
	 * decision) is not fatal: the world comes up, its first collectives
	 * fail, and the caller agrees again over it. */
	tst = reform_transport(w, bp);
	if (tst != HVD_OK && tst != HVD_ERR_PEER_FAILED) {
		st = tst;
		goto out;
	}
	st = reform_set_pmix_map(pmix_of, n);
	if (st != HVD_OK)
		goto out;
	world_publish();
	hvd_log_set_rank(w->rank);
	coll_init();
	st = comm_world_create(w);
	if (st == HVD_OK)
		st = tst;
	if (st == HVD_OK)
		st = engine_start();
	if (st == HVD_OK)
		hvd_log(HVD_LOG_INFO,
			"elastic: epoch %u: rank %d of %d, node %d of %d, local "
			"%d of %d, cross %d of %d",
			w->epoch, w->rank, w->size, w->node_id, w->num_nodes,
			w->local_rank, w->local_size, w->cross_rank,
			w->cross_size);
out:
	bootstrap_peers_free(bp, n);
	free(keys);
	free(lrs);
	free(pmix_of);
	return st;
}

static hvd_status_t too_few(const struct memb_decide *d)
{
	return hvd_error(HVD_ERR_TOO_FEW_RANKS,
			 "hvd: elastic: %d rank%s left, fewer than "
			 "HOROVOD_ELASTIC_MIN_SIZE=%d; the world was re-formed "
			 "among them so that the program can write a checkpoint: "
			 "save it and exit with HVD_CKPT_EXIT_STATUS (%d) to be "
			 "requeued, or lower the minimum (--horovod=elastic-min=N)",
			 (int)d->n, d->n == 1 ? " is" : "s are",
			 (int)d->min_size, HVD_CKPT_EXIT_STATUS);
}

/* The next world's worker, again each second until the deadline: a
 * failure to make one (no device) is no peer's, and re-forming again at
 * once over it, as a transport error would, went on without end. */
static hvd_status_t prepare(double deadline, void **addr, size_t *len)
{
	char why[512];

	for (int tries = 0;; tries++) {
		struct timespec ts = {1, 0};

		if (reform_prepare(addr, len) == HVD_OK)
			return HVD_OK;
		snprintf(why, sizeof(why), "%s", hvd_last_error());
		if (hvd_now() + 1.0 > deadline)
			return hvd_error(HVD_ERR_TIMEOUT,
					 "hvd: elastic: no UCX worker for the "
					 "next world within %.0f s "
					 "(HOROVOD_ELASTIC_TIMEOUT): %s",
					 el.timeout, why);
		if (tries == 0)
			hvd_log(HVD_LOG_WARNING,
				"elastic: %s: trying again each second", why);
		nanosleep(&ts, NULL);
	}
}

/* Survivors (and ranks admitting newcomers): steps 1-4, again when a
 * member fails on the way, within the timeout. */
static hvd_status_t reform(void)
{
	double start = hvd_now(), deadline = start + el.timeout;
	hvd_status_t st;

	for (;;) {
		const struct hvd_world *w = hvd_world();
		struct memb_round round;
		struct memb_decide d;
		char world[256];
		int idx = -1, status;
		void *addr;
		size_t len;

		engine_stop();
		coll_finalize();
		HVD_CHECK(prepare(deadline, &addr, &len));
		memset(&round, 0, sizeof(round));
		snprintf(world, sizeof(world), "%s", w->nspace);
		round.epoch = w->epoch;
		round.min_size = el.min_size;
		round.timeout = deadline - hvd_now();
		if (round.timeout < 1.0)
			round.timeout = 1.0;
		round.world = world;
		round.admit = 1;
		describe_self(&round.self, addr, len);
		st = memb_agree(&round, &d, &idx);
		if (st != HVD_OK) {
			reform_discard();
			return st;
		}
		status = d.status;
		st = rebuild(&d, idx);
		if (st == HVD_OK && status == HVD_ERR_TOO_FEW_RANKS)
			st = too_few(&d);
		memb_decide_free(&d);
		if (st != HVD_ERR_PEER_FAILED || hvd_now() > deadline ||
		    !hvd_world())
			break;
		hvd_log(HVD_LOG_WARNING,
			"elastic: a member failed while the world re-formed "
			"(%s): re-forming again",
			hvd_last_error());
	}
	if (st == HVD_OK || st == HVD_ERR_TOO_FEW_RANKS) {
		hvd_log(HVD_LOG_INFO, "elastic: re-formed in %.3f s",
			hvd_now() - start);
		publish();
	} else if (!hvd_world() || !comm_world()) {
		/* The old world is gone and the new one did not come up:
		 * the caller's next hvd_elastic_reset() says so (need_elastic)
		 * instead of re-forming from nothing. */
		snprintf(el.lost, sizeof(el.lost), "%s", hvd_last_error());
	}
	return st;
}

hvd_status_t hvd_elastic_reset(void)
{
	HVD_CHECK(need_elastic("hvd_elastic_reset"));
	return reform();
}

hvd_status_t hvd_elastic_check_hosts(void)
{
	int32_t n = 0;

	if (!el.enabled && hvd_world() && comm_world())
		return HVD_OK; /* nobody ever joins */
	HVD_CHECK(need_elastic("hvd_elastic_check_hosts"));
	if (hvd_world()->rank == 0 && el.have_token)
		n = memb_poll_joins(el.token, el.job);
	HVD_CHECK(coll_broadcast(comm_world(), &n, 1, HVD_INT32, 0));
	if (n > 0)
		return hvd_error(HVD_HOSTS_UPDATED,
				 "hvd: elastic: %d step%s waiting to join: "
				 "call hvd_elastic_reset() on every rank",
				 (int)n, n == 1 ? " is" : "s are");
	return HVD_OK;
}

/* ----------------------------------------------------------- joining */

/* A newcomer step: every rank asks rank 0 of the running world, again
 * when the rendezvous changes (a re-forming there moves rank 0's worker),
 * until admitted or the timeout. */
static hvd_status_t join(struct rdv_info *r)
{
	const struct hvd_world *w = hvd_world();
	double deadline = hvd_now() + el.timeout;
	struct memb_join req;
	struct memb_decide d;
	hvd_status_t st;
	void *addr, *reply;
	size_t len, rlen;
	int idx = -1, said_gone = 0;

	hvd_log(HVD_LOG_INFO,
		"elastic: joining the world of step %s (job %s, epoch %u)",
		r->step, el.job, r->epoch);
	engine_stop();
	coll_finalize();
	HVD_CHECK(reform_prepare(&addr, &len));
	memset(&req, 0, sizeof(req));
	memcpy(req.token, r->token, sizeof(req.token));
	snprintf(req.jobid, sizeof(req.jobid), "%s", el.job);
	req.step_size = w->size;
	req.step_rank = w->rank;
	reform_current_addr(&reply, &rlen);
	req.reply_addr = reply;
	req.reply_addr_len = (uint32_t)rlen;
	describe_self(&req.self, addr, len);
	req.self.old_rank = -1;
	for (;;) {
		struct rdv_info again;
		int missing;

		st = memb_join(&req, r->epoch, r->addr, rank0_local_pid(r), 5.0,
			       &d, &idx);
		if (st == HVD_OK || st == HVD_ERR_REMOVED ||
		    hvd_now() > deadline)
			break;
		/* Rank 0 is gone (on this node that is known at once): give
		 * a survivor the time to re-form and write the file. */
		if (st == HVD_ERR_PEER_FAILED) {
			if (!said_gone++)
				hvd_log(HVD_LOG_INFO,
					"elastic: %s: waiting for the "
					"rendezvous file to change",
					hvd_last_error());
			hvd_sleep_us(100 * 1000);
		}
		/* Rank 0 may have moved (a re-forming) or changed; or the
		 * world ended before it admitted us (its rank 0 removes the
		 * file at the end): then nobody is left to wait for. */
		if (rdv_read(el.dir, el.job, &again, &missing) != HVD_OK) {
			if (!missing)
				continue;
			st = hvd_error(HVD_ERR_PEER_FAILED,
				       "hvd: elastic: the running world ended "
				       "before it admitted this process (its "
				       "rendezvous file is gone)");
			break;
		} else {
			if (again.restart == el.restart &&
			    memcmp(again.token, r->token, sizeof(r->token)) ==
				0) {
				rdv_info_free(r);
				*r = again;
			} else if (again.restart == el.restart) {
				/* A new rank 0 with a token of its own. */
				memcpy(req.token, again.token,
				       sizeof(req.token));
				rdv_info_free(r);
				*r = again;
			} else {
				rdv_info_free(&again);
			}
		}
	}
	if (st != HVD_OK) {
		reform_discard();
		if (st != HVD_ERR_REMOVED && hvd_now() > deadline)
			return hvd_error_prefix(
				st,
				"hvd: elastic: not admitted to the running "
				"world within %.0f s (HOROVOD_ELASTIC_TIMEOUT; "
				"rendezvous in %s); the last try",
				el.timeout, el.dir);
		return hvd_error_prefix(st, "hvd: elastic: joining the running "
					    "world (rendezvous in %s)",
					el.dir);
	}
	st = rebuild(&d, idx);
	memb_decide_free(&d);
	if (st == HVD_OK)
		hvd_log(HVD_LOG_INFO, "elastic: joined as rank %d of %d",
			hvd_world()->rank, hvd_world()->size);
	return st;
}

/* What a step's rank 0 tells its step-mates about the world it found. */
struct found {
	int32_t join;
	uint32_t epoch;
	uint8_t token[MEMB_TOKEN_BYTES];
	uint8_t key[RDV_KEY_BYTES];
	int64_t restart;
	uint32_t addr_len;
	char step[256];
};

/*
 * An elastic world leaves PMIx once it is up.  Slurm's PMIx plugin
 * (mpi/pmix, pmixp_client_v2.c, _errhandler) registers one handler for
 * every PMIx event in slurmstepd and kills the whole step (SIGKILL) in it;
 * the event comes when a task that is still a PMIx client dies on a node
 * where other tasks of the step run: with two tasks per node, killing one
 * ended the step ("Error handler invoked: status = -61 ... STEP CANCELLED").
 * A task that called PMIx_Finalize is no longer a client whose death
 * raises anything.  Nothing after hvd_init needs PMIx: failures are seen
 * by the transport (Slurm 22.05 delivers no termination events to clients
 * anyway), and the fence of hvd_finalize is replaced by a barrier.
 */
static void detach_pmix(void)
{
	bootstrap_finalize();
	hvd_log(HVD_LOG_DEBUG, "elastic: left PMIx (failures are the "
			       "transport's to see from now on)");
}

hvd_status_t elastic_init(void)
{
	const struct hvd_world *w = hvd_world();
	const char *job = getenv("SLURM_JOB_ID");
	const char *node = getenv("SLURMD_NODENAME");
	struct rdv_info r;
	struct found f;
	char why[256];

	memset(&el, 0, sizeof(el));
	read_knobs();
	if (!el.enabled)
		return HVD_OK;
	snprintf(el.first_nspace, sizeof(el.first_nspace), "%s", w->nspace);
	el.pmix_rank = w->rank;
	el.pmix_local_rank = w->local_rank;
	/* A node's name that is the same in every step: the bootstrap's key
	 * carries PMIx's node id, which counts the nodes of one step. */
	if (node && *node)
		snprintf(el.node_key, sizeof(el.node_key), "%.200s#%.60s",
			 w->hostname, node);
	else
		snprintf(el.node_key, sizeof(el.node_key), "%.200s#n%d",
			 w->hostname, w->node_id);
	snprintf(el.job, sizeof(el.job), "%s", job && *job ? job : "local");
	el.restart = hvd_env_long("SLURM_RESTART_COUNT", 0);
	el.have_dir = rdv_dir(el.dir, sizeof(el.dir), why, sizeof(why));
	hvd_log(HVD_LOG_INFO,
		"elastic: on, HOROVOD_ELASTIC_MIN_SIZE=%d "
		"HOROVOD_ELASTIC_TIMEOUT=%g, rendezvous %s",
		el.min_size, el.timeout, el.have_dir ? el.dir : why);
	if (!el.have_dir) {
		detach_pmix();
		return HVD_OK;
	}

	memset(&f, 0, sizeof(f));
	memset(&r, 0, sizeof(r));
	if (w->rank == 0 && find_world(&r)) {
		f.join = 1;
		f.epoch = r.epoch;
		memcpy(f.token, r.token, sizeof(f.token));
		memcpy(f.key, r.key, sizeof(f.key));
		f.restart = r.restart;
		f.addr_len = (uint32_t)r.addr_len;
		snprintf(f.step, sizeof(f.step), "%s", r.step);
	}
	if (w->size > 1) {
		HVD_CHECK(coll_broadcast(comm_world(), &f, sizeof(f), HVD_UINT8,
					 0));
		if (f.join && w->rank != 0) {
			r.addr = malloc(f.addr_len ? f.addr_len : 1);
			if (!r.addr)
				return hvd_error(HVD_ERR_NO_MEMORY,
						 "hvd: out of memory");
			r.addr_len = f.addr_len;
			r.epoch = f.epoch;
			r.restart = (long)f.restart;
			memcpy(r.token, f.token, sizeof(r.token));
			snprintf(r.step, sizeof(r.step), "%s", f.step);
			snprintf(r.job, sizeof(r.job), "%s", el.job);
		}
		if (f.join)
			HVD_CHECK(coll_broadcast(comm_world(), r.addr,
						 f.addr_len, HVD_UINT8, 0));
	}
	if (f.join) {
		hvd_status_t st;

		/* The world's tags and failure notices are under its key, not
		 * the one this step drew: take it on before talking to it
		 * (the transport's notices restart under it when the world
		 * re-forms). */
		auth_set_key(f.key);
		st = join(&r);

		rdv_info_free(&r);
		if (st != HVD_OK)
			return st;
	}
	publish();
	detach_pmix();
	return HVD_OK;
}

int elastic_finalize(void)
{
	const struct hvd_world *w = hvd_world();
	int fence;

	if (!el.enabled)
		return 1;
	el.lost[0] = '\0';
	if (!w)
		return 0; /* a failed re-forming took the world: no fence */
	if (el.published)
		rdv_remove(el.dir, el.job, el.first_nspace);
	el.published = 0;
	memb_joins_clear();
	/* PMIx was left at the end of hvd_init (detach_pmix): everyone is
	 * done sending before endpoints close, through the transport. */
	if (comm_world() && comm_failed(comm_world()) < 0)
		coll_barrier(comm_world());
	fence = 0;
	reform_set_pmix_map(NULL, 0);
	return fence;
}

/* ------------------------------------------------------- the run loop */

hvd_status_t hvd_elastic_run(const hvd_elastic_hooks_t *h, void *arg)
{
	int reset = 0, sync = 1;
	hvd_status_t st;

	if (!h || !h->train || !h->restore || !h->sync)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd_elastic_run: hooks train, restore and "
				 "sync are required");
	if (!hvd_world() || !comm_world())
		return need_elastic("hvd_elastic_run");
	/* Without elastic the same program runs as before: a failure ends
	 * it, on every rank. */
	if (!el.enabled) {
		st = h->sync(arg);
		return st == HVD_OK ? h->train(arg) : st;
	}
	for (;;) {
		if (reset) {
			st = hvd_elastic_reset();
			/* Another failure during the re-forming: again.  But a
			 * re-forming that timed out heard nothing within
			 * HOROVOD_ELASTIC_TIMEOUT: it gives up, as the Python
			 * loop does (ElasticError), so that nothing waits
			 * without a bound. */
			if (st != HVD_ERR_TIMEOUT &&
			    hvd_status_peers_broken(st)) {
				h->restore(arg);
				continue;
			}
			if (st != HVD_OK)
				return st;
			if (h->on_reset)
				h->on_reset(arg);
			reset = 0;
		}
		if (sync) {
			st = h->sync(arg);
			if (hvd_status_peers_broken(st)) {
				h->restore(arg);
				reset = 1;
				continue;
			}
			if (st != HVD_OK)
				return st;
		}
		st = h->train(arg);
		if (st == HVD_OK)
			return HVD_OK;
		if (hvd_status_peers_broken(st))
			h->restore(arg); /* back to the last commit */
		else if (st != HVD_HOSTS_UPDATED)
			return st;
		/* Newcomers (HOSTS_UPDATED) need the state: sync either way. */
		sync = 1;
		reset = 1;
	}
}

/*
 * coll_topo.c - what a communicator's place on the nodes gives the host
 * algorithms: the placement facts selection goes by, the shared-memory
 * group of a single-node communicator, and the hierarchy (node and cross
 * communicators) of one spread evenly over several nodes.
 *
 * Both are made on first use, at the same collective on every member
 * (selection is deterministic), and agreed: everyone or no one, since a
 * member without the segment would wait on UCX while the others wait in
 * shared memory.  The segment lives in the communicator's slot for the
 * shared-memory backend (comm/backend.h), whose destroy hook unmaps it.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "net/refusal.h"
#include "net/service.h"
#include "net/watch.h"

#include <stdio.h>

static int shm_slot = -1;

static void shm_on_destroy(hvd_comm_t *comm, struct comm_slot *s)
{
	(void)comm;
	if (s->status > 0 && s->state)
		shm_group_destroy(s->state);
	s->state = NULL;
	s->status = 0;
}

static const struct comm_backend shm_backend = {
	.name = "shared memory",
	.on_destroy = shm_on_destroy,
};

void coll_topo_init(void)
{
	shm_slot = comm_backend_register(&shm_backend);
}

static int shm_usable(hvd_comm_t *comm)
{
	return shm_slot >= 0 && comm_slot(comm, shm_slot)->status >= 0;
}

void coll_place_of(hvd_comm_t *comm, struct coll_place *p)
{
	p->size = comm->net.size;
	p->nodes = comm->node_count;
	p->uniform = comm->uniform;
	p->local_size = comm->local_size;
	p->shm = coll_tuning()->shm && shm_usable(comm) &&
		 comm->hier_state >= 0;
	p->crowded = transport_job_crowded();
}

static hvd_status_t shm_setup_barrier(void *arg)
{
	return svc_barrier(arg);
}

static hvd_status_t shm_setup_bcast(void *arg, void *buf, size_t bytes)
{
	return svc_bcast(arg, buf, bytes, 0);
}

/* A failure anywhere in the job ends a shared-memory wait, as it ends a
 * transfer (net/transport.c, watch): a node-mate may have left the
 * collective for a rank that died on another node.  So does another
 * rank's refusal of this call (net/refusal.h).  The GPU path's waits
 * look at the same (cuda_set_watch). */
hvd_status_t coll_world_check(char *why, size_t len)
{
	if (transport_watch(why, len) >= 0)
		return HVD_ERR_PEER_FAILED;
	return transport_is_background() ? HVD_OK : refusal_watch(why, len);
}

static hvd_status_t shm_world_check(void *arg, char *why, size_t len)
{
	(void)arg;
	return coll_world_check(why, len);
}

shm_group_t *coll_shm(hvd_comm_t *comm)
{
	const struct hvd_world *w = hvd_world();
	struct comm_slot *s;
	shm_group_t *g = NULL;
	char key[200], ns[64];
	int32_t ok, all_ok = 0;
	hvd_status_t st;
	size_t j = 0;

	if (shm_slot < 0)
		return NULL;
	s = comm_slot(comm, shm_slot);
	if (s->status)
		return s->status > 0 ? s->state : NULL;
	s->status = -1;
	/* Same answer on every member: these are facts about the comm and
	 * the environment of the job, not about this rank. */
	if (comm->node_count != 1 || comm->net.size < 2 || !coll_tuning()->shm)
		return NULL;
	for (const char *p = w->nspace; *p && j < sizeof(ns) - 1; p++)
		ns[j++] = (char)((*p >= 'a' && *p <= 'z') ||
						 (*p >= 'A' && *p <= 'Z') ||
						 (*p >= '0' && *p <= '9')
					 ? *p
					 : '_');
	ns[j] = '\0';
	snprintf(key, sizeof(key), "%s-n%d-c%u", ns, w->node_id, comm->net.ctx);
	st = shm_group_create(key, comm->net.rank, comm->net.size,
			      shm_setup_barrier, shm_setup_bcast, &comm->net,
			      &g);
	if (st != HVD_OK) {
		hvd_log(HVD_LOG_WARNING,
			"shared memory unavailable (%s); using UCX within "
			"the node",
			hvd_last_error());
		g = NULL;
	}
	ok = g != NULL;
	if (svc_allreduce(&comm->net, &ok, &all_ok, 1, HVD_INT32, HVD_MIN) !=
		    HVD_OK ||
	    !all_ok) {
		if (g)
			shm_group_destroy(g);
		return NULL;
	}
	if (transport_host_oversubscribed())
		shm_group_oversubscribed(g);
	shm_group_set_check(g, shm_world_check, NULL);
	s->state = g;
	s->status = 1;
	return g;
}

/* Hierarchy usable on every member (agreed once per communicator). */
int coll_hier_ready(hvd_comm_t *comm)
{
	int ok = 0;
	int32_t mine, all = 0;

	if (comm->hier_state)
		return comm->hier_state > 0;
	if (comm_hier(comm, &ok) != HVD_OK)
		ok = 0;
	mine = ok && coll_shm(comm->node) != NULL;
	if (svc_allreduce(&comm->net, &mine, &all, 1, HVD_INT32, HVD_MIN) !=
		    HVD_OK ||
	    !all) {
		comm->hier_state = -1;
		return 0;
	}
	comm->hier_state = 1;
	return 1;
}

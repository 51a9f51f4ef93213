/*
 * coll_common.c - what every host algorithm shares: the tuning table (the
 * environment, read once at hvd_init) and the error exits.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "net/peers.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct coll_tuning tuning;
static int tuning_loaded;

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

static void env_warn(const char *msg)
{
	hvd_log(HVD_LOG_WARNING, "%s", msg);
}

void coll_tuning_load(void)
{
	coll_tuning_parse(&tuning, env_lookup, env_warn);
	tuning_loaded = 1;
	hvd_log(HVD_LOG_INFO,
		"collectives: allreduce %s (rd <= %zu B, two ranks <= "
		"%zu B), bcast %s "
		"(binomial <= %zu B), allgather %s (direct <= %zu B), "
		"segment %zu B x %d, shm %s, hierarchical %s",
		coll_algo_name(tuning.algo[CK_ALLREDUCE]),
		tuning.allreduce_small_max, tuning.allreduce_pair_max,
		coll_algo_name(tuning.algo[CK_BROADCAST]),
		tuning.bcast_small_max,
		coll_algo_name(tuning.algo[CK_ALLGATHER]),
		tuning.allgather_small_max, tuning.segment, tuning.window,
		tuning.shm ? "on" : "off",
		tuning.hier < 0 ? "auto" : tuning.hier ? "on" : "off");
}

const struct coll_tuning *coll_tuning(void)
{
	if (!tuning_loaded)
		coll_tuning_load();
	return &tuning;
}

hvd_status_t coll_fail(hvd_comm_t *comm, hvd_status_t st, const char *fmt,
		       ...)
{
	char what[160];
	va_list ap;
	int f;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (st != HVD_ERR_PEER_FAILED)
		return hvd_error_prefix(st, "%s", what);
	comm->net.broken = st;
	/* The shared-memory layer names group members: name the world
	 * rank when we can tell which one is gone. */
	f = transport_check_failed(&comm->net);
	if (f >= 0 && !strstr(hvd_last_error(), "hvd: rank "))
		hvd_error_prefix(st, "hvd: rank %d failed", f);
	return hvd_error_prefix(st, "%s", what);
}

hvd_status_t coll_broken(hvd_comm_t *comm, const char *what)
{
	int f = transport_group_failed(&comm->net);

	if (f >= 0)
		return hvd_error(comm->net.broken, "hvd: %s: rank %d failed "
					       "earlier (%s); the job cannot "
					       "continue",
				 what, f, transport_fail_reason(f));
	return hvd_error(comm->net.broken,
			 "hvd: %s: an earlier collective on this "
			 "communicator failed (%s)",
			 what, hvd_status_name(comm->net.broken));
}

void *coll_scratch(hvd_comm_t *comm, size_t bytes)
{
	if (bytes == 0)
		bytes = 1;
	if (comm->scratch_cap < bytes) {
		void *p = realloc(comm->scratch, bytes);

		if (!p)
			return NULL;
		comm->scratch = p;
		comm->scratch_cap = bytes;
	}
	return comm->scratch;
}

void leader_hdr_set(struct leader_hdr *h, hvd_status_t st,
		    hvd_comm_t *cross)
{
	memset(h, 0, sizeof(*h));
	h->status = (int32_t)st;
	h->failed = st == HVD_OK ? -1 : transport_check_failed(&cross->net);
	if (st != HVD_OK)
		snprintf(h->why, sizeof(h->why), "%s",
			 h->failed >= 0 ? transport_fail_reason(h->failed)
					: hvd_error_text(hvd_last_error()));
}

hvd_status_t leader_hdr_status(struct leader_hdr *h, int leader,
			       const char *what)
{
	hvd_status_t st = (hvd_status_t)h->status;
	char mate[96];

	if (st == HVD_OK)
		return st;
	if (leader)
		return hvd_error_prefix(st, "%s, inter-node step", what);
	h->why[sizeof(h->why) - 1] = '\0';
	snprintf(mate, sizeof(mate),
		 "%s: this node's leader failed its inter-node step", what);
	return coll_mate_failed(st, h->failed, h->why, mate);
}

hvd_status_t coll_mate_failed(hvd_status_t st, int failed, const char *why,
			      const char *what)
{
	if (failed >= 0) {
		/* The leader's word, of which this rank cannot tell how sure
		 * it is: a suspicion, which the elastic agreement checks. */
		peers_mark(failed, why, 0, PEER_SUSPECT);
		return hvd_error(st, "hvd: rank %d failed: %s", failed,
				 transport_fail_reason(failed));
	}
	return hvd_error(st, "hvd: %s: %s", what, why);
}

static const char *or_unknown(const char *name)
{
	return name ? name : "?";
}

int rs_call_apart(struct xfer *x, int peer, const struct rs_call *c,
		  const struct rs_call *me)
{
	if (c->count == me->count && c->dt == me->dt && c->op == me->op)
		return 0;
	x->st = hvd_error(HVD_ERR_MISMATCH,
			  "hvd: rank %d called it with %llu x %s, %s, where "
			  "this rank has %llu x %s, %s: ranks called the "
			  "collective with different counts or types",
			  x->g->world_ranks[peer], (unsigned long long)c->count,
			  or_unknown(hvd_dtype_name((hvd_dtype_t)c->dt)),
			  or_unknown(hvd_op_name((hvd_op_t)c->op)),
			  (unsigned long long)me->count,
			  hvd_dtype_name((hvd_dtype_t)me->dt),
			  hvd_op_name((hvd_op_t)me->op));
	return 1;
}

/*
 * comm.c - communicators: groups of world ranks with their own context id.
 *
 * Context ids are agreed, not derived: the members take the maximum of
 * their "next free id" counters (a recursive-doubling allreduce over UCX)
 * and everyone moves its counter past it.  Two communicators that share a
 * member therefore never share an id, which is what keeps their tags
 * apart (the tag carries the id and the sender's comm rank).  The world
 * is id 1; id 0 is the channel comm_create agrees over, with the sequence
 * number derived from the member list so that agreements for different
 * groups do not mix.
 *
 * Node structure is computed locally from the world's node map, so a
 * communicator knows at once whether it lives on one node (shared-memory
 * path) or spans nodes evenly (hierarchical path).  The sub-communicators
 * are built on first use, at the same collective on every member, since
 * algorithm selection is deterministic; so is what a backend keeps in its
 * slot (comm/backend.h), which comm.c only hands back at destruction.
 */
#include "config.h"

#include "comm/comm_impl.h"
#include "net/peers.h"
#include "net/service.h"
#include "net/transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hvd_comm_t *world_comm;
static atomic_uint next_ctx = 2;

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static struct create_count {
	uint32_t hash, count;
} *create_counts;
static int ncreate_counts;

hvd_comm_t *comm_world(void)
{
	return world_comm;
}

int comm_rank(const hvd_comm_t *comm)
{
	return comm ? comm->net.rank : -1;
}

int comm_size(const hvd_comm_t *comm)
{
	return comm ? comm->net.size : -1;
}

int comm_world_rank(const hvd_comm_t *comm, int r)
{
	if (!comm || r < 0 || r >= comm->net.size)
		return -1;
	return comm->net.world_ranks[r];
}

struct net_group *comm_net(hvd_comm_t *comm)
{
	return &comm->net;
}

int comm_failed(const hvd_comm_t *comm)
{
	return transport_group_failed(&comm->net);
}

/* ------------------------------------------------------- backends */

static const struct comm_backend *backends[COMM_MAX_BACKENDS];
static int nbackends;

int comm_backend_register(const struct comm_backend *b)
{
	for (int i = 0; i < nbackends; i++)
		if (backends[i] == b)
			return i;
	if (nbackends == COMM_MAX_BACKENDS)
		return -1;
	backends[nbackends] = b;
	return nbackends++;
}

struct comm_slot *comm_slot(hvd_comm_t *comm, int id)
{
	return &comm->slot[id];
}

/* Build a communicator with a known context id (no communication). */
static hvd_status_t comm_new(const int *ranks, int n, uint32_t ctx,
			     hvd_comm_t **out)
{
	const struct hvd_world *w = hvd_world();
	hvd_comm_t *c;
	int *per_node;

	c = calloc(1, sizeof(*c));
	per_node = calloc((size_t)w->num_nodes, sizeof(int));
	if (!c || !per_node)
		goto err_nomem;
	c->net.world_ranks = malloc((size_t)n * sizeof(int));
	if (!c->net.world_ranks)
		goto err_nomem;
	memcpy(c->net.world_ranks, ranks, (size_t)n * sizeof(int));
	c->net.size = n;
	c->net.rank = -1;
	c->net.ctx = ctx;
	for (int i = 0; i < n; i++) {
		int node = w->node_of[ranks[i]];

		if (ranks[i] == w->rank) {
			c->net.rank = i;
			c->local_rank = per_node[node];
		}
		if (per_node[node]++ == 0)
			c->node_count++;
	}
	c->local_size = per_node[w->node_id];
	c->uniform = 1;
	for (int i = 0; i < w->num_nodes; i++)
		if (per_node[i] && per_node[i] != c->local_size)
			c->uniform = 0;
	free(per_node);
	if (c->net.rank < 0) {
		free(c->net.world_ranks);
		free(c);
		return hvd_error(HVD_ERR_NOT_MEMBER,
				 "hvd: this rank (%d) is not in the group "
				 "given to comm_create",
				 w->rank);
	}
	*out = c;
	return HVD_OK;

err_nomem:
	if (c)
		free(c->net.world_ranks);
	free(c);
	free(per_node);
	return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
}

hvd_status_t comm_world_create(const struct hvd_world *w)
{
	int *ranks = malloc((size_t)w->size * sizeof(int));
	hvd_status_t st;

	if (!ranks)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int i = 0; i < w->size; i++)
		ranks[i] = i;
	atomic_store(&next_ctx, 2);
	st = comm_new(ranks, w->size, COMM_CTX_WORLD, &world_comm);
	free(ranks);
	return st;
}

void comm_world_destroy(void)
{
	comm_destroy(world_comm);
	world_comm = NULL;
	/* The next world (an elastic re-forming) starts its channel-0
	 * sequences afresh on every member, newcomers included. */
	pthread_mutex_lock(&create_lock);
	free(create_counts);
	create_counts = NULL;
	ncreate_counts = 0;
	pthread_mutex_unlock(&create_lock);
}

/* Agree on nids consecutive new context ids over comm; returns the
 * first. */
static hvd_status_t agree_ctx(hvd_comm_t *comm, int nids, uint32_t *first)
{
	uint32_t mine = atomic_load(&next_ctx), agreed = mine, cur;
	hvd_status_t st;

	st = svc_allreduce(&comm->net, &mine, &agreed, 1, HVD_INT32, HVD_MAX);
	if (st != HVD_OK)
		return hvd_error_prefix(st, "agreeing on a context id");
	cur = atomic_load(&next_ctx);
	while (cur < agreed + (uint32_t)nids &&
	       !atomic_compare_exchange_weak(&next_ctx, &cur,
					     agreed + (uint32_t)nids))
		;
	/* The last four ids are the transport's: refused calls, elastic
	 * join requests, the elastic agreement, failure notices
	 * (net/refusal.h, net/membership.h, net/notice.h). */
	if (agreed + (uint32_t)nids >= (1u << TP_CTX_BITS) - 4)
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd: out of communicator ids (%u created)",
				 agreed);
	*first = agreed;
	return HVD_OK;
}

static uint32_t hash_ranks(const int *ranks, int n)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (int i = 0; i < n; i++) {
		h ^= (uint32_t)ranks[i];
		h *= 16777619u;
	}
	return h;
}

/* The sequence number for this group's next agreement on channel 0:
 * equal on all members since they create the same groups in order. */
static uint32_t create_seq(const int *ranks, int n)
{
	uint32_t h = hash_ranks(ranks, n), seq = h;
	int i;

	pthread_mutex_lock(&create_lock);
	for (i = 0; i < ncreate_counts; i++)
		if (create_counts[i].hash == h)
			break;
	if (i == ncreate_counts) {
		struct create_count *c = realloc(
			create_counts, (size_t)(i + 1) * sizeof(*c));

		if (c) {
			create_counts = c;
			create_counts[i].hash = h;
			create_counts[i].count = 0;
			ncreate_counts++;
		}
	}
	if (i < ncreate_counts)
		seq = h + 0x9e3779b9u * create_counts[i].count++;
	pthread_mutex_unlock(&create_lock);
	return seq;
}

hvd_status_t comm_create(const int *world_ranks, int n, hvd_comm_t **out)
{
	const struct hvd_world *w = hvd_world();
	hvd_comm_t *tmp;
	hvd_status_t st;
	uint32_t ctx;

	if (!w)
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd: comm_create before hvd_init()");
	if (!world_ranks || n <= 0 || !out)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: comm_create: empty group");
	for (int i = 0; i < n; i++) {
		if (world_ranks[i] < 0 || world_ranks[i] >= w->size)
			return hvd_error(HVD_ERR_INVALID_ARG,
					 "hvd: comm_create: rank %d is not "
					 "in 0..%d",
					 world_ranks[i], w->size - 1);
		for (int j = 0; j < i; j++)
			if (world_ranks[j] == world_ranks[i])
				return hvd_error(HVD_ERR_INVALID_ARG,
						 "hvd: comm_create: rank %d "
						 "listed twice",
						 world_ranks[i]);
	}
	st = comm_new(world_ranks, n, COMM_CTX_CREATE, &tmp);
	if (st != HVD_OK)
		return st;
	tmp->net.seq = create_seq(world_ranks, n);
	st = agree_ctx(tmp, 1, &ctx);
	comm_destroy(tmp);
	if (st != HVD_OK)
		return st;
	return comm_new(world_ranks, n, ctx, out);
}

hvd_status_t comm_dup(hvd_comm_t *comm, hvd_comm_t **out)
{
	hvd_status_t st;
	uint32_t ctx;

	if (!comm || !out)
		return hvd_error(HVD_ERR_INVALID_ARG, "hvd: comm_dup: NULL");
	st = agree_ctx(comm, 1, &ctx);
	if (st != HVD_OK)
		return st;
	return comm_new(comm->net.world_ranks, comm->net.size, ctx, out);
}

hvd_status_t comm_split(hvd_comm_t *parent, const int *world_ranks, int n,
			hvd_comm_t **out)
{
	const struct hvd_world *w = hvd_world();
	hvd_comm_t *child = NULL;
	hvd_status_t st;
	int member = 0;

	for (int i = 0; w && i < n; i++)
		member |= world_ranks[i] == w->rank;
	if (member)
		HVD_CHECK(comm_create(world_ranks, n, &child));
	/* Every member of parent takes part, so that a backend's split
	 * (collective over the parent) completes; a failure in one leaves
	 * no half-made child behind. */
	for (int i = 0; i < nbackends; i++) {
		if (!backends[i]->on_split)
			continue;
		st = backends[i]->on_split(parent, child, i);
		if (st != HVD_OK) {
			comm_destroy(child);
			return hvd_error_prefix(st, "hvd: splitting a "
						    "communicator (%s)",
						backends[i]->name);
		}
	}
	*out = child;
	return HVD_OK;
}

void comm_destroy(hvd_comm_t *comm)
{
	if (!comm)
		return;
	for (int i = nbackends - 1; i >= 0; i--)
		if (backends[i]->on_destroy)
			backends[i]->on_destroy(comm, &comm->slot[i]);
	comm_destroy(comm->node);
	comm_destroy(comm->cross);
	free(comm->local_index);
	free(comm->scratch);
	free(comm->net.world_ranks);
	free(comm);
}

/* ------------------------------------------------------ hierarchy */

/* comm's local_index, cross_index, node_index and member_at (comm_impl.h)
 * for an even placement of local_size members a node. */
static hvd_status_t hier_index(hvd_comm_t *comm)
{
	const struct hvd_world *w = hvd_world();
	int n = comm->net.size, next = 0;
	int *t = malloc(4 * (size_t)n * sizeof(int));
	/* per node id: members seen, then its number (or -1) */
	int *seen = calloc(2 * (size_t)w->num_nodes, sizeof(int));
	int *number = seen ? seen + w->num_nodes : NULL;
	int *crossed = calloc((size_t)comm->local_size, sizeof(int));

	if (!t || !seen || !crossed) {
		free(t);
		free(seen);
		free(crossed);
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	}
	for (int j = 0; j < w->num_nodes; j++)
		number[j] = -1;
	comm->local_index = t;
	comm->cross_index = t + n;
	comm->node_index = t + 2 * n;
	comm->member_at = t + 3 * n;
	for (int i = 0; i < n; i++) {
		int node = w->node_of[comm->net.world_ranks[i]];
		int li = seen[node]++;

		if (number[node] < 0)
			number[node] = next++;
		comm->local_index[i] = li;
		comm->cross_index[i] = crossed[li]++;
		comm->node_index[i] = number[node];
		comm->member_at[number[node] * comm->local_size + li] = i;
	}
	free(seen);
	free(crossed);
	return HVD_OK;
}

hvd_status_t comm_hier(hvd_comm_t *comm, int *ok)
{
	const struct hvd_world *w = hvd_world();
	int *node_ranks = NULL, *cross_ranks = NULL;
	int nn = 0, nc = 0;
	uint32_t ctx;
	hvd_status_t st;

	*ok = comm->hier_state > 0;
	if (comm->hier_state)
		return HVD_OK;
	comm->hier_state = -1;
	if (comm->node_count < 2 || !comm->uniform || comm->local_size < 2)
		return HVD_OK;
	node_ranks = malloc((size_t)comm->net.size * sizeof(int));
	cross_ranks = malloc((size_t)comm->net.size * sizeof(int));
	if (!node_ranks || !cross_ranks) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
		goto out;
	}
	st = hier_index(comm);
	if (st != HVD_OK)
		goto out;
	/* Members in comm order.  The cross group of local index i holds
	 * slice i of every node's reduce-scatter. */
	for (int i = 0; i < comm->net.size; i++) {
		int wr = comm->net.world_ranks[i];

		if (w->node_of[wr] == w->node_id)
			node_ranks[nn++] = wr;
		if (comm->local_index[i] == comm->local_rank)
			cross_ranks[nc++] = wr;
	}
	st = agree_ctx(comm, 2, &ctx);
	if (st != HVD_OK)
		goto out;
	st = comm_new(node_ranks, nn, ctx, &comm->node);
	if (st == HVD_OK)
		st = comm_new(cross_ranks, nc, ctx + 1, &comm->cross);
	if (st != HVD_OK)
		goto out;
	comm->hier_state = 1;
	*ok = 1;
out:
	free(node_ranks);
	free(cross_ranks);
	return st;
}

/*
 * test_bootstrap_layout.c - node ids, local and cross ranks from the
 * peers' node keys (bootstrap_layout, the pure part of bootstrap.c).
 */
#include "net/bootstrap.h"
#include "tap.h"

#include <stdlib.h>

static struct hvd_world w;

static void layout(int rank, int size, const char *const *keys,
		   const int *lr)
{
	free(w.node_of);
	free(w.local_rank_of);
	w.node_of = w.local_rank_of = NULL;
	w.rank = rank;
	w.size = size;
	bootstrap_layout(&w, keys, lr);
}

int main(void)
{
	/* srun -N2 -n4 block: 0,1 on a; 2,3 on b */
	const char *block[] = {"a#0", "a#0", "b#1", "b#1"};
	/* cyclic: 0,2 on a; 1,3 on b */
	const char *cyclic[] = {"a#0", "b#1", "a#0", "b#1"};
	/* same host name, two PMIx node ids (mini-cluster) */
	const char *mini[] = {"vm#0", "vm#0", "vm#1", "vm#1"};
	const char *uneven[] = {"a#0", "a#0", "a#0", "b#1", "b#1"};
	int lr_cyclic[] = {0, 0, 1, 1};
	int lr_bad[] = {0, 0, 0, 1};
	int lr_rev[] = {1, 0, 1, 0};

	plan(22);
	layout(3, 4, block, NULL);
	is_int(w.num_nodes, 2, "block: 2 nodes");
	is_int(w.node_id, 1, "block: rank 3 on node 1");
	is_int(w.local_rank, 1, "block: local rank 1");
	is_int(w.local_size, 2, "block: local size 2");
	is_int(w.cross_rank, 1, "block: cross rank 1");
	is_int(w.cross_size, 2, "block: cross size 2");

	layout(2, 4, cyclic, lr_cyclic);
	is_int(w.node_id, 0, "cyclic: rank 2 on node 0");
	is_int(w.local_rank, 1, "cyclic: local rank 1");
	is_int(w.cross_rank, 0, "cyclic: cross rank 0 (node 0)");
	is_int(w.local_rank_of[3], 1, "cyclic: rank 3 local 1");

	layout(1, 4, cyclic, lr_bad);
	is_int(w.local_rank, 0,
	       "PMIx local ranks that are not a permutation: rank order");
	is_int(w.local_rank_of[3], 1, "fallback gives rank 3 local 1");

	layout(0, 4, block, lr_rev);
	is_int(w.local_rank, 1, "PMIx's permutation is kept (rank 0 local 1)");
	is_int(w.cross_rank, 0, "cross rank among local-rank-1 ranks");
	is_int(w.cross_size, 2, "cross size 2");

	layout(2, 4, mini, NULL);
	is_int(w.num_nodes, 2, "same hostname, two node ids: two nodes");
	is_int(w.node_id, 1, "rank 2 on the second");

	layout(4, 5, uneven, NULL);
	is_int(w.local_size, 2, "uneven: local size 2 on node 1");
	is_int(w.local_rank, 1, "uneven: local rank 1");
	is_int(w.cross_size, 2, "uneven: local rank 1 exists on both nodes");
	layout(2, 5, uneven, NULL);
	is_int(w.cross_size, 1, "uneven: local rank 2 only on node 0");
	is_int(w.cross_rank, 0, "uneven: cross rank 0");
	free(w.node_of);
	free(w.local_rank_of);
	return done_testing();
}

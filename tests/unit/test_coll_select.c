/*
 * test_coll_select.c - the collective tuning table and algorithm
 * selection (runtime/coll/coll_select.c), driven by a fake environment.
 *
 * With --choices it reads "ranks bytes ..." lines and prints "ranks
 * bytes algorithm" for a float32 allreduce of that many bytes on that
 * many ranks, one a node, with the default tuning: tests/unit/
 * cost_model.sh holds contrib/bench/cost-model's choices to these.
 */
#include "coll/coll_impl.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

static const char *env[32][2];
static int nenv, nwarn;

static const char *lookup(const char *name)
{
	for (int i = 0; i < nenv; i++)
		if (strcmp(env[i][0], name) == 0)
			return env[i][1];
	return NULL;
}

static void warn(const char *msg)
{
	nwarn++;
	diag("warning: %s", msg);
}

static void setenv_(const char *k, const char *v)
{
	env[nenv][0] = k;
	env[nenv][1] = v;
	nenv++;
}

static struct coll_place place(int size, int nodes, int uniform, int ls,
			       int shm)
{
	struct coll_place p = {size, nodes, uniform, ls, shm, 0};

	return p;
}

static int print_choices(void)
{
	struct coll_tuning t;
	char line[256];

	coll_tuning_parse(&t, lookup, warn);
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long long bytes;
		int p;
		struct coll_place at;

		if (sscanf(line, "%d %llu", &p, &bytes) != 2 || p < 1) {
			fprintf(stderr, "test_coll_select --choices: expected "
					"'ranks bytes', got: %s",
				line);
			return 2;
		}
		at = place(p, p, 1, 1, 1);
		printf("%d %llu %s\n", p, bytes,
		       coll_algo_name(coll_select(&t, CK_ALLREDUCE,
						  (size_t)bytes,
						  (size_t)bytes / 4, &at)));
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct coll_tuning t;
	struct coll_place one_node = place(4, 1, 1, 4, 1);
	struct coll_place no_shm = place(4, 1, 1, 4, 0);
	struct coll_place two_nodes = place(8, 2, 1, 4, 1);
	struct coll_place uneven = place(5, 2, 0, 3, 1);
	struct coll_place one_per_node = place(4, 4, 1, 1, 1);
	struct coll_place pair = place(2, 2, 1, 1, 1);
	struct coll_place huge = place(8192, 1024, 1, 8, 1);
	struct coll_place crowded;

	if (argc > 1 && strcmp(argv[1], "--choices") == 0)
		return print_choices();
	plan(118);
	coll_tuning_parse(&t, lookup, warn);
	is_int(t.allreduce_small_max, 64 << 10, "default rd threshold 64K");
	is_int(t.allreduce_pair_max, 512 << 10,
	       "default rd threshold between two ranks 512K");
	is_int(t.segment, 256 << 10, "default segment 256K");
	is_int(t.segment_auto, 1, "the segment is libhvd's to pick by default");
	is_int(t.window, 4, "default window 4");
	is_int(t.steps, 0, "the alltoall's steps in flight: libhvd's by default");
	is_int(t.shm, 1, "shm on by default");
	is_int(t.hier, -1, "hierarchical: auto by default");
	is_int(t.hier_leader_max, 32 << 10,
	       "hierarchical through the leaders up to 32 KiB by default");
	is_int(nwarn, 0, "no warnings for an empty environment");

	/* allreduce */
	is_int(coll_select(&t, CK_ALLREDUCE, 8, 2, &one_node), ALGO_SHM,
	       "one node with shm: shm");
	is_int(coll_select(&t, CK_ALLREDUCE, 8, 2, &no_shm), ALGO_RD,
	       "no shm, 8 B: recursive doubling");
	is_int(coll_select(&t, CK_ALLREDUCE, 64 << 10, 16384, &no_shm),
	       ALGO_RD, "no shm, 64 KiB: still rd (threshold inclusive)");
	is_int(coll_select(&t, CK_ALLREDUCE, (64 << 10) + 4, 16385, &no_shm),
	       ALGO_HALVING, "no shm, above 64 KiB, 4 ranks: recursive "
			     "halving and doubling");
	is_int(coll_select(&t, CK_ALLREDUCE, 8 << 20, 2 << 20, &two_nodes),
	       ALGO_HIER, "two even nodes: hierarchical");
	is_int(coll_select(&t, CK_ALLREDUCE, 8 << 20, 2 << 20, &uneven),
	       ALGO_RING, "uneven nodes: flat ring");
	is_int(coll_select(&t, CK_ALLREDUCE, 16 << 20, 4 << 20, &one_per_node),
	       ALGO_RING, "one rank per node, 16 MiB: flat ring");
	is_int(coll_select(&t, CK_ALLREDUCE, 1 << 20, 3, &uneven), ALGO_RD,
	       "fewer elements than ranks: rd whatever the bytes");
	/* two ranks: one exchange of all of it up to 512 KiB */
	is_int(coll_select(&t, CK_ALLREDUCE, 512 << 10, 1 << 17, &pair),
	       ALGO_RD, "two ranks, 512 KiB: rd (the pair threshold, inclusive)");
	is_int(coll_select(&t, CK_ALLREDUCE, (512 << 10) + 4, (1 << 17) + 1,
			   &pair),
	       ALGO_RING, "two ranks, above 512 KiB: ring");
	is_int(coll_select(&t, CK_ALLREDUCE, 128 << 10, 32768, &one_per_node),
	       ALGO_HALVING, "four ranks, 128 KiB: halving (the pair rule is "
			     "for two)");
	is_int(coll_select(&t, CK_ALLREDUCE, 1 << 20, 1 << 18, &one_per_node),
	       ALGO_HALVING, "four ranks, 1 MiB: halving (256K a rank, "
			     "inclusive)");
	is_int(coll_select(&t, CK_ALLREDUCE, (1 << 20) + 4, (1 << 18) + 1,
			   &one_per_node),
	       ALGO_DIRECT, "four ranks, above 1 MiB: direct");
	is_int(coll_allreduce_halving(&t, 2 << 20, 1 << 19, 8), 1,
	       "eight ranks, 2 MiB: halving");
	is_int(coll_allreduce_halving(&t, 8 << 20, 1 << 21, 1024), 1,
	       "the hierarchy's step between 1024 nodes, 8 MiB: halving");
	is_int(coll_allreduce_halving(&t, (8 << 20) + 4, (1 << 21) + 1, 1024),
	       0, "... above 8 MiB (its scratch): not");
	is_int(coll_allreduce_halving(&t, 1 << 20, 1 << 18, 6), 0,
	       "six ranks, 1 MiB: not (folded onto four, it pays up to "
	       "64 KiB, rd's)");
	is_int(coll_allreduce_halving(&t, 96 << 10, 24576, 7), 1,
	       "seven ranks, 96 KiB: folded onto four (3 x 32K)");
	is_int(coll_allreduce_halving(&t, (96 << 10) + 4, 24577, 7), 0,
	       "... above: the ring");
	is_int(coll_allreduce_halving(&t, 224 << 10, 57344, 12), 1,
	       "twelve ranks, 224 KiB: folded onto eight (7 x 32K)");
	is_int(coll_allreduce_halving(&t, (224 << 10) + 4, 57345, 12), 0,
	       "... above: the ring");
	is_int(coll_allreduce_halving(&t, 8 << 20, 1 << 21, 1000), 1,
	       "1000 nodes, 8 MiB: folded onto 512");
	is_int(coll_allreduce_halving(&t, 1 << 20, 1 << 18, 5), 0,
	       "five ranks, 1 MiB: the ring (the fold never pays on five)");
	is_int(coll_allreduce_halving(&t, 1 << 20, 1 << 18, 2), 0,
	       "two ranks: not (rd, then the ring)");
	is_int(coll_allreduce_rd(&t, 512 << 10, 131072, 2), 1,
	       "the hierarchy's step between two nodes, 512 KiB: rd");
	is_int(coll_allreduce_rd(&t, 512 << 10, 131072, 3), 0,
	       "... between three nodes: ring");
	is_int(coll_select(&t, CK_ALLGATHER, 8 * 8192, 8192, &huge),
	       ALGO_BRUCK, "small allgather of 8192 ranks: Bruck");
	is_int(coll_select(&t, CK_BROADCAST, 1 << 20, 1 << 20, &huge),
	       ALGO_BINOMIAL, "1 MiB broadcast to 8192 ranks: binomial");
	is_int(coll_select(&t, CK_BROADCAST, 512u << 20, 512u << 20, &huge),
	       ALGO_CHAIN, "512 MiB broadcast to 8192 ranks: chain");
	is_int(coll_select(&t, CK_BROADCAST, 1 << 20, 1 << 20, &pair),
	       ALGO_CHAIN, "1 MiB broadcast to 2 ranks: chain");
	is_int(coll_select(&t, CK_REDUCESCATTER, 4096, 1024, &pair),
	       ALGO_DIRECT, "small reducescatter of two ranks: the exchange "
			    "(direct), never rd");
	is_int(coll_select(&t, CK_REDUCESCATTER, 64 << 10, 16384, &pair),
	       ALGO_DIRECT, "two ranks, 64 KiB: direct (inclusive)");
	is_int(coll_select(&t, CK_REDUCESCATTER, (64 << 10) + 8, 16386, &pair),
	       ALGO_RING, "two ranks, above 64 KiB: the ring's segments");
	is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18, &pair),
	       ALGO_RING, "two ranks, 1 MiB: the ring (the 3-4 rank rule is "
			  "not theirs)");
	is_int(coll_select(&t, CK_REDUCESCATTER, 4096, 1024, &one_per_node),
	       ALGO_HALVING, "small reducescatter of four ranks: recursive "
			     "halving");
	is_int(coll_select(&t, CK_REDUCESCATTER, 12, 3, &one_per_node),
	       ALGO_RD, "four ranks, fewer elements than ranks: rd");

	/* other collectives */
	is_int(coll_select(&t, CK_BROADCAST, 100, 100, &two_nodes),
	       ALGO_BINOMIAL, "small broadcast: binomial");
	is_int(coll_select(&t, CK_BROADCAST, 1 << 20, 1 << 20, &two_nodes),
	       ALGO_CHAIN, "large broadcast: chain");
	crowded = one_per_node;
	crowded.size = crowded.nodes = 3;
	is_int(coll_select(&t, CK_BROADCAST, 100, 100, &crowded),
	       ALGO_BINOMIAL, "small broadcast, 3 x 1: binomial");
	crowded.crowded = 1;
	is_int(coll_select(&t, CK_BROADCAST, 100, 100, &crowded),
	       ALGO_CHAIN, "small broadcast, 3 x 1 on a crowded machine: chain");
	is_int(coll_select(&t, CK_BROADCAST, 1 << 20, 1 << 20, &crowded),
	       ALGO_CHAIN, "large broadcast, 3 x 1, crowded: chain as before");
	is_int(coll_select(&t, CK_ALLGATHER, 48 << 10, 12288, &crowded),
	       ALGO_DIRECT, "small allgather, 3 x 1, crowded: direct");
	crowded.size = crowded.nodes = 4;
	is_int(coll_select(&t, CK_ALLGATHER, 48 << 10, 12288, &crowded),
	       ALGO_BRUCK, "small allgather, 4 x 1, crowded: Bruck");
	is_int(coll_select(&t, CK_ALLGATHER, 48 << 10, 12288, &one_per_node),
	       ALGO_DIRECT, "small allgather, 4 x 1, not crowded: direct");
	is_int(coll_select(&t, CK_ALLGATHER, (64 << 10) + 4, 16385, &crowded),
	       ALGO_RING, "above 64 KiB, 4 x 1, crowded: the ring");
	is_int(coll_select(&t, CK_BROADCAST, 1 << 20, 1 << 20, &one_node),
	       ALGO_SHM, "broadcast within a node: shm");

	/* Shared memory unusable after all (no room in /dev/shm): the
	 * rules without it, as for a job with HVD_SHM=0.  The fallbacks had
	 * rules of their own: the binomial tree for every small broadcast
	 * and a chain for every large one, recursive doubling for the small
	 * reducescatter of two ranks. */
	{
		struct coll_place busy = one_node, duo = place(2, 1, 1, 2, 1);
		const struct {
			enum coll_kind k;
			size_t bytes;
			const struct coll_place *p;
			enum coll_algo want;
			const char *what;
		} flat[] = {
			{CK_BROADCAST, 100, &busy, ALGO_CHAIN,
			 "small broadcast, crowded: chain"},
			{CK_BROADCAST, 100, &one_node, ALGO_BINOMIAL,
			 "small broadcast: binomial"},
			{CK_BROADCAST, 300 << 10, &one_node, ALGO_BINOMIAL,
			 "300 KiB broadcast to 4 ranks: binomial"},
			{CK_REDUCESCATTER, 4096, &duo, ALGO_DIRECT,
			 "4 KiB reducescatter of 2 ranks: the exchange"},
			{CK_REDUCESCATTER, 4096, &two_nodes, ALGO_HALVING,
			 "4 KiB reducescatter, 2 x 4: recursive halving"},
			{CK_ALLGATHER, 100, &two_nodes, ALGO_DIRECT,
			 "small allgather, 2 x 4: direct"},
		};

		busy.crowded = 1;
		is_int(coll_select(&t, CK_REDUCESCATTER, 4096, 1024, &duo),
		       ALGO_SHM, "reducescatter of 2 ranks on a node: shm");
		for (size_t i = 0; i < sizeof(flat) / sizeof(flat[0]); i++)
			is_int(coll_select_flat(&t, flat[i].k, flat[i].bytes,
						flat[i].bytes / 4, flat[i].p),
			       flat[i].want, "no shm after all, %s",
			       flat[i].what);
	}
	is_int(coll_select(&t, CK_ALLGATHER, 100, 100, &two_nodes),
	       ALGO_HIER, "small allgather across even nodes: the leaders");
	is_int(coll_select(&t, CK_ALLGATHER, 64 << 10, 8192, &two_nodes),
	       ALGO_HIER, "64 KiB allgather across even nodes: the leaders");
	is_int(coll_select(&t, CK_ALLGATHER, 128 << 10, 8192, &two_nodes),
	       ALGO_HIER, "128 KiB allgather across even nodes: cross rings");
	is_int(coll_leaders(&t, CK_ALLGATHER, 128 << 10, &two_nodes), 0,
	       "... not through the leaders");
	is_int(coll_select(&t, CK_ALLGATHER, 6 << 10, 1536, &huge),
	       ALGO_HIER, "6 KiB allgather of 1024 nodes x 8: the leaders");
	is_int(coll_select(&t, CK_ALLGATHER, 100, 100, &one_per_node),
	       ALGO_DIRECT, "small allgather, one rank per node: direct");
	is_int(coll_select(&t, CK_REDUCESCATTER, 4096, 1024, &two_nodes),
	       ALGO_HIER, "small reducescatter across even nodes: the leaders");
	is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18, &two_nodes),
	       ALGO_HIER, "large reducescatter across even nodes: by local "
			  "index");
	is_int(coll_leaders(&t, CK_REDUCESCATTER, 1 << 20, &two_nodes), 0,
	       "... not through the leaders");
	is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18, &uneven),
	       ALGO_RING, "large reducescatter, uneven nodes: ring");
	is_int(coll_select(&t, CK_ALLGATHER, 1 << 20, 1 << 20, &two_nodes),
	       ALGO_HIER, "large allgather across even nodes: hierarchical");
	is_int(coll_select(&t, CK_ALLGATHER, 1 << 20, 1 << 20, &uneven),
	       ALGO_RING, "large allgather, uneven nodes: ring");
	is_int(coll_select(&t, CK_ALLTOALL, 4096, 1024, &two_nodes),
	       ALGO_HIER, "small alltoall across even nodes: the leaders");
	is_int(coll_select(&t, CK_ALLTOALL, 128 << 10, 32768, &huge),
	       ALGO_HIER, "128 KiB alltoall of 1024 nodes x 8: the leaders");
	is_int(coll_select(&t, CK_ALLTOALL, 256 << 10, 65536, &two_nodes),
	       ALGO_PAIRWISE, "256 KiB alltoall across even nodes: pairwise");
	is_int(coll_select(&t, CK_ALLTOALL, 4096, 1024, &uneven),
	       ALGO_PAIRWISE, "small alltoall, uneven nodes: pairwise");
	is_int(coll_select(&t, CK_BARRIER, 0, 0, &two_nodes), ALGO_DISSEM,
	       "barrier across nodes: dissemination");
	is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18, &no_shm),
	       ALGO_HALVING, "1 MiB reducescatter of 4 ranks: recursive "
			     "halving, not direct");
	is_int(coll_select(&t, CK_REDUCESCATTER, 8 << 20, 1 << 21, &no_shm),
	       ALGO_HALVING, "8 MiB, 4 ranks: recursive halving (inclusive)");
	is_int(coll_select(&t, CK_REDUCESCATTER, (8 << 20) + 4,
			   (1 << 21) + 1, &no_shm),
	       ALGO_RING, "above 8 MiB, 4 ranks: ring (the halving's "
			  "scratch would be the whole buffer)");
	{
		struct coll_place six = place(6, 6, 1, 1, 1);

		is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18,
				   &six),
		       ALGO_RING, "1 MiB reducescatter of 6 ranks (not a "
				  "power of two): ring");
		is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18,
				   &huge),
		       ALGO_HIER, "1 MiB reducescatter, 1024 nodes x 8: by "
				  "local index");
	}
	{
		struct coll_place three = place(3, 3, 1, 1, 1);

		is_int(coll_select(&t, CK_REDUCESCATTER, 32 << 10, 8192,
				   &three),
		       ALGO_RD, "32 KiB reducescatter, 3 x 1: rd (inclusive)");
		is_int(coll_select(&t, CK_REDUCESCATTER, (32 << 10) + 12,
				   8195, &three),
		       ALGO_DIRECT, "above 32 KiB, 3 x 1: direct");
		is_int(coll_select(&t, CK_REDUCESCATTER, 64 << 10, 16384,
				   &three),
		       ALGO_DIRECT, "64 KiB, 3 x 1: direct, not rd up to "
				    "HVD_REDUCESCATTER_SMALL_MAX");
		is_int(coll_select(&t, CK_REDUCESCATTER, 8 << 20, 1 << 21,
				   &three),
		       ALGO_DIRECT, "8 MiB, 3 x 1: direct (inclusive)");
		is_int(coll_select(&t, CK_ALLREDUCE, 128 << 10, 32768,
				   &three),
		       ALGO_RING, "128 KiB allreduce, 3 x 1: ring (inclusive)");
		is_int(coll_select(&t, CK_ALLREDUCE, (128 << 10) + 12, 32771,
				   &three),
		       ALGO_DIRECT, "above 128 KiB allreduce, 3 x 1: direct");
		is_int(coll_select(&t, CK_ALLREDUCE, (8 << 20) + 4,
				   (1 << 21) + 1, &three),
		       ALGO_RING, "above 8 MiB allreduce, 3 x 1: ring");
		is_int(coll_select(&t, CK_REDUCESCATTER, 64 << 10, 16384,
				   &uneven),
		       ALGO_RD, "64 KiB reducescatter of 5 ranks: rd, as before");
	}

	/* overrides */
	setenv_("HVD_ALLREDUCE_ALGO", "ring");
	setenv_("HVD_ALLREDUCE_SMALL_MAX", "1K");
	setenv_("HVD_ALLREDUCE_PAIR_MAX", "0");
	setenv_("HVD_RING_SEGMENT", "64K");
	setenv_("HVD_BCAST_ALGO", "pairwise"); /* not a bcast algorithm */
	setenv_("HVD_SHM", "maybe");           /* not a boolean */
	setenv_("HOROVOD_HIERARCHICAL_ALLREDUCE", "0");
	setenv_("HVD_ALLGATHER_SMALL_MAX", "12Q"); /* malformed */
	setenv_("HVD_HIER_LEADER_MAX", "0");
	setenv_("HVD_ALLTOALL_WINDOW", "2");
	nwarn = 0;
	coll_tuning_parse(&t, lookup, warn);
	is_int(t.steps, 2, "HVD_ALLTOALL_WINDOW=2");
	is_int(t.algo[CK_ALLREDUCE], ALGO_RING, "HVD_ALLREDUCE_ALGO=ring");
	is_int(t.allreduce_small_max, 1024, "HVD_ALLREDUCE_SMALL_MAX=1K");
	is_int(t.allreduce_pair_max, 0, "HVD_ALLREDUCE_PAIR_MAX=0");
	is_int(coll_allreduce_rd(&t, 4096, 1024, 2), 0,
	       "HVD_ALLREDUCE_PAIR_MAX=0 and the threshold at 1K: two ranks, "
	       "4 KiB by the ring");
	is_int(t.segment, 64 << 10, "HVD_RING_SEGMENT=64K");
	is_int(t.segment_auto, 0, "HVD_RING_SEGMENT=64K is the user's choice");
	is_int(t.algo[CK_BROADCAST], ALGO_AUTO,
	       "an algorithm of another collective is refused");
	is_int(t.shm, 1, "malformed HVD_SHM keeps the default");
	is_int(t.allgather_small_max, 64 << 10,
	       "malformed size keeps the default");
	is_int(t.hier_leader_max, 0, "HVD_HIER_LEADER_MAX=0: never");
	is_int(coll_select(&t, CK_ALLGATHER, 100, 100, &two_nodes),
	       ALGO_DIRECT, "hierarchy off: small allgathers direct");
	is_int(coll_select(&t, CK_REDUCESCATTER, 1 << 20, 1 << 18, &two_nodes),
	       ALGO_HALVING, "hierarchy off: 1 MiB reducescatter of 8 ranks "
			     "by recursive halving");
	is_int(coll_select(&t, CK_REDUCESCATTER, 16 << 20, 1 << 22, &two_nodes),
	       ALGO_RING, "hierarchy off: 16 MiB reducescatter by the ring");
	is_int(coll_select(&t, CK_ALLTOALL, 4096, 1024, &two_nodes),
	       ALGO_PAIRWISE, "hierarchy off: small alltoalls pairwise");
	is_int(nwarn, 3, "three warnings");
	is_int(coll_select(&t, CK_ALLREDUCE, 8, 2, &no_shm), ALGO_RING,
	       "forced ring even for 8 bytes");
	is_int(coll_select(&t, CK_ALLREDUCE, 8 << 20, 2 << 20, &two_nodes),
	       ALGO_RING, "forced ring beats hierarchical");
	nenv = 0;
	setenv_("HVD_ALLREDUCE_ALGO", "shm");
	coll_tuning_parse(&t, lookup, warn);
	is_int(coll_select(&t, CK_ALLREDUCE, 8 << 20, 2 << 20, &two_nodes),
	       ALGO_HIER, "forced shm across nodes falls back to auto");
	/* A malformed segment or step window is warned about and left to
	 * libhvd, as if unset: "using the default" means the choice an
	 * unset one gets. */
	nenv = 0;
	setenv_("HVD_RING_SEGMENT", "12Q");
	setenv_("HVD_ALLTOALL_WINDOW", "0");
	nwarn = 0;
	coll_tuning_parse(&t, lookup, warn);
	is_int(t.segment_auto, 1, "malformed HVD_RING_SEGMENT: libhvd picks");
	is_int(t.steps, 0, "HVD_ALLTOALL_WINDOW=0 (under 1): libhvd picks");
	is_int(nwarn, 2, "... each with a warning");
	nenv = 0;
	setenv_("HVD_REDUCESCATTER_ALGO", "direct");
	coll_tuning_parse(&t, lookup, warn);
	is_int(coll_select(&t, CK_REDUCESCATTER, 64, 16, &uneven), ALGO_DIRECT,
	       "HVD_REDUCESCATTER_ALGO=direct: forced at any size and ranks");
	nenv = 0;
	setenv_("HVD_REDUCESCATTER_ALGO", "halving");
	coll_tuning_parse(&t, lookup, warn);
	is_int(coll_select(&t, CK_REDUCESCATTER, 64 << 20, 1 << 24,
			   &one_per_node),
	       ALGO_HALVING, "HVD_REDUCESCATTER_ALGO=halving: forced at any "
			     "size on 4 ranks");
	is_int(coll_select(&t, CK_REDUCESCATTER, 64 << 10, 16384, &uneven),
	       ALGO_RD, "... and on 5 ranks libhvd picks (rd at 64 KiB)");
	return done_testing();
}

/*
 * coll_select.c - which algorithm runs a collective: a small table of
 * size thresholds, overridable from the environment (doc/design.md,
 * "Collectives", lists the variables and why the defaults are what they
 * are).  Pure functions: the environment comes in through a lookup
 * callback so that tests/unit/test_coll_select.c can drive it.
 *
 * Selection must give the same answer on every member of a communicator,
 * so it only looks at facts every member shares: the byte count of the
 * call, the communicator's placement (members, nodes, evenness), and the
 * job-wide environment.
 */
#include "config.h"

#include "coll/coll_impl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const algo_names[ALGO_COUNT] = {
	[ALGO_AUTO] = "auto",         [ALGO_RD] = "rd",
	[ALGO_RING] = "ring",         [ALGO_SHM] = "shm",
	[ALGO_HIER] = "hier",         [ALGO_BINOMIAL] = "binomial",
	[ALGO_CHAIN] = "chain",       [ALGO_DIRECT] = "direct",
	[ALGO_PAIRWISE] = "pairwise", [ALGO_DISSEM] = "dissemination",
	[ALGO_BRUCK] = "bruck",       [ALGO_HALVING] = "halving",
};

static const char *const kind_names[CK_COUNT] = {
	[CK_ALLREDUCE] = "allreduce",         [CK_ALLGATHER] = "allgather",
	[CK_BROADCAST] = "bcast",             [CK_ALLTOALL] = "alltoall",
	[CK_REDUCESCATTER] = "reducescatter", [CK_BARRIER] = "barrier",
};

/* The direct reducescatter: how many ranks at most, and from (above) and
 * up to which size; for two ranks, up to which size (case
 * CK_REDUCESCATTER below).  The direct allreduce (its reducescatter,
 * then one round): the same ranks and limit, from above AR_DIRECT_FROM. */
#define RS_DIRECT_RANKS 4
#define RS_DIRECT_FROM ((size_t)32 << 10)
#define RS_DIRECT_MAX ((size_t)8 << 20)
#define RS_PAIR_DIRECT_MAX ((size_t)64 << 10)
#define AR_DIRECT_FROM ((size_t)128 << 10)
#define RS_HALVING_MAX ((size_t)8 << 20)
#define AR_HALVING_PER_RANK ((size_t)256 << 10)
#define AR_FOLD_STEP ((size_t)32 << 10)

/* Three or four ranks, bytes above from and within the scratch limit. */
static int direct_fits(const struct coll_place *p, size_t bytes, size_t from)
{
	return p->size > 2 && p->size <= RS_DIRECT_RANKS && bytes > from &&
	       bytes <= RS_DIRECT_MAX;
}

/* Which algorithms can run which collective. */
static const unsigned allowed[CK_COUNT] = {
	[CK_ALLREDUCE] = 1u << ALGO_RD | 1u << ALGO_RING | 1u << ALGO_SHM |
			 1u << ALGO_HIER | 1u << ALGO_DIRECT |
			 1u << ALGO_HALVING,
	[CK_ALLGATHER] = 1u << ALGO_DIRECT | 1u << ALGO_RING |
			 1u << ALGO_BRUCK | 1u << ALGO_HIER,
	[CK_BROADCAST] = 1u << ALGO_BINOMIAL | 1u << ALGO_CHAIN |
			 1u << ALGO_SHM,
	[CK_ALLTOALL] = 1u << ALGO_PAIRWISE | 1u << ALGO_HIER,
	[CK_REDUCESCATTER] = 1u << ALGO_RD | 1u << ALGO_RING | 1u << ALGO_SHM |
			     1u << ALGO_HIER | 1u << ALGO_DIRECT |
			     1u << ALGO_HALVING,
	[CK_BARRIER] = 1u << ALGO_DISSEM | 1u << ALGO_SHM,
};

const char *coll_algo_name(enum coll_algo a)
{
	return (unsigned)a < ALGO_COUNT ? algo_names[a] : "?";
}

const char *coll_kind_name(enum coll_kind k)
{
	return (unsigned)k < CK_COUNT ? kind_names[k] : "?";
}

static void warnf(void (*warn)(const char *), const char *fmt,
		  const char *name, const char *val, const char *extra)
{
	char msg[256];

	if (!warn)
		return;
	snprintf(msg, sizeof(msg), fmt, name, val, extra);
	warn(msg);
}

static size_t parse_size_knob(const char *(*lookup)(const char *),
			      void (*warn)(const char *), const char *name,
			      size_t def, size_t min)
{
	const char *v = lookup(name);
	size_t r;

	if (!v || !*v)
		return def;
	if (hvd_parse_size(v, &r) < 0 || r < min) {
		warnf(warn, "%s=%s is not a valid size (e.g. 65536, 64K, 1M)%s",
		      name, v, "; using the default");
		return def;
	}
	return r;
}

void coll_tuning_parse(struct coll_tuning *t,
		       const char *(*lookup)(const char *name),
		       void (*warn)(const char *msg))
{
	char name[64];
	const char *v;

	memset(t, 0, sizeof(*t));
	for (int k = 0; k < CK_COUNT; k++) {
		int found = 0;

		snprintf(name, sizeof(name), "HVD_%s_ALGO", kind_names[k]);
		for (char *p = name; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		v = lookup(name);
		t->algo[k] = ALGO_AUTO;
		if (!v || !*v)
			continue;
		for (int a = 0; a < ALGO_COUNT; a++)
			if (strcasecmp(v, algo_names[a]) == 0 &&
			    (a == ALGO_AUTO || (allowed[k] >> a) & 1u)) {
				t->algo[k] = (enum coll_algo)a;
				found = 1;
			}
		if (!found)
			warnf(warn, "%s=%s is not an algorithm for this "
				    "collective%s",
			      name, v, "; using auto");
	}
	t->allreduce_small_max = parse_size_knob(
		lookup, warn, "HVD_ALLREDUCE_SMALL_MAX", 64 << 10, 0);
	/* Two ranks: one exchange of the whole buffer, where the ring
	 * makes two of half of it one after the other (2 netns nodes x 1,
	 * medians of 6: 128 KiB 73 -> 54 us, 512 KiB 187 -> 161; against
	 * OpenMPI 1.66-1.75x -> 2.31-2.46x and 1.14-1.20x -> 1.35-1.67x;
	 * from 1 MiB alike; doc/design.md). */
	t->allreduce_pair_max = parse_size_knob(
		lookup, warn, "HVD_ALLREDUCE_PAIR_MAX", 512 << 10, 0);
	t->reducescatter_small_max = parse_size_knob(
		lookup, warn, "HVD_REDUCESCATTER_SMALL_MAX", 64 << 10, 0);
	t->bcast_small_max = parse_size_knob(lookup, warn,
					     "HVD_BCAST_SMALL_MAX", 64 << 10, 0);
	t->allgather_small_max = parse_size_knob(
		lookup, warn, "HVD_ALLGATHER_SMALL_MAX", 64 << 10, 0);
	t->alltoall_small_max = parse_size_knob(
		lookup, warn, "HVD_ALLTOALL_SMALL_MAX", 128 << 10, 0);
	/* 2 x 2 ranks across two netns nodes, 32 KiB: 32-49 us through the
	 * node leaders, 40-62 us split in slices; 64 KiB: 80-164 against
	 * 46-69 (doc/design.md). */
	t->hier_leader_max = parse_size_knob(lookup, warn,
					     "HVD_HIER_LEADER_MAX", 32 << 10, 0);
	/* Unset or malformed (warned about; 0 then, as no valid value is):
	 * libhvd's to pick (coll_ring.c's ring_segment), 256K where it
	 * does not. */
	t->segment = parse_size_knob(lookup, warn, "HVD_RING_SEGMENT", 0, 64);
	t->segment_auto = t->segment == 0;
	if (t->segment_auto)
		t->segment = 256 << 10;
	t->window = (int)parse_size_knob(lookup, warn, "HVD_RING_WINDOW", 4,
					 1);
	if (t->window > 64)
		t->window = 64;
	/* Unset: coll_gather.c's step_window decides. */
	t->steps = (int)parse_size_knob(lookup, warn, "HVD_ALLTOALL_WINDOW",
					0, 1);
	if (t->steps > 1024)
		t->steps = 1024;
	t->shm = 1;
	v = lookup("HVD_SHM");
	if (v && *v) {
		if (!strcmp(v, "0") || !strcasecmp(v, "false") ||
		    !strcasecmp(v, "no") || !strcasecmp(v, "off"))
			t->shm = 0;
		else if (strcmp(v, "1") && strcasecmp(v, "true") &&
			 strcasecmp(v, "yes") && strcasecmp(v, "on"))
			warnf(warn, "%s=%s is not a boolean (1/0)%s", "HVD_SHM",
			      v, "; using 1");
	}
	t->hier = -1;
	v = lookup("HOROVOD_HIERARCHICAL_ALLREDUCE");
	if (v && *v) {
		if (!strcmp(v, "0") || !strcasecmp(v, "false") ||
		    !strcasecmp(v, "off"))
			t->hier = 0;
		else if (!strcmp(v, "1") || !strcasecmp(v, "true") ||
			 !strcasecmp(v, "on"))
			t->hier = 1;
		else
			warnf(warn, "%s=%s is not a boolean (1/0)%s",
			      "HOROVOD_HIERARCHICAL_ALLREDUCE", v,
			      "; using auto");
	}
}

static int usable(enum coll_kind k, enum coll_algo a,
		  const struct coll_place *p)
{
	if (!((allowed[k] >> a) & 1u))
		return 0;
	if (a == ALGO_SHM)
		return p->shm && p->nodes == 1 && p->size > 1;
	if (a == ALGO_HIER)
		return p->shm && p->nodes > 1 && p->uniform &&
		       p->local_size > 1;
	/* The allreduce folds any number of ranks onto a power of two
	 * (halving_allreduce); the reducescatter's blocks are the ranks'. */
	if (a == ALGO_HALVING)
		return p->size > 1 &&
		       (coll_pow2(p->size) ||
			(k == CK_ALLREDUCE && p->size > 2));
	return 1;
}

/* A small reducescatter or allgather, on a placement the hierarchy
 * serves, and the hierarchy not turned off: the node leaders' allreduce
 * does it (2 x 2: 2.0-2.9x faster than rd or direct up to 64 KiB).  Its
 * recursive doubling sends the whole buffer log2(nodes) times, so the
 * limit shrinks with the nodes: 1024 nodes x 8, the 64 KiB allgather of
 * request lengths stays with Bruck (13 rounds, 64 KiB in all). */
int coll_leaders(const struct coll_tuning *t, enum coll_kind k,
		 size_t bytes, const struct coll_place *p)
{
	size_t max = k == CK_ALLGATHER	  ? t->allgather_small_max
		     : k == CK_ALLTOALL ? t->alltoall_small_max
					: t->reducescatter_small_max;
	int lg = 1;

	/* The alltoall's leaders send each block once, whatever the
	 * number of nodes. */
	while (k != CK_ALLTOALL && (1 << lg) < p->nodes)
		lg++;
	return t->hier != 0 && usable(k, ALGO_HIER, p) &&
	       bytes * (size_t)lg <= max;
}

/* The ring splits the buffer in size blocks: below one element per rank,
 * or below the latency threshold, the log(p) rounds of recursive doubling
 * win; between two ranks, up to a larger size (allreduce_pair_max). */
int coll_allreduce_rd(const struct coll_tuning *t, size_t bytes,
		      size_t count, int size)
{
	return bytes <= t->allreduce_small_max || count < (size_t)size ||
	       (size == 2 && bytes <= t->allreduce_pair_max);
}

/*
 * Past recursive doubling's sizes, a power of two of ranks (from four)
 * takes recursive halving and doubling (Rabenseifner's) while the ring's
 * 2(p - 1) rounds would cost more than its pipelined segments save: up
 * to 256K per rank, and within the halving's scratch (RS_HALVING_MAX).
 * 4 netns nodes x 1 on 2 cores, us, halving / direct / the ring, three
 * alternations: 128 KiB 198-273 / 265-275 / 269-275, 1 MiB 952-1013 /
 * 973-1096 / 1095-1140; at 2 MiB the ring's segments win (1830-2154
 * against 2188-2353 / 2050-2228).  For more ranks the limit is the
 * cost model's (doc/design.md, "At scale"): at 1024 nodes the ring's
 * 2046 rounds are milliseconds of latency alone.
 *
 * Any other number of ranks folds onto the power of two q below it
 * first: two more messages of the whole buffer, against the ring's
 * 2(p - 1) rounds.  On the cost model (α per message, β per byte) it
 * wins while bytes < (p - 2 - log2 q) α/β, and AR_FOLD_STEP is α/β:
 * 32 KiB, amid what a port's latency is worth in bytes (100 Gb/s
 * InfiniBand at 1.5-2 us ~20 KiB, 200 Gb/s ~40, 25 GbE TCP at 15 us
 * ~45, the cost model's 3 us at 25 GB/s 75), so 7 ranks fold up to
 * 96 KiB, 12 up to 224 KiB, 100 up to 2.9 MiB, 1000 up to the
 * halving's 8 MiB.
 */
int coll_allreduce_halving(const struct coll_tuning *t, size_t bytes,
			   size_t count, int size)
{
	int lg = 0;

	if (size <= 2 || coll_allreduce_rd(t, bytes, count, size) ||
	    bytes > RS_HALVING_MAX)
		return 0;
	if (coll_pow2(size))
		return bytes <= (size_t)size * AR_HALVING_PER_RANK;
	while ((2 << lg) <= size)
		lg++;
	return size - 2 - lg > 0 &&
	       bytes <= (size_t)(size - 2 - lg) * AR_FOLD_STEP;
}

enum coll_algo coll_select(const struct coll_tuning *t, enum coll_kind k,
			   size_t bytes, size_t count,
			   const struct coll_place *p)
{
	enum coll_algo forced = t->algo[k];

	if (forced != ALGO_AUTO && usable(k, forced, p))
		return forced;
	switch (k) {
	case CK_ALLREDUCE:
		if (usable(k, ALGO_SHM, p))
			return ALGO_SHM;
		if (t->hier != 0 && usable(k, ALGO_HIER, p))
			return ALGO_HIER;
		/* Three or four ranks past 128 KiB: the direct
		 * reducescatter, then every rank sends its block to every
		 * other at once: two rounds, where the ring makes 2(p - 1)
		 * one after the other (3 netns nodes x 1, us, direct
		 * against the ring: 128 KiB 185-276 / 164-275, 256 KiB
		 * 455-487 / 261-504, 1 MiB 749-813 / 908-1002, 2 MiB
		 * 1552-1622 / 1642-1771; 4 x 1, 1 MiB 1067-1110 /
		 * 1131-1209.  At 64 KiB rd is ahead: 106-119 / 141-145). */
		if (coll_allreduce_halving(t, bytes, count, p->size))
			return ALGO_HALVING;
		if (direct_fits(p, bytes, AR_DIRECT_FROM))
			return ALGO_DIRECT;
		return coll_allreduce_rd(t, bytes, count, p->size) ? ALGO_RD
								   : ALGO_RING;
	case CK_REDUCESCATTER:
		if (usable(k, ALGO_SHM, p))
			return ALGO_SHM;
		/* Small across even nodes: the allreduce through the node
		 * leaders, then the slice (2 x 2, 4 KiB: 58 us by rd, 0.87x
		 * OpenMPI). */
		if (coll_leaders(t, k, bytes, p))
			return ALGO_HIER;
		/* Larger: a reduce-scatter within the node, then a ring per
		 * local index, every byte across nodes once (2 x 2, 64 KiB-
		 * 16 MiB: 1.1-1.8x faster than the flat ring). */
		if (t->hier != 0 && usable(k, ALGO_HIER, p))
			return ALGO_HIER;
		if (count < (size_t)p->size)
			return ALGO_RD;
		/* Two ranks: one exchange of half the buffer, where
		 * recursive doubling exchanges all of it (64 KiB across two
		 * netns nodes: 0.59x OpenMPI's time by rd); up to 64 KiB
		 * bare, past it in the ring's segments, whose reductions
		 * overlap the transfer (16-32 KiB: 23-25 us by the ring,
		 * 16-23 direct; 64 KiB 23.1-23.3 against 21.0-21.3; 128 KiB
		 * alike; 256 KiB 46.5-46.8 against 47.8-48.3). */
		if (p->size == 2 && bytes <= RS_PAIR_DIRECT_MAX)
			return ALGO_DIRECT;
		/* Four, eight, ... ranks: recursive halving, log2(p)
		 * messages a rank, each byte once (4 netns nodes x 1 on 2
		 * cores, OpenMPI's time over ours, halving / direct / the
		 * ring: 16 KiB 0.98-1.05 / 0.59-0.75 / 0.62-0.78, 48 KiB
		 * 0.88-0.94 / 0.63-0.68 / 0.69-0.89, 256 KiB 2.54-2.93 /
		 * 2.07-2.25 / 1.61-1.79, 1 MiB 1.78-2.36 / 1.64-1.80 /
		 * 1.38-1.56; 4 KiB 0.97-1.07 against rd's 0.82-0.89; 2 and
		 * 8 MiB alike).  Its scratch is the buffer: not past 8 MiB,
		 * where the ring's segments keep memory small. */
		if (p->size > 2 && usable(k, ALGO_HALVING, p) &&
		    bytes <= RS_HALVING_MAX)
			return ALGO_HALVING;
		/* Three ranks past 32 KiB (four took halving above): every
		 * block to its owner at once, one round, where recursive
		 * doubling moves the whole buffer three times and the ring's
		 * two rounds follow each other (3 netns nodes x 1, us,
		 * direct against rd: 64
		 * KiB 80-101 / 104-120; against the ring: 96 KiB 106-112 /
		 * 99-103, 128 KiB 121-167 / 110-179, 1 MiB 394-440 /
		 * 530-986, 2 MiB 1510-1554 / 1671-1910).  At 32 KiB rd is
		 * ahead (71-79 / 79-92).  Its scratch is (p-1)/p of the
		 * buffer, kept on the communicator: not past 8 MiB. */
		if (direct_fits(p, bytes, RS_DIRECT_FROM))
			return ALGO_DIRECT;
		if (bytes <= t->reducescatter_small_max && p->size > 2)
			return ALGO_RD;
		return ALGO_RING;
	case CK_BROADCAST: {
		int lg = 0;

		if (usable(k, ALGO_SHM, p))
			return ALGO_SHM;
		/* On a crowded machine the chain: every rank sends at most
		 * once, where the tree's root sends log2(p) times back to
		 * back, and on one kernel each send also runs its receiver's
		 * TCP input on the sender's core (3 netns nodes x 1 on 2
		 * cores, 4 B-64 KiB: 1.0-2.3x OpenMPI by the chain, 0.5-1.0x
		 * by the tree; OpenMPI's own choice below 32 B at < 4 ranks
		 * is its pipeline, a chain). */
		if (bytes <= t->bcast_small_max)
			return p->crowded ? ALGO_CHAIN : ALGO_BINOMIAL;
		/* The chain takes about one buffer time plus p-2 segment
		 * times, the binomial tree log2(p) buffer times: the chain
		 * wins once (log2(p) - 1) x bytes exceeds p-2 segments (at
		 * 8192 ranks and 256K segments: above ~179 MB; below, its
		 * p-hop latency dominates). */
		while ((1 << lg) < p->size)
			lg++;
		if (p->size <= 2 ||
		    (double)(lg - 1) * (double)bytes >
			    (double)(p->size - 2) * (double)t->segment)
			return ALGO_CHAIN;
		return ALGO_BINOMIAL;
	}
	case CK_ALLGATHER:
		/* Small totals across even nodes: each rank's block in a
		 * zeroed buffer, summed as bytes through the leaders
		 * (2 x 2, 4 KiB: 67 us direct, 0.73x OpenMPI). */
		if (coll_leaders(t, k, bytes, p))
			return ALGO_HIER;
		/* Small totals: one round to everyone while that is few
		 * messages; past 16 ranks Bruck's log2(p) rounds, since
		 * "direct" is p(p-1) messages (the engine's allgather of
		 * request lengths at 8192 ranks: 67 million).  Where the
		 * job is crowded a message costs CPU that another rank
		 * waits for, and from four ranks Bruck's fewer messages
		 * win (4 netns nodes x 1 on 2 cores, OpenMPI's time over
		 * ours, Bruck / direct: 4 KiB 0.90-0.98 / 0.77-0.96, 16 KiB
		 * 0.92-1.22 / 0.71-0.78, 48 KiB 0.92-0.96 / 0.58-0.76,
		 * 64 KiB 0.89-1.04 / 0.73-0.97). */
		if (bytes <= t->allgather_small_max)
			return p->size > 16 || (p->crowded && p->size > 3)
				   ? ALGO_BRUCK
				   : ALGO_DIRECT;
		/* Larger ones across even nodes: a ring among the ranks of
		 * each local index, then shared memory within the node
		 * (2 x 2, 128 KiB-2 MiB: 1.5-4x faster than the flat ring). */
		if (t->hier != 0 && usable(k, ALGO_HIER, p))
			return ALGO_HIER;
		return ALGO_RING;
	case CK_ALLTOALL:
		/* Small equal blocks across even nodes (hvd_alltoall; host_
		 * alltoallv runs it only for those): through the node
		 * leaders, one message per pair of nodes. */
		if (coll_leaders(t, k, bytes, p))
			return ALGO_HIER;
		return ALGO_PAIRWISE;
	case CK_BARRIER:
		return usable(k, ALGO_SHM, p) ? ALGO_SHM : ALGO_DISSEM;
	default:
		return ALGO_AUTO;
	}
}

enum coll_algo coll_select_flat(const struct coll_tuning *t,
				enum coll_kind k, size_t bytes, size_t count,
				const struct coll_place *p)
{
	struct coll_place q = *p;

	/* Neither ALGO_SHM nor ALGO_HIER is usable without shm, forced or
	 * not; a forced flat algorithm stays. */
	q.shm = 0;
	return coll_select(t, k, bytes, count, &q);
}

/*
 * engine/core/negotiate.h - the coordinator's table, run on rank 0 of the
 * engine's world: requests in, ready responses (or mismatch errors) out,
 * in first-seen order (negotiate.c).  Process-set membership and the
 * timeline reach it as callbacks, so the table itself stays pure.
 */
#ifndef HVD_ENGINE_CORE_NEGOTIATE_H
#define HVD_ENGINE_CORE_NEGOTIATE_H

#include "base/list.h"
#include "engine/core/namemap.h"
#include "engine/core/request.h"

#pragma GCC visibility push(hidden)

struct coord_entry {
	char *name;
	struct eng_req **reqs; /* [world size], NULL where not submitted */
	int count;
	double first_seen; /* coordinator clock */
	int timeline_started;
	struct hvd_list order; /* on coord.entries */
};

/* Membership lookup for readiness: 1 when world rank r is in set id. */
typedef int (*coord_member_fn)(void *arg, int32_t pset, int rank);
typedef int (*coord_set_size_fn)(void *arg, int32_t pset);

struct coord {
	int size;
	struct namemap table;
	struct hvd_list entries; /* first-seen order (struct coord_entry) */
	int nentries;
	int *joined; /* [size] */
	int njoined;
	int last_joined;
	coord_member_fn is_member;
	coord_set_size_fn set_size;
	void *member_arg;
	/* timeline hooks (NULL when off) */
	void (*on_first)(void *arg, const char *name, int kind, double t);
	void (*on_rank)(void *arg, const char *name, int rank, double t);
	void (*on_ready)(void *arg, const char *name, double t);
	void *tl_arg;
};

/* c stays where it was initialised (the entries' list points into it). */
hvd_status_t coord_init(struct coord *c, int size);
void coord_free(struct coord *c);
/* Takes ownership of req. */
hvd_status_t coord_add(struct coord *c, int rank, struct eng_req *req,
		       double now);
/* Moves the ready entries out of the table as responses (first-seen
 * order; groups held until complete), errors included. */
hvd_status_t coord_collect(struct coord *c, struct resp_list *out);

static inline struct coord_entry *coord_entry_of(const struct hvd_list *node)
{
	return hvd_list_entry(node, struct coord_entry, order);
}

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_NEGOTIATE_H */

/*
 * engine/core/request.h - what the ranks agree on for one named operation:
 * its kind and parameters, a rank's request as the coordinator sees it,
 * the response every rank executes, and the list of responses of a cycle.
 *
 * Every core module works on these types alone: none of them knows about
 * threads, handles or communicators (engine/engine.h has those).
 */
#ifndef HVD_ENGINE_CORE_REQUEST_H
#define HVD_ENGINE_CORE_REQUEST_H

#include "base/base.h"

#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Operation kinds: requests use the first ones, responses all. */
enum eng_kind {
	EK_ALLREDUCE = 0,
	EK_ALLGATHER,
	EK_BROADCAST,
	EK_ALLTOALL,
	EK_REDUCESCATTER,
	EK_JOIN,
	EK_PSET_ADD,
	EK_PSET_REMOVE,
	EK_ERROR,    /* response only: the op fails on every rank */
	EK_SHUTDOWN, /* response only: stall shutdown of the engine */
	EK_COUNT
};
/* "ALLREDUCE", ... (Horovod's request/response type names). */
const char *eng_kind_name(int kind);

#define EF_COMPRESS 1u /* float32 exchanged as float16 */
#define EF_DEVICE 2u   /* buffers are device memory */

/* What must agree between ranks for one named op. */
struct eng_params {
	uint8_t kind, dtype, op, flags;
	int32_t root;	  /* broadcast root, a world rank */
	int32_t pset;	  /* process set id */
	int32_t priority; /* not validated: the first submitter's wins */
	uint64_t count;
	double prescale, postscale;
	uint64_t shape; /* digest of the dimensions checked (0: none given) */
};

/* A rank's request for one op, as the coordinator sees it. */
struct eng_req {
	struct eng_params p;
	double age;	     /* seconds since the op was enqueued */
	uint32_t group_size; /* >1: member of a group of that size */
	uint32_t nranks;     /* pset add: the members */
	int32_t *ranks;
	uint32_t ndims; /* the dimensions p.shape digests (for messages) */
	int64_t *dims;
	char *name;
	char *group; /* group key (smallest member name) or NULL */
};

/* What every rank executes (or fails) for one op. */
struct eng_resp {
	struct eng_params p;
	int32_t status;	     /* EK_ERROR/EK_SHUTDOWN: an hvd_status_t */
	int32_t joined;	     /* members that joined and contribute zeros */
	int32_t last_joined; /* EK_JOIN: the last rank to join */
	uint32_t group_size;
	uint32_t ncounts; /* allgather: count of each set rank */
	uint64_t *counts;
	uint32_t nranks; /* pset add: members (p.pset is the new id) */
	int32_t *ranks;
	char *name;
	char *group;
	char *message; /* EK_ERROR/EK_SHUTDOWN */
};

void eng_req_free(struct eng_req *r);
void eng_resp_free(struct eng_resp *r);
/* Deep copy; HVD_ERR_NO_MEMORY on failure. */
hvd_status_t eng_resp_copy(struct eng_resp *dst, const struct eng_resp *src);

/* The responses of one cycle, in the order every rank runs them. */
struct resp_list {
	struct eng_resp *v;
	int n, cap;
};
void resp_list_free(struct resp_list *l);
/* Appends a zeroed response; NULL when out of memory. */
struct eng_resp *resp_list_push(struct resp_list *l);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_REQUEST_H */

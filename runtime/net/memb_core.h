/*
 * net/memb_core.h - the pure part of the elastic agreement (membership.c):
 * the messages, encoded and decoded with every length checked, and the
 * decisions (who coordinates, who is in the next world, in which order).
 * No UCX, no threads; unit-tested alone (tests/unit/test_memb_core.c).
 *
 * Messages travel between processes of one job that run the same libhvd,
 * but a join request comes from a process that only read a file, so every
 * decoder treats its input as hostile: a length that does not add up, a
 * string without room for its terminator, a count past the message is a
 * refusal, never a read past the buffer.
 */
#ifndef HVD_NET_MEMB_CORE_H
#define HVD_NET_MEMB_CORE_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

#define MEMB_MAGIC 0x48564d31u /* "HVM1" */
#define MEMB_VERSION 3

enum memb_type {
	MEMB_PROPOSE = 1, /* a survivor to the coordinator: what it knows   */
	MEMB_DECIDE = 2,  /* the coordinator to every member: the new world */
	MEMB_HELLO = 3,   /* liveness probe, answered by one                 */
	MEMB_JOIN = 4,    /* a newcomer to rank 0: let me in                 */
	MEMB_REMOVED = 5, /* the coordinator to a rank left out: stop        */
	MEMB_NTYPES = 8,
};

#define MEMB_TOKEN_BYTES 16
#define MEMB_KEY_MAX 300
#define MEMB_NSPACE_MAX 256
#define MEMB_JOBID_MAX 64
#define MEMB_ADDR_MAX 65536
#define MEMB_REASON_MAX 512
/* The largest world the agreement handles (bitmaps, member lists). */
#define MEMB_MAX_RANKS (1 << 20)

/* One process of the next world, as it describes itself. */
struct memb_peer {
	int32_t old_rank;        /* rank in the current world; -1: newcomer */
	int32_t pid;
	int32_t pmix_local_rank; /* -1 when PMIx did not say               */
	int32_t pmix_rank;       /* its rank in its own PMIx namespace     */
	uint64_t pidns;          /* where pid means something (hvd_pidns)  */
	char node_key[MEMB_KEY_MAX]; /* equal for processes of one node   */
	char nspace[MEMB_NSPACE_MAX]; /* its own PMIx namespace           */
	void *addr;              /* its next worker's UCX address (owned)  */
	uint32_t addr_len;
};

struct memb_propose {
	uint32_t epoch;  /* the sender's current epoch                    */
	int32_t sender;  /* its current rank                              */
	int32_t nranks;  /* the current world's size                      */
	uint8_t *failed; /* [(nranks+7)/8] ranks the sender knows failed  */
	uint8_t *quiet;  /* [..] of those, the ones only gone silent (not
			    known dead: maybe alive beyond a partition)    */
	uint8_t *doubt;  /* [..] ranks the sender suspects but has not
			    heard from yet (not failed)                    */
	struct memb_peer self;
};

struct memb_decide {
	uint32_t epoch;   /* the new world's                               */
	int32_t sender;   /* the coordinator's current rank                */
	int32_t status;   /* HVD_OK, or HVD_ERR_TOO_FEW_RANKS              */
	int32_t min_size; /* what the coordinator went by                  */
	char world[MEMB_NSPACE_MAX]; /* the new world's name (shm keys)    */
	int32_t n;
	struct memb_peer *peers; /* [n] in new rank order                  */
};

struct memb_join {
	uint8_t token[MEMB_TOKEN_BYTES];
	char jobid[MEMB_JOBID_MAX];
	int32_t step_size; /* processes of the newcomer's step            */
	int32_t step_rank;
	void *reply_addr;  /* its current worker: where the decision goes */
	uint32_t reply_addr_len;
	struct memb_peer self; /* old_rank -1; nspace: the step's; addr: its
				  next worker's                            */
};

/* A growable output buffer; oom sticks once an allocation failed. */
struct memb_buf {
	uint8_t *p;
	size_t len, cap;
	int oom;
};

void memb_buf_free(struct memb_buf *b);

/* Encoders: HVD_OK or HVD_ERR_NO_MEMORY / HVD_ERR_INVALID_ARG (a field
 * too long to encode).  The buffer is reset first. */
hvd_status_t memb_encode_propose(struct memb_buf *b,
				 const struct memb_propose *m);
hvd_status_t memb_encode_decide(struct memb_buf *b,
				const struct memb_decide *m);
hvd_status_t memb_encode_join(struct memb_buf *b, uint32_t epoch,
			      const struct memb_join *m);
hvd_status_t memb_encode_removed(struct memb_buf *b, uint32_t epoch,
				 int32_t sender, const char *reason);
hvd_status_t memb_encode_hello(struct memb_buf *b, uint32_t epoch,
			       int32_t sender);

/* The type of a message, or -1 when it is not one of ours (too short,
 * wrong magic or version, a length that disagrees with len). */
int memb_type_of(const void *msg, size_t len);
/* Decoders: HVD_OK, or HVD_ERR_INVALID_ARG with a message naming what
 * was wrong.  What they allocate goes with the matching _free. */
hvd_status_t memb_decode_propose(const void *msg, size_t len,
				 struct memb_propose *m);
hvd_status_t memb_decode_decide(const void *msg, size_t len,
				struct memb_decide *m);
hvd_status_t memb_decode_join(const void *msg, size_t len, uint32_t *epoch,
			      struct memb_join *m);
hvd_status_t memb_decode_removed(const void *msg, size_t len, char *reason,
				 size_t reason_len);
hvd_status_t memb_decode_hello(const void *msg, size_t len, uint32_t *epoch,
			       int32_t *sender);
void memb_peer_free(struct memb_peer *p);
void memb_propose_free(struct memb_propose *m);
void memb_decide_free(struct memb_decide *m);
void memb_join_free(struct memb_join *m);
/* A deep copy (address included). */
hvd_status_t memb_peer_copy(struct memb_peer *dst,
			    const struct memb_peer *src);

/* Bitmaps of ranks. */
static inline int memb_bit(const uint8_t *set, int r)
{
	return (set[r >> 3] >> (r & 7)) & 1;
}
static inline void memb_set_bit(uint8_t *set, int r)
{
	set[r >> 3] = (uint8_t)(set[r >> 3] | (1u << (r & 7)));
}
/* Is any of ranks 0..n-1 in the set? */
static inline int memb_any(const uint8_t *set, int n)
{
	for (int r = 0; r < n; r++)
		if (memb_bit(set, r))
			return 1;
	return 0;
}
static inline void memb_clear_bit(uint8_t *set, int r)
{
	set[r >> 3] = (uint8_t)(set[r >> 3] & ~(1u << (r & 7)));
}

/* The coordinator: the lowest rank of 0..n-1 not in failed; -1 when every
 * rank failed. */
int memb_coordinator(const uint8_t *failed, int n);

/*
 * The next world, in rank order: the current world's live ranks that
 * proposed (survivors[r] != NULL and not failed) in their old rank order,
 * then the newcomers in the order given.  Survivors come first so that
 * rank 0 of the new world, where state is broadcast from, is always one
 * that trained before (as Horovod gives older workers rank 0).  *order
 * (malloc'ed, [*n]) points at the records; HVD_ERR_NO_MEMORY or HVD_OK.
 */
hvd_status_t memb_order(int nranks, const uint8_t *failed,
			struct memb_peer *const *survivors,
			struct memb_peer *const *newcomers, int nnew,
			struct memb_peer ***order, int *n);

/*
 * A partition must not leave two worlds training apart: the next world
 * goes on only with a majority of the current world's ranks not known
 * dead.  out: the ranks left out; quiet: those of them only gone silent
 * (maybe alive on the other side: they count); in: the current ranks in
 * the next world.  1 when in holds more than half of the ranks not dead,
 * or exactly half with the lowest of those; else 0.
 */
int memb_quorum(int nranks, const uint8_t *out, const uint8_t *quiet,
		const uint8_t *in);

/* Newcomers of one step are let in together: 1 when every rank
 * 0..step_size-1 of the step appears among the joins (same nspace). */
int memb_step_complete(const struct memb_join *const *joins, int njoins,
		       const char *nspace, int step_size);

#pragma GCC visibility pop

#endif /* HVD_NET_MEMB_CORE_H */

/*
 * bootstrap.h - PMIx client glue: who am I, who are my peers, and how to
 * reach them, and the job's key (net/auth.h).  Thin shell around PMIx;
 * the records and the rank arithmetic live in bootstrap_blob.c, pure
 * functions with a unit test and a fuzz harness.
 */
#ifndef HVD_BOOTSTRAP_H
#define HVD_BOOTSTRAP_H

#include "net/world.h"

#include <sys/types.h>

#pragma GCC visibility push(hidden)

/* What each rank publishes through PMIx (one blob, Put/Commit/Fence). */
struct bootstrap_peer {
	int node_key_len;
	char node_key[300]; /* "hostname#nodeid": equal on one node only */
	int pmix_local_rank; /* -1 when PMIx did not say                */
	pid_t pid;           /* liveness checks of peers on this node   */
	uint64_t pidns;      /* ... in this pid namespace (hvd_pidns)   */
	void *addr;          /* UCX worker address (malloc'ed)          */
	size_t addr_len;
};

/* Called (from a PMIx thread) when PMIx reports a peer's death. */
typedef void (*bootstrap_fail_fn)(int rank, const char *why);

/* PMIx_Init, world rank and size, event handler for process death.
 * Checks HOROVOD_RANK/HOROVOD_SIZE against PMIx. */
hvd_status_t bootstrap_init(struct hvd_world *w, bootstrap_fail_fn on_fail);
/* Publish this rank's UCX address, fence (collecting data) and read
 * every peer's entry into peers[size] (caller frees with
 * bootstrap_peers_free).  Fills w's node and local/cross fields. */
hvd_status_t bootstrap_exchange(struct hvd_world *w, const void *addr,
				size_t addr_len,
				struct bootstrap_peer **peers);
void bootstrap_peers_free(struct bootstrap_peer *peers, int n);
/* A barrier over all ranks through the PMIx server. */
hvd_status_t bootstrap_fence(void);
/* The same, non-blocking: *done becomes 1 (from a PMIx thread) when
 * every rank has arrived, so the caller can keep progressing UCX. */
hvd_status_t bootstrap_fence_nb(volatile int *done);
/* Deregister, PMIx_Finalize. */
void bootstrap_finalize(void);

/* Pure (bootstrap_blob.c): the record of p as published (malloc'ed,
 * *len bytes; NULL when out of memory), and back.  Decoding checks every
 * length against size (another process wrote the bytes) and fills p
 * (p->addr malloc'ed); an error names what was wrong. */
void *bootstrap_blob_encode(const struct bootstrap_peer *p, size_t *len);
hvd_status_t bootstrap_blob_decode(const void *bytes, size_t size,
				   struct bootstrap_peer *p);

/* Pure: node ids (by order of first appearance in rank order), local
 * ranks (PMIx's when they form a permutation on every node, else rank
 * order within the node) and cross ranks/sizes (Horovod's meaning: among
 * the ranks with the same local rank, ordered by node).  Fills every
 * field of w except rank/size/nspace/hostname and allocates
 * node_of/local_rank_of.  Returns HVD_ERR_NO_MEMORY or HVD_OK. */
hvd_status_t bootstrap_layout(struct hvd_world *w, const char *const *keys,
			      const int *pmix_local_ranks);

#pragma GCC visibility pop

#endif /* HVD_BOOTSTRAP_H */

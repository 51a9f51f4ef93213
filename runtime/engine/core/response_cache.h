/*
 * engine/core/response_cache.h - (name, parameters) -> response and cache
 * bit, with LRU eviction (response_cache.c has the invariant that keeps
 * the bits identical on every rank without sending them).
 */
#ifndef HVD_ENGINE_CORE_RESPONSE_CACHE_H
#define HVD_ENGINE_CORE_RESPONSE_CACHE_H

#include "base/list.h"
#include "engine/core/namemap.h"
#include "engine/core/request.h"

#pragma GCC visibility push(hidden)

enum { RC_MISS = 0, RC_HIT, RC_INVALID };

struct rc_entry {
	struct eng_resp resp;
	int bit;
	struct hvd_list lru; /* on rcache.lru */
	void *pending;	     /* this rank's op waiting on the bit */
};

struct rcache {
	int capacity;
	int nbits; /* bits in use: 0..nbits-1 (some may be free) */
	struct rc_entry **by_bit;
	int *free_bits; /* stack, lowest bit on top */
	int nfree;
	struct hvd_list lru; /* most recently used first */
	int count;
	struct namemap names;
	int warned_evict;
};

/* c stays where it was initialised (the LRU list points into it). */
hvd_status_t rc_init(struct rcache *c, int capacity);
void rc_free(struct rcache *c);
/* Is (name, p) cached?  set_rank: the caller's rank in p->pset (for the
 * allgather count).  *bit is set for RC_HIT and RC_INVALID. */
int rc_lookup(const struct rcache *c, const char *name,
	      const struct eng_params *p, int set_rank, int *bit);
/* Insert or refresh r (copied).  When an entry had to go (capacity), its
 * bit is reused and *evicted (if not NULL) receives its pending pointer,
 * or NULL.  Returns the bit, or -1 when out of memory. */
int rc_put(struct rcache *c, const struct eng_resp *r, void **evicted);
void rc_erase(struct rcache *c, int bit);
void rc_touch(struct rcache *c, int bit);
struct rc_entry *rc_entry_at(const struct rcache *c, int bit);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_RESPONSE_CACHE_H */

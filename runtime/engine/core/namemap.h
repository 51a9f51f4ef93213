/*
 * engine/core/namemap.h - a string -> pointer hash map for the engine's
 * name tables (in-flight names, pending ops, the coordinator's table, the
 * response cache, the timeline's tensors).  Keys are not copied: a caller
 * uses the value's own name as its key, so an entry lives exactly as long
 * as its value.
 */
#ifndef HVD_ENGINE_CORE_NAMEMAP_H
#define HVD_ENGINE_CORE_NAMEMAP_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

struct namemap {
	struct namemap_slot {
		const char *key; /* not owned */
		void *val;
		uint64_t hash;
	} * slots;
	size_t cap, n, tomb;
};
void namemap_init(struct namemap *m);
void namemap_free(struct namemap *m);
void *namemap_get(const struct namemap *m, const char *key);
/* key must stay valid while present (usually the value's own name). */
hvd_status_t namemap_put(struct namemap *m, const char *key, void *val);
void *namemap_del(struct namemap *m, const char *key);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_NAMEMAP_H */

/*
 * engine/core/stall.h - the stall inspector's report over the coordinator's
 * table (stall.c).
 */
#ifndef HVD_ENGINE_CORE_STALL_H
#define HVD_ENGINE_CORE_STALL_H

#include "engine/core/negotiate.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* Writes the warning for entries older than warn seconds; returns how many
 * are older than shutdown (>0) seconds; msg gets a one-line summary for
 * the error status when so. */
int stall_check(const struct coord *c, double now, double warn, double shutdown,
		char *msg, size_t msglen);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_STALL_H */

/*
 * engine/core/pset_spec.h - process-set rank lists: parsing
 * HOROVOD_PROCESS_SETS, checking a list, and the hash ranks compare to
 * agree on the static sets (pset_spec.c).  engine/pset.h has the table of
 * sets and their communicators.
 */
#ifndef HVD_ENGINE_CORE_PSET_SPEC_H
#define HVD_ENGINE_CORE_PSET_SPEC_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

/* Parse "0,1;2,3" (ranks may also be ranges "0-3") into sets of sorted,
 * distinct world ranks.  Returns HVD_ERR_INVALID_ARG with a message in
 * err on a malformed spec, a rank outside [0, world_size) or a duplicate. */
hvd_status_t pset_parse(const char *spec, int world_size, int ***sets,
			int **sizes, int *nsets, char *err, size_t errlen);
/* Sort and check a rank list in place ("duplicate rank 3", ...). */
hvd_status_t pset_check_ranks(int *ranks, int n, int world_size, char *err,
			      size_t errlen);
uint64_t pset_hash(const int *ranks, int n);

#pragma GCC visibility pop

#endif /* HVD_ENGINE_CORE_PSET_SPEC_H */

/*
 * api/elastic.h - what hvd_init/hvd_finalize (api/init.c) call of elastic
 * training (api/elastic.c; the public functions are in include/hvd.h).
 */
#ifndef HVD_API_ELASTIC_H
#define HVD_API_ELASTIC_H

#include "net/world.h"

#pragma GCC visibility push(hidden)

/* End of hvd_init, the engine running: with HOROVOD_ELASTIC=1, a step
 * that finds a running world of its job joins it here (the world is then
 * the joined one), rank 0 of a new world writes the rendezvous file, and
 * the process leaves PMIx (elastic.c says why).  On an error the caller
 * tears down whatever world there is. */
hvd_status_t elastic_init(void);
/* Start of hvd_finalize: the rendezvous file goes, and the ranks meet in
 * a barrier over the transport (an elastic world left PMIx at the end of
 * hvd_init; its namespace would count the dead and lack the newcomers
 * anyway).  Returns 1 when the PMIx fence at the end of finalize may run
 * (elastic off). */
int elastic_finalize(void);

#pragma GCC visibility pop

#endif /* HVD_API_ELASTIC_H */

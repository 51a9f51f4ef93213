/*
 * cuda/cuda.h - the GPU path's face: its table of device collectives and
 * memory copies for the collectives' front door (comm/backend.h), which
 * is the only caller.  Built only with CUDA and NCCL (HVD_HAVE_CUDA).
 */
#ifndef HVD_CUDA_H
#define HVD_CUDA_H

#include "comm/backend.h"

#pragma GCC visibility push(hidden)

/* The table (never NULL; its collectives fail cleanly without a GPU). */
const struct comm_device_ops *cuda_device_ops(void);

/* What a long NCCL wait also looks at, every 50 ms once past its
 * spinning: HVD_OK, or the status that ends the wait (and aborts the
 * communicator), why[len] saying what happened.  The collectives set it
 * (coll_world_check); unset, the waits watch NCCL alone. */
typedef hvd_status_t (*cuda_watch_fn)(char *why, size_t len);
void cuda_set_watch(cuda_watch_fn fn);

#pragma GCC visibility pop

#endif /* HVD_CUDA_H */

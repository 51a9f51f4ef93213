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

#pragma GCC visibility pop

#endif /* HVD_CUDA_H */

/*
 * build_info.c - what this build of libhvd has, for the bindings' probes
 * (hvd.cuda_built(), hvd.nccl_built() as Horovod has them).  The answers
 * are the build's, not the machine's: a GPU build on a machine without a
 * GPU still says 1.
 */
#include "config.h"

#include "hvd.h"

#ifdef HVD_HAVE_CUDA
/* nccl.h declares ncclGroupStart() without (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#endif

int hvd_cuda_built(void)
{
#ifdef HVD_HAVE_CUDA
	return 1;
#else
	return 0;
#endif
}

int hvd_nccl_built(void)
{
#ifdef HVD_HAVE_CUDA
	return NCCL_VERSION_CODE;
#else
	return 0;
#endif
}

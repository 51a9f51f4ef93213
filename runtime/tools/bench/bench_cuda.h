/*
 * bench_cuda.h - hvd-bench -D cuda: device mirrors of the benchmark's
 * send and receive buffers.  hvd-bench fills and checks its host buffers
 * as always; with -D cuda the collective runs on these device buffers,
 * with the inputs uploaded before the checked call and the result
 * downloaded after it.  Without the GPU path the calls fail with a
 * message, so hvd-bench needs no #ifdef.
 */
#ifndef HVD_BENCH_CUDA_H
#define HVD_BENCH_CUDA_H

#include <stddef.h>
#include <stdio.h>

#ifdef HVD_HAVE_CUDA
/* Select the GPU (local_rank modulo the visible devices) and allocate;
 * 0 on success, else -1 with a message on stderr. */
int bench_cuda_setup(int local_rank, size_t send_bytes, size_t recv_bytes);
void *bench_cuda_send(void);
void *bench_cuda_recv(void);
/* Host -> device (both buffers) and device -> host (receive buffer). */
int bench_cuda_upload(const void *send, const void *recv);
int bench_cuda_download(void *recv);
void bench_cuda_teardown(void);
#else
static inline int bench_cuda_setup(int local_rank, size_t send_bytes,
				   size_t recv_bytes)
{
	(void)local_rank;
	(void)send_bytes;
	(void)recv_bytes;
	fprintf(stderr, "hvd-bench: -D cuda: this build has no GPU path "
			"(configure found no CUDA/NCCL; see doc/gpu.md)\n");
	return -1;
}
static inline void *bench_cuda_send(void) { return NULL; }
static inline void *bench_cuda_recv(void) { return NULL; }
static inline int bench_cuda_upload(const void *send, const void *recv)
{
	(void)send;
	(void)recv;
	return -1;
}
static inline int bench_cuda_download(void *recv)
{
	(void)recv;
	return -1;
}
static inline void bench_cuda_teardown(void) {}
#endif

#endif /* HVD_BENCH_CUDA_H */

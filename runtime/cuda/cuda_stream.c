/*
 * cuda_stream.c - ordering the GPU path's work with a caller's stream
 * (hvd_stream_set), without a host synchronization.
 *
 * A framework queues the kernels that produce a tensor on its own stream
 * (torch's current stream); libhvd's NCCL streams do not wait for it
 * (only the legacy default stream orders itself with blocking streams).
 * So when an operation on device memory is submitted, an event is
 * recorded on the caller's stream (stream_mark, on the caller's thread:
 * it marks what the stream has queued so far); when the operation runs,
 * its stream waits for that event on the GPU before the first NCCL call
 * (cuda_stream_before, from cuda_op_begin), and after it the caller's
 * stream waits for the operation's end (cuda_stream_after, from
 * cuda_op_end), so that work the caller queues later sees the result.
 *
 * The events and streams to order with are queued per thread
 * (stream_order) by the one that runs the next device collective: the
 * engine thread for the engine's fused allreduce of many tensors, each
 * with its own event; stream_order(NULL, NULL) after the collective
 * forgets whatever an early failure left unconsumed.
 */
#include "config.h"

#include "cuda/cuda_internal.h"

#include <stdlib.h>

struct pending {
	cudaEvent_t *ev;
	cudaStream_t *follow;
	int n, nfollow, cap, capfollow;
};

static __thread struct pending pend;

static int grow(void **v, int *cap, int n, size_t esz)
{
	void *nv;
	int c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 16;
	nv = realloc(*v, (size_t)c * esz);
	if (!nv)
		return -1;
	*v = nv;
	*cap = c;
	return 0;
}

hvd_status_t cuda_stream_mark(void *stream, void **event)
{
	cudaEvent_t ev;

	*event = NULL;
	CUDACHECK_RET(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	if (cudaEventRecord(ev, (cudaStream_t)stream) != cudaSuccess) {
		cudaError_t err = cudaGetLastError();

		cudaEventDestroy(ev);
		return cuda_error_at(err, "cudaEventRecord on the caller's "
					  "stream (hvd_stream_set)",
				     __FILE__, __LINE__);
	}
	*event = ev;
	return HVD_OK;
}

void cuda_stream_order(void *event, void *follow)
{
	if (!event && !follow) { /* after the collective: forget them */
		pend.n = pend.nfollow = 0;
		return;
	}
	if (event && grow((void **)&pend.ev, &pend.cap, pend.n,
			  sizeof(*pend.ev)) == 0)
		pend.ev[pend.n++] = (cudaEvent_t)event;
	if (follow) {
		for (int i = 0; i < pend.nfollow; i++)
			if (pend.follow[i] == (cudaStream_t)follow)
				return;
		if (grow((void **)&pend.follow, &pend.capfollow,
			 pend.nfollow, sizeof(*pend.follow)) == 0)
			pend.follow[pend.nfollow++] = (cudaStream_t)follow;
	}
}

void cuda_event_release(void *event)
{
	if (event)
		(void)cudaEventDestroy((cudaEvent_t)event);
}

hvd_status_t cuda_stream_before(cudaStream_t stream)
{
	hvd_status_t st = HVD_OK;

	for (int i = 0; i < pend.n && st == HVD_OK; i++) {
		cudaError_t err = cudaStreamWaitEvent(stream, pend.ev[i], 0);

		if (err != cudaSuccess)
			st = cuda_error_at(err, "cudaStreamWaitEvent (the "
						"caller's stream)",
					   __FILE__, __LINE__);
	}
	pend.n = 0; /* the events stay the submitters' to release */
	return st;
}

void cuda_stream_after(cudaStream_t stream, cudaEvent_t done, int ok)
{
	for (int i = 0; ok && i < pend.nfollow; i++)
		if (pend.follow[i] != stream)
			(void)cudaStreamWaitEvent(pend.follow[i], done, 0);
	pend.nfollow = 0;
}

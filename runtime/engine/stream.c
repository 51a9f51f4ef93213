/*
 * stream.c - hvd_stream_set(): device operations ordered after a
 * caller's CUDA stream instead of a host synchronization.
 *
 * The stream is the calling thread's (thread-local, like the framework's
 * own notion of a current stream).  When a device operation is submitted
 * an event is recorded on it there and then, so it marks exactly the work
 * queued before the submission; the engine thread hands the events of a
 * bucket's operations, and their streams, to the GPU path just before the
 * bucket's collective (coll_stream_order): NCCL's stream waits for the
 * events on the GPU, and at the end every caller's stream waits for the
 * collective.  The events go with their handles (hvd_wait).
 */
#include "config.h"

#include "coll/coll.h"
#include "engine/engine.h"

static __thread void *cur_stream;
static __thread int cur_set;

hvd_status_t hvd_stream_set(void *stream)
{
	if (stream && !coll_has_device())
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd_stream_set: libhvd was built without "
				 "the GPU path (configure --with-cuda)");
	cur_stream = stream;
	cur_set = stream != NULL;
	return HVD_OK;
}

hvd_status_t engine_stream_mark(struct hvd_handle *h)
{
	/* Without a stream set, device buffers must be ready when they are
	 * submitted (the legacy default stream always is: libhvd's streams
	 * are blocking streams). */
	if (!cur_set)
		return HVD_OK;
	h->dev_stream = cur_stream;
	return coll_stream_mark(cur_stream, &h->dev_event);
}

void engine_stream_order(struct hvd_handle **ops, const int *idx, int n)
{
	for (int i = 0; i < n; i++) {
		struct hvd_handle *h = ops[idx[i]];

		if (h && h->dev_event)
			coll_stream_order(h->dev_event, h->dev_stream);
	}
}

void engine_stream_clear(void)
{
	coll_stream_order(NULL, NULL);
}

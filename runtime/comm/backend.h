/*
 * comm/backend.h - what the layers above the communicators hand down to
 * them, so that nothing here ever names them (as NCCL's transports are
 * ops tables its core walks, and UCC's teams declare the memory types
 * they serve).
 *
 * A backend that keeps state per communicator (the shared-memory segment
 * of coll/shm, the NCCL communicator of cuda/) registers hooks; comm.c
 * calls them when a communicator is split or destroyed, and keeps the
 * backend's state in the communicator's slot for it.  A device backend
 * also hands the collective front door (coll/coll.h) its table of device
 * collectives, which coll routes buffers of its memory type to; it
 * registers its own hooks when it hands the table over.
 */
#ifndef HVD_COMM_BACKEND_H
#define HVD_COMM_BACKEND_H

#include "base/base.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

typedef struct hvd_comm hvd_comm_t;

#define COMM_MAX_BACKENDS 4

/* A backend's state in one communicator: status 0 not made yet, 1 made
 * (state is the backend's), -1 unavailable (decided; not retried). */
struct comm_slot {
	void *state;
	int status;
};

struct comm_backend {
	const char *name;
	/* parent's members all call it, after comm_split made child on the
	 * listed members (NULL on the others); may be NULL. */
	hvd_status_t (*on_split)(hvd_comm_t *parent, hvd_comm_t *child,
				 int slot);
	/* comm is being destroyed; state is its slot's (made or not). */
	void (*on_destroy)(hvd_comm_t *comm, struct comm_slot *s);
};

/* Registers b (again: its slot once more) and returns its slot, or -1
 * when the table is full.  Done in hvd_init before any communicator. */
int comm_backend_register(const struct comm_backend *b);
/* comm's slot for the backend registered as id. */
struct comm_slot *comm_slot(hvd_comm_t *comm, int id);

/* One fused allreduce of n device tensors (the engine's fusion). */
struct comm_fusion_entry {
	const void *sendbuf;
	void *recvbuf;
	size_t count;
};

/* Collectives on device memory, with the arguments and semantics of the
 * host front door's coll_* (coll/coll.h), and the copies between device
 * and host memory the checkpointer needs. */
struct comm_device_ops {
	const char *name;
	/* 1 when p is this device's memory (cheap; 0 without a device). */
	int (*is_device)(const void *p);
	hvd_status_t (*allreduce)(hvd_comm_t *comm, const void *sendbuf,
				  void *recvbuf, size_t count,
				  hvd_dtype_t dtype, hvd_op_t op);
	hvd_status_t (*allgatherv)(hvd_comm_t *comm, const void *sendbuf,
				   size_t sendcount, void *recvbuf,
				   const size_t *recvcounts,
				   const size_t *displs, hvd_dtype_t dtype);
	hvd_status_t (*broadcast)(hvd_comm_t *comm, void *buf, size_t count,
				  hvd_dtype_t dtype, int root);
	hvd_status_t (*alltoallv)(hvd_comm_t *comm, const void *sendbuf,
				  const size_t *sendcounts,
				  const size_t *sdispls, void *recvbuf,
				  const size_t *recvcounts,
				  const size_t *rdispls, hvd_dtype_t dtype);
	hvd_status_t (*reducescatter)(hvd_comm_t *comm, const void *sendbuf,
				      void *recvbuf, size_t count,
				      hvd_dtype_t dtype, hvd_op_t op);
	/* Inputs packed with prescale applied, one reduction (float32 as
	 * float16 when compress_fp16), unpacked with postscale. */
	hvd_status_t (*fused_allreduce)(hvd_comm_t *comm,
					const struct comm_fusion_entry *e,
					int n, hvd_dtype_t dtype, hvd_op_t op,
					double prescale, double postscale,
					int compress_fp16);
	hvd_status_t (*to_host)(void *dst, const void *src, size_t bytes);
	hvd_status_t (*to_device)(void *dst, const void *src, size_t bytes);
	/* Page-locked host memory for asynchronous copies. */
	hvd_status_t (*host_alloc)(void **p, size_t bytes);
	void (*host_free)(void *p);
	/* Ordering with a caller's stream (hvd_stream_set): an event
	 * recorded on stream, marking what it has queued so far; the next
	 * device collective of the calling thread waits for the events
	 * handed to stream_order (on the GPU) and then makes the streams
	 * handed to it wait for its end; events are released with
	 * event_release.  May be NULL. */
	hvd_status_t (*stream_mark)(void *stream, void **event);
	void (*stream_order)(void *event, void *follow);
	void (*event_release)(void *event);
	/* hvd_finalize, before the communicators go (may be NULL). */
	void (*finalize)(void);
};

#pragma GCC visibility pop

#endif /* HVD_COMM_BACKEND_H */

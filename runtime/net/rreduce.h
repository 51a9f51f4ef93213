/*
 * net/rreduce.h - receiving into a reduction: the state of one receive
 * whose fragments are folded into their destination as they arrive
 * (dst = src op fragment), with the elements that straddle two fragments
 * put together first.  Pure (no UCX): net/transport.c wraps it in a UCX
 * generic datatype; tests/unit/test_rreduce.c drives it directly.
 * Private to net/.
 */
#ifndef HVD_NET_RREDUCE_H
#define HVD_NET_RREDUCE_H

#include "base/base.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* Bytes of an element that arrived in two fragments, until both did. */
struct rr_edge {
	size_t elem;
	unsigned mask; /* bytes present */
	unsigned char b[8];
};

struct rr_desc {
	char *dst;
	const char *src;
	size_t len, esz;
	hvd_dtype_t dt;
	hvd_op_t op;
	int nedge, cap;
	struct rr_edge *edge, inl[4];
	struct rr_desc *next; /* for the owner's list */
};

/* count elements of dt (at most 8 bytes each; op not AVERAGE): the
 * result goes to dst, the local operand is src (may be dst). */
void rr_init(struct rr_desc *d, void *dst, const void *src, size_t count,
	     hvd_dtype_t dt, hvd_op_t op);
/* Fold bytes [off, off + len) of the message; fragments may come in any
 * order and end anywhere.  0, or -1 (no memory, or past the end). */
int rr_unpack(struct rr_desc *d, size_t off, const void *p, size_t len);
/* Elements still waiting for their other part (0 once all arrived). */
int rr_pending(const struct rr_desc *d);
void rr_release(struct rr_desc *d);

#pragma GCC visibility pop

#endif /* HVD_NET_RREDUCE_H */

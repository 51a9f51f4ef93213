/*
 * fusion.c - tensor fusion and the execution of responses.
 *
 * The plan is core/fusion_plan.c.  Execution: a bucket of one allreduce
 * runs in the caller's buffers (no copy); a larger bucket is packed into the
 * persistent fusion buffer with the prescale (and the float32->float16 cast
 * when compressing) applied during the copy, reduced by one collective, and
 * unpacked with the postscale (and the 1/size of an average) applied during
 * the copy back.  A rank that joined contributes zeros.  Device buckets go
 * to the GPU path through the front door's coll_fused_allreduce; every
 * other collective routes by itself (coll/coll.h).
 */
#include "config.h"

#include "coll/coll.h"
#include "engine/engine.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

static void *ensure(void **buf, size_t *cap, size_t need)
{
	if (need > *cap) {
		void *p;

		free(*buf);
		*buf = NULL;
		*cap = 0;
		if (posix_memalign(&p, 64, need ? need : 64))
			return NULL;
		*buf = p;
		*cap = need;
	}
	return *buf;
}

static const void *input_of(const struct hvd_handle *h)
{
	if (h->sendbuf == HVD_IN_PLACE || !h->sendbuf)
		return h->recvbuf;
	return h->sendbuf;
}

static void tl_all(struct engine *e, const struct eng_resp *r,
		   const struct fusion_bucket *b, const char *what)
{
	if (!timeline_active(&e->tl))
		return;
	for (int i = 0; i < b->n; i++) {
		if (what)
			timeline_begin(&e->tl, r[b->idx[i]].name, what);
		else
			timeline_end(&e->tl, r[b->idx[i]].name, NULL, 0);
	}
}

static hvd_status_t exec_device_allreduce(struct engine *e,
					  const struct eng_resp *r,
					  struct hvd_handle **ops,
					  const struct fusion_bucket *b,
					  hvd_comm_t *comm)
{
	const struct eng_params *p = &r[b->idx[0]].p;
	struct comm_fusion_entry *ent;
	hvd_status_t st;

	if (!coll_has_device())
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd: allreduce '%s' has device buffers but "
				 "libhvd was built without the GPU path "
				 "(configure --with-cuda)",
				 r[b->idx[0]].name);
	ent = calloc((size_t)b->n, sizeof(*ent));
	if (!ent)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	for (int i = 0; i < b->n; i++) {
		struct hvd_handle *h = ops[b->idx[i]];

		if (!h) {
			free(ent);
			return hvd_error(HVD_ERR_UNSUPPORTED,
					 "hvd: device allreduce '%s' while "
					 "this rank has joined",
					 r[b->idx[i]].name);
		}
		ent[i].sendbuf = input_of(h);
		ent[i].recvbuf = h->recvbuf;
		ent[i].count = h->p.count;
	}
	tl_all(e, r, b, "NCCL_ALLREDUCE");
	engine_stream_order(ops, b->idx, b->n);
	st = coll_fused_allreduce(comm, ent, b->n, (hvd_dtype_t)p->dtype,
				  (hvd_op_t)p->op, p->prescale, p->postscale,
				  !!(p->flags & EF_COMPRESS));
	engine_stream_clear();
	tl_all(e, r, b, NULL);
	free(ent);
	return st;
}

static hvd_status_t exec_allreduce(struct engine *e, const struct eng_resp *r,
				   struct hvd_handle **ops,
				   const struct fusion_bucket *b,
				   const struct pset *ps)
{
	const struct eng_params *p = &r[b->idx[0]].p;
	hvd_dtype_t dtype = (hvd_dtype_t)p->dtype;
	hvd_op_t op = (hvd_op_t)p->op;
	int compress = (p->flags & EF_COMPRESS) && dtype == HVD_FLOAT32;
	size_t es = hvd_dtype_size(dtype), total = 0, off;
	double post = p->postscale;
	hvd_op_t cop = op;
	hvd_status_t st;
	uint8_t *buf;

	if (p->flags & EF_DEVICE)
		return exec_device_allreduce(e, r, ops, b, ps->comm);
	if (op == HVD_AVERAGE) {
		if (post == 1.0 && !compress && b->n == 1 &&
		    p->prescale == 1.0) {
			cop = HVD_AVERAGE; /* the collective divides */
		} else {
			cop = HVD_SUM;
			post /= ps->n;
		}
	}
	if (b->n == 1 && !compress && ops[b->idx[0]]) {
		/* One tensor: reduce in the caller's buffers. */
		struct hvd_handle *h = ops[b->idx[0]];
		const void *in = input_of(h);

		if (p->prescale != 1.0) {
			reduce_scale_copy(h->recvbuf, in, h->p.count, dtype,
					  p->prescale);
			in = h->recvbuf;
		}
		tl_all(e, r, b, "UCX_ALLREDUCE");
		st = coll_allreduce(ps->comm, in, h->recvbuf, h->p.count, dtype,
				    cop);
		tl_all(e, r, b, NULL);
		if (st == HVD_OK && post != 1.0)
			reduce_scale(h->recvbuf, h->p.count, dtype, post);
		return st;
	}
	for (int i = 0; i < b->n; i++)
		total += r[b->idx[i]].p.count;
	if (compress)
		es = 2;
	buf = ensure(&e->fusion_buf, &e->fusion_cap, total * es);
	if (!buf)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: cannot allocate a %zu-byte fusion "
				 "buffer",
				 total * es);
	tl_all(e, r, b, "MEMCPY_IN_FUSION_BUFFER");
	off = 0;
	for (int i = 0; i < b->n; i++) {
		struct hvd_handle *h = ops[b->idx[i]];
		size_t n = r[b->idx[i]].p.count;

		if (!h) {
			memset(buf + off * es, 0, n * es); /* joined */
		} else if (compress) {
			const float *in = input_of(h);
			uint16_t *d = (uint16_t *)(buf + off * es);
			float s = (float)p->prescale;
			float dv = reduce_scale_divisor(p->prescale);

			for (size_t k = 0; k < n; k++)
				d[k] = hvd_float_to_half(
				    reduce_scale1(in[k], s, dv));
		} else {
			reduce_scale_copy(buf + off * es, input_of(h), n, dtype,
					  p->prescale);
		}
		off += n;
	}
	tl_all(e, r, b, NULL);
	tl_all(e, r, b, "UCX_ALLREDUCE");
	st = coll_allreduce(ps->comm, buf, buf, total,
			    compress ? HVD_FLOAT16 : dtype, cop);
	tl_all(e, r, b, NULL);
	if (st != HVD_OK)
		return st;
	tl_all(e, r, b, "MEMCPY_OUT_FUSION_BUFFER");
	off = 0;
	for (int i = 0; i < b->n; i++) {
		struct hvd_handle *h = ops[b->idx[i]];
		size_t n = r[b->idx[i]].p.count;

		if (h && compress) {
			const uint16_t *s = (const uint16_t *)(buf + off * es);
			float *d = h->recvbuf, f = (float)post;
			float dv = reduce_scale_divisor(post);

			for (size_t k = 0; k < n; k++)
				d[k] = reduce_scale1(hvd_half_to_float(s[k]), f,
						     dv);
		} else if (h) {
			reduce_scale_copy(h->recvbuf, buf + off * es, n, dtype,
					  post);
		}
		off += n;
	}
	tl_all(e, r, b, NULL);
	return HVD_OK;
}

static int set_rank_of(const struct pset *ps, int world_rank)
{
	for (int i = 0; i < ps->n; i++)
		if (ps->ranks[i] == world_rank)
			return i;
	return -1;
}

static hvd_status_t exec_other(struct engine *e, const struct eng_resp *r,
			       struct hvd_handle *h, const struct pset *ps)
{
	const struct eng_params *p = &r->p;
	hvd_dtype_t dtype = (hvd_dtype_t)p->dtype;
	int dev = (p->flags & EF_DEVICE) != 0;
	size_t es = hvd_dtype_size(dtype), *counts = NULL, *displs = NULL;
	hvd_status_t st = HVD_OK;
	const char *act = NULL;

	if (dev && !coll_has_device())
		return hvd_error(HVD_ERR_UNSUPPORTED,
				 "hvd: %s '%s' has device buffers but libhvd "
				 "was built without the GPU path",
				 eng_kind_name(p->kind), r->name);
	if (p->kind == EK_ALLGATHER) {
		counts = calloc((size_t)ps->n, sizeof(*counts));
		displs = calloc((size_t)ps->n, sizeof(*displs));
		if (!counts || !displs) {
			st = hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
			goto out;
		}
	}
	if (dev) {
		int self = 0;

		/* a single op: ops[] is this one handle */
		engine_stream_order(&h, &self, 1);
	}
	switch (p->kind) {
	case EK_ALLGATHER: {
		size_t total = 0;

		if (r->ncounts != (uint32_t)ps->n) {
			st = hvd_error(HVD_ERR_INTERNAL,
				       "hvd: allgather '%s': %u counts for a "
				       "set of %d",
				       r->name, r->ncounts, ps->n);
			goto out;
		}
		for (int i = 0; i < ps->n; i++) {
			counts[i] = r->counts[i];
			displs[i] = total;
			total += counts[i];
		}
		act = dev ? "NCCL_ALLGATHER" : "UCX_ALLGATHER";
		timeline_begin(&e->tl, r->name, act);
		st = coll_allgatherv(ps->comm, h->sendbuf, h->p.count,
				     h->recvbuf, counts, displs, dtype);
		h->result_count = total;
		break;
	}
	case EK_BROADCAST: {
		int root = set_rank_of(ps, p->root);

		act = dev ? "NCCL_BCAST" : "UCX_BCAST";
		timeline_begin(&e->tl, r->name, act);
		st = coll_broadcast(ps->comm, h->recvbuf, h->p.count, dtype,
				    root);
		h->result_count = h->p.count;
		break;
	}
	case EK_ALLTOALL:
		act = dev ? "NCCL_ALLTOALL" : "UCX_ALLTOALL";
		timeline_begin(&e->tl, r->name, act);
		st = coll_alltoall(ps->comm, h->sendbuf, h->recvbuf,
				   h->p.count, dtype);
		h->result_count = h->p.count * (size_t)ps->n;
		break;
	case EK_REDUCESCATTER: {
		hvd_op_t cop = (hvd_op_t)p->op;
		double post = p->postscale;
		const void *in = input_of(h);
		size_t mine =
		    hvd_reducescatter_count(h->p.count, ps->my_rank, ps->n);

		if (cop == HVD_AVERAGE && (post != 1.0 || p->prescale != 1.0)) {
			cop = HVD_SUM;
			post /= ps->n;
		}
		if (p->prescale != 1.0 && !dev) {
			void *tmp = ensure(&e->fusion_buf, &e->fusion_cap,
					   h->p.count * es);

			if (!tmp) {
				st = hvd_error(HVD_ERR_NO_MEMORY,
					       "hvd: out of memory");
				goto out;
			}
			reduce_scale_copy(tmp, in, h->p.count, dtype,
					  p->prescale);
			in = tmp;
		}
		act = dev ? "NCCL_REDUCESCATTER" : "UCX_REDUCESCATTER";
		timeline_begin(&e->tl, r->name, act);
		st = coll_reducescatter(ps->comm, in, h->recvbuf, h->p.count,
					dtype, cop);
		if (st == HVD_OK && post != 1.0 && !dev)
			reduce_scale(h->recvbuf, mine, dtype, post);
		h->result_count = mine;
		break;
	}
	default:
		st = hvd_error(HVD_ERR_INTERNAL, "hvd: cannot execute %s",
			       eng_kind_name(p->kind));
	}
	if (act)
		timeline_end(&e->tl, r->name, NULL, 0);
	if (dev)
		engine_stream_clear();
out:
	free(counts);
	free(displs);
	return st;
}

hvd_status_t fusion_execute(struct engine *e, const struct eng_resp *r,
			    struct hvd_handle **ops,
			    const struct fusion_bucket *b, char *msg,
			    size_t msglen)
{
	const struct eng_resp *r0 = &r[b->idx[0]];
	const struct pset *ps = pset_get(&e->psets, r0->p.pset);
	hvd_status_t st;

	if (!ps || ps->my_rank < 0 || !ps->comm)
		return HVD_OK; /* not a member: nothing to run */
	if (r0->p.kind == EK_ALLREDUCE) {
		st = exec_allreduce(e, r, ops, b, ps);
	} else if (!ops[b->idx[0]]) {
		st = hvd_error(HVD_ERR_INTERNAL,
			       "hvd: %s '%s' has no local operation",
			       eng_kind_name(r0->p.kind), r0->name);
	} else {
		st = exec_other(e, r0, ops[b->idx[0]], ps);
	}
	if (st != HVD_OK && msglen)
		snprintf(msg, msglen, "%s", hvd_last_error());
	return st;
}

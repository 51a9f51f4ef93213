/*
 * nccl_coll.c - collectives on device memory over a struct cuda_comm.
 *
 * Same semantics as the host coll_* of comm.h, so the router can send a
 * call either way unchanged:
 *   allreduce      ncclAllReduce (average: ncclAvg); prescale/postscale
 *                  by the scale kernel; fp16 compression casts float32 to
 *                  float16 (scale folded in), reduces, casts back;
 *                  HOROVOD_HIERARCHICAL_ALLREDUCE: ncclReduceScatter in
 *                  the node, ncclAllReduce across nodes, ncclAllGather in
 *                  the node (the remainder that does not split evenly goes
 *                  through one flat ncclAllReduce);
 *   allgatherv     ncclAllGather when every rank sends the same count into
 *                  packed slots, else one ncclBroadcast per rank, grouped;
 *   broadcast      ncclBroadcast;
 *   alltoallv      ncclSend/ncclRecv to every peer, grouped;
 *   reducescatter  ncclReduceScatter when count splits evenly, else one
 *                  ncclReduce per rank (Horovod's uneven split), grouped.
 * In-place forms whose NCCL layout differs (alltoall, reducescatter) stage
 * the input in the communicator's scratch buffer.  Each call is one
 * cuda_op: begin (stream, NVTX), enqueue, end (event wait with NCCL async
 * error polling, abort on failure).
 */
#include "config.h"

#include "cuda/cuda_internal.h"

#include <stdlib.h>

int nccl_dtype(hvd_dtype_t dtype)
{
	switch (dtype) {
	case HVD_UINT8:
		return ncclUint8;
	case HVD_INT8:
		return ncclInt8;
	case HVD_INT32:
		return ncclInt32;
	case HVD_INT64:
		return ncclInt64;
	case HVD_FLOAT16:
		return ncclFloat16;
	case HVD_BFLOAT16:
		return ncclBfloat16;
	case HVD_FLOAT32:
		return ncclFloat32;
	case HVD_FLOAT64:
		return ncclFloat64;
	default:
		return -1;
	}
}

int nccl_redop(hvd_op_t op)
{
	switch (op) {
	case HVD_SUM:
		return ncclSum;
	case HVD_AVERAGE:
		return ncclAvg;
	case HVD_MIN:
		return ncclMin;
	case HVD_MAX:
		return ncclMax;
	case HVD_PRODUCT:
		return ncclProd;
	default:
		return -1;
	}
}

static hvd_status_t check_type(const char *what, hvd_dtype_t dtype)
{
	if (nccl_dtype(dtype) < 0)
		return hvd_error(HVD_ERR_BAD_TYPE, "%s: unknown type %d", what,
				 (int)dtype);
	return HVD_OK;
}

static hvd_status_t check_op(const char *what, hvd_op_t op)
{
	if (nccl_redop(op) < 0)
		return hvd_error(HVD_ERR_BAD_OP, "%s: unknown reduction %d",
				 what, (int)op);
	return HVD_OK;
}

#define AT(buf, elems, es) ((char *)(buf) + (size_t)(elems) * (es))

/* After an NCCL call on comm: an error is an error; ncclInProgress (a
 * nonblocking communicator still enqueueing) is waited out, because the
 * next call on comm may only come once it is ready. */
static hvd_status_t enq(struct cuda_op *op, ncclComm_t comm, ncclResult_t r,
			const char *what, int line)
{
	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_error_at(r, what, __FILE__, line);
	if (r == ncclInProgress)
		return cuda_nccl_ready(op->cc, comm, what);
	return HVD_OK;
}

#define ENQ(op, comm, call)                                                    \
	do {                                                                   \
		hvd_status_t s_ = enq((op), (comm), (call), #call, __LINE__);  \
		if (s_ != HVD_OK)                                              \
			return s_;                                             \
	} while (0)

/* A grouped sequence: errors inside the group are reported by
 * ncclGroupEnd, which must run even so (an open group would swallow the
 * next call). */
#define GROUP_CALL(r, call)                                                    \
	do {                                                                   \
		ncclResult_t q_ = (call);                                      \
		if ((r) == ncclSuccess && q_ != ncclSuccess &&                 \
		    q_ != ncclInProgress)                                      \
			(r) = q_;                                              \
	} while (0)

#define CUDA_ENQ(call)                                                         \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess)                                         \
			return cuda_error_at(e_, #call, __FILE__, __LINE__);   \
	} while (0)

static hvd_status_t launched(cudaError_t err, const char *what)
{
	return err == cudaSuccess
		   ? HVD_OK
		   : cuda_error_at(err, what, __FILE__, __LINE__);
}

/* Hierarchical allreduce of recv in place (SUM/MIN/MAX/PROD). */
static hvd_status_t hier_enqueue(struct cuda_op *op, void *recv, size_t count,
				 ncclDataType_t t, size_t es, ncclRedOp_t nop,
				 struct cuda_comm *local,
				 struct cuda_comm *cross)
{
	ncclComm_t lc = cuda_comm_nccl(local), xc = cuda_comm_nccl(cross);
	int L = cuda_comm_size(local), lr = cuda_comm_rank(local);
	size_t chunk = count / (size_t)L, rem = count - chunk * (size_t)L;
	void *mine = AT(recv, chunk * (size_t)lr, es);

	op->extra[0] = lc;
	op->extra[1] = xc;
	if (chunk) {
		/* In place on every step: NCCL's in-place reduce-scatter
		 * and allgather use this rank's slot of the full buffer. */
		ENQ(op, lc,
		    ncclReduceScatter(recv, mine, chunk, t, nop, lc,
				      op->stream));
		ENQ(op, xc,
		    ncclAllReduce(mine, mine, chunk, t, nop, xc, op->stream));
		ENQ(op, lc,
		    ncclAllGather(mine, recv, chunk, t, lc, op->stream));
	}
	if (rem)
		ENQ(op, op->nccl,
		    ncclAllReduce(AT(recv, chunk * (size_t)L, es),
				  AT(recv, chunk * (size_t)L, es), rem, t, nop,
				  op->nccl, op->stream));
	return HVD_OK;
}

/* The allreduce, enqueued on op's stream: recv = post * OP(pre * send). */
static hvd_status_t allreduce_enqueue(struct cuda_op *op, const void *send,
				      void *recv, size_t count,
				      hvd_dtype_t dtype, hvd_op_t rop,
				      double pre, double post, int compress)
{
	struct cuda_comm *cc = op->cc, *local = NULL, *cross = NULL;
	ncclDataType_t t = (ncclDataType_t)nccl_dtype(dtype);
	size_t es = hvd_dtype_size(dtype);
	hvd_status_t st;
	ncclRedOp_t nop;

	if (count == 0)
		return HVD_OK;
	compress = compress && dtype == HVD_FLOAT32;
	/* Integer averages stay flat: ncclAvg divides exactly, a scale by
	 * 1/size in floating point can truncate 9 * (1/3) to 2. */
	if (cuda_settings()->hierarchical && !compress &&
	    !(rop == HVD_AVERAGE && dtype != HVD_FLOAT16 &&
	      dtype != HVD_BFLOAT16 && dtype != HVD_FLOAT32 &&
	      dtype != HVD_FLOAT64)) {
		st = cuda_comm_hier(cc, &local, &cross);
		if (st != HVD_OK)
			return st;
	}
	/* Average as a sum and a scale wherever ncclAvg does not fit in a
	 * single call. */
	if (rop == HVD_AVERAGE && (compress || local)) {
		rop = HVD_SUM;
		post /= cuda_comm_size(cc);
	}
	nop = (ncclRedOp_t)nccl_redop(rop);

	if (compress) {
		void *half;

		st = cuda_comm_scratch(cc, 1, count * 2, &half);
		if (st != HVD_OK)
			return st;
		CUDA_ENQ(cuda_kernel_cast_from_f32(half, HVD_FLOAT16, send,
						   count, pre, op->stream));
		ENQ(op, op->nccl,
		    ncclAllReduce(half, half, count, ncclFloat16, nop, op->nccl,
				  op->stream));
		CUDA_ENQ(cuda_kernel_cast_to_f32(recv, half, HVD_FLOAT16, count,
						 post, op->stream));
		return HVD_OK;
	}
	if (pre != 1.0) {
		CUDA_ENQ(cuda_kernel_scale(recv, send, count, dtype, pre,
					   op->stream));
		send = recv;
	}
	if (local) {
		if (send != recv)
			CUDA_ENQ(cudaMemcpyAsync(recv, send, count * es,
						 cudaMemcpyDeviceToDevice,
						 op->stream));
		st = hier_enqueue(op, recv, count, t, es, nop, local, cross);
		if (st != HVD_OK)
			return st;
	} else {
		ENQ(op, op->nccl,
		    ncclAllReduce(send, recv, count, t, nop, op->nccl,
				  op->stream));
	}
	if (post != 1.0)
		CUDA_ENQ(cuda_kernel_scale(recv, recv, count, dtype, post,
					   op->stream));
	return HVD_OK;
}

hvd_status_t nccl_allreduce_ex(struct cuda_comm *cc, const void *sendbuf,
			       void *recvbuf, size_t count, hvd_dtype_t dtype,
			       hvd_op_t op, double prescale, double postscale,
			       int compress_fp16)
{
	struct cuda_op o;
	hvd_status_t st;

	if ((st = check_type("allreduce", dtype)) != HVD_OK ||
	    (st = check_op("allreduce", op)) != HVD_OK)
		return st;
	if (!recvbuf && count)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "allreduce: NULL receive buffer");
	if (sendbuf == HVD_IN_PLACE || !sendbuf)
		sendbuf = recvbuf;
	st = cuda_op_begin(cc, "hvd allreduce", &o);
	if (st != HVD_OK)
		return st;
	st = allreduce_enqueue(&o, sendbuf, recvbuf, count, dtype, op, prescale,
			       postscale, compress_fp16);
	return cuda_op_end(&o, st);
}

hvd_status_t nccl_allreduce(struct cuda_comm *cc, const void *sendbuf,
			    void *recvbuf, size_t count, hvd_dtype_t dtype,
			    hvd_op_t op)
{
	return nccl_allreduce_ex(cc, sendbuf, recvbuf, count, dtype, op, 1.0,
				 1.0, 0);
}

hvd_status_t nccl_fused_allreduce(struct cuda_comm *cc,
				  const struct cuda_fusion_entry *entries,
				  int n, hvd_dtype_t dtype, hvd_op_t op,
				  double prescale, double postscale,
				  int compress_fp16)
{
	size_t es = hvd_dtype_size(dtype), total = 0, off = 0;
	struct cuda_copy *copies = NULL;
	struct cuda_op o;
	hvd_status_t st;
	void *fusion;

	if ((st = check_type("fused allreduce", dtype)) != HVD_OK ||
	    (st = check_op("fused allreduce", op)) != HVD_OK)
		return st;
	if (n < 0 || (n > 0 && !entries))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "fused allreduce: bad entry list");
	for (int i = 0; i < n; i++)
		total += entries[i].count;
	if (n == 1)
		return nccl_allreduce_ex(cc, entries[0].sendbuf,
					 entries[0].recvbuf, entries[0].count,
					 dtype, op, prescale, postscale,
					 compress_fp16);
	if (total == 0)
		return HVD_OK;
	copies = malloc((size_t)n * sizeof(*copies));
	if (!copies)
		return hvd_error(HVD_ERR_NO_MEMORY, "fused allreduce");
	/* The engine keeps a fused response under HOROVOD_FUSION_THRESHOLD;
	 * the buffer grows past it if a caller does not. */
	st = cuda_comm_scratch(cc, 0, total * es, &fusion);
	if (st != HVD_OK)
		goto out;
	st = cuda_op_begin(cc, "hvd fused allreduce", &o);
	if (st != HVD_OK)
		goto out;
	for (int i = 0; i < n; i++) {
		const void *src = entries[i].sendbuf;

		if (!src || src == HVD_IN_PLACE)
			src = entries[i].recvbuf;
		copies[i].dst = AT(fusion, off, es);
		copies[i].src = src;
		copies[i].bytes = entries[i].count * es;
		off += entries[i].count;
	}
	st = launched(cuda_kernel_batched_copy(copies, n, o.stream),
		      "batched copy into the fusion buffer");
	if (st == HVD_OK)
		st = allreduce_enqueue(&o, fusion, fusion, total, dtype, op,
				       prescale, postscale, compress_fp16);
	if (st == HVD_OK) {
		for (int i = 0; i < n; i++) {
			void *dst = copies[i].dst;

			copies[i].dst = entries[i].recvbuf;
			copies[i].src = dst;
		}
		st = launched(cuda_kernel_batched_copy(copies, n, o.stream),
			      "batched copy out of the fusion buffer");
	}
	st = cuda_op_end(&o, st);
out:
	free(copies);
	return st;
}

/* Copy bytes from src to dst on op's stream (through scratch when they
 * overlap); *moved = dst. */
static hvd_status_t move_block(struct cuda_op *op, void *dst, const void *src,
			       size_t bytes, const void **moved)
{
	const char *d = dst, *s = src;
	hvd_status_t st = HVD_OK;
	void *tmp;

	if (bytes && d < s + bytes && s < d + bytes) {
		st = cuda_comm_scratch(op->cc, 1, bytes, &tmp);
		if (st != HVD_OK)
			return st;
		CUDA_ENQ(cudaMemcpyAsync(tmp, src, bytes,
					 cudaMemcpyDeviceToDevice, op->stream));
		src = tmp;
	}
	if (bytes)
		CUDA_ENQ(cudaMemcpyAsync(dst, src, bytes,
					 cudaMemcpyDeviceToDevice, op->stream));
	*moved = dst;
	return st;
}

hvd_status_t nccl_allgatherv(struct cuda_comm *cc, const void *sendbuf,
			     size_t sendcount, void *recvbuf,
			     const size_t *recvcounts, const size_t *displs,
			     hvd_dtype_t dtype)
{
	size_t es = hvd_dtype_size(dtype), *packed = NULL, total = 0;
	ncclDataType_t t;
	int even = 1, n = cuda_comm_size(cc), me = cuda_comm_rank(cc);
	struct cuda_op o;
	hvd_status_t st;

	if ((st = check_type("allgatherv", dtype)) != HVD_OK)
		return st;
	t = (ncclDataType_t)nccl_dtype(dtype);
	if (!recvcounts)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "allgatherv: NULL recvcounts");
	if (recvcounts[me] != sendcount)
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: allgatherv: this rank sends %zu "
				 "elements but recvcounts[%d] is %zu",
				 sendcount, me, recvcounts[me]);
	if (!displs) {
		packed = malloc((size_t)n * sizeof(size_t));
		if (!packed)
			return hvd_error(HVD_ERR_NO_MEMORY, "allgatherv");
		for (int r = 0; r < n; r++) {
			packed[r] = total;
			total += recvcounts[r];
		}
		displs = packed;
	}
	total = 0;
	for (int r = 0; r < n; r++) {
		if (recvcounts[r] != recvcounts[0] ||
		    displs[r] != (size_t)r * recvcounts[0])
			even = 0;
		if (displs[r] + recvcounts[r] > total)
			total = displs[r] + recvcounts[r];
	}
	st = cuda_op_begin(cc, "hvd allgather", &o);
	if (st != HVD_OK)
		goto out;
	/* As on the host path: HVD_IN_PLACE means this rank's block is
	 * already in its slot; a send buffer inside recvbuf elsewhere (e.g.
	 * sendbuf == recvbuf) is moved into the slot first, since NCCL would
	 * read it while peers' blocks land on it. */
	if (!sendbuf || sendbuf == HVD_IN_PLACE)
		sendbuf = AT(recvbuf, displs[me], es);
	else if (sendbuf != AT(recvbuf, displs[me], es) &&
		 (const char *)sendbuf < AT(recvbuf, total, es) &&
		 (const char *)sendbuf + sendcount * es > (const char *)recvbuf)
		st = move_block(&o, AT(recvbuf, displs[me], es), sendbuf,
				sendcount * es, &sendbuf);
	if (st != HVD_OK) {
		/* (the move failed: skip the collective) */
	} else if (even) {
		if (recvcounts[0])
			st = enq(&o, o.nccl,
				 ncclAllGather(sendbuf, recvbuf, recvcounts[0],
					       t, o.nccl, o.stream),
				 "ncclAllGather", __LINE__);
	} else {
		ncclResult_t r = ncclGroupStart();

		for (int q = 0; q < n && r == ncclSuccess; q++)
			if (recvcounts[q])
				GROUP_CALL(
				    r,
				    ncclBroadcast(
					q == me ? sendbuf
						: AT(recvbuf, displs[q], es),
					AT(recvbuf, displs[q], es),
					recvcounts[q], t, q, o.nccl, o.stream));
		GROUP_CALL(r, ncclGroupEnd());
		st = enq(&o, o.nccl, r, "ncclBroadcast (allgatherv group)",
			 __LINE__);
	}
	st = cuda_op_end(&o, st);
out:
	free(packed);
	return st;
}

hvd_status_t nccl_broadcast(struct cuda_comm *cc, void *buf, size_t count,
			    hvd_dtype_t dtype, int root)
{
	struct cuda_op o;
	hvd_status_t st;

	if ((st = check_type("broadcast", dtype)) != HVD_OK)
		return st;
	if (root < 0 || root >= cuda_comm_size(cc))
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "broadcast: root %d is not a rank of this "
				 "communicator (0..%d)",
				 root, cuda_comm_size(cc) - 1);
	if (count == 0)
		return HVD_OK;
	st = cuda_op_begin(cc, "hvd broadcast", &o);
	if (st != HVD_OK)
		return st;
	st = enq(&o, o.nccl,
		 ncclBroadcast(buf, buf, count,
			       (ncclDataType_t)nccl_dtype(dtype), root, o.nccl,
			       o.stream),
		 "ncclBroadcast", __LINE__);
	return cuda_op_end(&o, st);
}

/* Displacements: given, or packed in rank order. */
static size_t *packed_displs(const size_t *counts, int n, size_t *total)
{
	size_t *d = malloc((size_t)n * sizeof(size_t));

	*total = 0;
	if (!d)
		return NULL;
	for (int r = 0; r < n; r++) {
		d[r] = *total;
		*total += counts[r];
	}
	return d;
}

hvd_status_t nccl_alltoallv(struct cuda_comm *cc, const void *sendbuf,
			    const size_t *sendcounts, const size_t *sdispls,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *rdispls, hvd_dtype_t dtype)
{
	size_t es = hvd_dtype_size(dtype), stotal = 0, rtotal = 0;
	size_t *sd = NULL, *rd = NULL;
	int n = cuda_comm_size(cc);
	ncclDataType_t t;
	ncclResult_t r;
	struct cuda_op o;
	hvd_status_t st;

	if ((st = check_type("alltoallv", dtype)) != HVD_OK)
		return st;
	t = (ncclDataType_t)nccl_dtype(dtype);
	if (!sendcounts || !recvcounts)
		return hvd_error(HVD_ERR_INVALID_ARG, "alltoallv: NULL counts");
	if (sendcounts[cuda_comm_rank(cc)] != recvcounts[cuda_comm_rank(cc)])
		return hvd_error(HVD_ERR_MISMATCH,
				 "hvd: alltoallv: this rank sends itself %zu "
				 "elements but expects %zu",
				 sendcounts[cuda_comm_rank(cc)],
				 recvcounts[cuda_comm_rank(cc)]);
	sd = packed_displs(sendcounts, n, &stotal);
	rd = packed_displs(recvcounts, n, &rtotal);
	if (!sd || !rd) {
		st = hvd_error(HVD_ERR_NO_MEMORY, "alltoallv");
		goto out;
	}
	if (sdispls) {
		stotal = 0;
		for (int q = 0; q < n; q++)
			if (sdispls[q] + sendcounts[q] > stotal)
				stotal = sdispls[q] + sendcounts[q];
	}
	st = cuda_op_begin(cc, "hvd alltoall", &o);
	if (st != HVD_OK)
		goto out;
	if (!sendbuf || sendbuf == HVD_IN_PLACE || sendbuf == recvbuf) {
		/* Peers' blocks would overwrite what is still to be sent. */
		void *copy;

		st = cuda_comm_scratch(cc, 1, stotal * es, &copy);
		if (st == HVD_OK && stotal) {
			cudaError_t e =
			    cudaMemcpyAsync(copy, recvbuf, stotal * es,
					    cudaMemcpyDeviceToDevice, o.stream);

			if (e != cudaSuccess)
				st = cuda_error_at(e, "cudaMemcpyAsync",
						   __FILE__, __LINE__);
		}
		sendbuf = copy;
	}
	if (st == HVD_OK) {
		r = ncclGroupStart();
		for (int q = 0; q < n && r == ncclSuccess; q++) {
			size_t so = sdispls ? sdispls[q] : sd[q];
			size_t ro = rdispls ? rdispls[q] : rd[q];

			if (sendcounts[q])
				GROUP_CALL(r, ncclSend(AT(sendbuf, so, es),
						       sendcounts[q], t, q,
						       o.nccl, o.stream));
			if (recvcounts[q])
				GROUP_CALL(r, ncclRecv(AT(recvbuf, ro, es),
						       recvcounts[q], t, q,
						       o.nccl, o.stream));
		}
		GROUP_CALL(r, ncclGroupEnd());
		st = enq(&o, o.nccl, r, "ncclSend/ncclRecv (alltoallv group)",
			 __LINE__);
	}
	st = cuda_op_end(&o, st);
out:
	free(sd);
	free(rd);
	return st;
}

hvd_status_t nccl_reducescatter(struct cuda_comm *cc, const void *sendbuf,
				void *recvbuf, size_t count, hvd_dtype_t dtype,
				hvd_op_t op)
{
	size_t es = hvd_dtype_size(dtype);
	int n = cuda_comm_size(cc);
	ncclDataType_t t;
	ncclRedOp_t nop;
	struct cuda_op o;
	hvd_status_t st;

	if ((st = check_type("reducescatter", dtype)) != HVD_OK ||
	    (st = check_op("reducescatter", op)) != HVD_OK)
		return st;
	t = (ncclDataType_t)nccl_dtype(dtype);
	nop = (ncclRedOp_t)nccl_redop(op);
	if (count == 0)
		return HVD_OK;
	st = cuda_op_begin(cc, "hvd reducescatter", &o);
	if (st != HVD_OK)
		return st;
	if (!sendbuf || sendbuf == HVD_IN_PLACE || sendbuf == recvbuf) {
		/* The input fills recvbuf; the result goes to its start. */
		void *copy;

		st = cuda_comm_scratch(cc, 1, count * es, &copy);
		if (st == HVD_OK) {
			cudaError_t e =
			    cudaMemcpyAsync(copy, recvbuf, count * es,
					    cudaMemcpyDeviceToDevice, o.stream);

			if (e != cudaSuccess)
				st = cuda_error_at(e, "cudaMemcpyAsync",
						   __FILE__, __LINE__);
		}
		sendbuf = copy;
	}
	if (st == HVD_OK && count % (size_t)n == 0) {
		st = enq(&o, o.nccl,
			 ncclReduceScatter(sendbuf, recvbuf, count / (size_t)n,
					   t, nop, o.nccl, o.stream),
			 "ncclReduceScatter", __LINE__);
	} else if (st == HVD_OK) {
		ncclResult_t r = ncclGroupStart();

		for (int q = 0; q < n && r == ncclSuccess; q++) {
			size_t c = hvd_reducescatter_count(count, q, n);
			size_t off = hvd_reducescatter_offset(count, q, n);

			if (c)
				GROUP_CALL(r, ncclReduce(AT(sendbuf, off, es),
							 recvbuf, c, t, nop, q,
							 o.nccl, o.stream));
		}
		GROUP_CALL(r, ncclGroupEnd());
		st = enq(&o, o.nccl, r, "ncclReduce (reducescatter group)",
			 __LINE__);
	}
	return cuda_op_end(&o, st);
}

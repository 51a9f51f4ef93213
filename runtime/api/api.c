/*
 * api.c - the public blocking collectives: argument checks, then the
 * collectives' front door on the world communicator (which routes device
 * buffers to the GPU path).  Every check that can be made locally is
 * made here, so a bad call fails on the caller with a message, before
 * any communication.  Each call is numbered first (net/refusal.h): a
 * refused call takes no part in the collective, and where only some
 * ranks refuse it, every rank hears so and the call fails on all of them
 * (hvd(3), HVD_ERR_INVALID_ARG), instead of a refused rank's next call
 * pairing with the others' call.
 */
#include "config.h"

#include "coll/coll.h"
#include "net/refusal.h"

#include <stdint.h>
#include <stdlib.h>

static hvd_status_t need_init(const char *fn)
{
	if (!hvd_is_initialized() || !comm_world())
		return hvd_error(HVD_ERR_NOT_INITIALIZED,
				 "hvd: %s() called before hvd_init() (or "
				 "after hvd_finalize())",
				 fn);
	return HVD_OK;
}

static hvd_status_t check_type(const char *fn, hvd_dtype_t dt)
{
	if ((unsigned)dt >= HVD_DTYPE_COUNT)
		return hvd_error(HVD_ERR_BAD_TYPE,
				 "hvd: %s(): type %d is not an hvd_dtype_t "
				 "(expected HVD_UINT8..HVD_FLOAT64)",
				 fn, (int)dt);
	return HVD_OK;
}

static hvd_status_t check_op(const char *fn, hvd_op_t op)
{
	if ((unsigned)op >= HVD_OP_COUNT && op != HVD_ADASUM)
		return hvd_error(HVD_ERR_BAD_OP,
				 "hvd: %s(): op %d is not an hvd_op_t "
				 "(expected HVD_SUM, HVD_AVERAGE, HVD_MIN, "
				 "HVD_MAX, HVD_PRODUCT or HVD_ADASUM)",
				 fn, (int)op);
	return HVD_OK;
}

/* count elements of dt (times mult) must fit in size_t bytes. */
static hvd_status_t check_count(const char *fn, size_t count, hvd_dtype_t dt,
				size_t mult)
{
	size_t esz = hvd_dtype_size(dt);

	if (mult && count > SIZE_MAX / esz / mult)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s(): %zu elements of %s overflow "
				 "the address space",
				 fn, count, hvd_dtype_name(dt));
	return HVD_OK;
}

static hvd_status_t check_buf(const char *fn, const char *name,
			      const void *p, size_t count)
{
	if (!p && count)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s(): %s is NULL with a count of %zu "
				 "(pass a buffer, or HVD_IN_PLACE as the send "
				 "buffer)",
				 fn, name, count);
	return HVD_OK;
}

/* Every public blocking collective, once need_init() passed: numbered,
 * then refused on args (the status of its argument checks), settled with
 * the others where it is empty (a count of 0, which the collective
 * skips), or let go. */
static hvd_status_t enter(const char *fn, hvd_status_t args, int empty)
{
	HVD_CHECK(refusal_call(fn));
	if (args != HVD_OK)
		return refusal_refuse(fn, args);
	if (empty && comm_size(comm_world()) > 1)
		return refusal_empty(fn);
	return refusal_go();
}

static hvd_status_t allreduce_args(const char *fn, const void *sendbuf,
				   const void *recvbuf, size_t count,
				   hvd_dtype_t dtype, hvd_op_t op)
{
	HVD_CHECK(check_type(fn, dtype));
	HVD_CHECK(check_op(fn, op));
	HVD_CHECK(check_count(fn, count, dtype, 1));
	HVD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HVD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	return coll_allreduce_args(comm_world(), recvbuf, dtype, op);
}

hvd_status_t hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			   hvd_dtype_t dtype, hvd_op_t op)
{
	const char *fn = "hvd_allreduce";

	HVD_CHECK(need_init(fn));
	HVD_CHECK(enter(fn,
			allreduce_args(fn, sendbuf, recvbuf, count, dtype, op),
			count == 0));
	return coll_allreduce(comm_world(), sendbuf, recvbuf, count, dtype, op);
}

/* The checks of an even collective of count elements a rank (allgather,
 * alltoall) on the world, and (out not NULL) its n counts of count each
 * for the v-variant that does the work. */
static hvd_status_t even_args(const char *fn, const void *sendbuf,
			      const void *recvbuf, size_t count,
			      hvd_dtype_t dtype, size_t **out)
{
	size_t *counts;
	int n;

	HVD_CHECK(check_type(fn, dtype));
	n = comm_size(comm_world());
	HVD_CHECK(check_count(fn, count, dtype, (size_t)n));
	HVD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HVD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (!out)
		return HVD_OK;
	counts = malloc((size_t)n * sizeof(size_t));
	if (!counts)
		return hvd_error(HVD_ERR_NO_MEMORY,
				 "hvd: %s(): out of memory for %d counts", fn,
				 n);
	for (int i = 0; i < n; i++)
		counts[i] = count;
	*out = counts;
	return HVD_OK;
}

hvd_status_t hvd_allgather(const void *sendbuf, void *recvbuf, size_t count,
			   hvd_dtype_t dtype)
{
	const char *fn = "hvd_allgather";
	size_t *counts = NULL;
	hvd_status_t st;

	HVD_CHECK(need_init(fn));
	st = enter(fn, even_args(fn, sendbuf, recvbuf, count, dtype, &counts),
		   0);
	if (st == HVD_OK)
		st = coll_allgatherv(comm_world(), sendbuf, count, recvbuf,
				     counts, NULL, dtype);
	free(counts);
	return st;
}

static hvd_status_t allgatherv_args(const char *fn, const void *sendbuf,
				    size_t sendcount, const void *recvbuf,
				    const size_t *recvcounts, hvd_dtype_t dtype)
{
	size_t total = 0;
	int n, r;

	HVD_CHECK(check_type(fn, dtype));
	if (!recvcounts)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s(): recvcounts is NULL (expected "
				 "one count per rank)",
				 fn);
	n = comm_size(comm_world());
	r = comm_rank(comm_world());
	for (int i = 0; i < n; i++) {
		if (recvcounts[i] > SIZE_MAX - total)
			return hvd_error(HVD_ERR_INVALID_ARG,
					 "hvd: %s(): recvcounts overflow",
					 fn);
		total += recvcounts[i];
	}
	HVD_CHECK(check_count(fn, total, dtype, 1));
	if (recvcounts[r] != sendcount)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s(): sendcount is %zu but "
				 "recvcounts[%d] (this rank) is %zu",
				 fn, sendcount, r, recvcounts[r]);
	HVD_CHECK(check_buf(fn, "sendbuf", sendbuf, sendcount));
	return check_buf(fn, "recvbuf", recvbuf, total);
}

hvd_status_t hvd_allgatherv(const void *sendbuf, size_t sendcount,
			    void *recvbuf, const size_t *recvcounts,
			    const size_t *displs, hvd_dtype_t dtype)
{
	const char *fn = "hvd_allgatherv";

	HVD_CHECK(need_init(fn));
	HVD_CHECK(enter(fn,
			allgatherv_args(fn, sendbuf, sendcount, recvbuf,
					recvcounts, dtype),
			0));
	return coll_allgatherv(comm_world(), sendbuf, sendcount, recvbuf,
			       recvcounts, displs, dtype);
}

static hvd_status_t broadcast_args(const char *fn, const void *buf,
				   size_t count, hvd_dtype_t dtype, int root)
{
	int n;

	HVD_CHECK(check_type(fn, dtype));
	HVD_CHECK(check_count(fn, count, dtype, 1));
	n = comm_size(comm_world());
	if (root < 0 || root >= n)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s(): root %d is not a rank (expected "
				 "0..%d)",
				 fn, root, n - 1);
	return check_buf(fn, "buf", buf, count);
}

hvd_status_t hvd_broadcast(void *buf, size_t count, hvd_dtype_t dtype,
			   int root)
{
	const char *fn = "hvd_broadcast";

	HVD_CHECK(need_init(fn));
	HVD_CHECK(enter(fn, broadcast_args(fn, buf, count, dtype, root),
			count == 0));
	return coll_broadcast(comm_world(), buf, count, dtype, root);
}

hvd_status_t hvd_alltoall(const void *sendbuf, void *recvbuf, size_t count,
			  hvd_dtype_t dtype)
{
	const char *fn = "hvd_alltoall";

	HVD_CHECK(need_init(fn));
	HVD_CHECK(enter(fn, even_args(fn, sendbuf, recvbuf, count, dtype, NULL),
			0));
	return coll_alltoall(comm_world(), sendbuf, recvbuf, count, dtype);
}

static hvd_status_t alltoallv_args(const char *fn, const void *sendbuf,
				   const size_t *sendcounts,
				   const void *recvbuf,
				   const size_t *recvcounts, hvd_dtype_t dtype)
{
	size_t stot = 0, rtot = 0;
	int n;

	HVD_CHECK(check_type(fn, dtype));
	if (!sendcounts || !recvcounts)
		return hvd_error(HVD_ERR_INVALID_ARG,
				 "hvd: %s(): %s is NULL (expected one count "
				 "per rank)",
				 fn, sendcounts ? "recvcounts" : "sendcounts");
	n = comm_size(comm_world());
	for (int i = 0; i < n; i++) {
		if (sendcounts[i] > SIZE_MAX - stot ||
		    recvcounts[i] > SIZE_MAX - rtot)
			return hvd_error(HVD_ERR_INVALID_ARG,
					 "hvd: %s(): counts overflow", fn);
		stot += sendcounts[i];
		rtot += recvcounts[i];
	}
	HVD_CHECK(check_count(fn, stot, dtype, 1));
	HVD_CHECK(check_count(fn, rtot, dtype, 1));
	HVD_CHECK(check_buf(fn, "sendbuf", sendbuf, stot));
	return check_buf(fn, "recvbuf", recvbuf, rtot);
}

hvd_status_t hvd_alltoallv(const void *sendbuf, const size_t *sendcounts,
			   const size_t *sdispls, void *recvbuf,
			   const size_t *recvcounts, const size_t *rdispls,
			   hvd_dtype_t dtype)
{
	const char *fn = "hvd_alltoallv";

	HVD_CHECK(need_init(fn));
	HVD_CHECK(enter(fn,
			alltoallv_args(fn, sendbuf, sendcounts, recvbuf,
				       recvcounts, dtype),
			0));
	return coll_alltoallv(comm_world(), sendbuf, sendcounts, sdispls,
			      recvbuf, recvcounts, rdispls, dtype);
}

static hvd_status_t reducescatter_args(const char *fn, const void *sendbuf,
				       const void *recvbuf, size_t count,
				       hvd_dtype_t dtype, hvd_op_t op)
{
	int n, r;

	HVD_CHECK(check_type(fn, dtype));
	HVD_CHECK(check_op(fn, op));
	HVD_CHECK(check_count(fn, count, dtype, 1));
	n = comm_size(comm_world());
	r = comm_rank(comm_world());
	HVD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HVD_CHECK(check_buf(fn, "recvbuf", recvbuf,
			    sendbuf == HVD_IN_PLACE
				    ? count
				    : hvd_reducescatter_count(count, r, n)));
	return coll_reducescatter_args(op);
}

hvd_status_t hvd_reducescatter(const void *sendbuf, void *recvbuf,
			       size_t count, hvd_dtype_t dtype, hvd_op_t op)
{
	const char *fn = "hvd_reducescatter";

	HVD_CHECK(need_init(fn));
	HVD_CHECK(enter(fn,
			reducescatter_args(fn, sendbuf, recvbuf, count, dtype,
					   op),
			count == 0));
	return coll_reducescatter(comm_world(), sendbuf, recvbuf, count, dtype,
				  op);
}

hvd_status_t hvd_barrier(void)
{
	HVD_CHECK(need_init("hvd_barrier"));
	HVD_CHECK(enter("hvd_barrier", HVD_OK, 0));
	return coll_barrier(comm_world());
}

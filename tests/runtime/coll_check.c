/*
 * coll_check.c - every blocking collective against answers computed here.
 *
 * Each rank's input is a deterministic function of (rank, index), chosen
 * so that the exact result is representable in every type (small
 * integers: sums of up to 8 ranks fit int8 and are exact in float16 and
 * bfloat16; products stay within +-4), so the expected value is computed
 * independently of the library, in double, and compared exactly (avg:
 * within the rounding of one division).  Checks run on every rank; the
 * number of failures is summed over ranks (with the library itself, so a
 * broken allreduce shows up as a failed summary too) and rank 0 prints one
 * TAP line per group.
 *
 *	coll_check            the full check
 *	coll_check kill K [N [allgather|reducescatter|alltoall]]
 *	                      rank K SIGKILLs itself inside an allreduce (of
 *	                      N floats, default 65536; or an allgather, a
 *	                      reducescatter or an alltoall of N in all); the
 *	                      others must fail with HVD_ERR_PEER_FAILED
 *	                      naming K within
 *	                      HOROVOD_PEER_TIMEOUT (+ slack)
 *	coll_check a2a_mismatch rank|node
 *	                      hvd_alltoall with the last rank's (or last
 *	                      node's) count apart: HVD_ERR_MISMATCH on every
 *	                      rank, in seconds
 *	coll_check refuse R CALL [late|last]
 *	                      rank R (ranks R,R2,...; every rank: all)
 *	                      refuses its CALL
 *	                      (allreduce, broadcast, allgather or barrier:
 *	                      a NULL buffer, a bad root, a NULL buffer, or
 *	                      none: a barrier cannot be refused), or makes
 *	                      it with a count of 0 (allreduce0, broadcast0),
 *	                      while the others make it; then every rank
 *	                      makes an
 *	                      allreduce, rank R a second later.  Each rank
 *	                      prints both calls' statuses, times and
 *	                      messages, and whether the second's sum is
 *	                      right (late: the others make CALL a second
 *	                      after rank R refused it; last: no second
 *	                      call, every rank finalizes after CALL).
 *	                      An allreduce
 *	                      before makes the shared-memory segment and
 *	                      the hierarchy's communicators
 *	coll_check initfail   hvd_init must fail with HVD_ERR_BOOTSTRAP
 *	                      (run with a wrong HOROVOD_RANK)
 *	coll_check after F    the full check, once file F exists (at most
 *	                      120 s after hvd_init: a test attacks the
 *	                      ranks' ports in between)
 *
 * HVD_TEST_BIG=1 adds a 1 GiB (plus one element) float32 allreduce.
 * The inputs, the expected answers and the reporting are coll_check.h.
 */
#include "coll_check.h"
#include "hvd.h"
#include "tap.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------- allreduce */

static void one_allreduce(size_t count, hvd_dtype_t t, hvd_op_t op,
			  int in_place)
{
	size_t esz = hvd_dtype_size(t);
	char *in = xmalloc(count * esz), *out = xmalloc(count * esz);
	char what[128];
	hvd_status_t st;

	for (size_t i = 0; i < count; i++)
		put(in, i, t, input(rank_, i, t, op));
	snprintf(what, sizeof(what), "allreduce %s %s count %zu%s",
		 hvd_op_name(op), hvd_dtype_name(t), count,
		 in_place ? " in place" : "");
	if (in_place) {
		memcpy(out, in, count * esz);
		st = hvd_allreduce(HVD_IN_PLACE, out, count, t, op);
	} else {
		memset(out, 0x5a, count * esz);
		st = hvd_allreduce(in, out, count, t, op);
	}
	check_status(st, what);
	if (st == HVD_OK) {
		for (size_t i = 0; i < count; i++) {
			double g = get(out, i, t), w = expect(i, t, op, size_);

			if (!close_enough(g, w, t, op)) {
				bad("%s: [%zu] = %g, expected %g", what, i, g,
				    w);
				break;
			}
		}
		/* out of place leaves the input alone */
		for (size_t i = 0; !in_place && i < count; i++)
			if (get(in, i, t) != input(rank_, i, t, op)) {
				bad("%s: input modified at %zu", what, i);
				break;
			}
	}
	free(in);
	free(out);
}

static void test_allreduce(void)
{
	size_t counts[] = {0, 1, 2, 3, 7, 13, 97, 1021, 65537};
	size_t ncounts = sizeof(counts) / sizeof(counts[0]);

	for (int op = 0; op < HVD_OP_COUNT; op++) {
		for (int t = 0; t < HVD_DTYPE_COUNT; t++) {
			for (size_t c = 0; c < ncounts; c++)
				for (int ip = 0; ip < 2; ip++)
					one_allreduce(counts[c], (hvd_dtype_t)t,
						      (hvd_op_t)op, ip);
			report("allreduce %s %s: counts 0 1 2 3 7 13 97 1021 "
			       "65537, in and out of place",
			       hvd_op_name((hvd_op_t)op),
			       hvd_dtype_name((hvd_dtype_t)t));
		}
	}
	/* A few MiB: the segmented ring (or shared memory), every type. */
	for (int t = 0; t < HVD_DTYPE_COUNT; t++) {
		size_t count = (3u << 20) / hvd_dtype_size((hvd_dtype_t)t) + 5;

		one_allreduce(count, (hvd_dtype_t)t, HVD_SUM, 0);
		one_allreduce(count, (hvd_dtype_t)t, HVD_AVERAGE, 1);
		report("allreduce %s: %zu elements (3 MiB + 5), sum out of "
		       "place, avg in place",
		       hvd_dtype_name((hvd_dtype_t)t), count);
	}
	one_allreduce((size_t)size_ * 3 - 1, HVD_FLOAT64, HVD_MAX, 0);
	one_allreduce((size_t)size_ - 1, HVD_INT32, HVD_SUM, 1);
	report("allreduce: counts just below a multiple of the size");
}

static void test_big(void)
{
	size_t count = ((size_t)1 << 28) + 1; /* 1 GiB + 4 bytes */
	float *buf;
	double t0;
	hvd_status_t st;

	if (!getenv("HVD_TEST_BIG") || strcmp(getenv("HVD_TEST_BIG"), "1")) {
		if (rank_ == 0)
			skip(1, "1 GiB allreduce: set HVD_TEST_BIG=1");
		return;
	}
	buf = xmalloc(count * sizeof(float));
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)input(rank_, i, HVD_FLOAT32, HVD_SUM);
	t0 = (double)clock() / CLOCKS_PER_SEC;
	st = hvd_allreduce(HVD_IN_PLACE, buf, count, HVD_FLOAT32, HVD_SUM);
	check_status(st, "1 GiB allreduce");
	for (size_t i = 0; st == HVD_OK && i < count; i++)
		if (buf[i] != expect(i, HVD_FLOAT32, HVD_SUM, size_)) {
			bad("1 GiB allreduce: [%zu] = %g, expected %g", i,
			    buf[i], expect(i, HVD_FLOAT32, HVD_SUM, size_));
			break;
		}
	free(buf);
	report("allreduce float32 sum of %zu elements (1 GiB + 4 bytes), "
	       "%.1f s cpu",
	       count, (double)clock() / CLOCKS_PER_SEC - t0);
}

/* ---------------------------------------------------- reducescatter */

static void one_reducescatter(size_t count, hvd_dtype_t t, hvd_op_t op,
			      int in_place)
{
	size_t esz = hvd_dtype_size(t);
	size_t mine = hvd_reducescatter_count(count, rank_, size_);
	size_t off = hvd_reducescatter_offset(count, rank_, size_);
	char *in = xmalloc(count * esz), *out = xmalloc(count * esz);
	char what[128];
	hvd_status_t st;

	for (size_t i = 0; i < count; i++)
		put(in, i, t, input(rank_, i, t, op));
	snprintf(what, sizeof(what), "reducescatter %s %s count %zu%s",
		 hvd_op_name(op), hvd_dtype_name(t), count,
		 in_place ? " in place" : "");
	if (in_place) {
		memcpy(out, in, count * esz);
		st = hvd_reducescatter(HVD_IN_PLACE, out, count, t, op);
	} else {
		st = hvd_reducescatter(in, out, count, t, op);
	}
	check_status(st, what);
	for (size_t i = 0; st == HVD_OK && i < mine; i++) {
		double g = get(out, i, t), w = expect(off + i, t, op, size_);

		if (!close_enough(g, w, t, op)) {
			bad("%s: [%zu] = %g, expected %g", what, off + i, g, w);
			break;
		}
	}
	free(in);
	free(out);
}

static void test_reducescatter(void)
{
	size_t counts[] = {0, 1, (size_t)size_ - 1 ? (size_t)size_ - 1 : 1,
			   97, 65537, (1u << 20) + 3};

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (int ip = 0; ip < 2; ip++) {
			one_reducescatter(counts[c], HVD_FLOAT32, HVD_SUM, ip);
			one_reducescatter(counts[c], HVD_INT32, HVD_MAX, ip);
			one_reducescatter(counts[c], HVD_BFLOAT16, HVD_AVERAGE,
					  ip);
			one_reducescatter(counts[c], HVD_INT8, HVD_PRODUCT,
					  ip);
		}
	report("reducescatter float32 sum, int32 max, bfloat16 avg, int8 "
	       "prod: counts 0 1 size-1 97 65537 1M+3, in and out of place");
}

/* ---------------------------------------------- allgather, alltoall */

static double gval(int r, size_t i)
{
	return (double)((r * 31 + (int)(i % 1009) * 7) % 101);
}

static void test_allgather(void)
{
	size_t counts[] = {0, 1, 3, 97, 40000, 300001};

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t n = counts[c];

		for (int ip = 0; ip < 2; ip++) {
			int32_t *in = xmalloc(n * 4);
			int32_t *out = xmalloc(n * 4 * (size_t)size_);
			hvd_status_t st;

			for (size_t i = 0; i < n; i++)
				in[i] = (int32_t)gval(rank_, i);
			memset(out, 0xee, n * 4 * (size_t)size_);
			if (ip) {
				memcpy(out + n * (size_t)rank_, in, n * 4);
				st = hvd_allgather(HVD_IN_PLACE, out, n,
						   HVD_INT32);
			} else {
				st = hvd_allgather(in, out, n, HVD_INT32);
			}
			check_status(st, "allgather");
			for (int r = 0; st == HVD_OK && r < size_; r++)
				for (size_t i = 0; i < n; i++)
					if (out[(size_t)r * n + i] !=
					    (int32_t)gval(r, i)) {
						bad("allgather count %zu: "
						    "rank %d's [%zu] wrong",
						    n, r, i);
						r = size_;
						break;
					}
			free(in);
			free(out);
		}
	}
	report("allgather int32: counts 0 1 3 97 40000 300001, in and out of "
	       "place");

	/* allgatherv: uneven (some zero) counts, packed and with displs
	 * in reverse rank order with gaps. */
	for (int scale = 1; scale <= 20000; scale *= 100) {
		size_t *counts_v = xmalloc((size_t)size_ * sizeof(size_t));
		size_t *displs = xmalloc((size_t)size_ * sizeof(size_t));
		size_t total = 0, span = 0;

		for (int r = 0; r < size_; r++)
			counts_v[r] = (size_t)((r * 3 + 1) % 5) * (size_t)scale;
		for (int r = size_ - 1; r >= 0; r--) {
			displs[r] = span;
			span += counts_v[r] + 2;
		}
		for (int r = 0; r < size_; r++)
			total += counts_v[r];
		for (int with_displs = 0; with_displs < 2; with_displs++) {
			size_t mine = counts_v[rank_];
			double *in = xmalloc(mine * 8);
			double *out = xmalloc(span * 8);
			hvd_status_t st;

			for (size_t i = 0; i < mine; i++)
				in[i] = gval(rank_, i);
			for (size_t i = 0; i < span; i++)
				out[i] = -7.0; /* the gaps must keep it */
			st = hvd_allgatherv(in, mine, out, counts_v,
					    with_displs ? displs : NULL,
					    HVD_FLOAT64);
			check_status(st, "allgatherv");
			for (int r = 0, pos = 0; st == HVD_OK && r < size_;
			     r++) {
				size_t base = with_displs ? displs[r]
							  : (size_t)pos;

				for (size_t i = 0; i < counts_v[r]; i++)
					if (out[base + i] != gval(r, i)) {
						bad("allgatherv scale %d "
						    "displs %d: rank %d's "
						    "[%zu] wrong",
						    scale, with_displs, r, i);
						break;
					}
				pos += (int)counts_v[r];
			}
			for (int r = 0; st == HVD_OK && with_displs &&
					r < size_;
			     r++)
				if (out[displs[r] + counts_v[r]] != -7.0 ||
				    out[displs[r] + counts_v[r] + 1] != -7.0)
					bad("allgatherv scale %d: the gap "
					    "after rank %d's block was written",
					    scale, r);
			free(in);
			free(out);
		}
		(void)total;
		free(counts_v);
		free(displs);
	}
	/* Horovod's even split of a total that does not divide (the shape
	 * the shared-memory allgather takes on one node). */
	{
		size_t total = 1000 * (size_t)size_ + (size_t)size_ / 2 + 1;
		size_t *cv = xmalloc((size_t)size_ * sizeof(size_t));
		size_t mine = hvd_reducescatter_count(total, rank_, size_);
		size_t off = hvd_reducescatter_offset(total, rank_, size_);
		uint8_t *out = xmalloc(total);
		hvd_status_t st;

		for (int r = 0; r < size_; r++)
			cv[r] = hvd_reducescatter_count(total, r, size_);
		for (size_t i = 0; i < mine; i++)
			out[off + i] = (uint8_t)gval(rank_, i);
		st = hvd_allgatherv(HVD_IN_PLACE, mine, out, cv, NULL,
				    HVD_UINT8);
		check_status(st, "allgatherv even split");
		for (int r = 0; st == HVD_OK && r < size_; r++) {
			size_t o = hvd_reducescatter_offset(total, r, size_);

			for (size_t i = 0; i < cv[r]; i++)
				if (out[o + i] != (uint8_t)gval(r, i)) {
					bad("allgatherv even split: rank %d's "
					    "[%zu] wrong",
					    r, i);
					break;
				}
		}
		free(cv);
		free(out);
	}
	report("allgatherv float64: uneven counts (some 0) x 1 100 10000, "
	       "packed and reversed displacements; uint8 even split in "
	       "place");

	/* The displs are each rank's own: the even ranks pack the blocks,
	 * the odd ones reverse them with 40000-byte gaps (the counts, an
	 * even split, and the totals, 1 KiB to 1 MiB a rank, the same
	 * everywhere).  The algorithm must not follow the displs. */
	for (size_t total = 1024 * (size_t)size_ + 3;
	     total < (2u << 20) * (size_t)size_; total *= 32) {
		size_t *cv = xmalloc((size_t)size_ * sizeof(size_t));
		size_t *dv = xmalloc((size_t)size_ * sizeof(size_t));
		size_t span = 0, gap = rank_ % 2 ? 40000 : 0;
		uint8_t *in, *out;
		hvd_status_t st;

		for (int r = size_ - 1; r >= 0; r--) {
			cv[r] = hvd_reducescatter_count(total, r, size_);
			dv[r] = rank_ % 2 ? span
					  : hvd_reducescatter_offset(total, r,
								     size_);
			span += cv[r] + gap;
		}
		in = xmalloc(cv[rank_] ? cv[rank_] : 1);
		out = xmalloc(span);
		for (size_t i = 0; i < cv[rank_]; i++)
			in[i] = (uint8_t)gval(rank_, i);
		memset(out, 0xa5, span);
		st = hvd_allgatherv(in, cv[rank_], out, cv,
				    rank_ % 2 ? dv : NULL, HVD_UINT8);
		check_status(st, "allgatherv, displs apart");
		for (int r = 0; st == HVD_OK && r < size_; r++) {
			for (size_t i = 0; i < cv[r]; i++)
				if (out[dv[r] + i] != (uint8_t)gval(r, i)) {
					bad("allgatherv total %zu, displs "
					    "apart: rank %d's [%zu] wrong",
					    total, r, i);
					break;
				}
			for (size_t i = 0; i < gap; i++)
				if (out[dv[r] + cv[r] + i] != 0xa5) {
					bad("allgatherv total %zu: the gap "
					    "after rank %d's block was "
					    "written",
					    total, r);
					break;
				}
		}
		free(in);
		free(out);
		free(cv);
		free(dv);
	}
	report("allgatherv uint8: even ranks packed, odd ones reversed with "
	       "gaps, totals 1 KiB to 1 MiB a rank");
}

static void test_alltoall(void)
{
	/* 200000: 1.6 MB blocks, in 512K pieces and a rest where the TCP
	 * lane runs (post_pieces) */
	size_t counts[] = {0, 1, 5, 10000, 200000};

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t n = counts[c], all = n * (size_t)size_;

		for (int ip = 0; ip < 2; ip++) {
			int64_t *in = xmalloc(all * 8), *out = xmalloc(all * 8);
			hvd_status_t st;

			/* element i of the block for rank d */
			for (int d = 0; d < size_; d++)
				for (size_t i = 0; i < n; i++)
					in[(size_t)d * n + i] =
						(int64_t)rank_ * 1000000 +
						d * 1000 + (int64_t)i;
			if (ip) {
				memcpy(out, in, all * 8);
				st = hvd_alltoall(HVD_IN_PLACE, out, n,
						  HVD_INT64);
			} else {
				st = hvd_alltoall(in, out, n, HVD_INT64);
			}
			check_status(st, "alltoall");
			for (int s = 0; st == HVD_OK && s < size_; s++)
				for (size_t i = 0; i < n; i++)
					if (out[(size_t)s * n + i] !=
					    (int64_t)s * 1000000 +
						    rank_ * 1000 + (int64_t)i) {
						bad("alltoall count %zu: from "
						    "%d [%zu] wrong",
						    n, s, i);
						s = size_;
						break;
					}
			free(in);
			free(out);
		}
	}
	report("alltoall int64: counts 0 1 5 10000 200000, in and out of "
	       "place");

	/* alltoallv: rank s sends (s + d) % 3 * unit elements to rank d;
	 * 300001: up to 600002 bytes, more than a 512K piece.  Each byte
	 * depends on bits of i above the pieces' size, so a piece landing
	 * at another piece's place shows. */
	for (size_t unit = 7; unit <= 300001; unit += 299994) {
		size_t *sc = xmalloc((size_t)size_ * 8), *rc = xmalloc(
								 (size_t)size_ *
								 8);
		size_t st_ = 0, rt = 0;
		uint8_t *in, *out;
		hvd_status_t st;

		for (int d = 0; d < size_; d++) {
			sc[d] = (size_t)((rank_ + d) % 3) * unit;
			rc[d] = (size_t)((d + rank_) % 3) * unit;
			st_ += sc[d];
			rt += rc[d];
		}
		in = xmalloc(st_);
		out = xmalloc(rt);
		for (int d = 0, pos = 0; d < size_; d++)
			for (size_t i = 0; i < sc[d]; i++)
				in[pos++] = (uint8_t)(rank_ * 16 + d +
						      (int)(i ^ (i >> 8) ^
							    (i >> 16)));
		st = hvd_alltoallv(in, sc, NULL, out, rc, NULL, HVD_UINT8);
		check_status(st, "alltoallv");
		for (int s = 0, pos = 0; st == HVD_OK && s < size_; s++)
			for (size_t i = 0; i < rc[s]; i++, pos++)
				if (out[pos] !=
				    (uint8_t)(s * 16 + rank_ +
					      (int)(i ^ (i >> 8) ^ (i >> 16)))) {
					bad("alltoallv: from %d [%zu] wrong", s,
					    i);
					s = size_;
					break;
				}
		free(in);
		free(out);
		free(sc);
		free(rc);
	}
	report("alltoallv uint8: uneven counts (some 0), up to 600002 bytes");

	/* Equal blocks on rank 0 only: unit elements to and from everyone;
	 * the others send 2 units to themselves and 3 to one another.  A
	 * valid call, whatever algorithm equal blocks would get. */
	for (size_t unit = 5; unit <= 100000; unit *= 20000) {
		size_t *c = xmalloc((size_t)size_ * 8), tot = 0;
		uint8_t *in, *out;
		hvd_status_t st;

		for (int d = 0; d < size_; d++) {
			c[d] = rank_ == 0 || d == 0 ? unit
			       : d == rank_         ? 2 * unit
						    : 3 * unit;
			tot += c[d];
		}
		in = xmalloc(tot);
		out = xmalloc(tot);
		for (int d = 0, pos = 0; d < size_; d++)
			for (size_t i = 0; i < c[d]; i++)
				in[pos++] = (uint8_t)(rank_ * 16 + d + (int)i);
		st = hvd_alltoallv(in, c, NULL, out, c, NULL, HVD_UINT8);
		check_status(st, "alltoallv, equal on rank 0 only");
		for (int s = 0, pos = 0; st == HVD_OK && s < size_; s++)
			for (size_t i = 0; i < c[s]; i++, pos++)
				if (out[pos] !=
				    (uint8_t)(s * 16 + rank_ + (int)i)) {
					bad("alltoallv unit %zu, equal on "
					    "rank 0 only: from %d [%zu] wrong",
					    unit, s, i);
					s = size_;
					break;
				}
		free(in);
		free(out);
		free(c);
	}
	report("alltoallv uint8: blocks equal on rank 0 only, units 5 and "
	       "100000");

	/* Counts all 0: an alltoallv's emptiness is a property of every
	 * rank's counts, so no rank can skip it alone.  First on every rank
	 * (NULL buffers), then on the last rank only, which sends and
	 * receives nothing while the others exchange among themselves. */
	for (int all = 1; all >= 0; all--) {
		size_t *c = xmalloc((size_t)size_ * 8), tot = 0;
		int idle = all || rank_ == size_ - 1;
		uint8_t *in, *out;
		hvd_status_t st;

		for (int d = 0; d < size_; d++) {
			c[d] = idle || d == size_ - 1 ? 0 : 1000;
			tot += c[d];
		}
		in = tot ? xmalloc(tot) : NULL;
		out = tot ? xmalloc(tot) : NULL;
		for (size_t i = 0; i < tot; i++)
			in[i] = (uint8_t)(rank_ * 16 + (int)(i / 1000));
		st = hvd_alltoallv(in, c, NULL, out, c, NULL, HVD_UINT8);
		check_status(st, all ? "alltoallv, counts all 0"
				     : "alltoallv, counts 0 on the last rank");
		for (size_t i = 0; st == HVD_OK && i < tot; i++)
			if (out[i] != (uint8_t)((int)(i / 1000) * 16 + rank_)) {
				bad("alltoallv, counts 0 on the last rank: "
				    "[%zu] wrong",
				    i);
				break;
			}
		free(in);
		free(out);
		free(c);
	}
	report("alltoallv uint8: counts all 0 on every rank, and on the "
	       "last rank only");
}

static void test_broadcast(void)
{
	size_t counts[] = {0, 1, 97, 300001};

	for (int root = 0; root < size_; root++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]);
		     c++) {
			size_t n = counts[c];
			float *buf = xmalloc(n * 4);
			hvd_status_t st;

			for (size_t i = 0; i < n; i++)
				buf[i] = rank_ == root ? (float)gval(root, i)
						       : -1.0f;
			st = hvd_broadcast(buf, n, HVD_FLOAT32, root);
			check_status(st, "broadcast");
			for (size_t i = 0; st == HVD_OK && i < n; i++)
				if (buf[i] != (float)gval(root, i)) {
					bad("broadcast count %zu from %d: "
					    "[%zu] wrong",
					    n, root, i);
					break;
				}
			free(buf);
		}
	report("broadcast float32 from every root: counts 0 1 97 300001");
}

static void test_barrier(void)
{
	struct timespec a, b;
	double waited;
	hvd_status_t st;

	for (int i = 0; i < 5; i++)
		check_status(hvd_barrier(), "barrier");
	/* The last rank arrives 300 ms late: nobody may leave earlier. */
	if (rank_ == size_ - 1)
		usleep(300000);
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = hvd_barrier();
	clock_gettime(CLOCK_MONOTONIC, &b);
	check_status(st, "barrier");
	waited = (double)(b.tv_sec - a.tv_sec) +
		 (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	if (size_ > 1 && rank_ != size_ - 1 && waited < 0.2)
		bad("left the barrier after %.3f s although the last rank "
		    "came 0.3 s late",
		    waited);
	report("barrier: 5 in a row, and nobody leaves before the last "
	       "rank arrives");
}

/* ------------------------------------------------- ranks and errors */

static void test_ranks(void)
{
	int info[4] = {hvd_rank(), hvd_local_rank(), hvd_node_id(),
		       hvd_cross_rank()};
	int *all = xmalloc((size_t)size_ * sizeof(info));
	const char *ompi_lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
	const char *slurm_lr = getenv("SLURM_LOCALID");
	hvd_status_t st;

	if (hvd_local_rank() < 0 || hvd_local_rank() >= hvd_local_size())
		bad("local rank %d of %d", hvd_local_rank(), hvd_local_size());
	if (ompi_lr && atoi(ompi_lr) != hvd_local_rank())
		bad("local rank %d, mpirun says %s", hvd_local_rank(), ompi_lr);
	if (slurm_lr && atoi(slurm_lr) != hvd_local_rank())
		bad("local rank %d, SLURM_LOCALID=%s", hvd_local_rank(),
		    slurm_lr);
	st = hvd_allgather(info, all, 4, HVD_INT32);
	check_status(st, "allgather of rank info");
	if (st == HVD_OK) {
		int cross = 0, local = 0, csize = 0;

		for (int r = 0; r < size_; r++) {
			if (all[r * 4] != r)
				bad("rank %d reported rank %d", r, all[r * 4]);
			if (all[r * 4 + 2] == hvd_node_id())
				local++;
			if (all[r * 4 + 1] == hvd_local_rank()) {
				csize++;
				if (all[r * 4 + 2] < hvd_node_id())
					cross++;
			}
		}
		if (local != hvd_local_size())
			bad("local size %d, but %d ranks share node %d",
			    hvd_local_size(), local, hvd_node_id());
		if (csize != hvd_cross_size() || cross != hvd_cross_rank())
			bad("cross %d of %d, expected %d of %d",
			    hvd_cross_rank(), hvd_cross_size(), cross, csize);
	}
	free(all);
	report("ranks: rank/size, local and cross ranks consistent over all "
	       "ranks (and with the launcher's variables)");
}

static void expect_status(hvd_status_t got, hvd_status_t want,
			  const char *what)
{
	if (got != want)
		bad("%s: got %s, expected %s (%s)", what, hvd_status_name(got),
		    hvd_status_name(want), hvd_last_error());
	else if (want != HVD_OK &&
		 (strncmp(hvd_last_error(), hvd_status_code(want), 8) ||
		  !strstr(hvd_last_error(), "hvd: ")))
		bad("%s: message \"%s\" does not start with %s and say hvd:",
		    what, hvd_last_error(), hvd_status_code(want));
}

static void test_errors(void)
{
	float a[4] = {0}, b[4 * 64];
	size_t counts[64], one = 1;

	for (int i = 0; i < 64; i++)
		counts[i] = 1;
	expect_status(hvd_allreduce(a, b, 4, HVD_DTYPE_COUNT, HVD_SUM),
		      HVD_ERR_BAD_TYPE, "allreduce bad type");
	expect_status(hvd_allreduce(a, b, 4, (hvd_dtype_t)-1, HVD_SUM),
		      HVD_ERR_BAD_TYPE, "allreduce type -1");
	expect_status(hvd_allreduce(a, b, 4, HVD_FLOAT32, HVD_OP_COUNT),
		      HVD_ERR_BAD_OP, "allreduce bad op");
	expect_status(hvd_allreduce(NULL, b, 4, HVD_FLOAT32, HVD_SUM),
		      HVD_ERR_INVALID_ARG, "allreduce NULL sendbuf");
	expect_status(hvd_allreduce(a, NULL, 4, HVD_FLOAT32, HVD_SUM),
		      HVD_ERR_INVALID_ARG, "allreduce NULL recvbuf");
	expect_status(hvd_allreduce(a, b, SIZE_MAX / 2, HVD_FLOAT32, HVD_SUM),
		      HVD_ERR_INVALID_ARG, "allreduce count overflow");
	expect_status(hvd_allgather(NULL, b, 1, HVD_FLOAT32),
		      HVD_ERR_INVALID_ARG, "allgather NULL sendbuf");
	expect_status(hvd_allgather(a, b, 1, (hvd_dtype_t)99),
		      HVD_ERR_BAD_TYPE, "allgather bad type");
	expect_status(hvd_allgatherv(a, 1, b, NULL, NULL, HVD_FLOAT32),
		      HVD_ERR_INVALID_ARG, "allgatherv NULL recvcounts");
	counts[rank_] = 2;
	expect_status(hvd_allgatherv(a, 1, b, counts, NULL, HVD_FLOAT32),
		      HVD_ERR_INVALID_ARG, "allgatherv sendcount mismatch");
	counts[rank_] = 1;
	expect_status(hvd_broadcast(a, 1, HVD_FLOAT32, -1), HVD_ERR_INVALID_ARG,
		      "broadcast root -1");
	expect_status(hvd_broadcast(a, 1, HVD_FLOAT32, size_),
		      HVD_ERR_INVALID_ARG, "broadcast root = size");
	expect_status(hvd_broadcast(NULL, 1, HVD_FLOAT32, 0),
		      HVD_ERR_INVALID_ARG, "broadcast NULL");
	expect_status(hvd_alltoall(NULL, b, 1, HVD_FLOAT32),
		      HVD_ERR_INVALID_ARG, "alltoall NULL sendbuf");
	expect_status(hvd_alltoallv(a, NULL, NULL, b, counts, NULL,
				    HVD_FLOAT32),
		      HVD_ERR_INVALID_ARG, "alltoallv NULL sendcounts");
	expect_status(hvd_reducescatter(a, b, 4, HVD_FLOAT32, (hvd_op_t)42),
		      HVD_ERR_BAD_OP, "reducescatter bad op");
	expect_status(hvd_reducescatter(a, NULL, 64 * 4, HVD_FLOAT32, HVD_SUM),
		      HVD_ERR_INVALID_ARG, "reducescatter NULL recvbuf");
	/* NULL with count 0 is fine (and collective: everyone does it). */
	expect_status(hvd_allreduce(NULL, NULL, 0, HVD_FLOAT32, HVD_SUM),
		      HVD_OK, "allreduce NULL buffers, count 0");
	expect_status(hvd_broadcast(NULL, 0, HVD_INT8, 0), HVD_OK,
		      "broadcast NULL, count 0");
	(void)one;
	report("errors: bad type, bad op, NULL buffers, overflowing count, "
	       "bad root, count mismatch, with messages");
}

/* --------------------------------------------------- failure modes */

static int run_kill(int victim, size_t n, const char *call)
{
	float *buf = xmalloc(n * 4);
	struct timespec a, b;
	hvd_status_t st = HVD_OK;
	double took, limit;
	int iter;

	/* The launcher stops the survivors (SIGTERM) once a rank died;
	 * to see them finalize, outlive that. */
	if (getenv("HVD_TEST_FINALIZE"))
		signal(SIGTERM, SIG_IGN);
	limit = getenv("HOROVOD_PEER_TIMEOUT")
			? atof(getenv("HOROVOD_PEER_TIMEOUT"))
			: 60.0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (iter = 0; iter < 1000 && st == HVD_OK; iter++) {
		for (size_t i = 0; i < n; i++)
			buf[i] = 1.0f;
		/* The victim dies inside its 4th allreduce: the others are
		 * already waiting for its data. */
		if (rank_ == victim && iter == 3) {
			usleep(100000);
			kill(getpid(), SIGKILL);
		}
		clock_gettime(CLOCK_MONOTONIC, &a);
		if (!strcmp(call, "allgather"))
			st = hvd_allgather(HVD_IN_PLACE, buf,
					   n / (size_t)size_, HVD_FLOAT32);
		else if (!strcmp(call, "alltoall"))
			st = hvd_alltoall(HVD_IN_PLACE, buf, n / (size_t)size_,
					  HVD_FLOAT32);
		else if (!strcmp(call, "reducescatter"))
			st = hvd_reducescatter(HVD_IN_PLACE, buf, n,
					       HVD_FLOAT32, HVD_SUM);
		else
			st = hvd_allreduce(HVD_IN_PLACE, buf, n, HVD_FLOAT32,
					   HVD_SUM);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	took = (double)(b.tv_sec - a.tv_sec) +
	       (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	printf("rank %d: iteration %d: %s after %.2f s: %s\n", rank_, iter - 1,
	       hvd_status_name(st), took, hvd_last_error());
	fflush(stdout);
	free(buf);
	/* Stay a while so that the other survivors find the victim, not
	 * us, gone (the launcher stops us anyway). */
	sleep(3);
	/* A survivor may still finalize: it must not hang on the dead. */
	if (getenv("HVD_TEST_FINALIZE")) {
		hvd_status_t fst;

		clock_gettime(CLOCK_MONOTONIC, &a);
		fst = hvd_finalize();
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("rank %d: hvd_finalize after the failure: %s in %.2f s\n",
		       rank_, hvd_status_name(fst),
		       (double)(b.tv_sec - a.tv_sec) +
			       (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
		fflush(stdout);
	}
	if (st == HVD_ERR_PEER_FAILED && took <= limit + 5)
		return 3; /* the expected outcome: a clean error */
	return 4;
}

/*
 * Two ranks reducescatter 16384 floats (rank 0) and 16385 (rank 1):
 * block 1 is 8192 floats either way, so rank 1 saw nothing wrong and
 * completed while rank 0 failed, until blocks carried the sender's call;
 * now both fail with HVD_ERR_MISMATCH.  Then both allreduce one float:
 * the communicator is broken, and both must fail there with
 * HVD_ERR_MISMATCH at once, not wait for the peer timeout.
 */
static int run_after_blind(void)
{
	size_t mine = 16384 + (size_t)(rank_ != 0);
	float *buf = xmalloc(16385 * 4), one = 1;
	struct timespec a, b;
	hvd_status_t st;

	for (size_t i = 0; i < 16385; i++)
		buf[i] = (float)i;
	st = hvd_reducescatter(HVD_IN_PLACE, buf, mine, HVD_FLOAT32, HVD_SUM);
	printf("rank %d: blind spot, reducescatter of %zu floats: %s\n", rank_,
	       mine, hvd_status_name(st));
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = hvd_allreduce(HVD_IN_PLACE, &one, 1, HVD_FLOAT32, HVD_SUM);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("rank %d: blind spot, next allreduce: %s after %.2f s: %s\n",
	       rank_, hvd_status_name(st),
	       (double)(b.tv_sec - a.tv_sec) +
		       (double)(b.tv_nsec - a.tv_nsec) * 1e-9,
	       st == HVD_OK ? "" : hvd_last_error());
	fflush(stdout);
	free(buf);
	sleep(2);
	_exit(0);
}

/*
 * Ranks disagree on a broadcast's count so that the root's message and
 * the others' receive sit on either side of the TCP lane's threshold
 * (a broadcast's: 1K, 16K in a crowded job; "big": the root sends
 * 512 KiB, the others expect 512 B, "small" the other way round): each
 * end picks another path, and the receivers
 * must still fail with HVD_ERR_MISMATCH, in seconds, not at the peer
 * timeout.  "pair": two ranks allreduce 512 KiB (rank 0: recursive
 * doubling, up to HVD_ALLREDUCE_PAIR_MAX) and 512 KiB + 4 (the ring):
 * both must fail so.  "rs": a reducescatter of 16384 floats on rank 0
 * and 16386 on the others (the direct one on 2-4 ranks when forced, and
 * on 3 by default; recursive halving on 4 and 8): every rank must fail
 * so; "rs-big" the same with 144001 and 144003, whose blocks and halves
 * on 3 and 4 ranks are past 128 KiB (on 3 ranks block 0 is 48001 floats
 * either way, on 4 ranks 36001).  "rs-pair": 16384 floats on rank 0 and
 * 16385 on the others, "rs-pair-big" 131072 and 131073: on two ranks
 * block 1 is the same size either way (8192 and 65536 floats), so rank 1
 * got what it expected until blocks carried the sender's call (the
 * exchange of up to 64 KiB; the ring above).  "ring-direct": three
 * ranks allreduce 32768 floats (rank 0: the ring) and 32769 (the others:
 * the direct one); rank 0 never sends rank 2 what it waits for, and
 * only the notice of the rank that found the counts apart ends rank 2's
 * wait in seconds.
 */
static int run_straddle(const char *how)
{
	int big = strcmp(how, "big") == 0, pair = strcmp(how, "pair") == 0;
	int rs_big = strcmp(how, "rs-big") == 0;
	int rs_pair = strcmp(how, "rs-pair") == 0;
	int rs_pair_big = strcmp(how, "rs-pair-big") == 0;
	int rs = rs_big || rs_pair || rs_pair_big || strcmp(how, "rs") == 0;
	int ar3 = strcmp(how, "ring-direct") == 0;
	size_t mine = rs_pair       ? 16384 + (size_t)(rank_ != 0)
		      : rs_pair_big ? 131072 + (size_t)(rank_ != 0)
		      : rs ? (rs_big ? 144001 : 16384) + 2 * (size_t)(rank_ != 0)
		      : ar3  ? 32768 + (size_t)(rank_ != 0)
		      : pair ? 131072 + (size_t)(rank_ != 0)
		      : (rank_ == 0) == big ? 131072 : 128;
	float *buf = xmalloc(144003 * 4);
	struct timespec a, b;
	hvd_status_t st;

	for (size_t i = 0; i < 144003; i++)
		buf[i] = (float)i;
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = rs     ? hvd_reducescatter(HVD_IN_PLACE, buf, mine, HVD_FLOAT32,
				      HVD_SUM)
	     : pair || ar3 ? hvd_allreduce(HVD_IN_PLACE, buf, mine,
					   HVD_FLOAT32, HVD_SUM)
		    : hvd_broadcast(buf, mine, HVD_FLOAT32, 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("rank %d: straddle %s, %zu floats: %s after %.2f s: %s\n", rank_,
	       how, mine, hvd_status_name(st),
	       (double)(b.tv_sec - a.tv_sec) +
		       (double)(b.tv_nsec - a.tv_nsec) * 1e-9,
	       st == HVD_OK ? "" : hvd_last_error());
	fflush(stdout);
	free(buf);
	/* The root may be done at once: wait for the others' verdicts
	 * before anyone leaves (a rank gone would be another error). */
	sleep(rank_ == 0 && !pair && !rs && !ar3 ? 8 : 2);
	/* Finalize after the mismatch: what the failed collective left
	 * unreceived must go quietly. */
	if (getenv("HVD_TEST_FINALIZE")) {
		st = hvd_finalize();
		printf("rank %d: hvd_finalize after the mismatch: %s\n", rank_,
		       hvd_status_name(st));
		fflush(stdout);
	}
	_exit(0);
}

/*
 * Ranks disagree on an hvd_alltoall's count, small enough for the node
 * leaders across nodes ("rank": the last rank passes 2 elements where
 * the others pass 1, so its node-mates disagree; "node": every rank of
 * the last node passes 2, so the nodes disagree): every rank must fail
 * with HVD_ERR_MISMATCH, in seconds.
 */
static int run_a2a_mismatch(const char *how)
{
	int odd = !strcmp(how, "rank") ? rank_ == size_ - 1
				       : hvd_cross_rank() == hvd_cross_size() - 1;
	size_t mine = odd ? 2 : 1;
	int64_t *in = xmalloc(2 * (size_t)size_ * 8);
	int64_t *out = xmalloc(2 * (size_t)size_ * 8);
	struct timespec a, b;
	hvd_status_t st;

	memset(in, 0, 2 * (size_t)size_ * 8);
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = hvd_alltoall(in, out, mine, HVD_INT64);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("rank %d: alltoall mismatch %s, %zu elements: %s after %.2f "
	       "s: %s\n",
	       rank_, how, mine, hvd_status_name(st),
	       (double)(b.tv_sec - a.tv_sec) +
		       (double)(b.tv_nsec - a.tv_nsec) * 1e-9,
	       st == HVD_OK ? "" : hvd_last_error());
	fflush(stdout);
	free(in);
	free(out);
	sleep(3); /* the others' verdicts first */
	_exit(0);
}

static double since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) +
	       (double)(b.tv_nsec - a->tv_nsec) * 1e-9;
}

static int run_refuse(const char *who, const char *call, int late,
		      int last)
{
	int me = !strcmp(who, "all");
	float *buf = xmalloc(64 * sizeof(float)), sum[4];
	struct timespec a;
	hvd_status_t st;
	int right = 1;

	/* who: a rank, ranks separated by commas, or all */
	for (const char *p = who; !me && p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		me = atoi(p) == rank_;
	}

	for (int i = 0; i < 64; i++)
		buf[i] = (float)(rank_ + 1);
	/* the shared-memory segment and the hierarchy's communicators are
	 * made at the first allreduce */
	if (hvd_allreduce(HVD_IN_PLACE, buf + 32, 4, HVD_FLOAT32, HVD_SUM) !=
	    HVD_OK)
		printf("rank %d: first allreduce failed: %s\n", rank_,
		       hvd_last_error());
	if (late && !me)
		sleep(1);
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (!strcmp(call, "allreduce"))
		st = hvd_allreduce(HVD_IN_PLACE, me ? NULL : buf, 4,
				   HVD_FLOAT32, HVD_SUM);
	else if (!strcmp(call, "broadcast"))
		st = hvd_broadcast(buf, 4, HVD_FLOAT32, me ? size_ : 0);
	else if (!strcmp(call, "allgather"))
		st = hvd_allgather(me ? NULL : buf, buf + 8, 1, HVD_FLOAT32);
	else if (!strcmp(call, "allreduce0"))
		st = hvd_allreduce(HVD_IN_PLACE, buf, me ? 0 : 4, HVD_FLOAT32,
				   HVD_SUM);
	else if (!strcmp(call, "broadcast0"))
		st = hvd_broadcast(buf, me ? 0 : 4, HVD_FLOAT32, 0);
	else
		st = hvd_barrier();
	printf("rank %d: call 1 (%s%s) %s after %.2f s: %s\n", rank_, call,
	       !me			? ""
	       : strchr(call, '0')	? ", empty here"
					: ", refused here",
	       hvd_status_name(st), since(&a),
	       st == HVD_OK ? "" : hvd_last_error());
	fflush(stdout);
	if (last) /* the program's last collective: straight to finalize */
		goto fin;
	if (me)
		sleep(1);
	for (int i = 0; i < 4; i++)
		sum[i] = (float)(rank_ + 1) * (float)(i + 1);
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = hvd_allreduce(HVD_IN_PLACE, sum, 4, HVD_FLOAT32, HVD_SUM);
	for (int i = 0; i < 4; i++)
		right &= sum[i] == (float)(size_ * (size_ + 1) / 2 * (i + 1));
	printf("rank %d: call 2 (allreduce) %s after %.2f s, sum %s: %s\n",
	       rank_, hvd_status_name(st), since(&a),
	       st != HVD_OK ? "none" : right ? "right" : "WRONG",
	       st == HVD_OK ? "" : hvd_last_error());
	fflush(stdout);
fin:
	free(buf);
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = hvd_finalize();
	printf("rank %d: finalize %s after %.2f s\n", rank_,
	       hvd_status_name(st), since(&a));
	return 0;
}

int main(int argc, char **argv)
{
	hvd_status_t st;
	float x = 0;

	/* Before hvd_init: statuses, not crashes. */
	if (argc > 1 && strcmp(argv[1], "initfail") == 0) {
		st = hvd_init();
		printf("hvd_init: %s: %s\n", hvd_status_name(st),
		       hvd_last_error());
		return st == HVD_ERR_BOOTSTRAP &&
				       strstr(hvd_last_error(), "HOROVOD_")
			       ? 0
			       : 1;
	}
	st = hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM);
	if (st != HVD_ERR_NOT_INITIALIZED || hvd_rank() != -1 ||
	    hvd_is_initialized() || hvd_finalize() != HVD_ERR_NOT_INITIALIZED) {
		printf("Bail out! before hvd_init: %s\n", hvd_status_name(st));
		return 1;
	}
	st = hvd_init();
	if (st != HVD_OK) {
		printf("Bail out! hvd_init: %s: %s\n", hvd_status_name(st),
		       hvd_last_error());
		return 1;
	}
	rank_ = hvd_rank();
	size_ = hvd_size();
	if (argc > 4 && strcmp(argv[1], "kill") == 0 &&
	    strcmp(argv[4], "allgather") && strcmp(argv[4], "reducescatter") &&
	    strcmp(argv[4], "alltoall")) {
		printf("Bail out! kill: '%s' is not allgather, reducescatter "
		       "or alltoall\n",
		       argv[4]);
		return 1;
	}
	if (argc > 2 && strcmp(argv[1], "kill") == 0)
		return run_kill(atoi(argv[2]),
				argc > 3 ? strtoul(argv[3], NULL, 10) : 1 << 16,
				argc > 4 ? argv[4] : "allreduce");
	if (argc > 2 && strcmp(argv[1], "straddle") == 0)
		return run_straddle(argv[2]);
	if (argc > 1 && strcmp(argv[1], "blind") == 0)
		return run_after_blind();
	if (argc > 2 && strcmp(argv[1], "a2a_mismatch") == 0)
		return run_a2a_mismatch(argv[2]);
	if (argc > 3 && strcmp(argv[1], "refuse") == 0)
		return run_refuse(argv[2], argv[3],
				  argc > 4 && !strcmp(argv[4], "late"),
				  argc > 4 && !strcmp(argv[4], "last"));
	if (argc > 2 && strcmp(argv[1], "after") == 0) {
		int i;

		for (i = 0; i < 1200 && access(argv[2], F_OK) != 0; i++)
			usleep(100000);
		if (i == 1200) {
			printf("Bail out! rank %d: no %s after 120 s\n", rank_,
			       argv[2]);
			return 1;
		}
	}

	if (rank_ == 0) {
		ok(1, "calls before hvd_init return HVD_ERR_NOT_INITIALIZED");
		diag("%d ranks, %d per node on this node, %d nodes", size_,
		     hvd_local_size(), size_ / hvd_local_size());
	}
	test_ranks();
	test_errors();
	test_barrier();
	test_allreduce();
	test_big();
	test_reducescatter();
	test_allgather();
	test_alltoall();
	test_broadcast();

	st = hvd_finalize();
	if (rank_ == 0) {
		ok(st == HVD_OK, "hvd_finalize: %s", hvd_status_name(st));
		ok(hvd_allreduce(&x, &x, 1, HVD_FLOAT32, HVD_SUM) ==
				   HVD_ERR_NOT_INITIALIZED &&
			   !hvd_is_initialized() && hvd_size() == -1,
		   "calls after hvd_finalize return HVD_ERR_NOT_INITIALIZED");
		return done_testing();
	}
	return 0;
}

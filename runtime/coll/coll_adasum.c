/*
 * coll_adasum.c - Adasum allreduce on host memory (HVD_ADASUM).
 *
 * Adasum combines two gradients a and b as
 *
 *     a' = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
 *
 * (a coefficient stays 1 when its norm squared is below sqrt(DBL_MIN)),
 * over a power-of-two number of ranks as a binary tree: ranks r and r^1,
 * then the pairs (r, r^1) and (r^2, r^3), and so on.  This is Horovod's
 * vector-halving, distance-doubling algorithm (its ops/adasum/adasum.h):
 *
 *   reduce phase, distance d = 1, 2, 4, ...: rank r exchanges half of its
 *   current segment with r^d (the lower rank keeps the first half), so
 *   that both hold the two groups' partial results on the half they keep;
 *   the dot product and the two norms of that half, summed over the 2d
 *   ranks of the block (a recursive doubling of three doubles), are those
 *   of the whole vectors, and each rank combines its half with them;
 *   allgather phase, d = n/2 ... 1: the segments go back, each copied from
 *   the one rank that computed it.
 *
 * Every element is computed in one place, so every rank gets bit-identical
 * results; the sums of the three doubles are too (each recursive-doubling
 * step adds the same two operands on both partners).  Arithmetic is in
 * double, stored in the tensor's type (float16, bfloat16, float32,
 * float64).  Traffic per rank is about twice the vector, as for a ring.
 */
#include "config.h"

#include "coll/coll_impl.h"
#include "kernels/kernels.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double get(const void *p, size_t i, hvd_dtype_t dt)
{
	switch (dt) {
	case HVD_FLOAT16:
		return hvd_half_to_float(((const uint16_t *)p)[i]);
	case HVD_BFLOAT16:
		return hvd_bf16_to_float(((const uint16_t *)p)[i]);
	case HVD_FLOAT32:
		return ((const float *)p)[i];
	default:
		return ((const double *)p)[i];
	}
}

static void put(void *p, size_t i, hvd_dtype_t dt, double v)
{
	switch (dt) {
	case HVD_FLOAT16:
		((uint16_t *)p)[i] = hvd_float_to_half((float)v);
		break;
	case HVD_BFLOAT16:
		((uint16_t *)p)[i] = hvd_float_to_bf16((float)v);
		break;
	case HVD_FLOAT32:
		((float *)p)[i] = (float)v;
		break;
	default:
		((double *)p)[i] = v;
	}
}

/* dot, |a|^2, |b|^2 of n elements. */
static void dot_norms(const void *a, const void *b, size_t n, hvd_dtype_t dt,
		      double v[3])
{
	double d = 0, na = 0, nb = 0;

	if (dt == HVD_FLOAT32) {
		const float *x = a, *y = b;

		for (size_t i = 0; i < n; i++) {
			d += (double)x[i] * (double)y[i];
			na += (double)x[i] * (double)x[i];
			nb += (double)y[i] * (double)y[i];
		}
	} else if (dt == HVD_FLOAT64) {
		const double *x = a, *y = b;

		for (size_t i = 0; i < n; i++) {
			d += x[i] * y[i];
			na += x[i] * x[i];
			nb += y[i] * y[i];
		}
	} else {
		for (size_t i = 0; i < n; i++) {
			double x = get(a, i, dt), y = get(b, i, dt);

			d += x * y;
			na += x * x;
			nb += y * y;
		}
	}
	v[0] = d;
	v[1] = na;
	v[2] = nb;
}

/* a = ca * a + cb * b */
static void scaled_add(void *a, const void *b, size_t n, hvd_dtype_t dt,
		       double ca, double cb)
{
	if (dt == HVD_FLOAT32) {
		float *x = a;
		const float *y = b;

		for (size_t i = 0; i < n; i++)
			x[i] = (float)(ca * x[i] + cb * y[i]);
	} else if (dt == HVD_FLOAT64) {
		double *x = a;
		const double *y = b;

		for (size_t i = 0; i < n; i++)
			x[i] = ca * x[i] + cb * y[i];
	} else {
		for (size_t i = 0; i < n; i++)
			put(a, i, dt, ca * get(a, i, dt) + cb * get(b, i, dt));
	}
}

int adasum_type_ok(hvd_dtype_t dt)
{
	return dt == HVD_FLOAT16 || dt == HVD_BFLOAT16 || dt == HVD_FLOAT32 ||
	       dt == HVD_FLOAT64;
}

hvd_status_t host_adasum(hvd_comm_t *comm, const void *src, void *dst,
			 size_t count, hvd_dtype_t dt)
{
	int n = comm->net.size, r = comm->net.rank, levels = 0;
	size_t es = hvd_dtype_size(dt), off = 0, len = count;
	size_t offs[32], lens[32];
	const double tiny = sqrt(DBL_MIN);
	char *d8 = dst, *tmp;
	struct xfer x;

	if (src != dst)
		memcpy(dst, src, count * es);
	if (n == 1)
		return HVD_OK;
	tmp = malloc(((count + 1) / 2) * es + 1);
	if (!tmp)
		return hvd_error(HVD_ERR_NO_MEMORY, "hvd: out of memory");
	xfer_begin(&x, &comm->net);
	for (int dist = 1; dist < n; dist <<= 1, levels++) {
		int peer = r ^ dist, left = (r & dist) == 0;
		size_t first = len >> 1, second = len - first;
		size_t keep_off = left ? off : off + first;
		size_t keep = left ? first : second, give = len - keep;
		size_t give_off = left ? off + first : off;
		double v[3], w[3], na, nb, ca = 1, cb = 1;

		offs[levels] = off;
		lens[levels] = len;
		if (xfer_sendrecv(&x, peer, d8 + give_off * es, give * es, peer,
				  tmp, keep * es) != HVD_OK)
			break;
		dot_norms(d8 + keep_off * es, tmp, keep, dt, v);
		if (!left) { /* slot 1: the left group's norm, slot 2: the right's */
			double t = v[1];

			v[1] = v[2];
			v[2] = t;
		}
		/* Sum over the block of 2*dist ranks that hold this level's
		 * two vectors between them. */
		for (int j = 1; j <= dist; j <<= 1) {
			if (xfer_sendrecv(&x, r ^ j, v, sizeof(v), r ^ j, w,
					  sizeof(w)) != HVD_OK)
				break;
			for (int k = 0; k < 3; k++)
				v[k] = v[k] + w[k];
		}
		if (x.st != HVD_OK)
			break;
		na = left ? v[1] : v[2]; /* this rank's group */
		nb = left ? v[2] : v[1];
		if (na >= tiny)
			ca = 1.0 - v[0] / na * 0.5;
		if (nb >= tiny)
			cb = 1.0 - v[0] / nb * 0.5;
		scaled_add(d8 + keep_off * es, tmp, keep, dt, ca, cb);
		off = keep_off;
		len = keep;
	}
	/* Allgather: undo the halvings, each segment from its one owner. */
	for (int lvl = levels - 1; x.st == HVD_OK && lvl >= 0; lvl--) {
		int peer = r ^ (1 << lvl);
		size_t poff = offs[lvl], plen = lens[lvl];
		size_t other_off = off == poff ? poff + len : poff;
		size_t other = plen - len;

		if (xfer_sendrecv(&x, peer, d8 + off * es, len * es, peer,
				  d8 + other_off * es, other * es) != HVD_OK)
			break;
		off = poff;
		len = plen;
	}
	free(tmp);
	if (xfer_end(&x) != HVD_OK)
		return coll_fail(comm, x.st, "adasum allreduce of %zu x %s",
				 count, hvd_dtype_name(dt));
	return HVD_OK;
}

/*
 * test_rreduce.c - receiving into a reduction (runtime/net/rreduce.c): a
 * message cut into fragments at arbitrary bytes (inside elements too),
 * delivered in order, reversed and shuffled, in place and not, for every
 * element size and a few ops, must leave exactly the bits reduce_apply3()
 * gives on the whole message, with nothing left pending; bytes past the
 * end are refused.
 */
#include "config.h"

#include "kernels/kernels.h"
#include "net/rreduce.h"
#include "tap.h"
#include "tools/bench/typed.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Small integral values: exact in every type, also float16. */
static void fill(void *buf, size_t count, hvd_dtype_t dt)
{
	for (size_t i = 0; i < count; i++)
		typed_put(buf, i, dt, (double)((int)(next() % 17) - 8));
}

enum order { IN_ORDER, REVERSED, SHUFFLED };

/* One case: returns 1 when the result matches and nothing is pending. */
static int one(hvd_dtype_t dt, hvd_op_t op, size_t count, size_t maxfrag,
	       enum order ord, int in_place)
{
	size_t esz = hvd_dtype_size(dt), len = count * esz, nfrag = 0;
	char *src = malloc(len + 1), *msg = malloc(len + 1);
	char *want = malloc(len + 1), *dst = malloc(len + 1);
	size_t *cut = malloc((len + 2) * sizeof(*cut));
	struct rr_desc d;
	int good = 1;

	fill(src, count, dt);
	fill(msg, count, dt);
	reduce_apply3(want, src, msg, count, dt, op);
	if (in_place)
		memcpy(dst, src, len);
	else
		memset(dst, 0xa5, len);
	/* cut points: fragments of 1..maxfrag bytes */
	cut[nfrag++] = 0;
	while (cut[nfrag - 1] < len) {
		size_t c = cut[nfrag - 1] + 1 + next() % maxfrag;

		cut[nfrag++] = c < len ? c : len;
	}
	nfrag--; /* fragments [cut[i], cut[i + 1]) */
	rr_init(&d, dst, in_place ? dst : src, count, dt, op);
	{
		size_t *ord_idx = malloc((nfrag ? nfrag : 1) * sizeof(size_t));

		for (size_t i = 0; i < nfrag; i++)
			ord_idx[i] = ord == REVERSED ? nfrag - 1 - i : i;
		for (size_t i = 0; ord == SHUFFLED && i + 1 < nfrag; i++) {
			size_t j = i + next() % (nfrag - i), t = ord_idx[i];

			ord_idx[i] = ord_idx[j];
			ord_idx[j] = t;
		}
		for (size_t i = 0; i < nfrag && good; i++) {
			size_t f = ord_idx[i];

			good = rr_unpack(&d, cut[f], msg + cut[f],
					 cut[f + 1] - cut[f]) == 0;
		}
		free(ord_idx);
	}
	good = good && rr_pending(&d) == 0 && memcmp(dst, want, len) == 0;
	rr_release(&d);
	free(src);
	free(msg);
	free(want);
	free(dst);
	free(cut);
	return good;
}

int main(void)
{
	static const hvd_dtype_t dts[] = {HVD_INT8,    HVD_FLOAT16, HVD_INT32,
					  HVD_FLOAT32, HVD_INT64,   HVD_FLOAT64};
	static const hvd_op_t ops[] = {HVD_SUM, HVD_MAX, HVD_PRODUCT};
	static const size_t frags[] = {1, 3, 7, 13, 100, 65536};
	struct rr_desc d;
	char b[64];
	int bad;

	plan(6 * 3 + 3);
	for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); t++)
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			bad = 0;
			for (size_t f = 0; f < sizeof(frags) / sizeof(frags[0]);
			     f++)
				for (int ord = 0; ord < 3; ord++)
					for (int ip = 0; ip < 2; ip++) {
						size_t count = 1 + next() % 3000;

						if (!one(dts[t], ops[o], count,
							 frags[f],
							 (enum order)ord, ip)) {
							bad++;
							diag("%s %s count %zu "
							     "fragments <= %zu "
							     "order %d in place "
							     "%d: wrong",
							     hvd_dtype_name(dts[t]),
							     hvd_op_name(ops[o]),
							     count, frags[f],
							     ord, ip);
						}
					}
			ok(bad == 0, "%s %s: 36 fragmentations match "
				     "reduce_apply3, nothing pending",
			   hvd_dtype_name(dts[t]), hvd_op_name(ops[o]));
		}
	/* One element in eight single bytes, from the last to the first. */
	{
		double s = 1.5, m = 2.25, out = 0, want = 3.75;
		unsigned char *mb = (unsigned char *)&m;
		int good = 1;

		rr_init(&d, &out, &s, 1, HVD_FLOAT64, HVD_SUM);
		for (int i = 7; i >= 0 && good; i--) {
			good = rr_unpack(&d, (size_t)i, mb + i, 1) == 0;
			if (i && rr_pending(&d) != 1)
				good = 0;
		}
		ok(good && rr_pending(&d) == 0 && out == want,
		   "a float64 in eight bytes, last first: 1.5 + 2.25 = %g",
		   out);
		rr_release(&d);
	}
	/* Past the end: refused, nothing written. */
	memset(b, 0, sizeof(b));
	rr_init(&d, b, b, 4, HVD_FLOAT32, HVD_SUM);
	ok(rr_unpack(&d, 12, b + 32, 8) == -1, "bytes past the end are refused");
	ok(rr_unpack(&d, 0, b + 32, 0) == 0 && rr_pending(&d) == 0,
	   "an empty fragment changes nothing");
	rr_release(&d);
	return done_testing();
}

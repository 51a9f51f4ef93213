/* Statuses, type and op names, size parsing and the reducescatter split. */
#include "hvd.h"
#include "base/base.h"
#include "tap.h"

int main(void)
{
	hvd_dtype_t t;
	hvd_op_t op;
	size_t sz, total;

	is_str(hvd_status_name(HVD_OK), "HVD_OK", "HVD_OK has a name");
	is_str(hvd_status_name(HVD_ERR_MISMATCH), "HVD_ERR_MISMATCH",
	       "HVD_ERR_MISMATCH has a name");
	is_str(hvd_status_name((hvd_status_t)9999), "HVD_ERR_UNKNOWN",
	       "unknown status is named as such");

	for (int i = 0; i < HVD_DTYPE_COUNT; i++) {
		ok(hvd_dtype_parse(hvd_dtype_name((hvd_dtype_t)i), &t) == HVD_OK &&
			   t == (hvd_dtype_t)i,
		   "type %s round-trips", hvd_dtype_name((hvd_dtype_t)i));
	}
	is_int(hvd_dtype_size(HVD_BFLOAT16), 2, "bfloat16 is 2 bytes");
	is_int(hvd_dtype_size(HVD_FLOAT64), 8, "float64 is 8 bytes");
	is_int(hvd_dtype_size((hvd_dtype_t)42), 0, "bad type has size 0");
	is_int(hvd_dtype_parse("float128", &t), HVD_ERR_BAD_TYPE,
	       "unknown type is refused");
	ok(strstr(hvd_last_error(), "float128") != NULL,
	   "message names the bad type: %s", hvd_last_error());

	for (int i = 0; i < HVD_OP_COUNT; i++)
		ok(hvd_op_parse(hvd_op_name((hvd_op_t)i), &op) == HVD_OK &&
			   op == (hvd_op_t)i,
		   "op %s round-trips", hvd_op_name((hvd_op_t)i));
	is_int(hvd_op_parse("xor", &op), HVD_ERR_BAD_OP, "unknown op refused");

	ok(hvd_parse_size("64K", &sz) == 0 && sz == 65536, "64K");
	ok(hvd_parse_size("1M", &sz) == 0 && sz == 1048576, "1M");
	ok(hvd_parse_size("2GiB", &sz) == 0 && sz == 2147483648ULL, "2GiB");
	ok(hvd_parse_size("8", &sz) == 0 && sz == 8, "8");
	ok(hvd_parse_size("", &sz) < 0, "empty size refused");
	ok(hvd_parse_size("-1", &sz) < 0, "negative size refused");
	ok(hvd_parse_size("12X", &sz) < 0, "bad suffix refused");
	ok(hvd_parse_size("99999999999999999999", &sz) < 0, "overflow refused");

	/* The split covers every element exactly once, in rank order. */
	for (size_t count = 0; count < 40; count++)
		for (int size = 1; size <= 9; size++) {
			total = 0;
			for (int r = 0; r < size; r++) {
				if (hvd_reducescatter_offset(count, r, size) != total)
					break;
				total += hvd_reducescatter_count(count, r, size);
			}
			if (total != count) {
				ok(0, "reducescatter split of %zu over %d", count, size);
				return done_testing();
			}
		}
	ok(1, "reducescatter split covers every count 0..39 over 1..9 ranks");
	is_int(hvd_reducescatter_count(5, 0, 3), 2, "5 over 3: rank 0 gets 2");
	is_int(hvd_reducescatter_count(5, 2, 3), 1, "5 over 3: rank 2 gets 1");

	return done_testing();
}

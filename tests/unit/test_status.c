/* Statuses and their codes (against doc/errors.md), messages, type and op
 * names, size parsing and the reducescatter split. */
#include "hvd.h"
#include "base/base.h"
#include "tap.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

/* The highest status value (include/hvd.h adds new ones at the end). */
#define LAST_STATUS HVD_ERR_REMOVED

/* Every status has a code of its family, different from every other's,
 * and doc/errors.md's table lists exactly these codes with these names. */
static void check_codes(void)
{
	char path[4096], line[4096];
	const char *top = getenv("top_srcdir");
	int found[LAST_STATUS + 1] = {0}, extra = 0, rows = 0;
	FILE *f;

	for (int i = 0; i <= LAST_STATUS; i++) {
		const char *c = hvd_status_code((hvd_status_t)i);
		int dup = 0;

		for (int j = 0; j < i; j++)
			dup |= !strcmp(c, hvd_status_code((hvd_status_t)j));
		if (strlen(c) != 8 || strncmp(c, "HVD-", 4) || dup) {
			ok(0, "%s has a code of its own: %s",
			   hvd_status_name((hvd_status_t)i), c);
			return;
		}
	}
	ok(1, "every status has a code of its own (HVD-NNNN)");
	is_str(hvd_status_code(HVD_ERR_BOOTSTRAP), "HVD-1001",
	       "bootstrap failure: HVD-1001 (the family of launch errors)");
	is_str(hvd_status_code(HVD_ERR_NCCL), "HVD-2003", "NCCL: HVD-2003");
	is_str(hvd_status_code(HVD_ERR_MISMATCH), "HVD-3020",
	       "mismatched tensors: HVD-3020");
	ok(hvd_status_code(HVD_ERR_CORRUPT)[4] == '4' &&
		   hvd_status_code(HVD_ERR_IO)[4] == '4',
	   "checkpoint errors are 4xxx");
	ok(hvd_status_code(HVD_ERR_PEER_FAILED)[4] == '5' &&
		   hvd_status_code(HVD_ERR_TRANSPORT)[4] == '5',
	   "transport and peer failures are 5xxx");
	is_str(hvd_status_code((hvd_status_t)9999), "HVD-9000",
	       "an unknown status has the unknown code");

	snprintf(path, sizeof(path), "%s/doc/errors.md", top ? top : "..");
	f = fopen(path, "r");
	if (!f) {
		ok(0, "doc/errors.md readable (%s)", path);
		return;
	}
	/* rows: | N | `HVD-NNNN` | `HVD_ERR_X` | ... */
	while (fgets(line, sizeof(line), f)) {
		char code[16], name[64];
		int num;

		if (sscanf(line, "| %d | `%15[^`]` | `%63[^`]` |", &num, code,
			   name) != 3)
			continue;
		rows++;
		if (num < 0 || num > LAST_STATUS ||
		    strcmp(code, hvd_status_code((hvd_status_t)num)) ||
		    strcmp(name, hvd_status_name((hvd_status_t)num))) {
			diag("doc/errors.md: %d %s %s; the library: %s %s", num,
			     code, name,
			     hvd_status_code((hvd_status_t)num),
			     hvd_status_name((hvd_status_t)num));
			extra++;
			continue;
		}
		found[num]++;
	}
	fclose(f);
	for (int i = 0; i <= LAST_STATUS; i++)
		if (found[i] != 1) {
			diag("doc/errors.md lists %s %d times",
			     hvd_status_name((hvd_status_t)i), found[i]);
			extra++;
		}
	ok(rows > 0 && !extra,
	   "doc/errors.md's table and the library have the same codes and "
	   "names (%d rows)",
	   rows);
}

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
	ok(!strncmp(hvd_last_error(), "HVD-3002 ", 9),
	   "the message starts with its status's code: %s", hvd_last_error());
	hvd_error(HVD_ERR_MISMATCH, "HVD-3020 hvd: from another rank");
	is_str(hvd_last_error(), "HVD-3020 hvd: from another rank",
	       "a message that has its code keeps one");
	hvd_error_prefix(HVD_ERR_PEER_FAILED, "allreduce of %d", 4);
	is_str(hvd_last_error(),
	       "HVD-5002 allreduce of 4: hvd: from another rank",
	       "context goes after the code, which is the new status's");
	check_codes();

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

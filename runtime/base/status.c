/*
 * status.c - statuses, their stable codes and error messages, the checking
 * macros' trace, type and op names, Horovod's even split.
 *
 * The last error message is thread-local, so that concurrent callers each
 * see their own; a message is always set before an error status returns,
 * and it starts with the status's code ("HVD-3020 hvd: mismatched ...").
 */
#include "config.h"

#include "base/base.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define ERRBUF 1024

static _Thread_local char last_error[ERRBUF];

/* Names and stable codes (doc/errors.md has the same table, with cause
 * and fix; tests/unit/errors_doc.sh holds the two together).  Families:
 * 0xxx not errors, 1xxx bootstrap and launch, 2xxx GPU/NCCL, 3xxx tensors
 * and negotiation, 4xxx checkpoint, 5xxx transport and peer failure, 9xxx
 * internal.  Codes never change meaning; new ones are only added. */
static const struct {
	const char *name;
	const char *code;
} statuses[] = {
	[HVD_OK] = {"HVD_OK", "HVD-0000"},
	[HVD_IN_PROGRESS] = {"HVD_IN_PROGRESS", "HVD-0001"},
	[HVD_ERR_NOT_INITIALIZED] = {"HVD_ERR_NOT_INITIALIZED", "HVD-1002"},
	[HVD_ERR_INVALID_ARG] = {"HVD_ERR_INVALID_ARG", "HVD-3001"},
	[HVD_ERR_BAD_TYPE] = {"HVD_ERR_BAD_TYPE", "HVD-3002"},
	[HVD_ERR_BAD_OP] = {"HVD_ERR_BAD_OP", "HVD-3003"},
	[HVD_ERR_BOOTSTRAP] = {"HVD_ERR_BOOTSTRAP", "HVD-1001"},
	[HVD_ERR_TRANSPORT] = {"HVD_ERR_TRANSPORT", "HVD-5001"},
	[HVD_ERR_PEER_FAILED] = {"HVD_ERR_PEER_FAILED", "HVD-5002"},
	[HVD_ERR_TIMEOUT] = {"HVD_ERR_TIMEOUT", "HVD-5003"},
	[HVD_ERR_NO_MEMORY] = {"HVD_ERR_NO_MEMORY", "HVD-9001"},
	[HVD_ERR_MISMATCH] = {"HVD_ERR_MISMATCH", "HVD-3020"},
	[HVD_ERR_STALLED] = {"HVD_ERR_STALLED", "HVD-3030"},
	[HVD_ERR_NOT_MEMBER] = {"HVD_ERR_NOT_MEMBER", "HVD-3040"},
	[HVD_ERR_PROCESS_SET] = {"HVD_ERR_PROCESS_SET", "HVD-3041"},
	[HVD_ERR_SHUTDOWN] = {"HVD_ERR_SHUTDOWN", "HVD-3050"},
	[HVD_ERR_IO] = {"HVD_ERR_IO", "HVD-4001"},
	[HVD_ERR_CORRUPT] = {"HVD_ERR_CORRUPT", "HVD-4002"},
	[HVD_ERR_CUDA] = {"HVD_ERR_CUDA", "HVD-2001"},
	[HVD_ERR_NCCL] = {"HVD_ERR_NCCL", "HVD-2003"},
	[HVD_ERR_UNSUPPORTED] = {"HVD_ERR_UNSUPPORTED", "HVD-9002"},
	[HVD_ERR_DUPLICATE_NAME] = {"HVD_ERR_DUPLICATE_NAME", "HVD-3010"},
	[HVD_ERR_INTERNAL] = {"HVD_ERR_INTERNAL", "HVD-9999"},
	[HVD_HOSTS_UPDATED] = {"HVD_HOSTS_UPDATED", "HVD-0002"},
	[HVD_ERR_TOO_FEW_RANKS] = {"HVD_ERR_TOO_FEW_RANKS", "HVD-5010"},
	[HVD_ERR_REMOVED] = {"HVD_ERR_REMOVED", "HVD-5011"},
};

#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))

const char *hvd_status_name(hvd_status_t status)
{
	if ((unsigned)status < NSTATUS && statuses[status].name)
		return statuses[status].name;
	return "HVD_ERR_UNKNOWN";
}

const char *hvd_status_code(hvd_status_t status)
{
	if ((unsigned)status < NSTATUS && statuses[status].code)
		return statuses[status].code;
	return "HVD-9000";
}

/* Length of an "HVD-NNNN " a message starts with, or 0: a message that
 * comes from another rank (negotiation errors) or from an earlier call
 * already has its code, which the new status's replaces. */
static size_t code_len(const char *m)
{
	if (strncmp(m, "HVD-", 4) != 0)
		return 0;
	for (int i = 4; i < 8; i++)
		if (m[i] < '0' || m[i] > '9')
			return 0;
	return m[8] == ' ' ? 9 : 0;
}

const char *hvd_last_error(void)
{
	return last_error;
}

const char *hvd_error_text(const char *msg)
{
	return msg + code_len(msg);
}

void hvd_error_clear(void)
{
	last_error[0] = '\0';
}

hvd_status_t hvd_verror(hvd_status_t status, const char *fmt, va_list ap)
{
	char msg[ERRBUF];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* A note that comes with success ("no checkpoint: starting from
	 * step 0") is not an error: no code. */
	if (status == HVD_OK || status == HVD_IN_PROGRESS)
		snprintf(last_error, sizeof(last_error), "%s",
			 msg + code_len(msg));
	else
		snprintf(last_error, sizeof(last_error), "%s %s",
			 hvd_status_code(status), msg + code_len(msg));
	hvd_log(HVD_LOG_DEBUG, "%s: %s", hvd_status_name(status), last_error);
	return status;
}

hvd_status_t hvd_error(hvd_status_t status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	hvd_verror(status, fmt, ap);
	va_end(ap);
	return status;
}

void hvd_check_trace(hvd_status_t st, const char *call, const char *file,
		     int line)
{
	const char *base = strrchr(file, '/');

	hvd_log(HVD_LOG_DEBUG, "hvd_check: %s:%d: %s -> %s",
		base ? base + 1 : file, line, call, hvd_status_name(st));
}

hvd_status_t hvd_error_prefix(hvd_status_t status, const char *fmt, ...)
{
	char prefix[ERRBUF / 4], old[ERRBUF];
	va_list ap;

	memcpy(old, last_error, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	snprintf(last_error, sizeof(last_error), "%s %s: %s",
		 hvd_status_code(status), prefix + code_len(prefix),
		 old + code_len(old));
	return status;
}

/* ------------------------------------------------------------- types */

static const struct {
	const char *name;
	size_t size;
} dtypes[HVD_DTYPE_COUNT] = {
	[HVD_UINT8] = {"uint8", 1},     [HVD_INT8] = {"int8", 1},
	[HVD_INT32] = {"int32", 4},     [HVD_INT64] = {"int64", 8},
	[HVD_FLOAT16] = {"float16", 2}, [HVD_BFLOAT16] = {"bfloat16", 2},
	[HVD_FLOAT32] = {"float32", 4}, [HVD_FLOAT64] = {"float64", 8},
};

static const char *const op_names[HVD_OP_COUNT] = {
	[HVD_SUM] = "sum", [HVD_AVERAGE] = "avg", [HVD_MIN] = "min",
	[HVD_MAX] = "max", [HVD_PRODUCT] = "prod",
};

size_t hvd_dtype_size(hvd_dtype_t dtype)
{
	return (unsigned)dtype < HVD_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *hvd_dtype_name(hvd_dtype_t dtype)
{
	return (unsigned)dtype < HVD_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

hvd_status_t hvd_dtype_parse(const char *name, hvd_dtype_t *dtype)
{
	static const struct {
		const char *alias;
		hvd_dtype_t dtype;
	} aliases[] = {
		{"half", HVD_FLOAT16},   {"fp16", HVD_FLOAT16},
		{"bf16", HVD_BFLOAT16},  {"float", HVD_FLOAT32},
		{"fp32", HVD_FLOAT32},   {"double", HVD_FLOAT64},
		{"fp64", HVD_FLOAT64},   {"int", HVD_INT32},
		{"char", HVD_INT8},      {"byte", HVD_UINT8},
	};

	if (!name || !dtype)
		return hvd_error(HVD_ERR_INVALID_ARG, "type name is NULL");
	for (int i = 0; i < HVD_DTYPE_COUNT; i++)
		if (strcasecmp(name, dtypes[i].name) == 0) {
			*dtype = (hvd_dtype_t)i;
			return HVD_OK;
		}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcasecmp(name, aliases[i].alias) == 0) {
			*dtype = aliases[i].dtype;
			return HVD_OK;
		}
	return hvd_error(HVD_ERR_BAD_TYPE,
			 "unknown type '%s': expected one of uint8, int8, "
			 "int32, int64, float16, bfloat16, float32, float64",
			 name);
}

const char *hvd_op_name(hvd_op_t op)
{
	if (op == HVD_ADASUM)
		return "adasum";
	return (unsigned)op < HVD_OP_COUNT ? op_names[op] : NULL;
}

hvd_status_t hvd_op_parse(const char *name, hvd_op_t *op)
{
	if (!name || !op)
		return hvd_error(HVD_ERR_INVALID_ARG, "op name is NULL");
	for (int i = 0; i < HVD_OP_COUNT; i++)
		if (strcasecmp(name, op_names[i]) == 0) {
			*op = (hvd_op_t)i;
			return HVD_OK;
		}
	if (strcasecmp(name, "average") == 0 || strcasecmp(name, "mean") == 0) {
		*op = HVD_AVERAGE;
		return HVD_OK;
	}
	if (strcasecmp(name, "product") == 0) {
		*op = HVD_PRODUCT;
		return HVD_OK;
	}
	if (strcasecmp(name, "adasum") == 0) {
		*op = HVD_ADASUM;
		return HVD_OK;
	}
	return hvd_error(HVD_ERR_BAD_OP,
			 "unknown reduction '%s': expected sum, avg, min, max "
			 "or prod",
			 name);
}

size_t hvd_reducescatter_count(size_t count, int rank, int size)
{
	if (size <= 0 || rank < 0 || rank >= size)
		return 0;
	return count / (size_t)size + ((size_t)rank < count % (size_t)size);
}

size_t hvd_reducescatter_offset(size_t count, int rank, int size)
{
	size_t base, extra;

	if (size <= 0 || rank < 0)
		return 0;
	if (rank > size)
		rank = size;
	base = count / (size_t)size;
	extra = count % (size_t)size;
	return base * (size_t)rank +
	       ((size_t)rank < extra ? (size_t)rank : extra);
}

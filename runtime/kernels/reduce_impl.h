/*
 * reduce_impl.h - the reduction kernels' instruction-set tables.
 *
 * reduce.c picks one table at first use (__builtin_cpu_supports, or
 * HOROVOD_REDUCE_ISA=generic|avx2|avx512 to force one) and reduce_apply,
 * reduce_apply3 go through it.  Each table is built from the same template
 * (reduce_tmpl.h) compiled for a different target, plus hand-written
 * float16/bfloat16 loops that widen to float32 with the ISA's converts.
 */
#ifndef HVD_REDUCE_IMPL_H
#define HVD_REDUCE_IMPL_H

#include "base/base.h"

#include <stddef.h>

#pragma GCC visibility push(hidden)

/* dst[i] = a[i] OP b[i]; dst may equal a or b (never partially overlap). */
typedef void (*reduce_fn)(void *dst, const void *a, const void *b, size_t n);

struct reduce_isa {
	const char *name;
	reduce_fn fn[HVD_DTYPE_COUNT][HVD_OP_COUNT];
};

extern const struct reduce_isa reduce_isa_generic;
#if defined(__x86_64__)
extern const struct reduce_isa reduce_isa_avx2;
extern const struct reduce_isa reduce_isa_avx512;
#endif

/* Force a table by name ("generic", "avx2", "avx512"); -1 when unknown or
 * when this CPU lacks the instructions.  For tests and benchmarks. */
int reduce_select_isa(const char *name);
/* Name of the table in use. */
const char *reduce_isa_name(void);

#pragma GCC visibility pop

#endif /* HVD_REDUCE_IMPL_H */

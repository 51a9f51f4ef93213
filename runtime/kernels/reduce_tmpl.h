/*
 * reduce_tmpl.h - the body of one reduction-kernel table, included once per
 * instruction set (reduce.c, reduce_avx2.c, reduce_avx512.c) after a
 * "#pragma GCC target" that decides which instructions the compiler may use.
 *
 * Integer and float32/float64 kernels use GCC's generic vectors (64 bytes,
 * lowered to whatever the target has: 1 zmm, 2 ymm or 4 xmm registers).
 * Every block is loaded before it is stored, so dst may equal a or b.
 * Signed integers wrap (computed unsigned) as MPI implementations do in
 * practice, instead of being undefined.  min/max are b < a ? b : a and
 * b > a ? b : a, done as a select on the comparison mask.
 *
 * float16/bfloat16 are widened to float32, combined, and rounded once to
 * nearest even; the including file supplies the vector type and the
 * widen/narrow/arithmetic macros:
 *   RK_ISA         name of the table to define (reduce_isa_xxx)
 *   RK_ISA_NAME    its string name
 *   RK_W           float32 lanes per vector
 *   rk_vec         the vector type
 *   RK_LD_H(p) / RK_ST_H(p, v)   load/store RK_W float16 (as float32)
 *   RK_LD_B(p) / RK_ST_B(p, v)   same for bfloat16
 *   RK_ADD, RK_MUL, RK_MIN(a, b) = b < a ? b : a, RK_MAX
 */
#include <stdint.h>
#include <string.h>

#define RK_VB 64 /* bytes per generic vector */

/* V: vector of T; U: vector of unsigned of T's width (masks, wrapping
 * integer arithmetic); L: V for unaligned, aliasing loads and stores;
 * S: T at any address (the scalar tails); A: the vector type in which +
 * and * are done (U for integers).  No operand needs to be aligned for
 * its type: the received operand of a receive-reduce (net/rreduce.c)
 * sits wherever the transport's headers left it. */
#define RK_VTYPES(SFX, T, UT)                                                  \
	typedef T SFX##_V __attribute__((vector_size(RK_VB)));                 \
	typedef UT SFX##_U __attribute__((vector_size(RK_VB)));                \
	typedef T SFX##_L                                                      \
	    __attribute__((vector_size(RK_VB), aligned(1), may_alias));        \
	typedef T SFX##_S __attribute__((aligned(1), may_alias));

#define RK_VSUM(SFX, A, p, q) ((SFX##_V)((A)(p) + (A)(q)))
#define RK_VPROD(SFX, A, p, q) ((SFX##_V)((A)(p) * (A)(q)))
#define RK_VSEL(SFX, m, x, y)                                                  \
	((SFX##_V)(((SFX##_U)(x) & (m)) | ((SFX##_U)(y) & ~(m))))
#define RK_VMIN(SFX, A, p, q) RK_VSEL(SFX, (SFX##_U)((q) < (p)), q, p)
#define RK_VMAX(SFX, A, p, q) RK_VSEL(SFX, (SFX##_U)((q) > (p)), q, p)

#define RK_SSUM(T, S, p, q) ((T)((S)(p) + (S)(q)))
#define RK_SPROD(T, S, p, q) ((T)((S)(p) * (S)(q)))
#define RK_SMIN(T, S, p, q) ((q) < (p) ? (q) : (p))
#define RK_SMAX(T, S, p, q) ((q) > (p) ? (q) : (p))

/* S: scalar type the arithmetic is done in. */
#define RK_KERNEL(SFX, OP, T, S, A)                                            \
	static void SFX##_##OP(void *dv, const void *av, const void *bv,       \
			       size_t n)                                       \
	{                                                                      \
		enum { VL = RK_VB / sizeof(T) };                               \
		SFX##_S *d = dv;                                               \
		const SFX##_S *a = av, *b = bv;                                \
		size_t i = 0;                                                  \
		for (; i + 2 * VL <= n; i += 2 * VL) {                         \
			SFX##_V p0 = *(const SFX##_L *)(a + i);                \
			SFX##_V p1 = *(const SFX##_L *)(a + i + VL);           \
			SFX##_V q0 = *(const SFX##_L *)(b + i);                \
			SFX##_V q1 = *(const SFX##_L *)(b + i + VL);           \
			*(SFX##_L *)(d + i) = RK_V##OP(SFX, A, p0, q0);        \
			*(SFX##_L *)(d + i + VL) = RK_V##OP(SFX, A, p1, q1);   \
		}                                                              \
		for (; i < n; i++)                                             \
			d[i] = RK_S##OP(T, S, a[i], b[i]);                     \
	}

#define RK_TYPE(SFX, T, UT, S, A)                                              \
	RK_VTYPES(SFX, T, UT)                                                  \
	RK_KERNEL(SFX, SUM, T, S, A)                                           \
	RK_KERNEL(SFX, PROD, T, S, A)                                          \
	RK_KERNEL(SFX, MIN, T, S, A)                                           \
	RK_KERNEL(SFX, MAX, T, S, A)

RK_TYPE(u8, uint8_t, uint8_t, unsigned, u8_U)
RK_TYPE(i8, int8_t, uint8_t, unsigned, i8_U)
RK_TYPE(i32, int32_t, uint32_t, uint32_t, i32_U)
RK_TYPE(i64, int64_t, uint64_t, uint64_t, i64_U)
RK_TYPE(f32, float, uint32_t, float, f32_V)
RK_TYPE(f64, double, uint64_t, double, f64_V)

static inline float rk_min(float p, float q) { return q < p ? q : p; }

static inline float rk_max(float p, float q) { return q > p ? q : p; }

/* 16-bit floats: vector body, scalar tail through the exact converters. */
typedef uint16_t rk_u16 __attribute__((aligned(1), may_alias));

#define RK_HALF(NAME, LD, ST, TOF, FROMF, VOP, SOP)                            \
	static void NAME(void *dv, const void *av, const void *bv, size_t n)   \
	{                                                                      \
		rk_u16 *d = dv;                                                \
		const rk_u16 *a = av, *b = bv;                                 \
		size_t i = 0;                                                  \
		for (; i + RK_W <= n; i += RK_W) {                             \
			rk_vec p = LD(a + i), q = LD(b + i);                   \
			ST(d + i, VOP(p, q));                                  \
		}                                                              \
		for (; i < n; i++) {                                           \
			float p = TOF(a[i]), q = TOF(b[i]);                    \
			d[i] = FROMF(SOP);                                     \
		}                                                              \
	}

#define RK_HALF_TYPE(SFX, LD, ST, TOF, FROMF)                                  \
	RK_HALF(SFX##_SUM, LD, ST, TOF, FROMF, RK_ADD, p + q)                  \
	RK_HALF(SFX##_PROD, LD, ST, TOF, FROMF, RK_MUL, p *q)                  \
	RK_HALF(SFX##_MIN, LD, ST, TOF, FROMF, RK_MIN, rk_min(p, q))           \
	RK_HALF(SFX##_MAX, LD, ST, TOF, FROMF, RK_MAX, rk_max(p, q))

RK_HALF_TYPE(f16, RK_LD_H, RK_ST_H, hvd_half_to_float, hvd_float_to_half)
RK_HALF_TYPE(bf16, RK_LD_B, RK_ST_B, hvd_bf16_to_float, hvd_float_to_bf16)

/* AVERAGE reduces as SUM: the caller scales once at the end. */
#define RK_ROW(SFX)                                                            \
	{                                                                      \
		[HVD_SUM] = SFX##_SUM, [HVD_AVERAGE] = SFX##_SUM,              \
		[HVD_MIN] = SFX##_MIN, [HVD_MAX] = SFX##_MAX,                  \
		[HVD_PRODUCT] = SFX##_PROD,                                    \
	}

const struct reduce_isa RK_ISA = {
    .name = RK_ISA_NAME,
    .fn =
	{
	    [HVD_UINT8] = RK_ROW(u8),
	    [HVD_INT8] = RK_ROW(i8),
	    [HVD_INT32] = RK_ROW(i32),
	    [HVD_INT64] = RK_ROW(i64),
	    [HVD_FLOAT16] = RK_ROW(f16),
	    [HVD_BFLOAT16] = RK_ROW(bf16),
	    [HVD_FLOAT32] = RK_ROW(f32),
	    [HVD_FLOAT64] = RK_ROW(f64),
	},
};

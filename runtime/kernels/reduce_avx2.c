/*
 * reduce_avx2.c - reduction kernels for CPUs with AVX2 and F16C (Haswell,
 * Zen and later): the template of reduce_tmpl.h compiled for 256-bit
 * vectors, float16 through vcvtph2ps/vcvtps2ph, bfloat16 by shifting.
 */
#include "config.h"

#if defined(__x86_64__)

#pragma GCC target("avx2,fma,f16c")

#include "kernels/kernels.h"
#include "kernels/reduce_impl.h"

#include <immintrin.h>

/* float32 -> bfloat16, round to nearest even; NaN stays a quiet NaN (the
 * same rule as hvd_float_to_bf16). */
static inline __m128i bf16_narrow(__m256 v)
{
	__m256i u = _mm256_castps_si256(v);
	__m256i lsb =
	    _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(u, _mm256_set1_epi32(0x7fff));
	__m256i nan =
	    _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
	__m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
	__m256i packed;

	r = _mm256_srli_epi32(_mm256_add_epi32(r, lsb), 16);
	r = _mm256_blendv_epi8(r, nan, isnan);
	/* packus works within 128-bit lanes: gather the two halves. */
	packed = _mm256_packus_epi32(r, r);
	packed = _mm256_permute4x64_epi64(packed, 0xD8);
	return _mm256_castsi256_si128(packed);
}

#define RK_ISA reduce_isa_avx2
#define RK_ISA_NAME "avx2"
#define RK_W 8
typedef __m256 rk_vec;
#define RK_LD_H(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define RK_ST_H(p, v)                                                          \
	_mm_storeu_si128((__m128i *)(p),                                       \
			 _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define RK_LD_B(p)                                                             \
	_mm256_castsi256_ps(_mm256_slli_epi32(                                 \
	    _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define RK_ST_B(p, v) _mm_storeu_si128((__m128i *)(p), bf16_narrow(v))
#define RK_ADD(a, b) _mm256_add_ps((a), (b))
#define RK_MUL(a, b) _mm256_mul_ps((a), (b))
/* min_ps(x, y) is x < y ? x : y: same NaN rule as the scalar code. */
#define RK_MIN(a, b) _mm256_min_ps((b), (a))
#define RK_MAX(a, b) _mm256_max_ps((b), (a))

#include "kernels/reduce_tmpl.h"

#endif /* __x86_64__ */

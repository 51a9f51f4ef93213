/*
 * reduce_avx512.c - reduction kernels for CPUs with AVX-512 F/BW/VL
 * (Skylake-SP, Ice Lake, Zen 4 and later): the template of reduce_tmpl.h
 * compiled for 512-bit vectors.  bfloat16 is rounded by integer arithmetic
 * rather than vcvtneps2bf16, which flushes subnormals to zero.
 */
#include "config.h"

#if defined(__x86_64__)

#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")

#include "kernels/kernels.h"
#include "kernels/reduce_impl.h"

#include <immintrin.h>

static inline __m256i bf16_narrow(__m512 v)
{
	__m512i u = _mm512_castps_si512(v);
	__m512i lsb =
	    _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_add_epi32(u, _mm512_set1_epi32(0x7fff));
	__m512i nan =
	    _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
	__mmask16 isnan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);

	r = _mm512_srli_epi32(_mm512_add_epi32(r, lsb), 16);
	r = _mm512_mask_blend_epi32(isnan, r, nan);
	return _mm512_cvtepi32_epi16(r);
}

#define RK_ISA reduce_isa_avx512
#define RK_ISA_NAME "avx512"
#define RK_W 16
typedef __m512 rk_vec;
#define RK_LD_H(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define RK_ST_H(p, v)                                                          \
	_mm256_storeu_si256((__m256i *)(p),                                    \
			    _mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT |   \
						     _MM_FROUND_NO_EXC))
#define RK_LD_B(p)                                                             \
	_mm512_castsi512_ps(_mm512_slli_epi32(                                 \
	    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))),   \
	    16))
#define RK_ST_B(p, v) _mm256_storeu_si256((__m256i *)(p), bf16_narrow(v))
#define RK_ADD(a, b) _mm512_add_ps((a), (b))
#define RK_MUL(a, b) _mm512_mul_ps((a), (b))
#define RK_MIN(a, b) _mm512_min_ps((b), (a))
#define RK_MAX(a, b) _mm512_max_ps((b), (a))

#include "kernels/reduce_tmpl.h"

#endif /* __x86_64__ */

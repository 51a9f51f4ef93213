/*
 * gpu_ref.h - host references for the GPU tests: float16 and bfloat16
 * conversions (round to nearest even, the behaviour of __float2half_rn and
 * __float2bfloat16_rn) and bitwise comparisons that treat NaNs as equal.
 */
#ifndef HVD_TESTS_GPU_REF_H
#define HVD_TESTS_GPU_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* IEEE binary16, round to nearest even (the reference for
 * __float2half_rn). */
static inline uint16_t ref_f2h(float f)
{
	uint32_t x = f2u(f), sign = (x >> 16) & 0x8000;
	uint32_t abs = x & 0x7fffffff;

	if (abs > 0x7f800000)
		return (uint16_t)(sign | 0x7e00);
	if (abs >= 0x477ff000) /* rounds to >= 65520: infinity */
		return (uint16_t)(sign | 0x7c00);
	if (abs < 0x38800000) { /* half subnormal or zero */
		/* value * 2^24, rounded to nearest even, is the mantissa */
		float v = u2f(abs) * 16777216.0f;
		float r = nearbyintf(v);

		return (uint16_t)(sign | (uint32_t)r);
	}
	{
		uint32_t e = ((abs >> 23) - 112) << 10;
		uint32_t m = abs & 0x7fffff;
		uint32_t h = e | (m >> 13);
		uint32_t rest = m & 0x1fff;

		if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
}

static inline float ref_h2f(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0)
		return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
	if (e == 31)
		return u2f(sign | 0x7f800000 | (m << 13));
	return u2f(sign | ((e + 112) << 23) | (m << 13));
}

static inline uint16_t ref_f2bf(float f)
{
	uint32_t x = f2u(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static inline float ref_bf2f(uint16_t b) { return u2f((uint32_t)b << 16); }

static inline int same_f32(float a, float b)
{
	return (isnan(a) && isnan(b)) || f2u(a) == f2u(b);
}

static inline int same_h(uint16_t a, uint16_t b, int bf)
{
	uint16_t exp = bf ? 0x7f80 : 0x7c00, man = bf ? 0x7f : 0x3ff;
	int na = (a & exp) == exp && (a & man),
	    nb = (b & exp) == exp && (b & man);

	return (na && nb) || a == b;
}

#endif /* HVD_TESTS_GPU_REF_H */

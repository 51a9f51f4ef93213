/*
 * half.c - float32 <-> float16 / bfloat16, rounding to nearest even: the
 * one definition every reduction table widens and narrows with, so that
 * all tables give bitwise-identical results.
 */
#include "config.h"

#include "kernels/kernels.h"

#include <stdint.h>
#include <string.h>

static inline uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t hvd_float_to_half(float f)
{
	uint32_t x = f2u(f);
	uint32_t sign = (x >> 16) & 0x8000;
	uint32_t ax = x & 0x7fffffff;

	if (ax > 0x7f800000) /* NaN: keep it quiet, keep the top payload */
		return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
	if (ax >= 0x477ff000) /* >= 65520 rounds to infinity */
		return (uint16_t)(sign | 0x7c00);
	if (ax < 0x38800000) { /* below 2^-14: a float16 subnormal or 0 */
		uint32_t e = ax >> 23, m, r, rem, half;
		int shift;

		if (ax < 0x33000000) /* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		m = (ax & 0x7fffff) | 0x800000;
		shift = 126 - (int)e;
		r = m >> shift;
		rem = m & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	ax -= 0x38000000; /* rebias the exponent from 127 to 15 */
	ax += 0xfff + ((ax >> 13) & 1);
	return (uint16_t)(sign | (ax >> 13));
}

float hvd_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f)
		return u2f(sign | 0x7f800000 | (m << 13));
	if (e == 0) {
		if (m == 0)
			return u2f(sign);
		e = 113; /* normalise the subnormal */
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		return u2f(sign | (e << 23) | ((m & 0x3ff) << 13));
	}
	return u2f(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t hvd_float_to_bf16(float f)
{
	uint32_t x = f2u(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float hvd_bf16_to_float(uint16_t h) { return u2f((uint32_t)h << 16); }

/*
 * copy_stream.c - memcpy with non-temporal stores, for copies far larger
 * than the caches whose destination is not read soon: the shared-memory
 * pipeline's streamed data and the checkpoint's staging copy.  The
 * destination's lines are not read before they are written (a third less
 * memory traffic than memcpy's stores) and the caches keep what they had.
 */
#include "config.h"

#include "comm.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

/* SSE2: every x86-64 CPU. */
void hvd_copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	unsigned char *d = dst;
	const unsigned char *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;

	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i x0 = _mm_loadu_si128((const __m128i *)s);
		__m128i x1 = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i x2 = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i x3 = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, x0);
		_mm_stream_si128((__m128i *)(d + 16), x1);
		_mm_stream_si128((__m128i *)(d + 32), x2);
		_mm_stream_si128((__m128i *)(d + 48), x3);
	}
	memcpy(d, s, n);
#else
	memcpy(dst, src, n);
#endif
}

void hvd_stream_fence(void)
{
#if defined(__x86_64__)
	_mm_sfence();
#endif
}

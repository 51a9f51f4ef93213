/*
 * copy_stream.c - the copies of the data paths.
 *
 * hvd_copy_stream: memcpy with non-temporal stores, for copies far larger
 * than the caches whose destination is not read soon: the shared-memory
 * pipeline's streamed data and the checkpoint's staging copy.  The
 * destination's lines are not read before they are written (a third less
 * memory traffic than memcpy's stores) and the caches keep what they had.
 *
 * hvd_copy: memcpy for the pipeline's steps (tens to hundreds of KiB),
 * a plain vector loop.  glibc's memcpy takes "rep movsb" for sizes
 * between a few KiB and most of the last-level cache, which on the build
 * VM's AMD EPYC runs at half speed into memory that is not in the cache
 * when the destination is not 32-byte aligned, as malloc's 16-byte
 * alignment leaves most buffers of a C program: 256 KiB steps from a
 * cached ring into a 128 MiB buffer, 10.8-11.6 GB/s at offsets 16 and 48,
 * 18.7-19.8 GB/s at 0, 32 and 64; this loop 17.6-20.6 GB/s at every offset,
 * and the same as memcpy into cached memory.  The pipeline copies its
 * results out into the caller's buffers (ResNet-50's gradients from malloc:
 * engine step 13.6-17.4 ms -> 12.2-13.5 ms; 64-byte aligned ones, as the
 * frameworks allocate them, ran at the faster speed before too).
 */
#include "config.h"

#include "kernels/kernels.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#if defined(__x86_64__)
/* 64 bytes at a time (SSE2: every x86-64 CPU), streamed (d 16-byte
 * aligned) or stored through the caches; returns the bytes copied. */
static inline __attribute__((always_inline)) size_t
copy64(unsigned char *d, const unsigned char *s, size_t n, const int nt)
{
	size_t i = 0;

	for (; i + 64 <= n; i += 64) {
		__m128i x0 = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i x1 = _mm_loadu_si128((const __m128i *)(s + i + 16));
		__m128i x2 = _mm_loadu_si128((const __m128i *)(s + i + 32));
		__m128i x3 = _mm_loadu_si128((const __m128i *)(s + i + 48));

		if (nt) {
			_mm_stream_si128((__m128i *)(d + i), x0);
			_mm_stream_si128((__m128i *)(d + i + 16), x1);
			_mm_stream_si128((__m128i *)(d + i + 32), x2);
			_mm_stream_si128((__m128i *)(d + i + 48), x3);
		} else {
			_mm_storeu_si128((__m128i *)(d + i), x0);
			_mm_storeu_si128((__m128i *)(d + i + 16), x1);
			_mm_storeu_si128((__m128i *)(d + i + 32), x2);
			_mm_storeu_si128((__m128i *)(d + i + 48), x3);
		}
	}
	return i;
}
#endif

void hvd_copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	unsigned char *d = dst;
	const unsigned char *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15, i;

	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	i = copy64(d, s, n, 1);
	memcpy(d + i, s + i, n - i);
#else
	memcpy(dst, src, n);
#endif
}

void hvd_copy(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	size_t i = copy64(dst, src, n, 0);

	memcpy((unsigned char *)dst + i, (const unsigned char *)src + i, n - i);
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

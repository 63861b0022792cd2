/* Bulk copies (see copy.h). */
#include <stdint.h>
#include <string.h>
#include "copy.h"

typedef char fr_v16 __attribute__((vector_size(16), aligned(1), may_alias));

void fr_copy(void *restrict dst, const void *restrict src, size_t n)
{
    char *d = dst;
    const char *s = src;
    size_t i = 0;
    if (n == 0) return;  /* buffers may be NULL then */
    if (n < 256) {
        memcpy(d, s, n);
        return;
    }
    for (; i + 64 <= n; i += 64) {
        fr_v16 a = *(const fr_v16 *)(s + i), b = *(const fr_v16 *)(s + i + 16);
        fr_v16 c = *(const fr_v16 *)(s + i + 32), e = *(const fr_v16 *)(s + i + 48);
        *(fr_v16 *)(d + i) = a;
        *(fr_v16 *)(d + i + 16) = b;
        *(fr_v16 *)(d + i + 32) = c;
        *(fr_v16 *)(d + i + 48) = e;
    }
    if (i < n) memcpy(d + i, s + i, n - i);
}

#if defined(__x86_64__)
#include <immintrin.h>
void fr_copy_stream(void *restrict dst, const void *restrict src, size_t n)
{
    char *d = dst;
    const char *s = src;
    /* Align the destination to 16 bytes with an ordinary copy first. */
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (n < 4096 || head >= n) {
        fr_copy(d, s, n);
        return;
    }
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i)), b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32)), e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    _mm_sfence();
    if (i < n) memcpy(d + i, s + i, n - i);
}
#else
void fr_copy_stream(void *restrict dst, const void *restrict src, size_t n) { fr_copy(dst, src, n); }
#endif

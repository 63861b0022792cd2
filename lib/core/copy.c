/* Bulk copies (see copy.h). */
#include <stdint.h>
#include <string.h>
#include "copy.h"

typedef char fr_v16 __attribute__((vector_size(16), aligned(1), may_alias));

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FR_COPY_AVX2 1
/* 32-byte loads and stores: twice the 16-byte loop's speed while the data
 * is in L1, the same from L2 on. */
__attribute__((target("avx2"))) static void copy_avx2(char *restrict d, const char *restrict s, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
        _mm256_storeu_si256((__m256i *)(d + i), a);
        _mm256_storeu_si256((__m256i *)(d + i + 32), b);
    }
    if (i < n) memcpy(d + i, s + i, n - i);
}

static int has_avx2(void)
{
    static int known = -1;  /* (threads may race here: they store the same value) */
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v;
}
#else
#define FR_COPY_AVX2 0
#endif

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
#if FR_COPY_AVX2
    if (has_avx2()) {
        copy_avx2(d, s, n);
        return;
    }
#endif
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

/* Results are streamed from a rank's share of the node's last-level
 * caches: below it a plain store leaves the result in a cache the reader
 * will hit, above it the stores would only evict (docs/performance.md). */
size_t fr_stream_min(size_t llc_share)
{
    if (!llc_share) return FR_STREAM_UNKNOWN;
    return llc_share < FR_STREAM_FLOOR ? FR_STREAM_FLOOR : llc_share;
}

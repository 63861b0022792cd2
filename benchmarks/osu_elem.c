/* Element helpers of the osu-style benchmarks: values written and read in
 * every fastreduce type (float16 and bfloat16 converted here, so no
 * compiler support is needed), poisoning, and the host/device copies of
 * -d cuda. See osu_common.h. */
#include "config.h"
#include "osu_common.h"
#include "bench_device.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint16_t f16_from_double(double v)
{
    uint16_t sign = 0;
    if (signbit(v)) { sign = 0x8000; v = -v; }
    if (isnan(v)) return 0x7e00;
    if (v == 0) return sign;
    int e;
    double m = frexp(v, &e);          /* v = m * 2^e, m in [0.5, 1) */
    int be = e + 14;                  /* biased exponent of 1.f * 2^(e-1) */
    if (be >= 31) return sign | 0x7c00;
    if (be <= 0) return (uint16_t)(sign | (unsigned)nearbyint(ldexp(v, 24)));
    unsigned bits = ((unsigned)be << 10) + (unsigned)nearbyint(ldexp(2 * m - 1, 10));
    return (uint16_t)(sign | (bits >= 0x7c00 ? 0x7c00 : bits));
}

static double f16_to_double(uint16_t h)
{
    int be = (h >> 10) & 31;
    unsigned f = h & 1023;
    double v;
    if (be == 0)       v = ldexp((double)f, -24);
    else if (be == 31) v = f ? NAN : INFINITY;
    else               v = ldexp((double)(1024 + f), be - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t bf16_from_double(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f)) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void osu_set(void *buf, size_t i, fr_dtype_t t, double v)
{
    switch (t) {
    case FR_INT8:     ((int8_t *)buf)[i] = (int8_t)v; break;
    case FR_UINT8:    ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case FR_INT32:    ((int32_t *)buf)[i] = (int32_t)v; break;
    case FR_UINT32:   ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case FR_INT64:    ((int64_t *)buf)[i] = (int64_t)v; break;
    case FR_UINT64:   ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case FR_FLOAT16:  ((uint16_t *)buf)[i] = f16_from_double(v); break;
    case FR_BFLOAT16: ((uint16_t *)buf)[i] = bf16_from_double(v); break;
    case FR_FLOAT32:  ((float *)buf)[i] = (float)v; break;
    case FR_FLOAT64:  ((double *)buf)[i] = v; break;
    default: break;
    }
}

double osu_get(const void *buf, size_t i, fr_dtype_t t)
{
    switch (t) {
    case FR_INT8:     return ((const int8_t *)buf)[i];
    case FR_UINT8:    return ((const uint8_t *)buf)[i];
    case FR_INT32:    return ((const int32_t *)buf)[i];
    case FR_UINT32:   return ((const uint32_t *)buf)[i];
    case FR_INT64:    return (double)((const int64_t *)buf)[i];
    case FR_UINT64:   return (double)((const uint64_t *)buf)[i];
    case FR_FLOAT16:  return f16_to_double(((const uint16_t *)buf)[i]);
    case FR_BFLOAT16: return bf16_to_double(((const uint16_t *)buf)[i]);
    case FR_FLOAT32:  return ((const float *)buf)[i];
    case FR_FLOAT64:  return ((const double *)buf)[i];
    default:          return NAN;
    }
}

double osu_exact_limit(fr_dtype_t t)
{
    switch (t) {
    case FR_INT8:     return 127;
    case FR_UINT8:    return 255;
    case FR_FLOAT16:  return 2048;
    case FR_BFLOAT16: return 256;
    case FR_FLOAT32:  return 16777216.0;
    case FR_INT32:    return 2147483647.0;
    default:          return 9007199254740992.0;  /* 2^53: [u]int64 values we use stay far below */
    }
}

void osu_poison(void *buf, size_t bytes)
{
    /* 0xA5 bytes read as a negative number in every signed and float type, and
     * as 165+ in unsigned ones; validation values are positive and at most 100
     * for unsigned 8-bit types, so no expected value equals it. */
    memset(buf, 0xA5, bytes);
}

static void copy(void *dst, const void *src, size_t bytes)
{
    if (bd_copy(dst, src, bytes)) {
        fprintf(stderr, "fr_osu: copying %zu bytes to or from the device failed\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

void osu_upload_bytes(osu_ctx_t *c, size_t bytes)
{
    if (c->sbuf == c->hs) return;
    copy(c->sbuf, c->hs, bytes);
    copy(c->rbuf, c->hr, bytes);
}

void osu_upload(osu_ctx_t *c) { osu_upload_bytes(c, c->count * c->esize); }

void osu_download(osu_ctx_t *c)
{
    if (c->sbuf == c->hs) return;
    copy(c->hs, c->sbuf, c->count * c->esize);
    copy(c->hr, c->rbuf, c->count * c->esize);
}

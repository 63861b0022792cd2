/* Unit tests for lib/reduce.c: datatypes, reduction kernels, float16 and
 * bfloat16 conversions, the average, names and sizes; and for the bulk
 * copies of lib/copy.c that carry the shm algorithms' data.
 *
 * Every result is checked against a scalar reference written here without
 * looking at the library's way of computing it: integers through wider
 * arithmetic and explicit modular reduction, 16-bit floats through double
 * (exact sums and products, or an exact error term) and a rounding routine
 * built on frexp/ldexp/floor. Where the library has an AVX2 kernel set, the
 * kernel tests run twice: once on the portable set, once on the AVX2 set.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "fastreduce.h"
#include "reduce.h"

/* Test hook in lib/reduce.c: 1 = portable kernels only; returns whether an
 * AVX2 kernel set is usable on this machine. */
int fr_reduce_force_portable(int on);

/* Kernel modes to test: 0 = portable, 1 = AVX2 (when there is one). */
static int n_modes(void)
{
    int avx2 = fr_reduce_force_portable(0);
    return avx2 ? 2 : 1;
}
static void set_mode(int m) { fr_reduce_force_portable(m == 0); }

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static double bitsd(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* ------------------------------------------------------------------------ */
/* Reference 16-bit float formats, through double                            */

typedef struct {
    int mbits;        /* stored fraction bits */
    int ebits;        /* exponent bits */
    int bias;
    uint16_t qnan;    /* canonical quiet NaN */
} hfmt_t;

static const hfmt_t F16 = { 10, 5, 15, 0x7e00 };
static const hfmt_t BF16 = { 7, 8, 127, 0x7fc0 };

static uint16_t h_inf(const hfmt_t *f) { return (uint16_t)(((1u << f->ebits) - 1u) << f->mbits); }
static int h_isnan_ref(uint16_t h, const hfmt_t *f)
{
    return (h & 0x7fffu) > h_inf(f);
}

/* The exact value of an encoding. */
static double ref_decode(uint16_t h, const hfmt_t *f)
{
    unsigned emask = (1u << f->ebits) - 1u;
    unsigned e = (h >> f->mbits) & emask;
    unsigned m = h & ((1u << f->mbits) - 1u);
    double v;
    if (e == emask)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(m + (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return (h & 0x8000u) ? -v : v;
}

/* Round x + err to the format, nearest, ties to even, where x is a double
 * and err a tiny correction (|err| <= half an ulp of x) that only breaks a
 * tie (used for an exact sum x + err). */
static uint16_t ref_round(double x, double err, const hfmt_t *f)
{
    if (isnan(x))
        return f->qnan;
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    if (isinf(x))
        return sign | h_inf(f);
    if (x == 0)
        return sign;
    double ax = fabs(x);
    double aerr = signbit(x) ? -err : err;
    int e;
    frexp(ax, &e);                  /* ax = m * 2^e, m in [0.5, 1) */
    int E = e - 1;                  /* ax = 1.xxx * 2^E */
    int emin = 1 - f->bias;
    if (E < emin)
        E = emin;                   /* subnormal range: fixed quantum */
    int q = E - f->mbits;           /* the quantum is 2^q */
    double t = ldexp(ax, -q);       /* exact: a power-of-two scaling */
    double fl = floor(t);
    double frac = t - fl;
    double r;
    if (frac > 0.5)
        r = fl + 1;
    else if (frac < 0.5)
        r = fl;
    else if (aerr > 0)
        r = fl + 1;
    else if (aerr < 0)
        r = fl;
    else
        r = (fmod(fl, 2.0) == 0.0) ? fl : fl + 1;
    /* encode r * 2^q */
    double lead = ldexp(1.0, f->mbits);
    if (r >= 2 * lead) {
        r /= 2;
        E += 1;
    }
    if (r < lead)                   /* only at E == emin: subnormal (or zero) */
        return sign | (uint16_t)r;
    int efield = E + f->bias;
    if (efield >= (1 << f->ebits) - 1)
        return sign | h_inf(f);
    return sign | (uint16_t)((unsigned)efield << f->mbits) | (uint16_t)(r - lead);
}

/* Reference for one 16-bit op; returns the expected bits, *anynan set when
 * any NaN is acceptable (sum and prod of NaN). */
static uint16_t ref_h_op(uint16_t a, uint16_t b, fr_op_t op, const hfmt_t *f, int *anynan)
{
    double x = ref_decode(a, f), y = ref_decode(b, f);
    *anynan = 0;
    switch (op) {
    case FR_SUM:
    case FR_AVG: {
        double s = x + y;
        if (isnan(s)) {
            *anynan = 1;
            return f->qnan;
        }
        double err = 0;
        if (isfinite(x) && isfinite(y)) {   /* two-sum: s + err == x + y */
            double bb = s - x;
            err = (x - (s - bb)) + (y - bb);
        }
        return ref_round(s, err, f);
    }
    case FR_PROD: {
        double p = x * y;                   /* exact: <= 22 significant bits */
        if (isnan(p)) {
            *anynan = 1;
            return f->qnan;
        }
        return ref_round(p, 0, f);
    }
    case FR_MIN:
    case FR_MAX:
        if (isnan(x) || isnan(y))
            return f->qnan;
        if (x == y && x == 0) {
            int nx = (a & 0x8000u) != 0, ny = (b & 0x8000u) != 0;
            int neg = (op == FR_MIN) ? (nx || ny) : (nx && ny);
            return neg ? 0x8000u : 0u;
        }
        if (op == FR_MIN)
            return (y < x) ? b : a;
        return (y > x) ? b : a;
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------------ */
/* Generic reference: one element of any dtype                               */

static int64_t wrap_signed(int64_t v, int bits)
{
    /* reduce v modulo 2^bits into [-2^(bits-1), 2^(bits-1)) */
    int64_t m = (int64_t)1 << bits;
    int64_t r = ((v % m) + m) % m;
    return r >= m / 2 ? r - m : r;
}

static int float_min_max_ref_d(double x, double y, int is_min, int sx, int sy, int *which)
{
    /* returns 0: use x, 1: use y, 2: -0.0, 3: +0.0; NaN handled by caller */
    if (x == y && x == 0) {
        int neg = is_min ? (sx || sy) : (sx && sy);
        *which = neg ? 2 : 3;
        return *which;
    }
    if (is_min)
        *which = (y < x) ? 1 : 0;
    else
        *which = (y > x) ? 1 : 0;
    return *which;
}

/* Computes the expected element into out; returns 1 if any NaN is an
 * acceptable result (float sum/prod whose exact result is NaN). */
static int ref_elem(fr_dtype_t dt, fr_op_t op, const void *pa, const void *pb, void *out)
{
    if (op == FR_AVG)
        op = FR_SUM;
    switch (dt) {
    case FR_INT8: case FR_INT32: {
        int bits = dt == FR_INT8 ? 8 : 32;
        int64_t x, y, r;
        if (dt == FR_INT8) { int8_t a, b; memcpy(&a, pa, 1); memcpy(&b, pb, 1); x = a; y = b; }
        else { int32_t a, b; memcpy(&a, pa, 4); memcpy(&b, pb, 4); x = a; y = b; }
        switch (op) {
        case FR_SUM: r = wrap_signed(x + y, bits); break;
        case FR_PROD: r = wrap_signed(x * y, bits); break;
        case FR_MIN: r = x < y ? x : y; break;
        default: r = x > y ? x : y; break;
        }
        if (dt == FR_INT8) { int8_t v = (int8_t)r; memcpy(out, &v, 1); }
        else { int32_t v = (int32_t)r; memcpy(out, &v, 4); }
        return 0;
    }
    case FR_UINT8: case FR_UINT32: {
        uint64_t x, y, r, mod = dt == FR_UINT8 ? 256u : 4294967296ull;
        if (dt == FR_UINT8) { uint8_t a, b; memcpy(&a, pa, 1); memcpy(&b, pb, 1); x = a; y = b; }
        else { uint32_t a, b; memcpy(&a, pa, 4); memcpy(&b, pb, 4); x = a; y = b; }
        switch (op) {
        case FR_SUM: r = (x + y) % mod; break;
        case FR_PROD: r = (x * y) % mod; break;     /* < 2^64 */
        case FR_MIN: r = x < y ? x : y; break;
        default: r = x > y ? x : y; break;
        }
        if (dt == FR_UINT8) { uint8_t v = (uint8_t)r; memcpy(out, &v, 1); }
        else { uint32_t v = (uint32_t)r; memcpy(out, &v, 4); }
        return 0;
    }
    case FR_INT64: {
        int64_t a, b;
        memcpy(&a, pa, 8); memcpy(&b, pb, 8);
        __int128 r;
        switch (op) {
        case FR_SUM: r = (__int128)a + b; break;
        case FR_PROD: r = (__int128)a * b; break;
        case FR_MIN: r = a < b ? a : b; break;
        default: r = a > b ? a : b; break;
        }
        uint64_t v = (uint64_t)(unsigned __int128)r;   /* modulo 2^64 */
        memcpy(out, &v, 8);
        return 0;
    }
    case FR_UINT64: {
        uint64_t a, b;
        memcpy(&a, pa, 8); memcpy(&b, pb, 8);
        unsigned __int128 r;
        switch (op) {
        case FR_SUM: r = (unsigned __int128)a + b; break;
        case FR_PROD: r = (unsigned __int128)a * b; break;
        case FR_MIN: r = a < b ? a : b; break;
        default: r = a > b ? a : b; break;
        }
        uint64_t v = (uint64_t)r;
        memcpy(out, &v, 8);
        return 0;
    }
    case FR_FLOAT16: case FR_BFLOAT16: {
        const hfmt_t *f = dt == FR_FLOAT16 ? &F16 : &BF16;
        uint16_t a, b;
        int anynan;
        memcpy(&a, pa, 2); memcpy(&b, pb, 2);
        uint16_t v = ref_h_op(a, b, op, f, &anynan);
        memcpy(out, &v, 2);
        return anynan;
    }
    case FR_FLOAT32: {
        float a, b, v;
        memcpy(&a, pa, 4); memcpy(&b, pb, 4);
        int which;
        switch (op) {
        /* via double: one correct rounding of the exact product, and for
         * the sum 53 >= 2*24+2 bits make double rounding harmless */
        case FR_SUM: v = (float)((double)a + (double)b); break;
        case FR_PROD: v = (float)((double)a * (double)b); break;
        default:
            if (isnan(a) || isnan(b)) {
                v = bitsf(0x7fc00000u);
                break;
            }
            float_min_max_ref_d(a, b, op == FR_MIN, signbit(a) != 0, signbit(b) != 0, &which);
            v = which == 0 ? a : which == 1 ? b : which == 2 ? -0.0f : 0.0f;
            break;
        }
        memcpy(out, &v, 4);
        return (op == FR_SUM || op == FR_PROD) && isnan(v);
    }
    case FR_FLOAT64: {
        volatile double a, b;
        double v, ta, tb;
        memcpy(&ta, pa, 8); memcpy(&tb, pb, 8);
        a = ta; b = tb;
        int which;
        switch (op) {
        case FR_SUM: v = a + b; break;
        case FR_PROD: v = a * b; break;
        default:
            if (isnan(a) || isnan(b)) {
                v = bitsd(0x7ff8000000000000ull);
                break;
            }
            float_min_max_ref_d(a, b, op == FR_MIN, signbit(a) != 0, signbit(b) != 0, &which);
            v = which == 0 ? a : which == 1 ? b : which == 2 ? -0.0 : 0.0;
            break;
        }
        memcpy(out, &v, 8);
        return (op == FR_SUM || op == FR_PROD) && isnan(v);
    }
    default:
        return 0;
    }
}

static int elem_isnan(fr_dtype_t dt, const void *p)
{
    switch (dt) {
    case FR_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return h_isnan_ref(h, &F16); }
    case FR_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return h_isnan_ref(h, &BF16); }
    case FR_FLOAT32: { float v; memcpy(&v, p, 4); return isnan(v); }
    case FR_FLOAT64: { double v; memcpy(&v, p, 8); return isnan(v); }
    default: return 0;
    }
}

static void elem_str(fr_dtype_t dt, const void *p, char *buf, size_t len)
{
    size_t sz = fr_dtype_size(dt);
    uint64_t u = 0;
    memcpy(&u, p, sz);                 /* little-endian hosts */
    snprintf(buf, len, "0x%0*llx", (int)(2 * sz), (unsigned long long)u);
}

/* ------------------------------------------------------------------------ */
/* Edge values per dtype                                                     */

#define MAX_EDGES 40

static size_t edges(fr_dtype_t dt, unsigned char *buf)
{
    size_t n = 0;
#define PUT(T, v) do { T v_ = (T)(v); memcpy(buf + n * sizeof(T), &v_, sizeof(T)); n++; } while (0)
    switch (dt) {
    case FR_INT8:
        PUT(int8_t, 0); PUT(int8_t, 1); PUT(int8_t, -1); PUT(int8_t, INT8_MIN); PUT(int8_t, INT8_MAX);
        PUT(int8_t, INT8_MIN + 1); PUT(int8_t, 2); PUT(int8_t, -2); PUT(int8_t, 16); PUT(int8_t, 100);
        PUT(int8_t, -100); PUT(int8_t, 64);
        break;
    case FR_UINT8:
        PUT(uint8_t, 0); PUT(uint8_t, 1); PUT(uint8_t, 2); PUT(uint8_t, 127); PUT(uint8_t, 128);
        PUT(uint8_t, 255); PUT(uint8_t, 254); PUT(uint8_t, 16); PUT(uint8_t, 200);
        break;
    case FR_INT32:
        PUT(int32_t, 0); PUT(int32_t, 1); PUT(int32_t, -1); PUT(int32_t, INT32_MIN); PUT(int32_t, INT32_MAX);
        PUT(int32_t, INT32_MIN + 1); PUT(int32_t, 2); PUT(int32_t, -2); PUT(int32_t, 65536);
        PUT(int32_t, 65535); PUT(int32_t, -65536); PUT(int32_t, 46341); PUT(int32_t, 0x55555555);
        break;
    case FR_UINT32:
        PUT(uint32_t, 0); PUT(uint32_t, 1); PUT(uint32_t, 2); PUT(uint32_t, 0x7fffffffu);
        PUT(uint32_t, 0x80000000u); PUT(uint32_t, 0xffffffffu); PUT(uint32_t, 0xfffffffeu);
        PUT(uint32_t, 65536); PUT(uint32_t, 65535); PUT(uint32_t, 0xaaaaaaaau);
        break;
    case FR_INT64:
        PUT(int64_t, 0); PUT(int64_t, 1); PUT(int64_t, -1); PUT(int64_t, INT64_MIN); PUT(int64_t, INT64_MAX);
        PUT(int64_t, INT64_MIN + 1); PUT(int64_t, 2); PUT(int64_t, -2); PUT(int64_t, 4294967296ll);
        PUT(int64_t, 4294967295ll); PUT(int64_t, -4294967296ll); PUT(int64_t, 3037000500ll);
        PUT(int64_t, 0x5555555555555555ll);
        break;
    case FR_UINT64:
        PUT(uint64_t, 0); PUT(uint64_t, 1); PUT(uint64_t, 2); PUT(uint64_t, 0x7fffffffffffffffull);
        PUT(uint64_t, 0x8000000000000000ull); PUT(uint64_t, UINT64_MAX); PUT(uint64_t, UINT64_MAX - 1);
        PUT(uint64_t, 4294967296ull); PUT(uint64_t, 4294967295ull); PUT(uint64_t, 0xaaaaaaaaaaaaaaaaull);
        break;
    case FR_FLOAT16:
        /* 0, -0, 1, -1, min sub, max sub, min normal, max, inf, -inf, qNaN,
         * sNaN, -NaN, 1+ulp, half ulp of 1 (2^-11), 1.5*2^-11, 0.5, 2,
         * 65504/2, 3, -2^-24, 2048 (ulp 2), 0.1 */
        PUT(uint16_t, 0x0000); PUT(uint16_t, 0x8000); PUT(uint16_t, 0x3c00); PUT(uint16_t, 0xbc00);
        PUT(uint16_t, 0x0001); PUT(uint16_t, 0x03ff); PUT(uint16_t, 0x0400); PUT(uint16_t, 0x7bff);
        PUT(uint16_t, 0x7c00); PUT(uint16_t, 0xfc00); PUT(uint16_t, 0x7e00); PUT(uint16_t, 0x7c01);
        PUT(uint16_t, 0xfe00); PUT(uint16_t, 0x3c01); PUT(uint16_t, 0x1000); PUT(uint16_t, 0x1200);
        PUT(uint16_t, 0x3800); PUT(uint16_t, 0x4000); PUT(uint16_t, 0x77ff); PUT(uint16_t, 0x4200);
        PUT(uint16_t, 0x8001); PUT(uint16_t, 0x6800); PUT(uint16_t, 0x2e66); PUT(uint16_t, 0xfbff);
        break;
    case FR_BFLOAT16:
        PUT(uint16_t, 0x0000); PUT(uint16_t, 0x8000); PUT(uint16_t, 0x3f80); PUT(uint16_t, 0xbf80);
        PUT(uint16_t, 0x0001); PUT(uint16_t, 0x007f); PUT(uint16_t, 0x0080); PUT(uint16_t, 0x7f7f);
        PUT(uint16_t, 0x7f80); PUT(uint16_t, 0xff80); PUT(uint16_t, 0x7fc0); PUT(uint16_t, 0x7f81);
        PUT(uint16_t, 0xffc0); PUT(uint16_t, 0x3f81); PUT(uint16_t, 0x3b80); PUT(uint16_t, 0x3bc0);
        PUT(uint16_t, 0x3f00); PUT(uint16_t, 0x4000); PUT(uint16_t, 0x7eff); PUT(uint16_t, 0x4040);
        PUT(uint16_t, 0x8001); PUT(uint16_t, 0x4380); PUT(uint16_t, 0x3dcd); PUT(uint16_t, 0xff7f);
        break;
    case FR_FLOAT32:
        PUT(uint32_t, 0x00000000u); PUT(uint32_t, 0x80000000u); PUT(uint32_t, 0x3f800000u);
        PUT(uint32_t, 0xbf800000u); PUT(uint32_t, 0x00000001u); PUT(uint32_t, 0x007fffffu);
        PUT(uint32_t, 0x00800000u); PUT(uint32_t, 0x7f7fffffu); PUT(uint32_t, 0x7f800000u);
        PUT(uint32_t, 0xff800000u); PUT(uint32_t, 0x7fc00000u); PUT(uint32_t, 0x7f800001u);
        PUT(uint32_t, 0xffc00000u); PUT(uint32_t, 0x3f800001u); PUT(uint32_t, 0x33800000u);
        PUT(uint32_t, 0x33c00000u); PUT(uint32_t, 0x80000001u); PUT(uint32_t, 0x3dcccccdu);
        PUT(uint32_t, 0x4b800000u); PUT(uint32_t, 0xff7fffffu); PUT(uint32_t, 0x1f800000u);
        break;
    case FR_FLOAT64:
        PUT(uint64_t, 0x0000000000000000ull); PUT(uint64_t, 0x8000000000000000ull);
        PUT(uint64_t, 0x3ff0000000000000ull); PUT(uint64_t, 0xbff0000000000000ull);
        PUT(uint64_t, 0x0000000000000001ull); PUT(uint64_t, 0x000fffffffffffffull);
        PUT(uint64_t, 0x0010000000000000ull); PUT(uint64_t, 0x7fefffffffffffffull);
        PUT(uint64_t, 0x7ff0000000000000ull); PUT(uint64_t, 0xfff0000000000000ull);
        PUT(uint64_t, 0x7ff8000000000000ull); PUT(uint64_t, 0x7ff0000000000001ull);
        PUT(uint64_t, 0xfff8000000000000ull); PUT(uint64_t, 0x3ff0000000000001ull);
        PUT(uint64_t, 0x3ca0000000000000ull); PUT(uint64_t, 0x3ca8000000000000ull);
        PUT(uint64_t, 0x8000000000000001ull); PUT(uint64_t, 0x3fb999999999999aull);
        PUT(uint64_t, 0x2000000000000000ull); PUT(uint64_t, 0xffefffffffffffffull);
        break;
    default:
        break;
    }
#undef PUT
    return n;
}

/* A random element: random bits, or for floats often a small "ordinary"
 * value so that most sums and products are finite and round. */
static void rand_elem(fr_dtype_t dt, void *p)
{
    uint64_t r = rnd();
    size_t sz = fr_dtype_size(dt);
    if ((r & 3) != 0) {
        double v = (double)(int64_t)(rnd() % 20001) / 64.0 - 156.0;
        switch (dt) {
        case FR_FLOAT16: { uint16_t h = ref_round(v, 0, &F16); memcpy(p, &h, 2); return; }
        case FR_BFLOAT16: { uint16_t h = ref_round(v, 0, &BF16); memcpy(p, &h, 2); return; }
        case FR_FLOAT32: { float f = (float)(v * 1.0000001); memcpy(p, &f, 4); return; }
        case FR_FLOAT64: { double d = v * 1.00000000000001; memcpy(p, &d, 8); return; }
        default: break;
        }
    }
    r = rnd();
    memcpy(p, &r, sz);
}

/* a and b of n elements: first every pair of edge values, then random. */
static void fill_pair(fr_dtype_t dt, unsigned char *a, unsigned char *b, size_t n)
{
    unsigned char e[MAX_EDGES * 8];
    size_t ne = edges(dt, e), sz = fr_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        if (i < ne * ne) {
            memcpy(a + i * sz, e + (i / ne) * sz, sz);
            memcpy(b + i * sz, e + (i % ne) * sz, sz);
        } else {
            rand_elem(dt, a + i * sz);
            rand_elem(dt, b + i * sz);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Every dtype x op, fr_reduce and fr_reduce3 with all aliasings             */

static const size_t lengths[] = { 0, 1, 7, 1000, 4099 };
#define GUARD 8                /* elements after the end that must not change */

static void check_result(fr_dtype_t dt, fr_op_t op, const char *what, int mode, size_t off,
                         const unsigned char *a, const unsigned char *b,
                         const unsigned char *got, size_t n)
{
    size_t sz = fr_dtype_size(dt);
    unsigned char exp[8];
    for (size_t i = 0; i < n; i++) {
        int anynan = ref_elem(dt, op, a + i * sz, b + i * sz, exp);
        int ok = anynan ? elem_isnan(dt, got + i * sz) : memcmp(exp, got + i * sz, sz) == 0;
        if (!ok) {
            char sa[32], sb[32], se[32], sg[32];
            elem_str(dt, a + i * sz, sa, sizeof sa);
            elem_str(dt, b + i * sz, sb, sizeof sb);
            elem_str(dt, exp, se, sizeof se);
            elem_str(dt, got + i * sz, sg, sizeof sg);
            cr_assert_fail("%s %s %s (mode %d, n %zu, offset %zu): element %zu: %s op %s = %s, expected %s%s",
                           what, fr_dtype_name(dt), fr_op_name(op), mode, n, off, i, sa, sb, sg, se,
                           anynan ? " (any NaN)" : "");
        }
    }
}

static void run_all_kernels(fr_dtype_t dt)
{
    size_t sz = fr_dtype_size(dt);
    size_t maxn = 4099 + GUARD + 1;
    unsigned char *a = malloc(maxn * sz), *b = malloc(maxn * sz);
    unsigned char *a0 = malloc(maxn * sz), *b0 = malloc(maxn * sz);
    unsigned char *out = malloc(maxn * sz), *guard = malloc(maxn * sz);
    cr_assert(a && b && a0 && b0 && out && guard);
    for (int mode = 0; mode < n_modes(); mode++) {
        set_mode(mode);
        for (int op = 0; op < FR_OP_COUNT; op++) {
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
                for (size_t off = 0; off < 2; off++) {   /* change the vector alignment */
                    size_t n = lengths[li];
                    size_t tot = off + n + GUARD;
                    fill_pair(dt, a0, b0, tot);
                    /* the inputs proper start at off; fill_pair put the
                     * edge pairs first, so shift them to start at off */
                    memmove(a0 + off * sz, a0, (n + GUARD) * sz);
                    memmove(b0 + off * sz, b0, (n + GUARD) * sz);
                    for (size_t i = 0; i < tot * sz; i++)
                        guard[i] = (unsigned char)(0xa5 ^ i);

                    /* out separate */
                    memcpy(a, a0, tot * sz);
                    memcpy(b, b0, tot * sz);
                    memcpy(out, guard, tot * sz);
                    fr_reduce3(out + off * sz, a + off * sz, b + off * sz, n, dt, (fr_op_t)op);
                    check_result(dt, op, "reduce3", mode, off, a0 + off * sz, b0 + off * sz,
                                 out + off * sz, n);
                    cr_assert(memcmp(a, a0, tot * sz) == 0, "reduce3 changed a");
                    cr_assert(memcmp(b, b0, tot * sz) == 0, "reduce3 changed b");
                    cr_assert(memcmp(out, guard, off * sz) == 0, "reduce3 wrote before out");
                    cr_assert(memcmp(out + (off + n) * sz, guard + (off + n) * sz, GUARD * sz) == 0,
                              "reduce3 wrote past out");

                    /* out == a */
                    memcpy(a, a0, tot * sz);
                    fr_reduce3(a + off * sz, a + off * sz, b + off * sz, n, dt, (fr_op_t)op);
                    check_result(dt, op, "reduce3 out==a", mode, off, a0 + off * sz, b0 + off * sz,
                                 a + off * sz, n);
                    cr_assert(memcmp(a + (off + n) * sz, a0 + (off + n) * sz, GUARD * sz) == 0);

                    /* out == b */
                    memcpy(b, b0, tot * sz);
                    fr_reduce3(b + off * sz, a0 + off * sz, b + off * sz, n, dt, (fr_op_t)op);
                    check_result(dt, op, "reduce3 out==b", mode, off, a0 + off * sz, b0 + off * sz,
                                 b + off * sz, n);
                    cr_assert(memcmp(b + (off + n) * sz, b0 + (off + n) * sz, GUARD * sz) == 0);

                    /* in-place fr_reduce */
                    memcpy(a, a0, tot * sz);
                    memcpy(b, b0, tot * sz);
                    fr_reduce(a + off * sz, b + off * sz, n, dt, (fr_op_t)op);
                    check_result(dt, op, "reduce", mode, off, a0 + off * sz, b0 + off * sz,
                                 a + off * sz, n);
                    cr_assert(memcmp(b, b0, tot * sz) == 0, "reduce changed in");
                    cr_assert(memcmp(a + (off + n) * sz, a0 + (off + n) * sz, GUARD * sz) == 0,
                              "reduce wrote past the end");

                    /* a == b == out (x op x) */
                    memcpy(a, a0, tot * sz);
                    fr_reduce3(a + off * sz, a + off * sz, a + off * sz, n, dt, (fr_op_t)op);
                    check_result(dt, op, "reduce3 all same", mode, off, a0 + off * sz,
                                 a0 + off * sz, a + off * sz, n);
                }
            }
        }
    }
    free(a); free(b); free(a0); free(b0); free(out); free(guard);
}

Test(reduce, int8) { run_all_kernels(FR_INT8); }
Test(reduce, uint8) { run_all_kernels(FR_UINT8); }
Test(reduce, int32) { run_all_kernels(FR_INT32); }
Test(reduce, uint32) { run_all_kernels(FR_UINT32); }
Test(reduce, int64) { run_all_kernels(FR_INT64); }
Test(reduce, uint64) { run_all_kernels(FR_UINT64); }
Test(reduce, float16) { run_all_kernels(FR_FLOAT16); }
Test(reduce, bfloat16) { run_all_kernels(FR_BFLOAT16); }
Test(reduce, float32) { run_all_kernels(FR_FLOAT32); }
Test(reduce, float64) { run_all_kernels(FR_FLOAT64); }

/* ------------------------------------------------------------------------ */
/* fr_reduce_fanout: nin inputs reduced into each of nout outputs           */

/* Every output against the reference folded over the inputs in order
 * (NaN where any operand was NaN), and the guard bytes around it. */
static void check_fanout(fr_dtype_t dt, fr_op_t op, const char *what, unsigned char *const *in, int nin,
                         unsigned char *const *out, const unsigned char *const *base, const size_t *off,
                         int nout, size_t n, const unsigned char *guard)
{
    const size_t sz = fr_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        unsigned char acc[8], nxt[8];
        memcpy(acc, in[0] + i * sz, sz);
        int anynan = elem_isnan(dt, acc);
        for (int j = 1; j < nin; j++) {
            anynan |= ref_elem(dt, op, acc, in[j] + i * sz, nxt);
            memcpy(acc, nxt, sz);
        }
        for (int o = 0; o < nout; o++) {
            int ok = anynan ? elem_isnan(dt, out[o] + i * sz) : memcmp(acc, out[o] + i * sz, sz) == 0;
            cr_assert(ok, "%s %s %s, n %zu: output %d, element %zu differs from the reference", what,
                      fr_dtype_name(dt), fr_op_name(op), n, o, i);
        }
    }
    /* the same bits as the element-wise kernels in their order (checked
     * above against the reference); a NaN's payload may differ, since the
     * compiler may swap the operands of a float sum or product */
    unsigned char *chain = malloc(n * sz + 1);
    cr_assert(chain);
    memcpy(chain, in[0], n * sz);
    if (nin > 1) fr_reduce3(chain, in[0], in[1], n, dt, op);
    for (int j = 2; j < nin; j++) fr_reduce(chain, in[j], n, dt, op);
    for (int o = 0; o < nout; o++) {
        for (size_t i = 0; i < n; i++) {
            const unsigned char *c = chain + i * sz, *g = out[o] + i * sz;
            cr_assert(memcmp(c, g, sz) == 0 || (elem_isnan(dt, c) && elem_isnan(dt, g)),
                      "%s %s %s, n %zu: output %d, element %zu is not fr_reduce3/fr_reduce's bits", what,
                      fr_dtype_name(dt), fr_op_name(op), n, o, i);
        }
        cr_assert(memcmp(base[o], guard, off[o] * sz) == 0, "%s: output %d written before its start", what, o);
        cr_assert(memcmp(out[o] + n * sz, guard, GUARD * sz) == 0, "%s: output %d written past its end", what, o);
    }
    free(chain);
}

static void run_fanout(fr_dtype_t dt)
{
    enum { MAXIO = 4 };
    const size_t sz = fr_dtype_size(dt), maxn = 4099 + 64 + GUARD;
    unsigned char *in[MAXIO], *obase[MAXIO], *out[MAXIO], *guard = malloc(maxn * sz);
    cr_assert(guard);
    memset(guard, 0xa5, maxn * sz);
    const size_t alloc = (maxn * sz + 63) / 64 * 64;   /* (aligned_alloc takes whole alignments) */
    for (int k = 0; k < MAXIO; k++) {
        in[k] = aligned_alloc(64, alloc);
        obase[k] = aligned_alloc(64, alloc);
        cr_assert(in[k] && obase[k]);
    }
    for (int mode = 0; mode < n_modes(); mode++) {
        set_mode(mode);
        for (int op = 0; op < FR_OP_COUNT; op++)
            for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
                for (int shape = 0; shape < 4 * 3 * 2 * 3; shape++) {
                    const size_t n = lengths[li];
                    /* 1 to 4 inputs, 1 to 3 outputs, streamed or not; the
                     * outputs at a line's start, at one place in their lines
                     * but not its start, or at different places */
                    const int nin = 1 + shape % 4, nout = 1 + shape / 4 % 3, stream = shape / 12 % 2;
                    const int place = shape / 24;
                    size_t off[MAXIO];
                    for (int o = 0; o < nout; o++) off[o] = place == 0 ? 0 : place == 1 ? 3 : (size_t)o;
                    for (int j = 0; j < nin; j += 2) fill_pair(dt, in[j], in[j + 1], n);
                    for (int o = 0; o < nout; o++) {
                        memcpy(obase[o], guard, maxn * sz);
                        out[o] = obase[o] + off[o] * sz;
                    }
                    fr_reduce_fanout((void *const *)out, nout, (const void *const *)in, nin, n, dt, (fr_op_t)op,
                                     stream);
                    check_fanout(dt, (fr_op_t)op, "fanout", in, nin, out, (const unsigned char *const *)obase, off,
                                 nout, n, guard);
                }
        /* an output that is exactly an input (an in-place rank): two
         * inputs into two outputs streamed, the first input also the first
         * output; three into three in cache (pieces), the last input also
         * the last output. copy[] keeps the inputs for the reference. */
        for (int op = 0; op < FR_OP_COUNT; op++)
            for (int shape = 0; shape < 2; shape++) {
                const size_t n = 4099, offs[3] = { 0, 0, 0 };
                const int nio = 2 + shape, same = shape ? 2 : 0;
                unsigned char *copy[3], *outs[3];
                const void *srcs[3];
                for (int j = 0; j < nio; j++) {
                    memcpy(obase[j], guard, maxn * sz);
                    outs[j] = obase[j];
                    copy[j] = in[j];
                }
                fill_pair(dt, in[0], in[1], n);
                fill_pair(dt, in[2], in[3], n);
                memcpy(obase[same], in[same], n * sz);
                for (int j = 0; j < nio; j++) srcs[j] = j == same ? obase[same] : in[j];
                fr_reduce_fanout((void *const *)outs, nio, srcs, nio, n, dt, (fr_op_t)op, !shape);
                check_fanout(dt, (fr_op_t)op, "fanout in place", copy, nio, outs, (const unsigned char *const *)obase,
                             offs, nio, n, guard);
            }
    }
    for (int k = 0; k < MAXIO; k++) {
        free(in[k]);
        free(obase[k]);
    }
    free(guard);
}

Test(reduce_fanout, int8) { run_fanout(FR_INT8); }
Test(reduce_fanout, uint8) { run_fanout(FR_UINT8); }
Test(reduce_fanout, int32) { run_fanout(FR_INT32); }
Test(reduce_fanout, uint32) { run_fanout(FR_UINT32); }
Test(reduce_fanout, int64) { run_fanout(FR_INT64); }
Test(reduce_fanout, uint64) { run_fanout(FR_UINT64); }
Test(reduce_fanout, float16) { run_fanout(FR_FLOAT16); }
Test(reduce_fanout, bfloat16) { run_fanout(FR_BFLOAT16); }
Test(reduce_fanout, float32) { run_fanout(FR_FLOAT32); }
Test(reduce_fanout, float64) { run_fanout(FR_FLOAT64); }

/* A few hand-computed results, so that the references above are also
 * checked against something written down. */
Test(reduce, known_values)
{
    int8_t i8a[] = { 127, -128, 100, -7 }, i8b[] = { 1, -1, 3, 9 };
    fr_reduce(i8a, i8b, 4, FR_INT8, FR_SUM);
    cr_expect(i8a[0] == -128 && i8a[1] == 127 && i8a[2] == 103 && i8a[3] == 2);
    int8_t p8a[] = { 100, -128, 16 }, p8b[] = { 3, -1, 16 };
    fr_reduce(p8a, p8b, 3, FR_INT8, FR_PROD);
    cr_expect(p8a[0] == 44 && p8a[1] == -128 && p8a[2] == 0);   /* 300-256, wraps, 256 */
    int32_t i32a[] = { INT32_MAX, INT32_MIN }, i32b[] = { 1, -1 };
    fr_reduce(i32a, i32b, 2, FR_INT32, FR_SUM);
    cr_expect(i32a[0] == INT32_MIN && i32a[1] == INT32_MAX);
    int32_t m32a[] = { INT32_MIN, 65536 }, m32b[] = { -1, 65536 };
    fr_reduce(m32a, m32b, 2, FR_INT32, FR_PROD);
    cr_expect(m32a[0] == INT32_MIN && m32a[1] == 0);
    int64_t i64a[] = { INT64_MIN }, i64b[] = { -1 };
    fr_reduce(i64a, i64b, 1, FR_INT64, FR_PROD);
    cr_expect(i64a[0] == INT64_MIN);
    uint8_t u8a[] = { 255, 16 }, u8b[] = { 255, 16 };
    fr_reduce(u8a, u8b, 2, FR_UINT8, FR_PROD);
    cr_expect(u8a[0] == 1 && u8a[1] == 0);
    int32_t mn[] = { -5, 7 }, mx[] = { 3, -9 };
    fr_reduce3(mn, mn, mx, 2, FR_INT32, FR_MIN);
    cr_expect(mn[0] == -5 && mn[1] == -9);
    uint32_t ua[] = { 0x80000000u }, ub[] = { 1 };
    fr_reduce(ua, ub, 1, FR_UINT32, FR_MIN);
    cr_expect(ua[0] == 1);          /* unsigned compare */

    float fa[] = { -0.0f, 0.0f, NAN, 1.0f, 2.0f }, fb[] = { 0.0f, -0.0f, 1.0f, NAN, -3.0f };
    float fmn[5], fmx[5];
    fr_reduce3(fmn, fa, fb, 5, FR_FLOAT32, FR_MIN);
    fr_reduce3(fmx, fa, fb, 5, FR_FLOAT32, FR_MAX);
    cr_expect(fbits(fmn[0]) == 0x80000000u && fbits(fmn[1]) == 0x80000000u);
    cr_expect(fbits(fmx[0]) == 0 && fbits(fmx[1]) == 0);
    cr_expect(fbits(fmn[2]) == 0x7fc00000u && fbits(fmn[3]) == 0x7fc00000u);
    cr_expect(fbits(fmx[2]) == 0x7fc00000u && fbits(fmx[3]) == 0x7fc00000u);
    cr_expect(fmn[4] == -3.0f && fmx[4] == 2.0f);
    double da[] = { -0.0, NAN }, db[] = { 0.0, -1.0 }, dmn[2];
    fr_reduce3(dmn, da, db, 2, FR_FLOAT64, FR_MIN);
    cr_expect(dbits(dmn[0]) == 0x8000000000000000ull && dbits(dmn[1]) == 0x7ff8000000000000ull);

    /* float16: 1 + 2^-11 is a tie, to even (1); 1+ulp + 2^-11 ties up */
    uint16_t ha[] = { 0x3c00, 0x3c01, 0x7bff, 0x0001, 0x7bff }, hb[] = { 0x1000, 0x1000, 0x7bff, 0x3800, 0x5000 };
    uint16_t hs[5];
    fr_reduce3(hs, ha, hb, 5, FR_FLOAT16, FR_SUM);
    cr_expect(hs[0] == 0x3c00 && hs[1] == 0x3c02 && hs[2] == 0x7c00, "%04x %04x %04x", hs[0], hs[1], hs[2]);
    fr_reduce3(hs, ha, hb, 5, FR_FLOAT16, FR_PROD);
    /* 2^-24 * 0.5 = 2^-25: a tie between 0 and the smallest subnormal -> 0;
     * 65504 * 32 overflows */
    cr_expect(hs[3] == 0x0000 && hs[4] == 0x7c00, "%04x %04x", hs[3], hs[4]);
    uint16_t ba[] = { 0x3f80, 0x3f81 }, bb[] = { 0x3b80, 0x3b80 }, bs[2];
    fr_reduce3(bs, ba, bb, 2, FR_BFLOAT16, FR_SUM);
    cr_expect(bs[0] == 0x3f80 && bs[1] == 0x3f82, "%04x %04x", bs[0], bs[1]);
}

Test(reduce, unknown_dtype_or_op_does_nothing)
{
    int32_t a[4] = { 1, 2, 3, 4 }, b[4] = { 5, 6, 7, 8 };
    fr_reduce(a, b, 4, FR_DTYPE_COUNT, FR_SUM);
    fr_reduce(a, b, 4, FR_INT32, FR_OP_COUNT);
    fr_reduce(a, b, 4, (fr_dtype_t)-1, FR_SUM);
    fr_reduce3(a, a, b, 4, FR_INT32, (fr_op_t)-1);
    cr_expect(a[0] == 1 && a[1] == 2 && a[2] == 3 && a[3] == 4);
    fr_reduce(NULL, NULL, 0, FR_FLOAT32, FR_SUM);     /* count 0: no access */
    fr_reduce3(NULL, NULL, NULL, 0, FR_FLOAT64, FR_MAX);
    fr_avg_finish(NULL, 0, FR_FLOAT32, FR_AVG, 4);
}

/* ------------------------------------------------------------------------ */
/* Exhaustive 16-bit tests: every a against ~300 chosen b                    */

static size_t choose_b(const hfmt_t *f, fr_dtype_t dt, uint16_t *bs, size_t want)
{
    unsigned char e[MAX_EDGES * 8];
    size_t n = edges(dt, e);
    memcpy(bs, e, n * 2);
    /* values whose sums with many a are ties: powers of two around the
     * half ulp of common magnitudes, and their neighbours */
    for (int k = -30; k <= 20 && n < want; k += 1) {
        double v = ldexp(1.0, k);
        uint16_t h = ref_round(v, 0, f);
        bs[n++] = h;
        if (n < want) bs[n++] = (uint16_t)(h + 1);
        if (n < want) bs[n++] = (uint16_t)(h ^ 0x8000u);
    }
    uint64_t saved = rng_state;
    rng_state = 0x1234567887654321ull;
    while (n < want)
        bs[n++] = (uint16_t)rnd();
    rng_state = saved;
    return n;
}

static void exhaustive16(const hfmt_t *f, fr_dtype_t dt, fr_op_t op)
{
    enum { N = 65536 };
    uint16_t *A = malloc(N * 2), *B = malloc(N * 2), *O3 = malloc(N * 2), *OI = malloc(N * 2);
    uint16_t *exp = malloc(N * 2);
    unsigned char *anynan = malloc(N);
    uint16_t bs[320];
    size_t nb = choose_b(f, dt, bs, 300);
    cr_assert(A && B && O3 && OI && exp && anynan);
    for (size_t i = 0; i < N; i++)
        A[i] = (uint16_t)i;
    for (size_t j = 0; j < nb; j++) {
        for (size_t i = 0; i < N; i++) {
            int an;
            B[i] = bs[j];
            exp[i] = ref_h_op(A[i], bs[j], op, f, &an);
            anynan[i] = (unsigned char)an;
        }
        for (int mode = 0; mode < n_modes(); mode++) {
            set_mode(mode);
            fr_reduce3(O3, A, B, N, dt, op);
            memcpy(OI, A, N * 2);
            fr_reduce(OI, B, N, dt, op);
            for (size_t i = 0; i < N; i++) {
                uint16_t g3 = O3[i], gi = OI[i];
                int ok3 = anynan[i] ? h_isnan_ref(g3, f) : g3 == exp[i];
                int oki = anynan[i] ? h_isnan_ref(gi, f) : gi == exp[i];
                if (!ok3 || !oki)
                    cr_assert_fail("%s %s mode %d: 0x%04zx op 0x%04x = 0x%04x / 0x%04x (reduce3 / "
                                   "reduce), expected 0x%04x%s", fr_dtype_name(dt), fr_op_name(op),
                                   mode, i, bs[j], g3, gi, exp[i], anynan[i] ? " (any NaN)" : "");
            }
        }
    }
    free(A); free(B); free(O3); free(OI); free(exp); free(anynan);
}

Test(exhaustive, float16_sum) { exhaustive16(&F16, FR_FLOAT16, FR_SUM); }
Test(exhaustive, float16_prod) { exhaustive16(&F16, FR_FLOAT16, FR_PROD); }
Test(exhaustive, float16_min) { exhaustive16(&F16, FR_FLOAT16, FR_MIN); }
Test(exhaustive, float16_max) { exhaustive16(&F16, FR_FLOAT16, FR_MAX); }
Test(exhaustive, bfloat16_sum) { exhaustive16(&BF16, FR_BFLOAT16, FR_SUM); }
Test(exhaustive, bfloat16_prod) { exhaustive16(&BF16, FR_BFLOAT16, FR_PROD); }
Test(exhaustive, bfloat16_min) { exhaustive16(&BF16, FR_BFLOAT16, FR_MIN); }
Test(exhaustive, bfloat16_max) { exhaustive16(&BF16, FR_BFLOAT16, FR_MAX); }

/* ------------------------------------------------------------------------ */
/* Conversions                                                               */

static void roundtrip16(const hfmt_t *f, float (*to32)(uint16_t), uint16_t (*from32)(float))
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float v = to32(h);
        if (h_isnan_ref(h, f)) {
            cr_assert(isnan(v), "0x%04x: not NaN", h);
            cr_assert((fbits(v) & 0x00400000u) != 0, "0x%04x: NaN not quiet (0x%08x)", h, fbits(v));
            cr_assert(((fbits(v) >> 31) != 0) == ((h >> 15) != 0), "0x%04x: NaN sign lost", h);
            uint16_t back = from32(v);
            cr_assert(h_isnan_ref(back, f), "0x%04x: NaN back to 0x%04x", h, back);
            cr_assert((back & 0x8000u) == (h & 0x8000u), "0x%04x: NaN sign lost on the way back", h);
            cr_assert((back & (1u << (f->mbits - 1))) != 0, "0x%04x: NaN back not quiet", h);
            continue;
        }
        double want = ref_decode(h, f);
        cr_assert((double)v == want && !signbit(v) == !signbit(want),
                  "0x%04x -> %a, expected %a", h, (double)v, want);
        uint16_t back = from32(v);
        cr_assert(back == h, "0x%04x -> %a -> 0x%04x", h, (double)v, back);
    }
}

Test(convert, float16_roundtrip) { roundtrip16(&F16, fr_f16_to_f32, fr_f32_to_f16); }
Test(convert, bfloat16_roundtrip) { roundtrip16(&BF16, fr_bf16_to_f32, fr_f32_to_bf16); }

/* Every float with a stride (about 4 million values), every midpoint
 * between neighbouring 16-bit values and its float neighbours. */
static void from32_sweep(const hfmt_t *f, uint16_t (*from32)(float))
{
    for (uint64_t u = 0; u <= 0xffffffffull; u += 1021) {
        float x = bitsf((uint32_t)u);
        uint16_t got = from32(x);
        if (isnan(x)) {
            cr_assert(h_isnan_ref(got, f), "NaN 0x%08x -> 0x%04x", (uint32_t)u, got);
            continue;
        }
        uint16_t want = ref_round((double)x, 0, f);
        cr_assert(got == want, "0x%08x (%a) -> 0x%04x, expected 0x%04x", (uint32_t)u, (double)x, got, want);
    }
    uint16_t top = h_inf(f);
    for (uint32_t h = 0; h < top; h++) {
        double lo = ref_decode((uint16_t)h, f);
        double hi = (h + 1 == top) ? ldexp(1.0, f->bias + 1) : ref_decode((uint16_t)(h + 1), f);
        double mid = (lo + hi) / 2;       /* exact in double */
        float fm = (float)mid;
        cr_assert((double)fm == mid, "midpoint not a float");
        for (int s = 0; s < 2; s++) {
            float xm = s ? -fm : fm;
            uint16_t sign = s ? 0x8000u : 0u;
            /* tie: to the even one (for the last, the even one is "2^(emax+1)" = inf) */
            uint16_t even = (h & 1u) ? (uint16_t)(h + 1) : (uint16_t)h;
            cr_assert(from32(xm) == (sign | even), "tie %a -> 0x%04x, expected 0x%04x",
                      (double)xm, from32(xm), sign | even);
            float below = nextafterf(xm, 0.0f), above = nextafterf(xm, s ? -INFINITY : INFINITY);
            cr_assert(from32(below) == (sign | h), "below tie %a -> 0x%04x", (double)below, from32(below));
            cr_assert(from32(above) == (sign | (h + 1)), "above tie %a -> 0x%04x", (double)above,
                      from32(above));
        }
    }
}

Test(convert, float16_from_float) { from32_sweep(&F16, fr_f32_to_f16); }
Test(convert, bfloat16_from_float) { from32_sweep(&BF16, fr_f32_to_bf16); }

Test(convert, float16_cases)
{
    cr_expect(fr_f32_to_f16(65504.0f) == 0x7bff);
    cr_expect(fr_f32_to_f16(65519.99f) == 0x7bff);
    cr_expect(fr_f32_to_f16(65520.0f) == 0x7c00);     /* tie above the largest: inf */
    cr_expect(fr_f32_to_f16(-65520.0f) == 0xfc00);
    cr_expect(fr_f32_to_f16(1e10f) == 0x7c00);
    cr_expect(fr_f32_to_f16(FLT_MAX) == 0x7c00);
    cr_expect(fr_f32_to_f16(INFINITY) == 0x7c00);
    cr_expect(fr_f32_to_f16(-INFINITY) == 0xfc00);
    cr_expect(fr_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001);
    cr_expect(fr_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000);            /* tie to even 0 */
    cr_expect(fr_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)) == 0x0001);
    cr_expect(fr_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002);            /* tie 1|2 -> 2 */
    cr_expect(fr_f32_to_f16(ldexpf(5.0f, -25)) == 0x0002);            /* tie 2|3 -> 2 */
    cr_expect(fr_f32_to_f16(ldexpf(1.0f, -14) - ldexpf(1.0f, -25)) == 0x0400);  /* tie 3ff|400 */
    cr_expect(fr_f32_to_f16(ldexpf(1.0f, -26)) == 0x0000);
    cr_expect(fr_f32_to_f16(-ldexpf(1.0f, -26)) == 0x8000);
    cr_expect(fr_f32_to_f16(bitsf(0x00000001u)) == 0x0000);           /* float subnormal */
    cr_expect(fr_f32_to_f16(bitsf(0x80400000u)) == 0x8000);
    cr_expect(fr_f32_to_f16(-0.0f) == 0x8000);
    cr_expect(fr_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00);     /* tie to even */
    cr_expect(fr_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02);
    uint16_t n1 = fr_f32_to_f16(bitsf(0x7f800001u));                  /* sNaN, low payload */
    cr_expect((n1 & 0x7fffu) > 0x7c00u && (n1 & 0x0200u), "0x%04x", n1);
    uint16_t n2 = fr_f32_to_f16(bitsf(0xffc00000u));
    cr_expect(n2 == 0xfe00, "0x%04x", n2);
    cr_expect(fbits(fr_f16_to_f32(0x7c01)) == 0x7fc02000u, "0x%08x", fbits(fr_f16_to_f32(0x7c01)));
}

Test(convert, bfloat16_cases)
{
    cr_expect(fr_f32_to_bf16(bitsf(0x3f808000u)) == 0x3f80);   /* tie to even */
    cr_expect(fr_f32_to_bf16(bitsf(0x3f818000u)) == 0x3f82);
    cr_expect(fr_f32_to_bf16(bitsf(0x3f808001u)) == 0x3f81);
    cr_expect(fr_f32_to_bf16(bitsf(0x7f7f7fffu)) == 0x7f7f);
    cr_expect(fr_f32_to_bf16(bitsf(0x7f7f8000u)) == 0x7f80);   /* tie above the largest: inf */
    cr_expect(fr_f32_to_bf16(FLT_MAX) == 0x7f80);
    cr_expect(fr_f32_to_bf16(-INFINITY) == 0xff80);
    cr_expect(fr_f32_to_bf16(bitsf(0x00008000u)) == 0x0000);   /* subnormal tie to even */
    cr_expect(fr_f32_to_bf16(bitsf(0x00018000u)) == 0x0002);
    cr_expect(fr_f32_to_bf16(bitsf(0x007fffffu)) == 0x0080);   /* rounds up to the smallest normal */
    cr_expect(fr_f32_to_bf16(bitsf(0x80000001u)) == 0x8000);
    uint16_t n1 = fr_f32_to_bf16(bitsf(0x7f800001u));          /* sNaN must not become inf */
    cr_expect((n1 & 0x7fffu) > 0x7f80u && (n1 & 0x0040u), "0x%04x", n1);
    uint16_t n2 = fr_f32_to_bf16(bitsf(0xff800001u));
    cr_expect((n2 & 0x8000u) && (n2 & 0x7fffu) > 0x7f80u, "0x%04x", n2);
    cr_expect(fbits(fr_bf16_to_f32(0x7f81)) == 0x7fc10000u, "0x%08x", fbits(fr_bf16_to_f32(0x7f81)));
    cr_expect(fbits(fr_bf16_to_f32(0x3f80)) == 0x3f800000u);
}

/* ------------------------------------------------------------------------ */
/* fr_avg_finish                                                             */

Test(avg, integers_truncate_toward_zero)
{
    int8_t i8[] = { -7, 7, -128, 127, -1, 1, 0 };
    fr_avg_finish(i8, 7, FR_INT8, FR_AVG, 2);
    cr_expect(i8[0] == -3 && i8[1] == 3 && i8[2] == -64 && i8[3] == 63 && i8[4] == 0 && i8[5] == 0 &&
              i8[6] == 0, "%d %d %d %d %d %d", i8[0], i8[1], i8[2], i8[3], i8[4], i8[5]);
    uint8_t u8[] = { 255, 5, 1 };
    fr_avg_finish(u8, 3, FR_UINT8, FR_AVG, 2);
    cr_expect(u8[0] == 127 && u8[1] == 2 && u8[2] == 0);
    int32_t i32[] = { INT32_MIN, INT32_MAX, -10, 10, -2 };
    fr_avg_finish(i32, 5, FR_INT32, FR_AVG, 3);
    cr_expect(i32[0] == -715827882 && i32[1] == 715827882 && i32[2] == -3 && i32[3] == 3 && i32[4] == 0);
    uint32_t u32[] = { 0xffffffffu, 0x80000000u };
    fr_avg_finish(u32, 2, FR_UINT32, FR_AVG, 3);
    cr_expect(u32[0] == 0x55555555u && u32[1] == 0x2aaaaaaau, "%x %x", u32[0], u32[1]);
    int64_t i64[] = { INT64_MIN, INT64_MAX, -9 };
    fr_avg_finish(i64, 3, FR_INT64, FR_AVG, 2);
    cr_expect(i64[0] == INT64_MIN / 2 && i64[1] == INT64_MAX / 2 && i64[2] == -4);
    uint64_t u64[] = { UINT64_MAX };
    fr_avg_finish(u64, 1, FR_UINT64, FR_AVG, 7);
    cr_expect(u64[0] == UINT64_MAX / 7);

    /* a sweep against a reference through |x| / n with the sign restored */
    for (int n = 2; n <= 9; n++) {
        int32_t v[2000], w[2000];
        for (int i = 0; i < 2000; i++)
            v[i] = w[i] = (int32_t)(uint32_t)rnd();
        fr_avg_finish(v, 2000, FR_INT32, FR_AVG, n);
        for (int i = 0; i < 2000; i++) {
            int64_t x = w[i], q = (x < 0 ? -x : x) / n;
            cr_assert(v[i] == (x < 0 ? -q : q));
        }
    }
}

Test(avg, only_for_avg_and_positive_ranks)
{
    int32_t a[] = { 10, -10 };
    fr_avg_finish(a, 2, FR_INT32, FR_SUM, 2);
    fr_avg_finish(a, 2, FR_INT32, FR_MAX, 2);
    fr_avg_finish(a, 2, FR_INT32, FR_AVG, 1);
    fr_avg_finish(a, 2, FR_INT32, FR_AVG, 0);
    fr_avg_finish(a, 2, FR_INT32, FR_AVG, -3);
    fr_avg_finish(a, 2, FR_DTYPE_COUNT, FR_AVG, 2);
    cr_expect(a[0] == 10 && a[1] == -10);
}

Test(avg, floats)
{
    float f[] = { 1.0f, -1.0f, 16777215.0f, FLT_MAX, -0.0f, INFINITY, bitsf(0x00000003u) };
    float f0[7];
    memcpy(f0, f, sizeof f);
    fr_avg_finish(f, 7, FR_FLOAT32, FR_AVG, 3);
    for (int i = 0; i < 7; i++) {
        float want = (float)((double)f0[i] / 3.0);
        cr_expect(fbits(f[i]) == fbits(want), "%d: %a vs %a", i, (double)f[i], (double)want);
    }
    cr_expect(f[0] == 1.0f / 3.0f);
    float nanv[] = { NAN };
    fr_avg_finish(nanv, 1, FR_FLOAT32, FR_AVG, 4);
    cr_expect(isnan(nanv[0]));

    double d[] = { 1.0, -7.0, DBL_MAX, 0x1p-1074, -0.0 };
    double d0[5];
    memcpy(d0, d, sizeof d);
    fr_avg_finish(d, 5, FR_FLOAT64, FR_AVG, 7);
    for (int i = 0; i < 5; i++) {
        volatile double want = d0[i] / 7.0;
        cr_expect(dbits(d[i]) == dbits(want), "%d", i);
    }

    /* every float16 and bfloat16 value, divided by several rank counts,
     * against the double quotient rounded once by the reference */
    static const int ns[] = { 2, 3, 5, 6, 7, 12, 100, 1000 };
    const hfmt_t *fmts[] = { &F16, &BF16 };
    const fr_dtype_t dts[] = { FR_FLOAT16, FR_BFLOAT16 };
    uint16_t *h = malloc(65536 * 2);
    cr_assert(h);
    for (int t = 0; t < 2; t++) {
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            for (uint32_t i = 0; i < 65536; i++)
                h[i] = (uint16_t)i;
            fr_avg_finish(h, 65536, dts[t], FR_AVG, ns[k]);
            for (uint32_t i = 0; i < 65536; i++) {
                if (h_isnan_ref((uint16_t)i, fmts[t])) {
                    cr_assert(h_isnan_ref(h[i], fmts[t]));
                    continue;
                }
                /* the double quotient: 53 >= 2p+2, so rounding it once
                 * more is the correctly rounded quotient */
                uint16_t want = ref_round(ref_decode((uint16_t)i, fmts[t]) / ns[k], 0, fmts[t]);
                cr_assert(h[i] == want, "%s 0x%04x / %d = 0x%04x, expected 0x%04x",
                          fr_dtype_name(dts[t]), i, ns[k], h[i], want);
            }
        }
    }
    free(h);
}

/* ------------------------------------------------------------------------ */
/* Names, sizes, support                                                     */

Test(names, dtypes_and_ops)
{
    static const char *const dn[] = { "int8", "uint8", "int32", "uint32", "int64", "uint64",
                                       "float16", "bfloat16", "float32", "float64" };
    static const size_t ds[] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
    static const char *const on[] = { "sum", "prod", "min", "max", "avg" };
    cr_assert(sizeof dn / sizeof dn[0] == FR_DTYPE_COUNT);
    cr_assert(sizeof on / sizeof on[0] == FR_OP_COUNT);
    for (int d = 0; d < FR_DTYPE_COUNT; d++) {
        cr_expect_str_eq(fr_dtype_name((fr_dtype_t)d), dn[d]);
        cr_expect(fr_dtype_size((fr_dtype_t)d) == ds[d], "%s", dn[d]);
        for (int o = 0; o < FR_OP_COUNT; o++)
            cr_expect(fr_op_supported((fr_dtype_t)d, (fr_op_t)o) == 1, "%s %s", dn[d], on[o]);
        cr_expect(fr_op_supported((fr_dtype_t)d, FR_OP_COUNT) == 0);
        cr_expect(fr_op_supported((fr_dtype_t)d, (fr_op_t)-1) == 0);
    }
    for (int o = 0; o < FR_OP_COUNT; o++) {
        cr_expect_str_eq(fr_op_name((fr_op_t)o), on[o]);
        cr_expect(fr_op_supported(FR_DTYPE_COUNT, (fr_op_t)o) == 0);
        cr_expect(fr_op_supported((fr_dtype_t)-1, (fr_op_t)o) == 0);
    }
    cr_expect_str_eq(fr_dtype_name(FR_DTYPE_COUNT), "?");
    cr_expect_str_eq(fr_dtype_name((fr_dtype_t)-1), "?");
    cr_expect_str_eq(fr_dtype_name((fr_dtype_t)1000), "?");
    cr_expect_str_eq(fr_op_name(FR_OP_COUNT), "?");
    cr_expect_str_eq(fr_op_name((fr_op_t)-1), "?");
    cr_expect(fr_dtype_size(FR_DTYPE_COUNT) == 0);
    cr_expect(fr_dtype_size((fr_dtype_t)-1) == 0);
}

/* ------------------------------------------------------------------------ */
/* Bulk copies (lib/copy.c)                                                  */

/* Both copies, every length around their vector steps and the streaming
 * copy's 4 KiB cut-over, every misalignment of source and destination:
 * the bytes arrive, and not one byte around the destination changes. */
Test(copy, plain_and_streaming_move_exactly_the_bytes)
{
    static const size_t lens[] = { 0, 1, 15, 16, 17, 31, 32, 63, 64, 65, 127, 128, 129, 4095, 4096, 4097,
                                   4160, 65536 + 13 };
    const size_t pad = 64, cap = 65536 + 13 + 2 * pad + 16;
    unsigned char *src = malloc(cap), *dst = malloc(cap);
    cr_assert(src && dst);
    for (size_t i = 0; i < cap; i++) src[i] = (unsigned char)(i * 131u + 7u);
    fr_copy_fn fns[2] = { fr_copy, fr_copy_stream };
    for (int f = 0; f < 2; f++)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (size_t so = 0; so < 4; so++)
                for (size_t d = 0; d < 4; d++) {
                    size_t n = lens[k], doff = pad + d * 5;   /* 0, 5, 10, 15 bytes off a line */
                    memset(dst, 0xA5, cap);
                    fns[f](dst + doff, src + so, n);
                    cr_assert(memcmp(dst + doff, src + so, n) == 0, "%s: %zu bytes, src +%zu, dst +%zu",
                              f ? "fr_copy_stream" : "fr_copy", n, so, doff);
                    for (size_t i = 0; i < cap; i++)
                        if (i < doff || i >= doff + n)
                            cr_assert(dst[i] == 0xA5, "%s: %zu bytes, src +%zu, dst +%zu: byte %zu changed",
                                      f ? "fr_copy_stream" : "fr_copy", n, so, doff, i);
                }
    free(src);
    free(dst);
}

/* A rank streams results from its share of the last-level caches, 1 MiB at
 * least, 8 MiB when the share is unknown (0). */
Test(copy, stream_threshold)
{
    const size_t M = (size_t)1 << 20;
    cr_expect(fr_stream_min(0) == 8 * M);
    cr_expect(fr_stream_min(1) == M);
    cr_expect(fr_stream_min(M / 2) == M);
    cr_expect(fr_stream_min(M) == M);
    cr_expect(fr_stream_min(16 * M) == 16 * M);
    cr_expect(fr_stream_min(22369621) == 22369621);   /* 64 MiB over 3 ranks */
    cr_expect(fr_copy_for(16 * M - 1, 16 * M) == fr_copy);
    cr_expect(fr_copy_for(16 * M, 16 * M) == fr_copy_stream);
    cr_expect(fr_copy_for(0, M) == fr_copy);
}

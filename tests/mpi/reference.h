/* The inputs of the collective tests and their expected results, computed
 * on every rank from the formula of every rank's input (never with MPI or
 * the library): integers wrap, floats are small integers or products of
 * powers of two that stay inside the type's exact range, so every order of
 * summation is exact. Shared by mpi/test_coll and gpu/test_device. */
#ifndef FR_TEST_REFERENCE_H
#define FR_TEST_REFERENCE_H

#include <math.h>
#include "testutil.h"

static inline uint64_t mask_of(int bits) { return bits == 64 ? ~0ull : ((1ull << bits) - 1); }
static inline int64_t sext(uint64_t v, int bits)
{
    return bits == 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/* Integer input of rank r, element i (the low bits of the result). */
static inline uint64_t gen_int(fr_dtype_t dt, fr_op_t op, int r, size_t i, uint64_t salt, int np)
{
    int bits = tu_bits(dt);
    uint64_t h = tu_hash3(salt, (uint64_t)r, i), v = h;
    switch (op) {
    case FR_PROD:
        if (i % 3 == 0) {              /* small factors: products that do not wrap in 32 bits */
            v = (h % 7) + 1;
            if (tu_is_signed(dt) && ((h >> 20) & 1)) v = (uint64_t)-(int64_t)v;
        }
        break;
    case FR_MIN:
    case FR_MAX:
        if (i % 7 == 3 && (size_t)r == (i / 7) % (size_t)np) {  /* the type's extreme value */
            if (tu_is_signed(dt))
                v = op == FR_MIN ? 1ull << (bits - 1) : mask_of(bits - 1);
            else
                v = op == FR_MIN ? 0 : ~0ull;
        }
        break;
    default:
        break;
    }
    return v & mask_of(bits);
}

/* Float input of rank r, element i: exactly representable in the type. */
static inline double gen_flt(fr_dtype_t dt, fr_op_t op, int r, size_t i, uint64_t salt)
{
    uint64_t h = tu_hash3(salt, (uint64_t)r, i);
    switch (op) {
    case FR_SUM:
    case FR_AVG:   /* sum of |inputs| stays inside the exact integer range (in units) */
        switch (dt) {
        case FR_FLOAT64: return ldexp((double)((int64_t)(h % (1ull << 30)) - (1ll << 29)), -20);
        case FR_FLOAT32: return ldexp((double)((int64_t)(h % (1ull << 20)) - (1ll << 19)), -8);
        case FR_FLOAT16: return 0.5 * (double)((int64_t)(h % 601) - 300);   /* |sum| <= 900, 1800 halves */
        default:         return (double)((int64_t)(h % 85) - 42);           /* bf16: |sum| <= 252 */
        }
    case FR_PROD: {  /* +-2^k, times 3 on at most 2 ranks: every partial product is exact */
        int K = dt == FR_FLOAT64 ? 150 : dt == FR_FLOAT32 ? 20 : dt == FR_BFLOAT16 ? 10 : 2;
        int k = (int)(h % (uint64_t)(2 * K + 1)) - K;
        double m = ((size_t)r + i) % 3 == 0 ? 3.0 : 1.0;
        return ((h >> 40) & 1 ? -m : m) * ldexp(1.0, k);
    }
    default:         /* min / max: any representable value */
        switch (dt) {
        case FR_FLOAT64: return ldexp((double)((int64_t)(h % (1ull << 40)) - (1ll << 39)), -16);
        case FR_FLOAT32: return ldexp((double)((int64_t)(h % (1ull << 24)) - (1ll << 23)), -6);
        case FR_FLOAT16: return 0.5 * (double)((int64_t)(h % 2001) - 1000);
        default:         return (double)((int64_t)(h % 511) - 255);
        }
    }
}

static inline void store_int(unsigned char *buf, size_t i, fr_dtype_t dt, uint64_t v)
{
    switch (tu_dtype_sizes[dt]) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(buf + i, &x, 1); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(buf + 4 * i, &x, 4); break; }
    default: memcpy(buf + 8 * i, &v, 8); break;
    }
}

static inline void store_flt(unsigned char *buf, size_t i, fr_dtype_t dt, double v)
{
    switch (dt) {
    case FR_FLOAT64: memcpy(buf + 8 * i, &v, 8); break;
    case FR_FLOAT32: { float f = (float)v; memcpy(buf + 4 * i, &f, 4); break; }
    case FR_FLOAT16: { uint16_t h = tu_to_f16(v); memcpy(buf + 2 * i, &h, 2); break; }
    default:         { uint16_t h = tu_to_bf16(v); memcpy(buf + 2 * i, &h, 2); break; }
    }
}

/* This rank's input and the expected result of the case. */
TU_FN void make_case(fr_dtype_t dt, fr_op_t op, size_t count, uint64_t salt, int np, int me,
                     unsigned char *input, unsigned char *expect)
{
    int bits = tu_bits(dt), sgn = tu_is_signed(dt);
    if (!tu_is_float(dt)) {
        for (size_t i = 0; i < count; i++) {
            uint64_t acc = 0;
            for (int r = 0; r < np; r++) {
                uint64_t v = gen_int(dt, op, r, i, salt, np);
                if (r == me) store_int(input, i, dt, v);
                if (r == 0) { acc = v; continue; }
                switch (op) {
                case FR_SUM: case FR_AVG: acc += v; break;
                case FR_PROD: acc *= v; break;
                case FR_MIN: if (sgn ? sext(v, bits) < sext(acc, bits) : v < acc) acc = v; break;
                default:     if (sgn ? sext(v, bits) > sext(acc, bits) : v > acc) acc = v; break;
                }
                acc &= mask_of(bits);
            }
            acc &= mask_of(bits);
            if (op == FR_AVG)  /* C division of the wrapped sum, truncating toward zero */
                acc = sgn ? (uint64_t)(sext(acc, bits) / (int64_t)np) : acc / (uint64_t)np;
            store_int(expect, i, dt, acc);
        }
    } else {
        for (size_t i = 0; i < count; i++) {
            double acc = 0;
            for (int r = 0; r < np; r++) {
                double v = gen_flt(dt, op, r, i, salt);
                if (r == me) store_flt(input, i, dt, v);
                if (r == 0) { acc = v; continue; }
                switch (op) {
                case FR_SUM: case FR_AVG: acc += v; break;   /* exact by construction */
                case FR_PROD: acc *= v; break;
                case FR_MIN: if (v < acc) acc = v; break;
                default:     if (v > acc) acc = v; break;
                }
            }
            if (op == FR_AVG) acc = acc / np;  /* the exact sum over np, rounded once below */
            store_flt(expect, i, dt, acc);
        }
    }
}

/* ---- checks of a result, shared by the programs that use these inputs ---- */

/* A failure of the current test when a guard byte around [p, p+nb) changed. */
TU_FN void check_guards(const char *what, const unsigned char *p, size_t nb)
{
    long where = 0;
    if (!tu_guard_ok(p, nb, &where))
        tu_fail("%s guard byte written at offset %ld (buffer is %zu bytes): 0x%02x", what, where, nb,
                p[where]);
}

/* A failure of the current test naming the first element of @p got that
 * differs from @p exp, and how many do. */
TU_FN void check_equal(const char *what, const unsigned char *got, const unsigned char *exp,
                       size_t count, fr_dtype_t dt)
{
    size_t nbad, i = tu_first_diff(got, exp, count, tu_dtype_sizes[dt], &nbad);
    if (i == count) return;
    char g[96], e[96];
    tu_format_elem(g, sizeof g, got, i, dt);
    tu_format_elem(e, sizeof e, exp, i, dt);
    tu_fail("%s: first bad index %zu: got %s expected %s (%zu of %zu elements wrong)", what, i, g, e,
            nbad, count);
}

/* @p nb bytes of a pattern of @p salt (a bcast's data). */
TU_FN void fill_pattern(unsigned char *p, size_t nb, uint64_t salt)
{
    size_t j = 0;
    for (; j + 8 <= nb; j += 8) { uint64_t w = tu_hash3(salt, j, 5); memcpy(p + j, &w, 8); }
    if (j < nb) { uint64_t w = tu_hash3(salt, j, 5); memcpy(p + j, &w, nb - j); }
}

#endif

/* Datatypes and reduction kernels (host memory). */
#ifndef FR_REDUCE_H
#define FR_REDUCE_H

#include <stdint.h>
#include <stddef.h>
#include "fastreduce.h"

/* 1 if @p op is defined for @p dtype, else 0. Unknown values give 0. */
int fr_op_supported(fr_dtype_t dtype, fr_op_t op);

/* inout[i] = inout[i] OP in[i] for i < count. FR_AVG reduces as FR_SUM;
 * the caller divides once at the end with fr_avg_finish(). */
void fr_reduce(void *inout, const void *in, size_t count, fr_dtype_t dtype, fr_op_t op);

/* out[i] = a[i] OP b[i]; out may equal a or b. */
void fr_reduce3(void *out, const void *a, const void *b, size_t count,
                fr_dtype_t dtype, fr_op_t op);

/* The reduction of @p nin inputs written to each of @p nout outputs, in
 * one pass: out[o][i] = (in[0][i] OP in[1][i]) OP in[2][i] ... (the
 * operands in fr_reduce3's and then fr_reduce's order, so the bits are
 * theirs). With @p stream the outputs are written with non-temporal stores
 * where their alignment allows: for results too large to stay in cache. The
 * outputs may not overlap the inputs, except that an output may be exactly
 * an input. */
void fr_reduce_fanout(void *const *out, int nout, const void *const *in, int nin, size_t count,
                      fr_dtype_t dtype, fr_op_t op, int stream);

/* buf[i] /= nranks (integers: truncating C division; floats: the exact
 * quotient rounded once to the type). Does nothing unless op is FR_AVG. */
void fr_avg_finish(void *buf, size_t count, fr_dtype_t dtype, fr_op_t op, int nranks);

/* float16 / bfloat16 conversions: to float is exact; from float rounds to
 * nearest, ties to even, with subnormals, infinities and NaN (quiet). */
float fr_f16_to_f32(uint16_t h);
uint16_t fr_f32_to_f16(float f);
float fr_bf16_to_f32(uint16_t h);
uint16_t fr_f32_to_bf16(float f);

/* Test hook: nonzero makes the kernels use the portable (non-AVX2) versions;
 * returns the previous setting. */
int fr_reduce_force_portable(int on);

#endif

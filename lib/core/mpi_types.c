/* fastreduce's datatypes and ops as MPI handles (see mpi_types.h). */
#include <pthread.h>
#include <limits.h>
#include "mpi_types.h"
#include "log.h"
#include "reduce.h"

/* ---- user ops ---------------------------------------------------------- */
/* MPI has no 16-bit float reductions, and some MPI builds compute a few
 * integer pairs wrongly (Open MPI 4.1's vectorised int8/uint8 sum and prod
 * saturate instead of wrapping, open-mpi/ompi#8045; MPICH 4.0's unsigned
 * min/max compare as signed, pmodels/mpich#6083). Those pairs go through
 * user ops running our own kernels; every other pair uses MPI's own op. */
#define FR_USER_OP(name, dt, op) \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type) \
    { (void)type; fr_reduce(inout, in, (size_t)*len, dt, op); }
#define FR_USER_OPS(t, dt) FR_USER_OP(t##_sum, dt, FR_SUM) FR_USER_OP(t##_prod, dt, FR_PROD) \
    FR_USER_OP(t##_min, dt, FR_MIN) FR_USER_OP(t##_max, dt, FR_MAX)
FR_USER_OPS(i8, FR_INT8)
FR_USER_OPS(u8, FR_UINT8)
FR_USER_OPS(u32, FR_UINT32)
FR_USER_OPS(u64, FR_UINT64)
FR_USER_OPS(f16, FR_FLOAT16)
FR_USER_OPS(bf16, FR_BFLOAT16)
#define FR_FNS(t) {t##_sum, t##_prod, t##_min, t##_max}

/* Indexed by fr_dtype_t; NULL rows use MPI's own ops. */
static MPI_User_function *const user_fns[FR_DTYPE_COUNT][4] = {
    [FR_INT8] = FR_FNS(i8), [FR_UINT8] = FR_FNS(u8), [FR_UINT32] = FR_FNS(u32),
    [FR_UINT64] = FR_FNS(u64), [FR_FLOAT16] = FR_FNS(f16), [FR_BFLOAT16] = FR_FNS(bf16)};
static MPI_Op user_ops[FR_DTYPE_COUNT][4];
static int ops_refs;
static pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether (dtype, op) needs our user op. */
static int use_user_op(fr_dtype_t t, int o)
{
    if (!user_fns[t][0]) return 0;
    if (t == FR_UINT32 || t == FR_UINT64) return o == FR_MIN || o == FR_MAX;
    return 1;
}

fr_status_t fr_mpi_ops_get(void)
{
    fr_status_t st = FR_SUCCESS;
    pthread_mutex_lock(&ops_lock);
    if (ops_refs == 0) {
        for (int t = 0; t < FR_DTYPE_COUNT; t++)
            for (int o = 0; o < 4 && user_fns[t][0]; o++)
                if (PMPI_Op_create(user_fns[t][o], 1, &user_ops[t][o]) != MPI_SUCCESS)
                    st = FR_ERROR(FR_ERR_MPI, "MPI_Op_create failed");
    }
    if (st == FR_SUCCESS) ops_refs++;
    pthread_mutex_unlock(&ops_lock);
    return st;
}

void fr_mpi_ops_put(void)
{
    pthread_mutex_lock(&ops_lock);
    int fin = 0;
    MPI_Finalized(&fin);
    if (ops_refs > 0 && --ops_refs == 0 && !fin)
        for (int t = 0; t < FR_DTYPE_COUNT; t++)
            for (int o = 0; o < 4 && user_fns[t][0]; o++) PMPI_Op_free(&user_ops[t][o]);
    pthread_mutex_unlock(&ops_lock);
}

void fr_mpi_handles(fr_dtype_t dtype, fr_op_t op, MPI_Datatype *type, MPI_Op *mop)
{
    static const MPI_Op native[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    int o = op == FR_AVG ? FR_SUM : (int)op;
    switch (dtype) {
    case FR_INT8: *type = MPI_INT8_T; break;
    case FR_UINT8: *type = MPI_UINT8_T; break;
    case FR_INT32: *type = MPI_INT32_T; break;
    case FR_UINT32: *type = MPI_UINT32_T; break;
    case FR_INT64: *type = MPI_INT64_T; break;
    case FR_UINT64: *type = MPI_UINT64_T; break;
    case FR_FLOAT32: *type = MPI_FLOAT; break;
    case FR_FLOAT64: *type = MPI_DOUBLE; break;
    default: *type = MPI_UINT16_T; break;  /* float16, bfloat16: bits only */
    }
    *mop = use_user_op(dtype, o) ? user_ops[dtype][o] : native[o];
}

int fr_dtype_from_mpi(MPI_Datatype t)
{
    /* MPI defines no reduction on MPI_CHAR, yet both MPIs accept one, as
     * an integer of C's char: served as that (osu_allreduce's default) */
    if (t == MPI_CHAR) return CHAR_MIN < 0 ? FR_INT8 : FR_UINT8;
    if (t == MPI_INT8_T || t == MPI_SIGNED_CHAR) return FR_INT8;
    if (t == MPI_UINT8_T || t == MPI_UNSIGNED_CHAR) return FR_UINT8;
    if (t == MPI_INT32_T) return FR_INT32;
    if (t == MPI_UINT32_T) return FR_UINT32;
    if (t == MPI_INT64_T) return FR_INT64;
    if (t == MPI_UINT64_T) return FR_UINT64;
    if (t == MPI_FLOAT) return FR_FLOAT32;
    if (t == MPI_DOUBLE) return FR_FLOAT64;
    if (t == MPI_INT) return sizeof(int) == 4 ? FR_INT32 : -1;
    if (t == MPI_UNSIGNED) return sizeof(unsigned) == 4 ? FR_UINT32 : -1;
    if (t == MPI_LONG) return sizeof(long) == 8 ? FR_INT64 : FR_INT32;
    if (t == MPI_UNSIGNED_LONG) return sizeof(long) == 8 ? FR_UINT64 : FR_UINT32;
    if (t == MPI_LONG_LONG) return FR_INT64;
    if (t == MPI_UNSIGNED_LONG_LONG) return FR_UINT64;
    return -1;
}

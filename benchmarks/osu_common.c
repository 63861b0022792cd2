/* Shared driver of the osu-style benchmarks; see osu_common.h and docs/benchmarks.md. */
#include "config.h"
#include "osu_common.h"
#include "bench_device.h"
#include "internal.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define OSU_SIZE_W  10   /* OSU: "%-10d" for the size column */
#define OSU_FIELD_W 18   /* OSU's FIELD_WIDTH */
#define OSU_PREC     2   /* OSU's FLOAT_PRECISION */
#define MAX_BLOCKS 1000

/* ------------------------------------------------------------------ types */

enum { M_NONE, M_CHAR, M_INT, M_FLOAT, M_DOUBLE, M_I8, M_U8, M_I32, M_U32, M_I64, M_U64, M_U16 };

static const struct osu_type {
    const char *name;   /* what -T takes */
    fr_dtype_t  dtype;
    const char *label;  /* what "# Datatype:" prints */
    int         mpi;    /* M_* */
} osu_types[] = {
    { "mpi_char",   FR_INT8,     "MPI_CHAR",     M_CHAR },
    { "mpi_int",    FR_INT32,    "MPI_INT",      M_INT },
    { "mpi_float",  FR_FLOAT32,  "MPI_FLOAT",    M_FLOAT },
    { "mpi_double", FR_FLOAT64,  "MPI_DOUBLE",   M_DOUBLE },
    { "int8",       FR_INT8,     "MPI_INT8_T",   M_I8 },
    { "uint8",      FR_UINT8,    "MPI_UINT8_T",  M_U8 },
    { "int32",      FR_INT32,    "MPI_INT32_T",  M_I32 },
    { "uint32",     FR_UINT32,   "MPI_UINT32_T", M_U32 },
    { "int64",      FR_INT64,    "MPI_INT64_T",  M_I64 },
    { "uint64",     FR_UINT64,   "MPI_UINT64_T", M_U64 },
    { "float32",    FR_FLOAT32,  "MPI_FLOAT",    M_FLOAT },
    { "float64",    FR_FLOAT64,  "MPI_DOUBLE",   M_DOUBLE },
    /* MPI has no 16-bit floats: it can move them (bcast) but not reduce them. */
    { "float16",    FR_FLOAT16,  "float16",      M_NONE },
    { "bfloat16",   FR_BFLOAT16, "bfloat16",     M_NONE },
};
#define N_TYPES (sizeof osu_types / sizeof osu_types[0])

/* MPI's handles are not all compile-time constants, so map at run time. */
static MPI_Datatype mpi_type_of(int m, osu_kind_t kind)
{
    switch (m) {
    /* MPI_CHAR is not a reduction type in the MPI standard; reduce its bytes as signed char. */
    case M_CHAR:   return kind == OSU_ALLREDUCE ? MPI_SIGNED_CHAR : MPI_CHAR;
    case M_INT:    return sizeof(int) == 4 ? MPI_INT : MPI_INT32_T;
    case M_FLOAT:  return MPI_FLOAT;
    case M_DOUBLE: return MPI_DOUBLE;
    case M_I8:     return MPI_INT8_T;
    case M_U8:     return MPI_UINT8_T;
    case M_I32:    return MPI_INT32_T;
    case M_U32:    return MPI_UINT32_T;
    case M_I64:    return MPI_INT64_T;
    case M_U64:    return MPI_UINT64_T;
    case M_U16:    return MPI_UINT16_T;
    default:       return MPI_DATATYPE_NULL;
    }
}

static const struct { const char *name; fr_op_t op; } osu_ops[] = {
    { "sum", FR_SUM }, { "prod", FR_PROD }, { "min", FR_MIN }, { "max", FR_MAX }, { "avg", FR_AVG },
};

static MPI_Op mpi_op_of(fr_op_t op)
{
    switch (op) {
    case FR_PROD: return MPI_PROD;
    case FR_MIN:  return MPI_MIN;
    case FR_MAX:  return MPI_MAX;
    default:      return MPI_SUM;   /* FR_AVG: MPI has no average; compare with its sum */
    }
}

/* -------------------------------------------------------- element helpers */

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

static void osu_upload_bytes(osu_ctx_t *c, size_t bytes)
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

/* ---------------------------------------------------------------- options */

static int g_rank;
static const char *g_prog = "fr_osu";

static void usage(FILE *f, osu_kind_t kind)
{
    fprintf(f,
        "Usage: %s [options]\n"
        "OSU-style latency test of fastreduce's %s (see docs/benchmarks.md).\n"
        "  -m, --message-size [MIN:]MAX  sizes in bytes, doubling from MIN to MAX; MIN: or :MAX\n"
        "                                keep the other default; K, M, G suffixes (x1024) allowed\n"
        "                                (default %s:1M)\n"
        "  -i, --iterations ITER         timed iterations per size (default 1000 below 64K,\n"
        "                                100 below 8M, 100*8M/size but >= 10 above)\n"
        "  -x, --warmup WARMUP           untimed iterations per size (default 100 below 64K,\n"
        "                                10 below 8M, fewer above but >= 2)\n"
        "  -f, --full                    also print Min and Max latency and Iterations\n"
        "  -T, --type TYPE               mpi_char mpi_int mpi_float mpi_double int8 uint8 int32\n"
        "                                uint32 int64 uint64 float16 bfloat16 float32 float64\n"
        "                                (default %s)\n"
        "  -c, --validation              check every size against an expected value each rank\n"
        "                                computes; adds a Validation column, exit 1 on failure\n"
        "      --algo NAME               force a fastreduce algorithm (fr_config_t.algo)\n"
        "  -d, --accelerator cuda|host   buffers in CUDA device memory (on GPU local_rank %% GPUs)\n"
        "                                or host memory (default host)\n"
        "%s"
        "      --vs-mpi                  also time MPI_%s on the same buffers, alternating\n"
        "                                blocks, and print both latencies and MPI/ours\n"
        "      --compare LIST            time several choices side by side, blocks in turn:\n"
        "                                algorithm names, and 'table' for the tuning table's\n"
        "                                choice; prints each, the best forced one and table/best\n"
        "      --blocks N                timing blocks per size; latency is their median (default 5)\n"
        "  -v, --version                 print the library version\n"
        "  -h, --help                    print this help\n",
        g_prog, kind == OSU_ALLREDUCE ? "fr_allreduce()" : "fr_bcast()",
        kind == OSU_ALLREDUCE ? "4" : "1",
        kind == OSU_ALLREDUCE ? "mpi_float" : "mpi_char",
        kind == OSU_ALLREDUCE
            ? "      --op sum|prod|min|max|avg reduction (default sum; --vs-mpi uses MPI_SUM for avg)\n"
            : "      --root N                  broadcast root (default 0)\n",
        kind == OSU_ALLREDUCE ? "Allreduce" : "Bcast");
}

static int parse_uint(const char *s, long max, long *out)
{
    char *end;
    if (!s || !*s) return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > max) return -1;
    *out = v;
    return 0;
}

static int parse_bytes(const char *s, size_t *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned long long mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1ULL << 10; break;
        case 'm': case 'M': mul = 1ULL << 20; break;
        case 'g': case 'G': mul = 1ULL << 30; break;
        default: return -1;
        }
        if (end[1] && !((end[1] == 'b' || end[1] == 'B') && !end[2]) &&
            !((end[1] == 'i' ) && (end[2] == 'B' || end[2] == 'b') && !end[3]))
            return -1;
    }
    if (v > (unsigned long long)SIZE_MAX / mul) return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int parse_range(const char *s, osu_opts_t *o)
{
    const char *colon = strchr(s, ':');
    if (!colon) return parse_bytes(s, &o->max_size);
    char left[64];
    size_t n = (size_t)(colon - s);
    if (n >= sizeof left) return -1;
    memcpy(left, s, n);
    left[n] = '\0';
    if (n && parse_bytes(left, &o->min_size)) return -1;
    if (colon[1] && parse_bytes(colon + 1, &o->max_size)) return -1;
    return 0;
}

enum { OPT_ALGO = 256, OPT_OP, OPT_ROOT, OPT_VS_MPI, OPT_BLOCKS, OPT_COMPARE };
#define MAX_COMPARE 16

/* 0: run; 1: done, exit 0 (help, version); 2: bad options, exit 1. */
static int parse_options(int argc, char **argv, osu_kind_t kind, osu_opts_t *o)
{
    static const struct option longopts[] = {
        { "message-size", required_argument, NULL, 'm' },
        { "iterations",   required_argument, NULL, 'i' },
        { "warmup",       required_argument, NULL, 'x' },
        { "full",         no_argument,       NULL, 'f' },
        { "type",         required_argument, NULL, 'T' },
        { "validation",   no_argument,       NULL, 'c' },
        { "help",         no_argument,       NULL, 'h' },
        { "version",      no_argument,       NULL, 'v' },
        { "algo",         required_argument, NULL, OPT_ALGO },
        { "accelerator",  required_argument, NULL, 'd' },
        { "op",           required_argument, NULL, OPT_OP },
        { "root",         required_argument, NULL, OPT_ROOT },
        { "vs-mpi",       no_argument,       NULL, OPT_VS_MPI },
        { "blocks",       required_argument, NULL, OPT_BLOCKS },
        { "compare",      required_argument, NULL, OPT_COMPARE },
        { NULL, 0, NULL, 0 }
    };
    const struct osu_type *type = &osu_types[kind == OSU_ALLREDUCE ? 2 : 0];
    long v;
    char bad[160] = "";

    memset(o, 0, sizeof *o);
    o->min_size = kind == OSU_ALLREDUCE ? 4 : 1;
    o->max_size = MIB;
    o->iters = o->warmup = -1;
    o->blocks = 5;
    o->op = FR_SUM;
    opterr = 0;

    int c;
    while (!bad[0] && (c = getopt_long(argc, argv, ":m:i:x:fT:chvd:", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (parse_range(optarg, o)) snprintf(bad, sizeof bad, "invalid message size '%s'", optarg);
            break;
        case 'i':
            if (parse_uint(optarg, INT_MAX, &v) || v < 1)
                snprintf(bad, sizeof bad, "invalid iterations '%s' (need >= 1)", optarg);
            else o->iters = (int)v;
            break;
        case 'x':
            if (parse_uint(optarg, INT_MAX, &v)) snprintf(bad, sizeof bad, "invalid warmup '%s'", optarg);
            else o->warmup = (int)v;
            break;
        case 'f': o->full = 1; break;
        case 'd':
            if (!strcasecmp(optarg, "cuda")) o->device = 1;
            else if (!strcasecmp(optarg, "host")) o->device = 0;
            else snprintf(bad, sizeof bad, "-d '%s': expected cuda or host", optarg);
#ifndef FR_HAVE_CUDA
            if (o->device) snprintf(bad, sizeof bad, "-d cuda: this build has no CUDA (configure --with-cuda)");
#endif
            break;
        case 'c': o->validate = 1; break;
        case 'T': {
            size_t k;
            for (k = 0; k < N_TYPES && strcasecmp(optarg, osu_types[k].name); k++) {}
            if (k == N_TYPES) snprintf(bad, sizeof bad, "unknown type '%s'", optarg);
            else type = &osu_types[k];
            break;
        }
        case OPT_ALGO:
            if (!*optarg) snprintf(bad, sizeof bad, "--algo needs a name");
            o->algo = optarg;
            break;
        case OPT_OP: {
            size_t k, nops = sizeof osu_ops / sizeof osu_ops[0];
            if (kind != OSU_ALLREDUCE) { snprintf(bad, sizeof bad, "--op is for fr_osu_allreduce"); break; }
            for (k = 0; k < nops && strcasecmp(optarg, osu_ops[k].name); k++) {}
            if (k == nops) snprintf(bad, sizeof bad, "unknown op '%s'", optarg);
            else o->op = osu_ops[k].op;
            break;
        }
        case OPT_ROOT:
            if (kind != OSU_BCAST) snprintf(bad, sizeof bad, "--root is for fr_osu_bcast");
            else if (parse_uint(optarg, INT_MAX, &v)) snprintf(bad, sizeof bad, "invalid root '%s'", optarg);
            else o->root = (int)v;
            break;
        case OPT_VS_MPI: o->vs_mpi = 1; break;
        case OPT_COMPARE: {
            int n = 1;
            for (const char *q = optarg; *q; q++) n += *q == ',';
            if (!*optarg || strstr(optarg, ",,") || optarg[strlen(optarg) - 1] == ',' || *optarg == ',')
                snprintf(bad, sizeof bad, "--compare needs names separated by commas (table for the tuning table)");
            else if (n > MAX_COMPARE) snprintf(bad, sizeof bad, "--compare: at most %d entries", MAX_COMPARE);
            o->compare = optarg;
            break;
        }
        case OPT_BLOCKS:
            if (parse_uint(optarg, MAX_BLOCKS, &v) || v < 1)
                snprintf(bad, sizeof bad, "invalid blocks '%s' (1..%d)", optarg, MAX_BLOCKS);
            else o->blocks = (int)v;
            break;
        case 'h':
            if (g_rank == 0) usage(stdout, kind);
            return 1;
        case 'v':
            if (g_rank == 0) printf("%s (libfastreduce %s)\n", g_prog, fr_version());
            return 1;
        case ':':
            snprintf(bad, sizeof bad, "option '%s' needs an argument", argv[optind - 1]);
            break;
        default:
            if (optopt && optopt < 256) snprintf(bad, sizeof bad, "unknown option '-%c'", optopt);
            else snprintf(bad, sizeof bad, "unknown option '%s'", argv[optind - 1]);
            break;
        }
    }
    if (!bad[0] && optind < argc) snprintf(bad, sizeof bad, "unexpected argument '%s'", argv[optind]);
    if (!bad[0] && o->device && o->vs_mpi)
        snprintf(bad, sizeof bad, "--vs-mpi times MPI on host buffers only (MPI may not be CUDA-aware); with -d cuda "
                 "use --compare table,nccl for NCCL's own choice");
    if (!bad[0] && o->compare && (o->algo || o->vs_mpi || o->validate || o->full))
        snprintf(bad, sizeof bad, "--compare cannot be combined with --algo, --vs-mpi, -c or -f");
    if (!bad[0] && o->min_size == 0) o->min_size = 1;
    if (!bad[0] && (o->max_size == 0 || o->min_size > o->max_size))
        snprintf(bad, sizeof bad, "message size range %zu:%zu is empty", o->min_size, o->max_size);

    o->dtype = type->dtype;
    o->type_label = type->label;
    o->mpi_dtype = mpi_type_of(type->mpi, kind);
    if (kind == OSU_BCAST && type->mpi == M_NONE) o->mpi_dtype = mpi_type_of(M_U16, kind);
    o->mpi_op = mpi_op_of(o->op);
    if (!bad[0] && o->vs_mpi && o->mpi_dtype == MPI_DATATYPE_NULL)
        snprintf(bad, sizeof bad, "--vs-mpi: MPI cannot reduce %s", type->name);
    if (!bad[0] && o->max_size < fr_dtype_size(o->dtype))
        snprintf(bad, sizeof bad, "no size in the range holds one %s element (%zu bytes)",
                 type->name, fr_dtype_size(o->dtype));
    if (bad[0]) {
        if (g_rank == 0) {
            fprintf(stderr, "%s: %s\n", g_prog, bad);
            usage(stderr, kind);
        }
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------- timing */

static int default_iters(const osu_opts_t *o, size_t bytes)
{
    if (o->iters > 0) return o->iters;
    if (bytes < 64 * KIB) return 1000;
    if (bytes < 8 * MIB) return 100;
    double n = 100.0 * (double)(8 * MIB) / (double)bytes;
    return n < 10 ? 10 : (int)n;
}

static int default_warmup(const osu_opts_t *o, size_t bytes)
{
    if (o->warmup >= 0) return o->warmup;
    if (bytes < 64 * KIB) return 100;
    if (bytes < 8 * MIB) return 10;
    double n = 10.0 * (double)(8 * MIB) / (double)bytes;
    return n < 2 ? 2 : (int)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)   /* sorts v */
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "%s: rank %d: %s failed: %s\n", g_prog, g_rank, what, detail);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void run_one(const osu_coll_t *coll, osu_ctx_t *c, int use_mpi)
{
    if (use_mpi) {
        int rc = coll->run_mpi(c);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            die(coll->kind == OSU_ALLREDUCE ? "MPI_Allreduce" : "MPI_Bcast", msg);
        }
    } else {
        fr_status_t st = coll->run_fr(c);
        if (st != FR_SUCCESS) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s (%s)", fr_strerror(st), fr_last_error());
            die(coll->kind == OSU_ALLREDUCE ? "fr_allreduce" : "fr_bcast", msg);
        }
    }
}

/* This rank's average time of one call over a block of n calls, in us. */
static double time_block(const osu_coll_t *coll, osu_ctx_t *c, int use_mpi, int n)
{
    /* one untimed call first: blocks of different kinds (ours and MPI's, or
     * --compare's columns) take turns, and the first call after another
     * kind's block finds the caches holding that one's segments and buffers */
    run_one(coll, c, use_mpi);
    MPI_Barrier(c->mpi_comm);
    double t0 = MPI_Wtime();
    for (int j = 0; j < n; j++) run_one(coll, c, use_mpi);
    return (MPI_Wtime() - t0) * 1e6 / n;
}

typedef struct {
    double ours, mpi;   /* median over blocks of the max over ranks, us */
    double min, max;    /* over ranks and blocks of the per-rank block average, us */
    int    iters;       /* timed calls of ours per rank */
} osu_result_t;

static void time_size(const osu_coll_t *coll, osu_ctx_t *c, osu_result_t *r)
{
    const osu_opts_t *o = c->o;
    size_t bytes = c->count * c->esize;
    int iters = default_iters(o, bytes), warm = default_warmup(o, bytes);
    int nb = o->blocks < iters ? o->blocks : iters;
    int per = (iters + nb - 1) / nb;
    double loc[2 * MAX_BLOCKS], vmax[2 * MAX_BLOCKS], vmin[2 * MAX_BLOCKS];

    for (int j = 0; j < warm; j++) {
        run_one(coll, c, 0);
        if (o->vs_mpi) run_one(coll, c, 1);
    }
    for (int b = 0; b < nb; b++) {
        if (!o->vs_mpi) {
            loc[b] = time_block(coll, c, 0, per);
        } else if (b % 2 == 0) {     /* alternate which goes first */
            loc[b] = time_block(coll, c, 0, per);
            loc[nb + b] = time_block(coll, c, 1, per);
        } else {
            loc[nb + b] = time_block(coll, c, 1, per);
            loc[b] = time_block(coll, c, 0, per);
        }
    }
    int nv = o->vs_mpi ? 2 * nb : nb;
    MPI_Reduce(loc, vmax, nv, MPI_DOUBLE, MPI_MAX, 0, c->mpi_comm);
    MPI_Reduce(loc, vmin, nv, MPI_DOUBLE, MPI_MIN, 0, c->mpi_comm);
    memset(r, 0, sizeof *r);
    r->iters = nb * per;
    if (c->rank != 0) return;
    r->min = vmin[0];
    r->max = vmax[0];
    for (int b = 1; b < nb; b++) {
        if (vmin[b] < r->min) r->min = vmin[b];
        if (vmax[b] > r->max) r->max = vmax[b];
    }
    r->ours = median(vmax, nb);
    if (o->vs_mpi) r->mpi = median(vmax + nb, nb);
}

/* memcpy bandwidth in bytes/s: median of 9 timings, each of enough copies of
 * @p bytes between two private buffers to last a while. Rank 0 only. */
static double memcpy_bandwidth(size_t bytes)
{
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;  /* keep every copy */
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[9];
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    size_t reps = (16 * MIB) / bytes;
    if (reps < 1) reps = 1;
    if (reps > 65536) reps = 65536;
    copy(b, a, bytes);                                  /* warm */
    for (int s = 0; s < 9; s++) {
        double t0 = MPI_Wtime();
        for (size_t k = 0; k < reps; k++) copy(s % 2 ? a : b, s % 2 ? b : a, bytes);
        t[s] = (MPI_Wtime() - t0) / (double)reps;
    }
    free(a);
    free(b);
    double med = median(t, 9);
    return med > 0 ? (double)bytes / med : 0;
}

/* ---------------------------------------------------------------- output */

static void print_header(const osu_coll_t *coll, const osu_ctx_t *c, double mbw, size_t mbytes)
{
    const osu_opts_t *o = c->o;
    printf("# OSU MPI-style fastreduce %s Latency Test\n", coll->title);
    printf("# Datatype: %s.\n", o->type_label);
    printf("# libfastreduce %s, %d ranks, fastreduce type %s", fr_version(), c->nranks,
           fr_dtype_name(o->dtype));
    if (coll->kind == OSU_ALLREDUCE) printf(", op %s", fr_op_name(o->op));
    else printf(", root %d", o->root);
    printf(", algorithm %s\n", o->algo ? o->algo : "from the tuning table");
    printf("# Avg Latency: median of %d blocks; a block's latency is the max over ranks of\n"
           "#   each rank's average time per call in the block (Min/Max: extremes of those\n"
           "#   per-rank block averages)\n", o->blocks);
    if (o->vs_mpi) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(ver, &len);
        ver[strcspn(ver, "\n,")] = '\0';
        for (char *p = ver; *p; p++) if (*p == '\t') *p = ' ';
        printf("# --vs-mpi: blocks of fastreduce and MPI_%s alternate; Speedup = MPI(us) / fastreduce(us)"
               " (>1: fastreduce is faster)\n# MPI: %s%s\n", coll->title, ver,
               coll->kind == OSU_ALLREDUCE && o->op == FR_AVG ? " (MPI_SUM: MPI has no average)" : "");
    }
    printf("# busbw: %s; %%memcpy = busbw / memcpy bandwidth\n",
           coll->kind == OSU_ALLREDUCE ? "algbw * 2(n-1)/n" : "algbw (size / latency)");
    printf("# memcpy bandwidth: %.2f GB/s (median of 9 timings of memcpy of %zu bytes, rank 0)\n",
           mbw / 1e9, mbytes);

    printf("%-*s", OSU_SIZE_W, "# Size");
    if (o->vs_mpi)
        printf("%*s%*s%*s", OSU_FIELD_W, "fastreduce(us)", OSU_FIELD_W, "MPI(us)", 10, "Speedup");
    else
        printf("%*s", OSU_FIELD_W, "Avg Latency(us)");
    if (o->full)
        printf("%*s%*s%*s", OSU_FIELD_W, "Min Latency(us)", OSU_FIELD_W, "Max Latency(us)", 12, "Iterations");
    printf("%*s%*s", 14, "busbw(GB/s)", 10, "%memcpy");
    if (o->validate) printf("%*s", 12, "Validation");
    printf("  %s\n", "Algorithm");
    fflush(stdout);
}

static void print_row(const osu_coll_t *coll, const osu_ctx_t *c, size_t size, const osu_result_t *r,
                      double mbw, int valid, const char *alg)
{
    const osu_opts_t *o = c->o;
    double bytes = (double)(c->count * c->esize);
    double busbw = r->ours > 0 ? bytes / (r->ours * 1e3) * coll->busbw_factor(c->nranks) : 0;
    printf("%-*zu", OSU_SIZE_W, size);
    if (o->vs_mpi)
        printf("%*.*f%*.*f%*.*f", OSU_FIELD_W, OSU_PREC, r->ours, OSU_FIELD_W, OSU_PREC, r->mpi,
               10, OSU_PREC, r->ours > 0 ? r->mpi / r->ours : 0.0);
    else
        printf("%*.*f", OSU_FIELD_W, OSU_PREC, r->ours);
    if (o->full)
        printf("%*.*f%*.*f%*d", OSU_FIELD_W, OSU_PREC, r->min, OSU_FIELD_W, OSU_PREC, r->max, 12, r->iters);
    printf("%*.*f%*.1f", 14, OSU_PREC, busbw, 10, mbw > 0 ? busbw * 1e9 / mbw * 100 : 0.0);
    if (o->validate) printf("%*s", 12, valid ? "Pass" : "Fail");
    printf("  %s\n", alg ? alg : "?");
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

static int validate_size(const osu_coll_t *coll, osu_ctx_t *c, size_t size)
{
    unsigned long long wrong = 0, total = 0;
    int failed_call = 0, any_failed = 0;
    for (int seed = 1; seed <= 2; seed++) {
        size_t w = coll->validate(c, seed);
        if (w == (size_t)-1) failed_call = 1;
        else wrong += w;
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, c->mpi_comm);
    MPI_Allreduce(&failed_call, &any_failed, 1, MPI_INT, MPI_MAX, c->mpi_comm);
    if ((total || any_failed) && c->rank == 0)
        fprintf(stderr, "%s: validation failed at %zu bytes: %llu wrong elements%s\n", g_prog, size,
                total, any_failed ? ", and a call returned an error" : "");
    return !total && !any_failed;
}

/* --compare: each entry (an algorithm forced, or the table's choice for
 * "table") timed block by block in turn at each size, on one communicator
 * whose selection table is switched from column to column, as the tuner
 * does: with a communicator per column, the columns' shared segments
 * evict each other from the cache between blocks, which costs most the
 * variants with the largest footprint (docs/performance.md, "Design
 * decisions"). A forced column's table is FASTREDUCE_ALGO's rule followed
 * by the communicator's own, as for fr_comm_create with config->algo. */
static int run_compare(const osu_coll_t *coll, osu_ctx_t *c)
{
    const osu_opts_t *o = c->o;
    char list[1024], *names[MAX_COMPARE], *save = NULL;
    fr_table_t tabs[MAX_COMPARE];
    int n = 0, table = -1, declined[MAX_COMPARE];
    const char *forced[MAX_COMPARE];   /* the algorithm a column forces for this collective, or NULL */
    const int fc = coll->kind == OSU_ALLREDUCE ? FR_COLL_ALLREDUCE : FR_COLL_BCAST;
    fr_comm_t comm;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (st != FR_SUCCESS) die("fr_comm_create", fr_last_error());
    const fr_table_t own = *fr_comm_table(comm);
    snprintf(list, sizeof list, "%s", o->compare);
    for (char *w = strtok_r(list, ",", &save); w && n < MAX_COMPARE; w = strtok_r(NULL, ",", &save)) {
        fr_table_t *tk = &tabs[n];
        int nbad = 0;
        memset(tk, 0, sizeof *tk);
        forced[n] = NULL;
        if (!strcmp(w, "table")) {
            if (table >= 0) die("--compare", "'table' is given twice");
            table = n;
            *tk = own;
        } else if (fr_table_parse_algo(tk, w, NULL, NULL, &nbad) != FR_SUCCESS || nbad) {
            die("--compare", "not an algorithm name (fastreduce-info lists them)");
        } else {
            for (int i = 0; i < tk->n && !forced[n]; i++)
                if (tk->rules[i].coll == fc) forced[n] = fr_algs[tk->rules[i].alg]->name;
            if (fr_table_append(tk, &own) != FR_SUCCESS) die("--compare", fr_last_error());
        }
        names[n++] = w;
    }
    if (g_rank == 0) {
        printf("# OSU MPI-style fastreduce %s Latency Test, --compare\n", coll->title);
        printf("# Datatype: %s.\n", o->type_label);
        printf("# libfastreduce %s, %d ranks, fastreduce type %s; each column: median over %d blocks of the\n"
               "#   max over ranks of a rank's average time per call, blocks of the columns in turn\n",
               fr_version(), c->nranks, fr_dtype_name(o->dtype), o->blocks);
        if (table >= 0)
            printf("# table/best: the table's choice over the fastest forced column (1.00: as fast), the median\n"
                   "#   over blocks of the ratio of their two blocks\n");
        printf("%-*s", OSU_SIZE_W, "# Size");
        for (int k = 0; k < n; k++) {
            char h[64];
            snprintf(h, sizeof h, "%s(us)", names[k]);
            printf(" %*s", (int)(strlen(h) > 14 ? strlen(h) : 14), h);
        }
        printf("  %-20s", "best-forced");
        if (table >= 0) printf(" %10s  %s", "table/best", "Algorithm");
        printf("\n");
        fflush(stdout);
    }
    double *loc = malloc(sizeof(double) * MAX_COMPARE * MAX_BLOCKS), *vmax = malloc(sizeof(double) * MAX_COMPARE * MAX_BLOCKS);
    if (!loc || !vmax) die("malloc", "out of memory");
    for (size_t size = o->min_size; size <= o->max_size; size *= 2) {
        c->count = size / c->esize;
        if (c->count > 0) {
            size_t bytes = c->count * c->esize;
            int iters = default_iters(o, bytes), warm = default_warmup(o, bytes);
            int nb = o->blocks < iters ? o->blocks : iters, per = (iters + nb - 1) / nb;
            c->comm = comm;
            for (int k = 0; k < n; k++) {
                fr_select_use(comm, tabs[k]);
                for (int j = 0; j < warm; j++) run_one(coll, c, 0);
                /* a forced algorithm that declines this call leaves its column to the next rule
                 * (asked after the warm-up: a device algorithm answers once its set-up is done) */
                const char *served = coll->algorithm(c, NULL, 0);
                declined[k] = k != table && served && (!forced[k] || strcmp(served, forced[k]));
                if (g_rank == 0 && declined[k])
                    printf("# %zu bytes: %s declines this call; its column is %s's (not a best-forced)\n", size,
                           names[k], served);
            }
            for (int b = 0; b < nb; b++)
                for (int i = 0; i < n; i++) {
                    /* a different one goes first each even block, and each odd block is the
                     * one before it reversed, so no column always follows the same one */
                    int k = b % 2 ? (b + n - 2 - i) % n : (b + i) % n;
                    fr_select_use(comm, tabs[k]);
                    loc[k * nb + b] = time_block(coll, c, 0, per);
                }
            MPI_Reduce(loc, vmax, n * nb, MPI_DOUBLE, MPI_MAX, 0, c->mpi_comm);
            const char *alg = NULL;
            char label[128];
            if (table >= 0) {
                fr_select_use(comm, tabs[table]);
                alg = coll->algorithm(c, label, sizeof label);
            }
            if (g_rank == 0) {
                double med[MAX_COMPARE];
                int best = -1;
                printf("%-*zu", OSU_SIZE_W, size);
                for (int k = 0; k < n; k++) {
                    char h[64];
                    double v[MAX_BLOCKS];   /* median() sorts: the blocks stay in order for table/best */
                    memcpy(v, vmax + k * nb, sizeof v[0] * (size_t)nb);
                    med[k] = median(v, nb);
                    snprintf(h, sizeof h, "%s(us)", names[k]);
                    printf(" %*.*f", (int)(strlen(h) > 14 ? strlen(h) : 14), OSU_PREC, med[k]);
                    if (k != table && !declined[k] && (best < 0 || med[k] < med[best])) best = k;
                }
                printf("  %-20s", best >= 0 ? names[best] : "-");
                /* table/best: the median over blocks of the ratio within a block, where the two
                 * columns ran one after the other, so a change of the machine's speed between
                 * blocks does not enter it */
                double ratio[MAX_BLOCKS];
                for (int b = 0; table >= 0 && best >= 0 && b < nb; b++)
                    ratio[b] = vmax[table * nb + b] / vmax[best * nb + b];
                if (table >= 0) printf(" %10.3f  %s", best >= 0 ? median(ratio, nb) : 0.0, alg ? alg : "?");
                printf("\n");
                fflush(stdout);
            }
        }
        if (size > SIZE_MAX / 2) break;
    }
    free(loc);
    free(vmax);
    fr_select_use(comm, own);
    for (int k = 0; k < n; k++)
        if (k != table) fr_table_free(&tabs[k]);
    fr_comm_destroy(comm);
    return 0;
}

/* -d cuda: this rank's GPU (its local rank modulo the GPUs it sees) and
 * device copies of the host buffers. */
static void device_buffers(osu_ctx_t *c, size_t bytes)
{
    char why[160];
    int dev;
    if (!bd_pick_gpu(&dev, why, sizeof why)) {
        char msg[200];
        snprintf(msg, sizeof msg, "no GPU is visible (%s)", why);
        die("-d cuda", msg);
    }
    if (!(c->sbuf = bd_alloc(bytes)) || !(c->rbuf = bd_alloc(bytes)))
        die("cudaMalloc", "cannot allocate the device buffers");
    osu_upload_bytes(c, bytes);
}

int osu_main(int argc, char **argv, const osu_coll_t *coll)
{
    osu_opts_t o;
    osu_ctx_t c;
    int rc, status = 0;

    if (argc > 0 && argv[0]) {
        const char *slash = strrchr(argv[0], '/');
        g_prog = slash ? slash + 1 : argv[0];
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    rc = parse_options(argc, argv, coll->kind, &o);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : 1;
    }

    memset(&c, 0, sizeof c);
    c.o = &o;
    c.mpi_comm = MPI_COMM_WORLD;
    c.rank = g_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    c.esize = fr_dtype_size(o.dtype);
    if (coll->kind == OSU_BCAST && o.root >= c.nranks) {
        if (g_rank == 0) {
            fprintf(stderr, "%s: root %d is not a rank (%d ranks)\n", g_prog, o.root, c.nranks);
            usage(stderr, coll->kind);
        }
        MPI_Finalize();
        return 1;
    }
    size_t maxcount = o.max_size / c.esize;
    if (o.vs_mpi && maxcount > INT_MAX) {
        if (g_rank == 0)
            fprintf(stderr, "%s: --vs-mpi: %zu elements exceed MPI's int count\n", g_prog, maxcount);
        MPI_Finalize();
        return 1;
    }

    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = o.algo;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c.comm);
    fr_comm_t main_comm = c.comm;
    int ok = st == FR_SUCCESS, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (!ok) fprintf(stderr, "%s: rank %d: fr_comm_create failed: %s (%s)\n", g_prog, g_rank,
                         fr_strerror(st), fr_last_error());
        /* fr_comm_destroy() is collective: ranks that did create a handle cannot
         * free it alone, so leave it to the process exit. */
        MPI_Finalize();
        return 1;
    }

    size_t maxbytes = maxcount * c.esize;
    if (posix_memalign(&c.hs, 4096, maxbytes) || posix_memalign(&c.hr, 4096, maxbytes)) {
        die("posix_memalign", "out of memory");
    }
    for (size_t i = 0; i < maxcount; i++) osu_set(c.hs, i, o.dtype, 1 + (double)(i % 3));
    memset(c.hr, 0, maxbytes);
    c.sbuf = c.hs;
    c.rbuf = c.hr;
    if (o.device) device_buffers(&c, maxbytes);

    double mbw = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0 && !o.device) mbw = memcpy_bandwidth(maxbytes);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0 && !o.compare) print_header(coll, &c, mbw, maxbytes);

    osu_result_t last = { 0 };
    size_t last_bytes = 0;
    if (o.compare) {
        status = run_compare(coll, &c);
        o.max_size = 0;  /* no plain rows */
    }
    for (size_t size = o.min_size; size <= o.max_size; size *= 2) {
        c.count = size / c.esize;
        if (c.count > 0) {
            osu_result_t r;
            const char *alg = coll->algorithm(&c, NULL, 0);
            time_size(coll, &c, &r);
            int valid = 1;
            if (o.validate) {
                valid = validate_size(coll, &c, size);
                if (!valid) status = 1;
            }
            if (g_rank == 0) print_row(coll, &c, size, &r, mbw, valid, alg);
            last = r;
            last_bytes = c.count * c.esize;
        }
        if (size > SIZE_MAX / 2) break;
    }

    if (g_rank == 0 && coll->kind == OSU_BCAST && last_bytes && mbw > 0 && last.ours > 0) {
        double copy_us = (double)last_bytes / mbw * 1e6;
        printf("# Largest size %zu B: latency %.2f us = %.2f x one memcpy of the message "
               "(%.2f us at %.2f GB/s), the limit for 2 ranks\n",
               last_bytes, last.ours, last.ours / copy_us, copy_us, mbw / 1e9);
    }
    fflush(stdout);

    fr_comm_destroy(main_comm);
    if (o.device) { bd_free(c.sbuf); bd_free(c.rbuf); }
    free(c.hs);
    free(c.hr);
    MPI_Finalize();
    return status;
}

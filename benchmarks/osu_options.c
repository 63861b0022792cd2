/* The options of the osu-style benchmarks, blocking and non-blocking, and
 * the MPI start-up with the thread level they ask for. See osu_common.h
 * and docs/benchmarks.md. */
#include "config.h"
#include "osu_common.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define MAX_COMPARE 16

const char *osu_prog = "fr_osu";
int osu_rank;

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

/* ------------------------------------------------------------ thread level */

static const struct { const char *word; int level; } thread_levels[] = {
    { "single", MPI_THREAD_SINGLE }, { "funneled", MPI_THREAD_FUNNELED },
    { "serialized", MPI_THREAD_SERIALIZED }, { "multiple", MPI_THREAD_MULTIPLE },
};
#define N_LEVELS (sizeof thread_levels / sizeof thread_levels[0])

int osu_thread_level(const char *word)
{
    for (size_t k = 0; k < N_LEVELS; k++)
        if (!strcasecmp(word, thread_levels[k].word)) return thread_levels[k].level;
    return -1;
}

const char *osu_thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:     return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:   return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:   return "MPI_THREAD_MULTIPLE";
    default:                    return "MPI_Init's default";
    }
}

int osu_init_mpi(int *argc, char ***argv, int def, int *requested)
{
    int level = def, provided = -1;
    if (*argc > 0 && (*argv)[0]) {
        const char *slash = strrchr((*argv)[0], '/');
        osu_prog = slash ? slash + 1 : (*argv)[0];
    }
    /* The level is needed before MPI_Init_thread, long before the option
     * parser runs (it needs MPI for the rank that reports errors). */
    for (int i = 1; def >= 0 && i < *argc; i++) {
        const char *a = (*argv)[i], *w = NULL;
        if (!strcmp(a, "--thread-level") && i + 1 < *argc) w = (*argv)[i + 1];
        else if (!strncmp(a, "--thread-level=", 15)) w = a + 15;
        if (w && osu_thread_level(w) >= 0) level = osu_thread_level(w);
    }
    if (level >= 0) MPI_Init_thread(argc, argv, level, &provided);
    else MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &osu_rank);
    if (requested) *requested = level;
    return provided;
}

/* ---------------------------------------------------------------- parsing */

int osu_parse_uint(const char *s, long max, long *out)
{
    char *end;
    if (!s || !*s) return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > max) return -1;
    *out = v;
    return 0;
}

int osu_parse_bytes(const char *s, size_t *out)
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

int osu_parse_range(const char *s, size_t *min, size_t *max)
{
    const char *colon = strchr(s, ':');
    if (!colon) return osu_parse_bytes(s, max);
    char left[64];
    size_t n = (size_t)(colon - s);
    if (n >= sizeof left) return -1;
    memcpy(left, s, n);
    left[n] = '\0';
    if (n && osu_parse_bytes(left, min)) return -1;
    if (colon[1] && osu_parse_bytes(colon + 1, max)) return -1;
    return 0;
}

/* ------------------------------------------------------------------ usage */

static void usage(FILE *f, osu_kind_t kind, int nb)
{
    int ar = kind == OSU_ALLREDUCE;
    fprintf(f,
        "Usage: %s [options]\n"
        "OSU-style %s test of fastreduce's %s (see docs/benchmarks.md).\n"
        "  -m, --message-size [MIN:]MAX  sizes in bytes, doubling from MIN to MAX; MIN: or :MAX\n"
        "                                keep the other default; K, M, G suffixes (x1024) allowed\n"
        "                                (default %s:1M)\n"
        "  -i, --iterations ITER         timed iterations per size (default 1000 below 64K,\n"
        "                                100 below 8M, 100*8M/size but >= 10 above)\n"
        "  -x, --warmup WARMUP           untimed iterations per size (default 100 below 64K,\n"
        "                                10 below 8M, fewer above but >= 2)\n"
        "%s"
        "  -T, --type TYPE               mpi_char mpi_int mpi_float mpi_double int8 uint8 int32\n"
        "                                uint32 int64 uint64 float16 bfloat16 float32 float64\n"
        "                                (default %s)\n"
        "  -c, --validation              check every size against an expected value each rank\n"
        "                                computes; adds a Validation column, exit 1 on failure\n"
        "      --algo NAME               force a fastreduce algorithm (fr_config_t.algo)\n"
        "  -d, --accelerator cuda|host   buffers in CUDA device memory (on GPU local_rank %% GPUs)\n"
        "                                or host memory (default host)\n"
        "      --mem malloc|fr|mpi       host buffers from posix_memalign (default), fr_mem_alloc\n"
        "                                (shared by the node's ranks: zero-copy; --vs-mpi gives MPI\n"
        "                                buffers of MPI_Alloc_mem) or MPI_Alloc_mem for both\n"
        "%s",
        osu_prog, nb ? "non-blocking latency and overlap" : "latency",
        nb ? (ar ? "fr_iallreduce()" : "fr_ibcast()") : (ar ? "fr_allreduce()" : "fr_bcast()"), ar ? "4" : "1",
        nb ? "  -f, --full                    also print the start, test and wait times, and Iterations\n"
           : "  -f, --full                    also print Min and Max latency and Iterations\n",
        ar ? "mpi_float" : "mpi_char",
        ar ? "      --op sum|prod|min|max|avg reduction (default sum; --vs-mpi uses MPI_SUM for avg)\n"
           : "      --root N                  broadcast root (default 0)\n");
    if (nb)
        fprintf(f,
            "      --vs-mpi                  also time MPI_I%s on the same buffers, alternating\n"
            "                                blocks: a row of each per size\n"
            "      --compute idle|busy       between start and wait: sleep (the CPU free, as a rank\n"
            "                                waiting for a GPU) or spin the CPU, as OSU (default idle)\n"
            "      --test-every US           call fr_test / MPI_Test every US microseconds of compute\n"
            "                                (default: no test call)\n"
            "      --thread-level single|funneled|serialized|multiple\n"
            "                                MPI_Init_thread's level (default multiple)\n",
            ar ? "allreduce" : "bcast");
    else
        fprintf(f,
            "      --vs-mpi                  also time MPI_%s on the same buffers, alternating\n"
            "                                blocks, and print both latencies and MPI/ours\n"
            "      --compare LIST            time several choices side by side, blocks in turn:\n"
            "                                algorithm names, and 'table' for the tuning table's\n"
            "                                choice; prints each, the best forced one and table/best\n"
            "      --barrier                 time each call alone with an MPI_Barrier after it,\n"
            "                                outside the timer, as OSU (default: a block's calls back\n"
            "                                to back, timed together: for bcast a throughput, the\n"
            "                                root may run ahead of the receivers)\n"
            "      --rewrite                 --barrier, and before each call, outside the timer, the\n"
            "                                ranks write its input anew (the bcast's root its buffer),\n"
            "                                as a program's data is new each call; OSU's input stays\n"
            "                                the same, clean in the caches\n",
            ar ? "Allreduce" : "Bcast");
    fprintf(f,
        "      --blocks N                timing blocks per size; %s is their median (default 5)\n"
        "  -v, --version                 print the library version\n"
        "  -h, --help                    print this help\n",
        nb ? "each figure" : "latency");
}

/* ---------------------------------------------------------------- options */

enum {
    OPT_ALGO = 256, OPT_OP, OPT_ROOT, OPT_VS_MPI, OPT_BLOCKS, OPT_COMPARE,
    OPT_COMPUTE, OPT_TEST_EVERY, OPT_THREAD_LEVEL, OPT_MEM, OPT_BARRIER, OPT_REWRITE
};

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
    { "compute",      required_argument, NULL, OPT_COMPUTE },
    { "test-every",   required_argument, NULL, OPT_TEST_EVERY },
    { "thread-level", required_argument, NULL, OPT_THREAD_LEVEL },
    { "mem",          required_argument, NULL, OPT_MEM },
    { "barrier",      no_argument,       NULL, OPT_BARRIER },
    { "rewrite",      no_argument,       NULL, OPT_REWRITE },
    { NULL, 0, NULL, 0 }
};

/* What parsing one option needs besides the option itself. */
typedef struct parse_state {
    osu_kind_t kind;
    int        nb;
    const struct osu_type *type;
    char       bad[200];   /* the first problem, "" while none */
} parse_state_t;

static void parse_type(parse_state_t *p, const char *arg)
{
    size_t k;
    for (k = 0; k < N_TYPES && strcasecmp(arg, osu_types[k].name); k++) {}
    if (k == N_TYPES) snprintf(p->bad, sizeof p->bad, "unknown type '%s'", arg);
    else p->type = &osu_types[k];
}

static void parse_op(parse_state_t *p, const char *arg, osu_opts_t *o)
{
    size_t k, nops = sizeof osu_ops / sizeof osu_ops[0];
    if (p->kind != OSU_ALLREDUCE) { snprintf(p->bad, sizeof p->bad, "--op is for the allreduce programs"); return; }
    for (k = 0; k < nops && strcasecmp(arg, osu_ops[k].name); k++) {}
    if (k == nops) snprintf(p->bad, sizeof p->bad, "unknown op '%s'", arg);
    else o->op = osu_ops[k].op;
}

static void parse_compare(parse_state_t *p, const char *arg, osu_opts_t *o)
{
    int n = 1;
    for (const char *q = arg; *q; q++) n += *q == ',';
    if (p->nb) snprintf(p->bad, sizeof p->bad, "--compare is for the blocking programs");
    else if (!*arg || strstr(arg, ",,") || arg[strlen(arg) - 1] == ',' || *arg == ',')
        snprintf(p->bad, sizeof p->bad, "--compare needs names separated by commas (table for the tuning table)");
    else if (n > MAX_COMPARE) snprintf(p->bad, sizeof p->bad, "--compare: at most %d entries", MAX_COMPARE);
    o->compare = arg;
}

static void parse_device(parse_state_t *p, const char *arg, osu_opts_t *o)
{
    if (!strcasecmp(arg, "cuda")) o->device = 1;
    else if (!strcasecmp(arg, "host")) o->device = 0;
    else snprintf(p->bad, sizeof p->bad, "-d '%s': expected cuda or host", arg);
#ifndef FR_HAVE_CUDA
    if (o->device) snprintf(p->bad, sizeof p->bad, "-d cuda: this build has no CUDA (configure --with-cuda)");
#endif
}

/* The options of the non-blocking programs alone. */
static void parse_nb(parse_state_t *p, int c, const char *arg, osu_opts_t *o)
{
    char *end;
    if (!p->nb) {
        snprintf(p->bad, sizeof p->bad, "--%s is for the non-blocking programs",
                 c == OPT_COMPUTE ? "compute" : c == OPT_TEST_EVERY ? "test-every" : "thread-level");
        return;
    }
    switch (c) {
    case OPT_COMPUTE:
        if (!strcasecmp(arg, "idle")) o->compute = OSU_COMPUTE_IDLE;
        else if (!strcasecmp(arg, "busy")) o->compute = OSU_COMPUTE_BUSY;
        else snprintf(p->bad, sizeof p->bad, "--compute '%s': expected idle or busy", arg);
        break;
    case OPT_TEST_EVERY:
        errno = 0;
        o->test_every_us = strtod(arg, &end);
        if (errno || end == arg || *end || !(o->test_every_us > 0) || o->test_every_us > 1e9)
            snprintf(p->bad, sizeof p->bad, "--test-every '%s': expected microseconds > 0", arg);
        break;
    default:
        if ((o->thread_level = osu_thread_level(arg)) < 0)
            snprintf(p->bad, sizeof p->bad, "--thread-level '%s': expected single, funneled, serialized or multiple",
                     arg);
        break;
    }
}

/* One option of getopt_long's: into @p o, or a problem into p->bad;
 * 1 when the program is done (help, version). */
static int parse_one(parse_state_t *p, int c, const char *arg, osu_opts_t *o)
{
    long v;
    switch (c) {
    case 'm':
        if (osu_parse_range(arg, &o->min_size, &o->max_size))
            snprintf(p->bad, sizeof p->bad, "invalid message size '%s'", arg);
        break;
    case 'i':
        if (osu_parse_uint(arg, INT_MAX, &v) || v < 1)
            snprintf(p->bad, sizeof p->bad, "invalid iterations '%s' (need >= 1)", arg);
        else o->iters = (int)v;
        break;
    case 'x':
        if (osu_parse_uint(arg, INT_MAX, &v)) snprintf(p->bad, sizeof p->bad, "invalid warmup '%s'", arg);
        else o->warmup = (int)v;
        break;
    case 'f': o->full = 1; break;
    case 'c': o->validate = 1; break;
    case 'd': parse_device(p, arg, o); break;
    case 'T': parse_type(p, arg); break;
    case OPT_ALGO:
        if (!*arg) snprintf(p->bad, sizeof p->bad, "--algo needs a name");
        o->algo = arg;
        break;
    case OPT_OP: parse_op(p, arg, o); break;
    case OPT_ROOT:
        if (p->kind != OSU_BCAST) snprintf(p->bad, sizeof p->bad, "--root is for the bcast programs");
        else if (osu_parse_uint(arg, INT_MAX, &v)) snprintf(p->bad, sizeof p->bad, "invalid root '%s'", arg);
        else o->root = (int)v;
        break;
    case OPT_VS_MPI: o->vs_mpi = 1; break;
    case OPT_MEM:
        if (!strcmp(arg, "malloc")) o->mem = OSU_MEM_MALLOC;
        else if (!strcmp(arg, "fr")) o->mem = OSU_MEM_FR;
        else if (!strcmp(arg, "mpi")) o->mem = OSU_MEM_MPI;
        else snprintf(p->bad, sizeof p->bad, "unknown --mem '%s' (malloc, fr or mpi)", arg);
        break;
    case OPT_COMPARE: parse_compare(p, arg, o); break;
    case OPT_BARRIER:
        /* the non-blocking programs already start each iteration after a barrier */
        if (p->nb) snprintf(p->bad, sizeof p->bad, "--barrier is for the blocking programs");
        o->barrier = 1;
        break;
    case OPT_REWRITE:
        if (p->nb) snprintf(p->bad, sizeof p->bad, "--rewrite is for the blocking programs");
        o->barrier = o->rewrite = 1;
        break;
    case OPT_BLOCKS:
        if (osu_parse_uint(arg, OSU_MAX_BLOCKS, &v) || v < 1)
            snprintf(p->bad, sizeof p->bad, "invalid blocks '%s' (1..%d)", arg, OSU_MAX_BLOCKS);
        else o->blocks = (int)v;
        break;
    case OPT_COMPUTE: case OPT_TEST_EVERY: case OPT_THREAD_LEVEL: parse_nb(p, c, arg, o); break;
    case 'h':
        if (osu_rank == 0) usage(stdout, p->kind, p->nb);
        return 1;
    case 'v':
        if (osu_rank == 0) printf("%s (libfastreduce %s)\n", osu_prog, fr_version());
        return 1;
    default: break;
    }
    return 0;
}

/* The checks of the options together, once all are read; the types' MPI handles. */
static void check_options(parse_state_t *p, osu_opts_t *o)
{
    char *bad = p->bad;
    size_t n = sizeof p->bad;
    if (!bad[0] && o->device && o->vs_mpi)
        snprintf(bad, n, "--vs-mpi times MPI on host buffers only (MPI may not be CUDA-aware); with -d cuda "
                 "use --compare table,nccl for NCCL's own choice");
    if (!bad[0] && o->device && o->rewrite)
        snprintf(bad, n, "--rewrite is for host buffers (-d host)");
    if (!bad[0] && o->device && o->mem != OSU_MEM_MALLOC)
        snprintf(bad, n, "--mem is for host buffers (-d host)");
    if (!bad[0] && o->compare && (o->algo || o->vs_mpi || o->validate || o->full))
        snprintf(bad, n, "--compare cannot be combined with --algo, --vs-mpi, -c or -f");
    if (!bad[0] && o->min_size == 0) o->min_size = 1;
    if (!bad[0] && (o->max_size == 0 || o->min_size > o->max_size))
        snprintf(bad, n, "message size range %zu:%zu is empty", o->min_size, o->max_size);

    o->dtype = p->type->dtype;
    o->type_label = p->type->label;
    o->mpi_dtype = mpi_type_of(p->type->mpi, p->kind);
    if (p->kind == OSU_BCAST && p->type->mpi == M_NONE) o->mpi_dtype = mpi_type_of(M_U16, p->kind);
    o->mpi_op = mpi_op_of(o->op);
    if (!bad[0] && o->vs_mpi && o->mpi_dtype == MPI_DATATYPE_NULL)
        snprintf(bad, n, "--vs-mpi: MPI cannot reduce %s", p->type->name);
    int nranks = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (!bad[0] && p->kind == OSU_BCAST && o->root >= nranks)
        snprintf(bad, n, "root %d is not a rank (%d ranks)", o->root, nranks);
    if (!bad[0] && o->max_size < fr_dtype_size(o->dtype))
        snprintf(bad, n, "no size in the range holds one %s element (%zu bytes)", p->type->name,
                 fr_dtype_size(o->dtype));
}

int osu_parse_options(int argc, char **argv, const osu_coll_t *coll, int nonblocking, osu_opts_t *o)
{
    parse_state_t p = { coll->kind, nonblocking, &osu_types[coll->kind == OSU_ALLREDUCE ? 2 : 0], "" };
    memset(o, 0, sizeof *o);
    o->min_size = coll->kind == OSU_ALLREDUCE ? 4 : 1;
    o->max_size = MIB;
    o->iters = o->warmup = -1;
    o->blocks = 5;
    o->op = FR_SUM;
    o->nonblocking = nonblocking;
    o->compute = OSU_COMPUTE_IDLE;
    o->thread_level = nonblocking ? MPI_THREAD_MULTIPLE : -1;
    opterr = 0;

    int c;
    while (!p.bad[0] && (c = getopt_long(argc, argv, ":m:i:x:fT:chvd:", longopts, NULL)) != -1) {
        if (c == ':')
            snprintf(p.bad, sizeof p.bad, "option '%s' needs an argument", argv[optind - 1]);
        else if (c == '?' && optopt && optopt < 256)
            snprintf(p.bad, sizeof p.bad, "unknown option '-%c'", optopt);
        else if (c == '?')
            snprintf(p.bad, sizeof p.bad, "unknown option '%s'", argv[optind - 1]);
        else if (parse_one(&p, c, optarg, o))
            return 1;
    }
    if (!p.bad[0] && optind < argc) snprintf(p.bad, sizeof p.bad, "unexpected argument '%s'", argv[optind]);
    check_options(&p, o);
    if (p.bad[0]) {
        if (osu_rank == 0) {
            fprintf(stderr, "%s: %s\n", osu_prog, p.bad);
            usage(stderr, coll->kind, nonblocking);
        }
        return 2;
    }
    return 0;
}

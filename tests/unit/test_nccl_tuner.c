/* Unit tests of the NCCL tuner plugin (libnccl-tuner-fastreduce.so), loaded
 * with dlopen as NCCL loads it and called with synthetic cost tables. The
 * reference for what NCCL then runs is pick(): the smallest entry >= 0,
 * the first one on a tie, algorithms then protocols (NCCL's rule). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_plugin.h"
#include "nccl_tuner_abi.h"
#include "tune.h"

#ifndef FR_PLUGIN_PATH
#error "FR_PLUGIN_PATH: the path of the built plugin (tests/Makefile.am)"
#endif

#define NA 7
#define NP 3

/* ---- NCCL's logger, recorded -------------------------------------------- */
static char logbuf[16384];
static int nwarn;

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    char one[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(one, sizeof one, fmt, ap);
    va_end(ap);
    cr_assert_eq(flags, FRN_LOG_TUNING, "the plugin logs under NCCL's TUNING subsystem");
    if (level == FRN_LOG_WARN) nwarn++;
    size_t o = strlen(logbuf);
    snprintf(logbuf + o, sizeof logbuf - o, "%s%s\n", level == FRN_LOG_WARN ? "WARN " : "INFO ", one);
}

static void *lib;
static const frn_tuner_v5_t *v5;

static void load(void)
{
    logbuf[0] = '\0';
    nwarn = 0;
    setenv("NCCL_DEBUG", "INFO", 1);   /* the per-call lines are formatted only when someone reads them */
    lib = dlopen(FR_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(lib, "dlopen %s: %s", FR_PLUGIN_PATH, dlerror());
    v5 = dlsym(lib, "ncclTunerPlugin_v5");
    cr_assert_not_null(v5);
}

/* Write @p text to a fresh file and point FASTREDUCE_TUNE_FILE at it. */
static void table_file(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/fr-tuner-test-%d.tune", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    setenv("FASTREDUCE_TUNE_FILE", path, 1);
}

static void table_done(void)
{
    const char *p = getenv("FASTREDUCE_TUNE_FILE");
    if (p && !strncmp(p, "/tmp/fr-tuner-test-", 19)) unlink(p);
}

/* Every entry supported, distinct, LL the cheapest of each row, tree
 * cheaper than ring: NCCL alone would pick tree/LL. */
static void fill(float t[NA][NP])
{
    for (int a = 0; a < NA; a++)
        for (int p = 0; p < NP; p++) t[a][p] = 10.0f + (float)a * 3.0f + (float)p;
}

/* What NCCL runs with this table: 1 and (algo, proto), or 0 if nothing. */
static int pick(float t[NA][NP], int na, int *algo, int *proto)
{
    int ba = -1, bp = -1;
    for (int a = 0; a < na; a++)
        for (int p = 0; p < NP; p++)
            if (t[a][p] >= 0 && (ba < 0 || t[a][p] < t[ba][bp])) ba = a, bp = p;
    *algo = ba;
    *proto = bp;
    return ba >= 0;
}

static void *init5(size_t nranks, size_t nnodes)
{
    void *ctx = NULL;
    int per = (int)((nranks + nnodes - 1) / nnodes);
    frn_nvl_domain_v5_t nvl = { (int)nnodes, per, per };
    cr_assert_eq(v5->init(&ctx, 0x1234, nranks, nnodes, logger, &nvl, NULL), FRN_SUCCESS);
    cr_assert_not_null(ctx);
    return ctx;
}

/* getCollInfo on a filled table: what NCCL then picks (and the call's status is success) */
static void ask(void *ctx, int coll, size_t bytes, float t[NA][NP], int *algo, int *proto)
{
    int nch = 0;
    cr_assert_eq(v5->getCollInfo(ctx, coll, bytes, 1, (float **)t, NA, NP, 0, &nch), FRN_SUCCESS);
    cr_assert_eq(nch, 0, "the plugin leaves the channel count to NCCL");
    cr_assert(pick(t, NA, algo, proto), "every entry became unsupported");
}

static void expect(void *ctx, int coll, size_t bytes, int want_algo, int want_proto)
{
    float t[NA][NP];
    int a, p;
    fill(t);
    ask(ctx, coll, bytes, t, &a, &p);
    cr_assert(a == want_algo && p == want_proto, "coll %d, %zu bytes: NCCL would run (%d, %d), expected (%d, %d)\n%s",
              coll, bytes, a, p, want_algo, want_proto, logbuf);
}

/* the table comes back exactly as it went in */
static void expect_untouched(void *ctx, int coll, size_t bytes, float t[NA][NP], int na)
{
    float before[NA][NP];
    int nch = 0;
    memcpy(before, t, sizeof before);
    cr_assert_eq(v5->getCollInfo(ctx, coll, bytes, 1, (float **)t, na, NP, 1, &nch), FRN_SUCCESS);
    cr_assert_eq(memcmp(before, t, sizeof before), 0, "coll %d, %zu bytes: the cost table was changed\n%s", coll, bytes,
                 logbuf);
    cr_assert_eq(nch, 0);
}

static const char *RULES =
    "# fastreduce tuning table v1\n"
    "allreduce cuda * * 0-64K nccl_tree\n"
    "allreduce cuda * * 64K-1M nccl_ring proto=ll128\n"
    "allreduce cuda 2-inf * 1M-inf nccl_tree proto=simple\n"
    "allreduce cuda 1 * 16M-inf nccl\n"
    "allreduce host * * * ring\n"
    "bcast cuda * * 0-1M nccl_ring proto=ll\n";

TestSuite(tuner, .init = load, .fini = table_done);

Test(tuner, exports_v5_v4_v3_named_fastreduce)
{
    const frn_tuner_v4_t *v4 = dlsym(lib, "ncclTunerPlugin_v4");
    const frn_tuner_v3_t *v3 = dlsym(lib, "ncclTunerPlugin_v3");
    cr_assert(v4 && v3);
    cr_assert_str_eq(v5->name, "fastreduce");
    cr_assert_str_eq(v4->name, "fastreduce");
    cr_assert_str_eq(v3->name, "fastreduce");
    cr_assert(v5->init && v5->getCollInfo && v5->finalize && v4->init && v4->getCollInfo && v4->destroy);
    /* nothing else leaks out of the plugin (its copy of the parser stays inside libfastreduce) */
    cr_assert_null(dlsym(lib, "init_common"));
    cr_assert_null(dlsym(lib, "ncclTunerPlugin_v2"));
    /* its init is counted in the one libfastreduce this process has */
    unsigned long before = fr_nccl_plugin_inits();
    void *ctx = NULL;
    cr_assert_eq(v4->init(2, 1, NULL, &ctx), FRN_SUCCESS);
    cr_assert_eq(fr_nccl_plugin_inits(), before + 1);
    cr_assert_eq(v4->destroy(ctx), FRN_SUCCESS);
}

/* Each size range and collective gets its rule's algorithm and protocol. */
Test(tuner, rules_force_their_entry)
{
    table_file(RULES);
    void *one = init5(8, 1), *two = init5(16, 2);
    /* nccl_tree without proto: the cheapest tree protocol (LL here) */
    expect(one, FRN_FUNC_ALLREDUCE, 4, FRN_ALGO_TREE, FRN_PROTO_LL);
    expect(one, FRN_FUNC_ALLREDUCE, 65536, FRN_ALGO_TREE, FRN_PROTO_LL);
    expect(one, FRN_FUNC_ALLREDUCE, 65537, FRN_ALGO_RING, FRN_PROTO_LL128);
    expect(one, FRN_FUNC_ALLREDUCE, 1 << 20, FRN_ALGO_RING, FRN_PROTO_LL128);
    expect(two, FRN_FUNC_ALLREDUCE, (1 << 20) + 1, FRN_ALGO_TREE, FRN_PROTO_SIMPLE);
    expect(two, FRN_FUNC_ALLREDUCE, (size_t)1 << 34, FRN_ALGO_TREE, FRN_PROTO_SIMPLE);
    expect(one, FRN_FUNC_BROADCAST, 1000, FRN_ALGO_RING, FRN_PROTO_LL);
    /* a ring really beats what NCCL would take alone (tree/LL in fill()) */
    cr_assert(strstr(logbuf, "allreduce of 65537 bytes: ring/LL128 forced (FASTREDUCE_TUNE_FILE rule at line 3)"),
              "%s", logbuf);
    cr_assert_eq(nwarn, 0, "%s", logbuf);
    cr_assert_eq(v5->finalize(one), FRN_SUCCESS);
    cr_assert_eq(v5->finalize(two), FRN_SUCCESS);
}

/* Sizes, shapes and collectives no rule covers, and rules naming NCCL's
 * own choice, leave the table as NCCL made it. */
Test(tuner, uncovered_calls_untouched)
{
    table_file(RULES);
    void *one = init5(8, 1);
    float t[NA][NP];
    fill(t);
    expect_untouched(one, FRN_FUNC_ALLREDUCE, 2 << 20, t, NA);     /* 1M-16M on one node: no rule */
    expect_untouched(one, FRN_FUNC_ALLREDUCE, 32 << 20, t, NA);    /* "nccl": NCCL's own choice */
    expect_untouched(one, FRN_FUNC_BROADCAST, 2 << 20, t, NA);
    expect_untouched(one, FRN_FUNC_ALLGATHER, 1024, t, NA);
    expect_untouched(one, FRN_FUNC_REDUCESCATTER, 1024, t, NA);
    expect_untouched(one, FRN_FUNC_REDUCE, 1024, t, NA);
    expect_untouched(one, 9, 1024, t, NA);
    expect_untouched(one, -1, 1024, t, NA);
    cr_assert(strstr(logbuf, "NCCL's own choice (FASTREDUCE_TUNE_FILE rule at line 5)"), "%s", logbuf);
    v5->finalize(one);
}

/* Entries NCCL marked unsupported stay so: the plugin then leaves NCCL's
 * choice, warns once per communicator, and still answers success. */
Test(tuner, unsupported_entries_left_alone)
{
    table_file(RULES);
    void *one = init5(8, 1);
    float t[NA][NP];
    fill(t);
    for (int p = 0; p < NP; p++) t[FRN_ALGO_TREE][p] = FRN_UNSUPPORTED;  /* no tree here */
    expect_untouched(one, FRN_FUNC_ALLREDUCE, 1024, t, NA);
    fill(t);
    t[FRN_ALGO_RING][FRN_PROTO_LL128] = FRN_UNSUPPORTED;                 /* ring, but not LL128 */
    expect_untouched(one, FRN_FUNC_ALLREDUCE, 100000, t, NA);
    cr_assert_eq(nwarn, 1, "one warning per communicator:\n%s", logbuf);
    cr_assert(strstr(logbuf, "tree asked (FASTREDUCE_TUNE_FILE rule at line 2), which NCCL cannot run here"), "%s",
              logbuf);
    /* one rank: NCCL offers ring/Simple at cost 0 and nothing else */
    void *solo = init5(1, 1);
    float s[NA][NP];
    for (int a = 0; a < NA; a++)
        for (int p = 0; p < NP; p++) s[a][p] = FRN_UNSUPPORTED;
    s[FRN_ALGO_RING][FRN_PROTO_SIMPLE] = 0.0f;
    expect_untouched(solo, FRN_FUNC_ALLREDUCE, 1024, s, NA);   /* tree asked */
    expect_untouched(solo, FRN_FUNC_BROADCAST, 1024, s, NA);   /* ring/LL asked */
    v5->finalize(one);
    v5->finalize(solo);
}

/* A forced entry wins even where NCCL set another one to 0 (NCCL keeps
 * the first of equal entries, and tree comes before ring). */
Test(tuner, forced_entry_beats_a_zero)
{
    table_file(RULES);
    void *one = init5(8, 1);
    float t[NA][NP];
    int a, p;
    fill(t);
    t[FRN_ALGO_TREE][FRN_PROTO_LL] = 0.0f;
    ask(one, FRN_FUNC_ALLREDUCE, 100000, t, &a, &p);
    cr_assert(a == FRN_ALGO_RING && p == FRN_PROTO_LL128, "(%d, %d)", a, p);
    cr_assert_gt(t[FRN_ALGO_TREE][FRN_PROTO_LL], 0.0f);
    v5->finalize(one);
}

/* A malformed table is reported through NCCL's logger; its good rules
 * still apply. A missing one leaves NCCL's choice, with a warning. */
Test(tuner, malformed_and_missing_tables)
{
    table_file("# fastreduce tuning table v1\n"
               "allreduce cuda * * 0-64K nccl_tree proto=fast\n"
               "allreduce cuda * * zz nccl_ring\n"
               "allreduce cuda * * * nccl_ring\n");
    void *ctx = init5(4, 1);
    cr_assert_geq(nwarn, 2, "%s", logbuf);
    cr_assert(strstr(logbuf, ":2: ") && strstr(logbuf, "proto='fast'") && strstr(logbuf, ":3: "), "%s", logbuf);
    expect(ctx, FRN_FUNC_ALLREDUCE, 1024, FRN_ALGO_RING, FRN_PROTO_LL);
    v5->finalize(ctx);
    table_done();   /* (before the variable names another file) */

    setenv("FASTREDUCE_TUNE_FILE", "/nonexistent/fr.tune", 1);
    nwarn = 0;
    logbuf[0] = '\0';
    ctx = init5(4, 1);
    cr_assert_eq(nwarn, 1, "%s", logbuf);
    cr_assert(strstr(logbuf, "FASTREDUCE_TUNE_FILE=/nonexistent/fr.tune cannot be read"), "%s", logbuf);
    float t[NA][NP];
    fill(t);
    expect_untouched(ctx, FRN_FUNC_ALLREDUCE, 1024, t, NA);
    v5->finalize(ctx);

    unsetenv("FASTREDUCE_TUNE_FILE");
    logbuf[0] = '\0';
    ctx = init5(4, 1);
    cr_assert(strstr(logbuf, "0 cuda rule(s) for NCCL from nowhere"), "%s", logbuf);
    expect_untouched(ctx, FRN_FUNC_ALLREDUCE, 1024, t, NA);
    v5->finalize(ctx);
}

/* FASTREDUCE_TUNE's rules come before the file's. */
Test(tuner, inline_rules_first)
{
    table_file(RULES);
    setenv("FASTREDUCE_TUNE", "allreduce cuda * * 0-4K nccl_ring proto=simple", 1);
    void *ctx = init5(8, 1);
    expect(ctx, FRN_FUNC_ALLREDUCE, 4096, FRN_ALGO_RING, FRN_PROTO_SIMPLE);
    expect(ctx, FRN_FUNC_ALLREDUCE, 4097, FRN_ALGO_TREE, FRN_PROTO_LL);
    v5->finalize(ctx);
}

/* fastreduce's hint for the call wins over every rule; cleared, the
 * rules apply again. */
Test(tuner, hint_before_rules)
{
    table_file(RULES);
    void *ctx = init5(8, 1);
    fr_nccl_hint_set(FRN_ALGO_RING, FR_PROTO_SIMPLE);
    expect(ctx, FRN_FUNC_ALLREDUCE, 1024, FRN_ALGO_RING, FRN_PROTO_SIMPLE);
    fr_nccl_hint_set(FRN_ALGO_TREE, FR_PROTO_AUTO);
    expect(ctx, FRN_FUNC_ALLREDUCE, 100000, FRN_ALGO_TREE, FRN_PROTO_LL);
    fr_nccl_hint_set(FR_NCCL_ALGO_NCCL, FR_PROTO_AUTO);
    float t[NA][NP];
    fill(t);
    expect_untouched(ctx, FRN_FUNC_ALLREDUCE, 100000, t, NA);
    fr_nccl_hint_clear();
    expect(ctx, FRN_FUNC_ALLREDUCE, 100000, FRN_ALGO_RING, FRN_PROTO_LL128);
    cr_assert(strstr(logbuf, "(fastreduce's choice for this call)"), "%s", logbuf);
    v5->finalize(ctx);
}

/* The v4 and v3 entry points (NCCL 2.22-2.27) decide the same, on tables of
 * 6 algorithms (2.22) as well; a table of another protocol count is left. */
Test(tuner, v4_and_v3_entry_points)
{
    table_file(RULES);
    const frn_tuner_v4_t *v4 = dlsym(lib, "ncclTunerPlugin_v4");
    const frn_tuner_v3_t *v3 = dlsym(lib, "ncclTunerPlugin_v3");
    void *c4 = NULL, *c3 = NULL;
    cr_assert_eq(v4->init(8, 1, logger, &c4), FRN_SUCCESS);
    cr_assert_eq(v3->init(8, 1, logger, &c3), FRN_SUCCESS);
    float t[NA][NP];
    int a, p, nch = 0;
    fill(t);
    cr_assert_eq(v4->getCollInfo(c4, FRN_FUNC_ALLREDUCE, 100000, 1, (float **)t, NA, NP, 1, &nch), FRN_SUCCESS);
    pick(t, NA, &a, &p);
    cr_assert(a == FRN_ALGO_RING && p == FRN_PROTO_LL128);
    fill(t);
    cr_assert_eq(v3->getCollInfo(c3, FRN_FUNC_ALLREDUCE, 100, 1, (float **)t, 6, NP, &nch), FRN_SUCCESS);
    pick(t, 6, &a, &p);
    cr_assert(a == FRN_ALGO_TREE && p == FRN_PROTO_LL);
    fill(t);
    float before[NA][NP];
    memcpy(before, t, sizeof t);
    cr_assert_eq(v4->getCollInfo(c4, FRN_FUNC_ALLREDUCE, 100000, 1, (float **)t, NA, 2, 1, &nch), FRN_SUCCESS);
    cr_assert_eq(memcmp(before, t, sizeof t), 0);
    cr_assert_eq(v4->destroy(c4), FRN_SUCCESS);
    cr_assert_eq(v3->destroy(c3), FRN_SUCCESS);
}

/* v5: the ranks per node come from NCCL's NVLink-domain summary (the most
 * local ranks), not from ranks / nodes, which differs on uneven nodes. */
Test(tuner, v5_ppn_from_nvl_domains)
{
    table_file("# fastreduce tuning table v1\n"
               "allreduce cuda 2 6 * nccl_ring proto=simple\n"
               "allreduce cuda 2 4 * nccl_tree\n");
    void *ctx = NULL;
    frn_nvl_domain_v5_t nvl = { 2, 2, 6 };   /* 8 ranks: 6 on one node, 2 on the other */
    cr_assert_eq(v5->init(&ctx, 7, 8, 2, logger, &nvl, NULL), FRN_SUCCESS);
    expect(ctx, FRN_FUNC_ALLREDUCE, 4096, FRN_ALGO_RING, FRN_PROTO_SIMPLE);
    v5->finalize(ctx);
    cr_assert_eq(v5->init(&ctx, 7, 8, 2, logger, NULL, NULL), FRN_SUCCESS);  /* no summary: 8 / 2 */
    expect(ctx, FRN_FUNC_ALLREDUCE, 4096, FRN_ALGO_TREE, FRN_PROTO_LL);
    v5->finalize(ctx);
}

/* Nobody reading INFO (no NCCL_DEBUG, FASTREDUCE_DEBUG at WARN): the choice
 * is forced all the same, and no per-call line is written. */
Test(tuner, quiet_without_info)
{
    unsetenv("NCCL_DEBUG");
    table_file(RULES);
    void *ctx = init5(8, 1);
    logbuf[0] = '\0';
    expect(ctx, FRN_FUNC_ALLREDUCE, 100000, FRN_ALGO_RING, FRN_PROTO_LL128);
    cr_assert_eq(logbuf[0], '\0', "%s", logbuf);
    v5->finalize(ctx);
}

/* No context, no table, no logger: still success, nothing written. */
Test(tuner, null_arguments)
{
    int nch = 0;
    cr_assert_eq(v5->getCollInfo(NULL, FRN_FUNC_ALLREDUCE, 1024, 1, NULL, NA, NP, 0, &nch), FRN_SUCCESS);
    table_file(RULES);
    void *ctx = NULL;
    cr_assert_eq(v5->init(&ctx, 1, 8, 0, NULL, NULL, NULL), FRN_SUCCESS);  /* nNodes 0 read as 1 */
    cr_assert_eq(v5->getCollInfo(ctx, FRN_FUNC_ALLREDUCE, 1024, 1, NULL, NA, NP, 0, &nch), FRN_SUCCESS);
    float t[NA][NP];
    int a, p;
    fill(t);
    cr_assert_eq(v5->getCollInfo(ctx, FRN_FUNC_ALLREDUCE, 100000, 1, (float **)t, NA, NP, 0, &nch), FRN_SUCCESS);
    pick(t, NA, &a, &p);
    cr_assert(a == FRN_ALGO_RING && p == FRN_PROTO_LL128);
    cr_assert_eq(v5->finalize(ctx), FRN_SUCCESS);
    cr_assert_eq(v5->finalize(NULL), FRN_SUCCESS);
}

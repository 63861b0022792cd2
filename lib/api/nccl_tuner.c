/* NCCL's tuner plugin, steered by fastreduce's tables (NCCL loads it
 * through libnccl-tuner-fastreduce.so, nccl_tuner_shim.c). NCCL 2.28 finds
 * ncclTunerPlugin_v5, 2.24-2.27 ncclTunerPlugin_v4, 2.22-2.23
 * ncclTunerPlugin_v3 (the ABI is in nccl_tuner_abi.h).
 *
 * For every allreduce and broadcast NCCL is about to run it decides, in
 * this order: fastreduce's hint for the call (fastreduce's own NCCL calls,
 * nccl_plugin.h); else the first cuda rule of FASTREDUCE_TUNE, then of
 * FASTREDUCE_TUNE_FILE, that matches the communicator's nodes, ranks per
 * node and the call's bytes and names nccl_ring, nccl_tree or nccl. It
 * forces the choice by setting that cost-table entry to 0 (the protocol
 * the rule gives with proto=, else the cheapest one NCCL allows for that
 * algorithm). An entry NCCL marked unsupported (-1) is never touched: the
 * plugin then leaves NCCL's choice, and says so once per communicator.
 * Every function returns success, because NCCL fails the user's call on
 * any other answer; with nothing to say the table is left as it came. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "registry.h"
#include "log.h"
#include "nccl_plugin.h"
#include "nccl_tuner_abi.h"
#include "settings.h"
#include "tune.h"

typedef struct {
    uint64_t     nranks, nnodes, ppn;
    frn_logger_t log;
    fr_table_t   rules;        /* FASTREDUCE_TUNE's, then FASTREDUCE_TUNE_FILE's */
    int          warned;       /* an unsupported forced entry was reported */
    int          info;         /* NCCL's or our INFO is on: per-call lines are worth formatting */
} ctx_t;

/* One line to NCCL's logger (subsystem TUNING) and to fastreduce's. */
static void plog(const ctx_t *c, frn_logger_t log, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void plog(const ctx_t *c, frn_logger_t log, int level, const char *fmt, ...)
{
    char buf[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!log && c) log = c->log;
    if (log) log(level, FRN_LOG_TUNING, __FILE__, __LINE__, "fastreduce tuner: %s", buf);
    if (level == FRN_LOG_WARN) FR_WARN(FR_SUB_NCCL, "NCCL tuner plugin: %s", buf);
    else FR_INFO(FR_SUB_NCCL, "NCCL tuner plugin: %s", buf);
}

static void diag(void *arg, const char *source, int line, const char *msg)
{
    if (line > 0) plog(arg, NULL, FRN_LOG_WARN, "%s:%d: %s", source, line, msg);
    /* (line 0: the file cannot be read, which init reports itself) */
}

static int cuda_rules(const fr_table_t *t)
{
    int n = 0;
    for (int i = 0; i < t->n; i++)
        n += (t->rules[i].mem & FR_MEM_CUDA) && fr_nccl_algo_of(fr_algs[t->rules[i].alg]->name) != FR_NCCL_ALGO_NONE;
    return n;
}

static int nccl_info_on(void)
{
    const char *d = fr_foreign_get(FR_F_NCCL_DEBUG);
    return d && (!strcasecmp(d, "INFO") || !strcasecmp(d, "TRACE"));
}

/* @p ppn: the most ranks on one node when NCCL says (v5), else 0 */
static frn_result_t init_common(size_t nranks, size_t nnodes, size_t ppn, frn_logger_t log, void **out)
{
    fr_log_init();
    fr_nccl_plugin_note_init();
    if (!out) return FRN_SUCCESS;
    ctx_t *c = calloc(1, sizeof *c);
    *out = c;
    if (!c) {
        plog(NULL, log, FRN_LOG_WARN, "out of memory; NCCL's own choice stays for this communicator");
        return FRN_SUCCESS;
    }
    c->log = log;
    c->nranks = nranks;
    c->nnodes = nnodes ? nnodes : 1;
    c->ppn = ppn ? ppn : (c->nranks + c->nnodes - 1) / c->nnodes;
    c->info = nccl_info_on() || FR_LOG_ON(FR_LOG_INFO, FR_SUB_NCCL);
    /* (read at each NCCL communicator, which may belong to a program without fr_comm_create) */
    fr_settings_t set = {0};
    fr_settings_load(&set, NULL, -1, FR_S_BIT(FR_S_TUNE) | FR_S_BIT(FR_S_TUNE_FILE));
    const char *tune = set.tune, *file = set.tune_file;
    if (tune) fr_table_parse(&c->rules, tune, "FASTREDUCE_TUNE", FR_SRC_TUNE, diag, c, NULL);
    if (file && fr_table_parse_file(&c->rules, file, diag, c, NULL) != FR_SUCCESS)
        plog(c, NULL, FRN_LOG_WARN, "FASTREDUCE_TUNE_FILE=%s cannot be read (%s); its rules do not apply", file,
             fr_last_error());
    int n = cuda_rules(&c->rules);
    plog(c, NULL, FRN_LOG_INFO, "communicator of %zu ranks on %zu node(s): %d cuda rule(s) for NCCL from %s%s%s%s",
         nranks, nnodes, n, tune ? "FASTREDUCE_TUNE" : "", tune && file ? " and " : "",
         file ? "FASTREDUCE_TUNE_FILE=" : "", file ? file : tune ? "" : "nowhere (NCCL chooses unless fastreduce hints)");
    fr_settings_free(&set);
    return FRN_SUCCESS;
}

/* The choice for this call: 1 with *algo (a row or FR_NCCL_ALGO_NCCL) and
 * *proto, and where it came from in @p why; 0 when there is none. */
static int decide(const ctx_t *c, int coll, size_t nbytes, int *algo, int *proto, char *why, size_t len)
{
    if (fr_nccl_hint_get(algo, proto)) {
        snprintf(why, len, "fastreduce's choice for this call");
        return 1;
    }
    int fc = coll == FRN_FUNC_ALLREDUCE ? FR_COLL_ALLREDUCE : coll == FRN_FUNC_BROADCAST ? FR_COLL_BCAST : -1;
    if (fc < 0) return 0;
    for (int i = -1; (i = fr_table_match(&c->rules, i + 1, fc, FR_MEM_CUDA, c->nnodes, c->ppn, nbytes)) >= 0;) {
        const fr_rule_t *r = &c->rules.rules[i];
        int a = fr_nccl_algo_of(fr_algs[r->alg]->name);
        if (a == FR_NCCL_ALGO_NONE) continue;
        *algo = a;
        *proto = r->proto;
        snprintf(why, len, "%s rule at line %d", fr_rule_src_name(r->src), r->line);
        return 1;
    }
    return 0;
}

/* Force (algo, proto) in the cost table: 1 if done, 0 if NCCL cannot run it. */
static int force(float **cost, int num_algo, int num_proto, int algo, int proto, int *pchosen)
{
    if (num_proto != FRN_NUM_PROTOS || algo < 0 || algo >= num_algo) return 0;
    float (*t)[FRN_NUM_PROTOS] = (float (*)[FRN_NUM_PROTOS])cost;
    int p = -1;
    if (proto != FR_PROTO_AUTO) {
        p = proto - 1;
        if (t[algo][p] < 0) return 0;
    } else {
        for (int q = 0; q < FRN_NUM_PROTOS; q++)
            if (t[algo][q] >= 0 && (p < 0 || t[algo][q] < t[algo][p])) p = q;
        if (p < 0) return 0;
    }
    /* NCCL takes the first smallest entry: nothing else may tie at 0 */
    for (int a = 0; a < num_algo; a++)
        for (int q = 0; q < FRN_NUM_PROTOS; q++)
            if (t[a][q] == 0.0f) t[a][q] = 1e-6f;
    t[algo][p] = 0.0f;
    *pchosen = p;
    return 1;
}

static const char *coll_name(int coll)
{
    static const char *const names[] = { "broadcast", "reduce", "allgather", "reducescatter", "allreduce" };
    return coll >= 0 && coll <= FRN_FUNC_ALLREDUCE ? names[coll] : "collective";
}

static frn_result_t get_coll_info(void *ctx, int coll, size_t nbytes, int num_pipe_ops, float **cost,
                                  int num_algo, int num_proto, int reg_buff, int *nchannels)
{
    (void)num_pipe_ops, (void)reg_buff, (void)nchannels;
    ctx_t *c = ctx;
    int algo, proto, p;
    char why[160];
    if (!c || !cost || !decide(c, coll, nbytes, &algo, &proto, why, sizeof why)) return FRN_SUCCESS;
    static const char *const pnames[] = { "LL", "LL128", "Simple" };
    if (algo == FR_NCCL_ALGO_NCCL) {
        if (c->info) plog(c, NULL, FRN_LOG_INFO, "%s of %zu bytes: NCCL's own choice (%s)", coll_name(coll), nbytes, why);
    } else if (force(cost, num_algo, num_proto, algo, proto, &p)) {
        if (c->info) plog(c, NULL, FRN_LOG_INFO, "%s of %zu bytes: %s/%s forced (%s)", coll_name(coll), nbytes,
             fr_nccl_algo_name(algo), pnames[p], why);
    } else if (!__atomic_exchange_n(&c->warned, 1, __ATOMIC_RELAXED)) {
        plog(c, NULL, FRN_LOG_WARN, "%s of %zu bytes: %s%s%s asked (%s), which NCCL cannot run here; NCCL's own "
             "choice stays (said once per communicator)", coll_name(coll), nbytes, fr_nccl_algo_name(algo),
             proto ? "/" : "", proto ? pnames[proto - 1] : "", why);
    }
    return FRN_SUCCESS;
}

static frn_result_t get_coll_info_v3(void *ctx, int coll, size_t nbytes, int num_pipe_ops, float **cost,
                                     int num_algo, int num_proto, int *nchannels)
{
    return get_coll_info(ctx, coll, nbytes, num_pipe_ops, cost, num_algo, num_proto, 0, nchannels);
}

static frn_result_t finish(void *ctx)
{
    ctx_t *c = ctx;
    if (c) fr_table_free(&c->rules);
    free(c);
    return FRN_SUCCESS;
}

static frn_result_t init_v5(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes, frn_logger_t log,
                            frn_nvl_domain_v5_t *nvl, frn_constants_v5_t *constants)
{
    (void)comm_id, (void)constants;
    /* NCCL 2.28 fills the NVLink domain summary with its nodes and local ranks */
    size_t ppn = nvl && nvl->maxRanksPerNvlDomain > 0 && nvl->nNvlDomains == (int)nnodes ?
                 (size_t)nvl->maxRanksPerNvlDomain : 0;
    return init_common(nranks, nnodes, ppn, log, ctx);
}

static frn_result_t init_v4(size_t nranks, size_t nnodes, frn_logger_t log, void **ctx)
{
    return init_common(nranks, nnodes, 0, log, ctx);
}

/* Exported by libfastreduce.so (and by the project's programs, which link
 * the library statically): libnccl-tuner-fastreduce.so hands them to NCCL. */
FR_API const frn_tuner_v5_t ncclTunerPlugin_v5 = { "fastreduce", init_v5, get_coll_info, finish };
FR_API const frn_tuner_v4_t ncclTunerPlugin_v4 = { "fastreduce", init_v4, get_coll_info, finish };
FR_API const frn_tuner_v3_t ncclTunerPlugin_v3 = { "fastreduce", init_v4, get_coll_info_v3, finish };

/* The metrics and their Prometheus text (metrics.h). */
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "metrics.h"

/* Call-time buckets: 1 us to about 4 s, each 4 times the last. The
 * bounds are written as these strings, each the shortest that reads back
 * as the bound (%g's six digits would make 1.048576 "1.04858"). */
#define NBUCKET 12
static const char *const bucket_le[NBUCKET] = {"1e-06", "4e-06", "1.6e-05", "6.4e-05", "0.000256", "0.001024",
                                               "0.004096", "0.016384", "0.065536", "0.262144", "1.048576",
                                               "4.194304"};

typedef struct {
    uint64_t calls, bytes, ns, wait_ns, arrive_ns, queued_ns;
    uint64_t bucket[NBUCKET + 1];   /* per bucket, not cumulative; the last is above every bound */
} cell_t;

#define NCOLL 2
#define MAX_PASSED 32

static cell_t *cells;            /* [coll][alg][cuda][zcopy] */
static int nalg, my_rank = -1;
static const char *const *alg_names;
static uint64_t failures[NCOLL][FR_STATUS_COUNT];
static int64_t comms;
static struct { char call[16], reason[64]; uint64_t n; } passed[MAX_PASSED];
static int npassed, warned_full;
static pthread_mutex_t passed_lock = PTHREAD_MUTEX_INITIALIZER;

/* The status label: the enum's name without FR_ERR_, in lower case. */
static const char *const status_label[FR_STATUS_COUNT] = {
    "success", "invalid_arg", "null_pointer", "count", "root", "unsupported_op", "bad_comm", "not_supported",
    "no_memory", "mpi", "ucx", "system", "not_initialized", "config", "mismatch", "timed_out", "internal", "cuda",
    "pending"};

#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define GET(p) __atomic_load_n((p), __ATOMIC_RELAXED)

int fr_metrics_on(void) { return __atomic_load_n(&cells, __ATOMIC_ACQUIRE) != NULL; }

int fr_metrics_init(int n, const char *const *algs, int rank)
{
    if (fr_metrics_on()) return 1;
    cell_t *c = calloc((size_t)NCOLL * (size_t)n * 4, sizeof *c);
    if (!c) return 0;
    nalg = n;
    alg_names = algs;
    my_rank = rank;
    __atomic_store_n(&cells, c, __ATOMIC_RELEASE);
    return 1;
}

static cell_t *cell(int coll, int alg, int cuda, int zcopy)
{
    return &cells[(((size_t)coll * (size_t)nalg + (size_t)alg) * 2 + (size_t)(cuda != 0)) * 2 + (size_t)(zcopy != 0)];
}

void fr_metrics_call(int coll, int alg, int cuda, int zcopy, size_t bytes, const fr_trace_call_t *rec,
                     fr_status_t st)
{
    if (!fr_metrics_on() || coll < 0 || coll >= NCOLL || alg < 0 || alg >= nalg) return;
    if (st != FR_SUCCESS) {
        fr_metrics_failure(coll, st);
        return;
    }
    cell_t *c = cell(coll, alg, cuda, zcopy);
    uint64_t ns = rec->t_end - rec->t_start;
    ADD(&c->calls, 1);
    ADD(&c->bytes, (uint64_t)bytes);
    ADD(&c->ns, ns);
    ADD(&c->wait_ns, rec->ns[FR_PH_WAIT] + rec->ns[FR_PH_ARRIVE]);
    ADD(&c->arrive_ns, rec->ns[FR_PH_ARRIVE]);
    ADD(&c->queued_ns, rec->ns[FR_PH_QUEUED]);
    int b = 0;   /* (bucket_le[b] is 4^b us: compared in integer ns) */
    while (b < NBUCKET && ns > (1000ull << (2 * b))) b++;
    ADD(&c->bucket[b], 1);
}

void fr_metrics_failure(int coll, fr_status_t st)
{
    if (!fr_metrics_on() || coll < 0 || coll >= NCOLL || (unsigned)st >= FR_STATUS_COUNT) return;
    ADD(&failures[coll][st], 1);
}

void fr_metrics_passed(const char *call, const char *reason)
{
    if (!fr_metrics_on()) return;
    pthread_mutex_lock(&passed_lock);
    int i;
    for (i = 0; i < npassed; i++)
        if (!strcmp(passed[i].call, call) && !strcmp(passed[i].reason, reason)) break;
    if (i == npassed && npassed < MAX_PASSED) {
        snprintf(passed[i].call, sizeof passed[i].call, "%s", call);
        snprintf(passed[i].reason, sizeof passed[i].reason, "%s", reason);
        npassed++;
    }
    if (i == npassed && !warned_full) {
        warned_full = 1;
        FR_WARN(FR_SUB_INIT, "metrics: more than %d kinds of call passed to MPI; later kinds are not counted",
                MAX_PASSED);
    }
    if (i < npassed) passed[i].n++;
    pthread_mutex_unlock(&passed_lock);
}

void fr_metrics_comms(int delta) { ADD(&comms, delta); }

/* A growing string. */
typedef struct { char *s; size_t len, cap; int failed; } text_t;

static void put(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = t->failed ? 0 : vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (t->failed || n < 0) { t->failed = 1; return; }
        if ((size_t)n < t->cap - t->len) { t->len += (size_t)n; return; }
        size_t cap = t->cap * 2 + (size_t)n + 1;
        char *s = realloc(t->s, cap);
        if (!s) { t->failed = 1; return; }
        t->s = s;
        t->cap = cap;
    }
}

static void head(text_t *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value as the text format wants it: backslash, quote and newline escaped. */
static void escape(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (; *in && o + 2 < len; in++) {
        if (*in == '\\' || *in == '"') out[o++] = '\\';
        if (*in == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
            continue;
        }
        out[o++] = *in;
    }
    out[o] = '\0';
}

static const char *const coll_label[NCOLL] = {"allreduce", "bcast"};

/* The label set of a cell: collective, algorithm, memory, path, rank. */
static void labels(char *buf, size_t len, int coll, int alg, int cuda, int zc)
{
    snprintf(buf, len, "collective=\"%s\",algorithm=\"%s\",memory=\"%s\",path=\"%s\",rank=\"%d\"", coll_label[coll],
             alg_names[alg], cuda ? "cuda" : "host", zc ? "zero_copy" : "copy", my_rank);
}

/* One counter per used cell: @p field's value, scaled by @p scale. */
static void cell_counter(text_t *t, const char *name, const char *help, size_t field, double scale)
{
    head(t, name, "counter", help);
    for (int k = 0; k < NCOLL; k++)
        for (int a = 0; a < nalg; a++)
            for (int m = 0; m < 4; m++) {
                cell_t *c = cell(k, a, m >> 1, m & 1);
                if (!GET(&c->calls)) continue;
                char l[192];
                labels(l, sizeof l, k, a, m >> 1, m & 1);
                uint64_t v = GET((uint64_t *)((char *)c + field));
                if (scale == 1.0) put(t, "%s{%s} %llu\n", name, l, (unsigned long long)v);
                else put(t, "%s{%s} %.9g\n", name, l, (double)v * scale);
            }
}

static void histograms(text_t *t)
{
    const char *name = "fastreduce_collective_seconds";
    head(t, name, "histogram", "Time of the collectives that completed, from their start to their end (a device "
         "call's: until its work is issued)");
    for (int k = 0; k < NCOLL; k++)
        for (int a = 0; a < nalg; a++)
            for (int m = 0; m < 4; m++) {
                cell_t *c = cell(k, a, m >> 1, m & 1);
                uint64_t calls = GET(&c->calls);
                if (!calls) continue;
                char l[192];
                labels(l, sizeof l, k, a, m >> 1, m & 1);
                uint64_t cum = 0;
                for (int b = 0; b < NBUCKET; b++) {
                    cum += GET(&c->bucket[b]);
                    put(t, "%s_bucket{%s,le=\"%s\"} %llu\n", name, l, bucket_le[b], (unsigned long long)cum);
                }
                cum += GET(&c->bucket[NBUCKET]);
                put(t, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, l, (unsigned long long)cum);
                put(t, "%s_sum{%s} %.9g\n", name, l, (double)GET(&c->ns) * 1e-9);
                put(t, "%s_count{%s} %llu\n", name, l, (unsigned long long)cum);
            }
}

char *fr_metrics_render(size_t *len)
{
    if (!fr_metrics_on()) return NULL;
    text_t t = {malloc(16384), 0, 16384, 0};
    if (!t.s) return NULL;
    head(&t, "fastreduce_info", "gauge", "The library's version (value 1)");
    put(&t, "fastreduce_info{version=\"%s\",rank=\"%d\"} 1\n", fr_version(), my_rank);
    head(&t, "fastreduce_communicators", "gauge", "Communicators alive in this process");
    put(&t, "fastreduce_communicators{rank=\"%d\"} %lld\n", my_rank, (long long)GET(&comms));
    cell_counter(&t, "fastreduce_collective_calls_total", "Collectives completed", offsetof(cell_t, calls), 1.0);
    cell_counter(&t, "fastreduce_collective_bytes_total", "Bytes of the collectives completed (count times the "
                 "datatype's size)", offsetof(cell_t, bytes), 1.0);
    histograms(&t);
    cell_counter(&t, "fastreduce_collective_wait_seconds_total", "Time the collectives waited for peers, their "
                 "arrival included", offsetof(cell_t, wait_ns), 1e-9);
    cell_counter(&t, "fastreduce_collective_arrive_seconds_total", "Time the collectives waited for the peers they "
                 "needed first to arrive", offsetof(cell_t, arrive_ns), 1e-9);
    cell_counter(&t, "fastreduce_collective_queued_seconds_total", "Time non-blocking collectives waited in their "
                 "communicator's queue before they started", offsetof(cell_t, queued_ns), 1e-9);
    head(&t, "fastreduce_collective_failures_total", "counter", "Collectives that failed, by status (timed_out: "
         "FASTREDUCE_TIMEOUT, mismatch: FASTREDUCE_CHECK)");
    for (int k = 0; k < NCOLL; k++)
        for (int s = 1; s < FR_STATUS_COUNT; s++) {
            uint64_t v = GET(&failures[k][s]);
            /* (the two that sites alert on are always there, so that a rule sees 0) */
            if (v || s == FR_ERR_TIMED_OUT || s == FR_ERR_MISMATCH)
                put(&t, "fastreduce_collective_failures_total{collective=\"%s\",status=\"%s\",rank=\"%d\"} %llu\n",
                    coll_label[k], status_label[s], my_rank, (unsigned long long)v);
        }
    head(&t, "fastreduce_mpi_passed_total", "counter", "MPI-signature calls (FR_Allreduce, the interposer's "
         "MPI_Allreduce, ...) passed to the MPI library, by reason");
    pthread_mutex_lock(&passed_lock);
    for (int i = 0; i < npassed; i++) {
        char reason[2 * sizeof passed[i].reason];
        escape(passed[i].reason, reason, sizeof reason);
        put(&t, "fastreduce_mpi_passed_total{call=\"%s\",reason=\"%s\",rank=\"%d\"} %llu\n", passed[i].call,
            reason, my_rank, (unsigned long long)passed[i].n);
    }
    pthread_mutex_unlock(&passed_lock);
    if (t.failed) {
        free(t.s);
        return NULL;
    }
    *len = t.len;
    return t.s;
}

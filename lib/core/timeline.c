/* The timeline writer (timeline.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "log.h"
#include "timeline.h"

static FILE *tl;
static int tl_rank;
static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;
/* Phases shorter than this between two others are not written as data
 * movement of their own: they are the bookkeeping between two steps. */
#define MIN_MOVE_NS 1000

/* The threads named so far, so that each gets its metadata event once. */
#define MAX_THREADS 64
static long named[MAX_THREADS];
static int nnamed;

static long my_tid(void) { return (long)syscall(SYS_gettid); }

/* The thread's metadata event, once (lock held). */
static void name_thread(long tid, const char *name)
{
    for (int i = 0; i < nnamed; i++)
        if (named[i] == tid) {
            if (!name) return;
            break;   /* (renamed: written again) */
        }
    if (nnamed < MAX_THREADS) named[nnamed++] = tid;
    char dflt[32];
    if (!name) {
        snprintf(dflt, sizeof dflt, tid == (long)getpid() ? "main" : "thread %ld", tid);
        name = dflt;
    }
    fprintf(tl, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":\"%s\"}},\n",
            tl_rank, tid, name);
}

/* @p in with the characters that JSON would need escaped replaced by '_'
 * (names the program or the system gives: spans, the host). */
static void json_safe(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < len; p++)
        out[o++] = ((unsigned char)*p >= 0x20 && *p != '"' && *p != '\\') ? *p : '_';
    out[o] = '\0';
}

/* Push the buffer to the file at most once a second (lock held), so that
 * a rank that is killed leaves all but its last second. */
static void flush_now_and_then(uint64_t now)
{
    static uint64_t last;
    if (now - last < 1000000000u) return;
    last = now;
    fflush(tl);
}

int fr_timeline_open(const char *pattern, int rank, const char *host)
{
    char path[1024];
    fr_path_expand(pattern, rank, path, sizeof path);
    if (!strstr(pattern, "%p") && !strstr(pattern, "%r")) {
        size_t o = strlen(path);
        snprintf(path + o, sizeof path - o, ".%d", rank);
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_TIMELINE=%s: cannot write %s (%s); no timeline", pattern, path,
                strerror(errno));
        return 0;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 18);
    char safe_host[64];
    json_safe(host, safe_host, sizeof safe_host);
    pthread_mutex_lock(&tl_lock);
    tl = f;
    tl_rank = rank;
    fprintf(tl, "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (%s)\"}},\n",
            rank, rank, safe_host);
    fprintf(tl, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
            rank, rank);
    fflush(tl);
    pthread_mutex_unlock(&tl_lock);
    return 1;
}

int fr_timeline_on(void) { return __atomic_load_n(&tl, __ATOMIC_RELAXED) != NULL; }

void fr_timeline_clock(int64_t offset_ns, uint64_t uncertainty_ns, const char *comm_key, int ref_rank)
{
    pthread_mutex_lock(&tl_lock);
    if (tl)
        fprintf(tl, "{\"name\":\"fastreduce_clock\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"offset_us\":%.3f,"
                "\"uncertainty_us\":%.3f,\"comm\":\"%s\",\"reference_rank\":%d}},\n",
                tl_rank, (double)offset_ns / 1e3, (double)uncertainty_ns / 1e3, comm_key, ref_rank);
    pthread_mutex_unlock(&tl_lock);
}

/* One complete event (lock held); @p args is the inside of its args object. */
static void event(const char *name, const char *cat, long tid, uint64_t t0, uint64_t t1, const char *args)
{
    fprintf(tl, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,\"ts\":%.3f,\"dur\":%.3f,"
            "\"args\":{%s}},\n", name, cat, tl_rank, tid, (double)t0 / 1e3, (double)(t1 - t0) / 1e3, args);
}

/* The time a request waited in its queue: an async event (a track of its
 * own), since requests queue while the thread that runs them runs others,
 * and complete events on one thread must nest. */
static void queued(const fr_trace_call_t *rec, long tid, const char *args)
{
    static unsigned long id;
    id++;
    fprintf(tl, "{\"name\":\"queued\",\"cat\":\"queued\",\"ph\":\"b\",\"id\":%lu,\"pid\":%d,\"tid\":%ld,"
            "\"ts\":%.3f,\"args\":{%s}},\n", id, tl_rank, tid, (double)rec->t_issue / 1e3, args);
    fprintf(tl, "{\"name\":\"queued\",\"cat\":\"queued\",\"ph\":\"e\",\"id\":%lu,\"pid\":%d,\"tid\":%ld,"
            "\"ts\":%.3f},\n", id, tl_rank, tid, (double)rec->t_start / 1e3);
}

/* The phases of @p rec inside its call, with data movement between them. */
static void phases(const fr_trace_call_t *rec, long tid, const char *args)
{
    uint64_t at = rec->t_start;
    for (int i = 0; i <= rec->nph; i++) {
        uint64_t t0 = i < rec->nph ? rec->ph[i].t0 : rec->t_end;
        if (t0 > at && (t0 - at >= MIN_MOVE_NS || i == rec->nph || at == rec->t_start))
            event("move", "phase", tid, at, t0, args);
        if (i == rec->nph) break;
        uint64_t t1 = rec->ph[i].t1 > rec->t_end ? rec->t_end : rec->ph[i].t1;
        if (t1 > t0 || rec->ph[i].kind == FR_PH_ARRIVE)
            event(fr_phase_name((fr_phase_t)rec->ph[i].kind), "phase", tid, t0, t1 > t0 ? t1 : t0, args);
        if (t1 > at) at = t1;
    }
}

void fr_timeline_call(const fr_tl_call_t *c, const fr_trace_call_t *rec)
{
    char args[640], ids[96];
    snprintf(ids, sizeof ids, "\"comm\":\"%s\",\"call\":%lu", c->comm, (unsigned long)c->seq);
    snprintf(args, sizeof args, "%s,\"bytes\":%zu,\"count\":%zu,\"buffers\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
             "\"root\":%d,\"algorithm\":\"%s\",\"memory\":\"%s\",\"zero_copy\":%s,\"status\":\"%s\","
             "\"queued_us\":%.3f,\"arrive_us\":%.3f,\"wait_us\":%.3f,\"reduce_us\":%.3f,\"move_us\":%.3f,"
             "\"phases_dropped\":%d", ids, c->bytes, c->count, c->nbuf, c->dtype, c->op, c->root, c->algorithm,
             c->memory, c->zcopy ? "true" : "false", c->status, rec->ns[FR_PH_QUEUED] / 1e3,
             rec->ns[FR_PH_ARRIVE] / 1e3, rec->ns[FR_PH_WAIT] / 1e3, rec->ns[FR_PH_REDUCE] / 1e3,
             rec->ns[FR_PH_MOVE] / 1e3, rec->dropped);
    long tid = my_tid();
    pthread_mutex_lock(&tl_lock);
    if (tl) {
        name_thread(tid, NULL);
        event(c->name, c->seq ? "collective" : "group", tid, rec->t_start, rec->t_end, args);
        if (rec->t_start > rec->t_issue) queued(rec, tid, ids);
        if (c->seq) phases(rec, tid, ids);
        flush_now_and_then(rec->t_end);
    }
    pthread_mutex_unlock(&tl_lock);
}

void fr_timeline_span(const char *name, uint64_t t0, uint64_t t1)
{
    char safe[64];
    json_safe(name ? name : "span", safe, sizeof safe);
    long tid = my_tid();
    pthread_mutex_lock(&tl_lock);
    if (tl) {
        name_thread(tid, NULL);
        event(safe, "span", tid, t0, t1 > t0 ? t1 : t0, "");
        flush_now_and_then(t1);
    }
    pthread_mutex_unlock(&tl_lock);
}

void fr_timeline_thread_name(const char *name)
{
    long tid = my_tid();
    pthread_mutex_lock(&tl_lock);
    if (tl) name_thread(tid, name);
    pthread_mutex_unlock(&tl_lock);
}

void fr_timeline_flush(void)
{
    pthread_mutex_lock(&tl_lock);
    if (tl) fflush(tl);
    pthread_mutex_unlock(&tl_lock);
}

void fr_timeline_close(void)
{
    pthread_mutex_lock(&tl_lock);
    if (tl) {
        /* (a last event without a comma after it, so that the array is strict JSON) */
        fprintf(tl, "{\"name\":\"fastreduce_end\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{}}\n]\n", tl_rank);
        fclose(tl);
        tl = NULL;
    }
    pthread_mutex_unlock(&tl_lock);
}

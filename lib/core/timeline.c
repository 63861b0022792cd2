/* The timeline writer (timeline.h). A caller copies its call's record into
 * a ring and goes on; a thread of the library formats the ring's records
 * and writes them, so that the timeline costs a call a copy of a few
 * hundred bytes rather than the formatting of a dozen events. Where the
 * ring is full, or the thread could not be made, the caller writes. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "log.h"
#include "timeline_json.h"

#define RING 4096   /* records (about 1.2 KiB each at most) */

static FILE *tl;
static int tl_rank;
/* (taken in this order where more than one is held: drain, ring, file) */
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;  /* one drainer at a time: the thread, or a caller */
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;   /* the file and the named threads */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;
static fr_tl_rec_t *ring;
static unsigned long head, tail;   /* records put, records written */
static int writer_stop;
static pthread_t writer;
static pid_t writer_pid;           /* the process whose thread it is (not a forked child's) */
static pid_t tl_pid;               /* the process that opened the file */

/* The threads named so far, so that each gets its metadata event once.
 * Once the table is full, threads not in it get no default name (the
 * viewers show their tid): naming them would write an event per record. */
#define MAX_THREADS 64
static long named[MAX_THREADS];
static int nnamed;

static long my_tid(void)
{
    static __thread long tid;
    if (!tid) tid = (long)syscall(SYS_gettid);
    return tid;
}

/* The thread's metadata event, once (file lock held). */
static void name_thread(long tid, const char *name)
{
    int i;
    for (i = 0; i < nnamed; i++)
        if (named[i] == tid) {
            if (!name) return;
            break;   /* (renamed: written again) */
        }
    if (i == nnamed) {
        if (nnamed == MAX_THREADS && !name) return;
        if (nnamed < MAX_THREADS) named[nnamed++] = tid;
    }
    char dflt[32];
    if (!name) {
        snprintf(dflt, sizeof dflt, tid == (long)getpid() ? "main" : "thread %ld", tid);
        name = dflt;
    }
    fprintf(tl, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%ld,\"args\":{\"name\":\"%s\"}},\n",
            tl_rank, tid, name);
}

/* Write @p r (file lock taken here). */
static void write_rec(const fr_tl_rec_t *r)
{
    pthread_mutex_lock(&file_lock);
    if (tl) {
        name_thread(r->tid, NULL);
        fr_tl_write(tl, tl_rank, r);
    }
    pthread_mutex_unlock(&file_lock);
}

/* Write what the ring holds; the file is flushed after, so that a rank
 * that is killed leaves all but its last moments. */
static void drain(void)
{
    pthread_mutex_lock(&drain_lock);
    pthread_mutex_lock(&ring_lock);
    unsigned long from = tail, to = head;
    const fr_tl_rec_t *rg = ring;   /* (freed only under drain_lock) */
    pthread_mutex_unlock(&ring_lock);
    if (from == to || !rg) {
        pthread_mutex_unlock(&drain_lock);
        return;
    }
    /* (producers write only at head, outside [from, to)) */
    for (unsigned long i = from; i < to; i++) write_rec(&rg[i % RING]);
    pthread_mutex_lock(&ring_lock);
    tail = to;
    pthread_mutex_unlock(&ring_lock);
    pthread_mutex_lock(&file_lock);
    if (tl) fflush(tl);
    pthread_mutex_unlock(&file_lock);
    pthread_mutex_unlock(&drain_lock);
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ring_lock);
    while (!writer_stop) {
        struct timespec until = fr_realtime_after(0.2);   /* (at least five times a second) */
        if (head == tail) pthread_cond_timedwait(&ring_cond, &ring_lock, &until);
        pthread_mutex_unlock(&ring_lock);
        drain();
        pthread_mutex_lock(&ring_lock);
    }
    pthread_mutex_unlock(&ring_lock);
    return NULL;
}

/* Hand @p r to the writer, or write it here when the ring is full. */
static void put(const fr_tl_rec_t *r)
{
    pthread_mutex_lock(&ring_lock);
    if (ring && head - tail < RING) {
        memcpy(&ring[head % RING], r, fr_tl_rec_size(r));
        if (++head - tail == RING / 2) pthread_cond_signal(&ring_cond);
        pthread_mutex_unlock(&ring_lock);
        return;
    }
    pthread_mutex_unlock(&ring_lock);
    write_rec(r);
}

/* fork(): the child has a copy of the file's buffer and of the ring, and
 * the exit() of a child that never execs would write the buffer into the
 * file again. The buffer is flushed before the fork, with every lock
 * held so that nothing is half written, and the child drops its copies. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&drain_lock);
    pthread_mutex_lock(&ring_lock);
    pthread_mutex_lock(&file_lock);
    if (tl) fflush(tl);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&file_lock);
    pthread_mutex_unlock(&ring_lock);
    pthread_mutex_unlock(&drain_lock);
}

static void fork_child(void)
{
    if (tl) {
        /* (its fd closed first: fclose cannot write what might be left) */
        close(fileno(tl));
        fclose(tl);
        tl = NULL;
    }
    free(ring);   /* (its writer thread is not in the child) */
    ring = NULL;
    fork_parent();
}

static void at_fork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

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
    fr_tl_json_safe(host, safe_host, sizeof safe_host);
    fprintf(f, "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (%s)\"}},\n",
            rank, rank, safe_host);
    fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
            rank, rank);
    fflush(f);
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    pthread_once(&fork_once, at_fork);
    pthread_mutex_lock(&file_lock);
    tl_rank = rank;
    tl_pid = getpid();
    __atomic_store_n(&tl, f, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&file_lock);
    /* (without the ring or its thread, each caller writes its own records) */
    fr_tl_rec_t *r = malloc(RING * sizeof *r);
    pthread_mutex_lock(&ring_lock);
    ring = r;
    pthread_mutex_unlock(&ring_lock);
    if (r && pthread_create(&writer, NULL, writer_main, NULL) == 0) {
        writer_pid = getpid();
    } else {
        pthread_mutex_lock(&ring_lock);
        ring = NULL;
        pthread_mutex_unlock(&ring_lock);
        free(r);
    }
    return 1;
}

int fr_timeline_on(void) { return __atomic_load_n(&tl, __ATOMIC_RELAXED) != NULL; }

void fr_timeline_clock(int64_t offset_ns, uint64_t uncertainty_ns, const char *comm_key, int ref_rank)
{
    pthread_mutex_lock(&file_lock);
    if (tl)
        fprintf(tl, "{\"name\":\"fastreduce_clock\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"offset_us\":%.3f,"
                "\"uncertainty_us\":%.3f,\"comm\":\"%s\",\"reference_rank\":%d}},\n",
                tl_rank, (double)offset_ns / 1e3, (double)uncertainty_ns / 1e3, comm_key, ref_rank);
    /* (flushed now: the writer thread flushes only after records, and a
     * rank killed before its next record would lose the event) */
    if (tl) fflush(tl);
    pthread_mutex_unlock(&file_lock);
}

void fr_timeline_call(const fr_tl_call_t *c, const fr_trace_call_t *rec)
{
    fr_tl_rec_t r;
    r.span = 0;
    r.tid = my_tid();
    size_t n = strnlen(c->comm, sizeof r.comm - 1);   /* (not snprintf: this is on the caller's time) */
    memcpy(r.comm, c->comm, n);
    r.comm[n] = '\0';
    r.c = *c;
    memcpy(&r.rec, rec, offsetof(fr_trace_call_t, ph) + (size_t)rec->nph * sizeof rec->ph[0]);
    put(&r);
}

void fr_timeline_span(const char *name, uint64_t t0, uint64_t t1)
{
    fr_tl_rec_t r;
    r.span = 1;
    r.tid = my_tid();
    fr_tl_json_safe(name ? name : "span", r.name, sizeof r.name);
    r.rec.t_issue = r.rec.t_start = t0;
    r.rec.t_end = t1 > t0 ? t1 : t0;
    r.rec.nph = 0;
    put(&r);
}

void fr_timeline_thread_name(const char *name)
{
    long tid = my_tid();
    pthread_mutex_lock(&file_lock);
    if (tl) {
        name_thread(tid, name);
        fflush(tl);   /* (as the clock's event) */
    }
    pthread_mutex_unlock(&file_lock);
}

void fr_timeline_flush(void)
{
    if (!fr_timeline_on()) return;
    drain();
}

void fr_timeline_close(void)
{
    /* (a forked child has its parent's file and records: they are the parent's to write) */
    if (!fr_timeline_on() || tl_pid != getpid()) return;
    if (writer_pid) {
        pthread_mutex_lock(&ring_lock);
        writer_stop = 1;
        pthread_cond_signal(&ring_cond);
        pthread_mutex_unlock(&ring_lock);
        pthread_join(writer, NULL);
    }
    drain();
    pthread_mutex_lock(&file_lock);
    /* (a last event without a comma after it, so that the array is strict JSON) */
    fprintf(tl, "{\"name\":\"fastreduce_end\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{}}\n]\n", tl_rank);
    fclose(tl);
    tl = NULL;
    pthread_mutex_unlock(&file_lock);
    /* (a thread still running at exit may be copying into the ring, or
     * draining it: taken away under both locks before it is freed) */
    pthread_mutex_lock(&drain_lock);
    pthread_mutex_lock(&ring_lock);
    fr_tl_rec_t *r = ring;
    ring = NULL;
    pthread_mutex_unlock(&ring_lock);
    pthread_mutex_unlock(&drain_lock);
    free(r);
}

/* fr_corepair: how two cores of this machine see each other, the facts
 * that decide how libfastreduce's shared-memory algorithms should write
 * (docs/architecture.md, "How a rank writes for the others").
 *
 * Two threads pinned to two CPUs: first a cache line's round trip between
 * them (one thread writes it, the other answers); then, for each size, one
 * thread writes a buffer (a "put", with the library's plain copy or its
 * streaming one) and the other copies it out (a "get"), two buffers in turn,
 * as a bcast through the node's segment does, against a copy between the
 * writer's private buffers. Every figure is the median of the rounds.
 *
 * Usage: fr_corepair [-c CPU,CPU] [-r ROUNDS] [SIZE ...]
 *   SIZE in bytes, with an optional K or M suffix (default 64K 1M 4M);
 *   the CPUs default to the first two this process may run on. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "internal.h"

#define MAX_ROUNDS 100000
#define PINGS      100000

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Spin until *p reaches @p v (== when @p exact, else >=); yield after a
 * while, so that a busy machine still finishes. */
static void wait_for(const uint64_t *p, uint64_t v, int exact)
{
    for (uint64_t spins = 0;; spins++) {
        uint64_t x = __atomic_load_n(p, __ATOMIC_ACQUIRE);
        if (exact ? x == v : x >= v) return;
        if (spins > 100000) sched_yield();
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_us(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return (double)v[n / 2] / 1000.0;
}

/* What the two threads share; the flags sit on lines of their own. */
typedef struct {
    _Alignas(64) uint64_t ping;
    _Alignas(64) uint64_t ready;  /* the writer's last round */
    _Alignas(64) uint64_t done;   /* the reader's last round */
    _Alignas(64) int other_cpu;
    int mode;                     /* 0: round trips; 1: puts and gets */
    int rounds;
    size_t n;
    char *bufs, *dst;             /* two buffers of n bytes; the reader's private one */
    uint64_t *get_ns;
} pair_t;

static void *other(void *arg)
{
    pair_t *p = arg;
    if (p->mode == 0) {
        for (uint64_t i = 1; i <= PINGS; i++) {
            wait_for(&p->ping, 2 * i - 1, 1);
            __atomic_store_n(&p->ping, 2 * i, __ATOMIC_RELEASE);
        }
        return NULL;
    }
    __atomic_store_n(&p->ping, 1, __ATOMIC_RELEASE);  /* started */
    for (int i = 1; i <= p->rounds; i++) {
        wait_for(&p->ready, (uint64_t)i, 0);
        uint64_t t0 = now_ns();
        fr_copy(p->dst, p->bufs + (size_t)(i & 1) * p->n, p->n);
        p->get_ns[i - 1] = now_ns() - t0;
        __atomic_store_n(&p->done, (uint64_t)i, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* The second thread, pinned before it starts (so that it cannot run
 * unpinned, nor leave the first waiting for it). */
static int run_other(pair_t *p, pthread_t *t)
{
    pthread_attr_t attr;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->other_cpu, &set);
    int rc = pthread_attr_init(&attr);
    if (!rc) {
        rc = pthread_attr_setaffinity_np(&attr, sizeof set, &set);
        if (!rc) rc = pthread_create(t, &attr, other, p);
        pthread_attr_destroy(&attr);
    }
    if (rc) fprintf(stderr, "fr_corepair: cannot start a thread on CPU %d: %s\n", p->other_cpu, strerror(rc));
    return rc;
}

static int join_other(pthread_t t)
{
    return pthread_join(t, NULL) != 0;
}

static int round_trip(pair_t *p, double *ns)
{
    pthread_t t;
    p->mode = 0;
    p->ping = 0;
    if (run_other(p, &t)) return 1;
    uint64_t t0 = now_ns();
    for (uint64_t i = 1; i <= PINGS; i++) {
        __atomic_store_n(&p->ping, 2 * i - 1, __ATOMIC_RELEASE);
        wait_for(&p->ping, 2 * i, 1);
    }
    *ns = (double)(now_ns() - t0) / PINGS;
    return join_other(t);
}

/* One size, one way of writing: medians of the private copy, the put, the
 * get and the whole round, in microseconds. */
static int put_get(pair_t *p, fr_copy_fn put, char *src, char *priv, double out[4])
{
    uint64_t *put_ns = malloc((size_t)p->rounds * sizeof *put_ns);
    uint64_t *priv_ns = malloc((size_t)p->rounds * sizeof *priv_ns);
    if (!put_ns || !priv_ns) {
        free(put_ns);
        free(priv_ns);
        fprintf(stderr, "fr_corepair: out of memory\n");
        return 1;
    }
    for (int i = 0; i < p->rounds; i++) {
        uint64_t t0 = now_ns();
        put(priv, src, p->n);
        priv_ns[i] = now_ns() - t0;
    }
    pthread_t t;
    p->mode = 1;
    p->ready = p->done = p->ping = 0;
    if (run_other(p, &t)) {
        free(put_ns);
        free(priv_ns);
        return 1;
    }
    wait_for(&p->ping, 1, 0);
    uint64_t start = now_ns();
    for (int i = 1; i <= p->rounds; i++) {
        /* buffer i & 1 was last read in round i-2 */
        if (i > 2) wait_for(&p->done, (uint64_t)i - 2, 0);
        uint64_t t0 = now_ns();
        put(p->bufs + (size_t)(i & 1) * p->n, src, p->n);
        put_ns[i - 1] = now_ns() - t0;
        __atomic_store_n(&p->ready, (uint64_t)i, __ATOMIC_RELEASE);
    }
    wait_for(&p->done, (uint64_t)p->rounds, 0);
    double whole = (double)(now_ns() - start) / p->rounds / 1000.0;
    int rc = join_other(t);
    out[0] = median_us(priv_ns, p->rounds);
    out[1] = median_us(put_ns, p->rounds);
    out[2] = median_us(p->get_ns, p->rounds);
    out[3] = whole;
    free(put_ns);
    free(priv_ns);
    return rc;
}

/* A decimal number, nothing before or after it: 0 on success. */
static int parse_number(const char *s, char **end, unsigned long long *v)
{
    if (*s < '0' || *s > '9') return 1;
    errno = 0;
    *v = strtoull(s, end, 10);
    return errno != 0;
}

static int parse_size(const char *s, size_t *n)
{
    char *end;
    unsigned long long v;
    int shift = 0;
    if (parse_number(s, &end, &v)) return 1;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    if (*end || v > ((unsigned long long)1 << 30) >> shift) return 1;
    v <<= shift;
    if (v < 64) return 1;
    *n = (size_t)(v / 64 * 64);
    return 0;
}

/* -c A,B: two different CPU numbers. */
static int parse_cpus(const char *s, int cpu[2])
{
    char *end;
    unsigned long long a, b;
    if (parse_number(s, &end, &a) || *end != ',' || parse_number(end + 1, &end, &b) || *end) return 1;
    if (a == b || a >= CPU_SETSIZE || b >= CPU_SETSIZE) return 1;
    cpu[0] = (int)a;
    cpu[1] = (int)b;
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: fr_corepair [-c CPU,CPU] [-r ROUNDS (1-%d)] [SIZE[K|M] ...] (sizes 64 B to 1 GiB)\n",
            MAX_ROUNDS);
    return 2;
}

int main(int argc, char **argv)
{
    int cpu[2] = {-1, -1}, rounds = 200, nsizes = 0;
    size_t sizes[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            if (parse_cpus(argv[++i], cpu)) return usage();
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            char *end;
            unsigned long long r;
            if (parse_number(argv[++i], &end, &r) || *end || r < 1 || r > MAX_ROUNDS) return usage();
            rounds = (int)r;
        } else if (nsizes < 64 && !parse_size(argv[i], &sizes[nsizes])) {
            nsizes++;
        } else {
            return usage();
        }
    }
    if (!nsizes) {
        sizes[0] = 65536;
        sizes[1] = 1048576;
        sizes[2] = 4194304;
        nsizes = 3;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) return perror("fr_corepair: sched_getaffinity"), 1;
    if (cpu[0] < 0) {
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &allowed)) cpu[k++] = c;
        if (cpu[1] < 0) {
            fprintf(stderr, "fr_corepair: this process may run on one CPU only; two are needed\n");
            return 1;
        }
    }
    for (int k = 0; k < 2; k++)
        if (!CPU_ISSET(cpu[k], &allowed)) {
            fprintf(stderr, "fr_corepair: CPU %d is not one this process may run on\n", cpu[k]);
            return 1;
        }
    if (pin(cpu[0])) {
        fprintf(stderr, "fr_corepair: cannot pin to CPU %d\n", cpu[0]);
        return 1;
    }
    size_t max = 0;
    for (int i = 0; i < nsizes; i++) max = sizes[i] > max ? sizes[i] : max;
    void *mem[5] = { NULL };
    const size_t bytes[5] = { sizeof(pair_t), 2 * max, max, max, max };
    for (int k = 0; k < 5; k++)
        if (posix_memalign(&mem[k], 4096, bytes[k])) mem[k] = NULL;
    pair_t *p = mem[0];
    char *bufs = mem[1], *dst = mem[2], *src = mem[3], *priv = mem[4];
    uint64_t *get_ns = malloc((size_t)rounds * sizeof *get_ns);
    int rc = 1;
    if (!p || !bufs || !dst || !src || !priv || !get_ns) {
        fprintf(stderr, "fr_corepair: out of memory\n");
        goto out;
    }
    memset(p, 0, sizeof *p);
    memset(bufs, 0, 2 * max);
    memset(dst, 0, max);
    memset(src, 1, max);
    memset(priv, 0, max);
    p->other_cpu = cpu[1];
    p->rounds = rounds;
    p->bufs = bufs;
    p->dst = dst;
    p->get_ns = get_ns;

    double rt;
    if (round_trip(p, &rt)) goto out;
    printf("# fr_corepair: CPUs %d and %d; a cache line's round trip: %.0f ns\n", cpu[0], cpu[1], rt);
    printf("# put: one thread writes a buffer; get: the other copies it out (two buffers in turn);\n"
           "# private: the same copy between the writer's own buffers; round: the whole run per round (a mean);\n"
           "# medians of %d rounds, us\n", rounds);
    printf("# %-10s %-10s %9s %9s %9s %9s %10s\n", "size", "stores", "private", "put", "get", "round", "put/priv");
    for (int i = 0; i < nsizes; i++) {
        p->n = sizes[i];
        for (int m = 0; m < 2; m++) {
            double r[4];
            if (put_get(p, m ? fr_copy_stream : fr_copy, src, priv, r)) goto out;
            printf("  %-10zu %-10s %9.2f %9.2f %9.2f %9.2f %10.2f\n", sizes[i], m ? "streaming" : "plain", r[0], r[1],
                   r[2], r[3], r[0] > 0 ? r[1] / r[0] : 0.0);
        }
    }
    if (round_trip(p, &rt)) goto out;
    printf("# a cache line's round trip afterwards: %.0f ns\n", rt);
    rc = 0;
out:
    free(p);
    free(bufs);
    free(dst);
    free(src);
    free(priv);
    free(get_ns);
    return rc;
}

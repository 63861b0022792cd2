/* Shared bits of the libFuzzer targets (built by scripts/fuzz.sh). */
#ifndef FR_FUZZ_COMMON_H
#define FR_FUZZ_COMMON_H
/* (memfd_create; each target includes this first) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tune.h"
#include "internal.h"

/* A property the target checks: a failure is a finding, reported as a crash. */
#define FZ_ASSERT(cond)                                                                  \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* Diagnostics are only counted: logging every one would drown the fuzzer. */
static inline void fz_count_diag(void *arg, const char *source, int line, const char *msg)
{
    /* The parser promises a source name and a non-empty message. */
    FZ_ASSERT(source && msg && msg[0]);
    (void)line;
    ++*(int *)arg;
}

/* The input as a file: written into a memfd (one per target, made on the
 * first input) and named by its /proc path, so NUL bytes and a missing last
 * newline reach a file reader as they would from disk. */
static inline const char *fz_as_file(const char *name, const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        FZ_ASSERT((fd = memfd_create(name, 0)) >= 0);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    FZ_ASSERT(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size);
    return path;
}

/* The input as a NUL-terminated string (cut at its first NUL, as getenv
 * would give it). The caller frees it. */
static inline char *fz_cstring(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return NULL;
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Two rules agree in every field the table format carries. */
static inline int fz_same_rule(const fr_rule_t *a, const fr_rule_t *b)
{
    return a->coll == b->coll && a->mem == b->mem && a->nodes.lo == b->nodes.lo && a->nodes.hi == b->nodes.hi &&
           a->ppn.lo == b->ppn.lo && a->ppn.hi == b->ppn.hi && a->bytes.lo == b->bytes.lo &&
           a->bytes.hi == b->bytes.hi && a->alg == b->alg && a->chunk == b->chunk && a->fanout == b->fanout &&
           a->across == b->across && a->proto == b->proto;
}

/* docs/tuning.md: printing a table and parsing the text back gives the same
 * rules. Checked on every table a target has parsed. */
static inline void fz_check_round_trip(const fr_table_t *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    fr_table_print(t, f);
    fclose(f);
    fr_table_t back = {0};
    int nbad = 0;
    if (fr_table_parse(&back, text, "reprint", FR_SRC_TUNE, fz_count_diag, &nbad, NULL) == FR_SUCCESS) {
        if (nbad || back.n != t->n) fprintf(stderr, "%d rules printed as:\n%s", t->n, text);
        FZ_ASSERT(nbad == 0 && back.n == t->n);
        for (int i = 0; i < t->n; i++) {
            if (!fz_same_rule(&t->rules[i], &back.rules[i])) fprintf(stderr, "rule %d printed as:\n%s", i, text);
            FZ_ASSERT(fz_same_rule(&t->rules[i], &back.rules[i]));
        }
    }
    fr_table_free(&back);
    free(text);
}

/* Ask the table a few questions, so matching runs on every rule parsed. */
static inline void fz_match_some(const fr_table_t *t, const uint8_t *data, size_t size)
{
    static const uint64_t v[] = {0, 1, 2, 7, 8, 4096, 8192, 65536, 1u << 20, UINT64_MAX - 1, UINT64_MAX};
    const int nv = (int)(sizeof v / sizeof v[0]);
    for (int k = 0; k < 4; k++) {
        unsigned b = size ? data[(size_t)k * 7 % size] : 0;
        int i = fr_table_match(t, k - 1, k & 1, 1u + (b & 1), v[b % nv], v[(b >> 2) % nv], v[(b >> 3) % nv]);
        FZ_ASSERT(i >= -1 && i < t->n);
    }
}

#endif

/* The selection table: rules parsed from the built-in default, a tuning
 * file, FASTREDUCE_TUNE and FASTREDUCE_ALGO; the format is in docs/tuning.md. */
#ifndef FR_TUNE_H
#define FR_TUNE_H

#include <stdint.h>
#include <stdio.h>
#include "fastreduce.h"

#define FR_INF UINT64_MAX

typedef struct fr_range { uint64_t lo, hi; } fr_range_t;  /* inclusive */

/* Where a rule came from, strongest first. */
typedef enum { FR_SRC_ALGO = 0, FR_SRC_TUNE, FR_SRC_FILE, FR_SRC_DEFAULT, FR_SRC_COUNT } fr_rule_src_t;

enum { FR_ACROSS_AUTO = 0, FR_ACROSS_RING, FR_ACROSS_RD };

typedef struct fr_rule {
    int        coll;      /* fr_coll_t */
    unsigned   mem;       /* mask of fr_mem_t */
    fr_range_t nodes, ppn, bytes;
    int        alg;       /* index into fr_algs[] */
    uint64_t   chunk;     /* chunk=SIZE parameter, 0 if absent */
    int        fanout;    /* fanout=N parameter, 0 if absent */
    int        across;    /* across=ring|rd (hier's stage between nodes), FR_ACROSS_AUTO if absent */
    int        src;       /* fr_rule_src_t */
    int        line;      /* line (or rule number) in its source */
} fr_rule_t;

typedef struct fr_table {
    fr_rule_t *rules;
    int        n, cap;
} fr_table_t;

/* Called for every malformed line; the default (NULL) logs a warning. */
typedef void (*fr_diag_fn)(void *arg, const char *source, int line, const char *msg);

/* Parse rules from @p text (lines separated by '\n' or ';') and append them.
 * @p source names the text in messages ("FASTREDUCE_TUNE", a file path).
 * Malformed lines are reported through @p diag and skipped. *nbad (if not
 * NULL) receives the number of diagnostics reported (for files this also
 * counts a missing header, a rejected version, an unreadable file).
 * FR_ERR_NO_MEMORY only. */
fr_status_t fr_table_parse(fr_table_t *t, const char *text, const char *source, int src,
                           fr_diag_fn diag, void *arg, int *nbad);
/* Same for a file; an unreadable file gives FR_ERR_CONFIG. */
fr_status_t fr_table_parse_file(fr_table_t *t, const char *path, fr_diag_fn diag, void *arg, int *nbad);
/* FASTREDUCE_ALGO: "NAME" (every collective that has it) or
 * "allreduce=NAME,bcast=NAME". Each becomes a rule matching every call. */
fr_status_t fr_table_parse_algo(fr_table_t *t, const char *spec, fr_diag_fn diag, void *arg, int *nbad);

/* Index of the first rule at or after @p start that matches, or -1. */
int fr_table_match(const fr_table_t *t, int start, int coll, unsigned mem,
                   uint64_t nodes, uint64_t ppn, uint64_t bytes);

/* Write a rule as one table line (no newline) into buf; returns buf. */
char *fr_rule_format(const fr_rule_t *r, char *buf, size_t len);
/* Print the table in the file format. */
void fr_table_print(const fr_table_t *t, FILE *f);
const char *fr_rule_src_name(int src);
void fr_table_free(fr_table_t *t);

/* Parse "1024", "8K", "4M", "1G" (powers of 1024) or "inf". 0 on success. */
int fr_parse_size(const char *s, uint64_t *out);

/* The built-in default table (lib/default_table.c). */
extern const char fr_default_table[];

#endif

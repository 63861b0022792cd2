/* The selection table's text: rules parsed from the built-in default, a
 * tuning file, FASTREDUCE_TUNE and FASTREDUCE_ALGO, and printed back; the
 * format is in docs/tuning.md. */
#ifndef FR_TUNE_H
#define FR_TUNE_H

#include <stdint.h>
#include <stdio.h>
#include "fastreduce.h"

#include "table.h"

/* The words of across= and proto=, [value - 1] (for the parser and printer). */
extern const char *const fr_across_words[], *const fr_proto_words[];

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

/* The header of a table file: "# key: value" comment lines before its first
 * rule, as the autotuner writes them (docs/tuning.md). Absent text fields
 * are "", absent numbers 0. */
typedef struct fr_table_meta {
    int  version;            /* 1, or 0 when the file has no header line */
    char fingerprint[160];   /* the topology fingerprint of the nodes measured */
    long nodes, ppn, ranks;  /* the shape of the job measured */
    char mpi[256], ucx[64], nccl[64], fastreduce[64];  /* versions */
    char date[64];
    char measured[256];      /* what was measured ("float32 sum, bcast root 0, host") */
    char command[1024];      /* the command line that wrote the table */
} fr_table_meta_t;

/* fr_table_parse_file() that also reads the header into @p meta (which
 * may be NULL). A malformed header field (a known key with a bad or empty
 * value, or given twice) is reported with its line and skipped. */
fr_status_t fr_table_read_file(fr_table_t *t, fr_table_meta_t *meta, const char *path, fr_diag_fn diag,
                               void *arg, int *nbad);
/* Print the header line and every field of @p meta that is set. */
void fr_table_meta_print(const fr_table_meta_t *meta, FILE *f);
/* Compare a table's header with a job: writes what differs ("measured on
 * 4 node(s), this job has 1", ...) into @p why and returns how many of
 * fingerprint, nodes and ppn differ. A field the header lacks does not
 * differ; *unknown (if not NULL) counts those. */
int fr_table_meta_compare(const fr_table_meta_t *meta, const char *fingerprint, long nodes, long ppn,
                          char *why, size_t len, int *unknown);
/* FASTREDUCE_ALGO: "NAME" (every collective that has it) or
 * "allreduce=NAME,bcast=NAME". Each becomes a rule matching every call. */
fr_status_t fr_table_parse_algo(fr_table_t *t, const char *spec, fr_diag_fn diag, void *arg, int *nbad);

/* Index of the first rule at or after @p start that matches, or -1. */
int fr_table_match(const fr_table_t *t, int start, int coll, unsigned mem,
                   uint64_t nodes, uint64_t ppn, uint64_t bytes);
/* The same for a job's shape alone: a rule that matches some size. */
int fr_table_match_shape(const fr_table_t *t, int start, int coll, unsigned mem, uint64_t nodes, uint64_t ppn);

/* A rule's parameters as they are written in the table (" chunk=1M
 * fanout=4", "" for none; 0 is unset) into buf; returns buf. */
char *fr_params_format(uint64_t chunk, int fanout, int across, int proto, char *buf, size_t len);
/* Write a rule as one table line (no newline) into buf; returns buf. */
char *fr_rule_format(const fr_rule_t *r, char *buf, size_t len);
/* Print the table in the file format. */
void fr_table_print(const fr_table_t *t, FILE *f);
const char *fr_rule_src_name(int src);
void fr_table_free(fr_table_t *t);
/* Append every rule of @p more (which may be @p t itself) to @p t, after
 * its own: a table whose rules come first and @p more's after them. Out of
 * memory, @p t keeps those appended so far. */
fr_status_t fr_table_append(fr_table_t *t, const fr_table_t *more);

/* The built-in default table (lib/default_table.c). */
extern const char fr_default_table[];

#endif

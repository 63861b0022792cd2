/* What the selection table's parsers share (tune.c, table_file.c,
 * tune_algo.c, table.c): the parse context, diagnostics and quoting. */
#ifndef FR_TUNE_PARSE_H
#define FR_TUNE_PARSE_H

#include <stddef.h>
#include <string.h>

#include "tune.h"

#define FR_QUOTE_MAX 48     /* bytes of offending text quoted in a message */
#define FR_MSG_MAX 1024

/* One parse: the table rules are appended to, the source named in
 * messages, where the diagnostics go and how many were reported. */
typedef struct parse_ctx {
    fr_table_t *t;
    const char *source;
    int         src;
    fr_diag_fn  diag;
    void       *arg;
    int         nbad;
} parse_ctx_t;

/* Report a malformed @p line of c's source through its diag (the default
 * logs a warning) and count it in c->nbad. */
void fr_tune_report(parse_ctx_t *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Copy up to FR_QUOTE_MAX bytes of @p s into @p buf for a message, escaping
 * control and non-ASCII bytes as \xNN and marking truncation with "...". */
const char *fr_tune_quote(char *buf, size_t size, const char *s);
/* @p s quoted in a buffer that lives to the end of the enclosing block. */
#define Q(s) fr_tune_quote((char[FR_QUOTE_MAX * 4 + 8]){0}, FR_QUOTE_MAX * 4 + 8, (s))

/* "a, b, c": the names of the algorithms of @p coll. */
const char *fr_tune_alg_list(char *buf, size_t size, int coll);
/* The index of collective @p name ("allreduce", "bcast"), or -1. */
int fr_tune_find_coll(const char *name);
/* The registry index of algorithm @p name of @p coll, or -1 with a message
 * that names the valid ones. */
int fr_tune_parse_alg(int coll, const char *name, char *msg, size_t size);

/* Split [text, text+len) into lines and rules and append them to c->t,
 * reporting the malformed ones; rules are numbered by line (@p by_line) or
 * by their ordinal in the text. FR_ERR_NO_MEMORY only. */
fr_status_t fr_tune_parse_text(parse_ctx_t *c, const char *text, size_t len, int by_line);

/* Append one rule to @p t (table.c). FR_ERR_NO_MEMORY only. */
fr_status_t fr_table_push(fr_table_t *t, const fr_rule_t *r);

/* The blanks that separate words on a line (not '\n', which ends it). */
static inline int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Does the line [s, e) contain a NUL byte? Such a line is malformed as a
 * whole, its rules and comment alike: the NUL may be anywhere in it, and
 * text read up to it would not be the line that was written. */
static inline int has_nul(const char *s, const char *e)
{
    return memchr(s, '\0', (size_t)(e - s)) != NULL;
}

#endif

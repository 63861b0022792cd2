/* The selection table's rules and text: one rule's fields and parameters,
 * text split into lines and rules, and the diagnostics of every parser. The
 * format is specified in docs/tuning.md; files are read in table_file.c,
 * FASTREDUCE_ALGO in tune_algo.c, rules printed in tune_print.c. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tune_parse.h"
#include "registry.h"
#include "log.h"
#include "units.h"

#define FR_FANOUT_MIN 2
#define FR_FANOUT_MAX 64

static const char *const coll_names[FR_COLL_COUNT] = { "allreduce", "bcast" };

/* ---- diagnostics -------------------------------------------------------- */

static void default_diag(void *arg, const char *source, int line, const char *msg)
{
    (void)arg;
    FR_WARN(FR_SUB_TUNE, "%s:%d: %s", source, line, msg);
}

void fr_tune_report(parse_ctx_t *c, int line, const char *fmt, ...)
{
    char msg[FR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (c->diag ? c->diag : default_diag)(c->arg, c->source, line, msg);
    c->nbad++;
}

const char *fr_tune_quote(char *buf, size_t size, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i;
    for (i = 0; s[i] && i < FR_QUOTE_MAX; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (o + 5 >= size)
            break;
        if (ch < 0x20 || ch >= 0x7f || ch == '\\') {
            buf[o++] = '\\'; buf[o++] = 'x';
            buf[o++] = hex[ch >> 4]; buf[o++] = hex[ch & 15];
        } else {
            buf[o++] = (char)ch;
        }
    }
    if (s[i] && o + 4 < size) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

const char *fr_tune_alg_list(char *buf, size_t size, int coll)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < fr_nalgs; i++) {
        if (!fr_algs[i] || !fr_algs[i]->name || (int)fr_algs[i]->coll != coll)
            continue;
        int n = snprintf(buf + o, size - o, "%s%s", o ? ", " : "", fr_algs[i]->name);
        if (n < 0 || (size_t)n >= size - o)
            break;
        o += (size_t)n;
    }
    if (o == 0)
        snprintf(buf, size, "none");
    return buf;
}

/* ---- one rule ----------------------------------------------------------- */

/* Explain a number error in @p msg; @p what names the field. */
static void num_error(char *msg, size_t size, const char *what, const char *num, int st,
                      const char *trail, int is_size, const char *range)
{
    char where[FR_QUOTE_MAX * 4 + 32] = "";
    if (range)
        snprintf(where, sizeof where, " in range '%s'", Q(range));
    switch (st) {
    case FR_NUM_EMPTY:
        snprintf(msg, size, "%s: empty number%s", what, where);
        break;
    case FR_NUM_OVERFLOW:
        snprintf(msg, size, "%s: number overflow: '%s'%s does not fit in 64 bits", what, Q(num), where);
        break;
    case FR_NUM_TRAILING:
        snprintf(msg, size, "%s: trailing garbage '%s' after the number in '%s'%s%s", what,
                 Q(trail), Q(num), where, is_size ? " (sizes take a K, M, G, T, P or E suffix,"
                 " optionally followed by B or iB)" : " (counts are plain integers)");
        break;
    default:
        snprintf(msg, size, "%s: '%s'%s is not a number%s", what, Q(num), where,
                 is_size ? " (expected digits with an optional K/M/G suffix, or inf)" : " (expected digits or inf)");
        break;
    }
}

/* A range field: "*", N, A-B, A-inf. 0 on success, else a message. */
static int range_parse(const char *field, const char *what, int is_size, fr_range_t *r,
                       char *msg, size_t size)
{
    const char *trail;
    int st;
    if (strcmp(field, "*") == 0) {
        r->lo = 0;
        r->hi = FR_INF;
        return 0;
    }
    const char *dash = strchr(field, '-');
    if (!dash) {
        if ((st = fr_num_parse(field, is_size, &r->lo, &trail)) != FR_NUM_OK) {
            num_error(msg, size, what, field, st, trail, is_size, NULL);
            return -1;
        }
        r->hi = r->lo;
        return 0;
    }
    if (dash == field || !dash[1] || strchr(dash + 1, '-')) {
        snprintf(msg, size, "%s: bad range syntax '%s' (expected N, A-B, A-inf or *)", what, Q(field));
        return -1;
    }
    size_t n = (size_t)(dash - field);
    char *lo = malloc(n + 1);
    if (!lo) {
        snprintf(msg, size, "%s: out of memory", what);
        return -1;
    }
    memcpy(lo, field, n);
    lo[n] = '\0';
    st = fr_num_parse(lo, is_size, &r->lo, &trail);
    if (st != FR_NUM_OK)
        num_error(msg, size, what, lo, st, trail, is_size, field);
    free(lo);
    if (st != FR_NUM_OK)
        return -1;
    if ((st = fr_num_parse(dash + 1, is_size, &r->hi, &trail)) != FR_NUM_OK) {
        num_error(msg, size, what, dash + 1, st, trail, is_size, field);
        return -1;
    }
    if (r->lo > r->hi) {
        snprintf(msg, size, "%s: empty range '%s': lo > hi", what, Q(field));
        return -1;
    }
    return 0;
}

int fr_tune_find_coll(const char *name)
{
    for (int i = 0; i < FR_COLL_COUNT; i++)
        if (strcmp(name, coll_names[i]) == 0)
            return i;
    return -1;
}

int fr_tune_parse_alg(int coll, const char *name, char *msg, size_t size)
{
    char list[512];
    int alg = fr_alg_lookup(coll, name);
    if (alg >= 0 && alg < fr_nalgs)
        return alg;
    int other = fr_alg_lookup(-1, name);
    if (other >= 0 && other < fr_nalgs && fr_algs[other] && (int)fr_algs[other]->coll != coll &&
        (int)fr_algs[other]->coll >= 0 && (int)fr_algs[other]->coll < FR_COLL_COUNT)
        snprintf(msg, size, "algorithm '%s' is for %s, not %s (valid for %s: %s)", Q(name),
                 coll_names[fr_algs[other]->coll], coll_names[coll], coll_names[coll],
                 fr_tune_alg_list(list, sizeof list, coll));
    else
        snprintf(msg, size, "unknown algorithm '%s' for %s (valid: %s)", Q(name), coll_names[coll],
                 fr_tune_alg_list(list, sizeof list, coll));
    return -1;
}

const char *const fr_across_words[] = { "ring", "rd", NULL };
const char *const fr_proto_words[] = { "ll", "ll128", "simple", NULL };

/* A parameter whose value is one of @p words: *slot = its index + 1. */
static int word_param(int *slot, const char *const *words, const char *key, const char *val, char *msg,
                      size_t size)
{
    if (*slot) {
        snprintf(msg, size, "bad parameter: %s given twice", key);
        return -1;
    }
    for (int i = 0; words[i]; i++)
        if (strcasecmp(val, words[i]) == 0) {
            *slot = i + 1;
            return 0;
        }
    char list[64] = "";
    for (int i = 0; words[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? (words[i + 1] ? ", " : " or ") : "",
                 words[i]);
    snprintf(msg, size, "bad parameter %s='%s': must be %s", key, Q(val), list);
    return -1;
}

/* key=value parameters after the six fields. */
static int parse_param(fr_rule_t *r, char *field, char *msg, size_t size)
{
    char *eq = strchr(field, '=');
    if (!eq) {
        snprintf(msg, size, "wrong number of fields: extra field '%s' is not a key=value parameter"
                 " (a rule has 6 fields: collective memory nodes ppn bytes algorithm)", Q(field));
        return -1;
    }
    *eq = '\0';
    const char *key = field, *val = eq + 1, *trail;
    if (strcmp(key, "chunk") == 0) {
        uint64_t v;
        int st = fr_num_parse(val, 1, &v, &trail);
        if (r->chunk) {
            snprintf(msg, size, "bad parameter: chunk given twice");
            return -1;
        }
        if (st != FR_NUM_OK) {
            num_error(msg, size, "bad parameter chunk", val, st, trail, 1, NULL);
            return -1;
        }
        if (v == 0 || v == FR_INF) {
            snprintf(msg, size, "bad parameter chunk='%s': must be a finite size > 0", Q(val));
            return -1;
        }
        r->chunk = v;
    } else if (strcmp(key, "fanout") == 0) {
        uint64_t v;
        int st = fr_num_parse(val, 0, &v, &trail);
        if (r->fanout) {
            snprintf(msg, size, "bad parameter: fanout given twice");
            return -1;
        }
        if (st != FR_NUM_OK || v < FR_FANOUT_MIN || v > FR_FANOUT_MAX) {
            snprintf(msg, size, "bad parameter fanout='%s': must be an integer %d..%d", Q(val),
                     FR_FANOUT_MIN, FR_FANOUT_MAX);
            return -1;
        }
        r->fanout = (int)v;
    } else if (strcmp(key, "across") == 0) {
        return word_param(&r->across, fr_across_words, key, val, msg, size);
    } else if (strcmp(key, "proto") == 0) {
        return word_param(&r->proto, fr_proto_words, key, val, msg, size);
    } else {
        snprintf(msg, size, "bad parameter: unknown key '%s' in '%s=%s' (expected chunk, fanout, across or proto)",
                 Q(key), Q(key), Q(val));
        return -1;
    }
    return 0;
}

/* The next blank-separated word of *p, NUL-terminated in place, or NULL. */
static char *next_word(char **p)
{
    char *s = *p, *w;
    while (is_space(*s))
        s++;
    if (!*s)
        return NULL;
    for (w = s; *s && !is_space(*s); s++)
        ;
    if (*s)
        *s++ = '\0';
    *p = s;
    return w;
}

/* Parse one rule from the NUL-terminated, comment-free, writable @p s.
 * Returns 1 for a rule (in *r), 0 for a blank rule, -1 with a message. */
static int parse_rule(char *s, fr_rule_t *r, char *msg, size_t size)
{
    enum { NFIELDS = 6 };
    char *f[NFIELDS];
    int nf = 0;
    char *p = s;

    memset(r, 0, sizeof *r);
    /* Split the positional fields, leaving the rest for the parameters. */
    while (nf < NFIELDS && (f[nf] = next_word(&p)) != NULL)
        nf++;
    if (nf == 0)
        return 0;
    if (nf < NFIELDS) {
        snprintf(msg, size, "wrong number of fields: got %d, expected 6 (collective memory nodes ppn"
                 " bytes algorithm) and optional key=value parameters", nf);
        return -1;
    }
    if ((r->coll = fr_tune_find_coll(f[0])) < 0) {
        snprintf(msg, size, "unknown collective '%s' (expected allreduce or bcast)", Q(f[0]));
        return -1;
    }
    if (strcmp(f[1], "host") == 0)
        r->mem = FR_MEM_HOST;
    else if (strcmp(f[1], "cuda") == 0)
        r->mem = FR_MEM_CUDA;
    else if (strcmp(f[1], "*") == 0)
        r->mem = FR_MEM_ALL;
    else {
        snprintf(msg, size, "unknown memory '%s' (expected host, cuda or *)", Q(f[1]));
        return -1;
    }
    if (range_parse(f[2], "nodes", 0, &r->nodes, msg, size) ||
        range_parse(f[3], "ppn", 0, &r->ppn, msg, size) ||
        range_parse(f[4], "bytes", 1, &r->bytes, msg, size))
        return -1;
    if ((r->alg = fr_tune_parse_alg(r->coll, f[5], msg, size)) < 0)
        return -1;
    for (char *field; (field = next_word(&p)) != NULL;)
        if (parse_param(r, field, msg, size))
            return -1;
    return 1;
}

/* Parse the rule text [s, s+len) numbered @p line: append or report. */
static fr_status_t parse_segment(parse_ctx_t *c, const char *s, size_t len, int line)
{
    char msg[FR_MSG_MAX];
    fr_rule_t r;
    char *copy = malloc(len + 1);
    if (!copy)
        return FR_ERR_NO_MEMORY;
    memcpy(copy, s, len);
    copy[len] = '\0';
    int st = parse_rule(copy, &r, msg, sizeof msg);
    free(copy);
    if (st < 0) {
        fr_tune_report(c, line, "%s", msg);
        return FR_SUCCESS;
    }
    if (st == 0)
        return FR_SUCCESS;
    r.src = c->src;
    r.line = line;
    return fr_table_push(c->t, &r);
}

/* Split [text, text+len) into lines at '\n' and each line into rules at
 * ';'; '#' starts a comment that runs to the end of the line. A line with
 * a NUL byte is reported once and skipped whole. Rules are numbered by
 * line (@p by_line) or by their ordinal in the text. */
fr_status_t fr_tune_parse_text(parse_ctx_t *c, const char *text, size_t len, int by_line)
{
    int line = 1, ordinal = 1;
    size_t i = 0;
    for (;;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t eol = nl ? (size_t)(nl - text) : len;
        if (has_nul(text + i, text + eol)) {
            fr_tune_report(c, by_line ? line : ordinal, "line contains a NUL byte");
            ordinal++;
        } else {
            for (size_t start = i;; start = i + 1) {
                i = start;
                while (i < eol && text[i] != ';' && text[i] != '#')
                    i++;
                fr_status_t st = parse_segment(c, text + start, i - start, by_line ? line : ordinal);
                if (st != FR_SUCCESS)
                    return st;
                ordinal++;
                if (i == eol || text[i] == '#')
                    break;
            }
        }
        if (!nl)
            break;
        i = eol + 1;
        line++;
    }
    return FR_SUCCESS;
}

fr_status_t fr_table_parse(fr_table_t *t, const char *text, const char *source, int src,
                           fr_diag_fn diag, void *arg, int *nbad)
{
    parse_ctx_t c = { t, source ? source : "(string)", src, diag, arg, 0 };
    if (nbad)
        *nbad = 0;
    if (!t)
        return FR_ERROR(FR_ERR_NULL_POINTER, "fr_table_parse: NULL table");
    if (!text)
        return FR_SUCCESS;
    int n0 = t->n;
    fr_status_t st = fr_tune_parse_text(&c, text, strlen(text), 0);
    if (st != FR_SUCCESS) {
        t->n = n0;
        st = FR_ERROR(st, "%s: no memory for the tuning table", c.source);
    }
    if (nbad)
        *nbad = c.nbad;
    return st;
}

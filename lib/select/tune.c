/* The selection table: parsing and matching of tuning rules (printing is
 * in tune_print.c).
 * The format is specified in docs/tuning.md; this file is its only parser. */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tune.h"
#include "registry.h"
#include "log.h"
#include "units.h"

#define FR_FANOUT_MIN 2
#define FR_FANOUT_MAX 64
#define FR_QUOTE_MAX 48     /* bytes of offending text quoted in a message */
#define FR_MSG_MAX 1024

static const char *const coll_names[FR_COLL_COUNT] = { "allreduce", "bcast" };

/* ---- diagnostics -------------------------------------------------------- */

typedef struct parse_ctx {
    fr_table_t *t;
    const char *source;
    int         src;
    fr_diag_fn  diag;
    void       *arg;
    int         nbad;
} parse_ctx_t;

static void default_diag(void *arg, const char *source, int line, const char *msg)
{
    (void)arg;
    FR_WARN(FR_SUB_TUNE, "%s:%d: %s", source, line, msg);
}

static void report(parse_ctx_t *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report(parse_ctx_t *c, int line, const char *fmt, ...)
{
    char msg[FR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (c->diag ? c->diag : default_diag)(c->arg, c->source, line, msg);
    c->nbad++;
}

/* Copy up to FR_QUOTE_MAX bytes of @p s into @p buf for a message, escaping
 * control and non-ASCII bytes as \xNN and marking truncation with "...". */
static const char *quote(char *buf, size_t size, const char *s)
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
#define Q(s) quote((char[FR_QUOTE_MAX * 4 + 8]){0}, FR_QUOTE_MAX * 4 + 8, (s))

/* "a, b, c": the names of the algorithms of @p coll. */
static const char *alg_list(char *buf, size_t size, int coll)
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

/* ---- the table ---------------------------------------------------------- */

static fr_status_t table_push(fr_table_t *t, const fr_rule_t *r)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        if (cap <= t->cap)
            return FR_ERR_NO_MEMORY;
        fr_rule_t *nr = realloc(t->rules, (size_t)cap * sizeof *nr);
        if (!nr)
            return FR_ERR_NO_MEMORY;
        t->rules = nr;
        t->cap = cap;
    }
    t->rules[t->n++] = *r;
    return FR_SUCCESS;
}

fr_status_t fr_table_append(fr_table_t *t, const fr_table_t *more)
{
    if (!t || !more)
        return FR_ERROR(FR_ERR_NULL_POINTER, "fr_table_append: NULL table");
    const int n = more->n;   /* (more may be t, which grows) */
    for (int i = 0; i < n; i++) {
        fr_rule_t r = more->rules[i];   /* (a copy: pushing may move t's rules, which may be more's) */
        if (table_push(t, &r) != FR_SUCCESS)
            return FR_ERROR(FR_ERR_NO_MEMORY, "no memory for a tuning table of %d rules", t->n + n - i);
    }
    return FR_SUCCESS;
}

void fr_table_free(fr_table_t *t)
{
    if (!t)
        return;
    free(t->rules);
    t->rules = NULL;
    t->n = t->cap = 0;
}


int fr_table_match_shape(const fr_table_t *t, int start, int coll, unsigned mem, uint64_t nodes, uint64_t ppn)
{
    if (!t || !t->rules)
        return -1;
    for (int i = start < 0 ? 0 : start; i < t->n; i++) {
        const fr_rule_t *r = &t->rules[i];
        if (r->coll == coll && (r->mem & mem) && fr_range_has(&r->nodes, nodes) && fr_range_has(&r->ppn, ppn))
            return i;
    }
    return -1;
}

int fr_table_match(const fr_table_t *t, int start, int coll, unsigned mem,
                   uint64_t nodes, uint64_t ppn, uint64_t bytes)
{
    int i = start < 0 ? 0 : start;
    while ((i = fr_table_match_shape(t, i, coll, mem, nodes, ppn)) >= 0 && !fr_range_has(&t->rules[i].bytes, bytes))
        i++;
    return i;
}

/* ---- one rule ----------------------------------------------------------- */

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

static int find_coll(const char *name)
{
    for (int i = 0; i < FR_COLL_COUNT; i++)
        if (strcmp(name, coll_names[i]) == 0)
            return i;
    return -1;
}

static int parse_alg_name(int coll, const char *name, char *msg, size_t size)
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
                 alg_list(list, sizeof list, coll));
    else
        snprintf(msg, size, "unknown algorithm '%s' for %s (valid: %s)", Q(name), coll_names[coll],
                 alg_list(list, sizeof list, coll));
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
    if ((r->coll = find_coll(f[0])) < 0) {
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
    if ((r->alg = parse_alg_name(r->coll, f[5], msg, size)) < 0)
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
        report(c, line, "%s", msg);
        return FR_SUCCESS;
    }
    if (st == 0)
        return FR_SUCCESS;
    r.src = c->src;
    r.line = line;
    return table_push(c->t, &r);
}

/* Does the line [s, e) contain a NUL byte? Such a line is malformed as a
 * whole, its rules and comment alike: the NUL may be anywhere in it, and
 * text read up to it would not be the line that was written. */
static int has_nul(const char *s, const char *e)
{
    return memchr(s, '\0', (size_t)(e - s)) != NULL;
}

/* Split [text, text+len) into lines at '\n' and each line into rules at
 * ';'; '#' starts a comment that runs to the end of the line. A line with
 * a NUL byte is reported once and skipped whole. Rules are numbered by
 * line (@p by_line) or by their ordinal in the text. */
static fr_status_t parse_text(parse_ctx_t *c, const char *text, size_t len, int by_line)
{
    int line = 1, ordinal = 1;
    size_t i = 0;
    for (;;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t eol = nl ? (size_t)(nl - text) : len;
        if (has_nul(text + i, text + eol)) {
            report(c, by_line ? line : ordinal, "line contains a NUL byte");
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
    fr_status_t st = parse_text(&c, text, strlen(text), 0);
    if (st != FR_SUCCESS) {
        t->n = n0;
        st = FR_ERROR(st, "%s: no memory for the tuning table", c.source);
    }
    if (nbad)
        *nbad = c.nbad;
    return st;
}

/* ---- files -------------------------------------------------------------- */

/* The whole file in a malloc'd buffer (*len bytes, NUL-terminated). On
 * FR_ERR_CONFIG, *err is the errno of the failure. */
static fr_status_t read_file(const char *path, char **out, size_t *len, int *err)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, *nb;
    size_t n = 0, cap = 0, got;
    fr_status_t st = FR_SUCCESS;
    if (!f) {
        *err = errno;
        return FR_ERR_CONFIG;
    }
    do {
        if (cap - n < 4096) {
            size_t ncap = cap ? cap * 2 : 8192;
            if (ncap < cap || !(nb = realloc(buf, ncap + 1))) {
                st = FR_ERR_NO_MEMORY;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        n += got = fread(buf + n, 1, cap - n, f);
    } while (got > 0);
    if (st == FR_SUCCESS && ferror(f)) {
        *err = errno ? errno : EIO;
        st = FR_ERR_CONFIG;
    }
    fclose(f);
    if (st != FR_SUCCESS) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return FR_SUCCESS;
}

/* If [s, s+len) is a header line "# fastreduce tuning table vN", return 1
 * and point *ver at N (with *vlen bytes); else 0. */
static int header_line(const char *s, size_t len, const char **ver, size_t *vlen)
{
    static const char words[] = "fastreduce tuning table v";
    const char *e = s + len;
    while (s < e && is_space(*s))
        s++;
    if (s == e || *s != '#')
        return 0;
    s++;
    while (s < e && is_space(*s))
        s++;
    /* The words, with any run of blanks between them. */
    for (const char *w = words; *w; w++) {
        if (*w == ' ') {
            if (s == e || !is_space(*s))
                return 0;
            while (s < e && is_space(*s))
                s++;
            continue;
        }
        if (s == e || (*s | 0x20) != *w)
            return 0;
        s++;
    }
    /* The version is the word after "v"; text after it is ignored. */
    *ver = s;
    while (s < e && !is_space(*s))
        s++;
    *vlen = (size_t)(s - *ver);
    return 1;
}

/* ---- header fields ("# key: value") --------------------------------------- */

enum { META_TEXT, META_WORD, META_COUNT };
#define META_COUNT_MAX 1000000L

static const struct meta_key {
    const char *key;
    int         kind;
    size_t      off, size;   /* text: where in fr_table_meta_t; count: off only */
} meta_keys[] = {
    /* fingerprint, nodes, ppn, ranks first, in the order of enum meta_index */
    { "fingerprint", META_WORD, offsetof(fr_table_meta_t, fingerprint), sizeof ((fr_table_meta_t *)0)->fingerprint },
    { "nodes", META_COUNT, offsetof(fr_table_meta_t, nodes), 0 },
    { "ppn", META_COUNT, offsetof(fr_table_meta_t, ppn), 0 },
    { "ranks", META_COUNT, offsetof(fr_table_meta_t, ranks), 0 },
    { "mpi", META_TEXT, offsetof(fr_table_meta_t, mpi), sizeof ((fr_table_meta_t *)0)->mpi },
    { "ucx", META_TEXT, offsetof(fr_table_meta_t, ucx), sizeof ((fr_table_meta_t *)0)->ucx },
    { "nccl", META_TEXT, offsetof(fr_table_meta_t, nccl), sizeof ((fr_table_meta_t *)0)->nccl },
    { "fastreduce", META_TEXT, offsetof(fr_table_meta_t, fastreduce), sizeof ((fr_table_meta_t *)0)->fastreduce },
    { "date", META_TEXT, offsetof(fr_table_meta_t, date), sizeof ((fr_table_meta_t *)0)->date },
    { "measured", META_TEXT, offsetof(fr_table_meta_t, measured), sizeof ((fr_table_meta_t *)0)->measured },
    { "command", META_TEXT, offsetof(fr_table_meta_t, command), sizeof ((fr_table_meta_t *)0)->command },
};
#define N_META_KEYS (sizeof meta_keys / sizeof meta_keys[0])
enum meta_index { MK_FINGERPRINT, MK_NODES, MK_PPN, MK_RANKS };

/* If [s, e) is "# key: value" with a key of meta_keys, store the value in
 * @p m (or report why it is malformed) and return 1; else 0. seen[k] holds
 * the line where key k was first given. */
static int meta_field(parse_ctx_t *c, fr_table_meta_t *m, const char *s, const char *e, int line, int *seen)
{
    while (s < e && is_space(*s))
        s++;
    if (s == e || *s++ != '#')
        return 0;
    while (s < e && is_space(*s))
        s++;
    const char *k = s;
    while (s < e && (((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
        s++;
    size_t klen = (size_t)(s - k);
    while (s < e && is_space(*s))
        s++;
    if (!klen || s == e || *s != ':')
        return 0;
    size_t i;
    for (i = 0; i < N_META_KEYS; i++)
        if (strlen(meta_keys[i].key) == klen && !strncasecmp(meta_keys[i].key, k, klen))
            break;
    if (i == N_META_KEYS)
        return 0;   /* some other "word:" comment */
    const struct meta_key *mk = &meta_keys[i];
    s++;
    while (s < e && is_space(*s))
        s++;
    while (e > s && is_space(e[-1]))
        e--;
    size_t vlen = (size_t)(e - s);
    char *v = strndup(s, vlen);
    if (!v)
        return 1;
    if (seen[i]) {
        report(c, line, "header field '%s' given twice (first at line %d); this one is ignored", mk->key, seen[i]);
    } else if (!vlen) {
        report(c, line, "header field '%s' has no value", mk->key);
    } else if (mk->kind == META_COUNT) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (*end || errno || n < 1 || n > META_COUNT_MAX || !(*v >= '0' && *v <= '9'))
            report(c, line, "header field '%s': '%s' is not a count (expected an integer 1..%ld)", mk->key, Q(v),
                   META_COUNT_MAX);
        else
            *(long *)((char *)m + mk->off) = n, seen[i] = line;
    } else if (vlen >= mk->size) {
        report(c, line, "header field '%s' is too long (%zu bytes, at most %zu)", mk->key, vlen, mk->size - 1);
    } else if (mk->kind == META_WORD && strpbrk(v, " \t\v\f\r")) {
        report(c, line, "header field '%s': '%s' must be one word", mk->key, Q(v));
    } else {
        memcpy((char *)m + mk->off, v, vlen + 1);
        seen[i] = line;
    }
    free(v);
    return 1;
}

/* Only a comment (or blank) on [s, e)? */
static int comment_only(const char *s, const char *e)
{
    while (s < e && is_space(*s))
        s++;
    return s == e || *s == '#';
}

void fr_table_meta_print(const fr_table_meta_t *m, FILE *f)
{
    if (!f)
        return;
    fprintf(f, "# fastreduce tuning table v1\n");
    for (size_t i = 0; m && i < N_META_KEYS; i++) {
        const struct meta_key *mk = &meta_keys[i];
        if (mk->kind == META_COUNT) {
            long n = *(const long *)((const char *)m + mk->off);
            if (n > 0)
                fprintf(f, "# %s: %ld\n", mk->key, n);
        } else {
            const char *v = (const char *)m + mk->off;
            if (v[0])
                fprintf(f, "# %s: %.*s\n", mk->key, (int)strnlen(v, mk->size), v);
        }
    }
}

int fr_table_meta_compare(const fr_table_meta_t *m, const char *fingerprint, long nodes, long ppn, char *why,
                          size_t len, int *unknown)
{
    int ndiff = 0, nunk = 0;
    size_t o = 0;
    if (why && len)
        why[0] = '\0';
#define META_NOTE(...)                                                                  \
    do {                                                                                \
        if (why && o < len)                                                             \
            o += (size_t)snprintf(why + o, len - o, "%s", ndiff ? "; " : "");         \
        if (why && o < len)                                                             \
            o += (size_t)snprintf(why + o, len - o, __VA_ARGS__);                      \
        ndiff++;                                                                        \
    } while (0)
    if (!m->fingerprint[0] || !fingerprint || !fingerprint[0])
        nunk++;
    else if (strcmp(m->fingerprint, fingerprint))
        META_NOTE("fingerprint %s, this job's nodes %s", m->fingerprint, fingerprint);
    if (!m->nodes)
        nunk++;
    else if (m->nodes != nodes)
        META_NOTE("measured on %ld node(s), this job has %ld", m->nodes, nodes);
    if (!m->ppn)
        nunk++;
    else if (m->ppn != ppn)
        META_NOTE("measured with %ld rank(s) per node, this job has %ld", m->ppn, ppn);
#undef META_NOTE
    if (unknown)
        *unknown = nunk;
    return ndiff;
}

fr_status_t fr_table_parse_file(fr_table_t *t, const char *path, fr_diag_fn diag, void *arg, int *nbad)
{
    return fr_table_read_file(t, NULL, path, diag, arg, nbad);
}

fr_status_t fr_table_read_file(fr_table_t *t, fr_table_meta_t *meta, const char *path, fr_diag_fn diag,
                               void *arg, int *nbad)
{
    parse_ctx_t c = { t, path ? path : "(null)", FR_SRC_FILE, diag, arg, 0 };
    fr_table_meta_t local;
    fr_table_meta_t *m = meta ? meta : &local;
    int seen[N_META_KEYS] = {0};
    char *buf = NULL;
    size_t len = 0, i = 0;
    int err, line = 1, have_header = 0, in_header = 1;
    fr_status_t st;

    memset(m, 0, sizeof *m);
    if (nbad)
        *nbad = 0;
    if (!t || !path)
        return FR_ERROR(FR_ERR_NULL_POINTER, "fr_table_parse_file: NULL %s", t ? "path" : "table");
    errno = 0;
    st = read_file(path, &buf, &len, &err);
    if (st == FR_ERR_CONFIG) {
        report(&c, 0, "cannot read tuning table: %s", strerror(err));
        st = FR_ERROR(FR_ERR_CONFIG, "%s: cannot read tuning table: %s", path, strerror(err));
        goto out;
    }
    if (st != FR_SUCCESS) {
        st = FR_ERROR(st, "%s: no memory to read the tuning table", path);
        goto out;
    }

    /* Find the header (any line of that form) and check its version; read
     * the header fields of the comment lines before the first rule. */
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len;
        const char *ver;
        size_t vlen;
        if (has_nul(buf + i, buf + end)) {
            /* parse_text reports the line and skips it: it is no header line and no field, but as
             * any line that is not a comment it ends the header */
            in_header = in_header && comment_only(buf + i, buf + end);
        } else if (header_line(buf + i, end - i, &ver, &vlen)) {
            if (!(vlen == 1 && ver[0] == '1')) {
                char *v = strndup(ver, vlen);
                report(&c, line, "unsupported tuning table format version '%s' (this library reads"
                       " v1); the whole file is ignored", v ? Q(v) : "?");
                st = FR_ERROR(FR_ERR_CONFIG, "%s:%d: unsupported tuning table format version '%s'",
                              path, line, v ? Q(v) : "?");
                free(v);
                goto out;
            }
            have_header = 1;
        } else if (in_header && !comment_only(buf + i, buf + end)) {
            in_header = 0;
        } else if (in_header) {
            meta_field(&c, m, buf + i, buf + end, line, seen);
        }
        i = end + 1;
        line++;
    }
    if (!have_header)
        report(&c, 1, "missing header '# fastreduce tuning table v1'; reading the rules as v1");
    m->version = have_header;
    if (m->nodes && m->ppn && m->ranks && (m->ranks < m->nodes || m->ranks > m->nodes * m->ppn)) {
        report(&c, seen[MK_RANKS], "header field 'ranks': %ld ranks cannot make %ld node(s) of at most %ld",
               m->ranks, m->nodes, m->ppn);
        m->ranks = 0;
    }
    int n0 = t->n;
    st = parse_text(&c, buf, len, 1);
    if (st != FR_SUCCESS) {
        t->n = n0;
        st = FR_ERROR(st, "%s: no memory for the tuning table", path);
    }
out:
    free(buf);
    if (nbad)
        *nbad = c.nbad;
    return st;
}

/* ---- FASTREDUCE_ALGO ------------------------------------------------------ */

static fr_status_t algo_rule(parse_ctx_t *c, int coll, int alg, int item)
{
    fr_rule_t r;
    memset(&r, 0, sizeof r);
    r.coll = coll;
    r.mem = fr_algs[alg]->mem_types & FR_MEM_ALL;  /* ring forced for host buffers, nccl_ring for device ones */
    r.nodes.hi = r.ppn.hi = r.bytes.hi = FR_INF;
    r.alg = alg;
    r.src = FR_SRC_ALGO;
    r.line = item;
    return table_push(c->t, &r);
}

/* Trim blanks from both ends of s in place. */
static char *trim(char *s)
{
    while (is_space(*s))
        s++;
    size_t n = strlen(s);
    while (n && is_space(s[n - 1]))
        s[--n] = '\0';
    return s;
}

fr_status_t fr_table_parse_algo(fr_table_t *t, const char *spec, fr_diag_fn diag, void *arg, int *nbad)
{
    parse_ctx_t c = { t, "FASTREDUCE_ALGO", FR_SRC_ALGO, diag, arg, 0 };
    char msg[FR_MSG_MAX], l1[512], l2[512];
    fr_status_t st = FR_SUCCESS;

    if (nbad)
        *nbad = 0;
    if (!t)
        return FR_ERROR(FR_ERR_NULL_POINTER, "fr_table_parse_algo: NULL table");
    if (!spec)
        return FR_SUCCESS;
    char *copy = strdup(spec);
    if (!copy)
        return FR_ERROR(FR_ERR_NO_MEMORY, "FASTREDUCE_ALGO: no memory");
    int n0 = t->n;
    char *s = trim(copy);
    if (!*s)
        goto out;

    if (!strchr(s, '=') && !strchr(s, ',')) {
        /* One name for every collective that has it. */
        int found = 0;
        for (int coll = 0; coll < FR_COLL_COUNT && st == FR_SUCCESS; coll++) {
            int alg = fr_alg_lookup(coll, s);
            if (alg >= 0 && alg < fr_nalgs) {
                st = algo_rule(&c, coll, alg, 1);
                found = 1;
            }
        }
        if (!found)
            report(&c, 1, "unknown algorithm '%s' (valid: allreduce: %s; bcast: %s)", Q(s),
                   alg_list(l1, sizeof l1, FR_COLL_ALLREDUCE), alg_list(l2, sizeof l2, FR_COLL_BCAST));
        goto out;
    }

    /* collective=NAME[,collective=NAME] */
    unsigned seen = 0;
    int item = 0;
    char *save = NULL;
    for (char *tok = s; tok && st == FR_SUCCESS; tok = save) {
        char *comma = strchr(tok, ',');
        save = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        item++;
        char *it = trim(tok);
        char *eq = strchr(it, '=');
        if (!*it) {
            report(&c, item, "empty item %d in '%s' (expected collective=NAME)", item, Q(spec));
            continue;
        }
        if (!eq) {
            report(&c, item, "item '%s' is not collective=NAME (use one NAME alone, or"
                   " allreduce=NAME,bcast=NAME)", Q(it));
            continue;
        }
        *eq = '\0';
        char *cname = trim(it), *name = trim(eq + 1);
        int coll = find_coll(cname);
        if (coll < 0) {
            report(&c, item, "unknown collective '%s' (expected allreduce or bcast)", Q(cname));
            continue;
        }
        if (seen & (1u << coll)) {
            report(&c, item, "collective '%s' given twice; the first is used", cname);
            continue;
        }
        if (!*name) {
            report(&c, item, "empty algorithm name for %s", cname);
            continue;
        }
        int alg = parse_alg_name(coll, name, msg, sizeof msg);
        if (alg < 0) {
            report(&c, item, "%s", msg);
            continue;
        }
        seen |= 1u << coll;
        st = algo_rule(&c, coll, alg, item);
    }
out:
    if (st != FR_SUCCESS) {
        t->n = n0;
        st = FR_ERROR(st, "FASTREDUCE_ALGO: no memory for the tuning table");
    }
    free(copy);
    if (nbad)
        *nbad = c.nbad;
    return st;
}

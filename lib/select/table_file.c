/* The selection table's files: reading one, its header line and version,
 * and its "# key: value" header fields, which are printed here too so that
 * writer and reader share one list of keys (docs/tuning.md). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tune_parse.h"
#include "log.h"

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
        fr_tune_report(c, line, "header field '%s' given twice (first at line %d); this one is ignored", mk->key,
                       seen[i]);
    } else if (!vlen) {
        fr_tune_report(c, line, "header field '%s' has no value", mk->key);
    } else if (mk->kind == META_COUNT) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (*end || errno || n < 1 || n > META_COUNT_MAX || !(*v >= '0' && *v <= '9'))
            fr_tune_report(c, line, "header field '%s': '%s' is not a count (expected an integer 1..%ld)", mk->key,
                           Q(v), META_COUNT_MAX);
        else
            *(long *)((char *)m + mk->off) = n, seen[i] = line;
    } else if (vlen >= mk->size) {
        fr_tune_report(c, line, "header field '%s' is too long (%zu bytes, at most %zu)", mk->key, vlen, mk->size - 1);
    } else if (mk->kind == META_WORD && strpbrk(v, " \t\v\f\r")) {
        fr_tune_report(c, line, "header field '%s': '%s' must be one word", mk->key, Q(v));
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

/* ---- reading a file ------------------------------------------------------ */

fr_status_t fr_table_parse_file(fr_table_t *t, const char *path, fr_diag_fn diag, void *arg, int *nbad)
{
    return fr_table_read_file(t, NULL, path, diag, arg, nbad);
}

/* The version of the header line at @p line: FR_ERR_CONFIG (reported) when
 * it is not the one this library reads, since rules of another version
 * would be misread. */
static fr_status_t check_version(parse_ctx_t *c, const char *ver, size_t vlen, int line)
{
    if (vlen == 1 && ver[0] == '1')
        return FR_SUCCESS;
    char *v = strndup(ver, vlen);
    fr_tune_report(c, line, "unsupported tuning table format version '%s' (this library reads"
                   " v1); the whole file is ignored", v ? Q(v) : "?");
    fr_status_t st = FR_ERROR(FR_ERR_CONFIG, "%s:%d: unsupported tuning table format version '%s'",
                              c->source, line, v ? Q(v) : "?");
    free(v);
    return st;
}

/* Find the header (any line of that form) and check its version; read the
 * header fields of the comment lines before the first rule of [buf,
 * buf+len) into @p m. FR_ERR_CONFIG for a version this library does not
 * read: the whole file is ignored. */
static fr_status_t read_header(parse_ctx_t *c, fr_table_meta_t *m, const char *buf, size_t len)
{
    int seen[N_META_KEYS] = {0};
    size_t i = 0;
    int line = 1, have_header = 0, in_header = 1;
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len;
        const char *ver;
        size_t vlen;
        if (has_nul(buf + i, buf + end)) {
            /* fr_tune_parse_text reports the line and skips it: it is no header line and no field, but
             * as any line that is not a comment it ends the header */
            in_header = in_header && comment_only(buf + i, buf + end);
        } else if (header_line(buf + i, end - i, &ver, &vlen)) {
            fr_status_t st = check_version(c, ver, vlen, line);
            if (st != FR_SUCCESS)
                return st;
            have_header = 1;
        } else if (in_header && !comment_only(buf + i, buf + end)) {
            in_header = 0;
        } else if (in_header) {
            meta_field(c, m, buf + i, buf + end, line, seen);
        }
        i = end + 1;
        line++;
    }
    if (!have_header)
        fr_tune_report(c, 1, "missing header '# fastreduce tuning table v1'; reading the rules as v1");
    m->version = have_header;
    if (m->nodes && m->ppn && m->ranks && (m->ranks < m->nodes || m->ranks > m->nodes * m->ppn)) {
        fr_tune_report(c, seen[MK_RANKS], "header field 'ranks': %ld ranks cannot make %ld node(s) of at most %ld",
                       m->ranks, m->nodes, m->ppn);
        m->ranks = 0;
    }
    return FR_SUCCESS;
}

fr_status_t fr_table_read_file(fr_table_t *t, fr_table_meta_t *meta, const char *path, fr_diag_fn diag,
                               void *arg, int *nbad)
{
    parse_ctx_t c = { t, path ? path : "(null)", FR_SRC_FILE, diag, arg, 0 };
    fr_table_meta_t local;
    fr_table_meta_t *m = meta ? meta : &local;
    char *buf = NULL;
    size_t len = 0;
    int err;
    fr_status_t st;

    memset(m, 0, sizeof *m);
    if (nbad)
        *nbad = 0;
    if (!t || !path)
        return FR_ERROR(FR_ERR_NULL_POINTER, "fr_table_parse_file: NULL %s", t ? "path" : "table");
    errno = 0;
    st = read_file(path, &buf, &len, &err);
    if (st == FR_ERR_CONFIG) {
        fr_tune_report(&c, 0, "cannot read tuning table: %s", strerror(err));
        st = FR_ERROR(FR_ERR_CONFIG, "%s: cannot read tuning table: %s", path, strerror(err));
        goto out;
    }
    if (st != FR_SUCCESS) {
        st = FR_ERROR(st, "%s: no memory to read the tuning table", path);
        goto out;
    }
    if ((st = read_header(&c, m, buf, len)) != FR_SUCCESS)
        goto out;
    int n0 = t->n;
    st = fr_tune_parse_text(&c, buf, len, 1);
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

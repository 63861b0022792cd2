/* Unit tests for the tuning table (lib/select/: table.c, tune.c, table_file.c,
 * tune_algo.c, tune_print.c): its parser, matcher and printer. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tune.h"
#include "internal.h"

/* ---- a diag callback that records every message ------------------------- */

#define MAXD 64

typedef struct diags {
    int   n;                 /* messages received (all of them) */
    int   line[MAXD];
    char *src[MAXD];
    char *msg[MAXD];
} diags_t;

static void rec(void *arg, const char *source, int line, const char *msg)
{
    diags_t *d = arg;
    cr_assert_not_null(source);
    cr_assert_not_null(msg);
    cr_assert(msg[0] != '\0', "empty diagnostic");
    if (d->n < MAXD) {
        d->line[d->n] = line;
        d->src[d->n] = strdup(source);
        d->msg[d->n] = strdup(msg);
    }
    d->n++;
}

static void diags_clear(diags_t *d)
{
    for (int i = 0; i < d->n && i < MAXD; i++) {
        free(d->src[i]);
        free(d->msg[i]);
    }
    memset(d, 0, sizeof *d);
}

/* Diagnostic @p i is at @p line and mentions every non-NULL word. */
static void expect_diag(const diags_t *d, int i, int line, const char *w1, const char *w2)
{
    cr_assert_lt(i, d->n, "expected a diagnostic #%d, got only %d", i, d->n);
    cr_assert_eq(d->line[i], line, "diagnostic #%d ('%s') at line %d, expected %d", i, d->msg[i],
                 d->line[i], line);
    if (w1)
        cr_assert(strstr(d->msg[i], w1), "diagnostic '%s' does not mention '%s'", d->msg[i], w1);
    if (w2)
        cr_assert(strstr(d->msg[i], w2), "diagnostic '%s' does not mention '%s'", d->msg[i], w2);
}

static int alg(int coll, const char *name)
{
    int a = fr_alg_lookup(coll, name);
    cr_assert_geq(a, 0, "the registry has no %s algorithm '%s'", coll ? "bcast" : "allreduce", name);
    return a;
}

#define K 1024ull
#define M (1024ull * 1024ull)
#define G (1024ull * 1024ull * 1024ull)
#define ALLMEM (FR_MEM_HOST | FR_MEM_CUDA)

static void expect_range(fr_range_t r, uint64_t lo, uint64_t hi)
{
    cr_assert_eq(r.lo, lo, "lo %llu != %llu", (unsigned long long)r.lo, (unsigned long long)lo);
    cr_assert_eq(r.hi, hi, "hi %llu != %llu", (unsigned long long)r.hi, (unsigned long long)hi);
}

/* ---- sizes -------------------------------------------------------------- */

Test(size, valid)
{
    static const struct { const char *s; uint64_t v; } ok[] = {
        { "0", 0 }, { "1024", 1024 }, { "8K", 8 * K }, { "8k", 8 * K }, { "8KB", 8 * K },
        { "8kb", 8 * K }, { "8KiB", 8 * K }, { "8kib", 8 * K }, { "4M", 4 * M }, { "4MiB", 4 * M },
        { "1G", G }, { "1g", G }, { "2T", 2 * K * G }, { "1P", K * K * G }, { "15E", 15ull << 60 },
        { "512B", 512 }, { "512b", 512 }, { "inf", FR_INF }, { "INF", FR_INF },
        { "18446744073709551615", UINT64_MAX }, { "0K", 0 }, { "007", 7 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint64_t v = 12345;
        cr_assert_eq(fr_parse_size(ok[i].s, &v), 0, "'%s' rejected", ok[i].s);
        cr_assert_eq(v, ok[i].v, "'%s' gave %llu", ok[i].s, (unsigned long long)v);
    }
}

Test(size, invalid)
{
    static const char *bad[] = {
        "", " 8K", "8K ", "8 K", "-1", "+1", "K", "8Kx", "8KK", "8KiBx", "8iB", "8.5K", "0x10",
        "18446744073709551616", "99999999999999999999", "16E", "17179869184G", "infinity", "in",
        "8X", "1e3", "*", "\xff", "8\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 777;
        cr_assert_neq(fr_parse_size(bad[i], &v), 0, "'%s' accepted", bad[i]);
        cr_assert_eq(v, 777, "'%s' changed the output on failure", bad[i]);
    }
    uint64_t v;
    cr_assert_neq(fr_parse_size(NULL, &v), 0);
    cr_assert_neq(fr_parse_size("1", NULL), 0);
}

/* ---- valid tables ------------------------------------------------------- */

Test(parse, all_field_forms)
{
    const char *text =
        "# fastreduce tuning table v1\n"
        "# collective  memory  nodes  ppn    bytes      algorithm\n"
        "\n"
        "allreduce     host    1      2-8    0-8K       recursive_doubling\n"      /* 4 */
        "allreduce     host    1      *      8K-inf     shm  chunk=256K\n"         /* 5 */
        "bcast         *       2-inf  *      *          binomial   fanout=2\n"     /* 6 */
        "   \t  \n"
        "allreduce cuda 3 4 1M ring   # trailing comment\n"                        /* 8 */
        "allreduce\thost\t0-0\t5-inf\t512B-1GiB\ttree\tfanout=64 chunk=1\r\n"      /* 9 */
        "bcast host inf 0 16k-32KB pipeline chunk=1MiB\n"                          /* 10 */
        "allreduce * 18446744073709551615 * 0-inf mpi#comment without a blank\n"   /* 11 */
        "bcast cuda * * inf-inf scatter_allgather";                                /* 12 */
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&t, text, "test", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "unexpected diagnostic: %s", d.n ? d.msg[0] : "");
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 8);

    fr_rule_t *r = t.rules;
    cr_assert_eq(r[0].coll, FR_COLL_ALLREDUCE);
    cr_assert_eq(r[0].mem, FR_MEM_HOST);
    expect_range(r[0].nodes, 1, 1);
    expect_range(r[0].ppn, 2, 8);
    expect_range(r[0].bytes, 0, 8 * K);
    cr_assert_eq(r[0].alg, alg(FR_COLL_ALLREDUCE, "recursive_doubling"));
    cr_assert_eq(r[0].chunk, 0);
    cr_assert_eq(r[0].fanout, 0);
    cr_assert_eq(r[0].src, FR_SRC_TUNE);
    cr_assert_eq(r[0].line, 4);

    expect_range(r[1].ppn, 0, FR_INF);
    expect_range(r[1].bytes, 8 * K, FR_INF);
    cr_assert_eq(r[1].alg, alg(FR_COLL_ALLREDUCE, "shm"));
    cr_assert_eq(r[1].chunk, 256 * K);
    cr_assert_eq(r[1].line, 5);

    cr_assert_eq(r[2].coll, FR_COLL_BCAST);
    cr_assert_eq(r[2].mem, ALLMEM);
    expect_range(r[2].nodes, 2, FR_INF);
    expect_range(r[2].bytes, 0, FR_INF);
    cr_assert_eq(r[2].alg, alg(FR_COLL_BCAST, "binomial"));
    cr_assert_eq(r[2].fanout, 2);
    cr_assert_eq(r[2].line, 6);

    cr_assert_eq(r[3].mem, FR_MEM_CUDA);
    expect_range(r[3].nodes, 3, 3);
    expect_range(r[3].ppn, 4, 4);
    expect_range(r[3].bytes, M, M);
    cr_assert_eq(r[3].line, 8);

    expect_range(r[4].nodes, 0, 0);
    expect_range(r[4].ppn, 5, FR_INF);
    expect_range(r[4].bytes, 512, G);
    cr_assert_eq(r[4].alg, alg(FR_COLL_ALLREDUCE, "tree"));
    cr_assert_eq(r[4].fanout, 64);
    cr_assert_eq(r[4].chunk, 1);
    cr_assert_eq(r[4].line, 9);

    expect_range(r[5].nodes, FR_INF, FR_INF);
    expect_range(r[5].ppn, 0, 0);
    expect_range(r[5].bytes, 16 * K, 32 * K);
    cr_assert_eq(r[5].chunk, M);

    expect_range(r[6].nodes, FR_INF, FR_INF);
    cr_assert_eq(r[6].alg, alg(FR_COLL_ALLREDUCE, "mpi"));
    cr_assert_eq(r[6].line, 11);
    expect_range(r[7].bytes, FR_INF, FR_INF);
    cr_assert_eq(r[7].line, 12);
    fr_table_free(&t);
    cr_assert_null(t.rules);
    cr_assert_eq(t.n, 0);
    diags_clear(&d);
}

/* What printer(obj, FILE *) writes, as a malloc'ed string. */
#define PRINTED(printer, obj)                                                  \
    ({                                                                         \
        char *buf_ = NULL;                                                     \
        size_t len_ = 0;                                                       \
        FILE *f_ = open_memstream(&buf_, &len_);                               \
        cr_assert_not_null(f_);                                                \
        printer((obj), f_);                                                    \
        fclose(f_);                                                            \
        buf_;                                                                  \
    })

static char *print_table(const fr_table_t *t)
{
    return PRINTED(fr_table_print, t);
}

/* Rule @p i of two tables the same, field by field (where it came from aside). */
static void expect_same_rule(const fr_rule_t *x, const fr_rule_t *y, int i)
{
    cr_assert_eq(x->coll, y->coll, "rule %d", i);
    cr_assert_eq(x->mem, y->mem, "rule %d", i);
    cr_assert(x->nodes.lo == y->nodes.lo && x->nodes.hi == y->nodes.hi, "rule %d nodes", i);
    cr_assert(x->ppn.lo == y->ppn.lo && x->ppn.hi == y->ppn.hi, "rule %d ppn", i);
    cr_assert(x->bytes.lo == y->bytes.lo && x->bytes.hi == y->bytes.hi, "rule %d bytes", i);
    cr_assert_eq(x->alg, y->alg, "rule %d", i);
    cr_assert_eq(x->chunk, y->chunk, "rule %d", i);
    cr_assert_eq(x->fanout, y->fanout, "rule %d", i);
    cr_assert_eq(x->across, y->across, "rule %d", i);
    cr_assert_eq(x->proto, y->proto, "rule %d", i);
}

static void expect_same_rules(const fr_table_t *a, const fr_table_t *b)
{
    cr_assert_eq(a->n, b->n);
    for (int i = 0; i < a->n; i++) expect_same_rule(&a->rules[i], &b->rules[i], i);
}

/* @p t printed in the file format (returned, to be freed), parsed back into
 * @p back cleanly, and the same rules. */
static char *print_and_reparse(const fr_table_t *t, fr_table_t *back, diags_t *d)
{
    char *buf = print_table(t);
    int nbad = -1;
    cr_assert_eq(fr_table_parse(back, buf, "printed", FR_SRC_FILE, rec, d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0, "printed table:\n%s", buf);
    expect_same_rules(t, back);
    return buf;
}

/* across= (hier's stage between nodes) parses, prints and round-trips. */
Test(parse, across_parameter)
{
    fr_table_t t = {0};
    diags_t d = {0};
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&t, "allreduce host 2-inf 2-inf 0-64K hier across=rd\n"
                                    "allreduce host 2-inf 2-inf * hier chunk=1M across=ring\n"
                                    "allreduce host * * * ring", "a", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 3);
    cr_assert_eq(t.rules[0].across, FR_ACROSS_RD);
    cr_assert_eq(t.rules[1].across, FR_ACROSS_RING);
    cr_assert_eq(t.rules[1].chunk, 1024 * 1024);
    cr_assert_eq(t.rules[2].across, FR_ACROSS_AUTO);
    fr_table_t back = {0};
    char *buf = print_and_reparse(&t, &back, &d);
    cr_assert(strstr(buf, "across=rd") && strstr(buf, "across=ring"), "printed table:\n%s", buf);
    free(buf);
    fr_table_free(&back);
    fr_table_free(&t);
}

/* proto= (the NCCL protocol to force) parses in any case, prints and round-trips. */
Test(parse, proto_parameter)
{
    fr_table_t t = {0};
    diags_t d = {0};
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&t, "allreduce cuda * * 0-64K nccl_tree proto=LL\n"
                                    "allreduce cuda * * 64K-4M nccl_ring proto=ll128\n"
                                    "bcast cuda * * * nccl_ring proto=Simple\n"
                                    "allreduce cuda * * * nccl", "a", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 4);
    cr_assert_eq(t.rules[0].proto, FR_PROTO_LL);
    cr_assert_eq(t.rules[1].proto, FR_PROTO_LL128);
    cr_assert_eq(t.rules[2].proto, FR_PROTO_SIMPLE);
    cr_assert_eq(t.rules[3].proto, FR_PROTO_AUTO);
    cr_assert_eq(t.rules[0].alg, fr_alg_lookup(FR_COLL_ALLREDUCE, "nccl_tree"));
    cr_assert_eq(t.rules[2].alg, fr_alg_lookup(FR_COLL_BCAST, "nccl_ring"));
    fr_table_t back = {0};
    char *buf = print_and_reparse(&t, &back, &d);
    cr_assert(strstr(buf, "nccl_tree proto=ll\n") || strstr(buf, "nccl_tree proto=ll "), "printed table:\n%s", buf);
    cr_assert(strstr(buf, "proto=ll128") && strstr(buf, "proto=simple"), "printed table:\n%s", buf);
    free(buf);
    fr_table_free(&back);
    fr_table_free(&t);
}

Test(parse, appends_and_empty_inputs)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&t, "", "s", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(fr_table_parse(&t, NULL, "s", FR_SRC_TUNE, rec, &d, NULL), FR_SUCCESS);
    cr_assert_eq(fr_table_parse(&t, "\n\n;;  ; # only comments ; here\n#\n", "s", FR_SRC_TUNE, rec, &d,
                                &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(fr_table_parse(&t, "allreduce host * * * ring", "a", FR_SRC_TUNE, rec, &d, NULL), FR_SUCCESS);
    cr_assert_eq(fr_table_parse(&t, "bcast host * * * binomial", "b", FR_SRC_FILE, rec, &d, NULL), FR_SUCCESS);
    cr_assert_eq(t.n, 2);
    cr_assert_eq(t.rules[0].src, FR_SRC_TUNE);
    cr_assert_eq(t.rules[1].src, FR_SRC_FILE);
    cr_assert_eq(t.rules[1].coll, FR_COLL_BCAST);
    cr_assert_eq(d.n, 0);
    /* Many rules: the table grows. */
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(fr_table_parse(&t, "bcast * * * * mpi", "c", FR_SRC_TUNE, rec, &d, NULL), FR_SUCCESS);
    cr_assert_eq(t.n, 1002);
    cr_assert_eq(fr_table_parse(NULL, "bcast * * * * mpi", "c", FR_SRC_TUNE, rec, &d, NULL),
                 FR_ERR_NULL_POINTER);
    fr_table_free(&t);
    fr_table_free(&t);
    fr_table_free(NULL);
}

/* ---- malformed lines ---------------------------------------------------- */

Test(parse, malformed_lines)
{
    static const struct { const char *line, *w1, *w2; } bad[] = {
        { "allreduce host 1 *", "wrong number of fields", "got 4" },
        { "allreduce", "wrong number of fields", "got 1" },
        { "allreduce host 1 * * ring extra", "wrong number of fields", "extra" },
        { "allgather host * * * ring", "unknown collective", "allgather" },
        { "Allreduce host * * * ring", "unknown collective", "Allreduce" },
        { "allreduce gpu * * * ring", "unknown memory", "gpu" },
        { "allreduce host 2- * * ring", "bad range syntax", "nodes" },
        { "allreduce host -2 * * ring", "bad range syntax", "-2" },
        { "allreduce host * 1-2-3 * ring", "bad range syntax", "ppn" },
        { "allreduce host * *-4 * ring", "ppn", "not a number" },
        { "allreduce host * * - ring", "bad range syntax", "bytes" },
        { "allreduce host 8-2 * * ring", "lo > hi", "nodes" },
        { "allreduce host * * 1M-8K ring", "lo > hi", "1M-8K" },
        { "allreduce host * * inf-0 ring", "lo > hi", "bytes" },
        { "allreduce host * * 99999999999999999999 ring", "overflow", "99999999999999999999" },
        { "allreduce host * * 0-16E ring", "overflow", "16E" },
        { "allreduce host 99999999999999999999-inf * * ring", "overflow", "nodes" },
        { "allreduce host * * * foo", "unknown algorithm", "foo" },
        { "allreduce host * * * binomial", "for bcast", "binomial" },
        { "bcast host * * * ring", "for allreduce", "ring" },
        { "allreduce host * * * ring chunk=0", "bad parameter", "chunk" },
        { "allreduce host * * * ring chunk=abc", "bad parameter", "abc" },
        { "allreduce host * * * ring chunk=inf", "bad parameter", "chunk" },
        { "allreduce host * * * ring chunk=", "bad parameter", "chunk" },
        { "allreduce host * * * ring chunk=1Kx", "bad parameter", "trailing garbage" },
        { "allreduce host * * * ring fanout=1", "bad parameter", "fanout" },
        { "allreduce host * * * ring fanout=65", "bad parameter", "65" },
        { "allreduce host * * * ring fanout=2K", "bad parameter", "2K" },
        { "allreduce host * * * ring fanout=-3", "bad parameter", "fanout" },
        { "allreduce host * * * ring foo=1", "bad parameter", "foo" },
        { "allreduce host * * * ring =1", "bad parameter", "unknown key" },
        { "allreduce host * * * ring chunk=1K chunk=2K", "bad parameter", "twice" },
        { "allreduce host * * * ring fanout=2 fanout=2", "bad parameter", "twice" },
        { "allreduce host * * * hier across=tree", "bad parameter", "ring or rd" },
        { "allreduce host * * * hier across=rd across=rd", "bad parameter", "twice" },
        { "allreduce cuda * * * nccl_ring proto=ll256", "bad parameter", "ll, ll128 or simple" },
        { "allreduce cuda * * * nccl_ring proto=", "bad parameter", "proto=''" },
        { "allreduce cuda * * * nccl_tree proto=ll proto=ll", "bad parameter", "proto given twice" },
        { "allreduce host * * 8Kx ring", "trailing garbage", "8Kx" },
        { "allreduce host * * 0-8.5K ring", "trailing garbage", ".5K" },
        { "allreduce host 2K * * ring", "trailing garbage", "nodes" },
        { "allreduce host * 4x * ring", "trailing garbage", "ppn" },
        { "allreduce host * * \xff\xfe ring", "bytes", "\\xff\\xfe" },
        { "allreduce h\xc3\xb6st * * * ring", "unknown memory", "h\\xc3\\xb6st" },
    };
    const size_t nb = sizeof bad / sizeof bad[0];
    /* good rule, bad rule, good rule, ... : line 2i+2 is bad[i]. */
    size_t cap = 64;
    for (size_t i = 0; i < nb; i++)
        cap += strlen(bad[i].line) + 64;
    char *text = calloc(1, cap);
    strcat(text, "bcast host * * * binomial\n");
    for (size_t i = 0; i < nb; i++) {
        strcat(text, bad[i].line);
        strcat(text, "\nbcast host * * * binomial\n");
    }
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&t, text, "src", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, (int)nb, "%d diagnostics for %zu bad lines", d.n, nb);
    cr_assert_eq(nbad, (int)nb);
    for (size_t i = 0; i < nb; i++) {
        expect_diag(&d, (int)i, (int)(2 * i + 2), bad[i].w1, bad[i].w2);
        cr_assert_str_eq(d.src[i], "src");
    }
    /* The good rules around them all still apply. */
    cr_assert_eq(t.n, (int)nb + 1);
    for (int i = 0; i < t.n; i++) {
        cr_assert_eq(t.rules[i].coll, FR_COLL_BCAST);
        cr_assert_eq(t.rules[i].line, 2 * i + 1);
    }
    free(text);
    fr_table_free(&t);
    diags_clear(&d);
}

Test(parse, unknown_algorithm_lists_valid_names)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    fr_table_parse(&t, "allreduce host * * * nope\nbcast host * * * tree\nallreduce * * * * pipeline", "s",
                   FR_SRC_TUNE, rec, &d, NULL);
    cr_assert_eq(d.n, 3);
    cr_assert_eq(t.n, 0);
    for (int i = 0; i < fr_nalgs; i++) {
        const char *n = fr_algs[i]->name;
        if (fr_algs[i]->coll == FR_COLL_ALLREDUCE) {
            cr_assert(strstr(d.msg[0], n), "'%s' does not list %s", d.msg[0], n);
            cr_assert(strstr(d.msg[2], n), "'%s' does not list %s", d.msg[2], n);
        } else {
            cr_assert(strstr(d.msg[1], n), "'%s' does not list %s", d.msg[1], n);
        }
    }
    expect_diag(&d, 0, 1, "unknown algorithm", "nope");
    expect_diag(&d, 1, 2, "tree", "for allreduce");      /* tree exists for allreduce only */
    expect_diag(&d, 2, 3, "pipeline", "for bcast");
    diags_clear(&d);
}

Test(parse, semicolon_separated)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad;
    const char *s = "allreduce host * * 0-8K ring;bcast * * * * binomial fanout=4 ;; bogus ;"
                    " allreduce * 2-inf * * tree chunk=64K";
    cr_assert_eq(fr_table_parse(&t, s, "FASTREDUCE_TUNE", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 3);
    cr_assert_eq(nbad, 1);
    expect_diag(&d, 0, 4, "wrong number of fields", NULL);
    cr_assert_str_eq(d.src[0], "FASTREDUCE_TUNE");
    cr_assert_eq(t.rules[0].line, 1);
    cr_assert_eq(t.rules[1].line, 2);
    cr_assert_eq(t.rules[1].fanout, 4);
    cr_assert_eq(t.rules[2].line, 5);
    cr_assert_eq(t.rules[2].chunk, 64 * K);
    fr_table_free(&t);
    diags_clear(&d);

    /* Newlines and ';' both separate; a comment runs to the end of the line
     * and hides the ';' inside it. */
    s = "allreduce host * * * ring # comment; bcast host * * * binomial\n"
        "bcast * * * * mpi; nonsense here\n"
        "bcast host * * * pipeline";
    cr_assert_eq(fr_table_parse(&t, s, "FASTREDUCE_TUNE", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 3);
    cr_assert_eq(t.rules[0].alg, alg(FR_COLL_ALLREDUCE, "ring"));
    cr_assert_eq(t.rules[1].alg, alg(FR_COLL_BCAST, "mpi"));
    cr_assert_eq(t.rules[1].line, 2);
    cr_assert_eq(t.rules[2].line, 4);
    cr_assert_eq(nbad, 1);
    expect_diag(&d, 0, 3, "wrong number of fields", "got 2");
    fr_table_free(&t);
    diags_clear(&d);
}

Test(parse, default_diag_does_not_crash)
{
    fr_table_t t = { 0 };
    int nbad = 0;
    cr_assert_eq(fr_table_parse(&t, "junk\nallreduce * * * * mpi", "s", FR_SRC_TUNE, NULL, NULL, &nbad),
                 FR_SUCCESS);
    cr_assert_eq(nbad, 1);
    cr_assert_eq(t.n, 1);
    cr_assert_eq(fr_table_parse(&t, "junk", NULL, FR_SRC_TUNE, NULL, NULL, NULL), FR_SUCCESS);
    fr_table_free(&t);
}

/* ---- FASTREDUCE_ALGO ----------------------------------------------------- */

static void expect_algo_rule(const fr_rule_t *r, int coll, const char *name, int item)
{
    cr_assert_eq(r->coll, coll);
    cr_assert_eq(r->alg, alg(coll, name));
    /* the memory of the forced algorithm: ring for host buffers, nccl_ring for device ones */
    cr_assert_eq(r->mem, fr_algs[r->alg]->mem_types);
    cr_assert_eq(r->mem, strncmp(name, "nccl", 4) && strcmp(name, "staged") ? FR_MEM_HOST : FR_MEM_CUDA, "%s", name);
    expect_range(r->nodes, 0, FR_INF);
    expect_range(r->ppn, 0, FR_INF);
    expect_range(r->bytes, 0, FR_INF);
    cr_assert_eq(r->src, FR_SRC_ALGO);
    cr_assert_eq(r->line, item);
    cr_assert_eq(r->chunk, 0);
    cr_assert_eq(r->fanout, 0);
}

Test(algo, single_name)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_algo(&t, "ring", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 1);
    expect_algo_rule(&t.rules[0], FR_COLL_ALLREDUCE, "ring", 1);
    fr_table_free(&t);

    cr_assert_eq(fr_table_parse_algo(&t, " mpi ", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 2);
    expect_algo_rule(&t.rules[0], FR_COLL_ALLREDUCE, "mpi", 1);
    expect_algo_rule(&t.rules[1], FR_COLL_BCAST, "mpi", 1);
    fr_table_free(&t);

    cr_assert_eq(fr_table_parse_algo(&t, "binomial", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 1);
    expect_algo_rule(&t.rules[0], FR_COLL_BCAST, "binomial", 1);
    fr_table_free(&t);

    /* a device algorithm forced applies to device buffers only */
    cr_assert_eq(fr_table_parse_algo(&t, "nccl_ring", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 2);
    expect_algo_rule(&t.rules[0], FR_COLL_ALLREDUCE, "nccl_ring", 1);
    expect_algo_rule(&t.rules[1], FR_COLL_BCAST, "nccl_ring", 1);
    cr_assert_eq(fr_table_match(&t, 0, FR_COLL_ALLREDUCE, FR_MEM_HOST, 1, 2, 64), -1);
    cr_assert_eq(fr_table_match(&t, 0, FR_COLL_ALLREDUCE, FR_MEM_CUDA, 1, 2, 64), 0);
    fr_table_free(&t);
    cr_assert_eq(d.n, 0);

    cr_assert_eq(fr_table_parse_algo(&t, "nope", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(nbad, 1);
    expect_diag(&d, 0, 1, "unknown algorithm", "nope");
    cr_assert(strstr(d.msg[0], "ring") && strstr(d.msg[0], "binomial"), "%s", d.msg[0]);
    cr_assert_str_eq(d.src[0], "FASTREDUCE_ALGO");
    diags_clear(&d);

    cr_assert_eq(fr_table_parse_algo(&t, "", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(fr_table_parse_algo(&t, "   ", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(fr_table_parse_algo(&t, NULL, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(fr_table_parse_algo(NULL, "ring", rec, &d, &nbad), FR_ERR_NULL_POINTER);
}

/* A forced algorithm's rule with a whole table after it (--compare's forced
 * columns): the rules in order, the table's own copy untouched, the table
 * appended to itself, nothing appended, NULL. */
Test(algo, append_table)
{
    char text[4096] = "", line[128];
    for (int i = 0; i < 20; i++) {   /* more than the first allocation's 16 */
        snprintf(line, sizeof line, "bcast host * * %dK-%dK pipeline chunk=%dK\n", i, i, i + 1);
        strcat(text, line);
    }
    fr_table_t f = { 0 }, own = { 0 }, none = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_algo(&f, "allreduce=ring", NULL, NULL, &nbad), FR_SUCCESS);
    cr_assert_eq(fr_table_parse(&own, text, "test", FR_SRC_TUNE, NULL, NULL, &nbad), FR_SUCCESS);
    cr_assert_eq(own.n, 20);
    fr_rule_t first = f.rules[0];
    cr_assert_eq(fr_table_append(&f, &own), FR_SUCCESS);
    cr_assert_eq(f.n, 21);
    cr_assert_eq(own.n, 20);
    expect_same_rule(&f.rules[0], &first, 0);
    for (int i = 0; i < 20; i++) {
        expect_same_rule(&f.rules[1 + i], &own.rules[i], 1 + i);
        cr_assert_eq(f.rules[1 + i].chunk, (uint64_t)(i + 1) * 1024);
    }
    cr_assert_eq(fr_table_match(&f, 0, FR_COLL_ALLREDUCE, FR_MEM_HOST, 1, 2, 64), 0);
    cr_assert_eq(fr_table_match(&f, 0, FR_COLL_BCAST, FR_MEM_HOST, 1, 2, 7 * 1024), 8);

    cr_assert_eq(fr_table_append(&own, &own), FR_SUCCESS);
    cr_assert_eq(own.n, 40);
    for (int i = 0; i < 20; i++)
        expect_same_rule(&own.rules[20 + i], &f.rules[1 + i], 20 + i);

    cr_assert_eq(fr_table_append(&f, &none), FR_SUCCESS);
    cr_assert_eq(f.n, 21);
    cr_assert_eq(fr_table_append(NULL, &own), FR_ERR_NULL_POINTER);
    cr_assert_eq(fr_table_append(&f, NULL), FR_ERR_NULL_POINTER);
    fr_table_free(&f);
    fr_table_free(&own);
}

Test(algo, per_collective)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_algo(&t, "allreduce=ring,bcast=binomial", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 2);
    expect_algo_rule(&t.rules[0], FR_COLL_ALLREDUCE, "ring", 1);
    expect_algo_rule(&t.rules[1], FR_COLL_BCAST, "binomial", 2);
    fr_table_free(&t);

    cr_assert_eq(fr_table_parse_algo(&t, " bcast = pipeline , allreduce=tree ", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 2);
    expect_algo_rule(&t.rules[0], FR_COLL_BCAST, "pipeline", 1);
    expect_algo_rule(&t.rules[1], FR_COLL_ALLREDUCE, "tree", 2);
    fr_table_free(&t);

    cr_assert_eq(fr_table_parse_algo(&t, "bcast=shm", rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 1);
    expect_algo_rule(&t.rules[0], FR_COLL_BCAST, "shm", 1);
    fr_table_free(&t);
    cr_assert_eq(d.n, 0);
}

Test(algo, errors)
{
    static const struct { const char *spec, *w1, *w2; int item, nrules; } bad[] = {
        { "allreduce=binomial", "binomial", "for bcast", 1, 0 },
        { "allreduce=ring,bcast=nope", "unknown algorithm", "nope", 2, 1 },
        { "gather=ring", "unknown collective", "gather", 1, 0 },
        { "allreduce=ring,allreduce=tree", "twice", "allreduce", 2, 1 },
        { "allreduce=", "empty algorithm", "allreduce", 1, 0 },
        { "allreduce=ring,,bcast=mpi", "empty item", NULL, 2, 2 },
        { "ring,bcast=mpi", "not collective=NAME", "ring", 1, 1 },
        { "=ring", "unknown collective", NULL, 1, 0 },
        { "allreduce=ring,", "empty item", NULL, 2, 1 },
        { "allreduce=ring=tree", "unknown algorithm", "ring=tree", 1, 0 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fr_table_t t = { 0 };
        diags_t d = { 0 };
        int nbad = -1;
        cr_assert_eq(fr_table_parse_algo(&t, bad[i].spec, rec, &d, &nbad), FR_SUCCESS);
        cr_assert_eq(nbad, 1, "'%s': nbad %d", bad[i].spec, nbad);
        cr_assert_eq(d.n, 1, "'%s': %d diagnostics", bad[i].spec, d.n);
        expect_diag(&d, 0, bad[i].item, bad[i].w1, bad[i].w2);
        cr_assert_str_eq(d.src[0], "FASTREDUCE_ALGO");
        cr_assert_eq(t.n, bad[i].nrules, "'%s': %d rules", bad[i].spec, t.n);
        fr_table_free(&t);
        diags_clear(&d);
    }
}

/* ---- matching ----------------------------------------------------------- */

Test(match, semantics)
{
    const char *text =
        "allreduce host 1     2-8  0-8K    recursive_doubling\n"  /* 0 */
        "allreduce host 1     *    8K-inf  shm\n"                 /* 1 */
        "allreduce cuda *     *    *       ring\n"                /* 2 */
        "bcast     *    2-inf *    *       binomial\n"            /* 3 */
        "allreduce *    *     *    0       tree\n"                /* 4 */
        "allreduce *    *     *    inf     mpi\n"                 /* 5 */
        "allreduce *    *     *    *       mpi\n";                /* 6 */
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    cr_assert_eq(fr_table_parse(&t, text, "m", FR_SRC_TUNE, rec, &d, NULL), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(t.n, 7);
    int A = FR_COLL_ALLREDUCE, B = FR_COLL_BCAST;
    unsigned H = FR_MEM_HOST, C = FR_MEM_CUDA;
    /* first match wins; bounds are inclusive: 8192 goes to the first rule */
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 2, 0), 0);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 8, 8192), 0);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 8, 8193), 1);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 9, 100), 6);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 9, 9000), 1);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 1, 100), 6);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 1, 0), 4);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 1, 9, FR_INF), 1);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 2, 1, FR_INF), 5);
    cr_assert_eq(fr_table_match(&t, 0, A, H, 2, 1, FR_INF - 1), 6);
    /* memory masks */
    cr_assert_eq(fr_table_match(&t, 0, A, C, 1, 2, 0), 2);
    cr_assert_eq(fr_table_match(&t, 0, A, H | C, 1, 2, 0), 0);
    cr_assert_eq(fr_table_match(&t, 0, A, 0, 1, 2, 0), -1);
    cr_assert_eq(fr_table_match(&t, 0, B, C, 2, 1, 5), 3);
    cr_assert_eq(fr_table_match(&t, 0, B, H, FR_INF, FR_INF, FR_INF), 3);
    /* collective and ranges */
    cr_assert_eq(fr_table_match(&t, 0, B, H, 1, 4, 5), -1);
    cr_assert_eq(fr_table_match(&t, 0, B, H, 0, 4, 5), -1);
    /* start */
    cr_assert_eq(fr_table_match(&t, 1, A, H, 1, 2, 0), 4);
    cr_assert_eq(fr_table_match(&t, 1, A, H, 1, 2, 9000), 1);
    cr_assert_eq(fr_table_match(&t, 2, A, H, 1, 2, 9000), 6);
    cr_assert_eq(fr_table_match(&t, 2, A, H, 1, 2, 0), 4);
    cr_assert_eq(fr_table_match(&t, 5, A, H, 1, 2, 0), 6);
    cr_assert_eq(fr_table_match(&t, 7, A, H, 1, 2, 0), -1);
    cr_assert_eq(fr_table_match(&t, 100, A, H, 1, 2, 0), -1);
    cr_assert_eq(fr_table_match(&t, -3, A, H, 1, 2, 0), 0);
    cr_assert_eq(fr_table_match(NULL, 0, A, H, 1, 2, 0), -1);
    fr_table_t empty = { 0 };
    cr_assert_eq(fr_table_match(&empty, 0, A, H, 1, 2, 0), -1);
    fr_table_free(&t);
}

/* ---- printing ----------------------------------------------------------- */

static void squash(char *s)  /* collapse runs of blanks, for comparing lines */
{
    char *o = s;
    for (char *p = s; *p; p++)
        if (*p != ' ' || (o > s && o[-1] != ' '))
            *o++ = *p;
    while (o > s && o[-1] == ' ')
        o--;
    *o = '\0';
}

Test(print, rule_format)
{
    static const struct { const char *in, *out; } cases[] = {
        { "allreduce host 1 2-8 0-8192 recursive_doubling", "allreduce host 1 2-8 0-8K recursive_doubling" },
        { "allreduce host 1 * 8K-inf shm chunk=262144", "allreduce host 1 * 8K-inf shm chunk=256K" },
        { "bcast * 2-inf * 0-inf binomial fanout=2", "bcast * 2-inf * * binomial fanout=2" },
        { "bcast cuda 0-inf 3-3 1536 pipeline", "bcast cuda * 3 1536 pipeline" },
        { "allreduce * 4 4-5 1048576-1073741824 ring chunk=1536", "allreduce * 4 4-5 1M-1G ring chunk=1536" },
        { "allreduce host 1 1 0 tree", "allreduce host 1 1 0 tree" },
        { "allreduce host inf-inf inf inf-inf tree", "allreduce host inf inf inf tree" },
        { "allreduce host * * 1T-15E ring fanout=64 chunk=1P", "allreduce host * * 1T-15E ring chunk=1P fanout=64" },
        { "allreduce host * * 1025-2047 ring", "allreduce host * * 1025-2047 ring" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fr_table_t t = { 0 };
        diags_t d = { 0 };
        char buf[256];
        fr_table_parse(&t, cases[i].in, "p", FR_SRC_TUNE, rec, &d, NULL);
        cr_assert_eq(d.n, 0, "'%s': %s", cases[i].in, d.n ? d.msg[0] : "");
        cr_assert_eq(t.n, 1);
        cr_assert_eq(fr_rule_format(&t.rules[0], buf, sizeof buf), buf);
        squash(buf);
        cr_assert_str_eq(buf, cases[i].out);
        /* A short buffer truncates, never overflows. */
        char small[8];
        memset(small, 'x', sizeof small);
        fr_rule_format(&t.rules[0], small, 5);
        cr_assert_eq(strlen(small), 4);
        cr_assert_eq(small[5], 'x');
        fr_table_free(&t);
    }
    char z[4] = "abc";
    cr_assert_eq(fr_rule_format(NULL, z, sizeof z), z);
    cr_assert_str_eq(z, "");
    cr_assert_null(fr_rule_format(NULL, NULL, 0));
}

Test(print, params_format)
{
    char buf[96];
    cr_assert_eq(fr_params_format(0, 0, 0, 0, buf, sizeof buf), buf);
    cr_assert_str_eq(buf, "", "no parameter set: nothing");
    fr_params_format(1u << 20, 4, 1, 2, buf, sizeof buf);
    cr_assert_str_eq(buf, " chunk=1M fanout=4 across=ring proto=ll128");
    fr_params_format(1536, 0, 2, 3, buf, sizeof buf);
    cr_assert_str_eq(buf, " chunk=1536 across=rd proto=simple");
    fr_params_format(0, 3, 0, 0, buf, sizeof buf);
    cr_assert_str_eq(buf, " fanout=3");
    /* out-of-range words are left out, as in a rule line */
    fr_params_format(0, 0, 3, 4, buf, sizeof buf);
    cr_assert_str_eq(buf, "");
    /* a short buffer truncates, never overflows, and stays terminated */
    for (size_t len = 1; len < 24; len++) {
        char small[32];
        memset(small, 'x', sizeof small);
        fr_params_format(1u << 20, 4, 1, 2, small, len);
        cr_assert_eq(strlen(small), len - 1, "len %zu: '%s'", len, small);
        cr_assert_eq(strncmp(small, " chunk=1M fanout=4 across=ring", len - 1), 0, "len %zu: '%s'", len, small);
        cr_assert_eq(small[len], 'x', "len %zu: wrote past the end", len);
    }
    cr_assert_null(fr_params_format(1, 1, 1, 1, NULL, 8));
}

Test(print, round_trip)
{
    const char *text =
        "allreduce host 1 2-8 0-8K recursive_doubling\n"
        "allreduce host 1 * 8193-inf shm chunk=256K\n"
        "allreduce cuda 3 4 1M ring chunk=1000\n"
        "allreduce * 0-0 5-inf 512-1G tree fanout=64 chunk=1\n"
        "bcast * 2-inf * * binomial fanout=2\n"
        "bcast host inf 0 16K-32K pipeline chunk=1M\n"
        "bcast cuda * * inf scatter_allgather\n"
        "bcast host 18446744073709551614 * 18446744073709551614 mpi\n"
        "allreduce host 7-9 1-2 0-15E mpi\n";
    fr_table_t t = { 0 }, u = { 0 };
    diags_t d = { 0 };
    fr_table_parse(&t, text, "rt", FR_SRC_TUNE, rec, &d, NULL);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(t.n, 9);
    fr_table_parse(&t, fr_default_table, "default", FR_SRC_DEFAULT, rec, &d, NULL);
    cr_assert_eq(d.n, 0);
    fr_table_parse_algo(&t, "allreduce=ring,bcast=binomial", rec, &d, NULL);
    cr_assert_eq(d.n, 0);

    char *out = print_table(&t);
    cr_assert(strncmp(out, "# fastreduce tuning table v1\n", 29) == 0, "header: %.40s", out);
    cr_assert(strstr(out, "FASTREDUCE_ALGO"), "the source is not printed:\n%s", out);
    fr_table_parse(&u, out, "printed", FR_SRC_TUNE, rec, &d, NULL);
    cr_assert_eq(d.n, 0, "re-parse: %s", d.n ? d.msg[0] : "");
    expect_same_rules(&t, &u);

    /* And once more: print(parse(print(t))) == print(t). */
    char *out2 = print_table(&u);
    fr_table_t v = { 0 };
    fr_table_parse(&v, out2, "printed2", FR_SRC_TUNE, rec, &d, NULL);
    expect_same_rules(&u, &v);
    free(out);
    free(out2);
    fr_table_free(&t);
    fr_table_free(&u);
    fr_table_free(&v);

    /* An empty table prints just the header. */
    out = print_table(&t);
    cr_assert(strncmp(out, "# fastreduce tuning table v1\n", 29) == 0);
    fr_table_parse(&u, out, "empty", FR_SRC_TUNE, rec, &d, NULL);
    cr_assert_eq(u.n, 0);
    cr_assert_eq(d.n, 0);
    free(out);
    fr_table_print(&t, NULL);  /* a NULL FILE: nothing happens */
}

Test(print, src_names)
{
    cr_assert_str_eq(fr_rule_src_name(FR_SRC_ALGO), "FASTREDUCE_ALGO");
    cr_assert_str_eq(fr_rule_src_name(FR_SRC_TUNE), "FASTREDUCE_TUNE");
    cr_assert_str_eq(fr_rule_src_name(FR_SRC_FILE), "FASTREDUCE_TUNE_FILE");
    cr_assert_str_eq(fr_rule_src_name(FR_SRC_DEFAULT), "default");
    cr_assert_not_null(fr_rule_src_name(-1));
    cr_assert_not_null(fr_rule_src_name(FR_SRC_COUNT));
}

/* ---- the default table -------------------------------------------------- */

Test(default_table, parses_cleanly_and_covers_every_call)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&t, fr_default_table, "default", FR_SRC_DEFAULT, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "default table: %s:%d: %s", d.n ? d.src[0] : "", d.n ? d.line[0] : 0,
                 d.n ? d.msg[0] : "");
    cr_assert_eq(nbad, 0);
    cr_assert_gt(t.n, 0);
    for (int i = 0; i < t.n; i++) {
        cr_assert_eq(t.rules[i].src, FR_SRC_DEFAULT);
        cr_assert(t.rules[i].alg >= 0 && t.rules[i].alg < fr_nalgs);
        cr_assert_eq((int)fr_algs[t.rules[i].alg]->coll, t.rules[i].coll);
    }
    int A = FR_COLL_ALLREDUCE, B = FR_COLL_BCAST;
    unsigned H = FR_MEM_HOST, C = FR_MEM_CUDA;
#define NAME(i) ((i) >= 0 ? fr_algs[t.rules[i].alg]->name : "(none)")
#define EXPECT(coll, mem, nodes, ppn, bytes, name) do { \
        int i_ = fr_table_match(&t, 0, coll, mem, nodes, ppn, bytes); \
        cr_assert(i_ >= 0 && strcmp(NAME(i_), name) == 0, "(%d,%u,%d,%d,%llu): %s, expected %s", \
                  coll, mem, nodes, ppn, (unsigned long long)(bytes), NAME(i_), name); } while (0)
    EXPECT(A, H, 1, 8, 1 * M, "shm");
    EXPECT(A, H, 1, 1, 8, "shm");
    EXPECT(A, H, 2, 4, 0, "recursive_doubling");
    EXPECT(A, H, 2, 4, 64 * K, "recursive_doubling");
    EXPECT(A, H, 2, 4, 64 * K + 1, "ring");
    EXPECT(A, H, 4, 1, 8 * M, "ring");
    EXPECT(A, H, 4, 1, 8 * M + 1, "rabenseifner");
    EXPECT(A, H, 64, 1, FR_INF, "rabenseifner");
    EXPECT(A, H, 64, 8, FR_INF, "hier");
    EXPECT(A, H, 2, 2, 8 * M, "hier");
    EXPECT(A, H, 2, 2, 8 * M - 1, "ring");
    EXPECT(A, C, 4, 8, 1 * M, "nccl");
    EXPECT(B, H, 1, 2, 4, "shm");
    EXPECT(B, H, 2, 1, 512 * K, "binomial");
    EXPECT(B, H, 2, 1, 512 * K + 1, "pipeline");
    EXPECT(B, H, 2, 2, 8 * K, "hier");
    EXPECT(B, H, 2, 2, 8 * K - 1, "binomial");
    EXPECT(B, H, 2, 1, 8 * K, "binomial");
    EXPECT(B, C, 2, 1, 8, "nccl");
    /* after NCCL, device buffers fall to the staged path */
    for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
        int i = fr_table_match(&t, 0, coll, C, 3, 8, 1000);
        int j = fr_table_match(&t, i + 1, coll, C, 3, 8, 1000);
        cr_assert(j >= 0 && !strcmp(NAME(j), "staged"), "coll %d: after %s comes %s", coll, NAME(i), NAME(j));
    }
    EXPECT(B, H, 1, 1, 8, "shm");
    /* Every (collective, memory) has a rule for every shape. */
    for (int coll = 0; coll < FR_COLL_COUNT; coll++)
        for (unsigned mem = 1; mem <= 2; mem++)
            cr_assert_geq(fr_table_match(&t, 0, coll, mem, 0, 0, 0), 0);
    fr_table_free(&t);
}

/* ---- files -------------------------------------------------------------- */

static char *temp_file(const void *data, size_t len)
{
    char *path = strdup("/tmp/test_tune_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp");
    cr_assert_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

Test(file, header_v1)
{
    const char text[] =
        "# fastreduce tuning table v1\n"
        "# notes: a word-colon comment that is no header field; it stays a comment\n"
        "allreduce host 1 2-8 0-8K recursive_doubling\n"
        "\n"
        "allreduce host 1 * 8K-inf shm chunk=256K\r\n"
        "bogus line\n"
        "bcast * 2-inf * * binomial fanout=2; bcast host * * * bad_alg\n";
    char *path = temp_file(text, sizeof text - 1);
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 3);
    cr_assert_eq(nbad, 2);
    expect_diag(&d, 0, 6, "wrong number of fields", NULL);
    expect_diag(&d, 1, 7, "unknown algorithm", "bad_alg");   /* file line, not ordinal */
    cr_assert_str_eq(d.src[0], path);
    cr_assert_eq(t.rules[0].line, 3);
    cr_assert_eq(t.rules[1].line, 5);
    cr_assert_eq(t.rules[1].chunk, 256 * K);
    cr_assert_eq(t.rules[2].line, 7);
    for (int i = 0; i < t.n; i++)
        cr_assert_eq(t.rules[i].src, FR_SRC_FILE);
    fr_table_free(&t);
    diags_clear(&d);
    unlink(path);
    free(path);

    /* Header variations: blanks, case, text after the version, not first. */
    const char text2[] = "\n  #   FastReduce  Tuning Table v1 measured on node01\nbcast * * * * mpi\n";
    path = temp_file(text2, sizeof text2 - 1);
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "%s", d.n ? d.msg[0] : "");
    cr_assert_eq(t.n, 1);
    cr_assert_eq(t.rules[0].line, 3);
    fr_table_free(&t);
    unlink(path);
    free(path);
}

Test(file, other_version_rejected)
{
    static const char *texts[] = {
        "# fastreduce tuning table v2\nallreduce host * * * ring\n",
        "allreduce host * * * ring\n# comment\n# fastreduce tuning table v10\n",
        "# fastreduce tuning table v\nallreduce host * * * ring\n",
        "# fastreduce tuning table v1.5\nallreduce host * * * ring\n",
    };
    static const int line[] = { 1, 3, 1, 1 };
    static const char *ver[] = { "'2'", "'10'", "''", "'1.5'" };
    for (int i = 0; i < 4; i++) {
        char *path = temp_file(texts[i], strlen(texts[i]));
        fr_table_t t = { 0 };
        diags_t d = { 0 };
        int nbad = -1;
        cr_assert_eq(fr_table_parse(&t, "bcast * * * * mpi", "pre", FR_SRC_TUNE, rec, &d, NULL), FR_SUCCESS);
        cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_ERR_CONFIG);
        cr_assert_eq(t.n, 1, "rules of a rejected file were used");
        cr_assert_eq(d.n, 1);
        cr_assert_eq(nbad, 1);
        expect_diag(&d, 0, line[i], "version", ver[i]);
        cr_assert(strstr(fr_last_error(), "version"), "last error: %s", fr_last_error());
        fr_table_free(&t);
        diags_clear(&d);
        unlink(path);
        free(path);
    }
}

Test(file, missing_header)
{
    const char text[] = "# a comment\nallreduce host * * * ring\nbcast host * * * binomial\n";
    char *path = temp_file(text, sizeof text - 1);
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 2, "the rules of a file without a header must still be used");
    cr_assert_eq(d.n, 1);
    cr_assert_eq(nbad, 1);
    expect_diag(&d, 0, 1, "missing header", NULL);
    fr_table_free(&t);
    diags_clear(&d);
    unlink(path);
    free(path);

    /* An empty file: no rules, just the missing header. */
    path = temp_file("", 0);
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 0);
    expect_diag(&d, 0, 1, "missing header", NULL);
    diags_clear(&d);
    unlink(path);
    free(path);
}

Test(file, unreadable)
{
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_file(&t, "/nonexistent/dir/table.txt", rec, &d, &nbad), FR_ERR_CONFIG);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(d.n, 1);
    cr_assert_str_eq(d.src[0], "/nonexistent/dir/table.txt");
    cr_assert(strstr(d.msg[0], "cannot read"), "%s", d.msg[0]);
    cr_assert(strstr(fr_last_error(), "/nonexistent/dir/table.txt"), "last error: %s", fr_last_error());
    diags_clear(&d);
    /* A directory opens but cannot be read. */
    cr_assert_eq(fr_table_parse_file(&t, "/tmp", rec, &d, &nbad), FR_ERR_CONFIG);
    cr_assert_eq(d.n, 1);
    diags_clear(&d);
    cr_assert_eq(fr_table_parse_file(&t, NULL, rec, &d, &nbad), FR_ERR_NULL_POINTER);
    cr_assert_eq(fr_table_parse_file(NULL, "/tmp/x", rec, &d, &nbad), FR_ERR_NULL_POINTER);
}

Test(file, nul_byte_and_binary)
{
    const char text[] = "# fastreduce tuning table v1\nallreduce host * * * ring\0junk\n"
                        "bcast host * * * binomial\n\xff\xfe\x01\x02 host * * * ring\n";
    char *path = temp_file(text, sizeof text - 1);
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 1);
    cr_assert_eq(t.rules[0].coll, FR_COLL_BCAST);
    cr_assert_eq(nbad, 2);
    expect_diag(&d, 0, 2, "NUL", NULL);
    expect_diag(&d, 1, 4, "\\xff", NULL);
    fr_table_free(&t);
    diags_clear(&d);
    unlink(path);
    free(path);
}

Test(file, large_file)
{
    size_t nrules = 20000;
    const char *rule = "allreduce host * * * ring chunk=1M\n";
    size_t len = strlen(rule);
    char *text = malloc(nrules * len + 64);
    char *p = text + sprintf(text, "# fastreduce tuning table v1\n");
    for (size_t i = 0; i < nrules; i++)
        p += sprintf(p, "%s", rule);
    char *path = temp_file(text, (size_t)(p - text));
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, NULL), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(t.n, (int)nrules);
    cr_assert_eq(t.rules[t.n - 1].line, (int)nrules + 1);
    fr_table_free(&t);
    unlink(path);
    free(path);
    free(text);
}

/* ---- huge lines --------------------------------------------------------- */

Test(robust, huge_lines)
{
    size_t n = 1 << 20;
    char *s = malloc(n + 256);
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad;

    /* A megabyte of one word: reported, and the message stays short. */
    memset(s, 'a', n);
    s[n] = '\0';
    cr_assert_eq(fr_table_parse(&t, s, "huge", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 1);
    expect_diag(&d, 0, 1, "wrong number of fields", NULL);
    diags_clear(&d);

    /* A valid rule padded with a megabyte of blanks still parses. */
    memset(s, ' ', n);
    memcpy(s, "allreduce", 9);
    strcpy(s + n - 40, "host * * 0-8K ring  ");
    cr_assert_eq(fr_table_parse(&t, s, "huge", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 1);
    fr_table_free(&t);

    /* A huge field in every position. */
    for (int field = 0; field < 7; field++) {
        const char *f[7] = { "allreduce", "host", "*", "*", "*", "ring", "chunk=1K" };
        char *big = malloc(n + 1);
        memset(big, field == 6 ? '9' : (field >= 2 && field <= 4) ? '7' : 'z', n);
        big[n] = '\0';
        if (field == 6)
            memcpy(big, "chunk=", 6);
        f[field] = big;
        size_t cap = n + 128;
        char *line = malloc(cap);
        snprintf(line, cap, "%s %s %s %s %s %s %s", f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
        cr_assert_eq(fr_table_parse(&t, line, "huge", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
        cr_assert_eq(nbad, 1, "field %d", field);
        cr_assert_eq(t.n, 0);
        cr_assert_lt(strlen(d.msg[0]), 2048, "message of %zu bytes", strlen(d.msg[0]));
        if ((field >= 2 && field <= 4) || field == 6)
            cr_assert(strstr(d.msg[0], "overflow"), "field %d: %s", field, d.msg[0]);
        diags_clear(&d);
        free(line);
        free(big);
    }

    /* Thousands of parameters on one line. */
    size_t o = (size_t)sprintf(s, "bcast host * * * pipeline");
    while (o + 16 < n)
        o += (size_t)sprintf(s + o, " fanout=4");
    cr_assert_eq(fr_table_parse(&t, s, "huge", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 1);
    expect_diag(&d, 0, 1, "twice", NULL);
    diags_clear(&d);

    /* Very many short lines and separators. */
    for (size_t i = 0; i < n; i++)
        s[i] = (i % 3 == 0) ? ';' : (i % 3 == 1) ? '\n' : ' ';
    s[n] = '\0';
    cr_assert_eq(fr_table_parse(&t, s, "huge", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 0);
    free(s);
}

/* ---- fuzz --------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int count_segments(const char *s)
{
    int n = 1;
    for (; *s; s++)
        if (*s == '\n' || *s == ';')
            n++;
    return n;
}

static void check_consistent(const char *s, const fr_table_t *t, const diags_t *d, int nbad)
{
    int nseg = count_segments(s);
    cr_assert_eq(nbad, d->n);
    cr_assert_leq(t->n + nbad, nseg);
    for (int i = 0; i < d->n && i < MAXD; i++)
        cr_assert(d->line[i] >= 1 && d->line[i] <= nseg, "line %d of %d", d->line[i], nseg);
    for (int i = 0; i < t->n; i++) {
        const fr_rule_t *r = &t->rules[i];
        cr_assert(r->coll >= 0 && r->coll < FR_COLL_COUNT);
        cr_assert(r->alg >= 0 && r->alg < fr_nalgs);
        cr_assert(r->nodes.lo <= r->nodes.hi && r->ppn.lo <= r->ppn.hi && r->bytes.lo <= r->bytes.hi);
        cr_assert(r->mem != 0 && (r->mem & ~(unsigned)ALLMEM) == 0);
        cr_assert(r->fanout == 0 || (r->fanout >= 2 && r->fanout <= 64));
    }
}

Test(robust, fuzz_random_bytes)
{
    char s[512];
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = rnd() % (sizeof s - 1);
        for (size_t i = 0; i < len; i++)
            s[i] = (char)(1 + rnd() % 255);
        s[len] = '\0';
        fr_table_t t = { 0 };
        diags_t d = { 0 };
        int nbad = -1;
        cr_assert_eq(fr_table_parse(&t, s, "fuzz", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
        check_consistent(s, &t, &d, nbad);
        fr_table_free(&t);
        diags_clear(&d);

        /* Garbage that starts a rule is always reported. */
        if (len)
            s[0] = 'x';
        for (size_t i = 1; i < len; i++)
            if (s[i] == '\n' || s[i] == ';' || s[i] == '#')
                s[i] = ' ';
        cr_assert_eq(fr_table_parse(&t, s, "fuzz", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
        cr_assert_eq(nbad, len ? 1 : 0, "'%s' not reported", s);
        cr_assert_eq(t.n, 0);
        diags_clear(&d);

        /* The other parsers take the same garbage. */
        uint64_t v;
        (void)fr_parse_size(s, &v);
        cr_assert_eq(fr_table_parse_algo(&t, s, rec, &d, &nbad), FR_SUCCESS);
        cr_assert(t.n == 0 || nbad >= 0);
        fr_table_free(&t);
        diags_clear(&d);
    }
}

Test(robust, fuzz_tokens)
{
    static const char *tok[] = {
        "allreduce", "bcast", "host", "cuda", "*", "1", "2-8", "0-8K", "8K-inf", "inf", "ring",
        "binomial", "shm", "mpi", "tree", "chunk=1M", "fanout=4", "fanout=99", "chunk=0", "-", "9-1",
        "16E", "1K-", "x", "=", "#", ";", "\n", " ", "\t", "\r", "99999999999999999999", "8Kx", "\xff",
    };
    const int ntok = sizeof tok / sizeof tok[0];
    char s[1024];
    for (int iter = 0; iter < 5000; iter++) {
        size_t o = 0;
        int n = (int)(rnd() % 16);
        for (int i = 0; i < n; i++)
            o += (size_t)snprintf(s + o, sizeof s - o, "%s%s", tok[rnd() % ntok], rnd() % 4 ? " " : "");
        s[o] = '\0';
        fr_table_t t = { 0 };
        diags_t d = { 0 };
        int nbad = -1;
        cr_assert_eq(fr_table_parse(&t, s, "fuzz", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
        check_consistent(s, &t, &d, nbad);
        /* Whatever parsed prints and parses back to the same rules. */
        char *out = print_table(&t);
        fr_table_t u = { 0 };
        diags_t e = { 0 };
        fr_table_parse(&u, out, "printed", FR_SRC_TUNE, rec, &e, NULL);
        cr_assert_eq(e.n, 0);
        expect_same_rules(&t, &u);
        free(out);
        fr_table_free(&t);
        fr_table_free(&u);
        diags_clear(&d);
        diags_clear(&e);
    }
}

/* ---- header fields ("# key: value"): fr_table_meta_t --------------------- */

#include <stddef.h>

/* Write @p len bytes of @p text to a temporary file, read it back with
 * fr_table_read_file() and remove the file. */
static fr_status_t meta_read(const char *text, size_t len, fr_table_t *t, fr_table_meta_t *m, diags_t *d,
                             int *nbad)
{
    char *path = temp_file(text, len);
    fr_status_t st = fr_table_read_file(t, m, path, rec, d, nbad);
    unlink(path);
    free(path);
    return st;
}

#define META_STR(text) meta_read((text), strlen(text), &t, &m, &d, &nbad)

static void expect_meta_eq(const fr_table_meta_t *got, const fr_table_meta_t *want)
{
    cr_assert_eq(got->version, want->version, "version %d, expected %d", got->version, want->version);
    cr_assert_str_eq(got->fingerprint, want->fingerprint);
    cr_assert_eq(got->nodes, want->nodes, "nodes %ld, expected %ld", got->nodes, want->nodes);
    cr_assert_eq(got->ppn, want->ppn, "ppn %ld, expected %ld", got->ppn, want->ppn);
    cr_assert_eq(got->ranks, want->ranks, "ranks %ld, expected %ld", got->ranks, want->ranks);
    cr_assert_str_eq(got->mpi, want->mpi);
    cr_assert_str_eq(got->ucx, want->ucx);
    cr_assert_str_eq(got->nccl, want->nccl);
    cr_assert_str_eq(got->fastreduce, want->fastreduce);
    cr_assert_str_eq(got->date, want->date);
    cr_assert_str_eq(got->measured, want->measured);
    cr_assert_str_eq(got->command, want->command);
}

/* Rules equal field by field, across= included. */
static void expect_rules_eq(const fr_table_t *a, const fr_table_t *b)
{
    cr_assert_eq(a->n, b->n, "%d rules, expected %d", a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        const fr_rule_t *x = &a->rules[i], *y = &b->rules[i];
        cr_assert_eq(x->coll, y->coll, "rule %d coll", i);
        cr_assert_eq(x->mem, y->mem, "rule %d mem", i);
        expect_range(x->nodes, y->nodes.lo, y->nodes.hi);
        expect_range(x->ppn, y->ppn.lo, y->ppn.hi);
        expect_range(x->bytes, y->bytes.lo, y->bytes.hi);
        cr_assert_eq(x->alg, y->alg, "rule %d alg", i);
        cr_assert_eq(x->chunk, y->chunk, "rule %d chunk", i);
        cr_assert_eq(x->fanout, y->fanout, "rule %d fanout", i);
        cr_assert_eq(x->across, y->across, "rule %d across", i);
    }
}

static char *meta_text(const fr_table_meta_t *m)
{
    return PRINTED(fr_table_meta_print, m);
}

Test(tune_meta, round_trip_every_field)
{
    static const char *rules_text =
        "allreduce host 1 2 0-8K shm chunk=64K\n"
        "bcast host 1 2 8K-inf pipeline chunk=1M\n"
        "allreduce host 2-inf 2-inf 0-64K hier across=rd\n"
        "allreduce * 3-7 * 1M-1G tree fanout=4 chunk=128K\n"
        "bcast cuda * * * mpi\n";
    fr_table_meta_t out, m;
    memset(&out, 0, sizeof out);
    out.version = 1;
    strcpy(out.fingerprint, "x86_64:2s:64c:hwloc=4f2a9c01-mlx5_0,mlx5_1");
    out.nodes = 4;
    out.ppn = 16;
    out.ranks = 64;
    strcpy(out.mpi, "Open MPI 4.1.5, pml ucx, btl ^openib,  coll tuned");
    strcpy(out.ucx, "1.15.0");
    strcpy(out.nccl, "2.19.3+cuda12.2");
    strcpy(out.fastreduce, "0.4.0-dev (git 1a2b3c4)");
    strcpy(out.date, "2024-05-01T12:34:56+02:00");
    strcpy(out.measured, "float32 sum, bcast root 0, host");
    strcpy(out.command, "fastreduce-tune --out 'my table.txt' --sizes \"8K;64K;1M\" --note '# not a"
                        " comment; nor a rule' -- mpirun -np 64 --mca pml ucx ./a.out; echo done # end");

    fr_table_t src = { 0 }, t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse(&src, rules_text, "rules", FR_SRC_TUNE, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(nbad, 0);
    cr_assert_eq(src.n, 5);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    fr_table_meta_print(&out, f);
    for (int i = 0; i < src.n; i++) {
        char line[512];
        fprintf(f, "%s   # rule %d; from 'rules' # with # and ; inside\n",
                fr_rule_format(&src.rules[i], line, sizeof line), i);
    }
    fclose(f);

    /* Every field is printed, in the documented form. */
    cr_assert(strncmp(text, "# fastreduce tuning table v1\n", 29) == 0, "%s", text);
    char want[1400];
    snprintf(want, sizeof want, "\n# command: %s\n", out.command);
    cr_assert(strstr(text, want), "no '%s' in\n%s", want, text);
    cr_assert(strstr(text, "\n# nodes: 4\n# ppn: 16\n# ranks: 64\n"), "%s", text);
    cr_assert(strstr(text, "\n# mpi: Open MPI 4.1.5, pml ucx, btl ^openib,  coll tuned\n"), "%s", text);

    memset(&m, 0x5a, sizeof m);   /* read_file must overwrite everything */
    cr_assert_eq(meta_read(text, len, &t, &m, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "unexpected diagnostic at line %d: %s", d.n ? d.line[0] : 0, d.n ? d.msg[0] : "");
    cr_assert_eq(nbad, 0);
    cr_assert_eq(m.version, 1);
    expect_meta_eq(&m, &out);
    expect_rules_eq(&t, &src);
    /* 1 header line + 11 fields, then the rules. */
    for (int i = 0; i < t.n; i++) {
        cr_assert_eq(t.rules[i].line, 13 + i, "rule %d at line %d", i, t.rules[i].line);
        cr_assert_eq(t.rules[i].src, FR_SRC_FILE);
    }

    /* Printing what was read gives the same text again. */
    char *again = meta_text(&m);
    cr_assert(strncmp(text, again, strlen(again)) == 0, "reprinted:\n%s\nfirst:\n%s", again, text);
    free(again);
    free(text);
    fr_table_free(&t);
    fr_table_free(&src);
}

Test(tune_meta, round_trip_some_fields)
{
    fr_table_meta_t out, m, want;
    memset(&out, 0, sizeof out);
    out.nodes = 2;
    strcpy(out.mpi, "MPICH 4.2.0, ch4:ofi");
    strcpy(out.date, "2024-06-30");
    char *text = meta_text(&out);
    cr_assert_str_eq(text, "# fastreduce tuning table v1\n# nodes: 2\n# mpi: MPICH 4.2.0, ch4:ofi\n"
                           "# date: 2024-06-30\n");

    char *file = malloc(strlen(text) + 64);
    sprintf(file, "%sbcast host * * * binomial\n", text);
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(meta_read(file, strlen(file), &t, &m, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "%s", d.n ? d.msg[0] : "");
    want = out;
    want.version = 1;
    expect_meta_eq(&m, &want);
    cr_assert_eq(m.ppn, 0);
    cr_assert_eq(m.ranks, 0);
    cr_assert_str_eq(m.fingerprint, "");
    cr_assert_str_eq(m.command, "");
    cr_assert_eq(t.n, 1);
    cr_assert_eq(t.rules[0].line, 5);
    free(file);
    free(text);
    fr_table_free(&t);

    /* Nothing set, or no meta at all: the header line alone. */
    memset(&out, 0, sizeof out);
    text = meta_text(&out);
    cr_assert_str_eq(text, "# fastreduce tuning table v1\n");
    free(text);
    text = meta_text(NULL);
    cr_assert_str_eq(text, "# fastreduce tuning table v1\n");
    free(text);
    fr_table_meta_print(&out, NULL);   /* no FILE: nothing happens */

    /* Negative counts are not printed either. */
    out.ppn = -1;
    text = meta_text(&out);
    cr_assert_str_eq(text, "# fastreduce tuning table v1\n");
    free(text);
}

/* The text fields at their largest fit; one byte more is reported. */
Test(tune_meta, text_field_lengths)
{
    static const struct { const char *key; size_t off, size; } keys[] = {
        { "fingerprint", offsetof(fr_table_meta_t, fingerprint), sizeof ((fr_table_meta_t *)0)->fingerprint },
        { "mpi", offsetof(fr_table_meta_t, mpi), sizeof ((fr_table_meta_t *)0)->mpi },
        { "ucx", offsetof(fr_table_meta_t, ucx), sizeof ((fr_table_meta_t *)0)->ucx },
        { "nccl", offsetof(fr_table_meta_t, nccl), sizeof ((fr_table_meta_t *)0)->nccl },
        { "fastreduce", offsetof(fr_table_meta_t, fastreduce), sizeof ((fr_table_meta_t *)0)->fastreduce },
        { "date", offsetof(fr_table_meta_t, date), sizeof ((fr_table_meta_t *)0)->date },
        { "measured", offsetof(fr_table_meta_t, measured), sizeof ((fr_table_meta_t *)0)->measured },
        { "command", offsetof(fr_table_meta_t, command), sizeof ((fr_table_meta_t *)0)->command },
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int word = k == 0;
        for (size_t vlen = keys[k].size - 1; vlen <= keys[k].size; vlen++) {
            char *val = malloc(vlen + 1);
            for (size_t i = 0; i < vlen; i++)
                val[i] = word || i % 7 != 3 || i + 1 == vlen ? (char)('a' + i % 26) : ' ';
            val[vlen] = '\0';
            char *text = malloc(vlen + 256);
            /* Blanks around the value do not count. */
            sprintf(text, "# fastreduce tuning table v1\n#  %s:  \t%s \t\n# ppn: 3\nallreduce host * * * ring\n",
                    keys[k].key, val);
            fr_table_t t = { 0 };
            fr_table_meta_t m;
            diags_t d = { 0 };
            int nbad = -1;
            cr_assert_eq(META_STR(text), FR_SUCCESS);
            const char *got = (const char *)&m + keys[k].off;
            if (vlen < keys[k].size) {
                cr_assert_eq(d.n, 0, "%s of %zu bytes: %s", keys[k].key, vlen, d.n ? d.msg[0] : "");
                cr_assert_str_eq(got, val, "%s of %zu bytes", keys[k].key, vlen);
            } else {
                cr_assert_eq(d.n, 1, "%s of %zu bytes: %d diagnostics", keys[k].key, vlen, d.n);
                cr_assert_eq(nbad, 1);
                expect_diag(&d, 0, 2, keys[k].key, "too long");
                cr_assert_str_eq(got, "", "%s of %zu bytes was stored", keys[k].key, vlen);
            }
            cr_assert_eq(m.ppn, 3);
            cr_assert_eq(t.n, 1);
            fr_table_free(&t);
            diags_clear(&d);
            free(text);
            free(val);
        }
    }
}

/* One malformed field in a file between good ones: reported at its line,
 * not stored; the fields and rules around it are read. */
Test(tune_meta, malformed_fields)
{
    static const struct {
        const char *pre, *bad, *w1, *w2;
        long nodes;          /* what a valid "pre" line sets */
        const char *date, *fingerprint;
    } bad[] = {
        /* counts */
        { NULL, "# nodes: 0", "nodes", "'0'", 0, NULL, NULL },
        { NULL, "# ppn: -3", "ppn", "'-3'", 0, NULL, NULL },
        { NULL, "# ranks: 12x", "ranks", "'12x'", 0, NULL, NULL },
        { NULL, "# nodes: 1e3", "nodes", "'1e3'", 0, NULL, NULL },
        { NULL, "# ppn: 99999999999", "ppn", "'99999999999'", 0, NULL, NULL },
        { NULL, "# ranks: 99999999999999999999999", "ranks", "not a count", 0, NULL, NULL },
        { NULL, "# nodes: 1000001", "nodes", "1000001", 0, NULL, NULL },
        { NULL, "# nodes: +5", "nodes", "'+5'", 0, NULL, NULL },
        { NULL, "# ppn: 0x10", "ppn", "'0x10'", 0, NULL, NULL },
        { NULL, "# ppn: 4 8", "ppn", "'4 8'", 0, NULL, NULL },
        { NULL, "# nodes: 4.0", "nodes", "not a count", 0, NULL, NULL },
        { NULL, "# nodes: four", "nodes", "not a count", 0, NULL, NULL },
        /* empty values */
        { NULL, "# nodes:", "nodes", "no value", 0, NULL, NULL },
        { NULL, "# ranks:  \t ", "ranks", "no value", 0, NULL, NULL },
        { NULL, "# fingerprint:", "fingerprint", "no value", 0, NULL, NULL },
        { NULL, "# command:   ", "command", "no value", 0, NULL, NULL },
        { NULL, "# Date:", "date", "no value", 0, NULL, NULL },
        /* a fingerprint is one word */
        { NULL, "# fingerprint: node01 node02", "fingerprint", "one word", 0, NULL, NULL },
        { NULL, "# fingerprint: abc\tdef", "fingerprint", "one word", 0, NULL, NULL },
        /* a key given twice: the first is kept */
        { "# nodes: 4", "# nodes: 8", "nodes", "twice", 4, NULL, NULL },
        { "# nodes: 4", "# NODES: 4", "nodes", "line 3", 4, NULL, NULL },
        { "# date: 2024-05-01", "# date: 2025-01-01", "date", "twice", 0, "2024-05-01", NULL },
        { "# fingerprint: abc", "# fingerprint: def", "fingerprint", "twice", 0, NULL, "abc" },
        { "# nodes: 4", "# nodes: bogus", "nodes", "twice", 4, NULL, NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "# fastreduce tuning table v1\n"              /* 1 */
                 "# mpi: Open MPI 4.1.5\n"                     /* 2 */
                 "%s\n"                                        /* 3 */
                 "%s\n"                                        /* 4: the bad line */
                 "# ucx: 1.15.0\n"                             /* 5 */
                 "allreduce host * * * ring\n"                 /* 6 */
                 "bcast host * * 8K-inf pipeline chunk=1M\n",  /* 7 */
                 bad[i].pre ? bad[i].pre : "# a plain comment", bad[i].bad);
        fr_table_t t = { 0 };
        fr_table_meta_t m, want;
        diags_t d = { 0 };
        int nbad = -1;
        cr_assert_eq(META_STR(text), FR_SUCCESS);
        cr_assert_eq(d.n, 1, "'%s': %d diagnostics (first: %s)", bad[i].bad, d.n, d.n ? d.msg[0] : "");
        cr_assert_eq(nbad, 1);
        expect_diag(&d, 0, 4, bad[i].w1, bad[i].w2);
        memset(&want, 0, sizeof want);
        want.version = 1;
        strcpy(want.mpi, "Open MPI 4.1.5");
        strcpy(want.ucx, "1.15.0");
        want.nodes = bad[i].nodes;
        if (bad[i].date)
            strcpy(want.date, bad[i].date);
        if (bad[i].fingerprint)
            strcpy(want.fingerprint, bad[i].fingerprint);
        expect_meta_eq(&m, &want);
        cr_assert_eq(t.n, 2, "'%s': %d rules", bad[i].bad, t.n);
        cr_assert_eq(t.rules[0].line, 6);
        cr_assert_eq(t.rules[1].line, 7);
        cr_assert_eq(t.rules[1].chunk, M);
        fr_table_free(&t);
        diags_clear(&d);
    }
}

/* The bounds of a count are accepted. */
Test(tune_meta, count_bounds)
{
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# nodes: 1\n# ppn: 1000000\n# ranks: 1000000\n"
                          "# fingerprint:   fp-123  \n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "%s", d.n ? d.msg[0] : "");
    cr_assert_eq(m.nodes, 1);
    cr_assert_eq(m.ppn, 1000000);
    cr_assert_eq(m.ranks, 1000000);
    cr_assert_str_eq(m.fingerprint, "fp-123");
    cr_assert_eq(t.n, 0);
    /* Leading zeros are still decimal. */
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# nodes: 010\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(m.nodes, 10);
}

/* ranks must fit nodes and ppn: nodes <= ranks <= nodes * ppn. */
Test(tune_meta, ranks_inconsistent)
{
    static const struct { long nodes, ppn, ranks; int ok; } cases[] = {
        { 2, 4, 2, 1 }, { 2, 4, 8, 1 }, { 2, 4, 5, 1 }, { 1, 1, 1, 1 }, { 1000, 1000, 1000000, 1 },
        { 2, 4, 1, 0 }, { 2, 4, 9, 0 }, { 1, 1, 2, 0 }, { 1000000, 1000000, 999999, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "# fastreduce tuning table v1\n"     /* 1 */
                 "# nodes: %ld\n"                     /* 2 */
                 "# ppn: %ld\n"                       /* 3 */
                 "# measured: float32 sum\n"          /* 4 */
                 "# ranks: %ld\n"                     /* 5 */
                 "allreduce host * * * ring\n",       /* 6 */
                 cases[i].nodes, cases[i].ppn, cases[i].ranks);
        fr_table_t t = { 0 };
        fr_table_meta_t m;
        diags_t d = { 0 };
        int nbad = -1;
        cr_assert_eq(META_STR(text), FR_SUCCESS);
        cr_assert_eq(m.nodes, cases[i].nodes);
        cr_assert_eq(m.ppn, cases[i].ppn);
        cr_assert_str_eq(m.measured, "float32 sum");
        cr_assert_eq(t.n, 1);
        if (cases[i].ok) {
            cr_assert_eq(d.n, 0, "%ld/%ld/%ld: %s", cases[i].nodes, cases[i].ppn, cases[i].ranks,
                         d.n ? d.msg[0] : "");
            cr_assert_eq(m.ranks, cases[i].ranks);
        } else {
            cr_assert_eq(d.n, 1, "%ld/%ld/%ld: %d diagnostics", cases[i].nodes, cases[i].ppn, cases[i].ranks, d.n);
            cr_assert_eq(nbad, 1);
            char num[32];
            snprintf(num, sizeof num, "%ld", cases[i].ranks);
            expect_diag(&d, 0, 5, "ranks", num);
            cr_assert_eq(m.ranks, 0, "%ld/%ld/%ld: an inconsistent ranks was kept (%ld)", cases[i].nodes,
                         cases[i].ppn, cases[i].ranks, m.ranks);
        }
        fr_table_free(&t);
        diags_clear(&d);
    }

    /* Reported at the ranks line wherever it is, even before nodes and ppn. */
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# ranks: 100\n# nodes: 3\n# ppn: 4\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 1);
    expect_diag(&d, 0, 2, "ranks", "100");
    cr_assert_eq(m.nodes, 3);
    cr_assert_eq(m.ppn, 4);
    diags_clear(&d);
    /* Without nodes or ppn there is nothing to check against. */
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# ranks: 100\n# nodes: 3\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(m.ranks, 100);
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# ranks: 1\n# ppn: 3\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(m.ranks, 1);
}

/* What is not a header field is an ordinary comment: no diagnostic, no field. */
Test(tune_meta, ordinary_comments)
{
    const char *text =
        "# fastreduce tuning table v1\n"                      /* 1 */
        "# note: hello\n"                                     /* 2 */
        "# Collective: x\n"                                   /* 3 */
        "# nodes 4\n"                                         /* 4: no colon */
        "#nodes4\n"                                           /* 5 */
        "# node: 4\n"                                         /* 6: not a key */
        "# nodesx: 4\n"                                       /* 7 */
        "# x nodes: 4\n"                                      /* 8 */
        "  \t\n"                                              /* 9 */
        "#\n"                                                 /* 10 */
        "# ppn: 2\n"                                          /* 11: still the header */
        "allreduce host * * * ring   # nodes: 7\n"            /* 12 */
        "# nodes: 16\n"                                       /* 13: after the first rule */
        "# fingerprint: blanks are fine in a comment\n"       /* 14 */
        "# ranks: 0\n"                                        /* 15 */
        "# ppn: bogus\n"                                      /* 16 */
        "bcast host * * * binomial\n"                         /* 17 */
        "# command:\n";                                       /* 18 */
    fr_table_t t = { 0 };
    fr_table_meta_t m, want;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(META_STR(text), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "line %d: %s", d.n ? d.line[0] : 0, d.n ? d.msg[0] : "");
    cr_assert_eq(nbad, 0);
    memset(&want, 0, sizeof want);
    want.version = 1;
    want.ppn = 2;
    expect_meta_eq(&m, &want);
    cr_assert_eq(t.n, 2);
    cr_assert_eq(t.rules[0].line, 12);
    cr_assert_eq(t.rules[1].line, 17);
    fr_table_free(&t);

    /* A malformed rule ends the header too. */
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# nodes: 2\nbogus\n# ppn: 8\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 1);
    expect_diag(&d, 0, 3, "wrong number of fields", NULL);
    cr_assert_eq(m.nodes, 2);
    cr_assert_eq(m.ppn, 0);
    diags_clear(&d);
}

Test(tune_meta, keys_any_case)
{
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(META_STR("# FastReduce Tuning Table V1\n"
                          "# NODES: 4\n"
                          "#PpN:2\n"
                          "\t#  Ranks :8\n"
                          "# FingerPrint: AbC-1\n"
                          "# MPI: Intel(R) MPI 2021.10\n"
                          "# Command: Run ME\n"
                          "allreduce host * * * ring\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "line %d: %s", d.n ? d.line[0] : 0, d.n ? d.msg[0] : "");
    cr_assert_eq(m.version, 1);
    cr_assert_eq(m.nodes, 4);
    cr_assert_eq(m.ppn, 2);
    cr_assert_eq(m.ranks, 8);
    cr_assert_str_eq(m.fingerprint, "AbC-1");   /* values keep their case */
    cr_assert_str_eq(m.mpi, "Intel(R) MPI 2021.10");
    cr_assert_str_eq(m.command, "Run ME");
    cr_assert_eq(t.n, 1);
    fr_table_free(&t);
}

/* A NUL byte on a header field line: the NUL diagnostic, no field. */
Test(tune_meta, nul_byte_in_field)
{
    static const char text[] =
        "# fastreduce tuning table v1\n"      /* 1 */
        "# nodes: 4\0 junk\n"                 /* 2 */
        "# ppn: 2\n"                          /* 3 */
        "# mpi: Open\0MPI\n"                  /* 4 */
        "allreduce host * * * ring\n";        /* 5 */
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(meta_read(text, sizeof text - 1, &t, &m, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(m.nodes, 0, "a field was read from a line with a NUL byte");
    cr_assert_str_eq(m.mpi, "");
    cr_assert_eq(m.ppn, 2);
    cr_assert_eq(t.n, 1);
    cr_assert_eq(d.n, 2, "%d diagnostics for 2 lines with a NUL byte", d.n);
    cr_assert_eq(nbad, 2);
    expect_diag(&d, 0, 2, "NUL", NULL);
    expect_diag(&d, 1, 4, "NUL", NULL);
    fr_table_free(&t);
    diags_clear(&d);
}

/* A NUL byte anywhere on a line makes the whole line malformed: in a
 * comment, after a first ';' rule, on a comment line; one report each, with
 * the line's number, and none of the line's rules. */
Test(file, nul_byte_anywhere_on_a_line)
{
    static const char text[] = "# fastreduce tuning table v1\n"                          /* 1 */
                               "allreduce host * * * ring  # why\0 junk\n"               /* 2 */
                               "# a comment\0 with a NUL; bcast * * * * mpi\n"           /* 3 */
                               "bcast * * * * mpi; allreduce host * * *\0 tree\n"        /* 4 */
                               "bcast host * * * binomial\n";                            /* 5 */
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(meta_read(text, sizeof text - 1, &t, &m, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(t.n, 1, "%d rules read from lines with a NUL byte", t.n - 1);
    cr_assert_eq(t.rules[0].alg, alg(FR_COLL_BCAST, "binomial"));
    cr_assert_eq(t.rules[0].line, 5);
    cr_assert_eq(d.n, 3, "%d diagnostics for 3 lines with a NUL byte", d.n);
    cr_assert_eq(nbad, 3);
    for (int i = 0; i < 3; i++) expect_diag(&d, i, 2 + i, "NUL", NULL);
    fr_table_free(&t);
    diags_clear(&d);
}

/* A header line with a NUL byte is one bad line, not a version: the file
 * is read (as one without a header where it was the only header line),
 * not ignored. */
Test(file, nul_byte_in_header_line)
{
    static const struct { const char *text; size_t len; int header; } cases[] = {
#define NUL_CASE(s, header) { s, sizeof s - 1, header }
        NUL_CASE("# fastreduce tuning table v1\0 x\nallreduce host * * * ring\n", 0),
        NUL_CASE("# fastreduce tuning table v\0\nallreduce host * * * ring\n", 0),
        /* a second header line, of another version, after a good one */
        NUL_CASE("# fastreduce tuning table v1\n# fastreduce tuning table v2\0\nallreduce host * * * ring\n", 1),
#undef NUL_CASE
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fr_table_t t = { 0 };
        fr_table_meta_t m;
        diags_t d = { 0 };
        int nbad = -1, h = cases[i].header;
        cr_assert_eq(meta_read(cases[i].text, cases[i].len, &t, &m, &d, &nbad), FR_SUCCESS, "case %zu: %s", i,
                     fr_last_error());
        cr_assert_eq(t.n, 1, "case %zu: the file's rule was not read", i);
        cr_assert_eq(m.version, h, "case %zu", i);
        cr_assert_eq(d.n, 2 - h, "case %zu: %d diagnostics", i, d.n);
        cr_assert_eq(nbad, 2 - h);
        if (!h) expect_diag(&d, 0, 1, "missing header", NULL);
        expect_diag(&d, 1 - h, 1 + h, "NUL", NULL);
        fr_table_free(&t);
        diags_clear(&d);
    }
}

Test(tune_meta, crlf_line_ends)
{
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(META_STR("# fastreduce tuning table v1\r\n"
                          "# nodes: 2\r\n"
                          "# ppn: 8\r\n"
                          "# ranks: 16\r\n"
                          "# fingerprint: abc-def\r\n"
                          "# mpi: Open MPI 5.0.3\r\n"
                          "# date:\t2024-05-01 \r\n"
                          "allreduce host * * * ring\r\n"
                          "bcast host * * * binomial\r\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "line %d: %s", d.n ? d.line[0] : 0, d.n ? d.msg[0] : "");
    cr_assert_eq(m.version, 1);
    cr_assert_eq(m.nodes, 2);
    cr_assert_eq(m.ppn, 8);
    cr_assert_eq(m.ranks, 16);
    cr_assert_str_eq(m.fingerprint, "abc-def");
    cr_assert_str_eq(m.mpi, "Open MPI 5.0.3");
    cr_assert_str_eq(m.date, "2024-05-01");
    cr_assert_eq(t.n, 2);
    cr_assert_eq(t.rules[1].line, 9);
    fr_table_free(&t);

    /* An empty value followed by \r is still empty. */
    cr_assert_eq(META_STR("# fastreduce tuning table v1\r\n# nodes:\r\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 1);
    expect_diag(&d, 0, 2, "nodes", "no value");
    cr_assert_eq(m.nodes, 0);
    diags_clear(&d);
}

/* Fields without the header line, a NULL meta, an unreadable file. */
Test(tune_meta, version_and_edge_cases)
{
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(META_STR("# nodes: 3\nallreduce host * * * ring\n"), FR_SUCCESS);
    cr_assert_eq(m.version, 0);
    cr_assert_eq(m.nodes, 3);
    cr_assert_eq(d.n, 1);
    expect_diag(&d, 0, 1, "missing header", NULL);
    cr_assert_eq(t.n, 1);
    fr_table_free(&t);
    diags_clear(&d);

    /* meta may be NULL: malformed fields are still reported. */
    static const char text[] = "# fastreduce tuning table v1\n# nodes: 0\nallreduce host * * * ring\n";
    cr_assert_eq(meta_read(text, sizeof text - 1, &t, NULL, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 1);
    expect_diag(&d, 0, 2, "nodes", "'0'");
    cr_assert_eq(t.n, 1);
    fr_table_free(&t);
    diags_clear(&d);

    /* An unreadable file leaves an empty meta. */
    memset(&m, 0x5a, sizeof m);
    cr_assert_eq(fr_table_read_file(&t, &m, "/nonexistent/dir/table.txt", rec, &d, &nbad), FR_ERR_CONFIG);
    fr_table_meta_t zero;
    memset(&zero, 0, sizeof zero);
    expect_meta_eq(&m, &zero);
    cr_assert_eq(d.n, 1);
    cr_assert_eq(t.n, 0);
    diags_clear(&d);
}

/* ---- fr_table_meta_compare ---------------------------------------------- */

static fr_table_meta_t meta_of(const char *fp, long nodes, long ppn)
{
    fr_table_meta_t m;
    memset(&m, 0, sizeof m);
    m.version = 1;
    if (fp)
        strcpy(m.fingerprint, fp);
    m.nodes = nodes;
    m.ppn = ppn;
    return m;
}

Test(tune_meta, compare_equal)
{
    fr_table_meta_t m = meta_of("fp-alpha", 4, 8);
    char why[256];
    int unknown = -1;
    memset(why, 'x', sizeof why);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 4, 8, why, sizeof why, &unknown), 0);
    cr_assert_eq(unknown, 0);
    cr_assert_str_eq(why, "");
    /* why and unknown may be left out. */
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 4, 8, NULL, 0, NULL), 0);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 5, 8, NULL, 0, NULL), 1);
}

Test(tune_meta, compare_each_differs)
{
    fr_table_meta_t m = meta_of("fp-alpha", 4, 8);
    char why[256];
    int unknown = -1;

    cr_assert_eq(fr_table_meta_compare(&m, "fp-beta", 4, 8, why, sizeof why, &unknown), 1);
    cr_assert_eq(unknown, 0);
    cr_assert(strstr(why, "fingerprint") && strstr(why, "fp-alpha") && strstr(why, "fp-beta"), "%s", why);

    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 13, 8, why, sizeof why, &unknown), 1);
    cr_assert_eq(unknown, 0);
    cr_assert(strstr(why, "node") && strstr(why, "4") && strstr(why, "13"), "%s", why);
    cr_assert_null(strstr(why, "fp-"), "%s", why);

    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 4, 27, why, sizeof why, &unknown), 1);
    cr_assert_eq(unknown, 0);
    cr_assert(strstr(why, "per node") && strstr(why, "8") && strstr(why, "27"), "%s", why);
    cr_assert_null(strstr(why, "fp-"), "%s", why);

    /* A fingerprint differs by case too. */
    cr_assert_eq(fr_table_meta_compare(&m, "FP-ALPHA", 4, 8, why, sizeof why, &unknown), 1);
}

Test(tune_meta, compare_all_differ)
{
    fr_table_meta_t m = meta_of("fp-alpha", 4, 8);
    char why[512];
    int unknown = -1;
    cr_assert_eq(fr_table_meta_compare(&m, "fp-beta", 13, 27, why, sizeof why, &unknown), 3);
    cr_assert_eq(unknown, 0);
    cr_assert(strstr(why, "fp-alpha") && strstr(why, "fp-beta") && strstr(why, "13") && strstr(why, "27") &&
              strstr(why, "4") && strstr(why, "8"), "%s", why);
    /* In order, separated. */
    const char *a = strstr(why, "fp-beta"), *b = strstr(why, "13"), *c = strstr(why, "27");
    cr_assert(a < b && b < c, "%s", why);
    cr_assert_eq(strstr(why, "; ") != NULL, 1, "%s", why);

    /* A short buffer is truncated and terminated, the count is the same. */
    char small[12];
    memset(small, 'x', sizeof small);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-beta", 13, 27, small, 10, &unknown), 3);
    cr_assert_lt(strlen(small), 10);
    cr_assert_eq(small[10], 'x');
    cr_assert_eq(fr_table_meta_compare(&m, "fp-beta", 13, 27, small, 1, &unknown), 3);
    cr_assert_str_eq(small, "");
}

Test(tune_meta, compare_absent_fields)
{
    char why[256];
    int unknown = -1;
    /* Nothing known: nothing differs. */
    fr_table_meta_t m = meta_of(NULL, 0, 0);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 4, 8, why, sizeof why, &unknown), 0);
    cr_assert_eq(unknown, 3);
    cr_assert_str_eq(why, "");

    /* Only nodes known. */
    m = meta_of(NULL, 4, 0);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 4, 8, why, sizeof why, &unknown), 0);
    cr_assert_eq(unknown, 2);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 13, 8, why, sizeof why, &unknown), 1);
    cr_assert_eq(unknown, 2);
    cr_assert(strstr(why, "13"), "%s", why);

    /* Only the fingerprint known. */
    m = meta_of("fp-alpha", 0, 0);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-beta", 4, 8, why, sizeof why, &unknown), 1);
    cr_assert_eq(unknown, 2);

    /* The job's fingerprint NULL or empty: unknown, not different. */
    m = meta_of("fp-alpha", 4, 8);
    cr_assert_eq(fr_table_meta_compare(&m, NULL, 4, 8, why, sizeof why, &unknown), 0);
    cr_assert_eq(unknown, 1);
    cr_assert_str_eq(why, "");
    cr_assert_eq(fr_table_meta_compare(&m, "", 4, 8, why, sizeof why, &unknown), 0);
    cr_assert_eq(unknown, 1);
    cr_assert_eq(fr_table_meta_compare(&m, NULL, 5, 9, why, sizeof why, &unknown), 2);
    cr_assert_eq(unknown, 1);
    cr_assert_null(strstr(why, "fingerprint"), "%s", why);
}

/* A header read from a file compares with the job it was read for. */
Test(tune_meta, compare_read_header)
{
    fr_table_t t = { 0 };
    fr_table_meta_t m;
    diags_t d = { 0 };
    int nbad = -1;
    char why[256];
    int unknown = -1;
    cr_assert_eq(META_STR("# fastreduce tuning table v1\n# fingerprint: fp-alpha\n# nodes: 2\n"
                          "allreduce host * * * ring\n"), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 2, 64, why, sizeof why, &unknown), 0);
    cr_assert_eq(unknown, 1);
    cr_assert_eq(fr_table_meta_compare(&m, "fp-alpha", 1, 64, why, sizeof why, &unknown), 1);
    fr_table_free(&t);
}

/* ---- the old API on a file with header fields ----------------------------- */

Test(tune_meta, parse_file_ignores_fields)
{
    static const char text[] =
        "# fastreduce tuning table v1\n"
        "# fingerprint: fp-alpha\n"
        "# nodes: 2\n"
        "# ppn: 4\n"
        "# ranks: 8\n"
        "# mpi: Open MPI 4.1.5, ucx\n"
        "# command: fastreduce-tune --out t.txt; echo '# done'\n"
        "allreduce host 1 2 0-8K shm chunk=64K   # measured: 1.2us\n"
        "bcast host 1 2 8K-inf pipeline chunk=1M\n";
    char *path = temp_file(text, sizeof text - 1);
    fr_table_t t = { 0 };
    diags_t d = { 0 };
    int nbad = -1;
    cr_assert_eq(fr_table_parse_file(&t, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0, "line %d: %s", d.n ? d.line[0] : 0, d.n ? d.msg[0] : "");
    cr_assert_eq(nbad, 0);
    cr_assert_eq(t.n, 2);
    cr_assert_eq(t.rules[0].coll, FR_COLL_ALLREDUCE);
    cr_assert_eq(t.rules[0].alg, alg(FR_COLL_ALLREDUCE, "shm"));
    expect_range(t.rules[0].bytes, 0, 8 * K);
    cr_assert_eq(t.rules[0].chunk, 64 * K);
    cr_assert_eq(t.rules[0].line, 8);
    cr_assert_eq(t.rules[1].coll, FR_COLL_BCAST);
    cr_assert_eq(t.rules[1].alg, alg(FR_COLL_BCAST, "pipeline"));
    expect_range(t.rules[1].bytes, 8 * K, FR_INF);
    cr_assert_eq(t.rules[1].chunk, M);
    cr_assert_eq(t.rules[1].line, 9);

    /* Both readers give the same rules. */
    fr_table_t u = { 0 };
    fr_table_meta_t m;
    cr_assert_eq(fr_table_read_file(&u, &m, path, rec, &d, &nbad), FR_SUCCESS);
    cr_assert_eq(d.n, 0);
    expect_rules_eq(&u, &t);
    cr_assert_eq(m.ranks, 8);
    cr_assert_str_eq(m.command, "fastreduce-tune --out t.txt; echo '# done'");
    fr_table_free(&t);
    fr_table_free(&u);
    unlink(path);
    free(path);
}

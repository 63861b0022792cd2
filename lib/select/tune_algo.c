/* FASTREDUCE_ALGO: one algorithm name, or collective=NAME items, each made
 * a rule that matches every call of its collective (docs/tuning.md). */
#include <stdlib.h>
#include <string.h>

#include "tune_parse.h"
#include "registry.h"
#include "log.h"

/* The rule of FASTREDUCE_ALGO item @p item: @p alg for every call of @p coll. */
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
    return fr_table_push(c->t, &r);
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

/* "NAME": a rule for every collective that has an algorithm of that name. */
static fr_status_t algo_name(parse_ctx_t *c, const char *s)
{
    char l1[512], l2[512];
    fr_status_t st = FR_SUCCESS;
    int found = 0;
    for (int coll = 0; coll < FR_COLL_COUNT && st == FR_SUCCESS; coll++) {
        int alg = fr_alg_lookup(coll, s);
        if (alg >= 0 && alg < fr_nalgs) {
            st = algo_rule(c, coll, alg, 1);
            found = 1;
        }
    }
    if (!found)
        fr_tune_report(c, 1, "unknown algorithm '%s' (valid: allreduce: %s; bcast: %s)", Q(s),
                       fr_tune_alg_list(l1, sizeof l1, FR_COLL_ALLREDUCE),
                       fr_tune_alg_list(l2, sizeof l2, FR_COLL_BCAST));
    return st;
}

/* Item number @p item of "collective=NAME[,collective=NAME]" (@p spec): a
 * rule, or a report that skips it. *seen: the collectives given so far,
 * since the first item of a collective is the one used. */
static fr_status_t algo_item(parse_ctx_t *c, char *tok, int item, const char *spec, unsigned *seen)
{
    char msg[FR_MSG_MAX];
    char *it = trim(tok);
    char *eq = strchr(it, '=');
    if (!*it) {
        fr_tune_report(c, item, "empty item %d in '%s' (expected collective=NAME)", item, Q(spec));
        return FR_SUCCESS;
    }
    if (!eq) {
        fr_tune_report(c, item, "item '%s' is not collective=NAME (use one NAME alone, or"
                       " allreduce=NAME,bcast=NAME)", Q(it));
        return FR_SUCCESS;
    }
    *eq = '\0';
    char *cname = trim(it), *name = trim(eq + 1);
    int coll = fr_tune_find_coll(cname);
    if (coll < 0) {
        fr_tune_report(c, item, "unknown collective '%s' (expected allreduce or bcast)", Q(cname));
        return FR_SUCCESS;
    }
    if (*seen & (1u << coll)) {
        fr_tune_report(c, item, "collective '%s' given twice; the first is used", cname);
        return FR_SUCCESS;
    }
    if (!*name) {
        fr_tune_report(c, item, "empty algorithm name for %s", cname);
        return FR_SUCCESS;
    }
    int alg = fr_tune_parse_alg(coll, name, msg, sizeof msg);
    if (alg < 0) {
        fr_tune_report(c, item, "%s", msg);
        return FR_SUCCESS;
    }
    *seen |= 1u << coll;
    return algo_rule(c, coll, alg, item);
}

fr_status_t fr_table_parse_algo(fr_table_t *t, const char *spec, fr_diag_fn diag, void *arg, int *nbad)
{
    parse_ctx_t c = { t, "FASTREDUCE_ALGO", FR_SRC_ALGO, diag, arg, 0 };
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
        st = algo_name(&c, s);
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
        st = algo_item(&c, tok, ++item, spec, &seen);
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

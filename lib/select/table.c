/* The selection table's operations: appending rules, freeing, and finding
 * the first rule that matches a call or a job's shape. */
#include <stdlib.h>

#include "tune_parse.h"
#include "log.h"

fr_status_t fr_table_push(fr_table_t *t, const fr_rule_t *r)
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
        if (fr_table_push(t, &r) != FR_SUCCESS)
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

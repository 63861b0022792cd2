/* Selection: the table is built on rank 0 and broadcast, so every rank
 * chooses alike (see select.h). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "select.h"
#include "registry.h"
#include "agree.h"
#include "tune.h"
#include "settings.h"
#include "log.h"

/* Diagnostics of a table that is only being looked at are not reported. */
static void quiet_diag(void *arg, const char *source, int line, const char *msg)
{
    (void)source; (void)line; (void)msg;
    ++*(int *)arg;
}

/* Rank 0: read the table file @p file into @p t, saying whether its header
 * matches this job; a mismatch is a warning and the rules that still
 * match this job's shape are used. */
static fr_status_t load_file(fr_table_t *t, const char *file, const char *how, const struct fr_comm *c)
{
    fr_table_meta_t m;
    int n0 = t->n;
    fr_status_t st = fr_table_read_file(t, &m, file, NULL, NULL, NULL);
    if (st == FR_ERR_NO_MEMORY) return st;
    if (st != FR_SUCCESS) {
        FR_WARN(FR_SUB_TUNE, "%s: %s not used: %s", how, file, fr_last_error());
        return FR_SUCCESS;
    }
    int apply = 0, unknown = 0;
    for (int i = n0; i < t->n; i++) {
        const fr_rule_t *r = &t->rules[i];
        apply += fr_range_has(&r->nodes, (uint64_t)c->nnodes) && fr_range_has(&r->ppn, (uint64_t)c->ppn);
    }
    char why[512];
    if (fr_table_meta_compare(&m, c->fingerprint, c->nnodes, c->ppn, why, sizeof why, &unknown))
        FR_WARN(FR_SUB_TUNE, "%s: %s does not match this job: %s; %d of its %d rules match this job's shape "
                "and are used", how, file, why, apply, t->n - n0);
    else
        FR_INFO(FR_SUB_TUNE, "%s: %s loaded: %d rules, %d match this job (%d node(s), up to %d per node)%s", how,
                file, t->n - n0, apply, c->nnodes, c->ppn,
                unknown ? "; its header does not name every one of fingerprint, nodes and ppn, so those were not "
                          "compared" : "; its fingerprint and shape match");
    return FR_SUCCESS;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Does the table file @p path record exactly this job's fingerprint and shape? */
static int path_matches(const char *path, const struct fr_comm *c)
{
    fr_table_t t = {0};
    fr_table_meta_t m;
    int nbad = 0, unknown = 0;
    char why[512];
    fr_status_t st = fr_table_read_file(&t, &m, path, quiet_diag, &nbad, NULL);
    fr_table_free(&t);
    if (st != FR_SUCCESS) {
        FR_INFO(FR_SUB_TUNE, "tuning table %s skipped: %s", path, fr_last_error());
        return 0;
    }
    if (fr_table_meta_compare(&m, c->fingerprint, c->nnodes, c->ppn, why, sizeof why, &unknown)) {
        FR_INFO(FR_SUB_TUNE, "tuning table %s skipped: %s", path, why);
        return 0;
    }
    if (unknown) {
        FR_INFO(FR_SUB_TUNE, "tuning table %s skipped: its header does not record %s", path,
                !m.fingerprint[0] ? "the fingerprint" : !m.nodes ? "the nodes" : "the ranks per node");
        return 0;
    }
    return 1;
}

/* Rank 0: the first *.tune file (by name, folder by folder) of
 * FASTREDUCE_TUNE_PATH whose header matches this job, into @p out. */
static int search_path(const struct fr_comm *c, char *out, size_t len)
{
    const char *path = c->set.tune_path ? c->set.tune_path : "";
    char *dirs = strdup(path), *save = NULL;
    int found = 0;
    if (!dirs) return 0;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        DIR *dir = opendir(d);
        if (!dir) {
            FR_INFO(FR_SUB_TUNE, "tuning table folder %s: %s", d, strerror(errno));
            continue;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t l = strlen(e->d_name);
            if (l <= 5 || strcmp(e->d_name + l - 5, ".tune")) continue;
            if (n == cap) {
                char **nn = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *nn);
                if (!nn) break;
                names = nn;
            }
            if (!(names[n] = strdup(e->d_name))) break;
            n++;
        }
        closedir(dir);
        if (n) qsort(names, n, sizeof *names, cmp_name);
        for (size_t i = 0; i < n; i++) {
            if (!found) {
                snprintf(out, len, "%s/%s", d, names[i]);
                found = path_matches(out, c);
            }
            free(names[i]);
        }
        free(names);
    }
    if (!found)
        FR_INFO(FR_SUB_TUNE, "no tuning table in %s matches this job (fingerprint %s, %d node(s), %d rank(s) per "
                "node); the built-in table is used", path, c->fingerprint[0] ? c->fingerprint : "?",
                c->nnodes, c->ppn);
    free(dirs);
    return found;
}

/* Rank 0: the rules of every source, strongest first. */
static fr_status_t build_table(fr_table_t *t, const struct fr_comm *c)
{
    const char *algo = c->set.algo, *tune = c->set.tune, *file = c->set.tune_file;
    if (algo) FR_CHECK(fr_table_parse_algo(t, algo, NULL, NULL, NULL));
    if (tune) FR_CHECK(fr_table_parse(t, tune, "FASTREDUCE_TUNE", FR_SRC_TUNE, NULL, NULL, NULL));
    char found[4096];
    if (file) FR_CHECK(load_file(t, file, "FASTREDUCE_TUNE_FILE", c));
    else if (search_path(c, found, sizeof found)) FR_CHECK(load_file(t, found, "FASTREDUCE_TUNE_PATH", c));
    return fr_table_parse(t, fr_default_table, "default", FR_SRC_DEFAULT, NULL, NULL, NULL);
}

static void select_index(struct fr_comm *c);

fr_status_t fr_select_load(struct fr_comm *c)
{
    fr_status_t st = FR_SUCCESS;
    long n = 0;
    if (c->rank == 0) {
        st = build_table(&c->table, c);
        n = st == FR_SUCCESS ? c->table.n : -1;
    }
    if (PMPI_Bcast(&n, 1, MPI_LONG, 0, c->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "broadcast of the tuning table failed");
    if (n < 0) return st != FR_SUCCESS ? st : FR_ERROR(FR_ERR_NO_MEMORY, "rank 0 could not build the tuning table");
    if (c->rank != 0) {
        c->table.rules = calloc((size_t)n + 1, sizeof(fr_rule_t));
        if (!c->table.rules) st = FR_ERROR(FR_ERR_NO_MEMORY, "no memory for the tuning table");
        c->table.n = c->table.cap = (int)n;
    }
    FR_CHECK(fr_agree(c->mpi, st, "tuning table allocation"));
    if (n > 0 && PMPI_Bcast(c->table.rules, (int)(n * (long)sizeof(fr_rule_t)), MPI_BYTE, 0, c->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "broadcast of the tuning table failed");
    select_index(c);
    return FR_SUCCESS;
}

/* List the rules of c->table that can match c (sel, sel_at; comm.h). */
static void select_index(struct fr_comm *c)
{
    free(c->sel);
    /* (a rule is in at most two lists: its collective's, host and device) */
    c->sel = malloc(sizeof(int) * ((size_t)2 * (size_t)c->table.n + 1));
    if (!c->sel) return;   /* (calls scan the whole table) */
    int k = 0;
    for (int g = 0; g < 2 * FR_COLL_COUNT; g++) {
        c->sel_at[g] = k;
        unsigned mem = g % 2 ? FR_MEM_CUDA : FR_MEM_HOST;
        for (int i = -1; (i = fr_table_match_shape(&c->table, i + 1, g / 2, mem, (uint64_t)c->nnodes,
                                                   (uint64_t)c->ppn)) >= 0;)
            c->sel[k++] = i;
    }
    c->sel_at[2 * FR_COLL_COUNT] = k;
}

/* See select.h. */
void fr_select_use(struct fr_comm *c, fr_table_t table)
{
    c->table = table;
    select_index(c);
}

/* The last resort: the algorithm of the collective and memory type that
 * serves every call (FR_ALG_LAST_RESORT: the MPI library's own for host
 * buffers, the staged path for device ones). */
static int fallback_alg(fr_coll_t coll, fr_mem_t mem)
{
    for (int i = 0; i < fr_nalgs; i++)
        if (fr_algs[i]->coll == coll && (fr_algs[i]->mem_types & mem) && (fr_algs[i]->traits & FR_ALG_LAST_RESORT))
            return i;
    return -1;
}

/* The next rule matching @p call from position *k on (in c->sel, group
 * @p g; without it, in the table), or -1; *k moves past it. */
static int next_rule(const struct fr_comm *c, const fr_call_t *call, int g, int *k)
{
    if (!c->sel) {
        int i = fr_table_match(&c->table, *k, call->coll, call->mem, (uint64_t)c->nnodes, (uint64_t)c->ppn,
                               call->bytes);
        *k = i + 1;
        return i;
    }
    while (*k < c->sel_at[g + 1]) {
        int i = c->sel[(*k)++];
        if (fr_range_has(&c->table.rules[i].bytes, call->bytes)) return i;
    }
    return -1;
}

/* See select.h. */
const fr_alg_t *fr_select_choose(struct fr_comm *c, fr_call_t *call, int *rule)
{
    const int g = 2 * (int)call->coll + (call->mem == FR_MEM_CUDA);
    int k = c->sel ? c->sel_at[g] : 0, i;
    while ((i = next_rule(c, call, g, &k)) >= 0) {
        const fr_rule_t *r = &c->table.rules[i];
        const fr_alg_t *a = fr_algs[r->alg];
        call->chunk = r->chunk;
        call->fanout = r->fanout;
        call->across = r->across;
        call->proto = r->proto;
        if (a->check(call, c) == FR_SUCCESS) { *rule = i; return a; }
        if (r->src == FR_SRC_ALGO && c->rank == 0 && !(c->warned & (1u << call->coll))) {
            c->warned |= 1u << call->coll;
            FR_WARN(FR_SUB_COLL, "FASTREDUCE_ALGO forces %s, which cannot serve this %s of %zu bytes; falling "
                    "back to the next rule (said once per communicator)", a->name, fr_coll_name(call->coll),
                    call->bytes);
        }
    }
    *rule = -1;
    call->chunk = 0;
    call->fanout = 0;
    call->across = 0;
    call->proto = 0;
    return fr_algs[fallback_alg(call->coll, call->mem)];
}

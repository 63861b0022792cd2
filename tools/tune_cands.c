/* The autotuner's candidates: every algorithm (and parameter variant) that
 * can serve the job for the memory type measured, and forcing one of them
 * onto the communicator (fr_select_use) while it is measured. */
#include <stdio.h>
#include <string.h>
#include "config.h"
#include "tuner.h"

/* Is algorithm @p name among --algos (all are without it)? */
static int wanted(const opts_t *o, const char *name)
{
    if (!o->algos) return 1;
    size_t n = strlen(name);
    for (const char *p = o->algos; (p = strstr(p, name)); p += n)
        if ((p == o->algos || p[-1] == ',') && (p[n] == ',' || !p[n])) return 1;
    return 0;
}

/* Candidate @p alg of @p coll with the parameters given (0: the default),
 * labelled as the table writes it; nothing when the grid is full. */
void tn_add_cand(tc_grid_t *g, int nodes, int coll, int alg, uint64_t chunk, int fanout, int across, int proto)
{
    if (g->ncand >= MAX_CANDS) return;
    tc_cand_t *k = &g->cand[g->ncand++];
    fr_rule_t r = { .chunk = chunk, .fanout = fanout, .across = across, .proto = proto };
    *k = (tc_cand_t){ .coll = coll, .alg = alg, .chunk = chunk, .fanout = fanout, .across = across, .proto = proto };
    k->simplicity = tc_simplicity(coll, fr_algs[alg]->name, nodes) + (chunk != 0) + (fanout != 0) + (across != 0) +
                    (proto != 0);
    /* the parameters as the table writes them */
    char line[512], *p;
    r.alg = alg;
    fr_rule_format(&r, line, sizeof line);
    p = strstr(line, fr_algs[alg]->name);
    snprintf(k->label, sizeof k->label, "%s", p ? p : fr_algs[alg]->name);
}

/* The variant of algorithm @p a with parameter @p key at @p v, the value
 * the registry lists for the tuner, where it can differ from the others in
 * this job: a fanout below the flat tree's (FR_FANOUT_FLAT: as many
 * children as the job allows, at most 64) and above the binary tree's;
 * across= only between several nodes, rd only on a power-of-two node count
 * (elsewhere it runs the ring). */
static void add_variant(tuner_t *T, int coll, int a, int key, uint64_t v)
{
    const fr_comm_facts_t *c = &T->F;
    int flat = c->size - 1 < 64 ? c->size - 1 : 64, f = v == FR_FANOUT_FLAT ? flat : (int)v;
    switch (key) {
    case FR_PARAM_CHUNK: tn_add_cand(&T->g, c->nnodes, coll, a, v, 0, 0, 0); break;
    case FR_PARAM_FANOUT:
        if (f > 2 && f <= c->size - 1 && (v == FR_FANOUT_FLAT || f < c->size - 1))
            tn_add_cand(&T->g, c->nnodes, coll, a, 0, f, 0, 0);
        break;
    case FR_PARAM_ACROSS:
        if (c->nnodes > 1 && (v != FR_ACROSS_RD || !(c->nnodes & (c->nnodes - 1))))
            tn_add_cand(&T->g, c->nnodes, coll, a, 0, 0, (int)v, 0);
        break;
    case FR_PARAM_PROTO: tn_add_cand(&T->g, c->nnodes, coll, a, 0, 0, 0, (int)v); break;
    }
}

/* Every algorithm of the wanted collectives for the memory measured (but
 * those that run a host algorithm on copies, never faster than it), each
 * with the variants of the parameters it reads (the values its fr_alg_t
 * lists), in the order of the parameters' keys. */
void tn_make_cands(tuner_t *T)
{
    for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
        if (!(T->o.colls & (1 << coll))) continue;
        for (int a = 0; a < fr_nalgs; a++) {
            const fr_alg_t *A = fr_algs[a];
            if ((int)A->coll != coll || !(A->mem_types & T->mem) || !wanted(&T->o, A->name) ||
                (A->traits & FR_ALG_VIA_HOST))
                continue;
            tn_add_cand(&T->g, T->F.nnodes, coll, a, 0, 0, 0, 0);
            for (int key = 1; key < FR_PARAM_COUNT; key++) {
                const fr_alg_param_t *p = fr_alg_param(A, key);
                for (int k = 0; p && k < FR_SWEEP_MAX && p->sweep[k]; k++) add_variant(T, coll, a, key, p->sweep[k]);
            }
        }
    }
}

/* Candidate @p k as the communicator's one rule, for every call after. */
void tn_force(tuner_t *T, const tc_cand_t *k)
{
    T->forced = (fr_rule_t){ .coll = k->coll, .mem = FR_MEM_ALL, .nodes = { 0, FR_INF }, .ppn = { 0, FR_INF },
                             .bytes = { 0, FR_INF }, .alg = k->alg, .chunk = k->chunk, .fanout = k->fanout,
                             .across = k->across, .proto = k->proto, .src = FR_SRC_TUNE, .line = 1 };
    fr_select_use(T->comm, (fr_table_t){ .rules = &T->forced, .n = 1, .cap = 1 });
}

/* The call the tuner measures: @p bytes of float32 sum, root 0, in T->mem. */
fr_call_t tn_call_of(const tuner_t *T, int coll, uint64_t bytes)
{
    return (fr_call_t){ .coll = coll, .count = bytes / sizeof(float), .bytes = bytes, .dtype = FR_FLOAT32,
                        .op = FR_SUM, .root = 0, .mem = T->mem };
}

/* A variant with a chunk equals the default where the message fits in one
 * chunk of either size (the default's for a call of @p bytes). */
int tn_same_as_default(const tuner_t *T, const tc_cand_t *k, uint64_t bytes)
{
    if (!k->chunk) return 0;
    fr_call_t call = tn_call_of(T, k->coll, bytes);
    uint64_t d = fr_alg_chunk_default(fr_algs[k->alg], &call), m = k->chunk < d ? k->chunk : d;
    return bytes <= m;
}

/* Worth a point: the algorithm serves the call (else it is marked declined)
 * and the variant differs from the default there. */
int tn_usable(tuner_t *T, int c, int s)
{
    const tc_cand_t *k = &T->g.cand[c];
    fr_call_t call = tn_call_of(T, k->coll, T->g.sizes[s]);
    tn_force(T, k);
    if (fr_algs[k->alg]->check(&call, T->comm) != FR_SUCCESS) {
        tc_at(&T->g, c, s)->state = TC_DECLINED;
        return 0;
    }
    return !tn_same_as_default(T, k, T->g.sizes[s]);
}

/* Rank 0 lists the candidates of the memory type about to be measured. */
void tn_print_cands(tuner_t *T)
{
    if (T->rank != 0) return;
    printf("# %s memory: %d candidates:\n", T->mem == FR_MEM_CUDA ? "cuda (device)" : "host", T->g.ncand);
    for (int c = 0; c < T->g.ncand; c++) {
        fr_call_t call = tn_call_of(T, T->g.cand[c].coll, T->g.sizes[0]);
        int serves = fr_algs[T->g.cand[c].alg]->check(&call, T->comm) == FR_SUCCESS;
        printf("#   %-9s %-28s%s\n", fr_coll_name(T->g.cand[c].coll), T->g.cand[c].label,
               serves ? "" : "  (cannot serve this job: skipped)");
    }
    fflush(stdout);
}

/* Selection and dispatch: the table is built on rank 0 and broadcast, so
 * every rank chooses alike; fr_allreduce / fr_bcast validate, choose, run. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "device.h"
#include "settings.h"
#include "log.h"
#include "p2p.h"
#include "reduce.h"
#include "wait.h"

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

/* See comm.h. */
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

/* See comm.h. */
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

static fr_status_t check_common(fr_comm_t comm, size_t count, fr_dtype_t dtype, size_t *bytes)
{
    FR_CHECK(fr_comm_check(comm));
    FR_CHECK(fr_mpi_ready());  /* (a communicator outliving MPI_Finalize) */
    if (comm->broken)
        return FR_ERROR(FR_ERR_BAD_COMM, "this communicator is unusable since a collective failed on it (%s); "
                        "destroy it", comm->broken_why);
    if ((unsigned)dtype >= FR_DTYPE_COUNT) return FR_ERROR(FR_ERR_INVALID_ARG, "unknown datatype %d", (int)dtype);
    size_t es = fr_dtype_size(dtype);
    if (count > (size_t)PTRDIFF_MAX / es)
        return FR_ERROR(FR_ERR_COUNT, "count %zu of %s overflows the address space", count, fr_dtype_name(dtype));
    *bytes = count * es;
    return FR_SUCCESS;
}

static fr_status_t prepare_allreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype,
                                     fr_op_t op, fr_comm_t comm, fr_call_t *call)
{
    size_t bytes;
    FR_CHECK(check_common(comm, count, dtype, &bytes));
    if ((unsigned)op >= FR_OP_COUNT) return FR_ERROR(FR_ERR_INVALID_ARG, "unknown op %d", (int)op);
    if (!fr_op_supported(dtype, op))
        return FR_ERROR(FR_ERR_UNSUPPORTED_OP, "op %s is not defined for %s", fr_op_name(op), fr_dtype_name(dtype));
    int inplace = sendbuf == FR_IN_PLACE || sendbuf == recvbuf;
    if (count > 0) {
        if (!recvbuf) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_allreduce: recvbuf is NULL with count %zu", count);
        if (!sendbuf) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_allreduce: sendbuf is NULL with count %zu", count);
        if (!inplace) {
            uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;
            if (s < r + bytes && r < s + bytes)
                return FR_ERROR(FR_ERR_INVALID_ARG, "fr_allreduce: sendbuf and recvbuf overlap but differ; "
                                "use FR_IN_PLACE");
        }
    }
    fr_mem_t mem = FR_MEM_HOST, smem = FR_MEM_HOST;
    if (count > 0) {
        FR_CHECK(fr_mem_of_fast(recvbuf, &mem));
        if (!inplace) FR_CHECK(fr_mem_of_fast(sendbuf, &smem));
        else smem = mem;
        if (smem != mem)
            return FR_ERROR(FR_ERR_INVALID_ARG, "fr_allreduce: sendbuf is %s memory and recvbuf %s memory; both "
                            "must be host or both device", smem == FR_MEM_CUDA ? "device" : "host",
                            mem == FR_MEM_CUDA ? "device" : "host");
    }
    *call = (fr_call_t){.coll = FR_COLL_ALLREDUCE, .sendbuf = inplace ? recvbuf : sendbuf, .recvbuf = recvbuf,
                        .count = count, .bytes = bytes, .dtype = dtype, .op = op, .mem = mem};
    return FR_SUCCESS;
}

static fr_status_t prepare_bcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm,
                                 fr_call_t *call)
{
    size_t bytes;
    FR_CHECK(check_common(comm, count, dtype, &bytes));
    if (root < 0 || root >= comm->size)
        return FR_ERROR(FR_ERR_ROOT, "fr_bcast: root %d is not a rank of this %d-rank communicator", root, comm->size);
    if (count > 0 && !buf) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_bcast: buf is NULL with count %zu", count);
    fr_mem_t mem = FR_MEM_HOST;
    if (count > 0) FR_CHECK(fr_mem_of_fast(buf, &mem));
    *call = (fr_call_t){.coll = FR_COLL_BCAST, .sendbuf = buf, .recvbuf = buf, .count = count, .bytes = bytes,
                        .dtype = dtype, .op = FR_SUM, .root = root, .mem = mem};
    return FR_SUCCESS;
}

static __thread const char *last_alg = "";

const char *fr_last_algorithm(void) { return last_alg; }

static int alg_index(const fr_alg_t *a)
{
    for (int i = 0; i < fr_nalgs; i++)
        if (fr_algs[i] == a) return i;
    return -1;
}

/* See comm.h. */
fr_status_t fr_dispatch(fr_comm_t comm, fr_call_t *call)
{
    int rule;
    /* (a staged call dispatches its host call inside: the outer one comes back after) */
    const fr_call_t *outer = comm->cur;
    const char *outer_alg = comm->cur_alg;
    const fr_alg_t *a = NULL;
    comm->seq++;
    comm->cur = call;
    comm->cur_alg = NULL;
    fr_status_t st = FR_SUCCESS;
    /* Failures before the run are every rank's alike (a mismatch, the
     * device set-up's agreed outcome) or have broken the communicator
     * themselves (the check's own wait timing out).
     * The first device call makes the NCCL communicator (collective).
     * FASTREDUCE_CHECK goes first, so that a rank calling otherwise is
     * named rather than met by the set-up's collectives; the algorithm is
     * not chosen yet then (-1 on every rank). */
    int setup = call->mem == FR_MEM_CUDA && !comm->nccl_state;
    if (setup && comm->check) st = fr_check_agreement(comm, call, -1);
    if (setup && st == FR_SUCCESS) st = fr_device_setup(comm, fr_device_of(call->recvbuf));
    if (st == FR_SUCCESS) {
        a = fr_select_choose(comm, call, &rule);
        comm->cur_alg = a->name;
        if (comm->rank == 0 && FR_LOG_ON(FR_LOG_INFO, FR_SUB_COLL)) {
            char why[160];
            if (rule >= 0) {
                const fr_rule_t *r = &comm->table.rules[rule];
                snprintf(why, sizeof why, "%s rule at line %d", fr_rule_src_name(r->src), r->line);
            } else {
                snprintf(why, sizeof why, "no rule matched or every candidate declined");
            }
            FR_INFO(FR_SUB_COLL, "#%lu %s %zu bytes %s%s%s%s -> %s (%s)", (unsigned long)comm->seq,
                    fr_coll_name(call->coll), call->bytes, fr_dtype_name(call->dtype),
                    call->coll == FR_COLL_ALLREDUCE ? " " : "",
                    call->coll == FR_COLL_ALLREDUCE ? fr_op_name(call->op) : "",
                    call->coll == FR_COLL_BCAST ? " from root" : "", a->name, why);
        }
        if (comm->check && !setup) st = fr_check_agreement(comm, call, alg_index(a));
        /* The first algorithm that needs UCX makes the worker and
         * endpoints: every rank chose it, so every rank is here (after the
         * check, so that a rank calling otherwise is named first). */
        if (st == FR_SUCCESS && (a->needs & FR_NEEDS_UCX) && comm->ucx_state <= 0) st = fr_ucx_setup(comm);
    }
    if (st == FR_SUCCESS) {
        st = a->run(call, comm);
        /* A call that failed part-way leaves the ranks out of step. */
        if (st != FR_SUCCESS && !call->agreed) fr_comm_break(comm, st);
    }
    comm->cur = outer;
    comm->cur_alg = outer_alg;
    if (!a) return st;
    last_alg = a->name;  /* (after the run: a staged call's host call has set its own) */
    /* (device algorithms average themselves: NCCL's avg, or the staged path's host call) */
    if (st == FR_SUCCESS && call->coll == FR_COLL_ALLREDUCE && call->mem == FR_MEM_HOST)
        fr_avg_finish(call->recvbuf, call->count, call->dtype, call->op, comm->size);
    return st;
}

fr_status_t fr_allreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                         fr_comm_t comm)
{
    fr_call_t call;
    FR_CHECK(prepare_allreduce(sendbuf, recvbuf, count, dtype, op, comm, &call));
    return fr_dispatch(comm, &call);
}

fr_status_t fr_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                                fr_comm_t comm, void *stream)
{
    fr_call_t call;
    FR_CHECK(prepare_allreduce(sendbuf, recvbuf, count, dtype, op, comm, &call));
    call.stream = stream;
    call.async = 1;
    return fr_dispatch(comm, &call);
}

fr_status_t fr_bcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm)
{
    fr_call_t call;
    FR_CHECK(prepare_bcast(buf, count, dtype, root, comm, &call));
    return fr_dispatch(comm, &call);
}

fr_status_t fr_bcast_stream(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm, void *stream)
{
    fr_call_t call;
    FR_CHECK(prepare_bcast(buf, count, dtype, root, comm, &call));
    call.stream = stream;
    call.async = 1;
    return fr_dispatch(comm, &call);
}

/* The algorithm the table gives a call of these arguments in @p mem; with
 * @p label, also written there with the rule's parameters (comm.h,
 * fr_allreduce_choice). */
static const char *query(fr_status_t prep, fr_comm_t comm, fr_call_t *call, size_t count, fr_mem_t mem,
                         char *label, size_t len)
{
    int rule;
    if (prep != FR_SUCCESS) return NULL;
    if (count > (size_t)PTRDIFF_MAX / fr_dtype_size(call->dtype)) return NULL;
    call->count = count;
    call->bytes = count * fr_dtype_size(call->dtype);
    call->mem = mem;
    const fr_alg_t *a = fr_select_choose(comm, call, &rule);
    if (!label || !len) return a->name;
    char params[96];
    uint64_t chunk = call->chunk == fr_alg_chunk_default(a, call) ? 0 : call->chunk;
    snprintf(label, len, "%s%s", a->name,
             fr_params_format(chunk, call->fanout, call->across, call->proto, params, sizeof params));
    return label;
}

const char *fr_allreduce_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op, fr_mem_t mem,
                                char *label, size_t len)
{
    static char dummy;
    fr_call_t call;
    return query(prepare_allreduce(&dummy, &dummy + 1, 0, dtype, op, comm, &call), comm, &call, count, mem, label,
                 len);
}

const char *fr_bcast_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root, fr_mem_t mem, char *label,
                            size_t len)
{
    fr_call_t call;
    return query(prepare_bcast(NULL, 0, dtype, root, comm, &call), comm, &call, count, mem, label, len);
}

const char *fr_allreduce_algorithm(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op)
{
    return fr_allreduce_choice(comm, count, dtype, op, FR_MEM_HOST, NULL, 0);
}

const char *fr_bcast_algorithm(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root)
{
    return fr_bcast_choice(comm, count, dtype, root, FR_MEM_HOST, NULL, 0);
}

const char *fr_allreduce_algorithm_device(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op)
{
    return fr_allreduce_choice(comm, count, dtype, op, FR_MEM_CUDA, NULL, 0);
}

const char *fr_bcast_algorithm_device(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root)
{
    return fr_bcast_choice(comm, count, dtype, root, FR_MEM_CUDA, NULL, 0);
}

/* Dispatch: fr_allreduce / fr_bcast and their _stream forms validate the
 * call, choose its algorithm from the communicator's table and run it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "agree.h"
#include "device.h"
#include "log.h"
#include "observe.h"
#include "p2p.h"
#include "reduce.h"
#include "request.h"
#include "registry.h"
#include "select.h"
#include "tune.h"
#include "wait.h"

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

fr_status_t fr_prepare_allreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype,
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

fr_status_t fr_prepare_bcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm,
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
static __thread int last_zcopy, last_cma;

const char *fr_last_algorithm(void) { return last_alg; }
int fr_last_zero_copy(void) { return last_zcopy; }
int fr_last_cma(void) { return last_cma; }
void fr_last_algorithm_set(const char *alg, int zcopy, int cma)
{
    last_alg = alg;
    last_zcopy = zcopy;
    last_cma = cma;
}

static int alg_index(const fr_alg_t *a)
{
    for (int i = 0; i < fr_nalgs; i++)
        if (fr_algs[i] == a) return i;
    return -1;
}

/* The per-call log line (FASTREDUCE_DEBUG=INFO, rank 0), after the run, so
 * that it can say whether the call went zero-copy. */
static void log_call(const struct fr_comm *comm, uint64_t seq, const fr_call_t *call, const fr_alg_t *a, int rule,
                     fr_status_t st)
{
    char why[160];
    if (rule >= 0) {
        const fr_rule_t *r = &comm->table.rules[rule];
        snprintf(why, sizeof why, "%s rule at line %d", fr_rule_src_name(r->src), r->line);
    } else {
        snprintf(why, sizeof why, "no rule matched or every candidate declined");
    }
    FR_INFO(FR_SUB_COLL, "#%lu %s %zu bytes %s%s%s%s -> %s%s (%s)%s%s", (unsigned long)seq,
            fr_coll_name(call->coll), call->bytes, fr_dtype_name(call->dtype),
            call->coll == FR_COLL_ALLREDUCE ? " " : "", call->coll == FR_COLL_ALLREDUCE ? fr_op_name(call->op) : "",
            call->coll == FR_COLL_BCAST ? " from root" : "", a->name,
            call->zcopy ? ", zero-copy" : call->cma ? ", one copy by cma" : "", why,
            st == FR_SUCCESS ? "" : ": ", st == FR_SUCCESS ? "" : fr_strerror(st));
}

/* The scratch buffer grown to what @p a takes for @p call, agreed: every
 * rank grows it in the same call (the bound and the buffer's size are alike
 * on every rank), and a rank without the memory fails the call on every
 * rank before anything moves, which then drop the buffer alike. */
static fr_status_t reserve_scratch(fr_comm_t comm, const fr_call_t *call, const fr_alg_t *a)
{
    size_t bytes = fr_alg_scratch(a, call, comm);
    if (bytes <= comm->scratch_size) return FR_SUCCESS;
    fr_status_t st = fr_agree_bounded(comm, fr_comm_scratch_grow(comm, bytes), "the algorithm's scratch");
    if (st != FR_SUCCESS) fr_comm_scratch_drop(comm);
    return st;
}

/* Choose @p call's algorithm (*ap) and run it, as call number @p seq. */
static fr_status_t run(fr_comm_t comm, fr_call_t *call, uint64_t seq, const fr_alg_t **ap)
{
    int rule;
    /* (a staged call dispatches its host call inside: the outer one comes back after) */
    const fr_call_t *outer = comm->cur;
    const char *outer_alg = comm->cur_alg;
    const fr_alg_t *a = NULL;
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
    if (setup && comm->check) st = fr_check_agreement(comm, call, -1, fr_alg_name);
    if (setup && st == FR_SUCCESS) st = fr_device_setup(comm, fr_device_of(call->recvbuf));
    if (st == FR_SUCCESS) {
        a = fr_select_choose(comm, call, &rule);
        comm->cur_alg = a->name;
        if (comm->check && !setup) st = fr_check_agreement(comm, call, alg_index(a), fr_alg_name);
        /* The first algorithm that needs UCX makes the worker and
         * endpoints: every rank chose it, so every rank is here (after the
         * check, so that a rank calling otherwise is named first). */
        if (st == FR_SUCCESS && (a->needs & FR_NEEDS_UCX) && comm->ucx_state <= 0) st = fr_ucx_setup(comm);
        if (st == FR_SUCCESS) st = reserve_scratch(comm, call, a);
    }
    if (st == FR_SUCCESS) {
        call->zcopy = 0;
        call->cma = 0;
        st = a->run(call, comm);
        if (comm->rank == 0 && FR_LOG_ON(FR_LOG_INFO, FR_SUB_COLL)) log_call(comm, seq, call, a, rule, st);
        /* A call that failed part-way leaves the ranks out of step. */
        if (st != FR_SUCCESS && !call->agreed) fr_comm_break(comm, st);
    }
    comm->cur = outer;
    comm->cur_alg = outer_alg;
    *ap = a;
    return st;
}

/* run() of a call that is observed (observe.h). Its own function, so that
 * the timing record is on the stack of observed calls only. */
static __attribute__((noinline)) fr_status_t run_observed(fr_comm_t comm, fr_call_t *call, uint64_t seq,
                                                           const fr_alg_t **ap)
{
    fr_trace_call_t rec;
    fr_trace_call_t *prev = fr_observe_begin(comm, &rec, call->t_issue);
    fr_status_t st = run(comm, call, seq, ap);
    fr_observe_end(comm, call, *ap ? alg_index(*ap) : -1, seq, &rec, prev, st);
    return st;
}

/* See api.h. */
fr_status_t fr_dispatch(fr_comm_t comm, fr_call_t *call)
{
    const fr_alg_t *a = NULL;
    const uint64_t seq = ++comm->seq;
    fr_status_t st = __builtin_expect(comm->obs != NULL, 0) ? run_observed(comm, call, seq, &a)
                                                            : run(comm, call, seq, &a);
    if (!a) return st;
    /* (after the run: a staged call's host call has set its own) */
    last_alg = a->name;
    last_zcopy = call->zcopy;
    last_cma = call->cma;
    /* (device algorithms average themselves: NCCL's avg, or the staged path's host call) */
    if (st == FR_SUCCESS && call->coll == FR_COLL_ALLREDUCE && call->mem == FR_MEM_HOST)
        fr_avg_finish(call->recvbuf, call->count, call->dtype, call->op, comm->size);
    return st;
}

fr_status_t fr_allreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                         fr_comm_t comm)
{
    fr_call_t call;
    FR_CHECK(fr_prepare_allreduce(sendbuf, recvbuf, count, dtype, op, comm, &call));
    return fr_prog_blocking(comm, &call, NULL);
}

fr_status_t fr_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                                fr_comm_t comm, void *stream)
{
    fr_call_t call;
    FR_CHECK(fr_prepare_allreduce(sendbuf, recvbuf, count, dtype, op, comm, &call));
    call.stream = stream;
    call.async = 1;
    return fr_prog_blocking(comm, &call, NULL);
}

fr_status_t fr_bcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm)
{
    fr_call_t call;
    FR_CHECK(fr_prepare_bcast(buf, count, dtype, root, comm, &call));
    return fr_prog_blocking(comm, &call, NULL);
}

fr_status_t fr_bcast_stream(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm, void *stream)
{
    fr_call_t call;
    FR_CHECK(fr_prepare_bcast(buf, count, dtype, root, comm, &call));
    call.stream = stream;
    call.async = 1;
    return fr_prog_blocking(comm, &call, NULL);
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
    return query(fr_prepare_allreduce(&dummy, &dummy + 1, 0, dtype, op, comm, &call), comm, &call, count, mem, label,
                 len);
}

const char *fr_bcast_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root, fr_mem_t mem, char *label,
                            size_t len)
{
    fr_call_t call;
    return query(fr_prepare_bcast(NULL, 0, dtype, root, comm, &call), comm, &call, count, mem, label, len);
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

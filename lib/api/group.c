/* Grouped allreduce: many buffers of one datatype and op in one call.
 * Consecutive small host buffers (FASTREDUCE_FUSION_BUFFER_MAX) are packed
 * into a fusion buffer of at most FASTREDUCE_FUSION_BYTES (rank 0's values,
 * so every rank makes the same batches), reduced in place as one message
 * with the table's choice for its size, and copied out: one collective's
 * latency instead of one per buffer. A larger buffer goes alone, where it
 * lies: its call's latency is less than copying it in and out would cost.
 * So do device buffers. Buffers of no elements make no call. */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "copy.h"
#include "device.h"
#include "log.h"
#include "mem.h"
#include "request.h"
#include "wait.h"

fr_status_t fr_comm_fusion(fr_comm_t comm, size_t *fusion_bytes, size_t *buffer_max)
{
    FR_CHECK(fr_comm_check(comm));
    if (fusion_bytes) *fusion_bytes = (size_t)comm->set.fusion_bytes;
    if (buffer_max) *buffer_max = (size_t)comm->set.fusion_buffer_max;
    return FR_SUCCESS;
}

void fr_group_free(fr_group_t *g)
{
    if (!g) return;
    free(g->send);
    free(g->recv);
    free(g->counts);
    free(g);
}

fr_status_t fr_group_make(struct fr_comm *comm, const void *const *sendbufs, void *const *recvbufs,
                          const size_t *counts, size_t n, fr_dtype_t dtype, fr_op_t op, fr_group_t **out)
{
    *out = NULL;
    if (n && (!recvbufs || !counts))
        return FR_ERROR(FR_ERR_NULL_POINTER, "fr_allreduce_group: %s is NULL with %zu buffers",
                        recvbufs ? "counts" : "recvbufs", n);
    if (n > (size_t)PTRDIFF_MAX / sizeof(void *))
        return FR_ERROR(FR_ERR_COUNT, "fr_allreduce_group: %zu buffers", n);
    fr_group_t *g = calloc(1, sizeof *g);
    size_t m = n ? n : 1;
    if (g) {
        g->send = malloc(m * sizeof *g->send);
        g->recv = malloc(m * sizeof *g->recv);
        g->counts = malloc(m * sizeof *g->counts);
    }
    if (!g || !g->send || !g->recv || !g->counts) {
        fr_group_free(g);
        return FR_ERROR(FR_ERR_NO_MEMORY, "fr_allreduce_group: out of memory for %zu buffers", n);
    }
    *g = (fr_group_t){.n = n, .send = g->send, .recv = g->recv, .counts = g->counts, .dtype = dtype, .op = op,
                      .mem = FR_MEM_HOST, .dev = -1};
    fr_status_t st = FR_SUCCESS;
    int mixed = 0;
    for (size_t i = 0; i < n && st == FR_SUCCESS; i++) {
        fr_call_t c;
        st = fr_prepare_allreduce(sendbufs ? sendbufs[i] : FR_IN_PLACE, recvbufs[i], counts[i], dtype, op, comm,
                                  &c);
        if (st != FR_SUCCESS) {
            FR_ERROR(st, "fr_allreduce_group: buffer %zu: %s", i, fr_last_error());
            break;
        }
        g->send[i] = c.sendbuf;
        g->recv[i] = c.recvbuf;
        g->counts[i] = c.count;
        if (c.count && c.mem == FR_MEM_CUDA) {
            int dev = fr_device_of(c.recvbuf);
            if (g->mem == FR_MEM_CUDA && dev != g->dev)
                st = FR_ERROR(FR_ERR_INVALID_ARG, "fr_allreduce_group: buffer %zu is on GPU %d, an earlier one on "
                              "GPU %d; a communicator's device buffers are on one GPU", i, dev, g->dev);
            g->mem = FR_MEM_CUDA;
            g->dev = dev;
        }
        if (c.count) mixed |= (int)c.mem;
    }
    if (st == FR_SUCCESS && mixed == (int)FR_MEM_ALL)
        st = FR_ERROR(FR_ERR_INVALID_ARG, "fr_allreduce_group: some buffers are host and some device memory; "
                      "all must be one or the other");
    /* (with no buffers the arguments still are those of an allreduce) */
    if (st == FR_SUCCESS && !n) {
        fr_call_t c;
        static char dummy;
        st = fr_prepare_allreduce(&dummy, &dummy + 1, 0, dtype, op, comm, &c);
    }
    if (st != FR_SUCCESS) {
        fr_group_free(g);
        return st;
    }
    *out = g;
    return FR_SUCCESS;
}

int fr_group_next(struct fr_comm *comm, const fr_group_t *g, size_t *i, size_t *first, fr_call_t *call)
{
    size_t es = fr_dtype_size(g->dtype), k = *i;
    while (k < g->n && !g->counts[k]) k++;
    if (k >= g->n) {
        *i = k;
        return 0;
    }
    const uint64_t fusion = comm->set.fusion_bytes, small = comm->set.fusion_buffer_max;
    size_t total = g->counts[k] * es;
    *first = k++;
    if (g->mem == FR_MEM_HOST && total <= small)
        for (; k < g->n && g->counts[k] * es <= small && total + g->counts[k] * es <= fusion; k++)
            total += g->counts[k] * es;
    *i = k;
    *call = (fr_call_t){.coll = FR_COLL_ALLREDUCE, .count = total / es, .bytes = total, .dtype = g->dtype,
                        .op = g->op, .mem = g->mem, .async = g->async};
    return 1;
}

/* The largest batch of @p g that is packed into the fusion buffer (0: none). */
static size_t fused_max(struct fr_comm *comm, const fr_group_t *g)
{
    fr_call_t c;
    size_t max = 0;
    for (size_t i = 0, first; fr_group_next(comm, g, &i, &first, &c);)
        if (i - first > 1 && c.bytes > max) max = c.bytes;
    return max;
}

int fr_group_grows(struct fr_comm *comm, const fr_group_t *g)
{
    return fused_max(comm, g) > comm->fusion_size;
}

/* The fusion buffer grown to @p g's largest batch, before its first call:
 * memory of fr_mem_alloc, so that the fused messages go zero-copy, or
 * private memory where that cannot be had. Every rank grows it in the same
 * grouped call (the batches are every rank's alike), and they agree on the
 * outcome: a rank without the memory would otherwise leave the others
 * waiting in a fused allreduce it never starts. */
static fr_status_t fusion_grow(struct fr_comm *comm, const fr_group_t *g)
{
    size_t bytes = fused_max(comm, g);
    if (bytes <= comm->fusion_size) return FR_SUCCESS;
    fr_group_fusion_free(comm);
    void *p = NULL;
    fr_status_t st = FR_SUCCESS;
    if (fr_mem_alloc(bytes, &p) != FR_SUCCESS && posix_memalign(&p, 64, bytes)) {
        p = NULL;
        st = FR_ERROR(FR_ERR_NO_MEMORY, "grouped allreduce: no memory for a fusion buffer of %zu bytes "
                      "(FASTREDUCE_FUSION_BYTES)", bytes);
    }
    comm->fusion = p;
    comm->fusion_size = p ? bytes : 0;
    st = fr_agree_bounded(comm, st, "grouped allreduce: the fusion buffer");
    if (st != FR_SUCCESS) fr_group_fusion_free(comm);
    return st;
}

void fr_group_fusion_free(struct fr_comm *comm)
{
    if (comm->fusion && fr_mem_shared(comm->fusion, 1)) fr_mem_free(comm->fusion);
    else free(comm->fusion);
    comm->fusion = NULL;
    comm->fusion_size = 0;
}

/* Pack buffers [first, end) of @p g into @p fb, or copy the results out of it. */
static void pack(const fr_group_t *g, size_t first, size_t end, char *fb, int out)
{
    size_t es = fr_dtype_size(g->dtype), off = 0;
    for (size_t k = first; k < end; k++) {
        size_t b = g->counts[k] * es;
        if (out) fr_copy(g->recv[k], fb + off, b);
        else if (b) fr_copy(fb + off, g->send[k], b);
        off += b;
    }
}

fr_status_t fr_group_run(struct fr_comm *comm, fr_group_t *g, const char **alg)
{
    fr_call_t call;
    *alg = "";
    FR_CHECK(fusion_grow(comm, g));
    for (size_t i = 0, first; fr_group_next(comm, g, &i, &first, &call);) {
        fr_status_t st;
        if (i - first == 1) {
            call.sendbuf = g->send[first];
            call.recvbuf = g->recv[first];
            st = fr_dispatch(comm, &call);
        } else {
            char *fb = comm->fusion;
            pack(g, first, i, fb, 0);
            call.sendbuf = call.recvbuf = fb;
            st = fr_dispatch(comm, &call);
            if (st == FR_SUCCESS) pack(g, first, i, fb, 1);
        }
        *alg = fr_last_algorithm();
        if (st != FR_SUCCESS) return st;
    }
    return FR_SUCCESS;
}

#define _GNU_SOURCE
/* Communicator lifecycle: create (node grouping, table, UCX, shm), destroy. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api.h"
#include "request.h"
#include "agree.h"
#include "select.h"
#include "tune.h"
#include "device.h"
#include "settings.h"
#include "log.h"
#include "observe.h"
#include "mpi_types.h"
#include "p2p.h"
#include "shm.h"
#include "mem.h"
#include "wait.h"
#include "topology.h"
#include "hwtopo.h"

/* The live communicators: a handle is checked against this list before it
 * is read, so a destroyed (freed) handle is refused instead of read. Lookups
 * take no lock; slots change only in create and destroy. */
#define FR_MAX_COMMS 4096
static struct fr_comm *live[FR_MAX_COMMS];
static int live_hwm;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static int live_add(struct fr_comm *c)
{
    int ok = 0;
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < FR_MAX_COMMS && !ok; i++)
        if (!__atomic_load_n(&live[i], __ATOMIC_RELAXED)) {
            __atomic_store_n(&live[i], c, __ATOMIC_RELEASE);
            if (i >= live_hwm) __atomic_store_n(&live_hwm, i + 1, __ATOMIC_RELEASE);
            ok = 1;
        }
    pthread_mutex_unlock(&live_lock);
    return ok;
}

static void live_remove(struct fr_comm *c)
{
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < live_hwm; i++)
        if (live[i] == c) __atomic_store_n(&live[i], NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&live_lock);
}

fr_status_t fr_comm_check(const struct fr_comm *comm)
{
    if (!comm) return FR_ERROR(FR_ERR_BAD_COMM, "communicator is NULL");
    int n = __atomic_load_n(&live_hwm, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&live[i], __ATOMIC_ACQUIRE) == comm && comm->magic == FR_COMM_MAGIC)
            return FR_SUCCESS;
    return FR_ERROR(FR_ERR_BAD_COMM, "communicator %p is not a live fastreduce communicator "
                    "(never created, or already destroyed)", (const void *)comm);
}

int fr_comm_rank(fr_comm_t comm) { return fr_comm_check(comm) == FR_SUCCESS ? comm->rank : -1; }
int fr_comm_size(fr_comm_t comm) { return fr_comm_check(comm) == FR_SUCCESS ? comm->size : -1; }

/* The cores the node's ranks may run on together: the union of their
 * affinity masks (a rank bound to one core still shares the node's cores). */
static int node_cores(MPI_Comm node_comm)
{
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    /* (a rank whose mask cannot be read still takes part, with none) */
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);
    /* (as unsigned longs: MPICH 4.0 refuses MPI_BOR on MPI_BYTE) */
    int n = PMPI_Allreduce(&mine, &all, (int)(sizeof mine / sizeof(unsigned long)), MPI_UNSIGNED_LONG, MPI_BOR,
                           node_comm) == MPI_SUCCESS ? CPU_COUNT(&all) : CPU_COUNT(&mine);
    if (n < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    return n;
}

/* Whether the ranks of @p mpi that share this rank's machine (its kernel:
 * the same boot id) are more than the cores they may run on. Such ranks
 * can be on different nodes, faked ones (FASTREDUCE_NODE_SIZE / _HOSTID)
 * or network namespaces and containers, and still share the cores. Where
 * the boot id cannot be read, the node's ranks are counted. Collective. */
void fr_boot_id(char *id, size_t len)
{
    id[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(id, (int)len, f)) id[0] = 0;
        fclose(f);
    }
    id[strcspn(id, "\n")] = 0;
}

static int oversubscribed(MPI_Comm mpi, int rank, int node, MPI_Comm node_comm)
{
    char id[64];
    fr_boot_id(id, sizeof id);
    unsigned h = 2166136261u;  /* FNV-1a of the boot id; or the node index */
    for (const char *p = id; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    int color = id[0] ? (int)(h & 0x3fffffffu) : (int)(0x40000000u | (unsigned)node);
    MPI_Comm host;
    if (PMPI_Comm_split(mpi, color, rank, &host) != MPI_SUCCESS) host = node_comm;
    int n;
    PMPI_Comm_size(host, &n);
    int over = n > node_cores(host);
    if (host != node_comm) PMPI_Comm_free(&host);
    return over;
}

static void free_comm(struct fr_comm *c)
{
    fr_observe_free(c);
    fr_prog_destroy(c);
    fr_device_destroy(c);
    fr_shm_destroy(c);
    /* (peers' freed buffers and those of ended processes stop holding memory here) */
    fr_mem_peer_sweep();
    fr_ucx_destroy(c);
    fr_table_free(&c->table);
    fr_settings_free(&c->set);
    free(c->sel);
    int fin = 0;
    MPI_Finalized(&fin);
    /* After MPI_Finalize no communicator may be freed; the memory still is. */
    fr_nodeinfo_t ni = {.rank_node = c->rank_node, .rank_local = c->rank_local,
                        .node_comm = fin ? MPI_COMM_NULL : c->node_comm};
    fr_node_free(&ni);
    /* (an MPI request abandoned by a timeout still uses mpi: it is freed
     * once MPI completes that request, if ever) */
    if (!fin && c->mpi != MPI_COMM_NULL && !c->mpi_left) PMPI_Comm_free(&c->mpi);
    if (!fin && c->mpi_left) fr_mpi_left_reap(c->mpi);
    free(c->scratch);
    free(c->bye_vals);   /* (NULL once a timed-out barrier left it to MPI) */
    fr_group_fusion_free(c);
    c->magic = 0;
    free(c);
}

/* Rank 0's FASTREDUCE_FUSION_BYTES and _BUFFER_MAX hold on every rank:
 * the ranks must cut a grouped allreduce into the same collectives. */
static fr_status_t agree_fusion(struct fr_comm *c)
{
    uint64_t mine[2] = {c->set.fusion_bytes, c->set.fusion_buffer_max}, all[2];
    memcpy(all, mine, sizeof all);
    if (PMPI_Bcast(all, 2, MPI_UINT64_T, 0, c->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "fr_comm_create: MPI_Bcast of FASTREDUCE_FUSION_BYTES failed");
    if (memcmp(mine, all, sizeof all))
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_FUSION_BYTES / _BUFFER_MAX differ from rank 0's here; rank 0's hold "
                "(%lu, %lu)", (unsigned long)all[0], (unsigned long)all[1]);
    c->set.fusion_bytes = all[0];
    c->set.fusion_buffer_max = all[1];
    return FR_SUCCESS;
}

fr_status_t fr_comm_create(MPI_Comm mpi_comm, const fr_config_t *config, fr_comm_t *out)
{
    if (!out) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_comm_create: out is NULL");
    *out = NULL;
    fr_log_init();
    FR_CHECK(fr_mpi_ready());
    fr_mpi_left_reap(MPI_COMM_NULL);  /* (what earlier timeouts left, if MPI has finished it since) */
    if (mpi_comm == MPI_COMM_NULL) return FR_ERROR(FR_ERR_BAD_COMM, "fr_comm_create: MPI_COMM_NULL");
    int inter = 0;
    if (PMPI_Comm_test_inter(mpi_comm, &inter) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_BAD_COMM, "fr_comm_create: not a valid MPI communicator");
    if (inter) return FR_ERROR(FR_ERR_BAD_COMM, "fr_comm_create: inter-communicators are not supported");
    if (config && config->version != FR_VERSION)
        FR_WARN(FR_SUB_INIT, "fr_config_t.version is %d, this library is %d; fields are read as this version's",
                config->version, FR_VERSION);

    struct fr_comm *c = calloc(1, sizeof *c);
    if (!c) return FR_ERROR(FR_ERR_NO_MEMORY, "fr_comm_create: out of memory");
    c->mpi = c->node_comm = MPI_COMM_NULL;
    c->run_host = fr_dispatch;   /* (the staged path's host call, from the layer below) */
    fr_status_t st = FR_SUCCESS;
    if (PMPI_Comm_dup(mpi_comm, &c->mpi) != MPI_SUCCESS) {
        c->mpi = MPI_COMM_NULL;
        free_comm(c);
        return FR_ERROR(FR_ERR_MPI, "fr_comm_create: MPI_Comm_dup failed");
    }
    PMPI_Comm_rank(c->mpi, &c->rank);
    PMPI_Comm_size(c->mpi, &c->size);
    /* the log's rank is the one in MPI_COMM_WORLD, the same whichever
     * communicator was made last (MPI_Comm_rank is local: no peer waits) */
    int world_rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    fr_log_set_rank(world_rank);
    fr_settings_load(&c->set, config, c->rank, fr_settings_when(FR_WHEN_CREATE));

    fr_nodeinfo_t ni;
    st = fr_node_group(c->mpi, (int)c->set.node_size, c->set.hostid, &ni);
    if (st == FR_SUCCESS) {
        c->node = ni.node; c->nnodes = ni.nnodes; c->local_rank = ni.local_rank; c->local_size = ni.local_size;
        c->ppn = ni.ppn; c->rank_node = ni.rank_node; c->rank_local = ni.rank_local; c->node_comm = ni.node_comm;
    }
    /* (a rank can fail there alone, out of memory after the others' split) */
    FR_CHECK_GOTO(fr_agree(c->mpi, st, "node grouping"), st, fail);

    /* Before UCX starts: binding and the NIC it is told to use. */
    fr_binding_t bind;
    st = fr_topo_bind(c->mpi, c->rank, &c->set, &bind);
    FR_CHECK_GOTO(fr_agree(c->mpi, st, "binding"), st, fail);
    c->gpu = bind.gpu;
    snprintf(c->nic, sizeof c->nic, "%s", bind.nic);
    snprintf(c->fingerprint, sizeof c->fingerprint, "%s", bind.fingerprint);
    c->llc_share = bind.llc_share;

    FR_CHECK_GOTO(fr_select_load(c), st, fail);
    c->spin = (uint64_t)c->set.spin;
    FR_CHECK_GOTO(fr_wait_setup(c), st, fail);
    FR_CHECK_GOTO(agree_fusion(c), st, fail);
    FR_CHECK_GOTO(fr_agree(c->mpi, fr_prog_create(c), "the request queue"), st, fail);
    /* agreed over the node: it picks between two protocols of shm allreduce */
    int over = oversubscribed(c->mpi, c->rank, c->node, c->node_comm);
    st = PMPI_Allreduce(&over, &c->oversubscribed, 1, MPI_INT, MPI_MAX, c->node_comm) == MPI_SUCCESS
             ? FR_SUCCESS : FR_ERROR(FR_ERR_MPI, "MPI_Allreduce over the node failed");
    FR_CHECK_GOTO(fr_agree(c->mpi, st, "node oversubscription"), st, fail);
    /* (yield soon, unless the variable was set, even malformed) */
    if (c->set.src[FR_S_SPIN] == FR_FROM_DEFAULT && c->oversubscribed) c->spin = 20;
    /* a node that could not share its segment fails the whole communicator,
     * so the other nodes' ranks do not wait for it below */
    FR_CHECK_GOTO(fr_agree(c->mpi, fr_shm_create(c), "shared memory"), st, fail);
    /* (agreed: a rank that failed here alone would leave the others waiting below) */
    fr_status_t ops = fr_mpi_ops_get();
    st = fr_agree(c->mpi, ops, "MPI ops");
    if (st != FR_SUCCESS) {
        if (ops == FR_SUCCESS) fr_mpi_ops_put();
        goto fail;
    }
    fr_device_probe();
    if (config && config->nccl_eager) FR_CHECK_GOTO(fr_device_setup(c, -1), st, fail_ops);
    FR_CHECK_GOTO(fr_observe_comm(c), st, fail_ops);
    c->magic = FR_COMM_MAGIC;
    /* Destroy's barrier block is made here, agreed: a rank that could not
     * make it at destroy would skip the barrier its peers wait in. Zeroed:
     * no report unless a barrier completes. */
    c->bye_vals = calloc(6, sizeof *c->bye_vals);
    st = fr_agree(c->mpi, !c->bye_vals ? FR_ERROR(FR_ERR_NO_MEMORY, "fr_comm_create: out of memory")
                          : live_add(c) ? FR_SUCCESS
                                        : FR_ERROR(FR_ERR_NO_MEMORY, "more than %d live communicators", FR_MAX_COMMS),
                  "communicator registration");
    if (st != FR_SUCCESS) {
        live_remove(c);
        goto fail_ops;
    }
    if (c->rank == 0)
        FR_INFO(FR_SUB_INIT, "communicator of %d ranks on %d node(s), %d per node at most, spin %lu",
                c->size, c->nnodes, c->ppn, (unsigned long)c->spin);
    *out = c;
    return FR_SUCCESS;
fail_ops:
    fr_mpi_ops_put();   /* (the reference fr_mpi_ops_get took; free_comm gives back the rest) */
fail:
    free_comm(c);
    return st;
}

/* Post @p c's barrier: an MPI_Iallreduce (MIN) that also tells every rank
 * whether all of them can make the late-rank report, with the same
 * number of calls (a rank broken part-way may have made fewer). */
static fr_status_t post_bye(struct fr_comm *c)
{
    long *v = c->bye_vals;   /* (made at create: nothing here can fail on one rank alone) */
    v[0] = fr_observe_can_report(c) && !c->broken;
    v[1] = (long)c->seq;
    v[2] = -(long)c->seq;
    if (PMPI_Iallreduce(v, v + 3, 3, MPI_LONG, MPI_MIN, c->mpi, &c->bye) != MPI_SUCCESS) {
        c->bye = MPI_REQUEST_NULL;
        return FR_ERROR(FR_ERR_MPI, "fr_comm_destroy: MPI_Iallreduce failed");
    }
    return FR_SUCCESS;
}

/* Wait for @p c's barrier. */
static void wait_bye(struct fr_comm *c, fr_status_t *st)
{
    if (c->bye == MPI_REQUEST_NULL) return;
    c->cur = NULL;
    fr_status_t w = fr_wait_mpi(c, &c->bye, "MPI_Iallreduce (barrier) of fr_comm_destroy", c->bye_vals);
    if (w == FR_SUCCESS) return;
    *st = w;
    if (w == FR_ERR_TIMED_OUT) c->bye_vals = NULL;   /* (MPI's now, freed when it completes) */
    else c->bye_vals[3] = 0;                         /* (what a failed request wrote says nothing) */
}

/* Whether @p c's barrier completed and said every rank is to make the
 * late-rank report. Kept in the barrier's block rather than in an array
 * made at destroy: a rank that could not make that array would skip the
 * report's reductions, which the others wait in. */
static int bye_report(const struct fr_comm *c)
{
    const long *all = c->bye_vals ? c->bye_vals + 3 : NULL;
    return all && all[0] == 1 && all[1] == -all[2];
}

/* See comm.h. Every rank finishes its last collective on a communicator
 * before any endpoint closes (under a timeout the wait is bounded): each
 * communicator's barrier is posted before any is waited for, so ranks that
 * list the same communicators in different orders do not wait for each
 * other (a collective barrier per communicator, one after the other, would
 * hang them). The late-rank reports' reductions are posted only once every
 * barrier is done, for the same reason. */
fr_status_t fr_comm_destroy_many(fr_comm_t *comms, int n)
{
    int fin = 0;
    MPI_Finalized(&fin);
    fr_status_t st = FR_SUCCESS;
    for (int i = 0; i < n; i++) {
        fr_comm_t c = comms[i];
        if (!c) continue;
        fr_status_t ok = fr_comm_check(c);
        if (ok == FR_SUCCESS) {
            fr_req_lock();
            uint64_t n = fr_prog_pending(c);
            fr_req_unlock();
            if (n) ok = FR_ERROR(FR_ERR_PENDING, "fr_comm_destroy: %lu request(s) or caller(s) on this "
                                 "communicator have not completed; wait for them and destroy it again",
                                 (unsigned long)n);
        }
        if (ok != FR_SUCCESS) {
            st = ok;
            comms[i] = NULL;   /* (not ours to free) */
            continue;
        }
        c->bye = MPI_REQUEST_NULL;
        /* Nothing to wait for: peers of a communicator broken under a
         * timeout may be gone (theirs do the same, or time out); and an MPI
         * request left on mpi must not meet a barrier that others never
         * post. Broken without a timeout, the barrier stays: waiting forever
         * is what that setting asks, and a peer that finished the call needs
         * this rank there. */
        if (!(fin || (c->broken && c->timeout_ns) || c->mpi_left)) {
            fr_status_t b = post_bye(c);
            if (b != FR_SUCCESS) st = b;
        }
    }
    for (int i = 0; i < n; i++)
        if (comms[i]) wait_bye(comms[i], &st);
    for (int i = 0; i < n; i++)
        if (comms[i] && bye_report(comms[i])) fr_observe_destroy_post(comms[i]);
    for (int i = 0; i < n; i++) {
        fr_comm_t c = comms[i];
        if (!c) continue;
        if (bye_report(c)) fr_observe_report(c);
        live_remove(c);
        free_comm(c);
        fr_mpi_ops_put();
    }
    return st;
}

fr_status_t fr_comm_destroy(fr_comm_t comm)
{
    return fr_comm_destroy_many(&comm, 1);
}

/* Observing collectives: the process's outputs, the per-call hooks and the
 * program's spans (observe.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "arrival.h"
#include "log.h"
#include "metrics.h"
#include "metrics_out.h"
#include "observe.h"
#include "registry.h"
#include "settings.h"
#include "timeline.h"
#include "timeline_json.h"
#include "topology.h"

/* What a communicator's observation holds (comm->obs). */
struct fr_observe {
    char         key[32];      /* "R.N": rank 0's rank in MPI_COMM_WORLD and its count of communicators */
    fr_arrival_t arr;
};

/* The process's settings, read at its first fr_comm_create or FR_* call. */
static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded, want_late, http_wanted, http_started, http_waits;
static fr_settings_t pset;
static unsigned long ncomms;   /* communicators made in this process (the keys) */
static char host[64], http_addr[64];

/* Serve the metrics on the port of the process's place @p local on its host (lock held). */
static void http_start(int local)
{
    http_started = 1;
    fr_metrics_http_start(http_addr, http_wanted, local);
}

/* Load the settings and open what needs no peer (lock held). */
static void process_start(int world_rank)
{
    fr_log_init();   /* (its host name expands %h) */
    fr_log_set_rank(world_rank);
    gethostname(host, sizeof host - 1);
    fr_settings_load(&pset, NULL, world_rank, fr_settings_when(FR_WHEN_OBSERVE) | FR_S_BIT(FR_S_STATS));
    want_late = pset.stats == 1;
    if (pset.timeline && *pset.timeline && fr_timeline_open(pset.timeline, world_rank, host))
        __atomic_store_n(&fr_trace_enabled, 1, __ATOMIC_RELAXED);
    fr_metrics_spec_t spec;
    if (pset.metrics && *pset.metrics && fr_metrics_parse(pset.metrics, pset.metrics_interval, &spec)) {
        static const char *names[64];
        int n = fr_nalgs < 64 ? fr_nalgs : 64;
        for (int i = 0; i < n; i++) names[i] = fr_algs[i]->name;
        if (fr_metrics_init(n, names, world_rank)) {
            __atomic_store_n(&fr_trace_enabled, 1, __ATOMIC_RELAXED);
            if (spec.file[0]) fr_metrics_file_start(spec.file, spec.interval, world_rank, host);
            http_wanted = spec.port;
            snprintf(http_addr, sizeof http_addr, "%s", spec.addr);
        }
    }
    if (http_wanted) {
        int size = 1, local;
        PMPI_Comm_size(MPI_COMM_WORLD, &size);
        if ((local = fr_launcher_local(size, NULL)) >= 0) http_start(local);
        else FR_INFO(FR_SUB_INIT, "FASTREDUCE_METRICS: the launcher did not say the process's place on its host; "
                     "the HTTP endpoint starts at the first communicator of all of MPI_COMM_WORLD's processes");
    }
    loaded = 1;
}

/* The rank's place among the processes of its host (for the HTTP port),
 * in @p mpi, which holds every process of MPI_COMM_WORLD: the real host,
 * not a node FASTREDUCE_NODE_SIZE fakes. */
static int host_rank(MPI_Comm mpi, int world_rank)
{
    MPI_Comm here;
    int r = 0;
    if (PMPI_Comm_split_type(mpi, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &here) != MPI_SUCCESS) return -1;
    PMPI_Comm_rank(here, &r);
    PMPI_Comm_free(&here);
    return r;
}

void fr_observe_process(void)
{
    int init = 0, fin = 0, world_rank = 0;
    if (PMPI_Initialized(&init) != MPI_SUCCESS || !init || PMPI_Finalized(&fin) != MPI_SUCCESS || fin) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    pthread_mutex_lock(&once_lock);
    if (!loaded) process_start(world_rank);
    pthread_mutex_unlock(&once_lock);
}

fr_status_t fr_observe_comm(struct fr_comm *comm)
{
    int world_rank = 0, same = MPI_UNEQUAL;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_compare(comm->mpi, MPI_COMM_WORLD, &same);   /* (local: no peer takes part) */
    fr_observe_process();
    pthread_mutex_lock(&once_lock);
    unsigned long mine = ++ncomms;
    /* what this rank wants of the communicator, and whether the
     * communicator is not of all of MPI_COMM_WORLD's processes; any rank's
     * wish is every rank's work, as it is collective, and any rank's "not"
     * every rank's (a merged communicator holds another world's processes) */
    int want[4] = {fr_timeline_on() || want_late, want_late, http_wanted && !http_started, same == MPI_UNEQUAL};
    int all[4];
    pthread_mutex_unlock(&once_lock);
    if (PMPI_Allreduce(want, all, 4, MPI_INT, MPI_MAX, comm->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "fr_comm_create: MPI_Allreduce of the observation's settings failed");
    /* Where the launcher did not say the rank's place on its host, it is
     * found over a communicator of all of MPI_COMM_WORLD's processes: one
     * of only some of them would give two ranks of a host the same place. */
    if (all[2] && !all[3]) {
        int hr = host_rank(comm->mpi, world_rank);
        pthread_mutex_lock(&once_lock);
        if (want[2] && !http_started && hr >= 0) http_start(hr);
        pthread_mutex_unlock(&once_lock);
    } else if (want[2]) {
        pthread_mutex_lock(&once_lock);
        if (!http_waits) {
            http_waits = 1;
            FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: no launcher variable (OMPI_COMM_WORLD_LOCAL_RANK, "
                    "MPI_LOCALRANKID, PMI_LOCAL_RANK, SLURM_LOCALID) says this process's place on its host: the HTTP "
                    "endpoint waits for a communicator of all of MPI_COMM_WORLD's processes");
        }
        pthread_mutex_unlock(&once_lock);
    }
    if (!all[0] && !fr_metrics_on()) return FR_SUCCESS;
    long ids[2] = {world_rank, (long)mine};
    if (all[0] && PMPI_Bcast(ids, 2, MPI_LONG, 0, comm->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "fr_comm_create: MPI_Bcast of the communicator's key failed");
    fr_arrival_t arr = {0};
    if (all[0]) FR_CHECK(fr_arrival_sync(&arr, comm->mpi, 8));
    if (all[1] && fr_arrival_keep(&arr, comm->mpi) != FR_SUCCESS)
        FR_WARN(FR_SUB_INIT, "%s; no late-rank report for this communicator", fr_last_error());
    /* (after the collectives: a rank short of memory has taken part in them all the same) */
    struct fr_observe *o = calloc(1, sizeof *o);
    if (!o) {
        fr_arrival_free(&arr);
        FR_WARN(FR_SUB_INIT, "no memory to observe a communicator: its calls are not in the timeline or metrics");
        return FR_SUCCESS;
    }
    snprintf(o->key, sizeof o->key, "%ld.%ld", ids[0], ids[1]);
    o->arr = arr;
    comm->obs = o;
    if (all[0] && fr_timeline_on()) fr_timeline_clock(arr.offset_ns, arr.uncertainty_ns, o->key, (int)ids[0]);
    fr_metrics_comms(1);
    return FR_SUCCESS;
}

fr_trace_call_t *fr_observe_begin(struct fr_comm *comm, fr_trace_call_t *rec, uint64_t t_issue)
{
    (void)comm;
    return fr_trace_open(rec, t_issue, fr_timeline_on());
}

static const char *status_word(fr_status_t st)
{
    return st == FR_SUCCESS ? "success" : fr_strerror(st);
}

void fr_observe_end(struct fr_comm *comm, const fr_call_t *call, int alg, uint64_t seq, fr_trace_call_t *rec,
                    fr_trace_call_t *prev, fr_status_t st)
{
    fr_trace_close(rec, prev);
    struct fr_observe *o = comm->obs;
    fr_arrival_note(&o->arr, seq, rec->t_start);
    int coll = call->coll == FR_COLL_BCAST;
    if (alg >= 0) fr_metrics_call(coll, alg, call->mem == FR_MEM_CUDA, call->zcopy, call->bytes, rec, st);
    else fr_metrics_failure(coll, st);
    if (!fr_timeline_on()) return;
    fr_tl_call_t c = {.name = fr_coll_name(call->coll), .comm = o->key, .seq = seq, .bytes = call->bytes,
                      .count = call->count, .nbuf = 1, .dtype = fr_dtype_name(call->dtype),
                      .op = call->coll == FR_COLL_ALLREDUCE ? fr_op_name(call->op) : "",
                      .algorithm = alg >= 0 ? fr_algs[alg]->name : "", .memory = call->mem == FR_MEM_CUDA ? "cuda" : "host",
                      .status = status_word(st), .root = call->coll == FR_COLL_BCAST ? call->root : -1,
                      .zcopy = call->zcopy};
    fr_timeline_call(&c, rec);
}

void fr_observe_group(struct fr_comm *comm, const fr_group_t *g, fr_trace_call_t *rec, fr_trace_call_t *prev,
                      fr_status_t st)
{
    fr_trace_close(rec, prev);
    if (!fr_timeline_on()) return;
    size_t count = 0;
    for (size_t i = 0; i < g->n; i++) count += g->counts[i];
    fr_tl_call_t c = {.name = "allreduce_group", .comm = comm->obs->key, .seq = 0,
                      .bytes = count * fr_dtype_size(g->dtype), .count = count, .nbuf = g->n,
                      .dtype = fr_dtype_name(g->dtype), .op = fr_op_name(g->op), .algorithm = "",
                      .memory = g->mem == FR_MEM_CUDA ? "cuda" : "host", .status = status_word(st), .root = -1};
    fr_timeline_call(&c, rec);
}

void fr_observe_thread(const char *name)
{
    if (fr_timeline_on()) fr_timeline_thread_name(name);
}

int fr_observe_can_report(const struct fr_comm *comm)
{
    return comm->obs && comm->obs->arr.at;
}

void fr_observe_destroy_post(struct fr_comm *comm)
{
    if (comm->obs) fr_arrival_post(&comm->obs->arr, comm->mpi, comm->seq);
}

void fr_observe_report(struct fr_comm *comm)
{
    if (comm->obs) fr_arrival_report(&comm->obs->arr, comm->mpi, comm->obs->key);
}

void fr_observe_free(struct fr_comm *comm)
{
    struct fr_observe *o = comm->obs;
    if (!o) return;
    fr_arrival_free(&o->arr);
    free(o);
    comm->obs = NULL;
    fr_metrics_comms(-1);
    fr_timeline_flush();
}

/* The program's spans: a stack per thread. */
#define SPAN_DEPTH 16
static __thread struct { char name[48]; uint64_t t0; } spans[SPAN_DEPTH];
static __thread int nspans, lost;

void fr_span_begin(const char *name)
{
    if (!fr_timeline_on()) return;
    if (nspans == SPAN_DEPTH) {
        lost++;   /* (too deep: its end is matched and dropped) */
        return;
    }
    /* (copied: a program may free or reuse the name before the span ends;
     * cut between two characters, not inside one) */
    fr_tl_json_safe(name ? name : "span", spans[nspans].name, sizeof spans[nspans].name);
    spans[nspans].t0 = fr_now_ns();
    nspans++;
}

void fr_span_end(void)
{
    if (lost) {
        lost--;
        return;
    }
    if (!nspans) return;
    nspans--;
    if (fr_timeline_on()) fr_timeline_span(spans[nspans].name, spans[nspans].t0, fr_now_ns());
}

/* At unload: the last of the metrics file, the timeline's closing bracket. */
__attribute__((destructor)) static void observe_end(void)
{
    fr_metrics_out_stop();
    fr_timeline_close();
    if (loaded) fr_settings_free(&pset);
}

/* Clock offsets and the late-rank report (arrival.h). */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "arrival.h"
#include "log.h"
#include "trace.h"

#define TAG 0x4652   /* (on the communicator's private duplicate: no program message shares it) */

/* The reductions of the report, rank 0's results, and the requests. */
struct fr_arrival_red {
    uint64_t n, first;           /* calls reduced: first .. first + n - 1 */
    struct { double v; int r; } *last, *last_out;   /* (MPI_DOUBLE_INT's layout) */
    double  *min_out, *sum_out;
    MPI_Request req[3];
    int      size, slots, posted;
};

static void red_free(struct fr_arrival_red *d)
{
    if (!d) return;
    free(d->last);
    free(d->last_out);
    free(d->min_out);
    free(d->sum_out);
    free(d);
}

fr_status_t fr_arrival_sync(fr_arrival_t *a, MPI_Comm mpi, int rounds)
{
    int rank, size, ok = 1;
    PMPI_Comm_rank(mpi, &rank);
    PMPI_Comm_size(mpi, &size);
    uint64_t best = UINT64_MAX;
    int64_t off = 0;
    for (int r = 1; r < size && ok; r++)
        for (int k = 0; k < rounds && ok; k++) {
            if (rank == 0) {
                int x;
                uint64_t t;
                ok = PMPI_Recv(&x, 1, MPI_INT, r, TAG, mpi, MPI_STATUS_IGNORE) == MPI_SUCCESS;
                t = fr_now_ns();
                ok = ok && PMPI_Send(&t, 1, MPI_UINT64_T, r, TAG, mpi) == MPI_SUCCESS;
            } else if (rank == r) {
                uint64_t t1 = fr_now_ns(), ref = 0;
                ok = PMPI_Send(&k, 1, MPI_INT, 0, TAG, mpi) == MPI_SUCCESS &&
                     PMPI_Recv(&ref, 1, MPI_UINT64_T, 0, TAG, mpi, MPI_STATUS_IGNORE) == MPI_SUCCESS;
                uint64_t t2 = fr_now_ns();
                /* the shortest round trip bounds the error best: rank 0 read its clock within it */
                if (ok && t2 - t1 < best) {
                    best = t2 - t1;
                    off = (int64_t)ref - (int64_t)(t1 + (t2 - t1) / 2);
                }
            }
        }
    /* Processes of one kernel read the same monotonic clock: their offset
     * is 0, exactly, whatever the round trips measured. */
    char boot[64], root_boot[64];
    fr_boot_id(boot, sizeof boot);
    memcpy(root_boot, boot, sizeof boot);
    if (ok) ok = PMPI_Bcast(root_boot, sizeof root_boot, MPI_CHAR, 0, mpi) == MPI_SUCCESS;
    if (boot[0] && !strcmp(boot, root_boot)) {
        off = 0;
        best = 0;
    }
    uint64_t unc = rank && best != UINT64_MAX ? best / 2 : 0;
    if (!ok || PMPI_Allreduce(&unc, &a->uncertainty_ns, 1, MPI_UINT64_T, MPI_MAX, mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "the clock offsets' exchange failed");
    a->offset_ns = off;
    return FR_SUCCESS;
}

fr_status_t fr_arrival_keep(fr_arrival_t *a, MPI_Comm mpi)
{
    int rank, have, all = 0;
    PMPI_Comm_rank(mpi, &rank);
    struct fr_arrival_red *d = calloc(1, sizeof *d);
    /* Everything the report needs is made now, so that fr_comm_destroy has
     * nothing to allocate (nor to agree on) before it posts the reductions. */
    if (d) {
        PMPI_Comm_size(mpi, &d->size);
        d->last = malloc(FR_ARRIVAL_CALLS * sizeof *d->last);
        a->at = calloc(FR_ARRIVAL_CALLS, sizeof *a->at);
        if (rank == 0) {
            d->last_out = malloc(FR_ARRIVAL_CALLS * sizeof *d->last_out);
            d->min_out = malloc(FR_ARRIVAL_CALLS * sizeof *d->min_out);
            d->sum_out = malloc(FR_ARRIVAL_CALLS * sizeof *d->sum_out);
        }
    }
    have = d && d->last && a->at && (rank || (d->last_out && d->min_out && d->sum_out));
    if (PMPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, mpi) != MPI_SUCCESS) all = 0;
    if (!all) {
        red_free(d);
        free(a->at);
        a->at = NULL;
        return have ? FR_SUCCESS : FR_ERROR(FR_ERR_NO_MEMORY, "no memory for the late-rank report's arrivals");
    }
    a->red = d;
    return FR_SUCCESS;
}

void fr_arrival_post(fr_arrival_t *a, MPI_Comm mpi, uint64_t ncalls)
{
    struct fr_arrival_red *d = a->red;
    if (!a->at || !d || d->posted) return;
    int rank;
    PMPI_Comm_rank(mpi, &rank);
    /* The ring's slots hold the same calls on every rank (seq % N), so they
     * are reduced where they lie; slots no call used are 0 everywhere. */
    d->n = ncalls < FR_ARRIVAL_CALLS ? ncalls : FR_ARRIVAL_CALLS;
    d->first = ncalls - d->n + 1;
    int c = (int)(ncalls + 1 < FR_ARRIVAL_CALLS ? ncalls + 1 : FR_ARRIVAL_CALLS);
    for (int i = 0; i < c; i++) {
        d->last[i].v = a->at[i];
        d->last[i].r = rank;
    }
    d->slots = c;
    PMPI_Ireduce(d->last, d->last_out, c, MPI_DOUBLE_INT, MPI_MAXLOC, 0, mpi, &d->req[0]);
    PMPI_Ireduce(a->at, d->min_out, c, MPI_DOUBLE, MPI_MIN, 0, mpi, &d->req[1]);
    PMPI_Ireduce(a->at, d->sum_out, c, MPI_DOUBLE, MPI_SUM, 0, mpi, &d->req[2]);
    d->posted = 1;
}

/* Rank 0: the report from the reduced arrivals. */
static void print(const fr_arrival_t *a, const struct fr_arrival_red *d, const char *key)
{
    int size = d->size;
    uint64_t *late = calloc((size_t)size, sizeof *late);
    double *waited = calloc((size_t)size, sizeof *waited), total = 0;
    if (!late || !waited) {
        free(late);
        free(waited);
        return;
    }
    /* A call counts as late only where its arrivals spread further than the
     * clocks can be trusted (twice the uncertainty) plus the few
     * microseconds that ranks arriving together differ by anyway. */
    double thr = 2.0 * (double)a->uncertainty_ns + 10000.0;
    uint64_t spread = 0;
    for (int i = 0; i < d->slots; i++) {
        if (d->last_out[i].v - d->min_out[i] <= thr) continue;
        int r = d->last_out[i].r;
        if (r < 0 || r >= size) continue;
        spread++;
        late[r]++;
        double w = (double)size * d->last_out[i].v - d->sum_out[i];
        waited[r] += w;
        total += w;
    }
    fr_log_report("LATE", "late-rank report of communicator %s: %d ranks, calls %lu-%lu; clocks aligned within "
                  "%.1f us; %lu call(s) whose last rank came more than %.1f us after the first", key, size,
                  (unsigned long)d->first, (unsigned long)(d->first + d->n - 1), (double)a->uncertainty_ns / 1e3,
                  (unsigned long)spread, thr / 1e3);
    if (spread)
        fr_log_report("LATE", "%6s %10s %7s %16s %18s", "rank", "last", "share", "others_waited_s",
                      "per_late_call_us");
    /* the ranks that cost the others most, first; ten at most */
    for (int shown = 0; shown < 10; shown++) {
        int best = -1;
        for (int r = 0; r < size; r++)
            if (late[r] && (best < 0 || waited[r] > waited[best])) best = r;
        if (best < 0) break;
        fr_log_report("LATE", "%6d %10lu %6.1f%% %16.6f %18.1f", best, (unsigned long)late[best],
                      100.0 * (double)late[best] / (double)spread, waited[best] / 1e9,
                      waited[best] / 1e3 / (double)late[best]);
        late[best] = 0;
    }
    if (spread) fr_log_report("LATE", "in all the ranks waited %.6f s for late ones", total / 1e9);
    free(late);
    free(waited);
}

void fr_arrival_report(fr_arrival_t *a, MPI_Comm mpi, const char *key)
{
    struct fr_arrival_red *d = a->red;
    if (!d || !d->posted) return;
    d->posted = 0;
    MPI_Status sts[3];   /* (not MPI_STATUSES_IGNORE: MPICH's, a constant address, makes GCC warn) */
    if (PMPI_Waitall(3, d->req, sts) == MPI_SUCCESS) {
        int rank;
        PMPI_Comm_rank(mpi, &rank);
        if (rank == 0) print(a, d, key);
    }
}

void fr_arrival_free(fr_arrival_t *a)
{
    free(a->at);
    a->at = NULL;
    red_free(a->red);
    a->red = NULL;
}

/* fr_trainer's gradient reduction: each layer's gradients averaged over the
 * ranks, in reverse layer order (the order the backward pass completes
 * them).
 *
 * fastreduce: one grouped allreduce (op avg) of the layer's two buffers,
 * weights and bias, which the library packs into one message while both are
 * small (FASTREDUCE_FUSION_BUFFER_MAX). mpi: one allreduce (sum) of the
 * pair, which lie adjacent, then a division by the number of ranks.
 *
 * Both modes make the same calls on the same buffers in the same order,
 * started (--overlap on) or blocking (off): a request runs the algorithm the
 * blocking call of its arguments gets, so the result bits do not depend on
 * the mode (fastreduce; MPI's non-blocking collectives may sum in another
 * order than its blocking ones).
 *
 * The time is taken as the caller sees it: "exposed" is the time inside the
 * calls (starts, waits, blocking calls, the mpi backend's division), that
 * is, communication the backward pass did not hide; "communication" is the
 * time from the start of a step's first reduction to the return of its
 * last, which with overlap runs beside the backward pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer.h"

static void fr_check(fr_status_t st, const char *what)
{
    char msg[512];
    if (st == FR_SUCCESS) return;
    snprintf(msg, sizeof msg, "%s: %s: %s", what, fr_strerror(st), fr_last_error());
    die(msg);
}

void reducer_make(reducer_t *r, const shape_t *s, tensors_t *g, fr_comm_t comm, int overlap)
{
    memset(r, 0, sizeof *r);
    r->shape = s;
    r->g = g;
    r->comm = comm;
    r->overlap = overlap;
    r->first = -1;
    r->freq = calloc((size_t)s->nlayer, sizeof *r->freq);
    r->mreq = malloc(sizeof *r->mreq * (size_t)s->nlayer);
    r->mstat = malloc(sizeof *r->mstat * (size_t)s->nlayer);
    if (!r->freq || !r->mreq || !r->mstat) die("out of memory");
    for (int l = 0; l < s->nlayer; l++) r->freq[l] = FR_REQUEST_NULL, r->mreq[l] = MPI_REQUEST_NULL;
}

void reducer_free(reducer_t *r)
{
    free(r->freq);
    free(r->mreq);
    free(r->mstat);
}

/* Layer l's allreduce, in place: started into its request, or blocking. */
static void layer_call(reducer_t *r, int l, int start)
{
    const shape_t *s = r->shape;
    void *bufs[2] = { r->g->w[l], r->g->b[l] };
    size_t counts[2] = { (size_t)s->fan_in[l] * s->fan_out[l], (size_t)s->fan_out[l] };
    if (r->comm) {
        if (start)
            fr_check(fr_iallreduce_group(NULL, bufs, counts, 2, FR_FLOAT32, FR_AVG, r->comm, &r->freq[l]),
                     "fr_iallreduce_group");
        else
            fr_check(fr_allreduce_group(NULL, bufs, counts, 2, FR_FLOAT32, FR_AVG, r->comm), "fr_allreduce_group");
        return;
    }
    int n = (int)layer_count(s, l), rc;
    if (start) rc = MPI_Iallreduce(MPI_IN_PLACE, bufs[0], n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r->mreq[l]);
    else rc = MPI_Allreduce(MPI_IN_PLACE, bufs[0], n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) die(start ? "MPI_Iallreduce failed" : "MPI_Allreduce failed");
}

/* The backward pass's hook (--overlap on): start layer l's reduction. */
void reduce_start(int l, void *arg)
{
    reducer_t *r = arg;
    double t = MPI_Wtime();
    if (r->first < 0) r->first = t;
    layer_call(r, l, 1);
    r->exposed_s += MPI_Wtime() - t;
}

/* After the backward pass: wait for the started reductions, or make them
 * now (--overlap off); the gradients are then averages on every rank. */
void reduce_finish(reducer_t *r)
{
    const shape_t *s = r->shape;
    double t = MPI_Wtime();
    if (r->first < 0) r->first = t;
    if (!r->overlap)
        for (int l = s->nlayer - 1; l >= 0; l--) layer_call(r, l, 0);
    else if (r->comm)
        fr_check(fr_waitall((size_t)s->nlayer, r->freq, NULL), "fr_waitall");
    else if (MPI_Waitall(s->nlayer, r->mreq, r->mstat) != MPI_SUCCESS)
        die("MPI_Waitall failed");
    if (!r->comm)
        for (size_t i = 0; i < s->n; i++) r->g->flat[i] /= (float)np;
    double e = MPI_Wtime();
    r->exposed_s += e - t;
    r->comm_s += e - r->first;
    r->first = -1;
}

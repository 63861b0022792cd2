/* fr_trainer: data-parallel training of a multilayer perceptron the way
 * Horovod and PyTorch's DDP do it, on fastreduce (or on MPI, for
 * comparison).
 *
 *   - rank 0 initialises the parameters and broadcasts them;
 *   - each rank reads its shard of the data set from a file every epoch
 *     (as a trainer reads from shared storage);
 *   - the backward pass hands each layer's gradients, last layer first, to
 *     an allreduce that averages them over the ranks (reduce.c): started at
 *     once and waited for before the SGD step (--overlap on), or made
 *     blocking after the backward pass (--overlap off);
 *   - rank 0 prints each epoch's loss and accuracy, and where the time went:
 *     data loading, compute, communication and the part of it that was
 *     exposed (percent of the epoch), and the algorithm fastreduce chose for
 *     each message size;
 *   - at the end every rank checks that its parameters are bit-identical to
 *     rank 0's; --save-params writes rank 0's, to compare runs.
 *
 * The data set: --make-data FILE writes a deterministic one (Gaussian
 * clusters, 16 features, 4 classes, 8192 samples; format in data.c).
 * The model: --layers L weight layers, 16 -> N x (L - 1) -> 4 with
 * --hidden N (default 3 layers of 64: 16-64-64-4).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer.h"

int me, np;

void die(const char *msg)
{
    fprintf(stderr, "fr_trainer (rank %d): %s\n", me, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static const char usage[] =
    "usage: fr_trainer [--data FILE] [--make-data FILE] [--epochs E] [--batch B] [--lr LR]\n"
    "                  [--hidden N] [--layers L] [--overlap on|off] [--backend fastreduce|mpi]\n"
    "                  [--save-params FILE] [--mem shared|private]\n"
    "  --hidden N, --layers L  L weight layers, 16 -> N x (L - 1) -> 4 (default 64 and 3)\n"
    "  --overlap on   (default) the backward pass starts each layer's allreduce of its\n"
    "                 gradients as soon as it has them, last layer first (fr_iallreduce_group\n"
    "                 of weights and bias, op avg; MPI_Iallreduce with --backend mpi); the\n"
    "                 SGD step waits for them all (fr_waitall; MPI_Waitall)\n"
    "  --overlap off  the same allreduces, blocking, after the backward pass\n"
    "                 (fr_allreduce_group; MPI_Allreduce): the same messages in the same\n"
    "                 order, so fastreduce gives the same bits in both modes\n"
    "  --save-params FILE  rank 0 writes its final parameters there (float32, layer by\n"
    "                 layer: weights fan_in x fan_out row-major, then bias)\n"
    "  --mem shared   (default) parameters and gradients in memory of fr_mem_alloc, which\n"
    "                 the node's ranks share: their allreduces and bcast go zero-copy\n"
    "  --mem private  in private memory (calloc): the copy path\n";

typedef struct opts {
    const char *data, *make, *save;
    int use_fr, overlap, epochs, batch, hidden, layers, shared;
    double lr;
} opts_t;

/* An integer in [lo, hi] into *out: 1, or 0 for anything else. */
static int int_in(const char *v, long lo, long hi, int *out)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) return 0;
    *out = (int)x;
    return 1;
}

static int on_off(const char *v, int *out)
{
    if (strcmp(v, "on") && strcmp(v, "off")) return 0;
    *out = !strcmp(v, "on");
    return 1;
}

static int mem_of(const char *v, int *shared)
{
    if (strcmp(v, "shared") && strcmp(v, "private")) return 0;
    *shared = !strcmp(v, "shared");
    return 1;
}

static int backend_of(const char *v, int *use_fr)
{
    if (strcmp(v, "fastreduce") && strcmp(v, "mpi")) return 0;
    *use_fr = !strcmp(v, "fastreduce");
    return 1;
}

/* Every option takes a value; 0 for a bad command line. */
static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){ .data = "fr_trainer.data", .use_fr = 1, .overlap = 1, .epochs = 5, .batch = 32,
                   .hidden = 64, .layers = 3, .lr = 0.05, .shared = 1 };
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) return 0;
        if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--make-data")) o->make = v;
        else if (!strcmp(a, "--save-params")) o->save = v;
        else if (!strcmp(a, "--backend") && backend_of(v, &o->use_fr)) {}
        else if (!strcmp(a, "--overlap") && on_off(v, &o->overlap)) {}
        else if (!strcmp(a, "--mem") && mem_of(v, &o->shared)) {}
        else if (!strcmp(a, "--epochs") && int_in(v, 1, 1000000, &o->epochs)) {}
        else if (!strcmp(a, "--batch") && int_in(v, 1, 1 << 20, &o->batch)) {}
        else if (!strcmp(a, "--hidden") && int_in(v, 1, 1 << 14, &o->hidden)) {}
        else if (!strcmp(a, "--layers") && int_in(v, 1, 1000, &o->layers)) {}
        else if (!strcmp(a, "--lr") && (o->lr = strtod(v, &end)) > 0 && !*end) {}
        else return 0;
    }
    return 1;
}

/* Everything a run holds. */
typedef struct run {
    opts_t o;
    shape_t shape;
    tensors_t m, g;
    work_t wk;
    reducer_t red;
    fr_comm_t comm;
    float *xs;
    int32_t *ys;
    int thread_level;
} run_t;

static const char *level_name(int level)
{
    return level == MPI_THREAD_MULTIPLE ? "multiple" : level == MPI_THREAD_SERIALIZED ? "serialized"
         : level == MPI_THREAD_FUNNELED ? "funneled" : "single";
}

/* Rank 0's first lines: the set-up. */
static void print_setup(const run_t *r)
{
    const shape_t *s = &r->shape;
    char model[64];
    if (s->nlayer == 1) snprintf(model, sizeof model, "%d-%d", NF, NC);
    else if (s->nlayer <= 4) {
        size_t k = (size_t)snprintf(model, sizeof model, "%d", NF);
        for (int l = 0; l < s->nlayer; l++) k += (size_t)snprintf(model + k, sizeof model - k, "-%d", s->fan_out[l]);
    } else snprintf(model, sizeof model, "%d-%dx%d-%d", NF, r->o.hidden, s->nlayer - 1, NC);
    printf("fr_trainer: %d ranks, backend %s, overlap %s, MPI thread level %s, model %s (%zu parameters, "
           "%zu bytes), batch %d per rank, lr %g, %s memory\n", np, r->o.use_fr ? "fastreduce" : "mpi",
           r->o.overlap ? "on" : "off", level_name(r->thread_level), model, s->n, s->n * sizeof(float), r->o.batch,
           r->o.lr, r->g.shared ? "shared (fr_mem_alloc)" : "private");
    /* below MPI_THREAD_MULTIPLE the progress thread makes no MPI calls: a
     * request that needs MPI waits for fr_waitall */
    if (r->o.use_fr && r->o.overlap && r->thread_level != MPI_THREAD_MULTIPLE)
        printf("fr_trainer: without MPI_THREAD_MULTIPLE, requests whose algorithm needs MPI run in fr_waitall\n");
}

/* Whether every rank's shard holds a batch: an epoch takes the smallest
 * shard's number of whole batches on every rank, so with none it would
 * train nothing and divide its loss by zero samples. Collective; rank 0
 * says why not. */
static int batch_fits(const run_t *r)
{
    int total = 0, n = shard_size(r->o.data, &total), least = 0;
    MPI_Allreduce(&n, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (least >= r->o.batch) return 1;
    if (me == 0)
        fprintf(stderr, "fr_trainer: --batch %d is larger than the smallest rank's shard of the data set, %d samples "
                "(%d over %d ranks): no step could run; give --batch %d or less\n", r->o.batch, least, total, np, least);
    return 0;
}

/* Model, buffers and communicator; rank 0's parameters broadcast. 0 when
 * the run cannot train (batch_fits), before any of them is made. */
static int setup(run_t *r)
{
    if (r->o.make) {
        if (me == 0) make_data(r->o.make, 8192);
        MPI_Barrier(MPI_COMM_WORLD);
        r->o.data = r->o.make;
    }
    if (!batch_fits(r)) return 0;
    shape_make(&r->shape, r->o.layers, r->o.hidden);
    if (r->shape.n > (size_t)2147483647) die("the model has more parameters than an MPI count holds");
    /* (the mpi backend keeps private memory: MPI gains nothing from ours) */
    tensors_make(&r->m, &r->shape, r->o.use_fr && r->o.shared);
    tensors_make(&r->g, &r->shape, r->o.use_fr && r->o.shared);
    work_make(&r->wk, &r->shape, r->o.batch);
    if (r->o.use_fr && fr_comm_create(MPI_COMM_WORLD, NULL, &r->comm) != FR_SUCCESS) die(fr_last_error());
    reducer_make(&r->red, &r->shape, &r->g, r->comm, r->o.overlap);
    if (me == 0) model_init(&r->m, &r->shape);
    if (r->o.use_fr ? fr_bcast(r->m.flat, r->shape.n, FR_FLOAT32, 0, r->comm) != FR_SUCCESS
                    : MPI_Bcast(r->m.flat, (int)r->shape.n, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        die("broadcast of the parameters failed");
    if (me == 0) print_setup(r);
    return 1;
}

/* The element counts of layer l's messages as its grouped call makes them
 * under the communicator's fusion limits (fr_comm_fusion): weights
 * and bias packed into one while each is at most FASTREDUCE_FUSION_BUFFER_MAX
 * bytes and both fit in FASTREDUCE_FUSION_BYTES, else each alone. The
 * communicator's, not the defaults: its settings come from the environment
 * (rank 0's), and other ones make other messages. Returns how many. */
static int layer_messages(size_t fusion_bytes, size_t buffer_max, const shape_t *s, int l, size_t out[2])
{
    size_t w = (size_t)s->fan_in[l] * s->fan_out[l], b = (size_t)s->fan_out[l];
    size_t wb = w * sizeof(float), bb = b * sizeof(float);
    if (wb <= buffer_max && bb <= buffer_max && wb + bb <= fusion_bytes) {
        out[0] = w + b;
        return 1;
    }
    out[0] = w;
    out[1] = b;
    return 2;
}

/* The algorithm per message size, each size once, in the order the layers
 * reduce. Layers come in at most three shapes, so six sizes. */
static void algorithms(const run_t *r, char *buf, size_t len)
{
    const shape_t *s = &r->shape;
    size_t fusion_bytes = 0, buffer_max = 0;
    fr_comm_fusion(r->comm, &fusion_bytes, &buffer_max);
    size_t sizes[6], nsizes = 0, k = (size_t)snprintf(buf, len, "; fastreduce:");
    for (int l = s->nlayer - 1; l >= 0; l--) {
        size_t msg[2];
        for (int m = 0, nm = layer_messages(fusion_bytes, buffer_max, s, l, msg); m < nm && k < len; m++) {
            size_t i = 0;
            while (i < nsizes && sizes[i] != msg[m]) i++;
            if (i < nsizes || nsizes == 6) continue;
            sizes[nsizes++] = msg[m];
            k += (size_t)snprintf(buf + k, len - k, "%s %zu B -> %s", nsizes > 1 ? "," : "", msg[m] * sizeof(float),
                                  fr_allreduce_algorithm(r->comm, msg[m], FR_FLOAT32, FR_AVG));
        }
    }
}

/* An epoch's seconds on this rank. */
typedef struct times {
    double all, data, compute, comm, exposed;
} times_t;

/* Rank 0's epoch line: its own time split. */
static void print_epoch(const run_t *r, int e, double loss, double acc, int steps, const times_t *t)
{
    char algs[256] = "";
    const char *call = r->o.use_fr ? (r->o.overlap ? "fr_iallreduce_group" : "fr_allreduce_group")
                                   : (r->o.overlap ? "MPI_Iallreduce" : "MPI_Allreduce");
    if (r->o.use_fr) algorithms(r, algs, sizeof algs);
    printf("epoch %d: loss %.6f accuracy %.3f | %.3f s on rank 0: data %.1f%%, compute %.1f%%, communication %.1f%%, "
           "exposed %.1f%% (%d steps x %d %s)%s\n", e, loss, acc, t->all, 100 * t->data / t->all,
           100 * t->compute / t->all, 100 * t->comm / t->all, 100 * t->exposed / t->all, steps, r->shape.nlayer, call,
           algs);
}

/* One epoch: returns the mean loss over all ranks' samples. */
static double epoch(run_t *r, int e)
{
    const shape_t *s = &r->shape;
    /* (the spans: bars of the program's own in FASTREDUCE_TIMELINE's timeline) */
    fr_span_begin("epoch");
    double t0 = MPI_Wtime(), busy = 0;
    fr_span_begin("data");
    int n = load_shard(r->o.data, &r->xs, &r->ys), steps, correct = 0;
    fr_span_end();
    double t_data = MPI_Wtime() - t0, lsum = 0;
    MPI_Allreduce(&n, &steps, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);   /* every rank takes as many steps */
    steps /= r->o.batch;
    r->red.comm_s = r->red.exposed_s = 0;
    for (int k = 0; k < steps; k++) {
        double c0 = MPI_Wtime();
        size_t first = (size_t)k * r->o.batch;
        memset(r->g.flat, 0, sizeof(float) * s->n);
        fr_span_begin("compute");
        lsum += train_step(s, &r->m, &r->g, &r->wk, r->xs + first * NF, r->ys + first, &correct,
                           r->o.overlap ? reduce_start : NULL, &r->red);
        fr_span_end();
        fr_span_begin("communication");
        reduce_finish(&r->red);
        fr_span_end();
        fr_span_begin("optimizer");
        for (size_t i = 0; i < s->n; i++) r->m.flat[i] -= (float)r->o.lr * r->g.flat[i];
        fr_span_end();
        busy += MPI_Wtime() - c0;
    }
    double tot[2] = { lsum, (double)correct }, all[2], seen = (double)steps * r->o.batch * np;
    MPI_Allreduce(tot, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    times_t t = { MPI_Wtime() - t0, t_data, busy - r->red.exposed_s, r->red.comm_s, r->red.exposed_s };
    fr_span_end();
    if (me == 0) print_epoch(r, e, all[0] / seen, all[1] / seen, steps, &t);
    return all[0] / seen;
}

/* Every rank's parameters against rank 0's, bit for bit; 1 when alike. */
static int same_everywhere(const run_t *r)
{
    size_t n = r->shape.n;
    float *ref = malloc(sizeof(float) * n);
    if (!ref) die("out of memory");
    memcpy(ref, r->m.flat, sizeof(float) * n);
    MPI_Bcast(ref, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int same = !memcmp(ref, r->m.flat, sizeof(float) * n), all_same;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(ref);
    return all_same;
}

static void save_params(const run_t *r)
{
    FILE *f = fopen(r->o.save, "wb");
    if (!f || fwrite(r->m.flat, sizeof(float), r->shape.n, f) != r->shape.n || fclose(f))
        die("cannot write the parameters file");
    printf("fr_trainer: rank 0's parameters written to %s\n", r->o.save);
}

static void teardown(run_t *r)
{
    reducer_free(&r->red);
    work_free(&r->wk, &r->shape);
    tensors_free(&r->m);
    tensors_free(&r->g);
    shape_free(&r->shape);
    free(r->xs);
    free(r->ys);
    if (r->comm && fr_comm_destroy(r->comm) != FR_SUCCESS) die(fr_last_error());
}

int main(int argc, char **argv)
{
    run_t r = { 0 };
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &r.thread_level);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (!parse(argc, argv, &r.o)) {
        if (me == 0) fputs(usage, stderr);
        MPI_Finalize();
        return 2;
    }
    if (!setup(&r)) {
        MPI_Finalize();
        return 2;
    }
    double first_loss = 0, loss = 0;
    for (int e = 1; e <= r.o.epochs; e++) {
        loss = epoch(&r, e);
        if (e == 1) first_loss = loss;
    }
    int all_same = same_everywhere(&r);
    if (me == 0) {
        if (r.o.save) save_params(&r);
        printf("fr_trainer: final loss %.6f (first epoch %.6f); parameters bit-identical on all ranks: %s\n", loss,
               first_loss, all_same ? "yes" : "NO");
    }
    teardown(&r);
    MPI_Finalize();
    return all_same ? 0 : 1;
}

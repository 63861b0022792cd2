/* fr_trainer: data-parallel training of a small multilayer perceptron the
 * way Horovod does it, on fastreduce (or on MPI, for comparison).
 *
 *   - rank 0 initialises the parameters and broadcasts them;
 *   - each rank reads its shard of the data set from a file every epoch
 *     (as a trainer reads from shared storage);
 *   - after each step's backward pass the gradients of all layers are packed
 *     into fusion buffers of at most --fusion bytes (like
 *     HOROVOD_FUSION_THRESHOLD) and averaged with fr_allreduce (op avg), or
 *     with MPI_Allreduce (sum) and a division (--backend mpi);
 *   - SGD steps; rank 0 prints each epoch's loss and accuracy, and where the
 *     time went: data loading, compute, communication (percent of the epoch)
 *     and the algorithm fastreduce chose for each fusion buffer size;
 *   - at the end every rank checks that its parameters are bit-identical to
 *     rank 0's.
 *
 * The data set: --make-data FILE writes a deterministic one (Gaussian
 * clusters, 16 features, 4 classes, 8192 samples; format in make_data()).
 *
 * Usage: mpirun -np N fr_trainer [--data FILE] [--make-data FILE] [--epochs E]
 *        [--batch B] [--lr LR] [--fusion BYTES] [--backend fastreduce|mpi]
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fastreduce.h>

#define NF 16      /* features */
#define NH 64      /* hidden units per layer */
#define NC 4       /* classes */
#define NLAYER 3

static const int fan_in[NLAYER] = { NF, NH, NH }, fan_out[NLAYER] = { NH, NH, NC };

typedef struct { float *w[NLAYER], *b[NLAYER]; } model_t;   /* views into one flat array */

static int me, np;

static void die(const char *msg)
{
    fprintf(stderr, "fr_trainer (rank %d): %s\n", me, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* A small deterministic generator (splitmix64), the same on every machine. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
static double gauss(void) { return sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform()); }

/* File: "FRDATA1\n", then int32 n, nfeatures, nclasses, then n records of
 * nfeatures float32 and one int32 label (little-endian). */
static void make_data(const char *path, int n)
{
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write the data file");
    int32_t hdr[3] = { n, NF, NC };
    fwrite("FRDATA1\n", 1, 8, f);
    fwrite(hdr, sizeof hdr, 1, f);
    rng_state = 12345;
    float centre[NC][NF];
    for (int c = 0; c < NC; c++)
        for (int j = 0; j < NF; j++) centre[c][j] = (float)(0.4 * gauss());  /* overlapping: learnt over epochs */
    for (int i = 0; i < n; i++) {
        int32_t label = (int32_t)(rnd() % NC);
        float x[NF];
        for (int j = 0; j < NF; j++) x[j] = centre[label][j] + (float)gauss();
        fwrite(x, sizeof x, 1, f);
        fwrite(&label, sizeof label, 1, f);
    }
    if (fclose(f)) die("writing the data file failed");
}

/* This rank's shard (records r, r + np, ...), read from the file. */
static int load_shard(const char *path, float **xs, int32_t **ys)
{
    FILE *f = fopen(path, "rb");
    char magic[8];
    int32_t hdr[3];
    if (!f || fread(magic, 1, 8, f) != 8 || memcmp(magic, "FRDATA1\n", 8) || fread(hdr, sizeof hdr, 1, f) != 1 ||
        hdr[0] <= 0 || hdr[1] != NF || hdr[2] != NC)
        die("the data file is missing or not an FRDATA1 file of 16 features and 4 classes (see --make-data)");
    int n = (hdr[0] - me + np - 1) / np, k = 0;
    *xs = realloc(*xs, sizeof(float) * NF * (size_t)n);
    *ys = realloc(*ys, sizeof(int32_t) * (size_t)n);
    long rec = (long)(sizeof(float) * NF + sizeof(int32_t));
    for (int i = me; i < hdr[0]; i += np, k++) {
        if (fseek(f, 8 + (long)sizeof hdr + rec * i, SEEK_SET) || fread(*xs + (size_t)k * NF, sizeof(float), NF, f) != NF ||
            fread(*ys + k, sizeof(int32_t), 1, f) != 1)
            die("short read in the data file");
    }
    fclose(f);
    return n;
}

static size_t nparams(void)
{
    size_t n = 0;
    for (int l = 0; l < NLAYER; l++) n += (size_t)fan_in[l] * fan_out[l] + fan_out[l];
    return n;
}

static void views(float *flat, model_t *m)
{
    for (int l = 0; l < NLAYER; l++) {
        m->w[l] = flat;
        flat += (size_t)fan_in[l] * fan_out[l];
        m->b[l] = flat;
        flat += fan_out[l];
    }
}

/* Forward and backward over one batch: adds the gradients of the mean loss
 * into g, returns the summed loss and counts correct predictions. */
static double step(const model_t *m, model_t *g, const float *x, const int32_t *y, int nb, int *correct)
{
    float a[NLAYER + 1][NH > NF ? NH : NF], d[NLAYER + 1][NH];
    double loss = 0;
    for (int s = 0; s < nb; s++) {
        memcpy(a[0], x + (size_t)s * NF, sizeof(float) * NF);
        for (int l = 0; l < NLAYER; l++)
            for (int o = 0; o < fan_out[l]; o++) {
                float v = m->b[l][o];
                for (int i = 0; i < fan_in[l]; i++) v += m->w[l][i * fan_out[l] + o] * a[l][i];
                a[l + 1][o] = l < NLAYER - 1 && v < 0 ? 0 : v;   /* ReLU but at the output */
            }
        float mx = a[NLAYER][0], sum = 0, p[NC];
        int arg = 0;
        for (int c = 1; c < NC; c++) if (a[NLAYER][c] > mx) mx = a[NLAYER][c], arg = c;
        for (int c = 0; c < NC; c++) sum += p[c] = expf(a[NLAYER][c] - mx);
        loss += -log(p[y[s]] / sum);
        *correct += arg == y[s];
        for (int c = 0; c < NC; c++) d[NLAYER][c] = (p[c] / sum - (c == y[s])) / (float)nb;
        for (int l = NLAYER - 1; l >= 0; l--) {
            for (int i = 0; i < fan_in[l]; i++) {
                float back = 0;
                for (int o = 0; o < fan_out[l]; o++) {
                    g->w[l][i * fan_out[l] + o] += a[l][i] * d[l + 1][o];
                    back += m->w[l][i * fan_out[l] + o] * d[l + 1][o];
                }
                if (l > 0) d[l][i] = a[l][i] > 0 ? back : 0;
            }
            for (int o = 0; o < fan_out[l]; o++) g->b[l][o] += d[l + 1][o];
        }
    }
    return loss;
}

int main(int argc, char **argv)
{
    const char *data = "fr_trainer.data", *make = NULL, *backend = "fastreduce";
    int epochs = 5, batch = 32;
    double lr = 0.05;
    size_t fusion = 64u << 20;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) die("every option takes a value");
        i++;
        if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--make-data")) make = v;
        else if (!strcmp(a, "--backend") && (!strcmp(v, "fastreduce") || !strcmp(v, "mpi"))) backend = v;
        else if (!strcmp(a, "--epochs") && (epochs = (int)strtol(v, &end, 10)) > 0 && !*end) {}
        else if (!strcmp(a, "--batch") && (batch = (int)strtol(v, &end, 10)) > 0 && !*end) {}
        else if (!strcmp(a, "--lr") && (lr = strtod(v, &end)) > 0 && !*end) {}
        else if (!strcmp(a, "--fusion") && (fusion = strtoull(v, &end, 10)) >= 4 && !*end) {}
        else die("usage: fr_trainer [--data FILE] [--make-data FILE] [--epochs E] [--batch B] [--lr LR] "
                 "[--fusion BYTES] [--backend fastreduce|mpi]");
    }
    if (make) {
        if (me == 0) make_data(make, 8192);
        MPI_Barrier(MPI_COMM_WORLD);
        data = make;
    }
    int use_fr = !strcmp(backend, "fastreduce");
    fr_comm_t comm = NULL;
    if (use_fr) {
        fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
        if (st != FR_SUCCESS) die(fr_last_error());
    }
    size_t np_ = nparams(), per = fusion / sizeof(float);
    float *params = calloc(np_, sizeof(float)), *grads = calloc(np_, sizeof(float));
    float *fbuf = malloc(sizeof(float) * (per < np_ ? per : np_));
    model_t m, g;
    views(params, &m);
    views(grads, &g);
    /* rank 0 initialises (He), everyone receives */
    if (me == 0) {
        rng_state = 777;
        for (int l = 0; l < NLAYER; l++)
            for (int i = 0; i < fan_in[l] * fan_out[l]; i++) m.w[l][i] = (float)(gauss() * sqrt(2.0 / fan_in[l]));
    }
    if (use_fr ? fr_bcast(params, np_, FR_FLOAT32, 0, comm) != FR_SUCCESS
               : MPI_Bcast(params, (int)np_, MPI_FLOAT, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        die("broadcast of the parameters failed");
    float *xs = NULL;
    int32_t *ys = NULL;
    if (me == 0)
        printf("fr_trainer: %d ranks, backend %s, %zu parameters (%zu bytes), fusion buffer %zu bytes, batch %d per rank, "
               "lr %g\n", np, backend, np_, np_ * sizeof(float), fusion, batch, lr);
    double first_loss = 0, loss = 0;
    for (int e = 1; e <= epochs; e++) {
        double t0 = MPI_Wtime(), t_data, t_comp = 0, t_comm = 0;
        int n = load_shard(data, &xs, &ys), steps, correct = 0;
        t_data = MPI_Wtime() - t0;
        MPI_Allreduce(&n, &steps, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);   /* every rank takes as many steps */
        steps /= batch;
        double lsum = 0;
        for (int s = 0; s < steps; s++) {
            double c0 = MPI_Wtime();
            memset(grads, 0, sizeof(float) * np_);
            lsum += step(&m, &g, xs + (size_t)s * batch * NF, ys + (size_t)s * batch, batch, &correct);
            double c1 = MPI_Wtime();
            /* fusion: pack the layers' gradients into buffers of at most `fusion` bytes, average, unpack */
            for (size_t off = 0; off < np_; off += per) {
                size_t k = np_ - off < per ? np_ - off : per;
                memcpy(fbuf, grads + off, sizeof(float) * k);
                if (use_fr) {
                    if (fr_allreduce(FR_IN_PLACE, fbuf, k, FR_FLOAT32, FR_AVG, comm) != FR_SUCCESS) die(fr_last_error());
                } else {
                    if (MPI_Allreduce(MPI_IN_PLACE, fbuf, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
                        die("MPI_Allreduce failed");
                    for (size_t i = 0; i < k; i++) fbuf[i] /= (float)np;
                }
                memcpy(grads + off, fbuf, sizeof(float) * k);
            }
            double c2 = MPI_Wtime();
            for (size_t i = 0; i < np_; i++) params[i] -= (float)lr * grads[i];
            t_comp += c1 - c0 + (MPI_Wtime() - c2);
            t_comm += c2 - c1;
        }
        double tot[2] = { lsum, (double)correct }, all[2];
        MPI_Allreduce(tot, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        loss = all[0] / ((double)steps * batch * np);
        if (e == 1) first_loss = loss;
        double t_all = MPI_Wtime() - t0, tmax[3] = { t_data, t_comp, t_comm };  /* rank 0's split */
        if (me == 0) {
            char algs[160] = "";
            if (use_fr) {
                size_t last = np_ % per ? np_ % per : per;
                snprintf(algs, sizeof algs, "; fastreduce: %zu B -> %s", (per < np_ ? per : np_) * sizeof(float),
                         fr_allreduce_algorithm(comm, per < np_ ? per : np_, FR_FLOAT32, FR_AVG));
                if (per < np_ && last != per)
                    snprintf(algs + strlen(algs), sizeof algs - strlen(algs), ", %zu B -> %s", last * sizeof(float),
                             fr_allreduce_algorithm(comm, last, FR_FLOAT32, FR_AVG));
            }
            printf("epoch %d: loss %.6f accuracy %.3f | %.3f s on rank 0: data %.1f%%, compute %.1f%%, communication %.1f%% "
                   "(%d steps x %zu allreduces)%s\n", e, loss, all[1] / ((double)steps * batch * np), t_all,
                   100 * tmax[0] / t_all, 100 * tmax[1] / t_all, 100 * tmax[2] / t_all, steps,
                   (np_ + per - 1) / per, algs);
        }
    }
    /* every rank's parameters against rank 0's, bit for bit */
    float *ref = malloc(sizeof(float) * np_);
    memcpy(ref, params, sizeof(float) * np_);
    MPI_Bcast(ref, (int)np_, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int same = !memcmp(ref, params, sizeof(float) * np_), all_same;
    MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (me == 0)
        printf("fr_trainer: final loss %.6f (first epoch %.6f); parameters bit-identical on all ranks: %s\n", loss,
               first_loss, all_same ? "yes" : "NO");
    free(ref); free(params); free(grads); free(fbuf); free(xs); free(ys);
    if (comm) fr_comm_destroy(comm);
    MPI_Finalize();
    return all_same ? 0 : 1;
}

/* fr_trainer's model: a multilayer perceptron, its parameters and its
 * forward and backward passes over a batch.
 *
 * The passes go layer by layer over the whole batch, as a framework's do,
 * so that the backward pass completes one layer's gradients before it
 * starts on the layer below, and the reduction of those can start at once.
 * Every sum runs in the same order as a sample-by-sample pass would (the
 * inputs in order, the samples in order), so the width and depth change
 * the cost, never the arithmetic of one element. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "trainer.h"

static void *alloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) die("out of memory");
    return p;
}

void shape_make(shape_t *s, int nlayer, int hidden)
{
    s->nlayer = nlayer;
    s->fan_in = alloc((size_t)nlayer, sizeof(int));
    s->fan_out = alloc((size_t)nlayer, sizeof(int));
    s->n = 0;
    for (int l = 0; l < nlayer; l++) {
        s->fan_in[l] = l == 0 ? NF : hidden;
        s->fan_out[l] = l == nlayer - 1 ? NC : hidden;
        s->n += layer_count(s, l);
    }
}

void shape_free(shape_t *s)
{
    free(s->fan_in);
    free(s->fan_out);
}

/* Layer l's parameters: its weights and its bias. */
size_t layer_count(const shape_t *s, int l)
{
    return ((size_t)s->fan_in[l] + 1) * (size_t)s->fan_out[l];
}

void tensors_make(tensors_t *t, const shape_t *s, int shared)
{
    void *mem = NULL;
    t->shared = shared && fr_mem_alloc(s->n * sizeof(float), &mem) == FR_SUCCESS && mem;
    float *p = t->flat = t->shared ? mem : alloc(s->n, sizeof(float));
    t->w = alloc((size_t)s->nlayer, sizeof(float *));
    t->b = alloc((size_t)s->nlayer, sizeof(float *));
    for (int l = 0; l < s->nlayer; l++) {
        t->w[l] = p;
        p += (size_t)s->fan_in[l] * s->fan_out[l];
        t->b[l] = p;
        p += s->fan_out[l];
    }
}

void tensors_free(tensors_t *t)
{
    if (t->shared) fr_mem_free(t->flat);
    else free(t->flat);
    free(t->w);
    free(t->b);
}

/* He initialisation of the weights from a fixed seed, biases zero (rank 0
 * calls it and broadcasts the result). */
void model_init(tensors_t *m, const shape_t *s)
{
    rng_state = 777;
    for (int l = 0; l < s->nlayer; l++)
        for (size_t i = 0; i < (size_t)s->fan_in[l] * s->fan_out[l]; i++)
            m->w[l][i] = (float)(gauss() * sqrt(2.0 / s->fan_in[l]));
}

void work_make(work_t *wk, const shape_t *s, int nb)
{
    int widest = NF > NC ? NF : NC;
    for (int l = 0; l < s->nlayer; l++)
        if (s->fan_out[l] > widest) widest = s->fan_out[l];
    wk->nb = nb;
    wk->act = alloc((size_t)s->nlayer + 1, sizeof(float *));
    for (int l = 0; l <= s->nlayer; l++)
        wk->act[l] = alloc((size_t)nb * (l < s->nlayer ? s->fan_in[l] : NC), sizeof(float));
    wk->d = alloc((size_t)nb * widest, sizeof(float));
    wk->dn = alloc((size_t)nb * widest, sizeof(float));
}

void work_free(work_t *wk, const shape_t *s)
{
    for (int l = 0; l <= s->nlayer; l++) free(wk->act[l]);
    free(wk->act);
    free(wk->d);
    free(wk->dn);
}

/* act[l + 1] = ReLU(act[l] w[l] + b[l]) for every sample (no ReLU at the
 * output). */
static void forward_layer(const shape_t *s, const tensors_t *m, work_t *wk, int l)
{
    int fi = s->fan_in[l], fo = s->fan_out[l], relu = l < s->nlayer - 1;
    const float *w = m->w[l];
    for (int k = 0; k < wk->nb; k++) {
        const float *a = wk->act[l] + (size_t)k * fi;
        float *out = wk->act[l + 1] + (size_t)k * fo;
        memcpy(out, m->b[l], sizeof(float) * (size_t)fo);
        for (int i = 0; i < fi; i++)
            for (int o = 0; o < fo; o++) out[o] += w[(size_t)i * fo + o] * a[i];
        if (relu)
            for (int o = 0; o < fo; o++) out[o] = out[o] < 0 ? 0 : out[o];
    }
}

/* Softmax cross-entropy of the outputs: returns the summed loss, counts
 * correct predictions, and leaves in wk->d the gradient of the batch's mean
 * loss with respect to the outputs. */
static double softmax_loss(const shape_t *s, work_t *wk, const int32_t *y, int *correct)
{
    double loss = 0;
    for (int k = 0; k < wk->nb; k++) {
        const float *z = wk->act[s->nlayer] + (size_t)k * NC;
        float mx = z[0], sum = 0, p[NC], *d = wk->d + (size_t)k * NC;
        int arg = 0;
        for (int c = 1; c < NC; c++)
            if (z[c] > mx) mx = z[c], arg = c;
        for (int c = 0; c < NC; c++) sum += p[c] = expf(z[c] - mx);
        loss += -log(p[y[k]] / sum);
        *correct += arg == y[k];
        for (int c = 0; c < NC; c++) d[c] = (p[c] / sum - (c == y[k])) / (float)wk->nb;
    }
    return loss;
}

/* Layer l's gradients added into g from wk->d (the deltas of its outputs),
 * and the deltas of its inputs into wk->dn (through the ReLU of the layer
 * below; none for the first layer). */
static void backward_layer(const shape_t *s, const tensors_t *m, tensors_t *g, work_t *wk, int l)
{
    int fi = s->fan_in[l], fo = s->fan_out[l];
    const float *w = m->w[l];
    float *gw = g->w[l], *gb = g->b[l];
    for (int k = 0; k < wk->nb; k++) {
        const float *a = wk->act[l] + (size_t)k * fi, *d = wk->d + (size_t)k * fo;
        float *dn = wk->dn + (size_t)k * fi;
        for (int i = 0; i < fi; i++) {
            float back = 0;
            for (int o = 0; o < fo; o++) {
                gw[(size_t)i * fo + o] += a[i] * d[o];
                back += w[(size_t)i * fo + o] * d[o];
            }
            if (l > 0) dn[i] = a[i] > 0 ? back : 0;
        }
        for (int o = 0; o < fo; o++) gb[o] += d[o];
    }
}

/* Forward and backward over one batch of wk->nb samples: adds the gradients
 * of the mean loss into g, calling done(l, arg) as soon as layer l's are
 * complete; returns the summed loss and counts correct predictions. */
double train_step(const shape_t *s, const tensors_t *m, tensors_t *g, work_t *wk, const float *x,
                  const int32_t *y, int *correct, layer_done_fn done, void *arg)
{
    memcpy(wk->act[0], x, sizeof(float) * NF * (size_t)wk->nb);
    for (int l = 0; l < s->nlayer; l++) forward_layer(s, m, wk, l);
    double loss = softmax_loss(s, wk, y, correct);
    for (int l = s->nlayer - 1; l >= 0; l--) {
        backward_layer(s, m, g, wk, l);
        if (done) done(l, arg);
        float *t = wk->d;
        wk->d = wk->dn;
        wk->dn = t;
    }
    return loss;
}

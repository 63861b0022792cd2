/* fr_trainer's parts: the data set (data.c), the model and its forward and
 * backward passes (model.c), the reduction of the gradients (reduce.c) and
 * the driver (trainer.c). */
#ifndef FR_TRAINER_H
#define FR_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include <fastreduce.h>

#define NF 16      /* features of the data set */
#define NC 4       /* classes */

extern int me, np;          /* this rank and the number of ranks (MPI_COMM_WORLD) */
void die(const char *msg);  /* print msg and abort the job */

/* data.c: a deterministic generator, the data file and a rank's shard. */
extern uint64_t rng_state;
double gauss(void);
void make_data(const char *path, int n);
int load_shard(const char *path, float **xs, int32_t **ys);
/* The samples of this rank's shard, from the file's header alone; the
 * data set's in @p total. */
int shard_size(const char *path, int *total);

/* The model: nlayer weight layers NF -> hidden x (nlayer - 1) -> NC, ReLU
 * between them. Layer l has weights w[l] (fan_in x fan_out, row-major) and
 * bias b[l] (fan_out), adjacent in one flat array: w[0], b[0], w[1], ... */
typedef struct shape {
    int nlayer, *fan_in, *fan_out;
    size_t n;              /* parameters in all */
} shape_t;

typedef struct tensors {
    float *flat, **w, **b; /* the flat array and its views */
    int shared;            /* flat is memory of fr_mem_alloc (zero-copy collectives) */
} tensors_t;

/* The batch's activations and deltas, kept from the forward pass for the
 * backward one. */
typedef struct work {
    int nb;                /* samples in a batch */
    float **act;           /* act[l]: nb x width of layer l's input (act[nlayer]: the outputs) */
    float *d, *dn;         /* deltas of a layer's outputs, and of its inputs */
} work_t;

/* Called by the backward pass as soon as layer l's gradients are complete,
 * from the last layer to the first. */
typedef void (*layer_done_fn)(int l, void *arg);

void shape_make(shape_t *s, int nlayer, int hidden);
void shape_free(shape_t *s);
/* With @p shared, the flat array comes from fr_mem_alloc (private memory
 * where it cannot). */
void tensors_make(tensors_t *t, const shape_t *s, int shared);
void tensors_free(tensors_t *t);
void model_init(tensors_t *m, const shape_t *s);
void work_make(work_t *wk, const shape_t *s, int nb);
void work_free(work_t *wk, const shape_t *s);
double train_step(const shape_t *s, const tensors_t *m, tensors_t *g, work_t *wk, const float *x,
                  const int32_t *y, int *correct, layer_done_fn done, void *arg);
size_t layer_count(const shape_t *s, int l);

/* reduce.c: each layer's gradients averaged over the ranks, as one grouped
 * allreduce of two buffers (weights, bias) on fastreduce or one allreduce
 * of the adjacent pair on MPI; started by the backward pass (overlap) or
 * made blocking after it, and timed as the caller sees it. */
typedef struct reducer {
    const shape_t *shape;
    tensors_t *g;
    fr_comm_t comm;        /* NULL: the mpi backend */
    int overlap;
    fr_request_t *freq;    /* a request per layer */
    MPI_Request *mreq;
    MPI_Status *mstat;     /* (gcc flags MPI_STATUSES_IGNORE with MPICH's mpi.h) */
    double first;          /* when this step's first reduction started (negative: none yet) */
    double comm_s;         /* seconds from a step's first start to its last completion, summed */
    double exposed_s;      /* seconds inside the reduction calls, summed */
} reducer_t;

void reducer_make(reducer_t *r, const shape_t *s, tensors_t *g, fr_comm_t comm, int overlap);
void reducer_free(reducer_t *r);
void reduce_start(int l, void *r);
void reduce_finish(reducer_t *r);

#endif

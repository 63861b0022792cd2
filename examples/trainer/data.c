/* fr_trainer's data set: a deterministic generator, the data file and a
 * rank's shard of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trainer.h"

/* A small deterministic generator (splitmix64), the same on every machine. */
uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uniform(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
double gauss(void) { return sqrt(-2 * log(uniform() + 1e-300)) * cos(6.283185307179586 * uniform()); }

/* File: "FRDATA1\n", then int32 n, nfeatures, nclasses, then n records of
 * nfeatures float32 and one int32 label (little-endian). */
void make_data(const char *path, int n)
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

/* The data file opened, its header read into @p hdr (n, NF, NC); dies
 * where it is not one of ours. */
static FILE *open_data(const char *path, int32_t hdr[3])
{
    FILE *f = fopen(path, "rb");
    char magic[8];
    if (!f || fread(magic, 1, 8, f) != 8 || memcmp(magic, "FRDATA1\n", 8) || fread(hdr, sizeof(int32_t), 3, f) != 3 ||
        hdr[0] <= 0 || hdr[1] != NF || hdr[2] != NC)
        die("the data file is missing or not an FRDATA1 file of 16 features and 4 classes (see --make-data)");
    return f;
}

/* The records of this rank's shard (r, r + np, ...) among @p n. */
static int shard_of(int32_t n) { return (n - me + np - 1) / np; }

int shard_size(const char *path, int *total)
{
    int32_t hdr[3];
    fclose(open_data(path, hdr));
    *total = hdr[0];
    return shard_of(hdr[0]);
}

/* This rank's shard, read from the file. */
int load_shard(const char *path, float **xs, int32_t **ys)
{
    int32_t hdr[3];
    FILE *f = open_data(path, hdr);
    int n = shard_of(hdr[0]), k = 0;
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

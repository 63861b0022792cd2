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

/* This rank's shard (records r, r + np, ...), read from the file. */
int load_shard(const char *path, float **xs, int32_t **ys)
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

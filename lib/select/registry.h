/* The registry: every algorithm, in one list (registry.c). */
#ifndef FR_REGISTRY_H
#define FR_REGISTRY_H

#include "alg.h"

extern const fr_alg_t *const fr_algs[];
extern const int fr_nalgs;
/* Index of the algorithm named @p name for @p coll (coll < 0: any), or -1. */
int fr_alg_lookup(int coll, const char *name);
/* The name of algorithm @p i of the registry, "(not chosen yet)" outside it. */
const char *fr_alg_name(int i);

#endif

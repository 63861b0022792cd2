/* The state shared with the NCCL tuner plugin (see nccl_plugin.h). */
#include <string.h>
#include "nccl_plugin.h"
#include "nccl_tuner_abi.h"

static __thread struct { int set, algo, proto; } hint;
static unsigned long plugin_inits;

int fr_nccl_algo_of(const char *name)
{
    if (!name) return FR_NCCL_ALGO_NONE;
    if (!strcmp(name, "nccl_ring")) return FRN_ALGO_RING;
    if (!strcmp(name, "nccl_tree")) return FRN_ALGO_TREE;
    if (!strcmp(name, "nccl")) return FR_NCCL_ALGO_NCCL;
    return FR_NCCL_ALGO_NONE;
}

const char *fr_nccl_algo_name(int algo)
{
    return algo == FRN_ALGO_RING ? "ring" : algo == FRN_ALGO_TREE ? "tree" : algo == FR_NCCL_ALGO_NCCL ?
           "NCCL's own choice" : "?";
}

void fr_nccl_hint_set(int algo, int proto)
{
    hint.set = 1;
    hint.algo = algo;
    hint.proto = proto;
}

void fr_nccl_hint_clear(void) { hint.set = 0; }

int fr_nccl_hint_get(int *algo, int *proto)
{
    if (!hint.set) return 0;
    *algo = hint.algo;
    *proto = hint.proto;
    return 1;
}

void fr_nccl_plugin_note_init(void) { __atomic_add_fetch(&plugin_inits, 1, __ATOMIC_RELAXED); }

unsigned long fr_nccl_plugin_inits(void) { return __atomic_load_n(&plugin_inits, __ATOMIC_RELAXED); }

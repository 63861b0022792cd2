/* What libfastreduce and its NCCL tuner plugin (lib/api/nccl_tuner.c)
 * share. The plugin is part of the library, and the module NCCL loads
 * (libnccl-tuner-fastreduce.so) hands NCCL the plugin of the copy of the
 * library the process uses, so both see one copy of this state.
 *
 * fastreduce's own NCCL calls carry a per-thread hint: the algorithm and
 * protocol its table chose for the call, which the plugin forces when NCCL
 * asks it (NCCL calls getCollInfo on the thread that issued the call, for a
 * blocking communicator). Without a hint (any other NCCL program) the
 * plugin looks the call up in the cuda rules of FASTREDUCE_TUNE_FILE and
 * FASTREDUCE_TUNE. */
#ifndef FR_NCCL_PLUGIN_H
#define FR_NCCL_PLUGIN_H

#include <stdint.h>

/* NCCL's cost-table row of a fastreduce algorithm name: nccl_ring and
 * nccl_tree give NCCL's ring and tree rows; "nccl" (NCCL's own choice)
 * gives FR_NCCL_ALGO_NCCL; any other name FR_NCCL_ALGO_NONE. */
enum { FR_NCCL_ALGO_NONE = -2, FR_NCCL_ALGO_NCCL = -1 };
int fr_nccl_algo_of(const char *name);
/* "ring", "tree" (row names) for logs; "nccl's choice" for -1 */
const char *fr_nccl_algo_name(int algo);

/* The hint for the next NCCL call of this thread: @p algo a row or
 * FR_NCCL_ALGO_NCCL, @p proto an FR_PROTO_* value. */
void fr_nccl_hint_set(int algo, int proto);
void fr_nccl_hint_clear(void);
/* 1 and the hint if one is set on this thread, else 0. */
int fr_nccl_hint_get(int *algo, int *proto);

/* The plugin's init counts itself here, so that fastreduce knows whether
 * the NCCL communicator it just created is steered by the plugin. */
void fr_nccl_plugin_note_init(void);
unsigned long fr_nccl_plugin_inits(void);

#endif

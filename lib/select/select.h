/* Choosing an algorithm: the communicator's table loaded from its sources,
 * the rules that can match it indexed, and the first rule that matches a
 * call and whose algorithm accepts it. */
#ifndef FR_SELECT_H
#define FR_SELECT_H

#include "comm.h"
#include "alg.h"

/* Build the table on rank 0 from FASTREDUCE_ALGO, _TUNE, _TUNE_FILE
 * (comm->set, fr_config_t applied) and the default, and broadcast it
 * (collective). */
fr_status_t fr_select_load(struct fr_comm *comm);

/* Make @p table comm's selection table (its rules are not copied) and list
 * again the rules of it that can match comm (sel, sel_at). Whoever changes
 * comm->table after fr_comm_create (the tuner does, to force each
 * candidate) goes through here; when the list cannot be allocated, calls
 * scan the whole table. */
void fr_select_use(struct fr_comm *comm, fr_table_t table);

/* The algorithm the table gives @p call (whose coll, mem, count and bytes
 * are set): the first matching rule whose algorithm accepts it, else the
 * MPI library's own. Sets the rule's parameters on the call; *rule is the
 * rule index or -1. */
const fr_alg_t *fr_select_choose(struct fr_comm *comm, fr_call_t *call, int *rule);

#endif

/* The selection table as data: rules that map a call's collective, memory,
 * job shape and size to an algorithm of the registry with its parameters.
 * The communicator holds one; lib/select parses, prints and consults it. */
#ifndef FR_TABLE_H
#define FR_TABLE_H

#include <stdint.h>
#include "units.h"


typedef struct fr_range { uint64_t lo, hi; } fr_range_t;  /* inclusive */
static inline int fr_range_has(const fr_range_t *r, uint64_t v) { return v >= r->lo && v <= r->hi; }

/* Where a rule came from, strongest first. */
typedef enum { FR_SRC_ALGO = 0, FR_SRC_TUNE, FR_SRC_FILE, FR_SRC_DEFAULT, FR_SRC_COUNT } fr_rule_src_t;

enum { FR_ACROSS_AUTO = 0, FR_ACROSS_RING, FR_ACROSS_RD };
/* proto= of the NCCL algorithms: NCCL's protocol to force, or NCCL's pick */
enum { FR_PROTO_AUTO = 0, FR_PROTO_LL, FR_PROTO_LL128, FR_PROTO_SIMPLE };

typedef struct fr_rule {
    int        coll;      /* fr_coll_t */
    unsigned   mem;       /* mask of fr_mem_t */
    fr_range_t nodes, ppn, bytes;
    int        alg;       /* index into fr_algs[] */
    uint64_t   chunk;     /* chunk=SIZE parameter, 0 if absent */
    int        fanout;    /* fanout=N parameter, 0 if absent */
    int        across;    /* across=ring|rd (hier's stage between nodes), FR_ACROSS_AUTO if absent */
    int        proto;     /* proto=ll|ll128|simple (the NCCL algorithms), FR_PROTO_AUTO if absent */
    int        src;       /* fr_rule_src_t */
    int        line;      /* line (or rule number) in its source */
} fr_rule_t;

typedef struct fr_table {
    fr_rule_t *rules;
    int        n, cap;
} fr_table_t;

#endif

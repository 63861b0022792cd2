/* NCCL's tuner-plugin interface, declared here from its documented layout
 * (NCCL builds no header for it into the toolkit), so that the plugin
 * builds with or without NCCL installed. The facts it rests on, from
 * NCCL's source (src/include/plugin/tuner/tuner_v*.h, enqueue.cc):
 *
 *  - the library exports a const struct under the name ncclTunerPlugin_vN;
 *    NCCL 2.28 looks for v5, then v4, v3, v2; 2.24-2.27 for v4, v3, v2;
 *    2.22-2.23 for v3, v2; 2.21 for v2 only;
 *  - the cost table handed to getCollInfo (v3 on) is one contiguous
 *    float[numAlgo][NCCL_NUM_PROTOCOLS] cast to float **, not an array of
 *    rows; -1 marks an (algorithm, protocol) NCCL cannot run; NCCL takes
 *    the smallest entry >= 0;
 *  - a non-success return from init or getCollInfo fails the user's call,
 *    so the plugin always returns success;
 *  - nChannels is 0 on entry and 0 means "NCCL decides".
 */
#ifndef FR_NCCL_TUNER_ABI_H
#define FR_NCCL_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int frn_result_t;                  /* ncclResult_t */
enum { FRN_SUCCESS = 0, FRN_INTERNAL_ERROR = 3 };

/* ncclFunc_t: only these reach a tuner */
enum { FRN_FUNC_BROADCAST = 0, FRN_FUNC_REDUCE = 1, FRN_FUNC_ALLGATHER = 2, FRN_FUNC_REDUCESCATTER = 3,
       FRN_FUNC_ALLREDUCE = 4 };

/* algorithm rows and protocol columns of the cost table */
enum { FRN_ALGO_TREE = 0, FRN_ALGO_RING = 1, FRN_ALGO_COLLNET_DIRECT = 2, FRN_ALGO_COLLNET_CHAIN = 3,
       FRN_ALGO_NVLS = 4, FRN_ALGO_NVLS_TREE = 5, FRN_ALGO_PAT = 6, FRN_NUM_ALGOS_MAX = 7 };
enum { FRN_PROTO_LL = 0, FRN_PROTO_LL128 = 1, FRN_PROTO_SIMPLE = 2, FRN_NUM_PROTOS = 3 };
#define FRN_UNSUPPORTED (-1.0f)

/* ncclDebugLogger_t and its levels and subsystem flags */
typedef void (*frn_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);
enum { FRN_LOG_WARN = 2, FRN_LOG_INFO = 3, FRN_LOG_TRACE = 5 };
#define FRN_LOG_TUNING 0x40ul

/* v5 (NCCL 2.28): the NVLink domain summary and the model's constants,
 * which init may edit in place (the plugin leaves them alone). */
typedef struct {
    int nNvlDomains, minRanksPerNvlDomain, maxRanksPerNvlDomain;
} frn_nvl_domain_v5_t;
typedef struct frn_constants_v5 frn_constants_v5_t;  /* never dereferenced here */

typedef struct {
    const char *name;
    frn_result_t (*init)(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes, frn_logger_t log,
                         frn_nvl_domain_v5_t *nvl, frn_constants_v5_t *constants);
    frn_result_t (*getCollInfo)(void *ctx, int coll, size_t nbytes, int num_pipe_ops, float **cost_table,
                                int num_algo, int num_proto, int reg_buff, int *nchannels);
    frn_result_t (*finalize)(void *ctx);
} frn_tuner_v5_t;

/* v4 (2.24-2.27): the context comes last in init; getCollInfo as v5 */
typedef struct {
    const char *name;
    frn_result_t (*init)(size_t nranks, size_t nnodes, frn_logger_t log, void **ctx);
    frn_result_t (*getCollInfo)(void *ctx, int coll, size_t nbytes, int num_pipe_ops, float **cost_table,
                                int num_algo, int num_proto, int reg_buff, int *nchannels);
    frn_result_t (*destroy)(void *ctx);
} frn_tuner_v4_t;

/* v3 (2.22-2.23): as v4 without reg_buff */
typedef struct {
    const char *name;
    frn_result_t (*init)(size_t nranks, size_t nnodes, frn_logger_t log, void **ctx);
    frn_result_t (*getCollInfo)(void *ctx, int coll, size_t nbytes, int num_pipe_ops, float **cost_table,
                                int num_algo, int num_proto, int *nchannels);
    frn_result_t (*destroy)(void *ctx);
} frn_tuner_v3_t;

/* v2 (2.21): no cost table; the plugin names the algorithm and protocol
 * (-1 each to leave NCCL's choice) */
typedef struct {
    const char *name;
    frn_result_t (*init)(size_t nranks, size_t nnodes, frn_logger_t log, void **ctx);
    frn_result_t (*getCollInfo)(void *ctx, int coll, size_t nbytes, int collnet_support, int nvls_support,
                                int num_pipe_ops, int *algorithm, int *protocol, int *nchannels);
    frn_result_t (*destroy)(void *ctx);
} frn_tuner_v2_t;

#endif

/**
 * @file fastreduce.h
 * @brief libfastreduce: fast allreduce and broadcast for MPI programs.
 *
 * A communicator (fr_comm_t) is made from an MPI communicator with
 * fr_comm_create(). Every call on it picks an algorithm from a tuning table
 * (see docs/tuning.md) by collective, memory type, number of nodes, ranks per
 * node and message size, so that every rank makes the same choice.
 *
 * Two API styles are offered:
 *  - the fr_* API, with fr_dtype_t and fr_op_t and size_t counts;
 *  - FR_Allreduce(), FR_Bcast(), FR_Iallreduce() and FR_Ibcast(), with
 *    MPI's own signature (and FR_Alloc_mem(), FR_Free_mem(),
 *    FR_Comm_free()); they cache an fr_comm_t on the MPI communicator
 *    and hand what they cannot serve (derived datatypes and user-defined
 *    ops for allreduce, inter-communicators; for the non-blocking ones,
 *    also what MPI gives no correct way to complete) to the PMPI_ call.
 *
 * Every function returns an fr_status_t; fr_strerror() names it and
 * fr_last_error() gives the calling thread's detail message of the last
 * failure. Library code never aborts the process.
 *
 * The groups: @ref fr_version_group, @ref fr_status_group,
 * @ref fr_types_group, @ref fr_comm_group, @ref fr_coll_group,
 * @ref fr_request_group, @ref fr_device_group, @ref fr_mpi_group and @ref fr_query_group.
 */
#ifndef FASTREDUCE_H
#define FASTREDUCE_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond FR_INTERNAL */
/* What the library exports: it is built with -fvisibility=hidden, so
 * only what is marked FR_API is in its symbol table (the functions
 * declared here, and the interposer's and the NCCL plugin's entry points). */
#if defined(__GNUC__) && __GNUC__ >= 4
#define FR_API __attribute__((visibility("default")))
#else
#define FR_API
#endif
/** @endcond */

/**
 * @defgroup fr_version_group Version
 * The version this header describes, and the one of the library loaded.
 * @{
 */
#define FR_VERSION_MAJOR 0 /**< major version: changes that break the API */
#define FR_VERSION_MINOR 1 /**< minor version: additions */
#define FR_VERSION_PATCH 0 /**< patch level: fixes */
/** The library version as one number: major*10000 + minor*100 + patch. */
#define FR_VERSION (FR_VERSION_MAJOR * 10000 + FR_VERSION_MINOR * 100 + FR_VERSION_PATCH)

/**
 * The loaded library's version as a string.
 * @return a static string such as "0.1.0"
 */
FR_API const char *fr_version(void);

/**
 * The loaded library's version as one number, to compare with FR_VERSION
 * (the header a program was built with).
 * @return major*10000 + minor*100 + patch
 */
FR_API int fr_version_number(void);

/**
 * Whether the loaded library serves device buffers: built with CUDA
 * (configure --with-cuda), as Open MPI's MPIX_Query_cuda_support() tells
 * it of itself. It says nothing of whether this machine has a GPU.
 * @return 1 when built with CUDA, else 0
 */
FR_API int fr_cuda_support(void);
/** @} */

/**
 * @defgroup fr_status_group Status codes and errors
 * Every call returns one of these; fr_strerror() names it and
 * fr_last_error() gives the detail of the calling thread's last failure.
 * @{
 */

/** Status codes. FR_SUCCESS is 0; every error is positive. */
typedef enum fr_status {
    FR_SUCCESS = 0,           /**< the call completed */
    FR_ERR_INVALID_ARG,       /**< an argument is out of its domain (unknown enum, bad pointer combination) */
    FR_ERR_NULL_POINTER,      /**< a required pointer was NULL (a buffer with count > 0, an out-parameter) */
    FR_ERR_COUNT,             /**< count * datatype size overflows or exceeds what the library can address */
    FR_ERR_ROOT,              /**< root is not a rank of the communicator */
    FR_ERR_UNSUPPORTED_OP,    /**< the operation is not defined for the datatype */
    FR_ERR_BAD_COMM,          /**< NULL, destroyed, or otherwise unusable communicator */
    FR_ERR_NOT_SUPPORTED,     /**< the request cannot be served here (an algorithm declining, a device buffer without CUDA) */
    FR_ERR_NO_MEMORY,         /**< an allocation failed */
    FR_ERR_MPI,               /**< an MPI call failed */
    FR_ERR_UCX,               /**< a UCX call failed */
    FR_ERR_SYSTEM,            /**< an operating-system call failed (shared memory, files) */
    FR_ERR_NOT_INITIALIZED,   /**< MPI is not initialized, or already finalized */
    FR_ERR_CONFIG,            /**< a setting or tuning table could not be used */
    FR_ERR_MISMATCH,          /**< ranks disagree on the arguments of a collective */
    FR_ERR_TIMED_OUT,         /**< a wait exceeded its bound */
    FR_ERR_INTERNAL,          /**< a bug in libfastreduce: please report it */
    FR_ERR_CUDA,              /**< a CUDA or NCCL call failed */
    FR_ERR_PENDING,           /**< the communicator still has requests that have not completed */
    FR_STATUS_COUNT           /**< the number of status codes (not a status) */
} fr_status_t;

/**
 * A static string naming a status.
 * @param status a status code (any value)
 * @return "FR_ERR_ROOT: root out of range" and the like; a string saying
 *         the code is unknown for a value out of range
 */
FR_API const char *fr_strerror(fr_status_t status);

/**
 * The calling thread's detail message for its last failed call (the
 * backend's own message where there is one, as ncclGetLastError).
 * @return the message, or "" when none failed; valid until the thread's
 *         next failing call
 */
FR_API const char *fr_last_error(void);
/** @} */

/**
 * @defgroup fr_types_group Datatypes and operations
 * Element types and reductions (docs/datatypes.md gives the results bit
 * for bit).
 * @{
 */

/** Element types. */
typedef enum fr_dtype {
    FR_INT8 = 0,  /**< int8_t */
    FR_UINT8,     /**< uint8_t */
    FR_INT32,     /**< int32_t */
    FR_UINT32,    /**< uint32_t */
    FR_INT64,     /**< int64_t */
    FR_UINT64,    /**< uint64_t */
    FR_FLOAT16,   /**< IEEE 754 binary16 */
    FR_BFLOAT16,  /**< bfloat16: the upper 16 bits of a binary32 */
    FR_FLOAT32,   /**< IEEE 754 binary32 (float) */
    FR_FLOAT64,   /**< IEEE 754 binary64 (double) */
    FR_DTYPE_COUNT /**< the number of types (not a type) */
} fr_dtype_t;

/**
 * Reduction operations. Integer arithmetic wraps modulo 2^bits. For float16
 * and bfloat16 each binary operation gives the exact result of the two
 * operands rounded once to the type, to nearest, ties to even (see
 * docs/datatypes.md). FR_AVG is the sum divided by the number of ranks
 * (integers: C division, truncating toward zero), like ncclAvg.
 */
typedef enum fr_op {
    FR_SUM = 0,   /**< sum */
    FR_PROD,      /**< product */
    FR_MIN,       /**< minimum */
    FR_MAX,       /**< maximum */
    FR_AVG,       /**< sum over the number of ranks */
    FR_OP_COUNT   /**< the number of operations (not an operation) */
} fr_op_t;

/**
 * Size of one element.
 * @param dtype a datatype
 * @return its size in bytes, 0 for an unknown type
 */
FR_API size_t fr_dtype_size(fr_dtype_t dtype);

/**
 * Name of a datatype.
 * @param dtype a datatype
 * @return "float32" and the like, "?" when unknown
 */
FR_API const char *fr_dtype_name(fr_dtype_t dtype);

/**
 * Name of an operation.
 * @param op an operation
 * @return "sum" and the like, "?" when unknown
 */
FR_API const char *fr_op_name(fr_op_t op);
/** @} */

/**
 * @defgroup fr_comm_group Communicators
 * A communicator is made from an MPI intra-communicator, collectively.
 * @{
 */

/** Pass as sendbuf to fr_allreduce() to reduce recvbuf in place. */
#define FR_IN_PLACE ((const void *)1)

/** Opaque communicator handle. */
typedef struct fr_comm *fr_comm_t;

/**
 * Optional settings for fr_comm_create(). Zero-initialise (or use
 * FR_CONFIG_INIT) and set what you need; a NULL or empty string or a zero number
 * means "take it from the environment or the default". A field set here
 * overrides the matching FASTREDUCE_* environment variable.
 */
typedef struct fr_config {
    int         version;    /**< set to FR_VERSION */
    const char *algo;       /**< like FASTREDUCE_ALGO */
    const char *tune;       /**< like FASTREDUCE_TUNE */
    const char *tune_file;  /**< like FASTREDUCE_TUNE_FILE */
    int         node_size;  /**< like FASTREDUCE_NODE_SIZE: fake nodes of this many consecutive ranks */
    int         nccl_eager; /**< 1: make the NCCL communicator in fr_comm_create, on the rank's GPU from
                                 the topology (else at the first device-buffer call, on that buffer's GPU) */
} fr_config_t;

/** An fr_config_t with every field taken from the environment or the default. */
#define FR_CONFIG_INIT { FR_VERSION, NULL, NULL, NULL, 0, 0 }

/**
 * Create a communicator over the ranks of @p mpi_comm. Collective: every
 * rank of @p mpi_comm must call it. It duplicates @p mpi_comm, maps the
 * node's shared-memory segment, and loads the tuning table on rank 0 and
 * broadcasts it. The UCX worker and endpoints are made by the first call
 * whose algorithm needs them, on every rank in that same call; if that
 * fails, the call returns FR_ERR_UCX on every rank.
 *
 * Not bounded by FASTREDUCE_TIMEOUT (which it reads, rank 0's value
 * holding): like an MPI collective, it waits for every rank, forever if
 * one died or never calls it.
 *
 * @param mpi_comm an intra-communicator (MPI must be initialized)
 * @param config   NULL, or settings that override the environment
 * @param out      receives the handle; set to NULL on failure
 * @return FR_SUCCESS, FR_ERR_NOT_INITIALIZED, FR_ERR_NULL_POINTER,
 *         FR_ERR_BAD_COMM (inter-communicator or MPI_COMM_NULL),
 *         FR_ERR_MPI, FR_ERR_UCX, FR_ERR_SYSTEM or FR_ERR_NO_MEMORY.
 */
FR_API fr_status_t fr_comm_create(MPI_Comm mpi_comm, const fr_config_t *config, fr_comm_t *out);

/**
 * Destroy a communicator and free everything it holds. Collective over the
 * communicator's ranks: each rank's last collective on it completes
 * before any rank's resources go.
 *
 * A communicator with requests that have not completed is refused with
 * FR_ERR_PENDING (locally, before anything collective), and stays as it
 * was: complete the requests with fr_wait() or fr_test() and destroy it
 * again. Requests that completed stay valid for fr_wait() and fr_test().
 *
 * @param comm a communicator, or NULL (nothing happens); a destroyed or
 *             unknown handle is refused with FR_ERR_BAD_COMM, never read
 * @return FR_SUCCESS, FR_ERR_BAD_COMM, FR_ERR_PENDING, FR_ERR_MPI or
 *         FR_ERR_TIMED_OUT
 */
FR_API fr_status_t fr_comm_destroy(fr_comm_t comm);

/**
 * The caller's rank.
 * @param comm a communicator
 * @return the rank in @p comm, or -1 for a bad handle
 */
FR_API int fr_comm_rank(fr_comm_t comm);

/**
 * The number of ranks.
 * @param comm a communicator
 * @return the size of @p comm, or -1 for a bad handle
 */
FR_API int fr_comm_size(fr_comm_t comm);
/** @} */

/**
 * @defgroup fr_coll_group Collectives
 * Blocking allreduce and broadcast on host or device buffers: every rank
 * of the communicator calls them in the same order with matching
 * arguments.
 * @{
 */

/**
 * Combine @p count elements from every rank with @p op and give every rank
 * the result in @p recvbuf. Buffers may be NULL only when count is 0.
 *
 * @param sendbuf this rank's input, or FR_IN_PLACE to take it from
 *                @p recvbuf; it must not overlap @p recvbuf unless it is
 *                the same pointer (then treated as in place)
 * @param recvbuf receives the result
 * @param count   elements in each buffer (the same on every rank)
 * @param dtype   the element type
 * @param op      the reduction
 * @param comm    the communicator
 * @return FR_SUCCESS, FR_ERR_BAD_COMM, FR_ERR_NULL_POINTER, FR_ERR_COUNT,
 *         FR_ERR_INVALID_ARG (unknown dtype or op, partly overlapping buffers),
 *         FR_ERR_UNSUPPORTED_OP, or a transport error.
 */
FR_API fr_status_t fr_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                fr_dtype_t dtype, fr_op_t op, fr_comm_t comm);

/**
 * Copy @p count elements of @p buf on rank @p root to @p buf on every rank.
 *
 * @param buf   the data on @p root; receives it on the other ranks
 * @param count elements (the same on every rank)
 * @param dtype the element type
 * @param root  the rank whose data is sent
 * @param comm  the communicator
 * @return FR_SUCCESS, FR_ERR_BAD_COMM, FR_ERR_NULL_POINTER, FR_ERR_COUNT,
 *         FR_ERR_ROOT, FR_ERR_INVALID_ARG, or a transport error.
 */
FR_API fr_status_t fr_bcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm);
/** @} */

/**
 * @defgroup fr_mem_group Memory the node's ranks share
 * Buffers from fr_mem_alloc() live in memory that the other ranks of the
 * node can map. When every rank's buffers of an allreduce (or the root's
 * buffer of a broadcast) are such memory, the shared-memory algorithm
 * reads the peers' inputs and writes the results where they belong, with
 * no copy through the node's segment ("zero-copy"); otherwise the call
 * takes the copy path, with the same result. Each rank allocates on its
 * own (nothing collective), from any thread; a peer maps a buffer the
 * first time a collective uses it and keeps the mapping until the buffer
 * is freed. The memory is an anonymous memfd: nothing is left in /dev/shm
 * whatever happens to the process. docs/architecture.md, "Memory the
 * node shares", tells its life cycle.
 * @{
 */

/**
 * Allocate @p bytes of host memory that the node's ranks can map, aligned
 * to a page and filled with zeros. Each allocation is one memfd and one
 * open file descriptor of the process until fr_mem_free(). A buffer of
 * 2 MiB or more comes from the huge pages the site reserved, where enough
 * are free (FASTREDUCE_HUGE_PAGES).
 *
 * @param bytes bytes to allocate; 0 gives *ptr = NULL and FR_SUCCESS
 * @param ptr   receives the address
 * @return FR_SUCCESS, FR_ERR_NULL_POINTER, FR_ERR_NO_MEMORY (also past the
 *         limit of open files) or FR_ERR_SYSTEM (no memfd on this system)
 */
FR_API fr_status_t fr_mem_alloc(size_t bytes, void **ptr);

/**
 * Free memory from fr_mem_alloc(). The program must not free a buffer
 * that a request still uses. Peers that mapped it drop their mapping at
 * their next zero-copy call that maps memory of this rank, or when they
 * destroy a communicator.
 *
 * @param ptr the address fr_mem_alloc() gave, or NULL (nothing is done)
 * @return FR_SUCCESS, or FR_ERR_INVALID_ARG for an address fr_mem_alloc()
 *         did not give or that was freed already (nothing is freed)
 */
FR_API fr_status_t fr_mem_free(void *ptr);

/**
 * Whether the @p bytes from @p ptr lie inside one live buffer of
 * fr_mem_alloc() of this process.
 * @param ptr   the start of the range
 * @param bytes its length
 * @return 1 if so, else 0 (also for 0 bytes)
 */
FR_API int fr_mem_shared(const void *ptr, size_t bytes);

/**
 * Whether the calling thread's last collective (blocking, or a request it
 * completed) moved its data zero-copy; a grouped allreduce reports its
 * last fused message.
 * @return 1 if so, else 0
 */
FR_API int fr_last_zero_copy(void);
/** @} */

/**
 * @defgroup fr_request_group Non-blocking and grouped collectives
 * Calls that start a collective and return at once with a request, which
 * fr_test(), fr_wait() and fr_waitall() complete, as MPI_Iallreduce and
 * MPI_Wait do.
 *
 * The requests of one communicator run one after another in the order they
 * were started, which must be the same on every rank (as MPI requires); a
 * blocking call on the communicator runs after the requests started before
 * it. Each request runs the algorithm the tuning table gives the blocking
 * call of its arguments, with the same FASTREDUCE_TIMEOUT and
 * FASTREDUCE_CHECK.
 *
 * Who runs them (FASTREDUCE_PROGRESS, docs/environment.md): by default a
 * progress thread per communicator, made at its first request, which
 * sleeps while nothing is queued; a caller that waits for a request the
 * thread has not started runs it itself. The thread makes MPI calls only
 * where MPI was initialised with MPI_THREAD_MULTIPLE; at a lower level, a
 * request whose algorithm needs MPI (the MPI library's own collective,
 * FASTREDUCE_CHECK, a transport's first set-up) waits for the caller's next
 * fr_test(), fr_wait() or call on the communicator, and runs there.
 * With FASTREDUCE_PROGRESS=caller there is no thread: requests run inside
 * fr_test(), fr_wait() and the other calls on the communicator, in order,
 * each to its end. Then fr_test() of a request runs every request before it
 * and the request itself, and the program must complete the requests of
 * different communicators in the same order on every rank, as it would
 * call blocking collectives.
 *
 * From the start of a request until it completes, its buffers belong to
 * the library: the program must not write them (nor read a receive buffer),
 * and must not free them. The arrays of a grouped call (the pointers and
 * counts) are copied at the start and may be reused at once.
 *
 * Device buffers are served as by fr_allreduce(): on the legacy default
 * stream, and the request completes when the work issued on the GPU is
 * done (fr_test() asks a CUDA event, without blocking).
 * @{
 */

/** A request: an opaque number. A completed request's variable is set to
 *  FR_REQUEST_NULL by the call that completed it. */
typedef uint64_t fr_request_t;
/** No request: fr_test() and fr_wait() on it return FR_SUCCESS at once, as MPI_REQUEST_NULL. */
#define FR_REQUEST_NULL ((fr_request_t)0)

/**
 * Start fr_allreduce() of these arguments. Its arguments are checked now
 * (the errors fr_allreduce() gives, returned at once with *req set to
 * FR_REQUEST_NULL); what fails later, while it runs, is the request's
 * status.
 *
 * @param sendbuf, recvbuf, count, dtype, op, comm as fr_allreduce()
 * @param req  receives the request
 * @return FR_SUCCESS when started, or an error as fr_allreduce()
 */
FR_API fr_status_t fr_iallreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                                 fr_comm_t comm, fr_request_t *req);

/**
 * Start fr_bcast() of these arguments, as fr_iallreduce().
 * @param buf, count, dtype, root, comm as fr_bcast()
 * @param req  receives the request
 * @return FR_SUCCESS when started, or an error as fr_bcast()
 */
FR_API fr_status_t fr_ibcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm,
                             fr_request_t *req);

/**
 * Allreduce @p n buffers of one datatype and op in one call, as Horovod's
 * tensor fusion does: consecutive buffers are packed into a fusion buffer
 * of at most FASTREDUCE_FUSION_BYTES (docs/environment.md), each fusion
 * buffer is reduced as one message with the table's choice for its size,
 * and the results are copied out. A buffer larger than that goes alone,
 * without a copy. The result is that of one fr_allreduce() per buffer.
 * Device buffers, all on one GPU, are reduced one call per buffer, each
 * enqueued after the one before (a request's are not waited for one by
 * one: the request completes when the last is done on the GPU).
 *
 * @param sendbufs the inputs: NULL for all in place, else an array of @p n
 *                 where FR_IN_PLACE or recvbufs[i] means buffer i in place
 * @param recvbufs the @p n outputs
 * @param counts   the @p n element counts (the same on every rank; 0 allowed)
 * @param n        the number of buffers (the same on every rank; 0 allowed)
 * @param dtype, op, comm as fr_allreduce(); all buffers host or all device
 * @return as fr_allreduce()
 */
FR_API fr_status_t fr_allreduce_group(const void *const *sendbufs, void *const *recvbufs, const size_t *counts,
                                      size_t n, fr_dtype_t dtype, fr_op_t op, fr_comm_t comm);

/**
 * Start fr_allreduce_group(), as fr_iallreduce().
 * @param sendbufs, recvbufs, counts, n, dtype, op, comm as fr_allreduce_group()
 * @param req  receives the request
 * @return FR_SUCCESS when started, or an error as fr_allreduce_group()
 */
FR_API fr_status_t fr_iallreduce_group(const void *const *sendbufs, void *const *recvbufs, const size_t *counts,
                                       size_t n, fr_dtype_t dtype, fr_op_t op, fr_comm_t comm, fr_request_t *req);

/**
 * The fusion limits fr_allreduce_group() packs by on @p comm: a trainer
 * sizing its own buckets, or naming the messages its grouped calls make,
 * reads them here (they are rank 0's FASTREDUCE_FUSION_BYTES and
 * FASTREDUCE_FUSION_BUFFER_MAX, the same on every rank).
 * @param comm         a communicator
 * @param fusion_bytes receives the most bytes one fused message holds (NULL: not wanted)
 * @param buffer_max   receives the largest buffer that is packed with others (NULL: not wanted)
 * @return FR_SUCCESS, or FR_ERR_BAD_COMM
 */
FR_API fr_status_t fr_comm_fusion(fr_comm_t comm, size_t *fusion_bytes, size_t *buffer_max);

/**
 * Whether a request has completed, without waiting for it (but see
 * FASTREDUCE_PROGRESS=caller above). When it has, *done is 1, *req becomes
 * FR_REQUEST_NULL and the request's own status is returned (its detail in
 * fr_last_error()); when not, *done is 0 and FR_SUCCESS is returned.
 *
 * @param req  the request (FR_REQUEST_NULL: *done is 1 at once)
 * @param done receives 1 or 0
 * @return the request's status once done; FR_ERR_NULL_POINTER; or
 *         FR_ERR_INVALID_ARG for a handle that is not a pending request
 *         (completed already, or never made), with *done 0
 */
FR_API fr_status_t fr_test(fr_request_t *req, int *done);

/**
 * Wait for a request to complete; *req becomes FR_REQUEST_NULL.
 * @param req the request (FR_REQUEST_NULL: returns at once)
 * @return the request's status (its detail in fr_last_error()), or
 *         FR_ERR_NULL_POINTER / FR_ERR_INVALID_ARG as fr_test()
 */
FR_API fr_status_t fr_wait(fr_request_t *req);

/**
 * Wait for @p n requests; each becomes FR_REQUEST_NULL.
 * @param n        the number of requests
 * @param reqs     the requests (FR_REQUEST_NULL entries are skipped)
 * @param statuses NULL, or an array of @p n that receives each request's status
 * @return FR_SUCCESS when all succeeded, else the first failed one's status
 *         (the detail in fr_last_error())
 */
FR_API fr_status_t fr_waitall(size_t n, fr_request_t *reqs, fr_status_t *statuses);
/** @} */

/**
 * @defgroup fr_device_group Device buffers on a CUDA stream
 * @{
 */

/**
 * fr_allreduce() and fr_bcast() on a CUDA stream (@p stream is a
 * cudaStream_t; NULL is the legacy default stream).
 *
 * Buffers are told apart with the CUDA driver's cuPointerGetAttribute
 * (which creates no context): device memory goes
 * to NCCL (the table's nccl, nccl_ring or nccl_tree), or to the host-staged
 * path where NCCL cannot serve it; host, pinned and managed memory take the
 * host algorithms. The plain calls use the legacy default stream and return
 * when the result is in the buffers. These return as soon as NCCL has
 * enqueued the work on @p stream (synchronise the stream before reading the
 * result); the host-staged path waits for @p stream's earlier work and
 * returns when done, and host buffers never touch the stream.
 *
 * Every rank must pass the same kind of memory, device buffers on the GPU
 * of the communicator's first device call (one GPU per rank; ranks sharing
 * a GPU get the staged path), and not inside the caller's own
 * ncclGroupStart()/ncclGroupEnd(). An NCCL error leaves NCCL's communicator
 * unusable on every rank: the job should stop. Without CUDA built in, a
 * device buffer gives FR_ERR_NOT_SUPPORTED.
 *
 *
 * @param sendbuf, recvbuf, count, dtype, op, comm as fr_allreduce()
 * @param stream  a cudaStream_t, or NULL for the legacy default stream
 * @return as fr_allreduce() / fr_bcast(), and FR_ERR_CUDA when a CUDA or
 *         NCCL call fails.
 */
FR_API fr_status_t fr_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                                       fr_comm_t comm, void *stream);

/**
 * fr_bcast() on a CUDA stream, as fr_allreduce_stream().
 * @param buf, count, dtype, root, comm as fr_bcast()
 * @param stream a cudaStream_t, or NULL for the legacy default stream
 * @return as fr_allreduce_stream()
 */
FR_API fr_status_t fr_bcast_stream(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm, void *stream);
/** @} */

/**
 * @defgroup fr_mpi_group MPI's signature
 * Drop-in calls for MPI programs; the PMPI interposer (libfastreduce-mpi)
 * serves MPI_Allreduce, MPI_Bcast, MPI_Iallreduce and MPI_Ibcast through
 * them.
 * @{
 */

/**
 * MPI_Allreduce's signature, served by libfastreduce where it can:
 * predefined integer and floating types with MPI_SUM, MPI_PROD, MPI_MIN or
 * MPI_MAX on an intra-communicator. Anything else goes to PMPI_Allreduce().
 * The fr_comm_t is created at the first call on @p comm, cached on it as an
 * attribute, and destroyed when @p comm is freed (or at MPI_Finalize).
 * Device buffers go to PMPI_Allreduce() in a build without CUDA.
 * MPI_CHAR is served as an integer of C's char (MPI defines no reduction
 * on it, but both MPIs accept one).
 *
 * @param sendbuf, recvbuf, count, datatype, op, comm as MPI_Allreduce()
 * @return MPI_SUCCESS or an MPI error class; as with MPI's own calls, an
 *         error also goes to @p comm's error handler.
 */
FR_API int FR_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm);

/**
 * MPI_Bcast's signature, served for every datatype on an intra-communicator:
 * the count x size bytes of the type signature are broadcast, so the ranks
 * may name different datatypes of one signature, as MPI allows. A
 * predefined type without padding is sent where it lies; any other (a
 * derived type, or a pair type such as MPI_DOUBLE_INT) is packed with
 * MPI_Pack at the root and unpacked with MPI_Unpack elsewhere, through a
 * buffer of those bytes. That buffer is host memory: with device buffers
 * in a CUDA build, the ranks of one call must all name such types or all
 * predefined types without padding.
 *
 * @param buffer, count, datatype, root, comm as MPI_Bcast()
 * @return as FR_Allreduce()
 */
FR_API int FR_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);

/**
 * MPI_Iallreduce's signature: what FR_Allreduce() serves, started as a
 * request of the fr_request_group's engine on the fr_comm_t cached on
 * @p comm and handed back as an MPI generalized request, which MPI_Wait(),
 * MPI_Test(), MPI_Waitall() and the rest complete as any other request,
 * mixed with MPI's own. The requests of @p comm run in the order of the
 * calls, each before any later blocking call on it, on the communicator's
 * progress thread (or in an MPI_Waitall that waits for one not started).
 *
 * Served only where MPI's rules give a correct way to complete the request
 * without making MPI_Test() wait for other ranks; else the call goes to
 * PMPI_Iallreduce() unchanged:
 *  - with MPICH (MPIX_Grequest_start, found by configure), MPI_Test() and
 *    MPI_Wait() call a poll function that asks whether the request is
 *    done, and MPI_Waitall() a wait function: served at every thread
 *    level, except that below MPI_THREAD_MULTIPLE, where the progress
 *    thread may not call MPI, a call whose run makes MPI calls
 *    (FASTREDUCE_CHECK, the table's mpi algorithm, a first UCX set-up)
 *    is passed;
 *  - without a poll function (Open MPI), the progress thread completes the
 *    request with MPI_Grequest_complete(): served only under
 *    MPI_THREAD_MULTIPLE;
 *  - with FASTREDUCE_PROGRESS=caller (no progress thread), always passed.
 * With MPICH the poll function is what completes a served request, and
 * MPICH 4.0's MPI_Request_get_status() does not call it: a program that
 * polls with MPI_Request_get_status() sees the request done through
 * FR_Request_get_status() (the interposer's MPI_Request_get_status), which
 * polls it first.
 * The thread level and FASTREDUCE_PROGRESS are agreed over the ranks when
 * the fr_comm_t is made (served only if every rank allows it), so every
 * rank of a correct program serves or passes each call alike.
 * FASTREDUCE_STATS names which, and why.
 *
 * Arguments are checked at the start: an error goes to @p comm's error
 * handler and is returned, with no request (*request is MPI_REQUEST_NULL).
 * A served request that fails while it runs completes with the MPI error
 * class of the failure, which MPI returns from the completing call and
 * gives to the error handler it uses for generalized requests
 * (MPI_COMM_WORLD's in Open MPI and MPICH), not @p comm's; MPICH reports
 * the class as MPI_ERR_OTHER, naming the code in its message. The status
 * of a completed request has no source, tag or elements. As for any
 * non-blocking collective, the request cannot be cancelled or freed with
 * MPI_Request_free(); @p comm may be freed before a served request
 * completes (a passed one's is the MPI library's to handle).
 *
 * @param sendbuf, recvbuf, count, datatype, op, comm as MPI_Iallreduce()
 * @param request receives the request
 * @return MPI_SUCCESS or an MPI error class, as FR_Allreduce()
 */
FR_API int FR_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm, MPI_Request *request);

/**
 * MPI_Ibcast's signature: what FR_Bcast() serves (every datatype), as
 * FR_Iallreduce() serves and completes it. A datatype that does not lie
 * flat is packed at the start on the root and unpacked when the request
 * completes on the others (through a duplicate of the datatype, so that
 * the program may free its own meanwhile).
 *
 * @param buffer, count, datatype, root, comm as MPI_Ibcast()
 * @param request receives the request
 * @return as FR_Iallreduce()
 */
FR_API int FR_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request);

/**
 * MPI_Alloc_mem's signature: memory of fr_mem_alloc(), which the node's
 * ranks share, so that the collectives on it go zero-copy. Where that
 * cannot be had (size 0, FASTREDUCE_DISABLE=1, fr_mem_alloc failing) or
 * would gain nothing for the descriptor each allocation holds (under
 * 4 KiB, or with half the limit of open files held already) the MPI
 * library's MPI_Alloc_mem serves the call. FASTREDUCE_STATS counts
 * both, and the collectives that went zero-copy.
 * @param size    bytes to allocate
 * @param info    passed to the MPI library where it serves the call
 * @param baseptr receives the address (a void **, as MPI's)
 * @return MPI_SUCCESS or the MPI library's error
 */
FR_API int FR_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr);

/**
 * MPI_Free_mem's signature: frees memory of FR_Alloc_mem(), whichever
 * gave it (fr_mem_free() or the MPI library's MPI_Free_mem).
 * @param base the address FR_Alloc_mem() gave
 * @return MPI_SUCCESS, or an MPI error class for an address inside, not at
 *         the start of, memory of fr_mem_alloc()
 */
FR_API int FR_Free_mem(void *base);

/**
 * MPI_Comm_free's signature: the fr_comm_t cached on @p *comm by the calls
 * above is destroyed first (collectively: it completes the served requests
 * still pending on it), then the MPI library frees the communicator. MPI
 * makes freeing a communicator collective, so every rank destroys it at
 * the same point of its calls. Without this, the attribute's delete
 * callback destroys it, which MPICH runs only when the communicator's last
 * reference goes: inside a later MPI_Wait() of a request MPI still holds
 * on it, where the other ranks may be waiting elsewhere for this one.
 *
 * @param comm as MPI_Comm_free()
 * @return the MPI library's MPI_Comm_free() result
 */
FR_API int FR_Comm_free(MPI_Comm *comm);

/**
 * MPI_Request_get_status's signature: a request FR_Iallreduce() or
 * FR_Ibcast() served is polled first, as MPI_Test() would (MPICH's
 * MPI_Request_get_status() calls no poll function, so without this a loop
 * of it never saw the request done); then the MPI library's answers.
 * Like MPI_Request_get_status(), it neither frees the request nor sets
 * it to MPI_REQUEST_NULL.
 *
 * @param request, flag, status as MPI_Request_get_status()
 * @return the MPI library's MPI_Request_get_status() result
 */
FR_API int FR_Request_get_status(MPI_Request request, int *flag, MPI_Status *status);
/** @} */

/**
 * @defgroup fr_query_group Which algorithm a call takes
 * For benchmarks and logs: these move no data.
 * @{
 */

/**
 * The algorithm fr_allreduce() would run on host buffers.
 * @param comm, count, dtype, op as fr_allreduce()
 * @return its name (the same on every rank), or NULL for a bad handle or
 *         bad arguments (unknown type or op, a count that overflows)
 */
FR_API const char *fr_allreduce_algorithm(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op);

/**
 * The algorithm fr_bcast() would run on host buffers.
 * @param comm, count, dtype, root as fr_bcast()
 * @return its name, or NULL for a bad handle or bad arguments (a root out
 *         of range among them)
 */
FR_API const char *fr_bcast_algorithm(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root);

/**
 * The algorithm fr_allreduce() would run on device buffers: nccl,
 * nccl_ring, nccl_tree or staged. Before the communicator's first device
 * call, which sets NCCL up, it answers as if NCCL comes up.
 * @param comm, count, dtype, op as fr_allreduce()
 * @return its name, or NULL as fr_allreduce_algorithm()
 */
FR_API const char *fr_allreduce_algorithm_device(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op);

/**
 * The algorithm fr_bcast() would run on device buffers.
 * @param comm, count, dtype, root as fr_bcast()
 * @return its name, or NULL as fr_bcast_algorithm()
 */
FR_API const char *fr_bcast_algorithm_device(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root);
/** @} */

/**
 * @defgroup fr_span_group Marking the program's own work in the timeline
 * With FASTREDUCE_TIMELINE set, each rank's timeline shows every
 * collective and its phases; these calls add the program's own phases
 * (data loading, forward and backward pass, optimizer step) as bars on
 * the thread that marks them, so that the communication can be read
 * against them. Spans nest, up to 16 deep per thread; without the
 * timeline both calls return at once. They never fail.
 * @{
 */

/**
 * Start a span of the calling thread's work.
 * @param name what it is ("data", "compute"); copied (at most 47 bytes
 *             are kept), so the caller may free it at once
 */
FR_API void fr_span_begin(const char *name);

/**
 * End the calling thread's innermost open span (nothing when none is open).
 */
FR_API void fr_span_end(void);
/** @} */

#ifdef __cplusplus
}
#endif
#endif /* FASTREDUCE_H */

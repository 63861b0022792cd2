/* Logging, status propagation and the per-thread error detail. */
#ifndef FR_LOG_H
#define FR_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include "fastreduce.h"

typedef enum { FR_LOG_NONE = 0, FR_LOG_WARN, FR_LOG_INFO, FR_LOG_TRACE } fr_log_level_t;

/* Subsystems for FASTREDUCE_DEBUG_SUBSYS (a bit each). */
enum {
    FR_SUB_INIT = 1u << 0, FR_SUB_TOPO = 1u << 1, FR_SUB_TUNE = 1u << 2,
    FR_SUB_COLL = 1u << 3, FR_SUB_UCX = 1u << 4, FR_SUB_NCCL = 1u << 5,
    FR_SUB_SHM = 1u << 6, FR_SUB_ALL = 0xffffu
};

extern int fr_log_level;        /* current level, read on hot paths */
extern unsigned fr_log_subsys;  /* enabled subsystems */

/* Reads FASTREDUCE_DEBUG, _SUBSYS and _FILE once (idempotent). Returns
 * FR_SUCCESS; a bad value is reported as a warning and ignored. */
void fr_log_init(void);
/* @p pattern with %h (the host), %p (the pid) and, where @p rank >= 0,
 * %r (@p rank) replaced, into @p path (fr_log_init first: it knows the host). */
void fr_path_expand(const char *pattern, int rank, char *path, size_t len);
/* Set the rank that prefixes log lines (-1 before a communicator exists). */
void fr_log_set_rank(int rank);
void fr_log_write(fr_log_level_t lvl, unsigned subsys, const char *file, int line,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A line the user asked for (FASTREDUCE_REPORT_BINDINGS): written to the
 * log's destination whatever the level, tagged with @p tag. */
void fr_log_report(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define FR_LOG_ON(lvl, sub) (fr_log_level >= (lvl) && (fr_log_subsys & (sub)))
#define FR_WARN(sub, ...) do { if (FR_LOG_ON(FR_LOG_WARN, sub)) \
    fr_log_write(FR_LOG_WARN, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define FR_INFO(sub, ...) do { if (FR_LOG_ON(FR_LOG_INFO, sub)) \
    fr_log_write(FR_LOG_INFO, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define FR_TRACE(sub, ...) do { if (FR_LOG_ON(FR_LOG_TRACE, sub)) \
    fr_log_write(FR_LOG_TRACE, sub, __FILE__, __LINE__, __VA_ARGS__); } while (0)

/* Record the thread's error detail and return @p st; logs at TRACE. */
fr_status_t fr_error(fr_status_t st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define FR_ERROR(st, ...) fr_error((st), __FILE__, __LINE__, __VA_ARGS__)
void fr_error_clear(void);

/* Propagate a failing status, noting file:line at TRACE level. */
#define FR_CHECK(call) do { fr_status_t fr__st = (call); if (fr__st != FR_SUCCESS) { \
    FR_TRACE(FR_SUB_ALL, "%s failed: %s", #call, fr_strerror(fr__st)); return fr__st; } } while (0)
#define FR_CHECK_GOTO(call, st, label) do { (st) = (call); if ((st) != FR_SUCCESS) { \
    FR_TRACE(FR_SUB_ALL, "%s failed: %s", #call, fr_strerror(st)); goto label; } } while (0)

#endif

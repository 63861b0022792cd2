/* Status codes, the per-thread error detail, and version strings. */
#include <stdio.h>
#include <string.h>
#include "log.h"
#include "settings.h"

static const char *const status_text[FR_STATUS_COUNT] = {
    [FR_SUCCESS]             = "FR_SUCCESS: no error",
    [FR_ERR_INVALID_ARG]     = "FR_ERR_INVALID_ARG: invalid argument",
    [FR_ERR_NULL_POINTER]    = "FR_ERR_NULL_POINTER: required pointer is NULL",
    [FR_ERR_COUNT]           = "FR_ERR_COUNT: count too large",
    [FR_ERR_ROOT]            = "FR_ERR_ROOT: root out of range",
    [FR_ERR_UNSUPPORTED_OP]  = "FR_ERR_UNSUPPORTED_OP: operation not defined for the datatype",
    [FR_ERR_BAD_COMM]        = "FR_ERR_BAD_COMM: invalid communicator",
    [FR_ERR_NOT_SUPPORTED]   = "FR_ERR_NOT_SUPPORTED: not supported here",
    [FR_ERR_NO_MEMORY]       = "FR_ERR_NO_MEMORY: out of memory",
    [FR_ERR_MPI]             = "FR_ERR_MPI: MPI call failed",
    [FR_ERR_UCX]             = "FR_ERR_UCX: UCX call failed",
    [FR_ERR_SYSTEM]          = "FR_ERR_SYSTEM: system call failed",
    [FR_ERR_NOT_INITIALIZED] = "FR_ERR_NOT_INITIALIZED: MPI not initialized or already finalized",
    [FR_ERR_CONFIG]          = "FR_ERR_CONFIG: bad setting or tuning table",
    [FR_ERR_MISMATCH]        = "FR_ERR_MISMATCH: ranks disagree on the call's arguments",
    [FR_ERR_TIMED_OUT]       = "FR_ERR_TIMED_OUT: wait timed out",
    [FR_ERR_INTERNAL]        = "FR_ERR_INTERNAL: internal error (please report)",
    [FR_ERR_CUDA]            = "FR_ERR_CUDA: CUDA or NCCL call failed",
    [FR_ERR_PENDING]         = "FR_ERR_PENDING: requests still pending",
};

const char *fr_strerror(fr_status_t st)
{
    if ((int)st < 0 || st >= FR_STATUS_COUNT || !status_text[st])
        return "FR_ERR_UNKNOWN: unknown status code";
    return status_text[st];
}

static __thread char last_error[512];

const char *fr_last_error(void) { return last_error; }

void fr_error_clear(void) { last_error[0] = '\0'; }

fr_status_t fr_error(fr_status_t st, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    FR_TRACE(FR_SUB_ALL, "%s:%d: %s (%s)", file, line, last_error, fr_strerror(st));
    return st;
}

#define FR_STR2(x) #x
#define FR_STR(x) FR_STR2(x)
const char *fr_version(void)
{
    return FR_STR(FR_VERSION_MAJOR) "." FR_STR(FR_VERSION_MINOR) "." FR_STR(FR_VERSION_PATCH);
}

int fr_version_number(void)
{
    return FR_VERSION;
}

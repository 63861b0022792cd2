/* Bulk copies for the shared-memory algorithms. glibc's memcpy uses
 * `rep movsb` for mid sizes, which on some virtual machines runs many
 * times slower than a plain vector loop, so the hot copies use these. */
#ifndef FR_COPY_H
#define FR_COPY_H

#include <stddef.h>

typedef void (*fr_copy_fn)(void *, const void *, size_t);

/* Copy @p n bytes (no overlap) with ordinary stores: the data stays in cache
 * for a reader that comes soon. */
void fr_copy(void *dst, const void *src, size_t n);
/* Same with streaming (non-temporal) stores where the CPU has them: for
 * large results nobody reads soon; falls back to fr_copy elsewhere. */
void fr_copy_stream(void *dst, const void *src, size_t n);

/* The least result, in bytes, that a rank whose share of the machine's
 * last-level caches is @p llc_share bytes (all of the caches' bytes over
 * the communicator's ranks on the machine, faked nodes or not) writes with
 * streaming stores: that share, 1 MiB at least,
 * or FR_STREAM_UNKNOWN when the share is 0 (unknown). A smaller result
 * stays in the cache, where the next call, or the program reading it,
 * finds it. */
#define FR_STREAM_FLOOR   ((size_t)1 << 20)
#define FR_STREAM_UNKNOWN ((size_t)8 << 20)
size_t fr_stream_min(size_t llc_share);

/* The copy for a result of @p bytes, when results of @p stream_min bytes
 * or more are streamed. */
static inline fr_copy_fn fr_copy_for(size_t bytes, size_t stream_min)
{
    return bytes >= stream_min ? fr_copy_stream : fr_copy;
}

#endif

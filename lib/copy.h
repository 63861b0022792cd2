/* Bulk copies for the shared-memory algorithms. glibc's memcpy uses
 * `rep movsb` for mid sizes, which on some virtual machines runs several
 * times slower than a plain vector loop (measured: 1.5 GB/s against 44 GB/s
 * at 32 KiB), so the hot copies use these instead. */
#ifndef FR_COPY_H
#define FR_COPY_H

#include <stddef.h>

/* Results of at least this many bytes are written with streaming stores. */
#define FR_STREAM_MIN (8u << 20)

/* Copy @p n bytes (no overlap) with ordinary stores: the data stays in cache
 * for a reader that comes soon. */
void fr_copy(void *dst, const void *src, size_t n);
/* Same with streaming (non-temporal) stores where the CPU has them: for
 * large results nobody reads soon; falls back to fr_copy elsewhere. */
void fr_copy_stream(void *dst, const void *src, size_t n);

/* The copy for the result of an operation of @p bytes in all. */
static inline void (*fr_copy_for(size_t bytes))(void *, const void *, size_t)
{
    return bytes >= FR_STREAM_MIN ? fr_copy_stream : fr_copy;
}

#endif

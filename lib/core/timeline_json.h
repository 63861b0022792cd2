/* The timeline's records and their JSON (lib/core/timeline_json.c): what
 * a caller hands the writer thread (lib/core/timeline.c), and the events
 * that thread writes for it. */
#ifndef FR_TIMELINE_JSON_H
#define FR_TIMELINE_JSON_H

#include <stdio.h>
#include "timeline.h"

/* One call or span, copied out of the caller's frame: the strings it
 * points to are static but for the two copied here. */
typedef struct fr_tl_rec {
    int             span;       /* 1: a span of the program's (name), 0: a call (c, rec) */
    long            tid;
    char            comm[32], name[48];
    fr_tl_call_t    c;
    fr_trace_call_t rec;        /* (rec.ph: only rec.nph of them are copied) */
} fr_tl_rec_t;

/* The bytes of @p r worth copying: all but its unused phases. */
size_t fr_tl_rec_size(const fr_tl_rec_t *r);
/* Write @p r's events to @p f for rank @p rank. */
void fr_tl_write(FILE *f, int rank, const fr_tl_rec_t *r);
/* @p in as the inside of a JSON string: the characters JSON would need
 * escaped replaced by '_', bytes that are not UTF-8 by U+FFFD, and cut on
 * a character's boundary to fit @p len (a file with half a character in
 * it is not JSON that readers accept). */
void fr_tl_json_safe(const char *in, char *out, size_t len);

#endif

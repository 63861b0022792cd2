/* The per-call timing record (trace.h). */
#include <stddef.h>
#include <string.h>
#include "trace.h"

int fr_trace_enabled;
__thread fr_trace_call_t *fr_trace_cur;

const char *fr_phase_name(fr_phase_t k)
{
    static const char *const n[FR_PH_COUNT] = {"queued", "arrive", "wait", "reduce", "move"};
    return (unsigned)k < FR_PH_COUNT ? n[k] : "?";
}

void fr_trace_phase(fr_phase_t kind, uint64_t t0, uint64_t t1)
{
    fr_trace_call_t *r = fr_trace_cur;
    if (!r || t1 < t0) return;
    if (kind == FR_PH_WAIT && !r->ns[FR_PH_ARRIVE]) kind = FR_PH_ARRIVE;
    r->ns[kind] += t1 - t0 + (kind == FR_PH_ARRIVE && t1 == t0);  /* (an arrival is never 0 ns) */
    if (!r->keep) return;
    /* Pieces of one kind that follow each other closely are one phase: a
     * reduction done in cache-sized pieces is one bar, not thousands. */
    if (r->nph && r->ph[r->nph - 1].kind == kind && t0 - r->ph[r->nph - 1].t1 < 1000) {
        r->ph[r->nph - 1].t1 = t1;
        return;
    }
    if (r->nph == FR_TRACE_MAXPH) {
        r->dropped++;
        return;
    }
    r->ph[r->nph].kind = (uint8_t)kind;
    r->ph[r->nph].t0 = t0;
    r->ph[r->nph].t1 = t1;
    r->nph++;
}

fr_trace_call_t *fr_trace_open(fr_trace_call_t *rec, uint64_t t_issue, int keep)
{
    fr_trace_call_t *prev = fr_trace_cur;
    memset(rec, 0, offsetof(fr_trace_call_t, ph));
    rec->t_start = fr_now_ns();
    rec->t_issue = t_issue && t_issue < rec->t_start ? t_issue : rec->t_start;
    rec->ns[FR_PH_QUEUED] = rec->t_start - rec->t_issue;
    rec->keep = keep;
    fr_trace_cur = rec;
    return prev;
}

void fr_trace_close(fr_trace_call_t *rec, fr_trace_call_t *prev)
{
    rec->t_end = fr_now_ns();
    uint64_t run = rec->t_end - rec->t_start, other = 0;
    for (int k = FR_PH_ARRIVE; k < FR_PH_MOVE; k++) other += rec->ns[k];
    rec->ns[FR_PH_MOVE] = run > other ? run - other : 0;
    fr_trace_cur = prev;
}

/* Timing of the running collective for the timeline, the metrics and the
 * late-rank report (lib/api/observe.c): a record per call, which the waits
 * and the reduction kernels of the thread that runs the call fill in.
 * While nothing observes calls every hook costs one load and a branch. */
#ifndef FR_TRACE_H
#define FR_TRACE_H

#include <stdint.h>
#include <time.h>

/* A call's phases. The first wait of a call is its arrival (the peers it
 * needs first have come), later ones are waits inside the algorithm; the
 * time in no other phase is data movement. */
typedef enum { FR_PH_QUEUED = 0, FR_PH_ARRIVE, FR_PH_WAIT, FR_PH_REDUCE, FR_PH_MOVE, FR_PH_COUNT } fr_phase_t;

/* Phases kept per call for the timeline; later ones count in ns[] only. */
#define FR_TRACE_MAXPH 48

typedef struct fr_trace_call {
    uint64_t t_issue, t_start, t_end;  /* CLOCK_MONOTONIC ns; t_issue < t_start when it was queued */
    uint64_t ns[FR_PH_COUNT];          /* the time in each phase (FR_PH_MOVE: set by fr_trace_close) */
    int      keep;                     /* keep the phases themselves (the timeline is on) */
    int      nph, dropped;             /* phases kept, phases beyond FR_TRACE_MAXPH */
    struct { uint8_t kind; uint64_t t0, t1; } ph[FR_TRACE_MAXPH];
} fr_trace_call_t;

/* Nonzero once something observes calls (set before the first call that
 * is observed, never cleared). */
extern int fr_trace_enabled;
/* The call this thread runs now, NULL when none is observed. */
extern __thread fr_trace_call_t *fr_trace_cur;

static inline uint64_t fr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The CLOCK_REALTIME time @p seconds from now, for pthread_cond_timedwait
 * (the library's writer threads wait on it). */
static inline struct timespec fr_realtime_after(double seconds)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    double s = (double)t.tv_sec + t.tv_nsec * 1e-9 + seconds;
    t.tv_sec = (time_t)s;
    t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
    return t;
}

/* Add [t0, t1) of @p kind to this thread's call (FR_PH_WAIT: the call's
 * first wait becomes FR_PH_ARRIVE). */
void fr_trace_phase(fr_phase_t kind, uint64_t t0, uint64_t t1);

/* The start of a phase: the clock when this thread's call is observed,
 * else 0; fr_trace_end closes it. */
static inline uint64_t fr_trace_begin(void)
{
    return __builtin_expect(__atomic_load_n(&fr_trace_enabled, __ATOMIC_RELAXED), 0) && fr_trace_cur ? fr_now_ns() : 0;
}
/* The same for a reduction, which only the timeline shows: the metrics
 * need the waits alone, so that they cost a call less. */
static inline uint64_t fr_trace_begin_detail(void)
{
    return __builtin_expect(__atomic_load_n(&fr_trace_enabled, __ATOMIC_RELAXED), 0) && fr_trace_cur &&
                   fr_trace_cur->keep ? fr_now_ns() : 0;
}
static inline void fr_trace_end(fr_phase_t kind, uint64_t t0)
{
    if (__builtin_expect(t0 != 0, 0)) fr_trace_phase(kind, t0, fr_now_ns());
}

/* Start observing a call on this thread (@p keep: with its phases); the
 * previous record, which fr_trace_close gives back, is returned. */
fr_trace_call_t *fr_trace_open(fr_trace_call_t *rec, uint64_t t_issue, int keep);
/* End it: t_end, ns[FR_PH_MOVE], and this thread's record back to @p prev. */
void fr_trace_close(fr_trace_call_t *rec, fr_trace_call_t *prev);

/* The name of phase @p k ("queued", "arrive", ...). */
const char *fr_phase_name(fr_phase_t k);

#endif

/* The timeline's events in Chrome's trace-event JSON (timeline_json.h). */
#include <stddef.h>
#include <stdio.h>
#include "timeline_json.h"

/* Phases shorter than this between two others are not written as data
 * movement of their own: they are the bookkeeping between two steps. */
#define MIN_MOVE_NS 1000

size_t fr_tl_rec_size(const fr_tl_rec_t *r)
{
    return offsetof(fr_tl_rec_t, rec.ph) + (size_t)r->rec.nph * sizeof r->rec.ph[0];
}

void fr_tl_json_safe(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = in; *p && o + 1 < len; p++)
        out[o++] = ((unsigned char)*p >= 0x20 && *p != '"' && *p != '\\') ? *p : '_';
    out[o] = '\0';
}

/* Microseconds with three decimals, from integer nanoseconds: printing
 * integers is several times faster than printing doubles. */
#define US(ns) (unsigned long long)((ns) / 1000u), (unsigned)((ns) % 1000u)

/* One complete event; @p args is the inside of its args object. */
static void event(FILE *f, int rank, const char *name, const char *cat, long tid, uint64_t t0, uint64_t t1,
                  const char *args)
{
    fprintf(f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,\"ts\":%llu.%03u,"
            "\"dur\":%llu.%03u,\"args\":{%s}},\n", name, cat, rank, tid, US(t0), US(t1 - t0), args);
}

/* The time a request waited in its queue: an async event (a track of its
 * own), since requests queue while the thread that runs them runs others,
 * and complete events on one thread must nest. */
static void queued(FILE *f, int rank, const fr_trace_call_t *rec, long tid, const char *args)
{
    static unsigned long id;
    id++;
    fprintf(f, "{\"name\":\"queued\",\"cat\":\"queued\",\"ph\":\"b\",\"id\":%lu,\"pid\":%d,\"tid\":%ld,"
            "\"ts\":%llu.%03u,\"args\":{%s}},\n", id, rank, tid, US(rec->t_issue), args);
    fprintf(f, "{\"name\":\"queued\",\"cat\":\"queued\",\"ph\":\"e\",\"id\":%lu,\"pid\":%d,\"tid\":%ld,"
            "\"ts\":%llu.%03u},\n", id, rank, tid, US(rec->t_start));
}

/* The phases of @p rec inside its call, with data movement between them. */
static void phases(FILE *f, int rank, const fr_trace_call_t *rec, long tid, const char *args)
{
    uint64_t at = rec->t_start;
    for (int i = 0; i <= rec->nph; i++) {
        uint64_t t0 = i < rec->nph ? rec->ph[i].t0 : rec->t_end;
        if (t0 > at && (t0 - at >= MIN_MOVE_NS || i == rec->nph || at == rec->t_start))
            event(f, rank, "move", "phase", tid, at, t0, args);
        if (i == rec->nph) break;
        uint64_t t1 = rec->ph[i].t1 > rec->t_end ? rec->t_end : rec->ph[i].t1;
        if (t1 > t0 || rec->ph[i].kind == FR_PH_ARRIVE)
            event(f, rank, fr_phase_name((fr_phase_t)rec->ph[i].kind), "phase", tid, t0, t1 > t0 ? t1 : t0, args);
        if (t1 > at) at = t1;
    }
}

void fr_tl_write(FILE *f, int rank, const fr_tl_rec_t *r)
{
    const fr_trace_call_t *rec = &r->rec;
    if (r->span) {
        event(f, rank, r->name, "span", r->tid, rec->t_start, rec->t_end, "");
        return;
    }
    const fr_tl_call_t *c = &r->c;
    char args[640], ids[96];
    snprintf(ids, sizeof ids, "\"comm\":\"%s\",\"call\":%lu", r->comm, (unsigned long)c->seq);
    snprintf(args, sizeof args, "%s,\"bytes\":%zu,\"count\":%zu,\"buffers\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
             "\"root\":%d,\"algorithm\":\"%s\",\"memory\":\"%s\",\"zero_copy\":%s,\"status\":\"%s\","
             "\"queued_us\":%llu.%03u,\"arrive_us\":%llu.%03u,\"wait_us\":%llu.%03u,\"reduce_us\":%llu.%03u,"
             "\"move_us\":%llu.%03u,\"phases_dropped\":%d", ids, c->bytes, c->count, c->nbuf, c->dtype, c->op,
             c->root, c->algorithm, c->memory, c->zcopy ? "true" : "false", c->status, US(rec->ns[FR_PH_QUEUED]),
             US(rec->ns[FR_PH_ARRIVE]), US(rec->ns[FR_PH_WAIT]), US(rec->ns[FR_PH_REDUCE]), US(rec->ns[FR_PH_MOVE]),
             rec->dropped);
    event(f, rank, c->name, c->seq ? "collective" : "group", r->tid, rec->t_start, rec->t_end, args);
    if (rec->t_start > rec->t_issue) queued(f, rank, rec, r->tid, ids);
    if (c->seq) phases(f, rank, rec, r->tid, ids);
}

/* The timeline's events in Chrome's trace-event JSON (timeline_json.h).
 * Events are put together by hand in a buffer and written with one fwrite:
 * printf's parsing of its format costs several times more, and a program
 * that makes millions of small calls keeps the writer busy. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "timeline_json.h"

/* Phases shorter than this between two others are not written as data
 * movement of their own: they are the bookkeeping between two steps. */
#define MIN_MOVE_NS 1000

size_t fr_tl_rec_size(const fr_tl_rec_t *r)
{
    return offsetof(fr_tl_rec_t, rec.ph) + (size_t)r->rec.nph * sizeof r->rec.ph[0];
}

/* The length of the well-formed UTF-8 character at @p s (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF), or 0. */
static size_t utf8_char(const unsigned char *s)
{
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
             : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    unsigned char lo = s[0] == 0xe0 ? 0xa0 : s[0] == 0xf0 ? 0x90 : 0x80;
    unsigned char hi = s[0] == 0xed ? 0x9f : s[0] == 0xf4 ? 0x8f : 0xbf;
    if (n && (s[1] < lo || s[1] > hi)) return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

void fr_tl_json_safe(const char *in, char *out, size_t len)
{
    static const char bad[] = "\xef\xbf\xbd";   /* U+FFFD, for a byte that starts no character */
    const unsigned char *p = (const unsigned char *)in;
    size_t o = 0;
    while (*p && o + 1 < len) {
        size_t n = *p < 0x80 ? 1 : utf8_char(p);
        const char *c = n ? (const char *)p : bad;
        size_t w = n ? n : sizeof bad - 1;
        /* (a character that does not fit is left out whole: half of one makes the file unreadable) */
        if (o + w >= len) break;
        if (n == 1 && (*p < 0x20 || *p == '"' || *p == '\\')) out[o] = '_';
        else memcpy(out + o, c, w);
        o += w;
        p += n ? n : 1;
    }
    out[o] = '\0';
}

/* A buffer being filled; what does not fit is cut (the buffers are sized
 * for the longest event). */
typedef struct { char *p, *end; } out_t;

static void str(out_t *o, const char *s)
{
    size_t n = strlen(s);
    if (n > (size_t)(o->end - o->p)) n = (size_t)(o->end - o->p);
    memcpy(o->p, s, n);
    o->p += n;
}

static void num(out_t *o, unsigned long long v)
{
    char d[24];
    int n = 0;
    do d[n++] = (char)('0' + v % 10); while ((v /= 10) && n < 24);
    while (n && o->p < o->end) *o->p++ = d[--n];
}

static void inum(out_t *o, long long v)
{
    if (v < 0 && o->p < o->end) {
        *o->p++ = '-';
        v = -v;
    }
    num(o, (unsigned long long)v);
}

/* Microseconds with three decimals, from nanoseconds. */
static void usec(out_t *o, uint64_t ns)
{
    num(o, ns / 1000u);
    unsigned f = (unsigned)(ns % 1000u);
    if (o->end - o->p < 4) return;
    *o->p++ = '.';
    *o->p++ = (char)('0' + f / 100);
    *o->p++ = (char)('0' + f / 10 % 10);
    *o->p++ = (char)('0' + f % 10);
}

/* The start of an event: name, category, kind, rank and thread. */
static void head(out_t *o, const char *name, const char *cat, const char *ph, int rank, long tid)
{
    str(o, "{\"name\":\"");
    str(o, name);
    str(o, "\",\"cat\":\"");
    str(o, cat);
    str(o, "\",\"ph\":\"");
    str(o, ph);
    str(o, "\",\"pid\":");
    inum(o, rank);
    str(o, ",\"tid\":");
    inum(o, tid);
}

/* One complete event; @p args is the inside of its args object. */
static void event(FILE *f, int rank, const char *name, const char *cat, long tid, uint64_t t0, uint64_t t1,
                  const char *args)
{
    char buf[1024];
    out_t o = {buf, buf + sizeof buf};
    head(&o, name, cat, "X", rank, tid);
    str(&o, ",\"ts\":");
    usec(&o, t0);
    str(&o, ",\"dur\":");
    usec(&o, t1 - t0);
    str(&o, ",\"args\":{");
    str(&o, args);
    str(&o, "}},\n");
    fwrite(buf, 1, (size_t)(o.p - buf), f);
}

/* The time a request waited in its queue: an async event (a track of its
 * own), since requests queue while the thread that runs them runs others,
 * and complete events on one thread must nest. */
static void queued(FILE *f, int rank, const fr_trace_call_t *rec, long tid, const char *args)
{
    static unsigned long id;
    char buf[512];
    out_t o = {buf, buf + sizeof buf};
    id++;
    head(&o, "queued", "queued", "b", rank, tid);
    str(&o, ",\"id\":");
    num(&o, id);
    str(&o, ",\"ts\":");
    usec(&o, rec->t_issue);
    str(&o, ",\"args\":{");
    str(&o, args);
    str(&o, "}},\n");
    head(&o, "queued", "queued", "e", rank, tid);
    str(&o, ",\"id\":");
    num(&o, id);
    str(&o, ",\"ts\":");
    usec(&o, rec->t_start);
    str(&o, "},\n");
    fwrite(buf, 1, (size_t)(o.p - buf), f);
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

/* A call's args: what it was and the time in each phase. */
static void call_args(out_t *o, const fr_tl_rec_t *r, const char *ids)
{
    const fr_tl_call_t *c = &r->c;
    const fr_trace_call_t *rec = &r->rec;
    static const char *const key[FR_PH_COUNT] = {",\"queued_us\":", ",\"arrive_us\":", ",\"wait_us\":",
                                                 ",\"reduce_us\":", ",\"move_us\":"};
    str(o, ids);
    str(o, ",\"bytes\":");
    num(o, c->bytes);
    str(o, ",\"count\":");
    num(o, c->count);
    str(o, ",\"buffers\":");
    num(o, c->nbuf);
    str(o, ",\"dtype\":\"");
    str(o, c->dtype);
    str(o, "\",\"op\":\"");
    str(o, c->op);
    str(o, "\",\"root\":");
    inum(o, c->root);
    str(o, ",\"algorithm\":\"");
    str(o, c->algorithm);
    str(o, "\",\"memory\":\"");
    str(o, c->memory);
    str(o, c->zcopy ? "\",\"zero_copy\":true" : "\",\"zero_copy\":false");
    str(o, ",\"status\":\"");
    str(o, c->status);
    str(o, "\"");
    for (int k = 0; k < FR_PH_COUNT; k++) {
        str(o, key[k]);
        usec(o, rec->ns[k]);
    }
    str(o, ",\"phases_dropped\":");
    num(o, (unsigned long long)rec->dropped);
    *(o->p < o->end ? o->p : o->end - 1) = '\0';
}

void fr_tl_write(FILE *f, int rank, const fr_tl_rec_t *r)
{
    const fr_trace_call_t *rec = &r->rec;
    if (r->span) {
        event(f, rank, r->name, "span", r->tid, rec->t_start, rec->t_end, "");
        return;
    }
    char args[768], ids[96];
    out_t o = {ids, ids + sizeof ids - 1};
    str(&o, "\"comm\":\"");
    str(&o, r->comm);
    str(&o, "\",\"call\":");
    num(&o, r->c.seq);
    *o.p = '\0';
    o = (out_t){args, args + sizeof args};
    call_args(&o, r, ids);
    event(f, rank, r->c.name, r->c.seq ? "collective" : "group", r->tid, rec->t_start, rec->t_end, args);
    if (rec->t_start > rec->t_issue) queued(f, rank, rec, r->tid, ids);
    if (r->c.seq) phases(f, rank, rec, r->tid, ids);
}

/* The selection table: printing rules in the file format, so that
 * parsing what is printed gives the same table (docs/tuning.md). */
#include <stdio.h>
#include <string.h>

#include "tune.h"
#include "registry.h"

static const char *const src_names[FR_SRC_COUNT] = {
    "FASTREDUCE_ALGO", "FASTREDUCE_TUNE", "FASTREDUCE_TUNE_FILE", "default"
};

static const char *fmt_value(char *buf, size_t size, uint64_t v, int is_size)
{
    static const char sfx[] = "KMGTPE";
    int k = 0;
    if (v == FR_INF)
        return snprintf(buf, size, "inf"), buf;
    if (is_size && v)
        while (k < 6 && (v & 1023u) == 0) {
            v >>= 10;
            k++;
        }
    if (k)
        snprintf(buf, size, "%llu%c", (unsigned long long)v, sfx[k - 1]);
    else
        snprintf(buf, size, "%llu", (unsigned long long)v);
    return buf;
}

static const char *fmt_range(char *buf, size_t size, const fr_range_t *r, int is_size)
{
    char a[32], b[32];
    if (r->lo == 0 && r->hi == FR_INF)
        snprintf(buf, size, "*");
    else if (r->lo == r->hi)
        snprintf(buf, size, "%s", fmt_value(a, sizeof a, r->lo, is_size));
    else
        snprintf(buf, size, "%s-%s", fmt_value(a, sizeof a, r->lo, is_size),
                 fmt_value(b, sizeof b, r->hi, is_size));
    return buf;
}

char *fr_params_format(uint64_t chunk, int fanout, int across, int proto, char *buf, size_t len)
{
    char v[32];
    size_t n = 0;
    if (!buf || len == 0) return buf;
    buf[0] = '\0';
#define ADD(...) (n += (size_t)snprintf(buf + (n < len ? n : len - 1), n < len ? len - n : 1, __VA_ARGS__))
    if (chunk) ADD(" chunk=%s", fmt_value(v, sizeof v, chunk, 1));
    if (fanout) ADD(" fanout=%d", fanout);
    if (across >= 1 && across <= 2) ADD(" across=%s", fr_across_words[across - 1]);
    if (proto >= 1 && proto <= 3) ADD(" proto=%s", fr_proto_words[proto - 1]);
#undef ADD
    return buf;
}

char *fr_rule_format(const fr_rule_t *r, char *buf, size_t len)
{
    char nodes[72], ppn[72], bytes[72], params[96];
    if (!buf || len == 0)
        return buf;
    if (!r) {
        buf[0] = '\0';
        return buf;
    }
    const char *coll = r->coll >= 0 && r->coll < FR_COLL_COUNT ? fr_coll_name((fr_coll_t)r->coll) : "?";
    const char *mem = (r->mem & FR_MEM_ALL) == FR_MEM_ALL ? "*" :
                      (r->mem & FR_MEM_ALL) == FR_MEM_HOST ? "host" :
                      (r->mem & FR_MEM_ALL) == FR_MEM_CUDA ? "cuda" : "?";
    const char *alg = r->alg >= 0 && r->alg < fr_nalgs && fr_algs[r->alg] && fr_algs[r->alg]->name ?
                      fr_algs[r->alg]->name : "?";
    snprintf(buf, len, "%-12s %-6s %-6s %-6s %-12s %s%s", coll, mem,
             fmt_range(nodes, sizeof nodes, &r->nodes, 0), fmt_range(ppn, sizeof ppn, &r->ppn, 0),
             fmt_range(bytes, sizeof bytes, &r->bytes, 1), alg,
             fr_params_format(r->chunk, r->fanout, r->across, r->proto, params, sizeof params));
    return buf;
}

void fr_table_print(const fr_table_t *t, FILE *f)
{
    char line[512];
    if (!f)
        return;
    fprintf(f, "# fastreduce tuning table v1\n");
    fprintf(f, "# %-10s %-6s %-6s %-6s %-12s %s\n", "collective", "memory", "nodes", "ppn", "bytes",
            "algorithm [key=value ...]");
    for (int i = 0; t && i < t->n; i++)
        fprintf(f, "%s  # %s:%d\n", fr_rule_format(&t->rules[i], line, sizeof line),
                fr_rule_src_name(t->rules[i].src), t->rules[i].line);
}

const char *fr_rule_src_name(int src)
{
    return src >= 0 && src < FR_SRC_COUNT ? src_names[src] : "?";
}

/* The one table of FASTREDUCE_* settings, their parsers and their loader. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "settings.h"
#include "log.h"
#include "units.h"

#define F(field) offsetof(fr_settings_t, field)

/* In the order of fr_log_level_t, fr_bind_mode_t and fr_nccl_tuner_mode_t:
 * an enum field holds its word's index. */
static const char *const debug_words[] = {"NONE", "WARN", "INFO", "TRACE", NULL};
const char *const fr_bind_words[] = {"auto", "none", "core", "numa", "gpu", NULL};
static const char *const nccl_tuner_words[] = {"auto", "0", "1", NULL};
static const char *const progress_words[] = {"thread", "caller", NULL};
static const char *const cma_words[] = {"0", "1", "always", NULL};

const fr_setting_t fr_settings[FR_S_COUNT] = {
    [FR_S_ALGO] = {"FASTREDUCE_ALGO", "", FR_SET_STRING, F(algo), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "force an algorithm: NAME, or allreduce=NAME,bcast=NAME (strongest override)"},
    [FR_S_TUNE] = {"FASTREDUCE_TUNE", "", FR_SET_STRING, F(tune), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "inline tuning rules, ';'-separated, in the table format of docs/tuning.md"},
    [FR_S_TUNE_FILE] = {"FASTREDUCE_TUNE_FILE", "", FR_SET_STRING, F(tune_file), NULL, 0, FR_WHEN_CREATE,
     FR_SUB_INIT, "a tuning table file (docs/tuning.md)"},
    [FR_S_TUNE_PATH] = {"FASTREDUCE_TUNE_PATH", FR_TUNE_DIR, FR_SET_STRING, F(tune_path), NULL, FR_SETF_EMPTY,
     FR_WHEN_CREATE, FR_SUB_INIT,
     "':'-separated folders searched for a *.tune table whose fingerprint and shape match the job, when "
     "FASTREDUCE_TUNE_FILE is unset; empty: no search"},
    [FR_S_DEBUG] = {"FASTREDUCE_DEBUG", "WARN", FR_SET_ENUM, F(debug), debug_words, FR_SETF_NOCASE, FR_WHEN_LOG,
     FR_SUB_INIT, "log level: NONE, WARN, INFO (one line per call on rank 0), TRACE"},
    [FR_S_DEBUG_SUBSYS] = {"FASTREDUCE_DEBUG_SUBSYS", "ALL", FR_SET_STRING, F(debug_subsys), NULL, 0, FR_WHEN_LOG,
     FR_SUB_INIT, "subsystems to log: INIT,TOPO,TUNE,COLL,UCX,NCCL,SHM,ALL; a leading ^ excludes"},
    [FR_S_DEBUG_FILE] = {"FASTREDUCE_DEBUG_FILE", "", FR_SET_STRING, F(debug_file), NULL, 0, FR_WHEN_LOG,
     FR_SUB_INIT, "log to this file instead of stderr; %h is the host, %p the pid"},
    [FR_S_NODE_SIZE] = {"FASTREDUCE_NODE_SIZE", "0", FR_SET_INT, F(node_size), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "fake nodes of this many consecutive ranks (testing multi-node shapes on one host); 0 = real nodes"},
    [FR_S_HOSTID] = {"FASTREDUCE_HOSTID", "", FR_SET_STRING, F(hostid), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "per-rank node name overriding the real host (like NCCL_HOSTID); ranks with equal values share a node"},
    [FR_S_SPIN] = {"FASTREDUCE_SPIN", "2000", FR_SET_INT, F(spin), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "polls of a waiting rank before it starts yielding its core (sched_yield)"},
    [FR_S_BIND] = {"FASTREDUCE_BIND", "auto", FR_SET_ENUM, F(bind), fr_bind_words, 0, FR_WHEN_CREATE, FR_SUB_TOPO,
     "bind each rank: none, core (its share of a NUMA node's cores), numa, gpu (cores near its GPU), "
     "auto (keep a launcher's binding; else gpu when the node has GPUs, else none)"},
    [FR_S_REPORT_BINDINGS] = {"FASTREDUCE_REPORT_BINDINGS", "0", FR_SET_INT, F(report_bindings), NULL, 0,
     FR_WHEN_CREATE, FR_SUB_INIT,
     "1: every rank prints its host, rank, cores, NUMA node, GPU and NIC at fr_comm_create"},
    [FR_S_TOPO_XML] = {"FASTREDUCE_TOPO_XML", "", FR_SET_STRING, F(topo_xml), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "read the node's topology from this hwloc XML file instead of the machine (also HWLOC_XMLFILE)"},
    [FR_S_TIMEOUT] = {"FASTREDUCE_TIMEOUT", "0", FR_SET_SECONDS, F(timeout_s), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "seconds (decimals allowed) a collective may wait without progress before it fails with "
     "FR_ERR_TIMED_OUT, naming the step and the peers waited on; the communicator is unusable after; "
     "0 = wait forever"},
    [FR_S_CHECK] = {"FASTREDUCE_CHECK", "0", FR_SET_INT, F(check), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "1: before each collective the ranks compare collective, count, datatype, op, root, memory and "
     "algorithm; a difference gives FR_ERR_MISMATCH on every rank, naming the ranks and values"},
    [FR_S_SHM_SIZE] = {"FASTREDUCE_SHM_SIZE", "8M", FR_SET_SIZE, F(shm_size), NULL, 0, FR_WHEN_CREATE, FR_SUB_INIT,
     "bytes of shared-memory data area per rank of a node (at least 64K)"},
    [FR_S_SHM_STREAM] = {"FASTREDUCE_SHM_STREAM", "auto", FR_SET_STREAM, F(shm_stream), NULL, FR_SETF_RANK0,
     FR_WHEN_CREATE, FR_SUB_SHM,
     "how a rank writes data for the node's other ranks: auto (plain stores, streaming ones while plain "
     "ones are measured slow: ranks on different dies or sockets), auto:R (slow: R times a streaming copy; "
     "auto is auto:2), 0 (plain), 1 (streaming)"},
    [FR_S_PROGRESS] = {"FASTREDUCE_PROGRESS", "thread", FR_SET_ENUM, F(progress), progress_words, FR_SETF_NOCASE | FR_SETF_RANK0,
     FR_WHEN_CREATE, FR_SUB_COLL,
     "who runs non-blocking requests: thread (a progress thread per communicator, made at its first request, "
     "sleeping while none is queued) or caller (fr_test, fr_wait and the communicator's other calls run them)"},
    [FR_S_FUSION_BYTES] = {"FASTREDUCE_FUSION_BYTES", "64M", FR_SET_SIZE, F(fusion_bytes), NULL, FR_SETF_RANK0,
     FR_WHEN_CREATE, FR_SUB_COLL,
     "grouped allreduce: consecutive buffers are packed into fusion buffers of at most this many bytes, each "
     "reduced as one message; 0 reduces every buffer on its own"},
    [FR_S_FUSION_BUFFER_MAX] = {"FASTREDUCE_FUSION_BUFFER_MAX", "64K", FR_SET_SIZE, F(fusion_buffer_max), NULL,
     FR_SETF_RANK0, FR_WHEN_CREATE, FR_SUB_COLL,
     "grouped allreduce: only buffers of at most this many bytes are packed into fusion buffers; a larger one "
     "is reduced where it lies (its own call costs less than copying it in and out)"},
    [FR_S_ZERO_COPY] = {"FASTREDUCE_ZERO_COPY", "1", FR_SET_INT, F(zero_copy), NULL, 0, FR_WHEN_CREATE, FR_SUB_SHM,
     "1: an allreduce whose buffers on every rank of the node (a bcast whose root buffer) come from "
     "fr_mem_alloc reads and writes them directly, without copies through the node's segment; 0: this rank's "
     "buffers never qualify, so its calls take the copy path"},
    [FR_S_CMA] = {"FASTREDUCE_CMA", "1", FR_SET_ENUM, F(cma), cma_words, FR_SETF_NOCASE, FR_WHEN_CREATE, FR_SUB_SHM,
     "1: where the kernel lets the node's ranks read each other's memory (process_vm_readv, checked at "
     "fr_comm_create) and each has a core, a bcast of a private root buffer of 64 KiB to 512 KiB is copied by "
     "each other rank straight from the root's, one copy instead of two through the node's segment; always: "
     "also where the node's ranks outnumber its cores (slower there); 0 on any rank of a node: never there"},
    [FR_S_HUGE_PAGES] = {"FASTREDUCE_HUGE_PAGES", "1", FR_SET_INT, F(huge_pages), NULL, 0, FR_WHEN_ALLOC, FR_SUB_SHM,
     "1: fr_mem_alloc takes a buffer of 2 MiB or more from the huge pages the site reserved (vm.nr_hugepages), "
     "where enough are free, else ordinary pages; 0: ordinary pages always"},
    [FR_S_DISABLE] = {"FASTREDUCE_DISABLE", "0", FR_SET_INT, F(disable), NULL, 0, FR_WHEN_INTERPOSE, FR_SUB_INIT,
     "1: FR_Allreduce, FR_Bcast, FR_Iallreduce, FR_Ibcast and FR_Alloc_mem (and so the MPI calls of those "
     "names under libfastreduce-mpi.so) pass every call to the MPI library unchanged"},
    [FR_S_STATS] = {"FASTREDUCE_STATS", "0", FR_SET_INT, F(stats), NULL, 0, FR_WHEN_INTERPOSE, FR_SUB_INIT,
     "1: at MPI_Finalize rank 0 prints the FR_Allreduce, FR_Bcast, FR_Iallreduce, FR_Ibcast, FR_Alloc_mem and "
     "FR_Free_mem calls (the MPI calls of those names under libfastreduce-mpi.so) per call and algorithm, "
     "zero-copy or not (or why they went to MPI): calls, bytes, total and mean time, busbw; also read at the "
     "first fr_comm_create: 1 makes every communicator's rank 0 print its late-rank report at fr_comm_destroy"},
    [FR_S_NCCL_TUNER] = {"FASTREDUCE_NCCL_TUNER", "auto", FR_SET_ENUM, F(nccl_tuner), nccl_tuner_words,
     FR_SETF_RANK0, FR_WHEN_NCCL, FR_SUB_NCCL,
     "point NCCL_TUNER_PLUGIN at fastreduce's plugin before its first NCCL communicator: auto (unless "
     "NCCL_TUNER_PLUGIN or NCCL_NET_PLUGIN is set), 1 (unless NCCL_TUNER_PLUGIN is set), 0 (never)"},
    [FR_S_TIMELINE] = {"FASTREDUCE_TIMELINE", "", FR_SET_STRING, F(timeline), NULL, 0, FR_WHEN_OBSERVE, FR_SUB_INIT,
     "write every collective and its phases, and the program's fr_span_begin/end spans, to this file as "
     "Chrome trace events (Perfetto, chrome://tracing); %h is the host, %p the pid, %r the rank in "
     "MPI_COMM_WORLD, which is appended when the name has neither %p nor %r; fastreduce-trace merges the ranks' files"},
    [FR_S_METRICS] = {"FASTREDUCE_METRICS", "", FR_SET_STRING, F(metrics), NULL, 0, FR_WHEN_OBSERVE, FR_SUB_INIT,
     "Prometheus metrics, a comma list: http:[ADDR:]PORT (an HTTP endpoint /metrics on PORT plus the rank's "
     "local rank, on every interface or the IPv4 address ADDR), file:PATH (a text file for the node exporter's textfile collector, rewritten atomically every "
     "FASTREDUCE_METRICS_INTERVAL; %h, %p and %r as in FASTREDUCE_TIMELINE)"},
    [FR_S_METRICS_INTERVAL] = {"FASTREDUCE_METRICS_INTERVAL", "15", FR_SET_SECONDS, F(metrics_interval), NULL, 0,
     FR_WHEN_OBSERVE, FR_SUB_INIT, "seconds between rewrites of FASTREDUCE_METRICS's file (more than 0)"},
};
const int fr_nsettings = FR_S_COUNT;

#define FIELD(s, r, type) ((type *)((char *)(s) + (r)->off))

/* The decimal number at the start of @p txt: digits, then (with @p frac)
 * a point and more digits; *end is where it ends (txt when it does not
 * start with a digit). Read by hand, since strtol and strtod also take
 * leading blanks, a sign and hex (strtod exponents too), and strtod's
 * decimal point is the locale's. */
static double decimal(const char *txt, int frac, const char **end)
{
    const char *p = txt;
    double v = 0;
    for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (*p - '0');
    if (p > txt && frac && p[0] == '.' && p[1] >= '0' && p[1] <= '9')
        for (double f = 0.1; *++p >= '0' && *p <= '9'; f /= 10) v += (*p - '0') * f;
    *end = p;
    return v;
}

static int parse_int(const char *txt, long *out)
{
    const char *end;
    double v = decimal(txt, 0, &end);
    if (end == txt || *end || v > 1000000000L) return 0;
    *out = (long)v;
    return 1;
}

static int parse_seconds(const char *txt, double *out)
{
    const char *end;
    double v = decimal(txt, 1, &end);
    if (end != txt && *end == 's') end++;
    if (end == txt || *end || v > 1e7) return 0;
    *out = v;
    return 1;
}

static int parse_enum(const fr_setting_t *r, const char *txt, int *out)
{
    for (int i = 0; r->words[i]; i++)
        if (r->flags & FR_SETF_NOCASE ? !strcasecmp(txt, r->words[i]) : !strcmp(txt, r->words[i])) {
            *out = i;
            return 1;
        }
    return 0;
}

/* auto, 0, 1, or auto:R with R a decimal number from 0 to 1e6. */
static int parse_stream(const char *txt, int *mode, double *slow)
{
    if (!strcmp(txt, "auto") || !strcmp(txt, "0") || !strcmp(txt, "1")) {
        *mode = txt[0] == 'a' ? FR_STREAM_AUTO : txt[0] == '0' ? FR_STREAM_PLAIN : FR_STREAM_STREAMING;
        *slow = FR_SHM_SLOW;
        return 1;
    }
    if (strncmp(txt, "auto:", 5)) return 0;
    const char *end;
    double r = decimal(txt + 5, 1, &end);
    if (end == txt + 5 || *end || r > 1e6) return 0;
    *mode = FR_STREAM_AUTO;
    *slow = r;
    return 1;
}

static int set_string(char **field, const char *txt, int keep_empty)
{
    char *v = *txt || keep_empty ? strdup(txt) : NULL;
    if (*txt && !v) return 0;
    free(*field);
    *field = v;
    return 1;
}

int fr_setting_parse(fr_settings_t *s, fr_setting_id_t id, const char *txt)
{
    const fr_setting_t *r = &fr_settings[id];
    uint64_t size;
    switch (r->type) {
    case FR_SET_STRING: return set_string(FIELD(s, r, char *), txt, r->flags & FR_SETF_EMPTY);
    case FR_SET_INT: return parse_int(txt, FIELD(s, r, long));
    case FR_SET_SECONDS: return parse_seconds(txt, FIELD(s, r, double));
    case FR_SET_ENUM: return parse_enum(r, txt, FIELD(s, r, int));
    case FR_SET_STREAM: return parse_stream(txt, &s->shm_stream, &s->shm_slow);
    case FR_SET_SIZE:
        if (fr_parse_size(txt, &size) || size == FR_INF) return 0;
        if (id == FR_S_SHM_SIZE && size < FR_SHM_SIZE_MIN) return 0;
        *FIELD(s, r, uint64_t) = size;
        return 1;
    }
    return 0;
}

/* What a row takes, for its warning. */
static const char *allowed(const fr_setting_t *r, char *buf, size_t len)
{
    switch (r->type) {
    case FR_SET_INT: return "a non-negative integer (decimal digits alone, at most 1000000000)";
    case FR_SET_SIZE: return r == &fr_settings[FR_S_SHM_SIZE] ? "a size of at least 64K (like 256K, 8M)"
                                                              : "a size (like 4096, 256K, 8M)";
    case FR_SET_SECONDS: return "a number of seconds (like 30 or 2.5) from 0 to 1e7";
    case FR_SET_STREAM: return "auto, auto:RATIO (a number from 0 to 1e6), 0 or 1";
    case FR_SET_ENUM: break;
    default: return "a string";
    }
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; r->words[i] && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s", i == 0 ? "" : r->words[i + 1] ? ", " : " or ",
                              r->words[i]);
    return buf;
}

/* The fr_config_t field that overrides row @p id, applied to @p s: 1 when
 * @p cfg sets it. An empty string counts as unset, as an empty variable
 * does (a tune_file of "" would otherwise name a file that cannot be
 * opened, and turn off the FASTREDUCE_TUNE_PATH search). */
static int from_config(fr_settings_t *s, const fr_config_t *cfg, fr_setting_id_t id)
{
    if (!cfg) return 0;
    const char *txt = id == FR_S_ALGO ? cfg->algo : id == FR_S_TUNE ? cfg->tune
                    : id == FR_S_TUNE_FILE ? cfg->tune_file : NULL;
    if (txt && *txt) return set_string(FIELD(s, &fr_settings[id], char *), txt, 0);
    if (id == FR_S_NODE_SIZE && cfg->node_size > 0) {
        s->node_size = cfg->node_size;
        return 1;
    }
    return 0;
}

static void load_one(fr_settings_t *s, const fr_config_t *cfg, int rank, fr_setting_id_t id)
{
    const fr_setting_t *r = &fr_settings[id];
    s->loaded |= FR_S_BIT(id);
    if (from_config(s, cfg, id)) {
        s->src[id] = FR_FROM_CONFIG;
        return;
    }
    const char *txt = getenv(r->name);
    if (txt && (*txt || (r->flags & FR_SETF_EMPTY)) && fr_setting_parse(s, id, txt)) {
        s->src[id] = FR_FROM_ENV;
        return;
    }
    s->src[id] = txt && *txt ? FR_FROM_BAD_ENV : FR_FROM_DEFAULT;
    if (s->src[id] == FR_FROM_BAD_ENV && (rank <= 0 || !(r->flags & FR_SETF_RANK0))) {
        char buf[128];
        FR_WARN(r->sub, "%s=%s is not %s; using the default %s", r->name, txt, allowed(r, buf, sizeof buf),
                *r->def ? r->def : "(unset)");
    }
    if (!fr_setting_parse(s, id, r->def) && r->type == FR_SET_STRING)
        set_string(FIELD(s, r, char *), "", 0);   /* (no memory for the default: unset) */
}

void fr_settings_load(fr_settings_t *s, const fr_config_t *cfg, int rank, unsigned mask)
{
    for (int id = 0; id < FR_S_COUNT; id++)
        if (mask & FR_S_BIT(id)) load_one(s, cfg, rank, (fr_setting_id_t)id);
}

unsigned fr_settings_when(fr_setting_when_t when)
{
    unsigned m = 0;
    for (int id = 0; id < FR_S_COUNT; id++)
        if (fr_settings[id].when == (int)when) m |= FR_S_BIT(id);
    return m;
}

void fr_settings_free(fr_settings_t *s)
{
    for (int id = 0; id < FR_S_COUNT; id++)
        if (fr_settings[id].type == FR_SET_STRING) free(*FIELD(s, &fr_settings[id], char *));
    memset(s, 0, sizeof *s);
}

fr_status_t fr_settings_copy(fr_settings_t *to, const fr_settings_t *from)
{
    *to = *from;
    fr_status_t st = FR_SUCCESS;
    for (int id = 0; id < FR_S_COUNT; id++) {
        const fr_setting_t *r = &fr_settings[id];
        if (r->type != FR_SET_STRING) continue;
        char **f = FIELD(to, r, char *);
        if (*f && !(*f = strdup(*f))) st = FR_ERROR(FR_ERR_NO_MEMORY, "out of memory copying %s", r->name);
    }
    return st;
}

/* ---- variables of other libraries --------------------------------------- */

const fr_foreign_t fr_foreign[FR_F_COUNT] = {
    [FR_F_CUDA_VISIBLE_DEVICES] = {"CUDA_VISIBLE_DEVICES",
        "read at fr_comm_create and the NCCL set-up: the GPUs a rank may take, and their order"},
    [FR_F_HWLOC_XMLFILE] = {"HWLOC_XMLFILE", "read at fr_comm_create: a topology file, as FASTREDUCE_TOPO_XML"},
    [FR_F_UCX_NET_DEVICES] = {"UCX_NET_DEVICES",
        "set at fr_comm_create, unless set, to the rank's NIC when it has a verbs device"},
    [FR_F_NCCL_IB_HCA] = {"NCCL_IB_HCA", "set at fr_comm_create, unless set, to the rank's NIC (=dev:port)"},
    [FR_F_NCCL_TUNER_PLUGIN] = {"NCCL_TUNER_PLUGIN",
        "set at the NCCL set-up, unless set, to fastreduce's plugin (as FASTREDUCE_NCCL_TUNER says)"},
    [FR_F_NCCL_NET_PLUGIN] = {"NCCL_NET_PLUGIN",
        "read at the NCCL set-up: when set, FASTREDUCE_NCCL_TUNER=auto leaves NCCL_TUNER_PLUGIN alone"},
    [FR_F_NCCL_COMM_BLOCKING] = {"NCCL_COMM_BLOCKING",
        "read at the NCCL set-up: 0 means no NCCL communicator (device buffers take the staged path)"},
    [FR_F_NCCL_DEBUG] = {"NCCL_DEBUG", "read by the NCCL plugin at each NCCL communicator: INFO or TRACE logs "
        "its choices through NCCL's logger"},
};

const char *fr_foreign_get(fr_foreign_id_t id)
{
    return getenv(fr_foreign[id].name);
}

void fr_foreign_offer(fr_foreign_id_t id, const char *value)
{
    setenv(fr_foreign[id].name, value, 0);
}

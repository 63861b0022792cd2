/* The one table of FASTREDUCE_* settings. */
#include <stdlib.h>
#include <string.h>
#include "settings.h"
#include "log.h"
#include "tune.h"

const fr_setting_t fr_settings[] = {
    {"FASTREDUCE_ALGO", "", FR_SET_STRING,
     "force an algorithm: NAME, or allreduce=NAME,bcast=NAME (strongest override)"},
    {"FASTREDUCE_TUNE", "", FR_SET_STRING,
     "inline tuning rules, ';'-separated, in the table format of docs/tuning.md"},
    {"FASTREDUCE_TUNE_FILE", "", FR_SET_STRING, "a tuning table file (docs/tuning.md)"},
    {"FASTREDUCE_TUNE_PATH", FR_TUNE_DIR, FR_SET_STRING,
     "':'-separated folders searched for a *.tune table whose fingerprint and shape match the job, when "
     "FASTREDUCE_TUNE_FILE is unset; empty: no search"},
    {"FASTREDUCE_DEBUG", "WARN", FR_SET_LEVEL, "log level: NONE, WARN, INFO (one line per call on rank 0), TRACE"},
    {"FASTREDUCE_DEBUG_SUBSYS", "ALL", FR_SET_STRING,
     "subsystems to log: INIT,TOPO,TUNE,COLL,UCX,NCCL,SHM,ALL; a leading ^ excludes"},
    {"FASTREDUCE_DEBUG_FILE", "", FR_SET_STRING, "log to this file instead of stderr; %h is the host, %p the pid"},
    {"FASTREDUCE_NODE_SIZE", "0", FR_SET_INT,
     "fake nodes of this many consecutive ranks (testing multi-node shapes on one host); 0 = real nodes"},
    {"FASTREDUCE_HOSTID", "", FR_SET_STRING,
     "per-rank node name overriding the real host (like NCCL_HOSTID); ranks with equal values share a node"},
    {"FASTREDUCE_SPIN", "2000", FR_SET_INT,
     "polls of a waiting rank before it starts yielding its core (sched_yield)"},
    {"FASTREDUCE_BIND", "auto", FR_SET_STRING,
     "bind each rank: none, core (its share of a NUMA node's cores), numa, gpu (cores near its GPU), "
     "auto (keep a launcher's binding; else gpu when the node has GPUs, else none)"},
    {"FASTREDUCE_REPORT_BINDINGS", "0", FR_SET_INT,
     "1: every rank prints its host, rank, cores, NUMA node, GPU and NIC at fr_comm_create"},
    {"FASTREDUCE_TOPO_XML", "", FR_SET_STRING,
     "read the node's topology from this hwloc XML file instead of the machine (also HWLOC_XMLFILE)"},
    {"FASTREDUCE_TIMEOUT", "0", FR_SET_SECONDS,
     "seconds (decimals allowed) a collective may wait without progress before it fails with "
     "FR_ERR_TIMED_OUT, naming the step and the peers waited on; the communicator is unusable after; "
     "0 = wait forever"},
    {"FASTREDUCE_CHECK", "0", FR_SET_INT,
     "1: before each collective the ranks compare collective, count, datatype, op, root, memory and "
     "algorithm; a difference gives FR_ERR_MISMATCH on every rank, naming the ranks and values"},
    {"FASTREDUCE_SHM_SIZE", "8M", FR_SET_SIZE, "bytes of shared-memory data area per rank of a node"},
    {"FASTREDUCE_SHM_STREAM", "auto", FR_SET_STRING,
     "how a rank writes data for the node's other ranks: auto (plain stores, streaming ones while plain "
     "ones are measured slow: ranks on different dies or sockets), auto:R (slow: R times a streaming copy; "
     "auto is auto:2), 0 (plain), 1 (streaming)"},
    {"FASTREDUCE_DISABLE", "0", FR_SET_INT,
     "1: libfastreduce-mpi.so passes every MPI_Allreduce and MPI_Bcast to the MPI library unchanged"},
    {"FASTREDUCE_STATS", "0", FR_SET_INT,
     "1: libfastreduce-mpi.so prints, at MPI_Finalize on rank 0, its calls per collective and algorithm "
     "(or why they went to MPI): calls, bytes, total and mean time, busbw"},
    {"FASTREDUCE_NCCL_TUNER", "auto", FR_SET_STRING,
     "point NCCL_TUNER_PLUGIN at fastreduce's plugin before its first NCCL communicator: auto (unless "
     "NCCL_TUNER_PLUGIN or NCCL_NET_PLUGIN is set), 1 (unless NCCL_TUNER_PLUGIN is set), 0 (never)"},
};
const int fr_nsettings = sizeof fr_settings / sizeof fr_settings[0];

static const fr_setting_t *find(const char *name)
{
    for (int i = 0; i < fr_nsettings; i++)
        if (!strcmp(fr_settings[i].name, name)) return &fr_settings[i];
    return NULL;
}

const char *fr_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

const char *fr_config_or_env(const char *given, const char *name)
{
    return given && *given ? given : fr_env(name);
}

uint64_t fr_env_size(const char *name)
{
    const fr_setting_t *s = find(name);
    uint64_t def = 0, v;
    if (s) fr_parse_size(s->def, &def);
    const char *txt = fr_env(name);
    if (!txt) return def;
    if (fr_parse_size(txt, &v) || v == FR_INF) {
        FR_WARN(FR_SUB_INIT, "%s=%s is not a size (like 4096, 256K, 8M); using %s", name, txt, s ? s->def : "0");
        return def;
    }
    return v;
}

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

long fr_env_int(const char *name)
{
    const fr_setting_t *s = find(name);
    long def = s ? strtol(s->def, NULL, 10) : 0;
    const char *txt = fr_env(name), *end;
    if (!txt) return def;
    double v = decimal(txt, 0, &end);
    if (end == txt || *end || v > 1000000000L) {
        FR_WARN(FR_SUB_INIT, "%s=%s is not a non-negative integer (decimal digits alone, at most 1000000000); "
                "using %ld", name, txt, def);
        return def;
    }
    return (long)v;
}

double fr_env_seconds(const char *name)
{
    const fr_setting_t *s = find(name);
    double def = s ? strtod(s->def, NULL) : 0;
    const char *txt = fr_env(name), *end;
    if (!txt) return def;
    double v = decimal(txt, 1, &end);
    if (end != txt && *end == 's') end++;
    if (end == txt || *end || v > 1e7) {
        FR_WARN(FR_SUB_INIT, "%s=%s is not a number of seconds (like 30 or 2.5) from 0 to 1e7; using %g", name,
                txt, def);
        return def;
    }
    return v;
}

void fr_settings_print(FILE *f)
{
    for (int i = 0; i < fr_nsettings; i++) {
        const char *v = getenv(fr_settings[i].name);
        fprintf(f, "  %-24s = %-12s (default %s)\n      %s\n", fr_settings[i].name,
                v ? v : "(unset)", *fr_settings[i].def ? fr_settings[i].def : "none", fr_settings[i].doc);
    }
}

/* The logger: FASTREDUCE_DEBUG=WARN|INFO|TRACE (or NONE), FASTREDUCE_DEBUG_SUBSYS
 * (comma list, '^' prefix to exclude), FASTREDUCE_DEBUG_FILE (%h host, %p pid).
 * Lines go to stderr unless a file is named. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "log.h"
#include "settings.h"

int fr_log_level = FR_LOG_WARN;
unsigned fr_log_subsys = FR_SUB_ALL;
static FILE *log_file;
static int log_rank = -1;
static char log_host[64];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct { const char *name; unsigned bit; } subsys_names[] = {
    {"INIT", FR_SUB_INIT}, {"TOPO", FR_SUB_TOPO}, {"TUNE", FR_SUB_TUNE}, {"COLL", FR_SUB_COLL},
    {"UCX", FR_SUB_UCX}, {"NCCL", FR_SUB_NCCL}, {"SHM", FR_SUB_SHM}, {"ALL", FR_SUB_ALL},
};

void fr_path_expand(const char *pattern, int rank, char *path, size_t len)
{
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < len; p++) {
        int n = -1;
        if (p[0] == '%' && p[1] == 'h') n = snprintf(path + o, len - o, "%s", log_host);
        else if (p[0] == '%' && p[1] == 'p') n = snprintf(path + o, len - o, "%ld", (long)getpid());
        else if (p[0] == '%' && p[1] == 'r' && rank >= 0) n = snprintf(path + o, len - o, "%d", rank);
        if (n < 0) {
            path[o++] = *p;
            continue;
        }
        o += (size_t)n;
        if (o >= len) o = len - 1;
        p++;
    }
    path[o] = '\0';
}

static void open_file(const char *pattern)
{
    char path[1024];
    fr_path_expand(pattern, -1, path, sizeof path);
    log_file = fopen(path, "a");
    if (log_file) setvbuf(log_file, NULL, _IOLBF, 0);
    else FR_WARN(FR_SUB_INIT, "FASTREDUCE_DEBUG_FILE=%s: cannot open %s; logging to stderr", pattern, path);
}

/* The subsystems of a FASTREDUCE_DEBUG_SUBSYS list; an unknown name warns
 * and the others still apply. */
static void set_subsys(const char *sub)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", sub);
    int exclude = buf[0] == '^';
    unsigned mask = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf + exclude, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t i;
        for (i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++)
            if (!strcasecmp(tok, subsys_names[i].name)) break;
        if (i == sizeof subsys_names / sizeof subsys_names[0])
            FR_WARN(FR_SUB_INIT, "FASTREDUCE_DEBUG_SUBSYS: unknown subsystem '%s' ignored", tok);
        else
            mask |= subsys_names[i].bit;
    }
    fr_log_subsys = exclude ? (FR_SUB_ALL & ~mask) : mask;
}

static void log_setup(void)
{
    gethostname(log_host, sizeof log_host - 1);
    fr_settings_t s = {0};
    fr_settings_load(&s, NULL, -1, fr_settings_when(FR_WHEN_LOG));
    fr_log_level = s.debug;   /* (debug_words are in fr_log_level_t's order) */
    if (s.src[FR_S_DEBUG_SUBSYS] == FR_FROM_ENV) set_subsys(s.debug_subsys);
    if (s.debug_file) open_file(s.debug_file);
    fr_settings_free(&s);
}

void fr_log_init(void) { pthread_once(&log_once, log_setup); }
/* (atomic: communicators may be created by several threads at once) */
void fr_log_set_rank(int rank) { __atomic_store_n(&log_rank, rank, __ATOMIC_RELAXED); }

static const char *level_name(fr_log_level_t l)
{
    return l == FR_LOG_WARN ? "WARN" : l == FR_LOG_INFO ? "INFO" : "TRACE";
}

static void emit(const char *tag, const char *where, int line, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int rank = __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
    pthread_mutex_lock(&log_lock);
    FILE *f = log_file ? log_file : stderr;
    if (where)
        fprintf(f, "%s:%ld:%d fastreduce %s %s:%d %s\n", log_host, (long)getpid(), rank, tag, where, line, msg);
    else
        fprintf(f, "%s:%ld:%d fastreduce %s %s\n", log_host, (long)getpid(), rank, tag, msg);
    fflush(f);
    pthread_mutex_unlock(&log_lock);
}

void fr_log_write(fr_log_level_t lvl, unsigned subsys, const char *file, int line, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    va_list ap;
    va_start(ap, fmt);
    emit(level_name(lvl), lvl == FR_LOG_TRACE ? base : NULL, line, fmt, ap);
    va_end(ap);
    (void)subsys;
}

void fr_log_report(const char *tag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(tag, NULL, 0, fmt, ap);
    va_end(ap);
}

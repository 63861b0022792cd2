/* The metrics' HTTP endpoint and textfile (metrics_out.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "config.h"
#include "log.h"
#include "metrics.h"
#include "metrics_out.h"
#include "trace.h"
#ifdef FR_HAVE_MICROHTTPD
#include <microhttpd.h>
#endif

int fr_metrics_parse(const char *text, double interval, fr_metrics_spec_t *out)
{
    memset(out, 0, sizeof *out);
    out->interval = interval;
    if (!(interval > 0)) {
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS_INTERVAL must be more than 0 s; 15 s it is");
        out->interval = 15;
    }
    char buf[1100];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        if (!strncmp(tok, "http:", 5)) {
            /* http:PORT or http:ADDR:PORT (an IPv4 address: 127.0.0.1 keeps the endpoint on the host);
             * read into locals, so that a bad entry leaves an earlier good one whole */
            const char *colon = strrchr(tok, ':'), *num = colon + 1;
            long p = strtol(num, &end, 10);
            struct in_addr a;
            char addr[sizeof out->addr] = "";
            size_t alen = colon > tok + 4 ? (size_t)(colon - (tok + 5)) : 0;
            if (alen) snprintf(addr, sizeof addr, "%.*s", (int)alen, tok + 5);
            if (end == num || *end || p < 1 || p > 65535 || alen >= sizeof addr ||
                (addr[0] && inet_pton(AF_INET, addr, &a) != 1)) {
                FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: '%s' is not http:PORT or http:ADDR:PORT (an IPv4 "
                        "address, a port of 1 to 65535); left out", tok);
                continue;
            }
            if (out->port)
                FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: one HTTP endpoint only: '%s' replaces the earlier "
                        "http: entry", tok);
            out->port = (int)p;
            memcpy(out->addr, addr, sizeof addr);
        } else if (!strncmp(tok, "file:", 5) && tok[5]) {
            snprintf(out->file, sizeof out->file, "%s", tok + 5);
        } else {
            FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: '%s' is neither http:PORT nor file:PATH; left out", tok);
        }
    }
    return out->port || out->file[0];
}

/* ---- the textfile --------------------------------------------------- */

static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t file_cond = PTHREAD_COND_INITIALIZER;
static pthread_t file_thread;
static pid_t file_pid;       /* the process whose thread it is (not a forked child's) */
static int file_stop;
static char file_path[1024];
static double file_every;

/* Write the metrics to a file beside the target and rename it over the
 * target, so that the collector never reads half a file. 0 or an errno. */
static int write_file(void)
{
    size_t len = 0;
    char *text = fr_metrics_render(&len), tmp[1100];
    if (!text) return ENOMEM;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", file_path, (long)getpid());
    int err = 0;
    FILE *f = fopen(tmp, "w");
    if (!f) err = errno;
    else if (fwrite(text, 1, len, f) != len) err = errno ? errno : EIO;
    if (f && fclose(f) && !err) err = errno;
    if (!err && rename(tmp, file_path)) err = errno;
    if (err && f) unlink(tmp);
    free(text);
    return err;
}

static void *file_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&file_lock);
    while (!file_stop) {
        struct timespec until = fr_realtime_after(file_every);
        pthread_cond_timedwait(&file_cond, &file_lock, &until);
        if (file_stop) break;
        pthread_mutex_unlock(&file_lock);
        write_file();   /* (a later failure is as the first write's warning said, or passing) */
        pthread_mutex_lock(&file_lock);
    }
    pthread_mutex_unlock(&file_lock);
    return NULL;
}

void fr_metrics_file_start(const char *pattern, double interval, int rank, const char *host)
{
    (void)host;
    fr_path_expand(pattern, rank, file_path, sizeof file_path);
    file_every = interval;
    int err = write_file();
    if (err) {
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: cannot write %s (%s); no metrics file", file_path, strerror(err));
        return;
    }
    if (pthread_create(&file_thread, NULL, file_main, NULL)) {
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: no thread to rewrite %s; it is written at exit only", file_path);
        file_pid = -1;
        return;
    }
    file_pid = getpid();
}

/* ---- the HTTP endpoint ---------------------------------------------- */

#ifdef FR_HAVE_MICROHTTPD
static struct MHD_Daemon *daemon_h;
static pid_t daemon_pid;

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)cls; (void)version; (void)upload; (void)upload_size; (void)state;
    static char not_found[] = "libfastreduce serves its metrics at /metrics\n";
    struct MHD_Response *r;
    unsigned code = MHD_HTTP_OK;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else if (strcmp(url, "/metrics")) {
        code = MHD_HTTP_NOT_FOUND;
        r = MHD_create_response_from_buffer(sizeof not_found - 1, not_found, MHD_RESPMEM_PERSISTENT);
    } else {
        size_t len = 0;
        char *text = fr_metrics_render(&len);
        if (!text) return MHD_NO;
        r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!r) free(text);
        else MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    }
    if (!r) return MHD_NO;
    enum MHD_Result q = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return q;
}

/* libmicrohttpd's last message from the thread that starts the daemon,
 * while it does: the reason the warning gives when the start fails (errno
 * is not always set by what failed). */
static char start_msg[256];
static pthread_t starter;
static int starting;

/* libmicrohttpd's own messages, at INFO: the warning below says what failed. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    if (__atomic_load_n(&starting, __ATOMIC_RELAXED) && pthread_equal(pthread_self(), starter))
        memcpy(start_msg, msg, sizeof msg);
    FR_INFO(FR_SUB_INIT, "libmicrohttpd: %s", msg);
}

void fr_metrics_http_start(const char *addr, int port, int host_rank)
{
    int p = port + host_rank;
    if (p > 65535) {
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: port %d plus local rank %d is past 65535; no HTTP endpoint", port,
                host_rank);
        return;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (addr && *addr) inet_pton(AF_INET, addr, &sa.sin_addr);   /* (checked by fr_metrics_parse) */
    /* MHD_USE_AUTO: epoll or poll, not select(), which fails once the
     * process has FD_SETSIZE (1024) descriptors open */
    errno = 0;
    start_msg[0] = '\0';
    starter = pthread_self();
    __atomic_store_n(&starting, 1, __ATOMIC_RELAXED);
    daemon_h = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, (uint16_t)p, NULL, NULL,
                                answer, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                                MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    int err = errno;
    __atomic_store_n(&starting, 0, __ATOMIC_RELAXED);
    if (!daemon_h) {
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: cannot serve HTTP on port %d (%s); no HTTP endpoint", p,
                start_msg[0] ? start_msg : err ? strerror(err) : "libmicrohttpd gave no reason");
        return;
    }
    daemon_pid = getpid();
    FR_INFO(FR_SUB_INIT, "metrics at http://%s:%d/metrics", addr && *addr ? addr : "0.0.0.0", p);
}
#else
void fr_metrics_http_start(const char *addr, int port, int host_rank)
{
    (void)addr;
    FR_WARN(FR_SUB_INIT, "FASTREDUCE_METRICS: http:%d asked for, but this libfastreduce was built without "
            "libmicrohttpd (install libmicrohttpd-dev and rebuild); no HTTP endpoint", port + host_rank);
}
#endif

void fr_metrics_out_stop(void)
{
#ifdef FR_HAVE_MICROHTTPD
    /* (a forked child holds the parent's daemon but not its thread) */
    if (daemon_h && daemon_pid == getpid()) MHD_stop_daemon(daemon_h);
    daemon_h = NULL;
#endif
    if (!file_pid) return;
    if (file_pid == getpid()) {
        pthread_mutex_lock(&file_lock);
        file_stop = 1;
        pthread_cond_signal(&file_cond);
        pthread_mutex_unlock(&file_lock);
        pthread_join(file_thread, NULL);
    }
    if (file_pid == getpid() || file_pid == -1) write_file();
    file_pid = 0;
}

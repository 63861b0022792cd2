/* Where the metrics go (FASTREDUCE_METRICS): an HTTP endpoint per rank,
 * served by libmicrohttpd where the build found it, and a text file for
 * the node exporter's textfile collector, rewritten atomically by a thread
 * of its own. Failures warn and leave the collectives alone. */
#ifndef FR_API_METRICS_OUT_H
#define FR_API_METRICS_OUT_H

typedef struct fr_metrics_spec {
    int    port;          /* http:[ADDR:]PORT, 0 without */
    char   addr[64];      /* its IPv4 address to listen on, "" for every interface */
    char   file[1024];    /* file:PATH, "" without */
    double interval;      /* seconds between the file's rewrites */
} fr_metrics_spec_t;

/* Parse FASTREDUCE_METRICS's @p text with the interval @p interval into
 * @p out; a malformed part warns and is left out. 1 when something remains. */
int fr_metrics_parse(const char *text, double interval, fr_metrics_spec_t *out);
/* Serve /metrics on @p port + @p host_rank (the rank's place on its host),
 * on IPv4 address @p addr ("" or NULL: every interface). */
void fr_metrics_http_start(const char *addr, int port, int host_rank);
/* Rewrite the file of @p pattern (%h @p host, %p, %r @p rank) every @p interval s. */
void fr_metrics_file_start(const char *pattern, double interval, int rank, const char *host);
/* Write the file a last time and stop both (at unload). */
void fr_metrics_out_stop(void);

#endif

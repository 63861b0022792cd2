/* Every variable the library reads, in one module (lib/settings.c): the
 * FASTREDUCE_* settings, parsed once into a typed fr_settings_t, and the
 * variables of other libraries that it reads or sets (fr_foreign_*). No
 * other file reads the environment, so a misspelt setting does not compile
 * and each setting has one parser, one default and one warning. */
#ifndef FR_SETTINGS_H
#define FR_SETTINGS_H

#include <stdint.h>
#include <stdio.h>
#include "fastreduce.h"

/* FASTREDUCE_TUNE_PATH's default, the installed share/fastreduce
 * (lib/Makefile.am defines it). */
#ifndef FR_TUNE_DIR
#define FR_TUNE_DIR ""
#endif

/* One id per row of fr_settings[], in the table's order. */
typedef enum {
    FR_S_ALGO, FR_S_TUNE, FR_S_TUNE_FILE, FR_S_TUNE_PATH,
    FR_S_DEBUG, FR_S_DEBUG_SUBSYS, FR_S_DEBUG_FILE,
    FR_S_NODE_SIZE, FR_S_HOSTID, FR_S_SPIN, FR_S_BIND, FR_S_REPORT_BINDINGS, FR_S_TOPO_XML,
    FR_S_TIMEOUT, FR_S_CHECK, FR_S_SHM_SIZE, FR_S_SHM_STREAM, FR_S_PROGRESS, FR_S_FUSION_BYTES, FR_S_FUSION_BUFFER_MAX,
    FR_S_ZERO_COPY, FR_S_CMA, FR_S_HUGE_PAGES,
    FR_S_DISABLE, FR_S_STATS, FR_S_NCCL_TUNER,
    FR_S_TIMELINE, FR_S_METRICS, FR_S_METRICS_INTERVAL,
    FR_S_COUNT
} fr_setting_id_t;

#define FR_S_BIT(id) (1u << (id))

/* How a row's text is read. */
typedef enum {
    FR_SET_STRING,   /* the text, copied */
    FR_SET_INT,      /* decimal digits alone, at most 1e9 (a long) */
    FR_SET_SIZE,     /* a byte count with K/M/G suffixes (a uint64_t) */
    FR_SET_SECONDS,  /* digits, optionally a point and digits, an optional 's', at most 1e7 (a double) */
    FR_SET_ENUM,     /* one of the row's words; the field gets the word's index (an int) */
    FR_SET_STREAM,   /* FASTREDUCE_SHM_STREAM: auto, 0, 1 or auto:R (an int and the double after it) */
} fr_setting_type_t;

/* When a setting is read: the library reads each at the same moment as
 * before it was typed, since programs and tests change variables between
 * communicators. */
typedef enum {
    FR_WHEN_CREATE,     /* at each fr_comm_create, into the communicator's snapshot */
    FR_WHEN_LOG,        /* once, when the logger starts (first fr_comm_create or NCCL plugin init) */
    FR_WHEN_INTERPOSE,  /* once, at the first FR_Allreduce or FR_Bcast (the interposer's MPI_* calls) */
    FR_WHEN_NCCL,       /* at a communicator's NCCL set-up (its first device-buffer call, or nccl_eager) */
    FR_WHEN_ALLOC,      /* at each fr_mem_alloc */
    FR_WHEN_OBSERVE,    /* once, at the first fr_comm_create: the timeline and the metrics (lib/api/observe.c) */
    FR_WHEN_COUNT
} fr_setting_when_t;

/* Where a value came from. */
typedef enum {
    FR_FROM_DEFAULT,  /* unset or empty */
    FR_FROM_ENV,      /* the environment variable */
    FR_FROM_CONFIG,   /* the fr_config_t field that overrides the variable */
    FR_FROM_BAD_ENV,  /* the variable was malformed: a warning, and the default */
} fr_setting_src_t;

/* The values of FASTREDUCE_SHM_STREAM, in fr_stream_words' order. */
typedef enum { FR_STREAM_AUTO = 0, FR_STREAM_PLAIN, FR_STREAM_STREAMING } fr_stream_mode_t;
/* The values of FASTREDUCE_NCCL_TUNER, in fr_nccl_tuner_words' order. */
typedef enum { FR_NCCL_TUNER_AUTO = 0, FR_NCCL_TUNER_OFF, FR_NCCL_TUNER_ON } fr_nccl_tuner_mode_t;
/* The values of FASTREDUCE_PROGRESS, in fr_progress_words' order. */
typedef enum { FR_PROGRESS_THREAD = 0, FR_PROGRESS_CALLER } fr_progress_mode_t;
/* FASTREDUCE_CMA, in cma_words' order (the least of a node's ranks holds). */
typedef enum { FR_CMA_OFF = 0, FR_CMA_ON, FR_CMA_ALWAYS } fr_cma_mode_t;
/* The values of FASTREDUCE_BIND, in fr_bind_words' order. */
typedef enum { FR_BIND_AUTO = 0, FR_BIND_NONE, FR_BIND_CORE, FR_BIND_NUMA, FR_BIND_GPU } fr_bind_mode_t;
/* FASTREDUCE_SHM_STREAM's auto ratio when auto:R does not give one. */
#define FR_SHM_SLOW 2.0
/* The least FASTREDUCE_SHM_SIZE: the segment's layout needs a 64 KiB data area a rank. */
#define FR_SHM_SIZE_MIN 65536

/* Every setting's value; a field per row. Strings are the loader's copies
 * (NULL when unset), freed by fr_settings_free. */
typedef struct fr_settings {
    char    *algo, *tune, *tune_file, *tune_path;
    int      debug;             /* fr_log_level_t */
    char    *debug_subsys, *debug_file;
    long     node_size;
    char    *hostid;
    long     spin;
    int      bind;              /* fr_bind_mode_t */
    long     report_bindings;
    char    *topo_xml;
    double   timeout_s;
    long     check;
    uint64_t shm_size;
    int      shm_stream;        /* fr_stream_mode_t */
    double   shm_slow;          /* auto:R's R (FR_SHM_SLOW otherwise); follows shm_stream */
    int      progress;          /* fr_progress_mode_t */
    uint64_t fusion_bytes, fusion_buffer_max;
    long     zero_copy, huge_pages;
    int      cma;               /* fr_cma_mode_t */
    long     disable, stats;
    int      nccl_tuner;        /* fr_nccl_tuner_mode_t */
    char    *timeline, *metrics;
    double   metrics_interval;
    unsigned char src[FR_S_COUNT];  /* fr_setting_src_t of each */
    unsigned loaded;            /* FR_S_BIT of each row loaded */
} fr_settings_t;

typedef struct fr_setting {
    const char *name;          /* environment variable */
    const char *def;           /* default as text ("" for none) */
    int         type;          /* fr_setting_type_t */
    size_t      off;           /* its field in fr_settings_t */
    const char *const *words;  /* FR_SET_ENUM: the allowed words, NULL-terminated */
    unsigned    flags;         /* FR_SETF_* */
    int         when;          /* fr_setting_when_t */
    unsigned    sub;           /* the log subsystem of its warning */
    const char *doc;           /* one line */
} fr_setting_t;

/* Row flags. */
enum {
    FR_SETF_NOCASE = 1,     /* words match whatever their case */
    FR_SETF_EMPTY = 2,      /* an empty variable is a value, not unset */
    FR_SETF_RANK0 = 4,      /* only the communicator's rank 0 warns */
};

extern const fr_setting_t fr_settings[];
extern const int fr_nsettings;
extern const char *const fr_bind_words[];

/* Load the rows in @p mask (FR_S_BIT of each) into @p s: the fr_config_t
 * field where @p cfg sets one, else the variable, else the default; a
 * malformed variable warns (on every rank, or with FR_SETF_RANK0 only where
 * @p rank is 0 or unknown, -1) and gives the default. Other rows keep
 * their values; strings of reloaded rows are replaced. */
void fr_settings_load(fr_settings_t *s, const fr_config_t *cfg, int rank, unsigned mask);
/* FR_S_BIT of every row read at @p when. */
unsigned fr_settings_when(fr_setting_when_t when);
/* Free the strings of @p s and zero it. */
void fr_settings_free(fr_settings_t *s);
/* Copy @p from into @p to (strings duplicated); FR_ERR_NO_MEMORY or FR_SUCCESS. */
fr_status_t fr_settings_copy(fr_settings_t *to, const fr_settings_t *from);
/* Parse @p txt as row @p id's type into @p s's field; 0 when malformed
 * (nothing written then). */
int fr_setting_parse(fr_settings_t *s, fr_setting_id_t id, const char *txt);
/* The value of row @p id in @p s as text, into @p buf. */
const char *fr_setting_text(const fr_settings_t *s, fr_setting_id_t id, char *buf, size_t len);
const char *fr_setting_src_name(int src);
const char *fr_setting_when_name(int when);

/* The settings as fastreduce-info prints them by default: name, current
 * variable, default, documentation. */
void fr_settings_print(FILE *f);
/* Every setting with its value in @p s and where it came from. */
void fr_settings_print_values(const fr_settings_t *s, FILE *f);
/* The settings as a Markdown table (variable, default, when read, meaning). */
void fr_settings_print_markdown(FILE *f);

/* ---- variables of other libraries --------------------------------------- */

/* The variables of other libraries the library reads or sets, listed with
 * their purpose in fr_foreign[] (lib/settings.c). */
typedef enum {
    FR_F_CUDA_VISIBLE_DEVICES, FR_F_HWLOC_XMLFILE, FR_F_UCX_NET_DEVICES, FR_F_NCCL_IB_HCA,
    FR_F_NCCL_TUNER_PLUGIN, FR_F_NCCL_NET_PLUGIN, FR_F_NCCL_COMM_BLOCKING, FR_F_NCCL_DEBUG,
    FR_F_COUNT
} fr_foreign_id_t;

typedef struct fr_foreign {
    const char *name;
    const char *use;   /* what the library does with it */
} fr_foreign_t;

extern const fr_foreign_t fr_foreign[];

/* The variable as the environment holds it now: NULL when unset, "" when
 * empty (these are read when used, since other libraries and the library
 * itself set them while the process runs). */
const char *fr_foreign_get(fr_foreign_id_t id);
/* Set the variable to @p value unless it is set: the library only offers
 * values to other libraries, and a user's own setting always wins. */
void fr_foreign_offer(fr_foreign_id_t id, const char *value);
/* The prefix of the variables our UCX context reads before UCX's own
 * (FASTREDUCE_UCX_TLS before UCX_TLS): UCX reads them, given this prefix. */
#define FR_UCX_ENV_PREFIX "FASTREDUCE"

/* Every foreign variable with its current value and use. */
void fr_foreign_print(FILE *f);

#endif

/* Every FASTREDUCE_* setting, in one table (lib/settings.c). */
#ifndef FR_SETTINGS_H
#define FR_SETTINGS_H

#include <stdint.h>
#include <stdio.h>

/* FASTREDUCE_TUNE_PATH's default, the installed share/fastreduce
 * (lib/Makefile.am defines it). */
#ifndef FR_TUNE_DIR
#define FR_TUNE_DIR ""
#endif

typedef enum { FR_SET_STRING, FR_SET_SIZE, FR_SET_INT, FR_SET_LEVEL, FR_SET_SECONDS } fr_setting_type_t;

typedef struct fr_setting {
    const char *name;     /* environment variable */
    const char *def;      /* default as text ("" for none) */
    int         type;     /* fr_setting_type_t */
    const char *doc;      /* one line */
} fr_setting_t;

extern const fr_setting_t fr_settings[];
extern const int fr_nsettings;

/* The variable's value, or NULL when unset or empty. */
const char *fr_env(const char *name);
/* A size setting (K/M/G suffixes); a malformed value warns and gives the default. */
uint64_t fr_env_size(const char *name);
/* An integer setting; a malformed value warns and gives the default. */
long fr_env_int(const char *name);
/* A duration in seconds (decimals, an optional trailing 's'); a malformed
 * or negative value warns and gives the default. */
double fr_env_seconds(const char *name);
/* Print every setting with its current value and documentation. */
void fr_settings_print(FILE *f);

#endif

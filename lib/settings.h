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
/* A string setting of fr_config_t, @p given, that replaces variable
 * @p name: @p given unless it is NULL or empty, else fr_env(name). An
 * empty field counts as unset, as an empty variable does (a tune_file of
 * "" would otherwise be a file name that cannot be opened, and would turn
 * off the FASTREDUCE_TUNE_PATH search). */
const char *fr_config_or_env(const char *given, const char *name);
/* A size setting (K/M/G suffixes); a malformed value warns and gives the default. */
uint64_t fr_env_size(const char *name);
/* An integer setting: decimal digits and nothing else (no blank, sign or
 * 0x; no setting takes a negative value), at most 1e9; a malformed value
 * warns and gives the default. */
long fr_env_int(const char *name);
/* A duration in seconds: decimal digits, optionally a point and more
 * digits, and an optional trailing 's' (no blank, sign, 0x or exponent),
 * at most 1e7; a malformed value warns and gives the default. */
double fr_env_seconds(const char *name);
/* Print every setting with its current value and documentation. */
void fr_settings_print(FILE *f);

#endif

/* Numbers and sizes as settings and tuning tables write them: digits, an
 * optional K/M/G/T/P/E suffix (powers of 1024) with an optional B or iB,
 * case-insensitive, or "inf". */
#ifndef FR_UNITS_H
#define FR_UNITS_H

#include <stdint.h>

#define FR_INF UINT64_MAX

/* fr_num_parse's outcomes. */
enum { FR_NUM_OK = 0, FR_NUM_EMPTY, FR_NUM_SYNTAX, FR_NUM_OVERFLOW, FR_NUM_TRAILING };

/* A number (@p is_size: with a size suffix) into *out; on FR_NUM_TRAILING,
 * *trail points at the text after the number. */
int fr_num_parse(const char *s, int is_size, uint64_t *out, const char **trail);
/* Parse "1024", "8K", "4M", "1G" (powers of 1024) or "inf". 0 on success. */
int fr_parse_size(const char *s, uint64_t *out);

#endif

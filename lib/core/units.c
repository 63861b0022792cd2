/* Numbers and sizes as settings and tuning tables write them. */
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include "units.h"

static int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Digits into *v; *end is the first non-digit. */
static int parse_digits(const char *s, uint64_t *v, const char **end)
{
    uint64_t x = 0;
    int overflow = 0;
    if (!is_digit(*s))
        return FR_NUM_SYNTAX;
    for (; is_digit(*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            overflow = 1;
        else
            x = x * 10 + d;
    }
    *end = s;
    *v = x;
    return overflow ? FR_NUM_OVERFLOW : FR_NUM_OK;
}

int fr_num_parse(const char *s, int is_size, uint64_t *out, const char **trail)
{
    static const char suffixes[] = "kmgtpe";
    uint64_t v;
    const char *p, *sx;
    unsigned shift = 0;
    int st;
    *trail = "";
    if (!*s)
        return FR_NUM_EMPTY;
    if (strcasecmp(s, "inf") == 0) {
        *out = FR_INF;
        return FR_NUM_OK;
    }
    if ((st = parse_digits(s, &v, &p)) != FR_NUM_OK)
        return st;
    if (is_size) {
        if (*p && (sx = strchr(suffixes, *p | 0x20)) != NULL) {
            shift = 10u * (unsigned)(sx - suffixes + 1);
            p++;
            if ((p[0] | 0x20) == 'i' && (p[1] | 0x20) == 'b')
                p++;
        }
        if ((*p | 0x20) == 'b')
            p++;
    }
    if (*p) {
        *trail = p;
        return FR_NUM_TRAILING;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return FR_NUM_OVERFLOW;
    *out = v << shift;
    return FR_NUM_OK;
}

int fr_parse_size(const char *s, uint64_t *out)
{
    uint64_t v;
    const char *trail;
    if (!s || !out)
        return FR_NUM_SYNTAX;
    int st = fr_num_parse(s, 1, &v, &trail);
    if (st == FR_NUM_OK)
        *out = v;
    return st;
}

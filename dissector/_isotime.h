/* UTC times as ISO 8601 text, as Python's datetime writes them: shared by the compiled CSV
 * writers (_csvrow.c for the exchanges, records/_text.c for the records). */
#ifndef KD_ISOTIME_H
#define KD_ISOTIME_H

#include <stdint.h>

/* days since 1970-01-01 -> proleptic Gregorian year, month, day */
static inline void civil(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* digits of 0 <= v < 10**width, zero-padded */
static inline void digits(char *at, int64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        at[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

/* YYYY-MM-DDTHH:MM:SS (19 characters) of `secs` since the epoch, in years 1-9999 */
static inline void iso_seconds(char *p, int64_t secs)
{
    int64_t days = secs / 86400, rem = secs % 86400, y;
    int m, d;
    if (rem < 0) {   /* floor division, as divmod */
        rem += 86400;
        days -= 1;
    }
    civil(days, &y, &m, &d);
    digits(p, y, 4);
    p[4] = '-';
    digits(p + 5, m, 2);
    p[7] = '-';
    digits(p + 8, d, 2);
    p[10] = 'T';
    digits(p + 11, rem / 3600, 2);
    p[13] = ':';
    digits(p + 14, rem / 60 % 60, 2);
    p[16] = ':';
    digits(p + 17, rem % 60, 2);
}

/* ".nnnnnnnnnZ" (11 characters) after the seconds: 0 <= ns < 10**9 */
static inline void iso_fraction(char *p, int64_t ns)
{
    p[0] = '.';
    digits(p + 1, ns, 9);
    p[10] = 'Z';
}

#endif

/* Kafka's zigzag varints, read as record_batch's Python readers read them: shared by the
 * compiled record loops (records/_check.c, records/_columns.c). */
#ifndef KD_VARINT_H
#define KD_VARINT_H

#include <Python.h>
#include <stdint.h>

/* A zigzag varint of at most `limit` bytes at b[*pos] (below n); 0 when it runs past n or over
 * the limit (the Python readers' IndexError or bad varint). */
static inline int varint(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int limit,
                         int64_t *out)
{
    uint64_t value = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < limit; i++, p++) {
        if (p >= n)
            return 0;
        unsigned char c = b[p];
        value |= (uint64_t)(c & 0x7F) << (7 * i);   /* limit <= 10: shifts up to 63 */
        if (c < 0x80) {
            *pos = p + 1;
            *out = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
            return 1;
        }
    }
    return 0;
}

#endif

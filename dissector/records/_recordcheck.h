/* The records check of record_batch (its _scan_records' verdict on well-formed records),
 * compiled: shared by records/_check.c (check_records) and records/_headers.c (the records-level
 * walk of a set). */
#ifndef KD_RECORDCHECK_H
#define KD_RECORDCHECK_H

#include "../_varint.h"

/* The end of the records, or -1 */
static Py_ssize_t check_records_end(const unsigned char *b, Py_ssize_t n, Py_ssize_t count)
{
    Py_ssize_t pos = 0;
    int64_t v;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!varint(b, n, &pos, 5, &v))              /* the record's length */
            return -1;
        if (v < 6 || v > n - pos)
            return -1;
        Py_ssize_t end = pos + (Py_ssize_t)v;
        pos += 1;                                     /* attributes */
        if (!varint(b, n, &pos, 10, &v) || !varint(b, n, &pos, 5, &v))   /* the deltas */
            return -1;
        for (int field = 0; field < 2; field++) {     /* key and value: null (-1) or bytes */
            if (!varint(b, n, &pos, 5, &v) || v < -1)
                return -1;
            if (v > 0)
                pos += (Py_ssize_t)v;
        }
        if (!varint(b, n, &pos, 5, &v))               /* the header count */
            return -1;
        if (v < 0 || v > end - pos)
            return -1;
        for (int64_t h = v; h > 0; h--) {
            if (!varint(b, n, &pos, 5, &v) || v < 0)  /* key: a string */
                return -1;
            pos += (Py_ssize_t)v;
            if (!varint(b, n, &pos, 5, &v) || v < -1) /* value: null or bytes */
                return -1;
            if (v > 0)
                pos += (Py_ssize_t)v;
        }
        if (pos != end)
            return -1;
    }
    return pos;
}

#endif

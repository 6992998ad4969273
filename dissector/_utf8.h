/* UTF-8 validation as Python's strict decoder does it: shared by records/_columns.c and
 * records/_text.c (each falls back to Python's decoder with replacement when it fails). */
#ifndef KD_UTF8_H
#define KD_UTF8_H

#include <Python.h>
#include <stdint.h>

/* Strict UTF-8 (what Python's decoder accepts): no overlong forms, surrogates or values past
 * U+10FFFF. */
static inline int valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n;) {
        unsigned char c = s[i];
        int len = c < 0x80 ? 1 : c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (len == 0 || n - i < len)
            return 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)))
                || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += len;
    }
    return 1;
}

#endif

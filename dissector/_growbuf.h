/* A byte buffer that grows as it is written (records/_text.c's lines, records/_columns.c's
 * column buffers): `b` holds `n` bytes of the `cap` allocated (PyMem), NULL before the first. */
#ifndef KD_GROWBUF_H
#define KD_GROWBUF_H

#include <Python.h>
#include <string.h>

typedef struct {
    char *b;
    Py_ssize_t n, cap;
} Buf;

/* room for `more` bytes after the n held: 0, or -1 with MemoryError */
static int buf_room(Buf *o, Py_ssize_t more)
{
    if (o->n + more <= o->cap)
        return 0;
    Py_ssize_t cap = (o->n + more) * 2;
    char *b = PyMem_Realloc(o->b, cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->b = b;
    o->cap = cap;
    return 0;
}

static int buf_put(Buf *o, const void *s, Py_ssize_t n)
{
    if (n == 0)   /* nothing, perhaps from nowhere yet (memcpy's pointers must be valid) */
        return 0;
    if (buf_room(o, n) < 0)
        return -1;
    memcpy(o->b + o->n, s, n);
    o->n += n;
    return 0;
}

#endif

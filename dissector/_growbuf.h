/* A byte buffer that grows as it is written (records/_text.c's lines, records/_columns.c's
 * column buffers): `b` holds `n` bytes of the `cap` allocated (PyMem), NULL before the first;
 * or, made by buf_of_bytes, the storage of a bytes object, handed over without a copy by
 * buf_bytes. */
#ifndef KD_GROWBUF_H
#define KD_GROWBUF_H

#include <Python.h>
#include <string.h>

typedef struct {
    char *b;
    Py_ssize_t n, cap;
    PyObject *bytes;   /* the bytes object b is the storage of, or NULL (PyMem) */
} Buf;

/* An empty buffer that is a bytes object of `cap` bytes: 0, or -1 with MemoryError */
static int buf_of_bytes(Buf *o, Py_ssize_t cap)
{
    o->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (o->bytes == NULL)
        return -1;
    o->b = PyBytes_AS_STRING(o->bytes);
    o->n = 0;
    o->cap = cap;
    return 0;
}

/* The n bytes held as a bytes object (a new reference, or NULL), o's memory spent:
 * buf_of_bytes' object cut to size, else a copy */
static PyObject *buf_bytes(Buf *o)
{
    PyObject *b;
    if (o->bytes != NULL) {
        b = o->bytes;
        o->bytes = NULL;
        if (_PyBytes_Resize(&b, o->n) < 0)
            b = NULL;
    } else {
        b = PyBytes_FromStringAndSize(o->b ? o->b : "", o->n);
        PyMem_Free(o->b);
    }
    o->b = NULL;
    return b;
}

static void buf_free(Buf *o)
{
    if (o->bytes != NULL)
        Py_CLEAR(o->bytes);
    else
        PyMem_Free(o->b);
    o->b = NULL;
}

/* room for `more` bytes after the n held: 0, or -1 with MemoryError */
static int buf_room(Buf *o, Py_ssize_t more)
{
    if (o->n + more <= o->cap)
        return 0;
    Py_ssize_t cap = (o->n + more) * 2;
    if (o->bytes != NULL) {
        if (_PyBytes_Resize(&o->bytes, cap) < 0) {   /* which frees it */
            o->b = NULL;
            return -1;
        }
        o->b = PyBytes_AS_STRING(o->bytes);
        o->cap = cap;
        return 0;
    }
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

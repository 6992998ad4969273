/* record_batch's records check, compiled: check_records(buf, count) is the end of `count`
 * well-formed records at the start of buf (bytes-like) exactly when record_batch._scan_records
 * finds all of them there (count records, that end, no problem), else None; the scan then runs
 * to say what is wrong. Every length, count and varint is read as the scan reads it. The tests
 * check the two agree on records of every varint width and on damaged copies. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "../_varint.h"

/* The end of the records, or -1 */
static Py_ssize_t check(const unsigned char *b, Py_ssize_t n, Py_ssize_t count)
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

static PyObject *check_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    Py_ssize_t end = check(view.buf, view.len, count);
    PyBuffer_Release(&view);
    if (end < 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(end);
}

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(buf, count) -> the end of count well-formed records, or None"},
    {NULL}
};

static struct PyModuleDef check_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_check",
    .m_doc = "record_batch's records check, compiled.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__check(void)
{
    return PyModule_Create(&check_module);
}

/* record_batch's records check, compiled: check_records(buf, count) is the end of `count`
 * well-formed records at the start of buf (bytes-like) exactly when record_batch._scan_records
 * finds all of them there (count records, that end, no problem), else None; the scan then runs
 * to say what is wrong. Every length, count and varint is read as the scan reads it. The tests
 * check the two agree on records of every varint width and on damaged copies. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_recordcheck.h"

static PyObject *check_records(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    Py_ssize_t end = check_records_end(view.buf, view.len, count);
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

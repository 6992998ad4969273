/* Python objects' attributes and calls from C, for the compiled paths that keep their state in
 * the twins' own objects (tcp/_handler.c, _pairing.c). */
#ifndef KD_ATTRS_H
#define KD_ATTRS_H

#include <Python.h>

/* o.name as a 64-bit int: 0, or -1 with an error raised */
static inline int get_ll(PyObject *o, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* a call's result dropped: 0, or -1 when it raised */
static inline int call_none(PyObject *r)
{
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

#endif

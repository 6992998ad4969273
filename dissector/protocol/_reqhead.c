/* A request header's common case, compiled: headers.py_request_head (the pure-Python twin) says
 * what it does. request_head(buf): (api_key, api_version, correlation_id, client_id, {},
 * body_offset) as parse_request_header returns it, or None where that takes more than the common
 * case (a header with tagged fields, a client id that is not UTF-8, bytes that cannot hold the
 * header): the caller then asks parse_request_header, which also says what is wrong. Every
 * request of the headers level passes here (a third of its per-message work was this header).
 *
 * configure(flexible): the first flexible request version of each api key (None: never), a
 * tuple indexed by api key (headers.py builds it from the generated APIS table at import). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define CONTROLLED_SHUTDOWN 7
#define KEYS 1024

static int flexible[KEYS];   /* first flexible request version, or -1; keys past `known`: -1 */
static Py_ssize_t known;

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *table)
{
    if (!PyTuple_Check(table) || PyTuple_GET_SIZE(table) > KEYS) {
        PyErr_SetString(PyExc_ValueError, "configure: a tuple of at most 1024 versions");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(table);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(table, i);
        long f = -1;
        if (v != Py_None) {
            f = PyLong_AsLong(v);
            if (f == -1 && PyErr_Occurred())
                return NULL;
            if (f < 0 || f > 32767) {
                PyErr_SetString(PyExc_ValueError, "configure: version out of range");
                return NULL;
            }
        }
        flexible[i] = (int)f;
    }
    known = n;
    Py_RETURN_NONE;
}

static PyObject *request_head(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t end = view.len;
    PyObject *result = NULL;
    if (end < 8)
        goto fallback;
    int api_key = (int16_t)((p[0] << 8) | p[1]);
    int api_version = (int16_t)((p[2] << 8) | p[3]);
    int32_t corr = (int32_t)(((uint32_t)p[4] << 24) | ((uint32_t)p[5] << 16)
                             | ((uint32_t)p[6] << 8) | p[7]);
    int version;
    if (api_key == CONTROLLED_SHUTDOWN && api_version == 0)
        version = 0;
    else {
        int f = (api_key >= 0 && api_key < known) ? flexible[api_key] : -1;
        version = (f >= 0 && api_version >= f) ? 2 : 1;
    }
    PyObject *client_id;
    Py_ssize_t pos;
    if (version == 0) {
        client_id = Py_NewRef(Py_None);
        pos = 8;
    }
    else {
        if (end < 10)
            goto fallback;
        int n = (int16_t)((p[8] << 8) | p[9]);
        pos = 10;
        if (n >= 0) {
            if (pos + n > end)
                goto fallback;
            client_id = PyUnicode_DecodeUTF8((const char *)p + pos, n, NULL);
            if (client_id == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    goto done;
                PyErr_Clear();
                goto fallback;
            }
            pos += n;
        }
        else if (n == -1)
            client_id = Py_NewRef(Py_None);
        else
            goto fallback;
        if (version == 2) {
            if (pos < end && p[pos] == 0)
                pos += 1;
            else {
                Py_DECREF(client_id);
                goto fallback;
            }
        }
    }
    PyObject *tags = PyDict_New();
    if (tags == NULL) {
        Py_DECREF(client_id);
        goto done;
    }
    result = Py_BuildValue("(iiiNNn)", api_key, api_version, (int)corr, client_id, tags, pos);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"request_head", request_head, METH_O, "a request header's common case, or None"},
    {"configure", configure, METH_O, "the first flexible request version of each api key"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_reqhead", "request headers' common case, compiled", -1, methods,
};

PyMODINIT_FUNC PyInit__reqhead(void)
{
    return PyModule_Create(&module);
}

/* A column of Python values as Arrow buffers, compiled: what pa.array(values, type) makes (its
 * specification; the tests compare the two on random columns), for the values the analysis
 * tables hold. pyarrow's conversion spends some 650 instructions a value on them, a tenth of
 * analysis.load on message-dense traffic; this spends a few dozen.
 *
 * buffers(values, kind) -> (null_count, [buffers]) or None. `values` a list or tuple; `kind`:
 *   "b" "h" "i" "q"  int8, int16, int32, int64 (and timestamps, ints of ns): [validity, data]
 *   "d"              float64: [validity, data]
 *   "s" "y"          string (UTF-8), binary: [validity, offsets (int32), data]
 *   "L"              list of strings: [validity, offsets, the strings' offsets, their data]
 * A buffer is bytes, validity None without nulls. None is null; every other value must be of
 * the exact type (int, float, str, bytes, list of str) and fit: anything else (a subclass, an
 * int out of range, a str with no UTF-8, more than 2 GiB of data) returns None, and the caller
 * asks pa.array, which converts it or says what is wrong.
 *
 * text_length(rows, columns) -> int or None: the length of the str (characters) and bytes values
 * at `columns` of `rows` (a list of tuples), as analysis.columns._text_length counts a batch's
 * payload (its specification); None where a value there is not exactly a str, bytes or None, or a
 * row is not a tuple that long (the caller counts). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* a zeroed bytes object of n bytes, or NULL with an error */
static PyObject *zeroed(Py_ssize_t n)
{
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b != NULL)
        memset(PyBytes_AS_STRING(b), 0, n);
    return b;
}

/* The validity bitmap of `items`: bit i set where items[i] is not None; *nulls the count of
 * None. NULL with an error. */
static PyObject *validity(PyObject **items, Py_ssize_t n, Py_ssize_t *nulls)
{
    PyObject *bits = zeroed((n + 7) / 8);
    if (bits == NULL)
        return NULL;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(bits);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_None)
            k++;
        else
            p[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    *nulls = k;
    return bits;
}

/* (nulls, [validity or None, rest...]), stealing the references in `bufs` (validity may be
 * NULL: none) */
static PyObject *made(Py_ssize_t nulls, PyObject *valid, PyObject **bufs, int count)
{
    PyObject *list = PyList_New(count + 1);
    if (list == NULL)
        goto fail;
    if (nulls == 0 || valid == NULL) {
        Py_XDECREF(valid);
        valid = Py_NewRef(Py_None);
    }
    PyList_SET_ITEM(list, 0, valid);
    for (int i = 0; i < count; i++)
        PyList_SET_ITEM(list, i + 1, bufs[i]);
    return Py_BuildValue("(nN)", nulls, list);
fail:
    Py_XDECREF(valid);
    for (int i = 0; i < count; i++)
        Py_XDECREF(bufs[i]);
    return NULL;
}

/* items[i] into p at i (width bytes, little-endian as Arrow's buffers on the machines we build
 * for): an exact int in [lo, hi], or an exact float (`real`); 0, or 1 when it is not one */
static int put_number(PyObject *v, char *p, Py_ssize_t i, int width, int real, long long lo,
                      long long hi)
{
    if (real) {
        if (!PyFloat_CheckExact(v))
            return 1;
        double x = PyFloat_AS_DOUBLE(v);
        memcpy(p + 8 * i, &x, 8);
        return 0;
    }
    int overflow;
    long long x;
    if (!PyLong_CheckExact(v)
        || ((x = PyLong_AsLongLongAndOverflow(v, &overflow)) == -1 && PyErr_Occurred())
        || overflow || x < lo || x > hi) {
        PyErr_Clear();
        return 1;
    }
    switch (width) {
    case 1: { int8_t y = (int8_t)x; memcpy(p + i, &y, 1); break; }
    case 2: { int16_t y = (int16_t)x; memcpy(p + 2 * i, &y, 2); break; }
    case 4: { int32_t y = (int32_t)x; memcpy(p + 4 * i, &y, 4); break; }
    default: memcpy(p + 8 * i, &x, 8);
    }
    return 0;
}

/* ints of `width` bytes, or float64 (`real`, width 8) */
static PyObject *numbers(PyObject **items, Py_ssize_t n, int width, int real)
{
    long long lo = width == 8 ? INT64_MIN : -(1LL << (width * 8 - 1));
    long long hi = width == 8 ? INT64_MAX : (1LL << (width * 8 - 1)) - 1;
    PyObject *data = zeroed(n * width);
    if (data == NULL)
        return NULL;
    char *p = PyBytes_AS_STRING(data);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] != Py_None && put_number(items[i], p, i, width, real, lo, hi)) {
            Py_DECREF(data);
            Py_RETURN_NONE;
        }
    }
    Py_ssize_t nulls;
    PyObject *valid = validity(items, n, &nulls);
    if (valid == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    return made(nulls, valid, &data, 1);
}

/* the bytes of a str (UTF-8) or bytes value, as `binary` asks; 0, or 1 when it is neither or
 * has no UTF-8 (the error cleared) */
static int text_of(PyObject *v, int binary, const char **s, Py_ssize_t *len)
{
    if (binary) {
        if (!PyBytes_CheckExact(v))
            return 1;
        *s = PyBytes_AS_STRING(v);
        *len = PyBytes_GET_SIZE(v);
        return 0;
    }
    if (!PyUnicode_CheckExact(v))
        return 1;
    *s = PyUnicode_AsUTF8AndSize(v, len);   /* kept in the str: the second pass finds it */
    if (*s == NULL) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

/* Offsets and data of the strings items[0:n] (None: empty), appended at offsets[0:n+1] from
 * `base` on; `total` their length, counted by the caller. */
static void put_texts(PyObject **items, Py_ssize_t n, int binary, int32_t base, char *offsets,
                      char *data)
{
    int32_t at = base;
    memcpy(offsets, &at, 4);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s;
        Py_ssize_t len = 0;
        if (items[i] != Py_None) {
            text_of(items[i], binary, &s, &len);   /* checked by the caller's first pass */
            memcpy(data + (at - base), s, len);
            at += (int32_t)len;
        }
        memcpy(offsets + 4 * (i + 1), &at, 4);
    }
}

static PyObject *texts(PyObject **items, Py_ssize_t n, int binary)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *s;
        Py_ssize_t len;
        if (items[i] == Py_None)
            continue;
        if (text_of(items[i], binary, &s, &len) || (total += len) > INT32_MAX)
            Py_RETURN_NONE;
    }
    PyObject *bufs[2] = {zeroed((n + 1) * 4), PyBytes_FromStringAndSize(NULL, total)};
    Py_ssize_t nulls;
    PyObject *valid = bufs[0] && bufs[1] ? validity(items, n, &nulls) : NULL;
    if (valid == NULL) {
        Py_XDECREF(bufs[0]);
        Py_XDECREF(bufs[1]);
        return NULL;
    }
    put_texts(items, n, binary, 0, PyBytes_AS_STRING(bufs[0]), PyBytes_AS_STRING(bufs[1]));
    return made(nulls, valid, bufs, 2);
}

static PyObject *lists(PyObject **items, Py_ssize_t n)
{
    Py_ssize_t count = 0, total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (v == Py_None)
            continue;
        if (!PyList_CheckExact(v))
            Py_RETURN_NONE;
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(v); j++) {
            const char *s;
            Py_ssize_t len;
            if (text_of(PyList_GET_ITEM(v, j), 0, &s, &len) || (total += len) > INT32_MAX)
                Py_RETURN_NONE;
        }
        if ((count += PyList_GET_SIZE(v)) > INT32_MAX)
            Py_RETURN_NONE;
    }
    PyObject *bufs[3] = {zeroed((n + 1) * 4), zeroed((count + 1) * 4),
                         PyBytes_FromStringAndSize(NULL, total)};
    Py_ssize_t nulls;
    PyObject *valid = bufs[0] && bufs[1] && bufs[2] ? validity(items, n, &nulls) : NULL;
    if (valid == NULL) {
        for (int i = 0; i < 3; i++)
            Py_XDECREF(bufs[i]);
        return NULL;
    }
    char *offsets = PyBytes_AS_STRING(bufs[0]), *inner = PyBytes_AS_STRING(bufs[1]);
    char *data = PyBytes_AS_STRING(bufs[2]);
    int32_t at = 0, bytes_at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (v != Py_None) {
            Py_ssize_t k = PyList_GET_SIZE(v);
            put_texts(((PyListObject *)v)->ob_item, k, 0, bytes_at, inner + 4 * at,
                      data + bytes_at);
            memcpy(&bytes_at, inner + 4 * (at + k), 4);
            at += (int32_t)k;
        }
        memcpy(offsets + 4 * (i + 1), &at, 4);
    }
    return made(nulls, valid, bufs, 3);
}

static PyObject *buffers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[1]) || PyUnicode_GET_LENGTH(args[1]) != 1) {
        PyErr_SetString(PyExc_TypeError, "buffers(values, kind): kind one of b h i q d s y L");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(args[0], "buffers: values must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *r;
    switch (PyUnicode_READ_CHAR(args[1], 0)) {
    case 'b': r = numbers(items, n, 1, 0); break;
    case 'h': r = numbers(items, n, 2, 0); break;
    case 'i': r = numbers(items, n, 4, 0); break;
    case 'q': r = numbers(items, n, 8, 0); break;
    case 'd': r = numbers(items, n, 8, 1); break;
    case 's': r = texts(items, n, 0); break;
    case 'y': r = texts(items, n, 1); break;
    case 'L': r = lists(items, n); break;
    default:
        PyErr_SetString(PyExc_ValueError, "buffers: kind one of b h i q d s y L");
        r = NULL;
    }
    Py_DECREF(seq);
    return r;
}

static PyObject *text_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "text_length(rows: list, columns: tuple)");
        return NULL;
    }
    PyObject *rows = args[0], *columns = args[1];
    Py_ssize_t ncols = PyTuple_GET_SIZE(columns), at[64];
    if (ncols > 64)
        Py_RETURN_NONE;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        at[c] = PyLong_AsSsize_t(PyTuple_GET_ITEM(columns, c));
        if (at[c] < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    }
    long long total = 0;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows); r++) {
        PyObject *row = PyList_GET_ITEM(rows, r);
        if (!PyTuple_CheckExact(row))
            Py_RETURN_NONE;
        for (Py_ssize_t c = 0; c < ncols; c++) {
            if (at[c] >= PyTuple_GET_SIZE(row))
                Py_RETURN_NONE;
            PyObject *v = PyTuple_GET_ITEM(row, at[c]);
            if (PyUnicode_CheckExact(v))
                total += PyUnicode_GET_LENGTH(v);
            else if (PyBytes_CheckExact(v))
                total += PyBytes_GET_SIZE(v);
            else if (v != Py_None)
                Py_RETURN_NONE;
        }
    }
    return PyLong_FromLongLong(total);
}

static PyMethodDef methods[] = {
    {"buffers", (PyCFunction)(void (*)(void))buffers, METH_FASTCALL,
     "buffers(values, kind) -> (null_count, [Arrow buffers]) or None: pa.array's for plain values"},
    {"text_length", (PyCFunction)(void (*)(void))text_length, METH_FASTCALL,
     "text_length(rows, columns) -> int or None: the str and bytes lengths there"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "dissector._value_buffers",
                                    .m_size = 0, .m_methods = methods};

PyMODINIT_FUNC PyInit__value_buffers(void)
{
    return PyModule_Create(&module);
}

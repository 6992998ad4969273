/* A v2 batch's records into the records table's column buffers, compiled: records/columns.py's
 * py_append_v2 (the pure-Python twin) is the specification; this does the same without a Python
 * object per record, key, value or header. The tests compare the two on every shipped capture
 * and on random and damaged batches.
 *
 * append_v2(buffers, body, count, base_offset, first_ts, ts_fixed, index) -> count. `buffers`
 * is the tuple of bytearrays in columns.BUFFERS order; each grows by the rows of the `count`
 * records at the start of `body` (bytes-like), as little-endian int32/int64 values, bytes and
 * validity bits. ValueError when a record is not what record_batch's check accepted (it cannot
 * be, after that check): the buffers then hold the rows before it, and the caller drops them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_utf8.h"
#include "../_varint.h"

enum { BATCH_INDEX, OFFSET, OFFSET_VALID, TS, TS_VALID, KEY_OFF, KEY_DATA, KEY_VALID, VAL_OFF,
       VAL_DATA, VAL_VALID, HDR_OFF, HKEY_OFF, HKEY_DATA, HVAL_OFF, HVAL_DATA, HVAL_VALID,
       NBUF };

#define NS_PER_MS 1000000LL
#define TS_MAX (INT64_MAX / NS_PER_MS)

/* One bytearray being appended to: `n` bytes used of the `cap` it has been resized to (all it
 * has allocated, at first). Its size is set back to `n` when done: a bytearray shrinking by less
 * than half keeps its memory, so growth by doubling is not undone from one call to the next. */
typedef struct {
    PyObject *obj;
    char *p;
    Py_ssize_t n0, n, cap;
} Out;

static int reserve(Out *o, Py_ssize_t more)
{
    if (o->n + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->n + more;
    if (cap < 2 * o->n)
        cap = 2 * o->n;
    if (cap < 64)
        cap = 64;
    if (PyByteArray_Resize(o->obj, cap) < 0)
        return -1;
    o->p = PyByteArray_AS_STRING(o->obj);
    o->cap = cap;
    return 0;
}

static int put(Out *o, const void *s, Py_ssize_t n)
{
    if (reserve(o, n) < 0)
        return -1;
    memcpy(o->p + o->n, s, n);
    o->n += n;
    return 0;
}

static inline void put32(Out *o, int32_t v)   /* room reserved by the caller */
{
    unsigned char *p = (unsigned char *)o->p + o->n;
    uint32_t u = (uint32_t)v;
    p[0] = u; p[1] = u >> 8; p[2] = u >> 16; p[3] = u >> 24;
    o->n += 4;
}

static inline void put64(Out *o, int64_t v)
{
    unsigned char *p = (unsigned char *)o->p + o->n;
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(u >> (8 * i));
    o->n += 8;
}

/* room for bit `i` of a validity bitmap, new bytes clear (null) */
static int bit_room(Out *o, Py_ssize_t i)
{
    Py_ssize_t need = (i >> 3) + 1;
    if (o->n >= need)
        return 0;
    if (reserve(o, need - o->n) < 0)
        return -1;
    memset(o->p + o->n, 0, need - o->n);
    o->n = need;
    return 0;
}

/* the bits from `i` on cleared, in the byte that holds bit i (the bytes after it are cut) */
static void clear_from(Out *o, Py_ssize_t i)
{
    if ((i & 7) && o->n > (i >> 3))
        o->p[i >> 3] &= (char)((1 << (i & 7)) - 1);
}

static inline void set_bit(Out *o, Py_ssize_t i)
{
    o->p[i >> 3] |= (char)(1 << (i & 7));
}

/* a header key: its bytes when they are UTF-8, else as Python decodes them with replacement */
static int put_key(Out *o, const unsigned char *s, Py_ssize_t n)
{
    if (valid_utf8(s, n))
        return put(o, s, n);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "replace");
    if (text == NULL)
        return -1;
    Py_ssize_t len;
    const char *u = PyUnicode_AsUTF8AndSize(text, &len);
    int r = u == NULL ? -1 : put(o, u, len);
    Py_DECREF(text);
    return r;
}

static int bad(const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s", what);
    return -1;
}

/* a key or value (length -1: null) into offsets, data and validity at row `row` */
static int put_binary(Out *off, Out *data, Out *valid, Py_ssize_t row,
                      const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos)
{
    int64_t len;
    if (!varint(b, n, pos, 5, &len) || len < -1)
        return bad("bad length");
    if (bit_room(valid, row) < 0 || reserve(off, 4) < 0)
        return -1;
    if (len >= 0) {
        if (len > n - *pos)
            return bad("field overruns its batch");
        if (data->n + len > INT32_MAX)
            return bad("column data past 2 GiB");
        if (put(data, b + *pos, (Py_ssize_t)len) < 0)
            return -1;
        *pos += (Py_ssize_t)len;
        set_bit(valid, row);
    }
    put32(off, (int32_t)data->n);
    return 0;
}

static int parse(Out *o, const unsigned char *b, Py_ssize_t n, Py_ssize_t count,
                 int64_t base_offset, int64_t first_ts, int fixed, int64_t ts_fixed, int32_t index)
{
    Py_ssize_t row = o[OFFSET].n >> 3;
    Py_ssize_t hrow = (o[HVAL_OFF].n >> 2) - 1;
    if (reserve(&o[BATCH_INDEX], 4 * count) < 0 || reserve(&o[OFFSET], 8 * count) < 0
            || reserve(&o[TS], 8 * count) < 0 || reserve(&o[HDR_OFF], 4 * count) < 0
            || bit_room(&o[OFFSET_VALID], row + count - 1) < 0
            || bit_room(&o[TS_VALID], row + count - 1) < 0)
        return -1;
    Py_ssize_t pos = 0;
    int64_t v, ts_delta, off_delta;
    for (Py_ssize_t i = 0; i < count; i++, row++) {
        if (!varint(b, n, &pos, 5, &v) || v < 6 || v > n - pos)
            return bad("record overruns its batch");
        Py_ssize_t end = pos + (Py_ssize_t)v;
        pos += 1;                                          /* attributes */
        if (!varint(b, n, &pos, 10, &ts_delta) || !varint(b, n, &pos, 5, &off_delta))
            return bad("bad varint");
        put32(&o[BATCH_INDEX], index);
        int64_t offset, ts;
        if (__builtin_add_overflow(base_offset, off_delta, &offset)) {
            put64(&o[OFFSET], 0);                          /* past int64: null */
        } else {
            put64(&o[OFFSET], offset);
            set_bit(&o[OFFSET_VALID], row);
        }
        int ok = fixed ? (ts = ts_fixed, 1) : !__builtin_add_overflow(first_ts, ts_delta, &ts);
        if (ok && ts >= 0 && ts <= TS_MAX) {
            put64(&o[TS], ts * NS_PER_MS);
            set_bit(&o[TS_VALID], row);
        } else {
            put64(&o[TS], 0);
        }
        if (put_binary(&o[KEY_OFF], &o[KEY_DATA], &o[KEY_VALID], row, b, n, &pos) < 0
                || put_binary(&o[VAL_OFF], &o[VAL_DATA], &o[VAL_VALID], row, b, n, &pos) < 0)
            return -1;
        if (!varint(b, n, &pos, 5, &v) || v < 0 || v > end - pos)
            return bad("bad header count");
        for (int64_t h = v; h > 0; h--, hrow++) {
            int64_t klen;
            if (!varint(b, n, &pos, 5, &klen) || klen < 0)
                return bad("bad header key length");
            if (klen > n - pos)
                return bad("field overruns its batch");
            if (put_key(&o[HKEY_DATA], b + pos, (Py_ssize_t)klen) < 0)
                return -1;
            pos += (Py_ssize_t)klen;
            if (o[HKEY_DATA].n > INT32_MAX)
                return bad("column data past 2 GiB");
            if (reserve(&o[HKEY_OFF], 4) < 0)
                return -1;
            put32(&o[HKEY_OFF], (int32_t)o[HKEY_DATA].n);
            if (put_binary(&o[HVAL_OFF], &o[HVAL_DATA], &o[HVAL_VALID], hrow, b, n, &pos) < 0)
                return -1;
        }
        if (pos != end)
            return bad("record length does not match its fields");
        put32(&o[HDR_OFF], (int32_t)((o[HKEY_OFF].n >> 2) - 1));
    }
    return 0;
}

static PyObject *append_v2(PyObject *self, PyObject *args)
{
    PyObject *buffers;
    Py_buffer body;
    Py_ssize_t count;
    long long base_offset, first_ts;
    PyObject *fixed;
    int index;
    if (!PyArg_ParseTuple(args, "O!y*nLLOi", &PyTuple_Type, &buffers, &body, &count,
                          &base_offset, &first_ts, &fixed, &index))
        return NULL;
    Out o[NBUF];
    int64_t ts_fixed = 0;
    int failed = 0, ready = 0;   /* ready: the buffers set up in o */
    if (PyTuple_GET_SIZE(buffers) != NBUF) {
        PyErr_SetString(PyExc_TypeError, "append_v2: one bytearray per column buffer");
        failed = 1;
    }
    for (int i = 0; !failed && i < NBUF; i++) {
        PyObject *b = PyTuple_GET_ITEM(buffers, i);
        if (!PyByteArray_CheckExact(b)) {
            PyErr_SetString(PyExc_TypeError, "append_v2: one bytearray per column buffer");
            failed = 1;
            break;
        }
        o[i].obj = b;
        o[i].n0 = o[i].n = PyByteArray_GET_SIZE(b);
        Py_ssize_t alloc = ((PyByteArrayObject *)b)->ob_alloc;
        o[i].cap = alloc > o[i].n ? alloc - 1 : o[i].n;   /* the last byte: bytearray's NUL */
        ready = i + 1;
        if (o[i].cap > o[i].n && PyByteArray_Resize(b, o[i].cap) < 0) {
            o[i].cap = o[i].n;
            failed = 1;
        }
        o[i].p = PyByteArray_AS_STRING(b);
    }
    if (!failed && fixed != Py_None) {
        ts_fixed = PyLong_AsLongLong(fixed);
        failed = ts_fixed == -1 && PyErr_Occurred();
    }
    if (!failed && count < 0) {
        PyErr_SetString(PyExc_ValueError, "negative count");
        failed = 1;
    }
    if (!failed) {
        Py_ssize_t rows = o[OFFSET].n >> 3, headers = (o[HVAL_OFF].n >> 2) - 1;
        failed = parse(o, body.buf, body.len, count, base_offset, first_ts, fixed != Py_None,
                       ts_fixed, index) < 0;
        if (failed) {   /* back to the rows before, the validity bits past them clear */
            for (int i = 0; i < NBUF; i++)
                o[i].n = o[i].n0;
            clear_from(&o[OFFSET_VALID], rows);
            clear_from(&o[TS_VALID], rows);
            clear_from(&o[KEY_VALID], rows);
            clear_from(&o[VAL_VALID], rows);
            clear_from(&o[HVAL_VALID], headers);
        }
    }
    for (int i = 0; i < ready; i++)   /* each to what it holds */
        if (o[i].cap > o[i].n && PyByteArray_Resize(o[i].obj, o[i].n) < 0)
            failed = 1;
    PyBuffer_Release(&body);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(count);
}

static PyMethodDef methods[] = {
    {"append_v2", append_v2, METH_VARARGS,
     "append_v2(buffers, body, count, base_offset, first_ts, ts_fixed, index) -> count"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_columns", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__columns(void)
{
    return PyModule_Create(&module);
}

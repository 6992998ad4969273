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

#include "../_attrs.h"
#include "../_growbuf.h"
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

/* `buffers` (a tuple of NBUF bytearrays) set up in `o` for appending: 0, or -1 with an error
 * (*ready: how many were set up, for done()). */
static int begin(Out *o, PyObject *buffers, int *ready)
{
    *ready = 0;
    if (!PyTuple_Check(buffers) || PyTuple_GET_SIZE(buffers) != NBUF) {
        PyErr_SetString(PyExc_TypeError, "one bytearray per column buffer");
        return -1;
    }
    for (int i = 0; i < NBUF; i++) {
        PyObject *b = PyTuple_GET_ITEM(buffers, i);
        if (!PyByteArray_CheckExact(b)) {
            PyErr_SetString(PyExc_TypeError, "one bytearray per column buffer");
            return -1;
        }
        o[i].obj = b;
        o[i].n0 = o[i].n = PyByteArray_GET_SIZE(b);
        Py_ssize_t alloc = ((PyByteArrayObject *)b)->ob_alloc;
        o[i].cap = alloc > o[i].n ? alloc - 1 : o[i].n;   /* the last byte: bytearray's NUL */
        *ready = i + 1;
        if (o[i].cap > o[i].n && PyByteArray_Resize(b, o[i].cap) < 0) {
            o[i].cap = o[i].n;
            return -1;
        }
        o[i].p = PyByteArray_AS_STRING(b);
    }
    return 0;
}

/* Each of the first `ready` buffers cut to what it holds: 0, or -1 with an error. */
static int done(Out *o, int ready)
{
    int failed = 0;
    for (int i = 0; i < ready; i++)
        if (o[i].cap > o[i].n && PyByteArray_Resize(o[i].obj, o[i].n) < 0)
            failed = 1;
    return failed ? -1 : 0;
}

/* The `count` records at the start of body[:n] appended as rows of batch `index`: 0; or -1
 * with ValueError (a record not as the check took it) and the buffers as they were before. */
static int append_one(Out *o, const unsigned char *body, Py_ssize_t n, Py_ssize_t count,
                      int64_t base_offset, int64_t first_ts, int fixed, int64_t ts_fixed,
                      int32_t index)
{
    if (count < 0)
        return bad("negative count");
    Py_ssize_t rows = o[OFFSET].n >> 3, headers = (o[HVAL_OFF].n >> 2) - 1, before[NBUF];
    for (int i = 0; i < NBUF; i++)
        before[i] = o[i].n;
    if (parse(o, body, n, count, base_offset, first_ts, fixed, ts_fixed, index) == 0)
        return 0;
    for (int i = 0; i < NBUF; i++)   /* back to the rows before, the bits past them clear */
        o[i].n = before[i];
    clear_from(&o[OFFSET_VALID], rows);
    clear_from(&o[TS_VALID], rows);
    clear_from(&o[KEY_VALID], rows);
    clear_from(&o[VAL_VALID], rows);
    clear_from(&o[HVAL_VALID], headers);
    return -1;
}

static PyObject *append_v2(PyObject *self, PyObject *args)
{
    PyObject *buffers;
    Py_buffer body;
    Py_ssize_t count;
    long long base_offset, first_ts;
    PyObject *fixed;
    int index;
    if (!PyArg_ParseTuple(args, "Oy*nLLOi", &buffers, &body, &count, &base_offset, &first_ts,
                          &fixed, &index))
        return NULL;
    Out o[NBUF];
    int64_t ts_fixed = 0;
    int ready;
    int failed = begin(o, buffers, &ready) < 0;
    if (!failed && fixed != Py_None) {
        ts_fixed = PyLong_AsLongLong(fixed);
        failed = ts_fixed == -1 && PyErr_Occurred();
    }
    if (!failed)
        failed = append_one(o, body.buf, body.len, count, base_offset, first_ts,
                            fixed != Py_None, ts_fixed, index) < 0;
    if (done(o, ready) < 0)
        failed = 1;
    PyBuffer_Release(&body);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(count);
}

/* what the batch walk reads of a Batch (in place: _attrs.h), and the batch fields it puts in
 * a head after the exchange's (columns.batch_head: magic, compression, then these) */
static Slot s_deferred, s_magic, s_codec;
static const char *head_names[] = {"timestamp_type", "producer_id", "producer_epoch",
                                   "base_sequence", "is_transactional", "is_control", "crc_ok"};
#define HEAD_NAMES 7
#define PREFIX 6
static Slot s_head[HEAD_NAMES];

/* columns.batch_head(prefix, batch): the 6 values of `prefix`, then the batch's own */
static PyObject *head_of(PyObject *prefix, PyObject *batch, PyObject *codec_names)
{
    PyObject *head = PyTuple_New(PREFIX + 2 + HEAD_NAMES), *v;
    if (head == NULL)
        return NULL;
    for (int i = 0; i < PREFIX; i++)
        PyTuple_SET_ITEM(head, i, Py_NewRef(PyTuple_GET_ITEM(prefix, i)));
    if ((v = attr_get(&s_magic, batch)) == NULL)
        goto fail;
    PyTuple_SET_ITEM(head, PREFIX, v);
    PyObject *codec = attr_get(&s_codec, batch);
    if (codec == NULL)
        goto fail;
    v = PyDict_GetItemWithError(codec_names, codec);   /* borrowed */
    v = v != NULL ? Py_NewRef(v) : PyErr_Occurred() ? NULL : PyObject_Str(codec);
    Py_DECREF(codec);
    if (v == NULL)
        goto fail;
    PyTuple_SET_ITEM(head, PREFIX + 1, v);
    for (int i = 0; i < HEAD_NAMES; i++) {
        if ((v = attr_get(&s_head[i], batch)) == NULL)
            goto fail;
        PyTuple_SET_ITEM(head, PREFIX + 2 + i, v);
    }
    return head;
fail:
    Py_DECREF(head);
    return NULL;
}

/* The rows and data bytes the buffers hold (RecordColumns.rows, .data_bytes) */
static Py_ssize_t rows_of(Out *o)
{
    return o[OFFSET].n >> 3;
}

static long long data_bytes_of(Out *o)
{
    return (long long)o[KEY_DATA].n + o[VAL_DATA].n + o[HKEY_DATA].n + o[HVAL_DATA].n
        + 32LL * rows_of(o);
}

/* One deferred batch (found, parse, (body, found, base_offset, first_ts, ts_fixed)) appended
 * as batch len(heads): its records' count (0: none, or a record the check did not take, left
 * out), or -1 with an error. */
static Py_ssize_t append_deferred(Out *o, PyObject *deferred, PyObject *heads, PyObject *prefix,
                                  PyObject *batch, PyObject *codec_names)
{
    PyObject *args;
    if (!PyTuple_Check(deferred) || PyTuple_GET_SIZE(deferred) != 3
            || !PyTuple_Check(args = PyTuple_GET_ITEM(deferred, 2))
            || PyTuple_GET_SIZE(args) != 5) {
        PyErr_SetString(PyExc_TypeError, "a deferred batch is (found, parse, args)");
        return -1;
    }
    Py_ssize_t found = PyLong_AsSsize_t(PyTuple_GET_ITEM(deferred, 0));
    if (found == -1 && PyErr_Occurred())
        return -1;
    if (found == 0)
        return 0;
    long long base_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(args, 2));
    long long first_ts = base_offset == -1 && PyErr_Occurred() ? 0
        : PyLong_AsLongLong(PyTuple_GET_ITEM(args, 3));
    PyObject *fixed = PyTuple_GET_ITEM(args, 4);
    long long ts_fixed = fixed == Py_None || PyErr_Occurred() ? 0 : PyLong_AsLongLong(fixed);
    if (PyErr_Occurred())
        return -1;
    Py_buffer body;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(args, 0), &body, PyBUF_SIMPLE) < 0)
        return -1;
    Py_ssize_t index = PyList_GET_SIZE(heads);
    int rc = index > INT32_MAX ? bad("too many batches")
        : append_one(o, body.buf, body.len, found, base_offset, first_ts, fixed != Py_None,
                     ts_fixed, (int32_t)index);
    PyBuffer_Release(&body);
    if (rc < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();   /* a bug (the check passed these records): the batch is left out */
        return 0;
    }
    PyObject *head = head_of(prefix, batch, codec_names);
    if (head == NULL || PyList_Append(heads, head) < 0) {
        Py_XDECREF(head);
        return -1;   /* its rows stay: the caller's error drops the columns */
    }
    Py_DECREF(head);
    return found;
}

/* RecordColumns.full(max_rows, max_bytes) */
static int full_of(Out *o, long long max_rows, long long max_bytes)
{
    return rows_of(o) >= max_rows || data_bytes_of(o) >= max_bytes;
}

/* The checked batches of batches[*at:] appended until the buffers are full (RecordColumns.full)
 * or a batch without _deferred comes (the caller takes it); *at is then the next batch's index.
 * 0, or -1 with an error. columns.py_append_batches is its twin. */
static int walk_batches(Out *o, PyObject *heads, PyObject *prefix, PyObject *batches,
                        Py_ssize_t *at, long long max_rows, long long max_bytes,
                        PyObject *sources, PyObject *source, PyObject *codec_names)
{
    for (; *at >= 0 && *at < PyList_GET_SIZE(batches); (*at)++) {
        PyObject *batch = PyList_GET_ITEM(batches, *at);
        PyObject *deferred = attr_get(&s_deferred, batch);
        if (deferred == NULL)
            return -1;
        if (deferred == Py_None) {   /* records built, or none: the caller's add_batch */
            Py_DECREF(deferred);
            return 0;
        }
        Py_INCREF(batch);   /* the list may change under a call */
        Py_ssize_t n = append_deferred(o, deferred, heads, prefix, batch, codec_names);
        Py_DECREF(deferred);
        Py_DECREF(batch);
        if (n < 0)
            return -1;
        if (n > 0 && sources != Py_None) {
            PyObject *count = PyLong_FromSsize_t(n), *pair = NULL;
            if (count != NULL)
                pair = PyTuple_Pack(2, source, count);
            Py_XDECREF(count);
            int failed = pair == NULL || PyList_Append(sources, pair) < 0;
            Py_XDECREF(pair);
            if (failed)
                return -1;
        }
        if (n > 0 && full_of(o, max_rows, max_bytes)) {
            (*at)++;
            return 0;
        }
    }
    return 0;
}

/* The class of the record sets append_sets walks (records.model.RecordSet, set by configure) */
static PyObject *record_set_type;
static Slot s_batches;

/* append_sets(buffers, heads, stem, sets, at, batch_at, rows, data_bytes, sources, source,
 * codec_names) -> (set index, batch index, whether the buffers are full): columns.py_append_sets,
 * its twin and specification: walk_batches over each set's batches, from sets[at]'s
 * batch_at on, with no Python call per set or batch. */
static PyObject *append_sets(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11 || !PyList_CheckExact(args[1]) || !PyTuple_Check(args[2])
            || PyTuple_GET_SIZE(args[2]) != PREFIX - 2 || !PyList_Check(args[3])
            || (args[8] != Py_None && !PyList_Check(args[8])) || !PyDict_Check(args[10])
            || record_set_type == NULL)
        return PyErr_Format(PyExc_TypeError, "append_sets(buffers, heads (list), stem "
                            "(4-tuple), sets (list), at, batch_at, rows, data_bytes, sources "
                            "(list or None), source, codec_names (dict)), once configured");
    PyObject *stem = args[2], *sets = args[3];
    Py_ssize_t at = PyLong_AsSsize_t(args[4]), batch_at = PyLong_AsSsize_t(args[5]);
    long long max_rows = PyLong_AsLongLong(args[6]), max_bytes = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred())
        return NULL;
    if (at < 0)
        at = 0;
    if (batch_at < 0)
        batch_at = 0;
    Out o[NBUF];
    int ready, failed = begin(o, args[0], &ready) < 0;
    for (; !failed && at < PyList_GET_SIZE(sets); at++, batch_at = 0) {
        PyObject *entry = PyList_GET_ITEM(sets, at), *rs, *batches;
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 3) {
            PyErr_SetString(PyExc_TypeError, "a record set entry is (topic, partition, set)");
            failed = 1;
            break;
        }
        rs = PyTuple_GET_ITEM(entry, 2);
        if ((PyObject *)Py_TYPE(rs) != record_set_type)
            continue;
        if ((batches = attr_get(&s_batches, rs)) == NULL) {
            failed = 1;
            break;
        }
        Py_ssize_t n = PyList_Check(batches) ? PyList_GET_SIZE(batches) : 0;
        if (batch_at < n) {
            PyObject *prefix = PyTuple_New(PREFIX);
            if (prefix == NULL) {
                Py_DECREF(batches);
                failed = 1;
                break;
            }
            for (int i = 0; i < PREFIX - 2; i++)
                PyTuple_SET_ITEM(prefix, i, Py_NewRef(PyTuple_GET_ITEM(stem, i)));
            PyTuple_SET_ITEM(prefix, PREFIX - 2, Py_NewRef(PyTuple_GET_ITEM(entry, 0)));
            PyTuple_SET_ITEM(prefix, PREFIX - 1, Py_NewRef(PyTuple_GET_ITEM(entry, 1)));
            failed = walk_batches(o, args[1], prefix, batches, &batch_at, max_rows, max_bytes,
                                  args[8], args[9], args[10]) < 0;
            Py_DECREF(prefix);
            n = PyList_Check(batches) ? PyList_GET_SIZE(batches) : 0;
        }
        Py_DECREF(batches);
        if (failed || batch_at < n)   /* full, or a batch the caller takes */
            break;
        if (full_of(o, max_rows, max_bytes)) {
            at++;
            batch_at = 0;
            break;
        }
    }
    int full = full_of(o, max_rows, max_bytes);
    if (done(o, ready) < 0)
        failed = 1;
    return failed ? NULL : Py_BuildValue("(nnO)", at, batch_at, full ? Py_True : Py_False);
}

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *type)
{
    Py_XSETREF(record_set_type, Py_NewRef(type));
    Py_RETURN_NONE;
}

/* -- batch fields into column buffers -------------------------------------------------------- */

/* The validity bitmap of n rows (NULL bits: every row valid, then None) */
static PyObject *validity(unsigned char *bits, Py_ssize_t n, Py_ssize_t valid)
{
    return valid == n ? Py_NewRef(Py_None)
        : PyBytes_FromStringAndSize((const char *)bits, (n + 7) >> 3);
}

#define BOOL (-1)

/* Column `col` of the heads as buffers (see batch_buffers) */
static PyObject *column_buffers(PyObject *heads, Py_ssize_t col, int kind)
{
    Py_ssize_t n = PyList_GET_SIZE(heads), valid = 0;
    unsigned char *bits = PyMem_Calloc((n + 7) >> 3 ? (n + 7) >> 3 : 1, 1);
    unsigned char *flags = kind == BOOL ? PyMem_Calloc((n + 7) >> 3 ? (n + 7) >> 3 : 1, 1) : NULL;
    Buf data = {0}, offsets = {0};
    PyObject *out = NULL;
    int32_t at = 0;
    if (bits == NULL || (kind == BOOL && flags == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    if (kind == 0 && buf_put(&offsets, &at, 4) < 0)
        goto done;
    for (Py_ssize_t row = 0; row < n; row++) {
        PyObject *head = PyList_GET_ITEM(heads, row);
        if (!PyTuple_Check(head) || PyTuple_GET_SIZE(head) <= col) {
            PyErr_SetString(PyExc_TypeError, "a batch's fields are a tuple of every column");
            goto done;
        }
        PyObject *v = PyTuple_GET_ITEM(head, col);
        int ok = 0;
        if (kind == 0) {   /* text: UTF-8 (a lone surrogate does not encode: null) */
            if (PyUnicode_CheckExact(v)) {
                Py_ssize_t len;
                const char *u = PyUnicode_AsUTF8AndSize(v, &len);
                if (u == NULL)
                    PyErr_Clear();
                else if (len > INT32_MAX - at) {
                    PyErr_SetString(PyExc_OverflowError, "batch fields past 2 GiB of text");
                    goto done;
                } else if (buf_put(&data, u, len) < 0)
                    goto done;
                else {
                    at += (int32_t)len;
                    ok = 1;
                }
            }
            if (buf_put(&offsets, &at, 4) < 0)
                goto done;
        } else if (kind == BOOL) {
            ok = PyBool_Check(v);
            if (v == Py_True)
                flags[row >> 3] |= 1 << (row & 7);
        } else {   /* an int of `kind` bytes, little-endian; out of its range: null */
            long long x = 0;
            if (PyLong_CheckExact(v)) {
                int over;
                x = PyLong_AsLongLongAndOverflow(v, &over);
                if (x == -1 && PyErr_Occurred())
                    goto done;
                long long lim = kind == 8 ? 0 : 1LL << (8 * kind - 1);
                ok = !over && (kind == 8 || (-lim <= x && x < lim));
                if (!ok)
                    x = 0;
            }
            unsigned char le[8];
            for (int i = 0; i < kind; i++)
                le[i] = (unsigned char)((unsigned long long)x >> (8 * i));
            if (buf_put(&data, le, kind) < 0)
                goto done;
        }
        if (ok) {
            bits[row >> 3] |= 1 << (row & 7);
            valid++;
        }
    }
    PyObject *v = validity(bits, n, valid);
    if (kind == 0)
        out = Py_BuildValue("(NNN)", v, buf_bytes(&offsets), buf_bytes(&data));
    else if (kind == BOOL)
        out = Py_BuildValue("(NN)", v, PyBytes_FromStringAndSize((const char *)flags,
                                                                 (n + 7) >> 3));
    else
        out = Py_BuildValue("(NN)", v, buf_bytes(&data));
done:
    PyMem_Free(bits);
    PyMem_Free(flags);
    buf_free(&data);
    buf_free(&offsets);
    return out;
}

/* batch_buffers(heads, kinds) -> [buffers per column]: columns.py_batch_buffers, its twin and
 * specification, without a Python step per value. */
static PyObject *batch_buffers(PyObject *self, PyObject *args)
{
    PyObject *heads, *kinds;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &heads, &PyTuple_Type, &kinds))
        return NULL;
    Py_ssize_t ncol = PyTuple_GET_SIZE(kinds);
    PyObject *out = PyList_New(ncol);
    for (Py_ssize_t c = 0; out != NULL && c < ncol; c++) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(kinds, c));
        if (kind != 0 && kind != BOOL && kind != 1 && kind != 2 && kind != 4 && kind != 8) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a kind is 0 (text), -1 (bool) or an int's "
                                "width in bytes (1, 2, 4, 8)");
            Py_CLEAR(out);
            break;
        }
        PyObject *col = column_buffers(heads, c, (int)kind);
        if (col == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, c, col);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"append_v2", append_v2, METH_VARARGS,
     "append_v2(buffers, body, count, base_offset, first_ts, ts_fixed, index) -> count"},
    {"append_sets", (PyCFunction)(void (*)(void))append_sets, METH_FASTCALL,
     "append_sets(buffers, heads, stem, sets, at, batch_at, rows, data_bytes, sources, source, "
     "codec_names) -> (the next set's index, its next batch's index, whether the buffers are "
     "full)"},
    {"batch_buffers", batch_buffers, METH_VARARGS,
     "batch_buffers(heads, kinds) -> the batch fields' column buffers"},
    {"configure", configure, METH_O, "configure(RecordSet): the class of the sets append_sets "
     "walks"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_columns", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__columns(void)
{
    if ((s_deferred.name = PyUnicode_InternFromString("_deferred")) == NULL
            || (s_magic.name = PyUnicode_InternFromString("magic")) == NULL
            || (s_codec.name = PyUnicode_InternFromString("codec")) == NULL
            || (s_batches.name = PyUnicode_InternFromString("batches")) == NULL)
        return NULL;
    for (int i = 0; i < HEAD_NAMES; i++)
        if ((s_head[i].name = PyUnicode_InternFromString(head_names[i])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}

/* The records table's rows as CSV or JSON lines, compiled: records/text.py's py_csv_text and
 * py_jsonl_text (the pure-Python twins) are the specification; this writes the same bytes
 * straight from the column buffers, without a Python object per record. The tests compare the
 * two on every shipped capture and on random rows.
 *
 * csv_text(buffers, pre, mid, post[, ends]) / jsonl_text(...) -> bytes. `buffers`: the bytearrays of
 * records.columns.BUFFERS; pre, mid, post: lists of bytes, one each per batch, written around a
 * row's fields (they hold the batch fields, rendered by csv.writer or json.dumps). Keys and
 * values are written as base64, timestamps (ns) as UTC ISO 8601 with nanoseconds, headers as
 * json.dumps writes the list of {"key", "value"} dicts (ASCII only: \uXXXX escapes), doubled
 * quotes around it in CSV. ValueError when the buffers do not hold what columns.py writes.
 * `ends`, a list, gets the length of the text so far after each run of one batch's rows (in
 * RecordColumns a batch's rows are one run: a parallel run's worker cuts the text between its
 * exchanges there).
 *
 * batch_texts(batches, csv, names) renders those pre, mid and post from the batch fields, as
 * text.py_batch_texts does: on message-dense traffic a batch holds a record or two, and the
 * Python step per batch was a third of the JSON Lines table's time. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_growbuf.h"
#include "../_isotime.h"
#include "../_utf8.h"

enum { BATCH_INDEX, OFFSET, OFFSET_VALID, TS, TS_VALID, KEY_OFF, KEY_DATA, KEY_VALID, VAL_OFF,
       VAL_DATA, VAL_VALID, HDR_OFF, HKEY_OFF, HKEY_DATA, HVAL_OFF, HVAL_DATA, HVAL_VALID,
       NBUF };

#define PUTS(o, s) buf_put(o, s, (Py_ssize_t)sizeof(s) - 1)

static int put_int(Buf *o, int64_t x)
{
    char text[24], *end = text + sizeof text, *p = end;
    uint64_t u = x < 0 ? 0ULL - (uint64_t)x : (uint64_t)x;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--p = '-';
    return buf_put(o, p, end - p);
}

/* ns since the epoch, 0 <= ts (the builder keeps no other): 2024-05-01T12:00:00.123456789Z */
static int put_iso(Buf *o, int64_t ts)
{
    if (buf_room(o, 30) < 0)
        return -1;
    iso_seconds(o->b + o->n, ts / 1000000000LL);
    iso_fraction(o->b + o->n + 19, ts % 1000000000LL);
    o->n += 30;
    return 0;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* the two characters of every 12 bits, in output order (filled by PyInit__text): a lookup and a
 * 2-byte store per 12 bits take half the time of one per 6 bits, and base64 of the keys and
 * values is the CSV and JSON Lines tables' largest cost after decompression */
static char PAIRS[4096][2];

static void fill_pairs(void)
{
    for (int i = 0; i < 4096; i++) {
        PAIRS[i][0] = B64[i >> 6];
        PAIRS[i][1] = B64[i & 63];
    }
}

static inline void put_pair(char *p, uint32_t twelve)
{
    memcpy(p, PAIRS[twelve], 2);
}

static int put_b64(Buf *o, const unsigned char *s, Py_ssize_t n)
{
    if (buf_room(o, (n + 2) / 3 * 4) < 0)
        return -1;
    char *p = o->b + o->n;
    Py_ssize_t i = 0;
    for (; i + 6 <= n; i += 6, p += 8) {   /* 48 bits: four pairs */
        uint64_t v = (uint64_t)s[i] << 40 | (uint64_t)s[i + 1] << 32 | (uint64_t)s[i + 2] << 24
                     | (uint64_t)s[i + 3] << 16 | (uint64_t)s[i + 4] << 8 | s[i + 5];
        put_pair(p, (uint32_t)(v >> 36));
        put_pair(p + 2, (uint32_t)(v >> 24) & 4095);
        put_pair(p + 4, (uint32_t)(v >> 12) & 4095);
        put_pair(p + 6, (uint32_t)v & 4095);
    }
    if (i + 3 <= n) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        put_pair(p, v >> 12);
        put_pair(p + 2, v & 4095);
        p += 4;
        i += 3;
    }
    if (n - i == 1) {
        put_pair(p, (uint32_t)s[i] << 4);
        p[2] = p[3] = '=';
        p += 4;
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 8 | s[i + 1];
        put_pair(p, v >> 4);
        p[2] = B64[(v & 15) << 2];
        p[3] = '=';
        p += 4;
    }
    o->n = p - o->b;
    return 0;
}

/* a JSON string's quote: doubled inside a CSV field */
static int put_quote(Buf *o, int csv)
{
    return csv ? PUTS(o, "\"\"") : PUTS(o, "\"");
}

static int put_u(Buf *o, uint32_t c)
{
    static const char hex[] = "0123456789abcdef";
    char e[6] = {'\\', 'u', hex[c >> 12], hex[(c >> 8) & 15], hex[(c >> 4) & 15], hex[c & 15]};
    return buf_put(o, e, 6);
}

/* UTF-8 text as json.dumps writes a str (ensure_ascii), quotes doubled for CSV; text that is
 * not UTF-8 as Python decodes it with replacement */
static int put_json_str(Buf *o, const unsigned char *s, Py_ssize_t n, int csv)
{
    if (!valid_utf8(s, n)) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "replace");
        if (text == NULL)
            return -1;
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(text, &len);
        int r = u == NULL ? -1 : put_json_str(o, (const unsigned char *)u, len, csv);
        Py_DECREF(text);
        return r;
    }
    if (put_quote(o, csv) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n;) {
        unsigned char c = s[i];
        int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
        for (int k = 1; k < len; k++)
            cp = (cp << 6) | (s[i + k] & 0x3F);
        i += len;
        int r;
        if (cp == '"')
            r = csv ? PUTS(o, "\\\"\"") : PUTS(o, "\\\"");
        else if (cp == '\\')
            r = PUTS(o, "\\\\");
        else if (cp == '\n')
            r = PUTS(o, "\\n");
        else if (cp == '\r')
            r = PUTS(o, "\\r");
        else if (cp == '\t')
            r = PUTS(o, "\\t");
        else if (cp == '\b')
            r = PUTS(o, "\\b");
        else if (cp == '\f')
            r = PUTS(o, "\\f");
        else if (cp >= 0x20 && cp < 0x7F) {
            char ch = (char)cp;
            r = buf_put(o, &ch, 1);
        } else if (cp < 0x10000)
            r = put_u(o, cp);
        else {
            cp -= 0x10000;
            r = put_u(o, 0xD800 | (cp >> 10)) < 0 ? -1 : put_u(o, 0xDC00 | (cp & 0x3FF));
        }
        if (r < 0)
            return -1;
    }
    return put_quote(o, csv);
}

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} Col;

static inline int bit(const Col *c, Py_ssize_t i)
{
    return (i >> 3) < c->n && (c->p[i >> 3] >> (i & 7)) & 1;
}

static inline int32_t i32(const Col *c, Py_ssize_t i)
{
    const unsigned char *p = c->p + 4 * i;
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                     | (uint32_t)p[3] << 24);
}

static inline int64_t i64(const Col *c, Py_ssize_t i)
{
    const unsigned char *p = c->p + 8 * i;
    uint64_t u = 0;
    for (int k = 7; k >= 0; k--)
        u = u << 8 | p[k];
    return (int64_t)u;
}

static int bad(void)
{
    PyErr_SetString(PyExc_ValueError, "column buffers out of step");
    return -1;
}

/* offsets[i], offsets[i + 1] as a checked range of data */
static int range(const Col *off, const Col *data, Py_ssize_t i, Py_ssize_t *a, Py_ssize_t *b)
{
    if (4 * (i + 2) > off->n)
        return bad();
    *a = i32(off, i);
    *b = i32(off, i + 1);
    if (*a < 0 || *a > *b || *b > data->n)
        return bad();
    return 0;
}

/* a key or value: base64, or empty (CSV) / null (JSON) */
static int put_binary(Buf *o, const Col *c, int off, Py_ssize_t i, int csv)
{
    Py_ssize_t a, b;
    if (range(&c[off], &c[off + 1], i, &a, &b) < 0)
        return -1;
    if (!bit(&c[off + 2], i))
        return csv ? 0 : PUTS(o, "null");
    if (!csv && PUTS(o, "\"") < 0)
        return -1;
    if (put_b64(o, c[off + 1].p + a, b - a) < 0)
        return -1;
    return csv ? 0 : PUTS(o, "\"");
}

static int put_bytes_obj(Buf *o, PyObject *list, Py_ssize_t i)
{
    if (i < 0 || i >= PyList_GET_SIZE(list) || !PyBytes_Check(PyList_GET_ITEM(list, i)))
        return bad();
    PyObject *b = PyList_GET_ITEM(list, i);
    return buf_put(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
}

/* The text's size, about: each row's own text besides its bytes (numbers, time, punctuation),
 * its batch's pieces, and the bytes of keys, values and headers as base64 with a header's own
 * punctuation. Written into one allocation of that size, the text is neither copied as a
 * growing buffer moves nor at the end (a third of the CSV table's copying of memory). */
static Py_ssize_t size_of_text(const Col *c, Py_ssize_t rows, PyObject *pre, PyObject *mid,
                               PyObject *post)
{
    Py_ssize_t n = 1024 + rows * 128 + c[HKEY_OFF].n / 4 * 32
                   + (c[KEY_DATA].n + c[VAL_DATA].n + c[HKEY_DATA].n + c[HVAL_DATA].n) / 3 * 4;
    Py_ssize_t batches = PyList_GET_SIZE(pre);
    if (PyList_GET_SIZE(mid) < batches)
        batches = PyList_GET_SIZE(mid);
    if (PyList_GET_SIZE(post) < batches)
        batches = PyList_GET_SIZE(post);
    for (Py_ssize_t r = 0; r < rows; r++) {   /* a batch's pieces are checked as written */
        Py_ssize_t k = i32(&c[BATCH_INDEX], r);
        if (k < 0 || k >= batches)
            continue;
        PyObject *p = PyList_GET_ITEM(pre, k), *m = PyList_GET_ITEM(mid, k),
                 *q = PyList_GET_ITEM(post, k);
        if (PyBytes_Check(p) && PyBytes_Check(m) && PyBytes_Check(q))
            n += PyBytes_GET_SIZE(p) + PyBytes_GET_SIZE(m) + PyBytes_GET_SIZE(q);
    }
    return n;
}

static PyObject *text(PyObject *args, int csv)
{
    PyObject *buffers, *pre, *mid, *post, *ends = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!O!|O!", &PyTuple_Type, &buffers, &PyList_Type, &pre,
                          &PyList_Type, &mid, &PyList_Type, &post, &PyList_Type, &ends))
        return NULL;
    if (PyTuple_GET_SIZE(buffers) != NBUF) {
        PyErr_SetString(PyExc_TypeError, "one bytearray per column buffer");
        return NULL;
    }
    Col c[NBUF];
    for (int k = 0; k < NBUF; k++) {
        PyObject *b = PyTuple_GET_ITEM(buffers, k);
        if (!PyByteArray_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "one bytearray per column buffer");
            return NULL;
        }
        c[k].p = (const unsigned char *)PyByteArray_AS_STRING(b);
        c[k].n = PyByteArray_GET_SIZE(b);
    }
    Py_ssize_t rows = c[OFFSET].n >> 3;
    if (c[BATCH_INDEX].n < 4 * rows || c[TS].n < 8 * rows || c[HDR_OFF].n < 4 * (rows + 1))
        return bad(), NULL;
    Buf o = {0};
    if (buf_of_bytes(&o, size_of_text(c, rows, pre, mid, post)) < 0)
        return NULL;
    for (Py_ssize_t r = 0; r < rows; r++) {
        Py_ssize_t batch = i32(&c[BATCH_INDEX], r), h0, h1;
        if (put_bytes_obj(&o, pre, batch) < 0)
            goto fail;
        if (bit(&c[OFFSET_VALID], r) ? put_int(&o, i64(&c[OFFSET], r)) < 0
                : (!csv && PUTS(&o, "null") < 0))
            goto fail;
        if ((csv ? PUTS(&o, ",") : PUTS(&o, ",\"timestamp\":")) < 0)
            goto fail;
        if (bit(&c[TS_VALID], r)) {
            int64_t ts = i64(&c[TS], r);
            if (ts < 0) {
                bad();
                goto fail;
            }
            if ((!csv && PUTS(&o, "\"") < 0) || put_iso(&o, ts) < 0
                    || (!csv && PUTS(&o, "\"") < 0))
                goto fail;
        } else if (!csv && PUTS(&o, "null") < 0)
            goto fail;
        if (put_bytes_obj(&o, mid, batch) < 0 || put_binary(&o, c, KEY_OFF, r, csv) < 0
                || (csv ? PUTS(&o, ",") : PUTS(&o, ",\"value\":")) < 0
                || put_binary(&o, c, VAL_OFF, r, csv) < 0
                || (csv ? PUTS(&o, ",") : PUTS(&o, ",\"headers\":")) < 0)
            goto fail;
        h0 = i32(&c[HDR_OFF], r);
        h1 = i32(&c[HDR_OFF], r + 1);
        if (h0 < 0 || h0 > h1) {
            bad();
            goto fail;
        }
        if (h0 == h1) {
            if (PUTS(&o, "[]") < 0)
                goto fail;
        } else if ((csv ? PUTS(&o, "\"[") : PUTS(&o, "[")) < 0)
            goto fail;
        for (Py_ssize_t h = h0; h < h1; h++) {
            Py_ssize_t a, b;
            if (h > h0 && (csv ? PUTS(&o, ", ") : PUTS(&o, ",")) < 0)
                goto fail;
            if ((csv ? PUTS(&o, "{\"\"key\"\": ") : PUTS(&o, "{\"key\":")) < 0
                    || range(&c[HKEY_OFF], &c[HKEY_DATA], h, &a, &b) < 0
                    || put_json_str(&o, c[HKEY_DATA].p + a, b - a, csv) < 0
                    || (csv ? PUTS(&o, ", \"\"value\"\": ") : PUTS(&o, ",\"value\":")) < 0)
                goto fail;
            if (range(&c[HVAL_OFF], &c[HVAL_DATA], h, &a, &b) < 0)
                goto fail;
            if (!bit(&c[HVAL_VALID], h)) {
                if (PUTS(&o, "null") < 0)
                    goto fail;
            } else if (put_quote(&o, csv) < 0 || put_b64(&o, c[HVAL_DATA].p + a, b - a) < 0
                       || put_quote(&o, csv) < 0)
                goto fail;
            if (PUTS(&o, "}") < 0)
                goto fail;
        }
        if (h0 != h1 && (csv ? PUTS(&o, "]\"") : PUTS(&o, "]")) < 0)
            goto fail;
        if (put_bytes_obj(&o, post, batch) < 0)
            goto fail;
        if (ends != NULL && (r + 1 == rows || i32(&c[BATCH_INDEX], r + 1) != batch)) {
            PyObject *end = PyLong_FromSsize_t(o.n);
            int rc = end == NULL ? -1 : PyList_Append(ends, end);
            Py_XDECREF(end);
            if (rc < 0)
                goto fail;
        }
    }
    return buf_bytes(&o);
fail:
    buf_free(&o);
    return NULL;
}

/* One batch field as the twin renders it (CSV: str(), None empty; JSON: json.dumps): 0; 1 where
 * the value is one the twin must render (another type, an int past int64, text CSV would
 * quote); -1 with an error. */
static int put_field(Buf *o, PyObject *v, int csv)
{
    if (v == Py_None)
        return csv ? 0 : PUTS(o, "null");
    if (v == Py_True)
        return csv ? PUTS(o, "True") : PUTS(o, "true");
    if (v == Py_False)
        return csv ? PUTS(o, "False") : PUTS(o, "false");
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return 1;
        return x == -1 && PyErr_Occurred() ? -1 : put_int(o, x);
    }
    if (!PyUnicode_CheckExact(v))
        return 1;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL) {   /* a lone surrogate: json.dumps escapes it */
        PyErr_Clear();
        return 1;
    }
    if (!csv)
        return put_json_str(o, (const unsigned char *)s, n, 0);
    if (strpbrk(s, ",\"\r\n") != NULL || (Py_ssize_t)strlen(s) != n)
        return 1;
    return buf_put(o, s, n);
}

/* fields [from, to) of a batch: CSV `sep`-joined values; JSON ,"name":value each (the
 * first's comma left out when `first`) */
static int put_fields(Buf *o, PyObject *batch, PyObject *names, int from, int to, int csv,
                      int first)
{
    for (int i = from; i < to; i++) {
        if (i > from || !first) {
            if (PUTS(o, ",") < 0)
                return -1;
        }
        if (!csv) {
            Py_ssize_t n;
            const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(names, i), &n);
            if (name == NULL || put_json_str(o, (const unsigned char *)name, n, 0) < 0
                    || PUTS(o, ":") < 0)
                return -1;
        }
        int r = put_field(o, PyTuple_GET_ITEM(batch, i), csv);
        if (r != 0)
            return r;
    }
    return 0;
}

/* The bytes of o's text from `start` appended to `list`, o back to `start` */
static int take(Buf *o, Py_ssize_t start, PyObject *list)
{
    PyObject *b = PyBytes_FromStringAndSize(o->b + start, o->n - start);
    int rc = b == NULL ? -1 : PyList_Append(list, b);
    Py_XDECREF(b);
    o->n = start;
    return rc;
}

#define BATCH_FIELDS 15
#define TS_TYPE 8

/* batch_texts(batches, csv, names) -> (pre, mid, post) or None: text.py_batch_texts, its twin
 * and specification, without a Python step per batch; None where a value is one the twin must
 * render. `names`: the BATCH_COLUMNS names. */
static PyObject *batch_texts(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *batches, *names;
    int csv;
    if (!PyArg_ParseTuple(args, "O!pO!", &PyList_Type, &batches, &csv, &PyTuple_Type, &names))
        return NULL;
    if (PyTuple_GET_SIZE(names) != BATCH_FIELDS)
        return PyErr_Format(PyExc_TypeError, "batch_texts: %d names", BATCH_FIELDS);
    for (int i = 0; i < BATCH_FIELDS; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i)))
            return PyErr_Format(PyExc_TypeError, "batch_texts: the names are str");
    PyObject *pre = PyList_New(0), *mid = PyList_New(0), *post = PyList_New(0), *out = NULL;
    Buf o = {0};
    int r = pre == NULL || mid == NULL || post == NULL ? -1 : 0;
    for (Py_ssize_t k = 0; r == 0 && k < PyList_GET_SIZE(batches); k++) {
        PyObject *b = PyList_GET_ITEM(batches, k);
        if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != BATCH_FIELDS) {
            r = 1;
            break;
        }
        Py_INCREF(b);
        if ((r = csv ? 0 : PUTS(&o, "{")) == 0
                && (r = put_fields(&o, b, names, 0, TS_TYPE, csv, 1)) == 0
                && (r = csv ? PUTS(&o, ",") : PUTS(&o, ",\"offset\":")) == 0
                && (r = take(&o, 0, pre)) == 0
                && (r = PUTS(&o, ",")) == 0
                && (r = put_fields(&o, b, names, TS_TYPE, TS_TYPE + 1, csv, 1)) == 0
                && (r = csv ? PUTS(&o, ",") : PUTS(&o, ",\"key\":")) == 0
                && (r = take(&o, 0, mid)) == 0
                && (r = put_fields(&o, b, names, TS_TYPE + 1, BATCH_FIELDS, csv, 0)) == 0
                && (r = csv ? PUTS(&o, "\n") : PUTS(&o, "}\n")) == 0)
            r = take(&o, 0, post);
        Py_DECREF(b);
        o.n = 0;
    }
    if (r == 0)
        out = PyTuple_Pack(3, pre, mid, post);
    else if (r == 1)
        out = Py_NewRef(Py_None);
    buf_free(&o);
    Py_XDECREF(pre);
    Py_XDECREF(mid);
    Py_XDECREF(post);
    return out;
}

static PyObject *csv_text(PyObject *self, PyObject *args)
{
    (void)self;
    return text(args, 1);
}

static PyObject *jsonl_text(PyObject *self, PyObject *args)
{
    (void)self;
    return text(args, 0);
}

static PyMethodDef methods[] = {
    {"csv_text", csv_text, METH_VARARGS, "csv_text(buffers, pre, mid, post[, ends]) -> bytes"},
    {"jsonl_text", jsonl_text, METH_VARARGS,
     "jsonl_text(buffers, pre, mid, post[, ends]) -> bytes"},
    {"batch_texts", batch_texts, METH_VARARGS,
     "batch_texts(batches, csv, names) -> (pre, mid, post), or None for the Python twin"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_text", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__text(void)
{
    fill_pairs();
    return PyModule_Create(&module);
}

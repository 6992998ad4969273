/* One exchange row as a CSV line, compiled: output.plain_line (the pure-Python twin) says what it
 * does; this does the same for speed (the CSV writer took a fifth of the header level's time).
 * Keep the two in step: the tests compare them on random rows.
 *
 * csv_line(row, ts_at, topics_at) -> str or None: the values of `row` (a tuple) joined by commas
 * and ended by a line break, None as empty, the columns at `ts_at` (ns since the epoch) as UTC
 * ISO 8601 with nanoseconds (empty outside the years 1-9999), the list at `topics_at` joined by
 * ";", anything else as str() gives it. None when a value needs CSV quoting (a comma, a quote
 * or a line break in it), a timestamp is not an int of 64 bits or a string has no UTF-8: the
 * caller takes the slow path. Written straight into one buffer: no string per value.
 *
 * csv_line(row, ts_at, topics_at, holes) -> tuple of str or None: the same line cut at the
 * columns `holes` (ascending), their values left out: len(holes) + 1 pieces between which those
 * values go (a parallel run's workers write lines before they know the numbers in them). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "_isotime.h"

#define NS 1000000000LL
#define FIRST_SECOND (-62135596800LL)   /* 0001-01-01T00:00:00Z */
#define LAST_SECOND 253402300799LL      /* 9999-12-31T23:59:59Z */

static PyObject *semicolon;

/* the line being built, UTF-8 */
typedef struct {
    char *b;
    Py_ssize_t n, cap;
    char small[512];
} Buf;

static int room(Buf *o, Py_ssize_t more)
{
    if (o->n + more <= o->cap)
        return 0;
    Py_ssize_t cap = (o->n + more) * 2;
    char *b = PyMem_Malloc(cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(b, o->b, o->n);
    if (o->b != o->small)
        PyMem_Free(o->b);
    o->b = b;
    o->cap = cap;
    return 0;
}

/* text with no comma, quote or line break, else 1 (quoting needed); -1 on error */
static int put(Buf *o, const char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] == ',' || s[i] == '"' || s[i] == '\r' || s[i] == '\n')
            return 1;
    if (room(o, n) < 0)
        return -1;
    memcpy(o->b + o->n, s, n);
    o->n += n;
    return 0;
}

static int put_str(Buf *o, PyObject *s)
{
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);   /* ASCII: the string's own bytes */
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
        PyErr_Clear();   /* a lone surrogate: the slow path */
        return 1;
    }
    return u == NULL ? -1 : put(o, u, n);
}

/* an integer in decimal (snprintf took two fifths of a row's time) */
static int put_int(Buf *o, long long x)
{
    char text[24], *end = text + sizeof text, *p = end;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--p = '-';
    if (room(o, end - p) < 0)
        return -1;
    memcpy(o->b + o->n, p, end - p);
    o->n += end - p;
    return 0;
}

/* the last second formatted: an exchange's four times share one or two */
static long long cached_secs = LLONG_MIN;
static char cached_prefix[20];   /* YYYY-MM-DDTHH:MM:SS */

/* timestamp `v` (ns); 1 when it is not a 64-bit int (the slow path formats it) */
static int put_timestamp(Buf *o, PyObject *v)
{
    if (!PyLong_Check(v))
        return 1;
    int overflow;
    long long ts = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow)
        return 1;
    if (ts == -1 && PyErr_Occurred())
        return -1;
    long long secs = ts / NS, ns = ts % NS;
    if (ns < 0) {   /* floor division, as divmod */
        ns += NS;
        secs -= 1;
    }
    if (secs < FIRST_SECOND || secs > LAST_SECOND)
        return 0;   /* out of range: empty */
    if (secs != cached_secs) {
        iso_seconds(cached_prefix, secs);
        cached_secs = secs;
    }
    if (room(o, 30) < 0)
        return -1;
    memcpy(o->b + o->n, cached_prefix, 19);
    iso_fraction(o->b + o->n + 19, ns);
    o->n += 30;
    return 0;
}

/* repr(x) for a whole number of millionths with at most 15 digits (the latency columns are ns
 * / 1e6): 1 when written, 0 when x is not one (the general repr). x is the double nearest the
 * decimal d / 10**6 (the division is correctly rounded), and decimals of at most 15 significant
 * digits (DBL_DIG) are told apart by their doubles, so the shortest decimal that round-trips,
 * which repr writes, is d / 10**6's digits: written as repr lays them out (fixed notation for a
 * decimal point position from -3 to 16, else d.ddde-XX). */
static int put_millionths(Buf *o, double x)
{
    if (!(x != 0 && fabs(x) < 1e9))   /* (0 and -0.0, nan and inf: the general repr) */
        return 0;
    long long d = llround(x * 1e6);
    if ((double)d / 1e6 != x || d == 0 || llabs(d) >= 1000000000000000LL)
        return 0;
    unsigned long long u = d < 0 ? 0ULL - (unsigned long long)d : (unsigned long long)d;
    int zeros = 0;
    while (u % 10 == 0) {
        u /= 10;
        zeros++;
    }
    char digits[20], text[48];
    int len = 0, n = 0;
    for (unsigned long long t = u; t; t /= 10)
        digits[len++] = (char)('0' + t % 10);
    for (int i = 0; i < len / 2; i++) {   /* most significant first */
        char c = digits[i];
        digits[i] = digits[len - 1 - i];
        digits[len - 1 - i] = c;
    }
    int decpt = len + zeros - 6;   /* the value is 0.digits * 10**decpt */
    if (d < 0)
        text[n++] = '-';
    if (decpt <= -4 || decpt > 16) {
        text[n++] = digits[0];
        if (len > 1) {
            text[n++] = '.';
            memcpy(text + n, digits + 1, len - 1);
            n += len - 1;
        }
        int e = decpt - 1;
        n += sprintf(text + n, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    } else if (decpt <= 0) {
        text[n++] = '0';
        text[n++] = '.';
        for (int i = 0; i < -decpt; i++)
            text[n++] = '0';
        memcpy(text + n, digits, len);
        n += len;
    } else if (decpt >= len) {
        memcpy(text + n, digits, len);
        n += len;
        for (int i = len; i < decpt; i++)
            text[n++] = '0';
        text[n++] = '.';
        text[n++] = '0';
    } else {
        memcpy(text + n, digits, decpt);
        n += decpt;
        text[n++] = '.';
        memcpy(text + n, digits + decpt, len - decpt);
        n += len - decpt;
    }
    return put(o, text, n) < 0 ? -1 : 1;
}

static int put_value(Buf *o, PyObject *v, int is_ts, int is_topics)
{
    if (v == Py_None)
        return 0;
    if (is_ts)
        return put_timestamp(o, v);
    if (PyUnicode_CheckExact(v))
        return put_str(o, v);
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow)   /* an exact int: overflow is its only failure */
            return put_int(o, x);
    } else if (PyFloat_CheckExact(v)) {   /* repr, as str() gives it */
        int done = put_millionths(o, PyFloat_AS_DOUBLE(v));
        if (done)
            return done < 0 ? -1 : 0;
        char *text = PyOS_double_to_string(PyFloat_AS_DOUBLE(v), 'r', 0, Py_DTSF_ADD_DOT_0,
                                           NULL);
        if (text == NULL)
            return -1;
        int rc = put(o, text, strlen(text));
        PyMem_Free(text);
        return rc;
    }
    PyObject *s = is_topics ? PyUnicode_Join(semicolon, v) : PyObject_Str(v);
    if (s == NULL)
        return -1;
    int rc = put_str(o, s);
    Py_DECREF(s);
    return rc;
}

/* The line's pieces between the holes (cut at offsets `cuts`), each decoded on its own: a cut
 * is next to a comma, never inside a character. */
static PyObject *pieces(const Buf *o, const Py_ssize_t *cuts, Py_ssize_t k)
{
    PyObject *out = PyTuple_New(k + 1);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j <= k; j++) {
        Py_ssize_t from = j ? cuts[j - 1] : 0, to = j < k ? cuts[j] : o->n;
        PyObject *piece = PyUnicode_DecodeUTF8(o->b + from, to - from, "strict");
        if (piece == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, j, piece);
    }
    return out;
}

#define MAX_HOLES 8

static PyObject *csv_line(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 3 && nargs != 4) || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])
            || (nargs == 4 && !PyTuple_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError,
                        "csv_line(row: tuple, ts_at: tuple, topics_at: int[, holes: tuple])");
        return NULL;
    }
    PyObject *row = args[0], *ts_at = args[1];
    Py_ssize_t topics_at = PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    if (topics_at == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(row), k = PyTuple_GET_SIZE(ts_at), next_ts = 0;
    Py_ssize_t holes[MAX_HOLES], cuts[MAX_HOLES], nholes = 0, next_hole = 0;
    if (nargs == 4) {
        nholes = PyTuple_GET_SIZE(args[3]);
        if (nholes > MAX_HOLES) {
            PyErr_SetString(PyExc_ValueError, "csv_line: at most 8 holes");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < nholes; j++) {
            holes[j] = PyNumber_AsSsize_t(PyTuple_GET_ITEM(args[3], j), PyExc_OverflowError);
            if (holes[j] == -1 && PyErr_Occurred())
                return NULL;
            if (holes[j] < 0 || holes[j] >= n || (j && holes[j] <= holes[j - 1])) {
                PyErr_SetString(PyExc_ValueError, "csv_line: holes are ascending columns");
                return NULL;
            }
        }
    }
    Buf o = {.n = 0, .cap = sizeof o.small};
    o.b = o.small;
    PyObject *line = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int is_ts = 0;
        while (next_ts < k) {   /* ts_at is in column order */
            Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(ts_at, next_ts));
            if (at == -1 && PyErr_Occurred())
                goto done;
            if (at > i)
                break;
            next_ts++;
            is_ts |= at == i;
        }
        if (i) {   /* the separator */
            if (room(&o, 1) < 0)
                goto done;
            o.b[o.n++] = ',';
        }
        if (next_hole < nholes && holes[next_hole] == i) {   /* its value left out */
            cuts[next_hole++] = o.n;
            continue;
        }
        int rc = put_value(&o, PyTuple_GET_ITEM(row, i), is_ts, i == topics_at);
        if (rc < 0)
            goto done;
        if (rc) {
            line = Py_None;
            Py_INCREF(line);
            goto done;
        }
    }
    if (room(&o, 1) < 0)
        goto done;
    o.b[o.n++] = '\n';
    line = nargs == 4 ? pieces(&o, cuts, nholes) : PyUnicode_DecodeUTF8(o.b, o.n, "strict");
done:
    if (o.b != o.small)
        PyMem_Free(o.b);
    return line;
}

static PyMethodDef methods[] = {
    {"csv_line", (PyCFunction)(void (*)(void))csv_line, METH_FASTCALL,
     "csv_line(row, ts_at, topics_at[, holes]) -> str, tuple of str (with holes) or None"},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_csvrow", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__csvrow(void)
{
    semicolon = PyUnicode_InternFromString(";");
    if (semicolon == NULL)
        return NULL;
    return PyModule_Create(&module);
}

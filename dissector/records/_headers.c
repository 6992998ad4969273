/* A record set's batch headers, compiled: record_set's headers-only walk (decode_record_set with
 * records=False, through record_batch.decode) says what it does, for the usual record set of
 * RecordBatch v2 only; this does the same for speed (a fifth of the bodies level). walk_set does
 * the records level too (records=True: every record checked, checked_set) for sets of
 * uncompressed v2 batches without a fault, where a batch is often a single record (message-dense
 * traffic) and decode's Python per batch was most of the records table's time.
 *
 * v2_headers(data, Batch, RecordSet, crc32c) -> RecordSet or None. Each batch of `data`
 * (bytes-like) is parsed as record_batch.decode parses it headers-only: a Batch with the same
 * fields, crc_ok from crc32c(data[pos + 21:end]) (crc32c None: not checked, crc_ok None), no
 * records. A partial last batch sets truncated, as there. None as soon as the set holds
 * anything that would make an Issue (a length under the minimum, a magic other than 2, a CRC
 * mismatch, a negative record count): the Python walk then does all of it and says what. The
 * tests compare the two on random record sets. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#include "_batchsums.h"
#include "_recordcheck.h"

#define HEADER_SIZE 61
#define MIN_LENGTH (HEADER_SIZE - 12)

/* RecordSet's fields, in the order set below */
static const char *set_names[] = {"batches", "issues", "truncated", "size", "record_count", NULL};
#define SET_FIELDS 5

/* Batch's fields, in the order set below */
static const char *names[] = {
    "offset_in_set", "size", "magic", "base_offset", "partition_leader_epoch", "codec",
    "timestamp_type", "is_transactional", "is_control", "last_offset_delta", "first_timestamp",
    "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count",
    "uncompressed_size", "crc_ok", "control", "_deferred", "records", NULL};   /* records last */
#define FIELDS 21
static PyObject *no_args, *zero;
static PyObject *s_issues, *s_batches, *s_record_count, *s_size, *s_codec, *s_uncompressed_size;

/* Where a class keeps each field (its __slots__ are plain object members): stored straight
 * there, as the member's own setter does, not through an attribute lookup each. */
typedef struct {
    PyTypeObject *type;
    int n;
    const char **names;
    PyObject *interned[FIELDS];
    Py_ssize_t offsets[FIELDS];
} Layout;

static Layout batch_layout = {.n = FIELDS, .names = names};
static Layout set_layout = {.n = SET_FIELDS, .names = set_names};

static int layout(Layout *l, PyTypeObject *type)
{
    if (type == l->type)
        return 0;
    for (int i = 0; i < l->n; i++) {
        PyObject *d = PyObject_GetAttr((PyObject *)type, l->interned[i]);
        int slot = d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (slot)
            l->offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_XDECREF(d);
        if (!slot) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, l->names[i]);
            return -1;
        }
    }
    Py_XSETREF(l->type, (PyTypeObject *)Py_NewRef(type));
    return 0;
}

/* A new object of the laid-out class with its first `n` fields set to `values` (references
 * stolen, even on failure), the others unset; NULL on failure. */
static PyObject *make_first(Layout *l, PyObject **values, int n)
{
    PyObject *obj = NULL;
    for (int i = 0; i < n; i++)
        if (values[i] == NULL)
            goto done;
    obj = PyBaseObject_Type.tp_new(l->type, no_args, NULL);
    for (int i = 0; obj != NULL && i < n; i++) {
        PyObject **slot = (PyObject **)((char *)obj + l->offsets[i]);
        Py_XSETREF(*slot, Py_NewRef(values[i]));
    }
done:
    for (int i = 0; i < n; i++)
        Py_XDECREF(values[i]);
    return obj;
}

static PyObject *make(Layout *l, PyObject **values)
{
    return make_first(l, values, l->n);
}

static int64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    if (n < 8 && (v >> (8 * n - 1)))   /* sign-extend */
        v |= ~(uint64_t)0 << (8 * n);
    return (int64_t)v;
}

/* The Batch of the v2 batch at b[pos:pos + size]; NULL with no error when its CRC or count
 * would make an Issue. */
static PyObject *batch(PyObject *crc32c, PyObject *view, const unsigned char *b, Py_ssize_t pos,
                       Py_ssize_t size)
{
    const unsigned char *h = b + pos;
    int64_t count = be(h + 57, 4);
    if (count < 0)
        return NULL;
    PyObject *crc_ok = Py_None;
    Py_INCREF(crc_ok);
    if (crc32c != Py_None) {
        PyObject *part = PySequence_GetSlice(view, pos + 21, pos + size), *got = NULL;
        if (part != NULL)
            got = PyObject_CallOneArg(crc32c, part);
        Py_XDECREF(part);
        Py_DECREF(crc_ok);
        if (got == NULL)
            return NULL;
        unsigned long crc = PyLong_AsUnsignedLong(got);
        Py_DECREF(got);
        if (crc == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (crc != (unsigned long)(uint32_t)be(h + 17, 4))
            return NULL;
        crc_ok = Py_True;
        Py_INCREF(crc_ok);
    }
    int attributes = (int)be(h + 21, 2);
    PyObject *values[FIELDS] = {
        PyLong_FromSsize_t(pos), PyLong_FromSsize_t(size), PyLong_FromLong(2),
        PyLong_FromLongLong(be(h, 8)), PyLong_FromLongLong(be(h + 12, 4)),
        PyLong_FromLong(attributes & 7), PyLong_FromLong((attributes >> 3) & 1),
        PyBool_FromLong(attributes & 0x10), PyBool_FromLong(attributes & 0x20),
        PyLong_FromLongLong(be(h + 23, 4)), PyLong_FromLongLong(be(h + 27, 8)),
        PyLong_FromLongLong(be(h + 35, 8)), PyLong_FromLongLong(be(h + 43, 8)),
        PyLong_FromLongLong(be(h + 51, 2)), PyLong_FromLongLong(be(h + 53, 4)),
        PyLong_FromLongLong(count), Py_NewRef(Py_None), crc_ok, Py_NewRef(Py_None),
        Py_NewRef(Py_None), Py_NewRef(Py_None)};
    return make(&batch_layout, values);
}

/* What makes each batch of a set: NULL with no error where the Python walk must take the set */
typedef PyObject *(*batch_maker)(const unsigned char *b, Py_ssize_t pos, Py_ssize_t size,
                                 void *arg);

/* The RecordSet of the v2 batches of b[:n], each made by `one` (a partial last batch sets
 * truncated, as the Python walk does); None for the Python walk; NULL on an error. */
static PyObject *v2_set(const unsigned char *b, Py_ssize_t n, batch_maker one, void *arg)
{
    Py_ssize_t pos = 0;
    int truncated = 0;
    long long count = 0;
    PyObject *batches = PyList_New(0), *result = NULL;
    if (batches == NULL)
        return NULL;
    while (pos < n) {
        if (n - pos < 17) {
            truncated = 1;
            break;
        }
        int64_t length = be(b + pos + 8, 4);
        if (b[pos + 16] != 2 || length < MIN_LENGTH)
            goto python;
        Py_ssize_t size = (Py_ssize_t)length + 12;
        if (pos + size > n) {
            truncated = 1;
            break;
        }
        PyObject *made = one(b, pos, size, arg);
        if (made == NULL) {
            if (PyErr_Occurred())
                goto done;
            goto python;
        }
        int rc = PyList_Append(batches, made);
        Py_DECREF(made);
        if (rc < 0)
            goto done;
        count += be(b + pos + 57, 4);
        pos += size;
    }
    PyObject *values[SET_FIELDS] = {Py_NewRef(batches), PyList_New(0),
                                    PyBool_FromLong(truncated), PyLong_FromSsize_t(n),
                                    PyLong_FromLongLong(count)};
    result = make(&set_layout, values);
    goto done;
python:
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(batches);
    return result;
}

typedef struct {
    PyObject *crc32c, *view;
} HeadersArg;

static PyObject *header_batch(const unsigned char *b, Py_ssize_t pos, Py_ssize_t size, void *arg)
{
    HeadersArg *a = arg;
    return batch(a->crc32c, a->view, b, pos, size);
}

/* The headers-only walk of `data`: RecordSet, None for the Python walk, NULL on an error. */
static PyObject *headers(PyObject *data, PyObject *crc32c)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();   /* not one contiguous buffer: the Python walk */
        Py_RETURN_NONE;
    }
    /* the CRC is taken of views of this one (as the Python walk takes them of its view) */
    HeadersArg arg = {crc32c, crc32c == Py_None ? Py_NewRef(Py_None)
                                                : PyMemoryView_FromObject(data)};
    PyObject *result = arg.view == NULL ? NULL
        : v2_set(view.buf, view.len, header_batch, &arg);
    Py_XDECREF(arg.view);
    PyBuffer_Release(&view);
    return result;
}

/* A tuple of `n` new references (stolen, even on failure); NULL if one is NULL or on failure */
static PyObject *tuple_of(PyObject **items, int n)
{
    PyObject *t = NULL;
    for (int i = 0; i < n; i++)
        if (items[i] == NULL)
            goto done;
    if ((t = PyTuple_New(n)) != NULL)
        for (int i = 0; i < n; i++)
            PyTuple_SET_ITEM(t, i, Py_NewRef(items[i]));
done:
    for (int i = 0; i < n; i++)
        Py_XDECREF(items[i]);
    return t;
}

/* The records level's settings, from configure: record_batch._build_records (what a deferred
 * batch's records are built with) and model.RECORD_COST (what the budget pays a record). */
static PyObject *walk_build;
static long long record_cost = 1;

/* The Batch of the v2 batch at b[pos:pos + size] with every record checked, as
 * record_batch.decode makes it with want_records (its records deferred: `records` unset), its
 * records paid from the budget `arg` points to (a long long of bytes); NULL with no error where
 * decode would report an issue or take another way (a compressed or control batch, a budget
 * too small for it). */
static PyObject *checked_batch(const unsigned char *b, Py_ssize_t pos, Py_ssize_t size,
                               void *arg)
{
    long long *remaining = arg;
    const unsigned char *h = b + pos;
    int64_t count = be(h + 57, 4);
    int attributes = (int)be(h + 21, 2);
    Py_ssize_t body_size = size - HEADER_SIZE;
    if (count < 0 || (attributes & 0x27) || count > *remaining / record_cost
            || crc32c(h + 21, (size_t)(size - 21)) != (uint32_t)be(h + 17, 4)
            || (count ? check_records_end(h + HEADER_SIZE, body_size, (Py_ssize_t)count)
                        != body_size : body_size != 0))
        return NULL;
    int64_t max_ts = be(h + 35, 8);
    /* (count, walk_build, (body, count, base offset, first timestamp, max timestamp or None)),
     * built item by item: Py_BuildValue's format was a tenth of this function */
    PyObject *n = PyLong_FromLongLong(count), *deferred = NULL;
    PyObject *parse[5] = {
        PyBytes_FromStringAndSize((const char *)h + HEADER_SIZE, body_size), Py_XNewRef(n),
        PyLong_FromLongLong(be(h, 8)), PyLong_FromLongLong(be(h + 27, 8)),
        (attributes >> 3) & 1 ? PyLong_FromLongLong(max_ts) : Py_NewRef(Py_None)};
    PyObject *args = tuple_of(parse, 5);
    if (n != NULL && args != NULL && (deferred = PyTuple_New(3)) != NULL) {
        PyTuple_SET_ITEM(deferred, 0, Py_NewRef(n));
        PyTuple_SET_ITEM(deferred, 1, Py_NewRef(walk_build));
        PyTuple_SET_ITEM(deferred, 2, Py_NewRef(args));
    }
    Py_XDECREF(n);
    Py_XDECREF(args);
    PyObject *values[FIELDS - 1] = {
        PyLong_FromSsize_t(pos), PyLong_FromSsize_t(size), PyLong_FromLong(2),
        PyLong_FromLongLong(be(h, 8)), PyLong_FromLongLong(be(h + 12, 4)),
        PyLong_FromLong(0), PyLong_FromLong((attributes >> 3) & 1),
        PyBool_FromLong(attributes & 0x10), Py_NewRef(Py_False),
        PyLong_FromLongLong(be(h + 23, 4)), PyLong_FromLongLong(be(h + 27, 8)),
        PyLong_FromLongLong(max_ts), PyLong_FromLongLong(be(h + 43, 8)),
        PyLong_FromLongLong(be(h + 51, 2)), PyLong_FromLongLong(be(h + 53, 4)),
        PyLong_FromLongLong(count), Py_NewRef(Py_None), Py_NewRef(Py_True), Py_NewRef(Py_None),
        deferred};
    PyObject *one = make_first(&batch_layout, values, FIELDS - 1);
    if (one != NULL)
        *remaining -= count * record_cost;
    return one;
}

/* The records level of `data` (decode_record_set(data, records=True, budget=budget)) where
 * every batch is an uncompressed v2 one whose records all check: the RecordSet, the budget
 * paid; None for the Python walk (which then does all of it and says what is wrong), the
 * budget untouched; NULL on an error. */
static PyObject *checked_set(PyObject *data, PyObject *budget)
{
    if (walk_build == NULL || !PyList_CheckExact(budget) || PyList_GET_SIZE(budget) != 1)
        Py_RETURN_NONE;
    long long remaining = PyLong_AsLongLong(PyList_GET_ITEM(budget, 0));
    Py_buffer view;
    if (remaining < 0 || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        /* spent (decode reports it), past int64, or not one contiguous buffer: the Python walk */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *result = v2_set(view.buf, view.len, checked_batch, &remaining);
    PyBuffer_Release(&view);
    if (result != NULL && result != Py_None) {   /* the budget paid */
        PyObject *paid = PyLong_FromLongLong(remaining);
        if (paid == NULL)
            Py_CLEAR(result);
        else
            PyList_SetItem(budget, 0, paid);
    }
    return result;
}

/* Batch and RecordSet (checked to be types by the caller) laid out: 0, or -1 with an error. */
static int layouts(PyObject *batch_type, PyObject *set_type)
{
    return layout(&batch_layout, (PyTypeObject *)batch_type) < 0
        || layout(&set_layout, (PyTypeObject *)set_type) < 0 ? -1 : 0;
}

static PyObject *v2_headers(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *data, *batch_type, *set_type, *crc32c;
    if (!PyArg_ParseTuple(args, "OO!O!O", &data, &PyType_Type, &batch_type, &PyType_Type,
                          &set_type, &crc32c) || layouts(batch_type, set_type) < 0)
        return NULL;
    return headers(data, crc32c);
}

/* walk_set's setting, from configure */
static PyObject *walk_crc, *walk_fallback, *fallback_kwnames;

/* The summary walk's call for each `records` field (walk_set(data, records, budget)), without
 * going through Python: at the bodies level an empty set and a v2-only one made here, at the
 * records level one of uncompressed v2 batches whose records all check (checked_set), anything
 * else by the fallback, decode_record_set. */
static PyObject *walk_set(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || walk_fallback == NULL)
        return PyErr_Format(PyExc_TypeError, "walk_set(data, records, budget) after configure");
    int records = PyObject_IsTrue(args[1]);
    if (records < 0)
        return NULL;
    if (!records) {
        Py_ssize_t n = PyObject_Length(args[0]);
        if (n < 0)
            PyErr_Clear();
        else if (n == 0) {   /* null or empty (most partitions of a Fetch response) */
            PyObject *values[SET_FIELDS] = {PyList_New(0), PyList_New(0), Py_NewRef(Py_False),
                                            PyLong_FromLong(0), PyLong_FromLong(0)};
            return make(&set_layout, values);
        }
        PyObject *rs = headers(args[0], walk_crc);
        if (rs != Py_None)
            return rs;
        Py_DECREF(rs);
    }
    else {
        PyObject *rs = checked_set(args[0], args[2]);
        if (rs != Py_None)
            return rs;
        Py_DECREF(rs);
    }
    PyObject *call[3] = {args[0], args[1], args[2]};   /* data, records=, budget= */
    return PyObject_Vectorcall(walk_fallback, call, 1, fallback_kwnames);
}

/* A headers-only RecordSet's sums as set_sums gives them, or the set itself when it holds
 * issues (a new reference; rs's is taken). */
static PyObject *sums_of(PyObject *rs)
{
    PyObject *issues = PyObject_GetAttr(rs, s_issues), *batches = NULL, *out = NULL;
    PyObject *count = NULL, *size = NULL, *unc = PyLong_FromLong(0);
    int any = issues == NULL ? -1 : PyObject_IsTrue(issues);
    if (any != 0 || unc == NULL) {
        out = any > 0 ? Py_NewRef(rs) : NULL;
        goto done;
    }
    if ((batches = PyObject_GetAttr(rs, s_batches)) == NULL
            || (count = PyObject_GetAttr(rs, s_record_count)) == NULL
            || (size = PyObject_GetAttr(rs, s_size)) == NULL)
        goto done;
    PyObject *it = PyObject_GetIter(batches), *b;
    if (it == NULL)
        goto done;
    while (unc != Py_None && (b = PyIter_Next(it)) != NULL) {   /* py_set_sums' loop */
        PyObject *codec = PyObject_GetAttr(b, s_codec), *n = NULL;
        int plain = codec == NULL ? -1 : PyObject_RichCompareBool(codec, zero, Py_EQ);
        if (plain >= 0)
            n = PyObject_GetAttr(b, plain ? s_size : s_uncompressed_size);
        Py_XDECREF(codec);
        Py_DECREF(b);
        if (n == NULL)
            break;
        Py_SETREF(unc, n == Py_None ? Py_NewRef(Py_None) : PyNumber_Add(unc, n));
        Py_DECREF(n);
        if (unc == NULL)
            break;
    }
    Py_DECREF(it);
    if (!PyErr_Occurred())
        out = PyTuple_Pack(3, count, size, unc);
done:
    Py_DECREF(rs);
    Py_XDECREF(issues);
    Py_XDECREF(batches);
    Py_XDECREF(count);
    Py_XDECREF(size);
    Py_XDECREF(unc);
    return out;
}

/* set_sums(data, records, budget): for the summary walk, walk_set's RecordSet; or where it
 * would be a v2-only set headers-only without issues (records false), only what the walk takes
 * of it: (records, bytes, uncompressed bytes or None). Twin: record_set.py_set_sums. */
static PyObject *set_sums(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || walk_fallback == NULL)
        return PyErr_Format(PyExc_TypeError, "set_sums(data, records, budget) after configure");
    int records = PyObject_IsTrue(args[1]);
    if (records < 0)
        return NULL;
    Py_buffer view;
    if (!records && PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) == 0) {
        long long count, unc;
        int fast = batch_sums(view.buf, view.len, walk_crc != Py_None, &count, &unc);
        Py_ssize_t n = view.len;
        PyBuffer_Release(&view);
        if (fast) {
            PyObject *items[3] = {PyLong_FromLongLong(count), PyLong_FromSsize_t(n),
                                  unc < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(unc)};
            PyObject *out = items[0] && items[1] && items[2] ? PyTuple_New(3) : NULL;
            for (int i = 0; i < 3; i++) {
                if (out != NULL)
                    PyTuple_SET_ITEM(out, i, items[i]);
                else
                    Py_XDECREF(items[i]);
            }
            return out;
        }
    }
    PyErr_Clear();   /* not one contiguous buffer: walk_set's fallback says */
    PyObject *rs = walk_set(module, args, nargs);
    return rs == NULL || records ? rs : sums_of(rs);
}

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *batch_type, *set_type, *crc32c, *fallback, *build;
    long long cost;
    if (!PyArg_ParseTuple(args, "O!O!OOOL", &PyType_Type, &batch_type, &PyType_Type, &set_type,
                          &crc32c, &fallback, &build, &cost) || layouts(batch_type, set_type) < 0)
        return NULL;
    if (cost < 1)
        return PyErr_Format(PyExc_ValueError, "a record's cost must be positive");
    Py_XSETREF(walk_crc, Py_NewRef(crc32c));
    Py_XSETREF(walk_fallback, Py_NewRef(fallback));
    Py_XSETREF(walk_build, Py_NewRef(build));
    record_cost = cost;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"v2_headers", v2_headers, METH_VARARGS,
     "v2_headers(data, Batch, RecordSet, crc32c) -> RecordSet or None"},
    {"walk_set", (PyCFunction)(void (*)(void))walk_set, METH_FASTCALL,
     "walk_set(data, records, budget) -> RecordSet: decode_record_set's, for the summary walk"},
    {"set_sums", (PyCFunction)(void (*)(void))set_sums, METH_FASTCALL,
     "set_sums(data, records, budget) -> RecordSet or (records, bytes, uncompressed bytes)"},
    {"configure", configure, METH_VARARGS,
     "configure(Batch, RecordSet, crc32c, decode_record_set, build_records, record_cost): what "
     "walk_set makes and calls"},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_headers", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__headers(void)
{
    Layout *layouts[] = {&batch_layout, &set_layout};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < layouts[k]->n; i++) {
            layouts[k]->interned[i] = PyUnicode_InternFromString(layouts[k]->names[i]);
            if (layouts[k]->interned[i] == NULL)
                return NULL;
        }
    no_args = PyTuple_New(0);
    zero = PyLong_FromLong(0);
    struct { PyObject **at; const char *s; } attrs[] = {
        {&s_issues, "issues"}, {&s_batches, "batches"}, {&s_record_count, "record_count"},
        {&s_size, "size"}, {&s_codec, "codec"}, {&s_uncompressed_size, "uncompressed_size"}};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
        if ((*attrs[i].at = PyUnicode_InternFromString(attrs[i].s)) == NULL)
            return NULL;
    fallback_kwnames = Py_BuildValue("(ss)", "records", "budget");
    if (no_args == NULL || zero == NULL || fallback_kwnames == NULL)
        return NULL;
    return PyModule_Create(&module);
}

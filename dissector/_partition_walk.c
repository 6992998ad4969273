/* A decoded body's partitions into column lists, compiled: partition_walk.py's py_walk_side (the
 * pure-Python twin) is the specification; this does the same without a Python call per partition
 * or record set. The tests compare the two on every shipped capture and on mutated ones.
 *
 * configure(codec_names, batch_overhead, Irregular, zero_uuid) once, then
 * walk_side(cols, start, topics, side, layout, shape, tupled=False) -> shape and
 * walk_exchange(cols, start, sides, req, resp, layout, offsets, tupled=False) -> rows, as the
 * twin: the same attributes read in the same order, the same values written into the same lists,
 * Irregular (or the error an attribute read raises) where it raises. `tupled`: the topics are
 * the byte walk's groups (Summary.groups), not decoded topic entries. */
#define PY_SSIZE_T_CLEAN
#include "_attrs.h"

static PyObject *codec_names, *batch_overhead, *irregular, *zero_id, *one, *two, *zero;
static PyObject *s_name, *s_topic, *s_topic_id, *s_size, *s_record_count, *s_batches, *s_offset,
    *s_old_style_offsets;

#define NREC 12   /* partition_walk.RECORD_COLUMNS */

/* The fields of records.model.Batch, read from its slots where they are set (_attrs.h: a plain
 * attribute lookup each was most of the walk's time); a record set's own `size` and
 * `record_count` are read by name, so that the two classes do not rebind one Slot in turn. */
#define BATCH_FIELDS(X) X(record_count) X(is_control) X(base_offset) X(last_offset_delta) \
    X(codec) X(uncompressed_size) X(size) X(magic) X(producer_id) X(producer_epoch) \
    X(base_sequence) X(is_transactional)
#define BATCH_DECLARE(n) static Slot b_##n;
#define BATCH_INTERN(n) if ((b_##n.name = PyUnicode_InternFromString(#n)) == NULL) return NULL;
BATCH_FIELDS(BATCH_DECLARE)

/* o.name is None (1 or 0), or -1 on error */
static int attr_none(Slot *name, PyObject *o)
{
    PyObject *v = attr_get(name, o);
    int r = v == NULL ? -1 : v == Py_None;
    Py_XDECREF(v);
    return r;
}

/* cols[col], a list (borrowed); NULL with IndexError or TypeError */
static PyObject *column_at(PyObject *cols, Py_ssize_t col)
{
    if (col < 0 || col >= PyList_GET_SIZE(cols)) {
        PyErr_SetString(PyExc_IndexError, "column out of range");
        return NULL;
    }
    PyObject *column = PyList_GET_ITEM(cols, col);
    if (!PyList_Check(column)) {
        PyErr_SetString(PyExc_TypeError, "a column is not a list");
        return NULL;
    }
    return column;
}

/* cols[col] padded with None to `rows` values (borrowed); NULL with an error */
static PyObject *padded(PyObject *cols, Py_ssize_t col, Py_ssize_t rows)
{
    PyObject *column = column_at(cols, col);
    while (column != NULL && PyList_GET_SIZE(column) < rows)
        if (PyList_Append(column, Py_None) < 0)
            return NULL;
    return column;
}

/* column[row] = value after padding with None to row */
static int put(PyObject *cols, Py_ssize_t col, Py_ssize_t row, PyObject *value)
{
    PyObject *column = padded(cols, col, row);
    return column == NULL ? -1 : PyList_Append(column, value);
}

static int raise_irregular(const char *why)
{
    PyErr_SetString(irregular, why);
    return -1;
}

/* sum(f(b) for the batches b whose flag is set) from 0 (every batch when flags is NULL), f
 * reading attribute `name`, minus the magic's overhead when `overhead`; a new reference */
static PyObject *sum_of(PyObject *batches, const char *flags, Slot *name, int overhead)
{
    PyObject *total = Py_NewRef(zero);
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(batches); i++) {
        if (flags != NULL && !flags[i])
            continue;
        PyObject *c = PySequence_Fast_GET_ITEM(batches, i);
        PyObject *v = attr_get(name, c);
        if (v == NULL)
            goto fail;
        if (overhead) {
            PyObject *magic = attr_get(&b_magic, c), *o = NULL;
            if (magic != NULL) {
                o = PyDict_GetItemWithError(batch_overhead, magic);
                if (o == NULL && !PyErr_Occurred())
                    o = zero;
                Py_DECREF(magic);
            }
            PyObject *d = o == NULL ? NULL : PyNumber_Subtract(v, o);
            Py_DECREF(v);
            if (d == NULL)
                goto fail;
            v = d;
        }
        PyObject *t = PyNumber_Add(total, v);
        Py_DECREF(v);
        Py_SETREF(total, t);
        if (total == NULL)
            return NULL;
    }
    return total;
fail:
    Py_DECREF(total);
    return NULL;
}

/* first and last offsets of the data (not control) batches into v[3], v[4] when known */
static int offsets(PyObject *batches, PyObject **v)
{
    Py_ssize_t first = -1, last = -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(batches); i++) {
        int control = attr_true(&b_is_control, PySequence_Fast_GET_ITEM(batches, i));
        if (control < 0)
            return -1;
        if (!control) {
            last = i;
            if (first < 0)
                first = i;
        }
    }
    if (first < 0)
        return 0;
    PyObject *base = attr_get(&b_base_offset, PySequence_Fast_GET_ITEM(batches, first));
    PyObject *end = PySequence_Fast_GET_ITEM(batches, last), *end_base = NULL, *delta = NULL;
    int r = -1;
    if (base == NULL)
        return -1;
    if (base == Py_None) {
        r = 0;
        goto done;
    }
    if ((end_base = attr_get(&b_base_offset, end)) == NULL)
        goto done;
    if (end_base == Py_None) {
        r = 0;
        goto done;
    }
    if ((delta = attr_get(&b_last_offset_delta, end)) == NULL)
        goto done;
    if (delta != Py_None) {
        if ((v[4] = PyNumber_Add(end_base, delta)) == NULL)
            goto done;
        v[3] = Py_NewRef(base);
    }
    r = 0;
done:
    Py_DECREF(base);
    Py_XDECREF(end_base);
    Py_XDECREF(delta);
    return r;
}

/* record_values(rs) into v[NREC] (new references or NULL for None); -1 on error */
static int record_values(PyObject *rs, PyObject **v)
{
    PyObject *batches = NULL;
    char *coded = NULL;
    if (PyBytes_Check(rs) || PyByteArray_Check(rs) || PyMemoryView_Check(rs)) {
        Py_ssize_t n = PyObject_Size(rs);
        return n < 0 || (v[0] = PyLong_FromSsize_t(n)) == NULL ? -1 : 0;
    }
    if ((v[0] = attr_or_none(rs, s_size)) == NULL
            || (v[1] = attr_or_none(rs, s_record_count)) == NULL
            || (batches = attr_or_none(rs, s_batches)) == NULL)
        return -1;
    if (batches == Py_None) {
        Py_DECREF(batches);
        return 0;
    }
    Py_SETREF(batches, PySequence_Fast(batches, "batches: not iterable"));
    if (batches == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(batches);
    if (v[1] == Py_None) {   /* the batches' counts, when all are known */
        int all = 1;
        for (Py_ssize_t i = 0; i < n && all; i++) {
            int none = attr_none(&b_record_count, PySequence_Fast_GET_ITEM(batches, i));
            if (none < 0)
                goto fail;
            all = !none;
        }
        if (all) {
            PyObject *total = sum_of(batches, NULL, &b_record_count, 0);
            if (total == NULL)
                goto fail;
            Py_SETREF(v[1], total);
        }
    }
    if (offsets(batches, v) < 0)
        goto fail;
    if (n == 0) {
        Py_DECREF(batches);
        return (v[2] = PyLong_FromLong(0)) == NULL ? -1 : 0;
    }
    if ((coded = PyMem_Malloc(n)) == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    int any = 0;
    for (Py_ssize_t i = 0; i < n; i++) {   /* the compressed batches whose size is known */
        PyObject *c = PySequence_Fast_GET_ITEM(batches, i);
        int on = attr_true(&b_codec, c), none = on > 0 ? attr_none(&b_uncompressed_size, c) : 1;
        if (on < 0 || none < 0)
            goto fail;
        coded[i] = !none;
        any |= !none;
    }
    PyObject *b = PySequence_Fast_GET_ITEM(batches, 0);
    if ((v[2] = PyLong_FromSsize_t(n)) == NULL)
        goto fail;
    PyObject *codec = attr_get(&b_codec, b);
    if (codec == NULL)
        goto fail;
    PyObject *cname = PyDict_GetItemWithError(codec_names, codec);
    v[5] = cname != NULL ? Py_NewRef(cname) : PyErr_Occurred() ? NULL : PyObject_Str(codec);
    Py_DECREF(codec);
    if (v[5] == NULL || (v[6] = attr_get(&b_producer_id, b)) == NULL
            || (v[7] = attr_get(&b_producer_epoch, b)) == NULL
            || (v[8] = attr_get(&b_base_sequence, b)) == NULL)
        goto fail;
    PyObject *magic = attr_get(&b_magic, b);
    int v2 = magic == NULL ? -1 : PyObject_RichCompareBool(magic, two, Py_EQ);
    Py_XDECREF(magic);
    if (v2 < 0)
        goto fail;
    if (v2) {
        int txn = attr_true(&b_is_transactional, b);
        if (txn < 0)
            goto fail;
        v[9] = PyBool_FromLong(txn);
    }
    if (any && ((v[10] = sum_of(batches, coded, &b_size, 1)) == NULL
                || (v[11] = sum_of(batches, coded, &b_uncompressed_size, 0)) == NULL))
        goto fail;
    PyMem_Free(coded);
    Py_DECREF(batches);
    return 0;
fail:
    PyMem_Free(coded);
    Py_XDECREF(batches);
    return -1;
}

/* ListOffsets' answered offset of partition entry p: a new reference */
static PyObject *listed_offset(PyObject *p)
{
    PyObject *offset = attr_or_none(p, s_offset);
    if (offset == NULL || offset != Py_None)
        return offset;
    Py_DECREF(offset);
    PyObject *olds = attr_or_none(p, s_old_style_offsets);
    if (olds == NULL)
        return NULL;
    int has = PyObject_IsTrue(olds);
    PyObject *r = has < 0 ? NULL : has ? PyObject_GetItem(olds, zero) : Py_NewRef(Py_None);
    Py_DECREF(olds);
    return r;
}

/* o.<slot> (a new reference); a missing attribute is None unless `required` (then its
 * AttributeError, as getattr without a default) */
static PyObject *read_attr(Slot *slot, PyObject *o, int required)
{
    PyObject **at = slot_at(slot, o);
    if (at != NULL && *at != NULL)
        return Py_NewRef(*at);
    return required ? PyObject_GetAttr(o, slot->name) : attr_or_none(o, slot->name);
}

typedef struct {
    Py_ssize_t col;
    Slot attr;
    int required;
} Field;

/* A side's attributes are read through Slots of its own (a Spec's classes are one api key's,
 * one version's in a capture); a Slot shared by the sides of every api key would bind to each
 * class in turn. */
typedef struct {
    PyObject *fields, *records;
    Slot parts, index, record_set, name, topic, topic_id;
    int indexed;    /* the entries hold their number at `index` (else they are the numbers) */
    Field *field;   /* the fields, parsed */
    int optional_records;
    Py_ssize_t listed, topic_col, tid_col, part_col, record_cols[NREC];
    PyObject *topic_id_text;
} Spec;

/* one partition entry's row (number: its partition number; made: this body makes the row);
 * p a decoded entry, or with `tupled` a walked row: (number, fields..., record set) */
static int partition_row(PyObject *cols, Py_ssize_t row, PyObject *p, PyObject *number,
                         PyObject *name, int named, PyObject *tid, int made, Spec *s, int tupled)
{
    Py_ssize_t nfields = PyTuple_GET_SIZE(s->fields);
    if (tupled && (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != nfields + 2)) {
        PyErr_SetString(PyExc_TypeError, "a walked row: (number, fields..., record set)");
        return -1;
    }
    if (made) {
        if (put(cols, s->topic_col, row, named ? name : tid) < 0
                || put(cols, s->tid_col, row, tid) < 0 || put(cols, s->part_col, row, number) < 0)
            return -1;
    } else if (named) {
        PyObject *column = column_at(cols, s->topic_col);
        if (column == NULL || PySequence_SetItem(column, row, name) < 0)
            return -1;
    }
    for (Py_ssize_t f = 0; f < nfields; f++) {
        Field *fd = &s->field[f];
        PyObject *v = tupled ? Py_NewRef(PyTuple_GET_ITEM(p, f + 1))
            : read_attr(&fd->attr, p, fd->required);
        if (v == NULL)
            return -1;
        int r = put(cols, fd->col, row, v);
        Py_DECREF(v);
        if (r < 0)
            return -1;
    }
    if (s->listed >= 0) {
        PyObject *v = listed_offset(p);
        int r = v == NULL ? -1 : put(cols, s->listed, row, v);
        Py_XDECREF(v);
        if (r < 0)
            return -1;
    }
    if (s->records != Py_None) {
        PyObject *rs = tupled ? Py_NewRef(PyTuple_GET_ITEM(p, nfields + 1))
            : read_attr(&s->record_set, p, !s->optional_records);
        if (rs == NULL)
            return -1;
        int r = 0;
        if (rs != Py_None) {
            PyObject *v[NREC] = {NULL};
            r = record_values(rs, v);
            for (int i = 0; i < NREC; i++) {
                if (r == 0 && v[i] != NULL && v[i] != Py_None)
                    r = put(cols, s->record_cols[i], row, v[i]);
                Py_XDECREF(v[i]);
            }
        }
        Py_DECREF(rs);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* Whether `numbers` (a list of n) holds a value twice, as a set of them would say: a few plain
 * ints compared pair by pair (a set of them was a tenth of the walk), else the set; -1 with an
 * error */
static int repeats(PyObject *numbers, Py_ssize_t n)
{
    int few = n <= 8;
    for (Py_ssize_t i = 0; few && i < n; i++)
        few = PyLong_CheckExact(PyList_GET_ITEM(numbers, i));
    if (few) {
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = i + 1; j < n; j++) {
                int same = PyObject_RichCompareBool(PyList_GET_ITEM(numbers, i),
                                                    PyList_GET_ITEM(numbers, j), Py_EQ);
                if (same != 0)
                    return same;
            }
        return 0;
    }
    PyObject *seen = PySet_New(numbers);
    if (seen == NULL)
        return -1;
    int r = PySet_GET_SIZE(seen) != n;
    Py_DECREF(seen);
    return r;
}

/* one topic entry t: its rows from `*row` on; 0 when it lists no partition. With `tupled`, t is
 * a walked group: (name, topic id, rows) */
static int topic_rows(PyObject *cols, Py_ssize_t *row, PyObject *t, PyObject *keys,
                      PyObject *made, PyObject *shape, Py_ssize_t *at, Spec *s, int tupled)
{
    PyObject *entries = NULL, *name = NULL, *raw = NULL, *tid = NULL, *numbers = NULL,
        *pair = NULL;
    int result = -1;
    if (tupled && (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3)) {
        PyErr_SetString(PyExc_TypeError, "a walked group: (name, topic id, rows)");
        return -1;
    }
    PyObject *got = tupled ? Py_NewRef(PyTuple_GET_ITEM(t, 2)) : read_attr(&s->parts, t, 1);
    if (got == NULL)
        return -1;
    int truth = PyObject_IsTrue(got);
    if (truth <= 0) {
        Py_DECREF(got);
        return truth;
    }
    entries = PySequence_Fast(got, "partitions: not iterable");
    Py_DECREF(got);
    if (entries == NULL)
        return -1;
    if ((name = tupled ? Py_NewRef(PyTuple_GET_ITEM(t, 0)) : read_attr(&s->name, t, 0)) == NULL)
        goto done;
    int named = PyObject_IsTrue(name);
    if (named < 0)
        goto done;
    if (!named && !tupled) {   /* a walked group's name is already the one of the two */
        Py_SETREF(name, read_attr(&s->topic, t, 0));
        if (name == NULL || (named = PyObject_IsTrue(name)) < 0)
            goto done;
    }
    if ((raw = tupled ? Py_NewRef(PyTuple_GET_ITEM(t, 1)) : read_attr(&s->topic_id, t, 0)) == NULL
            || (tid = raw == Py_None || raw == zero_id ? Py_NewRef(Py_None)   /* no id */
                : PyObject_CallOneArg(s->topic_id_text, raw)) == NULL)
        goto done;
    int has_tid = PyObject_IsTrue(tid);
    if (has_tid < 0)
        goto done;
    PyObject *key = has_tid ? tid : name;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(entries);
    if ((numbers = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(entries, i);
        PyObject *number = tupled ? (PyTuple_Check(p) && PyTuple_GET_SIZE(p) > 0
                                     ? Py_NewRef(PyTuple_GET_ITEM(p, 0)) : NULL)
            : s->indexed ? read_attr(&s->index, p, 1) : Py_NewRef(p);
        if (number == NULL && tupled)
            PyErr_SetString(PyExc_TypeError, "a walked row: (number, fields..., record set)");
        if (number == NULL)
            goto done;
        PyList_SET_ITEM(numbers, i, number);
    }
    int dup = PySet_Contains(keys, key);
    if (dup < 0 || (!dup && (dup = repeats(numbers, n)) < 0))
        goto done;
    if (dup) {
        raise_irregular("a topic or partition listed twice");
        goto done;
    }
    if (PySet_Add(keys, key) < 0 || (pair = PyTuple_Pack(2, key, numbers)) == NULL)
        goto done;
    if (made != NULL) {
        if (PyList_Append(made, pair) < 0)
            goto done;
    } else {
        int same = *at < PyList_GET_SIZE(shape)
            ? PyObject_RichCompareBool(PyList_GET_ITEM(shape, *at), pair, Py_EQ) : 0;
        if (same < 0)
            goto done;
        if (!same) {
            raise_irregular("the bodies list different partitions");
            goto done;
        }
    }
    *at += 1;
    for (Py_ssize_t i = 0; i < n; i++, *row += 1)
        if (partition_row(cols, *row, PySequence_Fast_GET_ITEM(entries, i),
                          PyList_GET_ITEM(numbers, i),
                          name, named, tid, made != NULL, s, tupled) < 0)
            goto done;
    result = 0;
done:
    Py_XDECREF(entries);
    Py_XDECREF(name);
    Py_XDECREF(raw);
    Py_XDECREF(tid);
    Py_XDECREF(numbers);
    Py_XDECREF(pair);
    return result;
}

static void spec_free(Spec *s)
{
    PyMem_Free(s->field);
    s->field = NULL;
    Py_CLEAR(s->records);
}

/* The Spec of a (side, layout) pair (see partition_walk.py): `records` a new reference, `field`
 * allocated; -1 with an error (nothing held) */
static int spec_of(Spec *s, PyObject *side, PyObject *layout)
{
    PyObject *record_cols, *records, *parts, *index;
    if (!PyArg_ParseTuple(side, "UOO!On", &parts, &index, &PyTuple_Type, &s->fields,
                          &records, &s->listed)
            || !PyArg_ParseTuple(layout, "nnnO!O", &s->topic_col, &s->tid_col, &s->part_col,
                                 &PyTuple_Type, &record_cols, &s->topic_id_text))
        return -1;
    if (index != Py_None && !PyUnicode_Check(index)) {
        PyErr_SetString(PyExc_TypeError, "index: a str or None");
        return -1;
    }
    /* the names are borrowed from the side, which the Spec's keeper holds */
    s->parts = (Slot){.name = parts};
    s->indexed = index != Py_None;
    s->index = (Slot){.name = index};
    s->name = (Slot){.name = s_name};
    s->topic = (Slot){.name = s_topic};
    s->topic_id = (Slot){.name = s_topic_id};
    if (PyTuple_GET_SIZE(record_cols) != NREC) {
        PyErr_SetString(PyExc_TypeError, "layout: 12 record columns");
        return -1;
    }
    for (int i = 0; i < NREC; i++) {
        s->record_cols[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(record_cols, i));
        if (s->record_cols[i] == -1 && PyErr_Occurred())
            return -1;
    }
    if (records != Py_None && !PyUnicode_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "records: a str or None");
        return -1;
    }
    s->optional_records = records != Py_None && PyUnicode_GET_LENGTH(records) > 0
        && PyUnicode_READ_CHAR(records, 0) == '?';
    /* the attribute, without "?" (optional) */
    s->records = s->optional_records
        ? PyUnicode_Substring(records, 1, PyUnicode_GET_LENGTH(records)) : Py_NewRef(records);
    s->field = NULL;
    if (s->records == NULL)
        return -1;
    s->record_set = (Slot){.name = s->records};
    Py_ssize_t nfields = PyTuple_GET_SIZE(s->fields);
    if ((s->field = PyMem_New(Field, nfields ? nfields : 1)) == NULL) {
        PyErr_NoMemory();
        spec_free(s);
        return -1;
    }
    for (Py_ssize_t f = 0; f < nfields; f++) {
        Field *fd = &s->field[f];
        PyObject *attr;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(s->fields, f), "nUp", &fd->col, &attr,
                              &fd->required)) {
            spec_free(s);
            return -1;
        }
        fd->attr = (Slot){.name = attr};
    }
    return 0;
}

/* The Specs of the (side, layout) pairs seen, kept with them: a table's are a few constant
 * tuples, and parsing them at every call was a fifth of the walk. An entry is replaced only
 * while no walk is in progress (`walking`: a walk calls Python, which may walk too). */
#define SPECS 32
static struct {
    PyObject *side, *layout;   /* strong references: their Spec borrows from them */
    Spec spec;
} specs[SPECS];
static int next_spec, walking;

/* The kept Spec of (side, layout), else `own` filled (*owned set: the caller frees it) and
 * kept when it can be; NULL with an error */
static Spec *spec_for(PyObject *side, PyObject *layout, Spec *own, int *owned)
{
    *owned = 0;
    for (int i = 0; i < SPECS; i++)
        if (specs[i].side == side && specs[i].layout == layout)
            return &specs[i].spec;
    if (spec_of(own, side, layout) < 0)
        return NULL;
    if (walking) {
        *owned = 1;
        return own;
    }
    int i = next_spec;
    next_spec = (next_spec + 1) % SPECS;
    if (specs[i].side != NULL) {
        spec_free(&specs[i].spec);
        Py_CLEAR(specs[i].side);
        Py_CLEAR(specs[i].layout);
    }
    specs[i].side = Py_NewRef(side);
    specs[i].layout = Py_NewRef(layout);
    specs[i].spec = *own;
    return &specs[i].spec;
}

static PyObject *walk_side(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (codec_names == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() first");
        return NULL;
    }
    if (nargs < 6 || nargs > 7 || !PyList_Check(args[0]) || !PyLong_Check(args[1])
            || !PyTuple_Check(args[3]) || !PyTuple_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "walk_side(cols: list, start: int, topics, side: tuple, layout: tuple, "
                        "shape, tupled=False)");
        return NULL;
    }
    int tupled = nargs == 7 ? PyObject_IsTrue(args[6]) : 0;
    if (tupled < 0)
        return NULL;
    PyObject *cols = args[0], *topics = args[2], *side = args[3], *layout = args[4];
    PyObject *shape = args[5];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    if (shape != Py_None && !PyList_Check(shape)) {
        PyErr_SetString(PyExc_TypeError, "shape: a list or None");
        return NULL;
    }
    Spec own;
    int owned;
    Spec *s = spec_for(side, layout, &own, &owned);
    if (s == NULL)
        return NULL;
    PyObject *made = NULL, *keys = NULL, *it = NULL, *result = NULL;
    if (tupled && (!s->indexed || s->listed >= 0)) {   /* walked rows: numbered, none listed */
        PyErr_SetString(PyExc_TypeError, "walked rows have numbers and no listed offset");
        if (owned)
            spec_free(&own);
        return NULL;
    }
    walking++;
    made = shape == Py_None ? PyList_New(0) : NULL;
    keys = PySet_New(NULL);
    if ((shape == Py_None && made == NULL) || keys == NULL)
        goto done;
    if (topics != Py_None) {
        int truth = PyObject_IsTrue(topics);
        if (truth < 0)
            goto done;
        if (truth && (it = PyObject_GetIter(topics)) == NULL)
            goto done;
    }
    Py_ssize_t row = start, at = 0;
    PyObject *t;
    while (it != NULL && (t = PyIter_Next(it)) != NULL) {
        int r = topic_rows(cols, &row, t, keys, made, shape, &at, s, tupled);
        Py_DECREF(t);
        if (r < 0)
            goto done;
    }
    if (PyErr_Occurred())
        goto done;
    if (made == NULL && at != PyList_GET_SIZE(shape)) {
        raise_irregular("the bodies list different partitions");
        goto done;
    }
    result = made != NULL ? Py_NewRef(made) : Py_NewRef(shape);
done:
    walking--;
    if (owned)
        spec_free(&own);
    Py_XDECREF(made);
    Py_XDECREF(keys);
    Py_XDECREF(it);
    return result;
}

/* produced_offsets(base, count) as two new references in *first, *last; -1 with an error */
static int produced_offsets(PyObject *base, PyObject *count, PyObject **first, PyObject **last)
{
    *first = *last = NULL;
    int known = 0;
    if (PyLong_Check(base)) {
        known = PyObject_RichCompareBool(base, zero, Py_GE);
        if (known > 0)
            known = PyObject_IsTrue(count);
        if (known < 0)
            return -1;
    }
    if (!known) {
        *first = Py_NewRef(Py_None);
        *last = Py_NewRef(Py_None);
        return 0;
    }
    PyObject *end = PyNumber_Add(base, count);
    if (end == NULL)
        return -1;
    *last = PyNumber_Subtract(end, one);
    Py_DECREF(end);
    if (*last == NULL)
        return -1;
    *first = Py_NewRef(base);
    return 0;
}

/* The first and last offsets of rows [start, stop), from their base offsets and record counts
 * (offsets: the four columns, each padded to `stop` first), as the twin: every value read
 * before any is written. */
static int fill_offsets(PyObject *cols, Py_ssize_t start, Py_ssize_t stop, PyObject *offsets)
{
    Py_ssize_t col[4];
    if (!PyTuple_Check(offsets) || PyTuple_GET_SIZE(offsets) != 4) {
        PyErr_SetString(PyExc_TypeError, "offsets: four column numbers or None");
        return -1;
    }
    for (int i = 0; i < 4; i++)
        if ((col[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(offsets, i))) == -1 && PyErr_Occurred())
            return -1;
    for (int i = 0; i < 4; i++)
        if (padded(cols, col[i], stop) == NULL)
            return -1;
    Py_ssize_t n = stop > start ? stop - start : 0;
    PyObject *bases = PyList_GetSlice(PyList_GET_ITEM(cols, col[0]), start, stop);
    PyObject *counts = PyList_GetSlice(PyList_GET_ITEM(cols, col[1]), start, stop);
    PyObject *firsts = PyList_New(n), *lasts = PyList_New(n);
    int rc = -1;
    if (bases == NULL || counts == NULL || firsts == NULL || lasts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *first, *last;
        if (produced_offsets(PyList_GET_ITEM(bases, i), PyList_GET_ITEM(counts, i), &first,
                             &last) < 0)
            goto done;
        PyList_SET_ITEM(firsts, i, first);
        PyList_SET_ITEM(lasts, i, last);
    }
    PyObject *column = column_at(cols, col[2]);
    if (column == NULL || PyList_SetSlice(column, start, stop, firsts) < 0
            || (column = column_at(cols, col[3])) == NULL
            || PyList_SetSlice(column, start, stop, lasts) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(bases);
    Py_XDECREF(counts);
    Py_XDECREF(firsts);
    Py_XDECREF(lasts);
    return rc;
}

static PyObject *walk_exchange(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 7 || nargs > 8 || !PyList_Check(args[0]) || !PyTuple_Check(args[2])
            || PyTuple_GET_SIZE(args[2]) != 2 || !PyTuple_Check(args[5])
            || PyTuple_GET_SIZE(args[5]) < 3) {
        PyErr_SetString(PyExc_TypeError,
                        "walk_exchange(cols: list, start: int, sides: (side, side), req, resp, "
                        "layout: tuple, offsets, tupled=False)");
        return NULL;
    }
    PyObject *tupled = nargs == 8 ? args[7] : Py_False;
    int walked_groups = PyObject_IsTrue(tupled);
    if (walked_groups < 0)
        return NULL;
    PyObject *cols = args[0], *sides = args[2], *layout = args[5], *offsets = args[6];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t part_col = PyLong_AsSsize_t(PyTuple_GET_ITEM(layout, 2));
    if ((start == -1 || part_col == -1) && PyErr_Occurred())
        return NULL;
    if (start < 0) {
        PyErr_SetString(PyExc_ValueError, "start: a row number");
        return NULL;
    }
    PyObject *shape = Py_NewRef(Py_None);
    for (int i = 0; i < 2; i++) {
        PyObject *sided = PyTuple_GET_ITEM(sides, i), *body = args[3 + i];
        if (sided == Py_None || body == Py_None)
            continue;
        if (!PyTuple_Check(sided) || PyTuple_GET_SIZE(sided) != 2) {
            PyErr_SetString(PyExc_TypeError, "a side: (topics, side) or None");
            goto fail;
        }
        PyObject *topics = walked_groups ? Py_NewRef(body)   /* the groups themselves */
            : PyObject_CallOneArg(PyTuple_GET_ITEM(sided, 0), body);
        if (topics == NULL)
            goto fail;
        PyObject *call[7] = {cols, args[1], topics, PyTuple_GET_ITEM(sided, 1), layout, shape,
                             tupled};
        PyObject *walked = walk_side(self, call, 7);
        Py_DECREF(topics);
        int some = walked == NULL ? -1 : PyObject_IsTrue(walked);
        if (some < 0) {
            Py_XDECREF(walked);
            goto fail;
        }
        Py_SETREF(shape, some ? walked : Py_NewRef(Py_None));
        if (!some)
            Py_DECREF(walked);
    }
    Py_DECREF(shape);
    PyObject *parts = column_at(cols, part_col);
    if (parts == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(parts) - start;
    if (offsets != Py_None && n != 0 && fill_offsets(cols, start, start + n, offsets) < 0)
        return NULL;
    return PyLong_FromSsize_t(n);
fail:
    Py_DECREF(shape);
    return NULL;
}

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *names, *overhead, *exc, *no_id;
    if (!PyArg_ParseTuple(args, "O!O!OO", &PyDict_Type, &names, &PyDict_Type, &overhead, &exc,
                          &no_id))
        return NULL;
    if (!PyExceptionClass_Check(exc)) {
        PyErr_SetString(PyExc_TypeError, "Irregular: an exception class");
        return NULL;
    }
    Py_XSETREF(codec_names, Py_NewRef(names));
    Py_XSETREF(batch_overhead, Py_NewRef(overhead));
    Py_XSETREF(irregular, Py_NewRef(exc));
    Py_XSETREF(zero_id, Py_NewRef(no_id));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk_side", (PyCFunction)(void (*)(void))walk_side, METH_FASTCALL,
     "walk_side(cols, start, topics, side, layout, shape, tupled=False) -> shape "
     "(partition_walk.py)"},
    {"walk_exchange", (PyCFunction)(void (*)(void))walk_exchange, METH_FASTCALL,
     "walk_exchange(cols, start, sides, req, resp, layout, offsets, tupled=False) -> rows "
     "(partition_walk.py)"},
    {"configure", configure, METH_VARARGS,
     "configure(codec_names, batch_overhead, Irregular, zero_uuid)"},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_partition_walk",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__partition_walk(void)
{
    struct { PyObject **at; const char *name; } names[] = {
        {&s_name, "name"}, {&s_topic, "topic"}, {&s_topic_id, "topic_id"}, {&s_size, "size"},
        {&s_record_count, "record_count"}, {&s_batches, "batches"}, {&s_offset, "offset"},
        {&s_old_style_offsets, "old_style_offsets"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].name)) == NULL)
            return NULL;
    BATCH_FIELDS(BATCH_INTERN)
    if ((one = PyLong_FromLong(1)) == NULL || (two = PyLong_FromLong(2)) == NULL
            || (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}

/* The generated body readers, compiled once as one interpreter of their schema tables.
 *
 * Reader(schema, fallback) is called as the generated readers are, reader(b, p, k) -> (body,
 * p): it decodes the struct laid out by `schema` (a generated `_sN` table, the format
 * dissector/protocol/tree.py documents) at b[p:], charging array elements to the budget k, and
 * builds the same objects the generated reader `fallback` builds. It fails (an exception) where
 * that reader fails; decode.decode_struct then asks the tree interpreter what went wrong, as it
 * does for the generated readers. k defaults to the element budget's default, as there.
 * Anything outside the fast case goes to `fallback`: a buffer that is not bytes, keyword
 * arguments, a schema this cannot lay out. The tests compare the two on every decoder, with
 * good and damaged bytes. reader.summarize walks a body's bytes for the exchange table instead of
 * building it ("the summary walk" below; its twin is decoding and walking the objects). */
#define PY_SSIZE_T_CLEAN
#include "../_attrs.h"
#include <stdint.h>
#include <string.h>

#include "../records/_batchsums.h"

enum { K_INT8, K_INT16, K_INT32, K_INT64, K_UINT16, K_UINT32, K_FLOAT64, K_BOOL, K_UUID,
       K_STRING, K_BYTES, K_RECORDS, K_STRUCT, K_ARRAY, K_NONE };
static const char *kind_names[] = {"int8", "int16", "int32", "int64", "uint16", "uint32",
                                   "float64", "bool", "uuid", "string", "bytes", "records",
                                   "struct", "array", NULL};
/* bytes an element takes at least (an array's count is checked against what is left) */
static const int min_size[] = {1, 2, 4, 8, 2, 4, 8, 1, 16, 1, 1, 1, 1, 1};

typedef struct Schema Schema;

typedef struct {
    Py_ssize_t off;       /* the slot's offset in the object */
    int kind, elem, nullable, compact;
    long long tag;        /* tagged fields */
    Schema *child;
} Field;

enum { D_VALUE, D_LIST, D_STRUCT };
typedef struct {
    Py_ssize_t off;
    int how;              /* D_VALUE: `value` itself; D_LIST: a new []; D_STRUCT: a default body */
    PyObject *value;
    Schema *child;
} Default;

struct Schema {
    PyTypeObject *cls;
    int flexible;
    Py_ssize_t nfields, ntagged, ndefaults;
    Field *fields;        /* the fields, then the tagged ones */
    Default *defaults;    /* every field's, the tagged ones', then the absent ones' */
    Py_ssize_t unknown_off;
    /* the summary plan (dissector/summary_plan.py), set by set_plan on a walked struct */
    int mode;
    Py_ssize_t name_def, id_def;
    int *roles;           /* per field, then tagged field: an R_* code (R_NODE: see the child) */
    int *run_bytes;       /* per field: the bytes of the fixed-size skipped fields from it on */
    int *run_end;         /* per field: the field after that run (both in roles' allocation) */
    int *slots;           /* per field, then tagged field: where its value goes, or -1 (a row's
                           * member in an M_ROW struct, else a setting; in roles' allocation) */
    Py_ssize_t nrow;      /* an M_ROW struct's row: its members' count and defaults (-1: None) */
    Py_ssize_t *row_defs;
};

static PyObject *default_struct;   /* primitives.DEFAULT_STRUCT */
static PyObject *uuids;            /* primitives.UUIDS: raw 16 bytes -> UUID */
static PyObject *uuid_at;          /* primitives.uuid_at, for the UUIDs not in it yet */
static PyObject *malformed_error;  /* primitives.Malformed, raised as the generated readers do */
static long long default_budget;   /* primitives.MAX_ELEMENTS */
static PyObject *unknown_tags_name;

/* -- compiling a schema table ---------------------------------------------------------------- */

static void schema_free(Schema *s)
{
    if (s == NULL)
        return;
    for (Py_ssize_t i = 0; i < s->nfields + s->ntagged; i++)
        schema_free(s->fields[i].child);
    for (Py_ssize_t i = 0; i < s->ndefaults; i++) {
        Py_XDECREF(s->defaults[i].value);
        if (s->defaults[i].how == D_STRUCT)
            schema_free(s->defaults[i].child);
    }
    Py_XDECREF(s->cls);
    PyMem_Free(s->roles);
    PyMem_Free(s->row_defs);
    PyMem_Free(s->fields);
    PyMem_Free(s->defaults);
    PyMem_Free(s);
}

/* The offset of cls's slot `name`, or -1 when it is not a plain object slot. */
static Py_ssize_t slot_offset(PyTypeObject *cls, PyObject *name)
{
    PyObject *d = PyObject_GetAttr((PyObject *)cls, name);
    Py_ssize_t off = -1;
    if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX)
        off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_XDECREF(d);
    PyErr_Clear();
    return off;
}

static int kind_of(PyObject *name)
{
    if (name == Py_None)
        return K_NONE;
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    for (int k = 0; s != NULL && kind_names[k] != NULL; k++)
        if (strcmp(s, kind_names[k]) == 0)
            return k;
    PyErr_Clear();
    return -1;
}

static Schema *compile_schema(PyObject *t, int depth);

/* A default as tree.new_body makes it (`_fresh`): 0, or -1 when this cannot. */
static int compile_default(Default *d, PyTypeObject *cls, PyObject *attr, PyObject *value,
                           PyObject *child, int depth)
{
    d->off = slot_offset(cls, attr);
    if (d->off < 0)
        return -1;
    if (value == default_struct) {
        d->how = D_STRUCT;
        d->child = child == Py_None ? NULL : compile_schema(child, depth + 1);
        return d->child == NULL ? -1 : 0;
    }
    d->how = PyList_Check(value) ? D_LIST : D_VALUE;
    d->value = Py_NewRef(value);
    return 0;
}

/* The compiled layout of a schema table, or NULL (no exception) for one this does not know. */
static Schema *compile_schema(PyObject *t, int depth)
{
    PyObject *cls, *flexible, *fields, *tagged, *absent;
    if (depth > 64 || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5)
        return NULL;
    cls = PyTuple_GET_ITEM(t, 0);
    flexible = PyTuple_GET_ITEM(t, 1);
    fields = PyTuple_GET_ITEM(t, 2);
    tagged = PyTuple_GET_ITEM(t, 3);
    absent = PyTuple_GET_ITEM(t, 4);
    if (!PyType_Check(cls) || !PyTuple_Check(fields) || !PyTuple_Check(tagged)
            || !PyTuple_Check(absent))
        return NULL;
    Schema *s = PyMem_Calloc(1, sizeof(Schema));
    if (s == NULL)
        return NULL;
    s->cls = (PyTypeObject *)Py_NewRef(cls);
    s->flexible = PyObject_IsTrue(flexible) == 1;
    s->nfields = PyTuple_GET_SIZE(fields);
    s->ntagged = PyTuple_GET_SIZE(tagged);
    Py_ssize_t nabsent = PyTuple_GET_SIZE(absent);
    s->fields = PyMem_Calloc(s->nfields + s->ntagged + 1, sizeof(Field));
    s->defaults = PyMem_Calloc(s->nfields + s->ntagged + nabsent + 1, sizeof(Default));
    s->unknown_off = slot_offset(s->cls, unknown_tags_name);
    if (s->fields == NULL || s->defaults == NULL || s->unknown_off < 0)
        goto bad;
    for (Py_ssize_t i = 0; i < s->nfields + s->ntagged; i++) {
        PyObject *f = i < s->nfields ? PyTuple_GET_ITEM(fields, i)
                                     : PyTuple_GET_ITEM(tagged, i - s->nfields);
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 8)
            goto bad;
        PyObject *attr = PyTuple_GET_ITEM(f, 0), *child = PyTuple_GET_ITEM(f, 7);
        Field *x = &s->fields[i];
        x->off = slot_offset(s->cls, attr);
        x->kind = kind_of(PyTuple_GET_ITEM(f, 1));
        x->elem = kind_of(PyTuple_GET_ITEM(f, 2));
        x->nullable = PyObject_IsTrue(PyTuple_GET_ITEM(f, 3)) == 1;
        x->compact = PyObject_IsTrue(PyTuple_GET_ITEM(f, 4)) == 1;
        if (x->off < 0 || x->kind < 0 || x->kind == K_NONE || x->elem < 0
                || (x->kind == K_ARRAY && (x->elem == K_NONE || x->elem == K_ARRAY)))
            goto bad;
        if (i >= s->nfields) {
            x->tag = PyLong_AsLongLong(PyTuple_GET_ITEM(f, 5));
            if (x->tag == -1 && PyErr_Occurred())
                goto bad;
        }
        if (x->kind == K_STRUCT || x->elem == K_STRUCT) {
            x->child = compile_schema(child, depth + 1);
            if (x->child == NULL)
                goto bad;
        }
        if (compile_default(&s->defaults[s->ndefaults++], s->cls, attr,
                            PyTuple_GET_ITEM(f, 6), child, depth) < 0)
            goto bad;
    }
    for (Py_ssize_t i = 0; i < nabsent; i++) {
        PyObject *a = PyTuple_GET_ITEM(absent, i);
        if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 2
                || compile_default(&s->defaults[s->ndefaults++], s->cls, PyTuple_GET_ITEM(a, 0),
                                   PyTuple_GET_ITEM(a, 1), Py_None, depth) < 0)
            goto bad;
    }
    return s;
bad:
    PyErr_Clear();
    schema_free(s);
    return NULL;
}

/* -- decoding -------------------------------------------------------------------------------- */

typedef struct {
    PyObject *bytes;
    const unsigned char *b;
    Py_ssize_t end;       /* where the struct being read must end by (a tagged field's end) */
    long long budget;     /* array elements the message may still decode */
    PyObject *view;       /* memoryview of bytes, made for the first records field */
} Ctx;

/* Any fault, without details: decode_struct only needs to know it failed (the tree interpreter
 * finds what and where). */
static void *malformed(void)
{
    if (!PyErr_Occurred())
        PyErr_SetNone(malformed_error);
    return NULL;
}

static void set_slot(PyObject *o, Py_ssize_t off, PyObject *v)   /* steals v */
{
    PyObject **slot = (PyObject **)((char *)o + off);
    PyObject *old = *slot;
    *slot = v;
    Py_XDECREF(old);
}

static uint64_t be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static int uvarint(Ctx *c, Py_ssize_t *p, long long *out)
{
    long long v = 0;
    for (int i = 0; i < 5; i++) {
        if (*p + i >= c->end)
            return -1;
        unsigned char byte = c->b[*p + i];
        v |= (long long)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *p += i + 1;
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* A length or count: -1 for null. */
static int length(Ctx *c, Py_ssize_t *p, int compact, int wide, long long *n)
{
    if (compact) {
        if (uvarint(c, p, n) < 0)
            return -1;
        *n -= 1;
        return 0;
    }
    int size = wide ? 4 : 2;
    if (*p + size > c->end)
        return -1;
    *n = wide ? (int32_t)be(c->b + *p, 4) : (int16_t)be(c->b + *p, 2);
    *p += size;
    return 0;
}

/* A nullable struct's presence byte, read when `nullable`: 1 present, 0 null, -1 past the end. */
static int present(Ctx *c, Py_ssize_t *p, int nullable)
{
    if (!nullable)
        return 1;
    if (*p >= c->end)
        return -1;
    return (int8_t)c->b[(*p)++] >= 0;
}

/* An array's element count, checked against what is left (an element takes min_size[elem]
 * bytes or more) and charged to the element budget: 1 with *n set, 0 for a null array where
 * one may be null, -1 when malformed. */
static int count(Ctx *c, Py_ssize_t *p, int elem, int nullable, int compact, long long *n)
{
    if (length(c, p, compact, 1, n) < 0)
        return -1;
    if (*n < 0)
        return *n == -1 && nullable ? 0 : -1;
    if (*n * min_size[elem] > c->end - *p)
        return -1;
    /* compared, not subtracted: a caller's budget may be near LLONG_MIN; an empty array
     * charges nothing and is never refused, as in the generated readers (`if n:`) */
    if (*n > 0 && *n > c->budget)
        return -1;
    c->budget -= *n;
    return 1;
}

static PyObject *default_body(Schema *s);

static PyObject *fresh(Default *d)
{
    if (d->how == D_LIST)
        return PyList_New(0);
    if (d->how == D_STRUCT)
        return default_body(d->child);
    return Py_NewRef(d->value);
}

/* A new object of the schema's class with the defaults from `first` on set, unknown_tags None. */
static PyObject *new_body(Schema *s, Py_ssize_t first)
{
    PyObject *o = s->cls->tp_alloc(s->cls, 0);
    if (o == NULL)
        return NULL;
    set_slot(o, s->unknown_off, Py_NewRef(Py_None));
    for (Py_ssize_t i = first; i < s->ndefaults; i++) {
        PyObject *v = fresh(&s->defaults[i]);
        if (v == NULL) {
            Py_DECREF(o);
            return NULL;
        }
        set_slot(o, s->defaults[i].off, v);
    }
    return o;
}

static PyObject *default_body(Schema *s)
{
    return new_body(s, 0);
}

static PyObject *read_struct(Ctx *c, Py_ssize_t *p, Schema *s);

static PyObject *read_value(Ctx *c, Py_ssize_t *p, int kind, int elem, int nullable,
                            int compact, Schema *child)
{
    const unsigned char *b = c->b;
    Py_ssize_t at = *p;
    if (kind <= K_UUID) {
        if (at + min_size[kind] > c->end)
            return malformed();
        *p += min_size[kind];
        switch (kind) {
        case K_INT8: return PyLong_FromLong((int8_t)b[at]);
        case K_INT16: return PyLong_FromLong((int16_t)be(b + at, 2));
        case K_INT32: return PyLong_FromLong((int32_t)be(b + at, 4));
        case K_INT64: return PyLong_FromLongLong((int64_t)be(b + at, 8));
        case K_UINT16: return PyLong_FromLong((long)be(b + at, 2));
        case K_UINT32: return PyLong_FromUnsignedLong((unsigned long)be(b + at, 4));
        case K_BOOL: return PyBool_FromLong(b[at] != 0);
        case K_FLOAT64: {
            uint64_t bits = be(b + at, 8);
            double d;
            memcpy(&d, &bits, 8);
            return PyFloat_FromDouble(d);
        }
        default: {   /* K_UUID: built once per id, as primitives.uuid_at does */
            PyObject *key = PyBytes_FromStringAndSize((const char *)b + at, 16);
            if (key == NULL)
                return NULL;
            PyObject *u = PyDict_GetItemWithError(uuids, key);
            Py_DECREF(key);
            if (u != NULL)
                return Py_NewRef(u);
            if (PyErr_Occurred())
                return NULL;
            PyObject *pos = PyLong_FromSsize_t(at);
            if (pos == NULL)
                return NULL;
            u = PyObject_CallFunctionObjArgs(uuid_at, c->bytes, pos, NULL);
            Py_DECREF(pos);
            return u;
        }
        }
    }
    if (kind == K_STRUCT) {
        int here = present(c, p, nullable);
        if (here <= 0)
            return here == 0 ? Py_NewRef(Py_None) : malformed();
        return read_struct(c, p, child);
    }
    long long n;
    if (kind == K_ARRAY) {
        int here = count(c, p, elem, nullable, compact, &n);
        if (here <= 0)
            return here == 0 ? Py_NewRef(Py_None) : malformed();
        PyObject *list = PyList_New((Py_ssize_t)n);
        for (Py_ssize_t i = 0; list != NULL && i < n; i++) {
            PyObject *v = elem == K_STRUCT ? read_struct(c, p, child)
                                           : read_value(c, p, elem, K_NONE, 0, compact, NULL);
            if (v == NULL)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, i, v);
        }
        return list;
    }
    if (length(c, p, compact, kind != K_STRING, &n) < 0)
        return malformed();
    if (n < 0)
        return n == -1 && nullable ? Py_NewRef(Py_None) : malformed();
    if (n > c->end - *p)
        return malformed();
    Py_ssize_t start = *p;
    *p += (Py_ssize_t)n;
    if (kind == K_STRING)
        return PyUnicode_DecodeUTF8((const char *)b + start, (Py_ssize_t)n, NULL);
    if (kind == K_BYTES)
        return PyBytes_FromStringAndSize((const char *)b + start, (Py_ssize_t)n);
    /* records: a view of the message for the record-batch decoder, not a copy */
    if (c->view == NULL && (c->view = PyMemoryView_FromObject(c->bytes)) == NULL)
        return NULL;
    return PySequence_GetSlice(c->view, start, *p);
}

static PyObject *read_field(Ctx *c, Py_ssize_t *p, Field *f)
{
    return read_value(c, p, f->kind, f->elem, f->nullable, f->compact, f->child);
}

/* A flexible struct's tagged-field section: each known field through `field`, which may not
 * read past the field's size and must use all of it; each unknown one through `unknown` (NULL:
 * skipped). The reader keeps them in the body, the summary walk (below) only checks them. */
typedef int (*FieldFn)(Ctx *, Py_ssize_t *, Schema *, Py_ssize_t, void *);
typedef int (*UnknownFn)(Ctx *, long long tag, Py_ssize_t at, Py_ssize_t size, Schema *,
                         void *);

static int walk_tags(Ctx *c, Py_ssize_t *p, Schema *s, FieldFn field, UnknownFn unknown,
                     void *arg)
{
    long long n, tag, size;
    if (uvarint(c, p, &n) < 0)
        return -1;
    for (long long i = 0; i < n; i++) {
        if (uvarint(c, p, &tag) < 0 || uvarint(c, p, &size) < 0 || size > c->end - *p)
            return -1;
        Py_ssize_t e = *p + (Py_ssize_t)size;
        Py_ssize_t found = -1;
        for (Py_ssize_t j = s->nfields; j < s->nfields + s->ntagged; j++)
            if (s->fields[j].tag == tag)
                found = j;
        if (found >= 0) {
            Py_ssize_t end = c->end;
            c->end = e;
            int rc = field(c, p, s, found, arg);
            c->end = end;
            if (rc < 0 || *p != e)
                return -1;
        } else if (unknown != NULL && unknown(c, tag, *p, (Py_ssize_t)size, s, arg) < 0) {
            return -1;
        }
        *p = e;
    }
    return 0;
}

static int read_tagged(Ctx *c, Py_ssize_t *p, Schema *s, Py_ssize_t i, void *o)
{
    PyObject *v = read_field(c, p, &s->fields[i]);
    if (v == NULL)
        return -1;
    set_slot(o, s->fields[i].off, v);
    return 0;
}

/* an unknown tagged field, kept raw in the body's unknown_tags */
static int keep_unknown(Ctx *c, long long tag, Py_ssize_t at, Py_ssize_t size, Schema *s,
                        void *o)
{
    PyObject **slot = (PyObject **)((char *)o + s->unknown_off);
    if (*slot == Py_None)
        set_slot(o, s->unknown_off, PyDict_New());
    PyObject *key = PyLong_FromLongLong(tag);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)c->b + at, size);
    int bad = *slot == NULL || key == NULL || raw == NULL || PyDict_SetItem(*slot, key, raw) < 0;
    Py_XDECREF(key);
    Py_XDECREF(raw);
    return bad ? -1 : 0;
}

static PyObject *read_struct(Ctx *c, Py_ssize_t *p, Schema *s)
{
    PyObject *o = new_body(s, s->nfields);   /* the tagged and absent fields' defaults */
    if (o == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < s->nfields; i++) {
        PyObject *v = read_field(c, p, &s->fields[i]);
        if (v == NULL) {
            Py_DECREF(o);
            return malformed();
        }
        set_slot(o, s->fields[i].off, v);
    }
    if (s->flexible && walk_tags(c, p, s, read_tagged, keep_unknown, o) < 0) {
        Py_DECREF(o);
        return malformed();
    }
    return o;
}

/* -- the summary walk ------------------------------------------------------------------------ */

/* What dissector.summary_walk's walker does on a decoded body, done on its bytes: each field is
 * checked as read_value would read it, but only those the plan names become objects. Any fault
 * fails the walk as a read would fail (decoding.BodyDecoder then decodes and walks the body). */
enum { R_SKIP, R_ERROR, R_TOP_ERROR, R_THROTTLE, R_RECORDS, R_NAME, R_TOPIC_ID, R_PARTITION,
       R_NODE };
enum { M_TOPIC = 1, M_PARTITION = 2, M_NAME = 4, M_ID = 8, M_GROUP = 16, M_ROW = 32,
       M_BY_NAME = 64 };

typedef struct {
    PyObject *errs, *topics, *names, *decode_set, *full, *budget, *bad_sets;
    PyObject *sets;       /* at the records level: [topic, partition, record set] per set */
    PyObject *groups;     /* with a RowSpec's plan: (name, topic id, rows) per topic entry */
    PyObject *rows;       /* the rows of the topic entry being walked (its Walked's), or NULL */
    PyObject *settings;   /* with a RowSpec's plan: the settings, a list */
    int learn;
    int in_place;         /* decode_set is set_sums headers-only: its common case done here */
    long long parts, nrec, nbytes, unc;
    int unc_known;        /* false once a compressed batch's size is unknown (None) */
    PyObject *top_error, *throttle;
} Sum;

/* records/_headers.c set_sums, whose common case (batch_sums) the walk does in place, and
 * whether it checks the CRC (sums_in_place) */
static PyObject *in_place_sums;
static int in_place_crc;

static PyObject *s_int;
/* what sum_records reads of a record set (rs_) and of its batches (b_), from their slots
 * (_attrs.h): a Batch's attribute lookup goes through its __getattr__ hook, a slow path */
static Slot rs_record_count, rs_size, rs_batches, rs_issues, b_codec, b_size,
    b_uncompressed_size;

static int skip_struct(Ctx *c, Py_ssize_t *p, Schema *s);

/* read_value's checks without its object (a string is still decoded: its UTF-8 must be valid) */
static int skip_value(Ctx *c, Py_ssize_t *p, int kind, int elem, int nullable, int compact,
                      Schema *child)
{
    Py_ssize_t at = *p;
    if (kind <= K_UUID) {
        if (at + min_size[kind] > c->end)
            return -1;
        *p += min_size[kind];
        return 0;
    }
    if (kind == K_STRUCT) {
        int here = present(c, p, nullable);
        return here <= 0 ? here : skip_struct(c, p, child);
    }
    long long n;
    if (kind == K_ARRAY) {
        int here = count(c, p, elem, nullable, compact, &n);
        if (here <= 0)
            return here;
        if (elem <= K_UUID) {   /* fixed size: all checked above */
            *p += (Py_ssize_t)n * min_size[elem];
            return 0;
        }
        for (long long i = 0; i < n; i++)
            if (skip_value(c, p, elem, K_NONE, 0, compact, child) < 0)
                return -1;
        return 0;
    }
    if (length(c, p, compact, kind != K_STRING, &n) < 0)
        return -1;
    if (n < 0)
        return n == -1 && nullable ? 0 : -1;
    if (n > c->end - *p)
        return -1;
    *p += (Py_ssize_t)n;
    if (kind == K_STRING) {
        PyObject *v = PyUnicode_DecodeUTF8((const char *)c->b + *p - n, (Py_ssize_t)n, NULL);
        if (v == NULL)
            return -1;
        Py_DECREF(v);
    }
    return 0;
}

static int skip_field(Ctx *c, Py_ssize_t *p, Schema *s, Py_ssize_t i, void *Py_UNUSED(arg))
{
    Field *f = &s->fields[i];
    return skip_value(c, p, f->kind, f->elem, f->nullable, f->compact, f->child);
}

static int skip_struct(Ctx *c, Py_ssize_t *p, Schema *s)
{
    for (Py_ssize_t i = 0; i < s->nfields; i++)
        if (skip_field(c, p, s, i, NULL) < 0)
            return -1;
    return s->flexible ? walk_tags(c, p, s, skip_field, NULL, NULL) : 0;
}

/* The topic of the sets not named yet: what stands in for it in S->sets until the struct that
 * names it is done */
static PyObject *unnamed;

/* One record set: the walker's `decode_set` call and its sums (decode_set may give those alone,
 * (records, bytes, uncompressed bytes or None), for a set without issues: record_set.set_sums);
 * at the records level the set too, with `partition` (its entry's index), in S->sets. `kept`
 * (unless NULL) receives what decode_set gave (a new reference). */
static int sum_records(Sum *S, PyObject *v, PyObject *partition, PyObject **kept)
{
    PyObject *call[3] = {v, S->full, S->budget};
    PyObject *rs = PyObject_Vectorcall(S->decode_set, call, 3, NULL);
    if (rs == NULL)
        return -1;
    if (kept != NULL)
        *kept = Py_NewRef(rs);
    int rc = -1;
    if (S->sets != NULL && !PyTuple_CheckExact(rs)) {
        PyObject *entry = PyList_New(3);
        if (entry == NULL) {
            Py_DECREF(rs);
            return -1;
        }
        PyList_SET_ITEM(entry, 0, Py_NewRef(unnamed));
        PyList_SET_ITEM(entry, 1, Py_NewRef(partition ? partition : Py_None));
        PyList_SET_ITEM(entry, 2, Py_NewRef(rs));
        int appended = PyList_Append(S->sets, entry);
        Py_DECREF(entry);
        if (appended < 0) {
            Py_DECREF(rs);
            return -1;
        }
    }
    if (PyTuple_CheckExact(rs) && PyTuple_GET_SIZE(rs) == 3) {   /* its sums alone: no issues */
        PyObject *unc = PyTuple_GET_ITEM(rs, 2);
        S->nrec += PyLong_AsLongLong(PyTuple_GET_ITEM(rs, 0));
        S->nbytes += PyLong_AsLongLong(PyTuple_GET_ITEM(rs, 1));
        if (unc == Py_None)
            S->unc_known = 0;
        else if (S->unc_known)
            S->unc += PyLong_AsLongLong(unc);
        Py_DECREF(rs);
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *count = attr_get(&rs_record_count, rs), *size = NULL, *batches = NULL,
             *issues = NULL;
    if (count == NULL || (size = attr_get(&rs_size, rs)) == NULL)
        goto done;
    S->nrec += PyLong_AsLongLong(count);
    S->nbytes += PyLong_AsLongLong(size);
    if (PyErr_Occurred() || (batches = attr_get(&rs_batches, rs)) == NULL
            || !PyList_Check(batches))
        goto done;
    for (Py_ssize_t i = 0; S->unc_known && i < PyList_GET_SIZE(batches); i++) {
        PyObject *bt = PyList_GET_ITEM(batches, i);
        PyObject *codec = attr_get(&b_codec, bt);
        if (codec == NULL)
            goto done;
        int plain = PyLong_Check(codec) && PyLong_AsLong(codec) == 0;
        Py_DECREF(codec);
        PyObject *n = attr_get(plain ? &b_size : &b_uncompressed_size, bt);
        if (n == NULL)
            goto done;
        if (n == Py_None)
            S->unc_known = 0;
        else
            S->unc += PyLong_AsLongLong(n);
        Py_DECREF(n);
        if (PyErr_Occurred())
            goto done;
    }
    if ((issues = attr_get(&rs_issues, rs)) == NULL)
        goto done;
    int any = PyObject_IsTrue(issues);
    if (any < 0)
        goto done;
    if (any) {
        PyObject *pair = PyTuple_Pack(2, v, rs);
        if (pair == NULL || PyList_Append(S->bad_sets, pair) < 0) {
            Py_XDECREF(pair);
            goto done;
        }
        Py_DECREF(pair);
    }
    rc = 0;
done:
    Py_XDECREF(count);
    Py_XDECREF(size);
    Py_XDECREF(batches);
    Py_XDECREF(issues);
    Py_DECREF(rs);
    return rc;
}

static int sum_struct(Ctx *c, Py_ssize_t *p, Schema *s, Sum *S);

typedef struct {
    Sum *S;
    PyObject *name, *id;  /* the struct's topic name and id so far (R_NAME, R_TOPIC_ID) */
    PyObject *partition;  /* a partition entry's index (R_PARTITION, at the records level) */
    PyObject *rows;       /* an M_GROUP struct's rows, a list */
    PyObject *row;        /* an M_ROW struct's row, a tuple filled in place before it is handed */
} Walked;

/* A field's value (`slots`) into the row of its M_ROW struct, else into the settings */
static int keep(Schema *s, Walked *w, int slot, PyObject *v)
{
    if (!(s->mode & M_ROW))
        return w->S->settings == NULL ? 0 : PyList_SetItem(w->S->settings, slot, Py_NewRef(v));
    if (w->row == NULL)
        return 0;
    if (slot >= PyTuple_GET_SIZE(w->row)) {
        PyErr_SetString(PyExc_IndexError, "a row member out of range");
        return -1;
    }
    Py_SETREF(PyTuple_GET_ITEM(w->row, slot), Py_NewRef(v));
    return 0;
}

static int sum_field(Ctx *c, Py_ssize_t *p, Schema *s, Py_ssize_t i, void *arg)
{
    Walked *w = arg;
    Sum *S = w->S;
    Field *f = &s->fields[i];
    int role = s->roles[i], slot = s->slots[i];
    if (slot < 0 && (role == R_SKIP || (role == R_PARTITION && S->sets == NULL)))
        return skip_field(c, p, s, i, NULL);
    if (role == R_RECORDS && S->in_place && slot < 0) {   /* set_sums' common case, with no view made */
        Py_ssize_t q = *p;
        long long n, count, unc;
        if (length(c, &q, f->compact, 1, &n) == 0 && 0 <= n && n <= c->end - q
                && batch_sums(c->b + q, (Py_ssize_t)n, in_place_crc, &count, &unc)) {
            *p = q + (Py_ssize_t)n;
            S->nrec += count;
            S->nbytes += n;
            if (unc < 0)
                S->unc_known = 0;
            else if (S->unc_known)
                S->unc += unc;
            return 0;
        }   /* else read and handed to decode_set, which says what */
    }
    if (role == R_NODE) {
        if (f->kind == K_STRUCT) {
            int here = present(c, p, f->nullable);
            return here <= 0 ? here : sum_struct(c, p, f->child, S);
        }
        long long n;   /* an array of structs */
        int here = count(c, p, K_STRUCT, f->nullable, f->compact, &n);
        if (here <= 0)
            return here;
        for (long long k = 0; k < n; k++)
            if (sum_struct(c, p, f->child, S) < 0)
                return -1;
        return 0;
    }
    PyObject *v = read_field(c, p, f), *rs = NULL;
    if (v == NULL)
        return -1;
    int rc = 0;
    switch (role) {
    case R_TOP_ERROR:   /* the body's error_code, and an error code like any other */
    case R_ERROR:
        if (role == R_TOP_ERROR)
            Py_XSETREF(S->top_error, Py_NewRef(v));
        if (PyObject_IsTrue(v))
            rc = PyList_Append(S->errs, v);
        break;
    case R_THROTTLE:
        Py_XSETREF(S->throttle, Py_NewRef(v));
        break;
    case R_RECORDS:
        if (v != Py_None)
            rc = sum_records(S, v, w->partition, slot >= 0 ? &rs : NULL);
        break;
    case R_PARTITION:
        Py_XSETREF(w->partition, Py_NewRef(v));
        break;
    case R_NAME:
        Py_XSETREF(w->name, Py_NewRef(v));
        break;
    case R_TOPIC_ID:
        Py_XSETREF(w->id, Py_NewRef(v));
        break;
    }
    if (rc == 0 && slot >= 0)   /* the record set as decode_set gave it */
        rc = keep(s, w, slot, rs != NULL ? rs : v);
    Py_XDECREF(rs);
    Py_DECREF(v);
    return rc;
}

static int name_absent(PyObject *name, PyObject *topics)
{
    int in = PySequence_Contains(topics, name);
    return in < 0 ? -1 : !in;
}

/* A topic id not in `names`: a subclass of dict is told (names.missed(id): dissector.parallel
 * keeps the ids it looked up in vain, as its `in` and `get` do for the Python walker). */
static int missed(PyObject *names, PyObject *id)
{
    if (PyDict_CheckExact(names))
        return 0;
    PyObject *r = PyObject_CallMethod(names, "missed", "O", id);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The walker's topic naming for a struct: learn id -> name, fill a name in from its id, collect
 * a topic entry's name (first seen first). */
static int name_topic(Schema *s, Walked *w)
{
    Sum *S = w->S;
    int mode = s->mode;
    if (mode & M_NAME) {
        PyObject *name = w->name;   /* borrowed: w keeps it */
        if (name == NULL)   /* a plan naming a field this struct did not hold */
            return 0;
        if ((mode & M_ID) && w->id != NULL && w->id != Py_None) {
            PyObject *big = PyObject_GetAttr(w->id, s_int);
            int set = big == NULL ? -1 : PyObject_IsTrue(big);
            Py_XDECREF(big);
            if (set < 0)
                return -1;
            int named = set ? PyObject_IsTrue(name) : 0;
            if (named < 0)
                return -1;
            if (set && named && S->learn) {
                if (PyDict_SetItem(S->names, w->id, name) < 0)
                    return -1;
            } else if (set && !named) {
                PyObject *known = PyDict_GetItemWithError(S->names, w->id);
                if (known == NULL && (PyErr_Occurred() || missed(S->names, w->id) < 0))
                    return -1;
                if (known != NULL) {
                    Py_SETREF(w->name, Py_NewRef(known));
                    name = w->name;
                }
            }
        }
        if (mode & M_TOPIC && PyUnicode_Check(name)) {
            int absent = name_absent(name, S->topics);
            if (absent < 0 || (absent && PyList_Append(S->topics, name) < 0))
                return -1;
        }
    } else if ((mode & M_TOPIC) && (mode & M_ID) && w->id != NULL) {
        PyObject *name = PyDict_GetItemWithError(S->names, w->id);
        if (name == NULL)
            return PyErr_Occurred() ? -1 : missed(S->names, w->id);
        int absent = name_absent(name, S->topics);
        if (absent < 0 || (absent && PyList_Append(S->topics, name) < 0))
            return -1;
    }
    return 0;
}

/* The sets S->sets took from `from` on, in a struct that names a topic: named as
 * records.columns.partitions names them (the name, else the topic id's text, else None). */
static int name_sets(Sum *S, Py_ssize_t from, Walked *w)
{
    PyObject *topic = NULL;
    for (Py_ssize_t i = from; i < PyList_GET_SIZE(S->sets); i++) {
        PyObject *entry = PyList_GET_ITEM(S->sets, i);
        if (PyList_GET_ITEM(entry, 0) != unnamed)
            continue;
        if (topic == NULL) {
            int named = w->name == NULL ? 0 : PyObject_IsTrue(w->name);
            if (named < 0)
                return -1;
            topic = named ? Py_NewRef(w->name)
                : w->id != NULL && w->id != Py_None ? PyObject_Str(w->id) : Py_NewRef(Py_None);
            if (topic == NULL)
                return -1;
        }
        PyList_SetItem(entry, 0, Py_NewRef(topic));
    }
    Py_XDECREF(topic);
    return 0;
}

/* An M_ROW struct's row of defaults (its fields' values replace them as they are read) */
static PyObject *new_row(Schema *s)
{
    PyObject *row = PyTuple_New(s->nrow);
    for (Py_ssize_t i = 0; row != NULL && i < s->nrow; i++) {
        PyObject *v = s->row_defs[i] < 0 ? Py_NewRef(Py_None) : fresh(&s->defaults[s->row_defs[i]]);
        if (v == NULL)
            Py_CLEAR(row);
        else
            PyTuple_SET_ITEM(row, i, v);
    }
    return row;
}

/* A struct's rows handed over: an M_ROW struct's row to its topic entry's rows, an M_GROUP
 * struct's (name, topic id, rows) to the groups (named as the walker names it; M_BY_NAME: an
 * empty name is None, as reading `name` then `topic` gives it) */
static int hand_rows(Schema *s, Walked *w)
{
    Sum *S = w->S;
    if (w->row != NULL && S->rows != NULL && PyList_Append(S->rows, w->row) < 0)
        return -1;
    if (w->rows == NULL)
        return 0;
    int named = w->name == NULL ? 0 : PyObject_IsTrue(w->name);
    if (named < 0)
        return -1;
    PyObject *name = w->name == NULL || (!named && (s->mode & M_BY_NAME)) ? Py_None : w->name;
    PyObject *group = PyTuple_Pack(3, name, w->id ? w->id : Py_None, w->rows);
    int rc = group == NULL ? -1 : PyList_Append(S->groups, group);
    Py_XDECREF(group);
    return rc;
}

static int sum_struct(Ctx *c, Py_ssize_t *p, Schema *s, Sum *S)
{
    Walked w = {.S = S};
    int rc = -1;
    Py_ssize_t sets_from = S->sets != NULL ? PyList_GET_SIZE(S->sets) : 0;
    PyObject *outer_rows = S->rows;
    if (s->mode & M_PARTITION)
        S->parts++;
    if ((s->name_def >= 0 && (w.name = fresh(&s->defaults[s->name_def])) == NULL)
            || (s->id_def >= 0 && (w.id = fresh(&s->defaults[s->id_def])) == NULL))
        goto done;
    if ((s->mode & M_GROUP) && S->groups != NULL) {
        if ((w.rows = PyList_New(0)) == NULL)
            goto done;
        S->rows = w.rows;
    }
    if ((s->mode & M_ROW) && S->rows != NULL && (w.row = new_row(s)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < s->nfields; ) {
        if (s->run_bytes[i] > 0) {   /* skipped fixed-size fields: checked as one */
            if (s->run_bytes[i] > c->end - *p)
                goto done;
            *p += s->run_bytes[i];
            i = s->run_end[i];
            continue;
        }
        if (sum_field(c, p, s, i, &w) < 0)
            goto done;
        i++;
    }
    if (s->flexible && walk_tags(c, p, s, sum_field, NULL, &w) < 0)
        goto done;
    S->rows = outer_rows;
    rc = (w.name != NULL || w.id != NULL) ? name_topic(s, &w) : 0;
    if (rc == 0 && S->sets != NULL && (w.name != NULL || w.id != NULL))
        rc = name_sets(S, sets_from, &w);
    if (rc == 0)
        rc = hand_rows(s, &w);
done:
    S->rows = outer_rows;
    Py_XDECREF(w.name);
    Py_XDECREF(w.id);
    Py_XDECREF(w.partition);
    Py_XDECREF(w.rows);
    Py_XDECREF(w.row);
    return rc;
}

/* A plan node (summary_plan._node) onto a compiled struct: -1 (no exception) if it does not fit. */
static int set_plan(Schema *s, PyObject *node)
{
    Py_ssize_t n = s->nfields + s->ntagged;
    if (!PyTuple_Check(node) || (PyTuple_GET_SIZE(node) != 4 && PyTuple_GET_SIZE(node) != 6))
        return -1;
    PyObject *roles = PyTuple_GET_ITEM(node, 3);
    PyObject *slots = PyTuple_GET_SIZE(node) == 6 ? PyTuple_GET_ITEM(node, 4) : NULL;
    PyObject *row_defs = slots != NULL ? PyTuple_GET_ITEM(node, 5) : NULL;
    if (!PyTuple_Check(roles) || PyTuple_GET_SIZE(roles) != n
            || (slots != NULL && (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != n
                                  || !PyTuple_Check(row_defs))))
        return -1;
    s->mode = (int)PyLong_AsLong(PyTuple_GET_ITEM(node, 0));
    s->name_def = PyLong_AsSsize_t(PyTuple_GET_ITEM(node, 1));
    s->id_def = PyLong_AsSsize_t(PyTuple_GET_ITEM(node, 2));
    if (PyErr_Occurred() || s->name_def >= s->ndefaults || s->id_def >= s->ndefaults)
        return -1;
    PyMem_Free(s->roles);
    PyMem_Free(s->row_defs);
    s->row_defs = NULL;
    s->nrow = 0;
    if ((s->roles = PyMem_Calloc(2 * n + 1 + 2 * s->nfields, sizeof(int))) == NULL)
        return -1;
    s->run_bytes = s->roles + n + 1;
    s->run_end = s->run_bytes + s->nfields;
    s->slots = s->run_end + s->nfields;
    if (row_defs != NULL && PyTuple_GET_SIZE(row_defs) > 0) {
        s->nrow = PyTuple_GET_SIZE(row_defs);
        if ((s->row_defs = PyMem_New(Py_ssize_t, s->nrow)) == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < s->nrow; i++) {
            s->row_defs[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(row_defs, i));
            if (PyErr_Occurred() || s->row_defs[i] < -1 || s->row_defs[i] >= s->ndefaults)
                return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long slot = slots == NULL ? -1 : PyLong_AsLong(PyTuple_GET_ITEM(slots, i));
        if (PyErr_Occurred() || slot < -1 || slot > INT_MAX)
            return -1;
        s->slots[i] = (int)slot;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyTuple_GET_ITEM(roles, i);
        Field *f = &s->fields[i];
        if (PyTuple_Check(r)) {
            if (f->child == NULL || set_plan(f->child, r) < 0)
                return -1;
            s->roles[i] = R_NODE;
            continue;
        }
        long role = PyLong_AsLong(r);
        if (role < R_SKIP || role >= R_NODE)
            return -1;
        s->roles[i] = (int)role;
    }
    for (Py_ssize_t i = s->nfields - 1; i >= 0; i--) {   /* runs of skipped fixed-size fields */
        Field *f = &s->fields[i];
        int fixed = s->roles[i] == R_SKIP && s->slots[i] < 0 && f->kind <= K_UUID;
        int next = i + 1 < s->nfields && s->run_bytes[i + 1] > 0;
        s->run_bytes[i] = fixed ? min_size[f->kind] + (next ? s->run_bytes[i + 1] : 0) : 0;
        s->run_end[i] = fixed ? (next ? s->run_end[i + 1] : (int)i + 1) : 0;
    }
    return 0;
}

/* -- the Reader type ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *schema;
    PyObject *fallback;
    Schema *compiled;
    int state;            /* 0: not compiled yet; 1: compiled; -1: the fallback reads all */
    PyObject *plan;       /* the summary plan set on `compiled` (summarize), or NULL */
} Reader;

static void compile_reader(Reader *self)
{
    if (uuids != NULL)   /* configured */
        self->compiled = compile_schema(self->schema, 0);
    self->state = self->compiled != NULL ? 1 : -1;
}

static PyObject *reader_call(Reader *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (self->state == 0)
        compile_reader(self);
    if (self->state < 0 || kw != NULL || nargs < 2 || nargs > 3 || !PyBytes_CheckExact(args[0])
            || !PyLong_CheckExact(args[1]) || (nargs == 3 && !PyLong_CheckExact(args[2])))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kw);
    Ctx c = {.bytes = args[0], .b = (const unsigned char *)PyBytes_AS_STRING(args[0]),
             .end = PyBytes_GET_SIZE(args[0])};
    Py_ssize_t p = PyLong_AsSsize_t(args[1]);
    c.budget = nargs == 3 ? PyLong_AsLongLong(args[2]) : default_budget;
    if (PyErr_Occurred())
        return NULL;
    if (p < 0 || p > c.end)
        return malformed();
    PyObject *body = read_struct(&c, &p, self->compiled);
    Py_XDECREF(c.view);
    if (body == NULL)
        return NULL;
    PyObject *pos = PyLong_FromSsize_t(p);
    if (pos == NULL) {
        Py_DECREF(body);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, body, pos);
    Py_DECREF(body);
    Py_DECREF(pos);
    return out;
}

/* The record sets as summarize returns them: (topic, partition, set) tuples, the topics of sets no
 * struct named None; None for none kept (NULL with an error) */
static PyObject *sets_of(PyObject *sets)
{
    if (sets == NULL)
        return Py_NewRef(Py_None);
    Py_ssize_t n = PyList_GET_SIZE(sets);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *e = PyList_GET_ITEM(sets, i), *topic = PyList_GET_ITEM(e, 0);
        PyObject *t = PyTuple_Pack(3, topic == unnamed ? Py_None : topic, PyList_GET_ITEM(e, 1),
                                   PyList_GET_ITEM(e, 2));
        if (t == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, t);
    }
    return out;
}

static PyObject *top_value(Schema *s, Py_ssize_t def)
{
    return def < 0 ? Py_NewRef(Py_None) : fresh(&s->defaults[def]);
}

/* summarize(b, p, plan, learn, names, decode_set, full, budget) -> (end, error codes, topics,
 * bad sets, partitions, records, records bytes, uncompressed bytes or None, error_code,
 * throttle_time_ms, record sets): the summary walk of the body at b[p:] (see "the summary
 * walk"); the record sets, with `full` (the records level), are (topic, partition, set) per
 * `records` field walked, else None. A RowSpec's plan (its 4th member: the settings' defaults)
 * adds two: the groups (name, topic id, rows) and the settings (a list). ValueError when this
 * reader cannot walk (not compiled, a plan that does not fit the layout, not bytes); malformed
 * bytes fail as a call does. */
static PyObject *reader_summarize(Reader *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8)
        return PyErr_Format(PyExc_TypeError, "summarize takes 8 arguments");
    if (self->state == 0)
        compile_reader(self);
    PyObject *plan = args[2];
    if (self->state < 0 || !PyBytes_CheckExact(args[0]) || !PyTuple_Check(plan)
            || (PyTuple_GET_SIZE(plan) != 3
                && (PyTuple_GET_SIZE(plan) != 4 || !PyTuple_Check(PyTuple_GET_ITEM(plan, 3)))))
        return PyErr_Format(PyExc_ValueError, "this reader cannot walk that");
    int rows = PyTuple_GET_SIZE(plan) == 4, nout = rows ? 13 : 11;
    Schema *s = self->compiled;
    if (plan != self->plan) {
        Py_CLEAR(self->plan);
        if (set_plan(s, PyTuple_GET_ITEM(plan, 0)) < 0) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "the plan does not fit the layout");
        }
        self->plan = Py_NewRef(plan);
    }
    Py_ssize_t err_def = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 1));
    Py_ssize_t thr_def = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 2));
    Py_ssize_t p = PyLong_AsSsize_t(args[1]);
    int learn = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || learn < 0)
        return NULL;
    if (err_def >= s->ndefaults || thr_def >= s->ndefaults || !PyDict_Check(args[4]))
        return PyErr_Format(PyExc_ValueError, "this reader cannot walk that");
    Ctx c = {.bytes = args[0], .b = (const unsigned char *)PyBytes_AS_STRING(args[0]),
             .end = PyBytes_GET_SIZE(args[0]), .budget = default_budget};
    if (p < 0 || p > c.end)
        return malformed();
    int full = PyObject_IsTrue(args[6]);
    if (full < 0)
        return NULL;
    Sum S = {.errs = PyList_New(0), .topics = PyList_New(0), .bad_sets = PyList_New(0),
             .names = args[4], .decode_set = args[5], .full = args[6], .budget = args[7],
             .learn = learn, .unc_known = 1, .top_error = top_value(s, err_def),
             .throttle = top_value(s, thr_def),
             .in_place = !full && in_place_sums != NULL && args[5] == in_place_sums};
    PyObject *out = NULL;
    if (full && (S.sets = PyList_New(0)) == NULL)   /* the records level keeps the sets */
        goto failed;
    if (rows) {
        PyObject *defs = PyTuple_GET_ITEM(plan, 3);
        if ((S.groups = PyList_New(0)) == NULL
                || (S.settings = PyList_New(PyTuple_GET_SIZE(defs))) == NULL)
            goto failed;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(defs); i++) {
            Py_ssize_t def = PyLong_AsSsize_t(PyTuple_GET_ITEM(defs, i));
            if ((def == -1 && PyErr_Occurred()) || def >= s->ndefaults || def < -1) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "this reader cannot walk that");
                goto failed;
            }
            PyObject *v = top_value(s, def);
            if (v == NULL)
                goto failed;
            PyList_SET_ITEM(S.settings, i, v);
        }
    }
    if (S.errs != NULL && S.topics != NULL && S.bad_sets != NULL && S.top_error != NULL
            && S.throttle != NULL) {
        if (sum_struct(&c, &p, s, &S) < 0)
            malformed();
        else {
            PyObject *items[13] = {
                PyLong_FromSsize_t(p), Py_NewRef(S.errs), Py_NewRef(S.topics),
                Py_NewRef(S.bad_sets), PyLong_FromLongLong(S.parts),
                PyLong_FromLongLong(S.nrec), PyLong_FromLongLong(S.nbytes),
                S.unc_known ? PyLong_FromLongLong(S.unc) : Py_NewRef(Py_None),
                Py_NewRef(S.top_error), Py_NewRef(S.throttle),
                sets_of(S.sets), rows ? Py_NewRef(S.groups) : NULL,
                rows ? Py_NewRef(S.settings) : NULL};
            out = PyTuple_New(nout);
            for (int i = 0; i < nout; i++) {
                if (out != NULL && items[i] != NULL)
                    PyTuple_SET_ITEM(out, i, items[i]);
                else {
                    Py_XDECREF(items[i]);
                    Py_CLEAR(out);
                }
            }
        }
    }
failed:
    Py_XDECREF(c.view);
    Py_XDECREF(S.errs);
    Py_XDECREF(S.topics);
    Py_XDECREF(S.bad_sets);
    Py_XDECREF(S.sets);
    Py_XDECREF(S.groups);
    Py_XDECREF(S.settings);
    Py_XDECREF(S.top_error);
    Py_XDECREF(S.throttle);
    return out;
}

static PyMethodDef reader_methods[] = {
    {"summarize", (PyCFunction)(void (*)(void))reader_summarize, METH_FASTCALL,
     "summarize(b, p, plan, learn, names, decode_set, full, budget) -> (end, error codes, "
     "topics, bad sets, partitions, records, records bytes, uncompressed bytes, error_code, "
     "throttle_time_ms)"},
    {NULL}
};

static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *schema, *fallback;
    static char *kwlist[] = {"schema", "fallback", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:Reader", kwlist, &schema, &fallback))
        return NULL;
    if (!PyCallable_Check(fallback))
        return PyErr_Format(PyExc_TypeError, "Reader: the fallback must be callable");
    Reader *self = (Reader *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)reader_call;
    self->schema = Py_NewRef(schema);
    self->fallback = Py_NewRef(fallback);
    return (PyObject *)self;
}

static void reader_dealloc(Reader *self)
{
    PyObject_GC_UnTrack(self);
    Py_CLEAR(self->schema);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->plan);
    schema_free(self->compiled);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int reader_traverse(Reader *self, visitproc visit, void *arg)
{
    Py_VISIT(self->schema);
    Py_VISIT(self->fallback);
    Py_VISIT(self->plan);
    return 0;
}

static PyObject *reader_compiled(Reader *self, void *Py_UNUSED(closure))
{
    if (self->state == 0)
        compile_reader(self);
    return PyBool_FromLong(self->state > 0);
}

static PyMemberDef reader_members[] = {
    {"schema", T_OBJECT, offsetof(Reader, schema), READONLY, "the schema table"},
    {"fallback", T_OBJECT, offsetof(Reader, fallback), READONLY, "the generated reader"},
    {NULL}
};

static PyGetSetDef reader_getset[] = {
    {"compiled", (getter)reader_compiled, NULL,
     "whether this reads the schema itself (else every call goes to the fallback)", NULL},
    {NULL}
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dissector.protocol._reader.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Reader(schema, fallback): the generated reader `fallback`, compiled from `schema`",
    .tp_new = reader_new,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Reader, vectorcall),
    .tp_members = reader_members,
    .tp_methods = reader_methods,
    .tp_getset = reader_getset,
};

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *marker, *cache, *at, *error;
    long long budget;
    if (!PyArg_ParseTuple(args, "OO!OOL:configure", &marker, &PyDict_Type, &cache, &at, &error,
                          &budget))
        return NULL;
    default_budget = budget;
    Py_XSETREF(malformed_error, Py_NewRef(error));
    Py_XSETREF(default_struct, Py_NewRef(marker));
    Py_XSETREF(uuids, Py_NewRef(cache));
    Py_XSETREF(uuid_at, Py_NewRef(at));
    Py_RETURN_NONE;
}

static PyObject *sums_in_place(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fn;
    int crc;
    if (!PyArg_ParseTuple(args, "Op:sums_in_place", &fn, &crc))
        return NULL;
    Py_XSETREF(in_place_sums, Py_NewRef(fn));
    in_place_crc = crc;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"sums_in_place", sums_in_place, METH_VARARGS,
     "sums_in_place(set_sums, crc): the summary walk does set_sums' common case itself where it "
     "is the walk's decode_set (records/_batchsums.h; `crc`: whether set_sums checks the CRC)"},
    {"configure", configure, METH_VARARGS,
     "configure(DEFAULT_STRUCT, UUIDS, uuid_at, Malformed, MAX_ELEMENTS): primitives' "
     "default-struct marker, UUID cache and builder, the error to raise, the default budget"},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_reader", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__reader(void)
{
    struct { PyObject **at; const char *s; } names[] = {
        {&unknown_tags_name, "unknown_tags"}, {&s_int, "int"},
        {&rs_record_count.name, "record_count"}, {&rs_size.name, "size"},
        {&rs_batches.name, "batches"}, {&rs_issues.name, "issues"}, {&b_codec.name, "codec"},
        {&b_size.name, "size"}, {&b_uncompressed_size.name, "uncompressed_size"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].s)) == NULL)
            return NULL;
    if ((unnamed = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type)) == NULL)
        return NULL;
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0)
        Py_CLEAR(m);
    return m;
}

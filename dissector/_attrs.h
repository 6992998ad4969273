/* Python objects' attributes and calls from C, for the compiled paths that keep their state in
 * the twins' own objects or read them (tcp/_handler.c, _pairing.c, _tablerow.c, _decoding.c;
 * the record sets and batches of protocol/_reader.c, records/_columns.c, _partition_walk.c).
 *
 * An attribute is named by a Slot: the objects are of __slots__ classes, and a __slots__ member
 * is a pointer at a fixed offset in the object, which its member descriptor reads and writes.
 * The Slot finds that offset once per class (the descriptor as the class's lookup finds it) and
 * then reads and writes it directly, as the descriptor would: on message-dense traffic the
 * generic attribute calls were a fifth of the header level. Any other attribute (a property, an
 * instance dict's, a class with its own __getattribute__ or __setattr__, a member not set) takes
 * the generic calls, so the result is always what the Python code would see. */
#ifndef KD_ATTRS_H
#define KD_ATTRS_H

#include <Python.h>
#include <structmember.h>

typedef struct {
    PyObject *name;         /* interned */
    PyTypeObject *type;     /* the class the offset was found for (not kept alive: compared) */
    unsigned int version;   /* its tp_version_tag then: 0 once the class changes */
    Py_ssize_t offset;      /* 0: the generic calls */
} Slot;

/* Whether attribute reads on class t find a set member as its descriptor does: object's own
 * __getattribute__ (a class's __getattr__ is then called only for what that does not find, an
 * unset member; model.Batch has one, for its deferred records) */
static int plain_reads(PyTypeObject *t)
{
    static PyObject *name;
    if (t->tp_getattro == PyObject_GenericGetAttr)
        return 1;
    if (name == NULL && (name = PyUnicode_InternFromString("__getattribute__")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    return _PyType_Lookup(t, name) == _PyType_Lookup(&PyBaseObject_Type, name);
}

/* s->offset for objects of class t */
static void slot_bind(Slot *s, PyTypeObject *t)
{
    PyObject *d = _PyType_Lookup(t, s->name);   /* borrowed; sets the version tag */
    s->type = t;
    s->version = t->tp_version_tag;
    s->offset = 0;
    if (d != NULL && Py_IS_TYPE(d, &PyMemberDescr_Type) && s->version != 0
            && PyType_IsSubtype(t, PyDescr_TYPE(d)) && plain_reads(t)
            && t->tp_setattro == PyObject_GenericSetAttr) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY))
            s->offset = m->offset;
    }
}

/* where o's member is, or NULL for the generic calls */
static inline PyObject **slot_at(Slot *s, PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    if (t != s->type || t->tp_version_tag != s->version)
        slot_bind(s, t);
    return s->offset ? (PyObject **)((char *)o + s->offset) : NULL;
}

/* getattr(o, name, None): a new reference; NULL on an error other than AttributeError. A
 * missing attribute of a plain class raises nothing to clear (_PyObject_LookupAttr): a body of
 * another version lacks a field on every entry. */
static inline PyObject *attr_or_none(PyObject *o, PyObject *name)
{
    PyObject *v;
    int found = _PyObject_LookupAttr(o, name, &v);
    if (found < 0)
        return NULL;
    return found ? v : Py_NewRef(Py_None);
}

/* o.name (a new reference), or NULL with an error raised */
static inline PyObject *attr_get(Slot *s, PyObject *o)
{
    PyObject **at = slot_at(s, o);
    if (at != NULL && *at != NULL)
        return Py_NewRef(*at);
    return PyObject_GetAttr(o, s->name);   /* also the AttributeError of a member not set */
}

/* o.name = v: 0, or -1 with an error raised */
static inline int attr_set(Slot *s, PyObject *o, PyObject *v)
{
    PyObject **at = slot_at(s, o);
    if (at == NULL)
        return PyObject_SetAttr(o, s->name, v);
    PyObject *old = *at;
    *at = Py_NewRef(v);
    Py_XDECREF(old);
    return 0;
}

/* o.name as a 64-bit int: 0, or -1 with an error raised */
static inline int get_ll(Slot *s, PyObject *o, long long *out)
{
    PyObject **at = slot_at(s, o);
    PyObject *v = at != NULL && *at != NULL ? Py_NewRef(*at) : PyObject_GetAttr(o, s->name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* o.name = v, an int: 0, or -1 with an error raised */
static inline int set_ll(Slot *s, PyObject *o, long long v)
{
    PyObject *x = PyLong_FromLongLong(v);
    if (x == NULL)
        return -1;
    int r = attr_set(s, o, x);
    Py_DECREF(x);
    return r;
}

/* 1 when o.name is true, 0 when false, -1 on error */
static inline int attr_true(Slot *s, PyObject *o)
{
    PyObject **at = slot_at(s, o);
    if (at != NULL && *at != NULL) {
        PyObject *v = *at;
        if (v == Py_None || v == Py_False)
            return 0;
        if (v == Py_True)
            return 1;
    }
    PyObject *v = attr_get(s, o);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* Objects made in place: a __slots__ class whose own __slots__ are `names` (all of them, in
 * order; its base is object, with object's __new__) can be made without its __init__ call, each
 * member set as the __init__ sets it (the __init__ stays the specification; the tests check that
 * the classes still have exactly these members). 1 when `t` is such a class, 0 when not (then
 * the class is called), -1 with an error raised. */
static int slots_cover(PyObject *t, Slot *const *names, int n)
{
    if (!PyType_Check(t))
        return 0;
    PyTypeObject *type = (PyTypeObject *)t;
    if (type->tp_base != &PyBaseObject_Type || type->tp_new != PyBaseObject_Type.tp_new
            || type->tp_alloc != PyType_GenericAlloc)
        return 0;
    PyObject *own = PyObject_GetAttrString(t, "__slots__");
    if (own == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyTuple_Check(own) && PyTuple_GET_SIZE(own) == n;
    for (int i = 0; ok && i < n; i++) {
        int eq = PyUnicode_Check(PyTuple_GET_ITEM(own, i))
            ? PyUnicode_Compare(PyTuple_GET_ITEM(own, i), names[i]->name) : -1;
        if (eq == -1 && PyErr_Occurred()) {
            Py_DECREF(own);
            return -1;
        }
        slot_bind(names[i], type);
        ok = eq == 0 && names[i]->offset != 0;
    }
    Py_DECREF(own);
    return ok;
}

/* A new object of a class slots_cover accepted for `names`, its members set to `values`
 * (borrowed); NULL with an error raised. */
static PyObject *slots_new(PyTypeObject *t, Slot *const *names, PyObject *const *values, int n)
{
    PyObject *o = t->tp_alloc(t, 0);
    if (o == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject **at = slot_at(names[i], o);
        if (at == NULL) {   /* the class changed since: made as the call would, no further */
            Py_DECREF(o);
            PyErr_Format(PyExc_TypeError, "%s changed its members", t->tp_name);
            return NULL;
        }
        Py_XSETREF(*at, Py_NewRef(values[i]));
    }
    return o;
}

/* a call's result dropped: 0, or -1 when it raised */
static inline int call_none(PyObject *r)
{
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

#define SLOT_DECLARE(n) static Slot s_##n;
#define SLOT_INTERN(n) if ((s_##n.name = PyUnicode_InternFromString(#n)) == NULL) return NULL;

#endif

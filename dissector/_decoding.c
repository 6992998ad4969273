/* The body decoder's calls per message, compiled: decoding.BodyDecoder.py_request, py_response
 * and py_summarize (the pure-Python twins) say what this does. On message-dense traffic the Python
 * between the session and the compiled readers was most of the bodies level's own time, and a
 * third of analysis.load's work on the bodies it keeps.
 *
 * configure(decoder_class, message_class, summary_class, record_apis, module) -> the methods
 * request, response and summarize for decoder_class. request and response take the common
 * case, as the decoder's _walkable says once per direction, api key and version (kept in its
 * `_walks`), for a response with a plain header (v0, or v1 without tagged fields): a body whose
 * layout is walked on its bytes (no body kept), or a body decoded by the compiled reader and
 * walked by its layout's summary walker (kept, or a layout the byte walk does not take). They
 * make the same Message and Summary the twin makes (their classes' slots set here). Everything
 * else goes to the twin from its start (nothing has happened yet), a walk that fails or a body
 * the reader does not read to its end to the twin's `_decoded` (the body decoded and walked, as
 * the twin does then), trailing bytes and record sets with issues to its `_walked` or `_rebase`.
 * `module` is decoding, whose set_sums and walk_set are read at each call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#include "_attrs.h"

static PyObject *message_class, *summary_class, *record_apis, *module, *one, *zero;

enum { API_VERSIONS = 18, UNSUPPORTED_VERSION = 35 };   /* protocol/embedded.py's */

#define NAMES(X) X(py_request) X(py_response) X(py_summarize) X(_walks) X(_walkable) \
    X(_decoded) X(_walked) X(_budget) X(max_uncompressed) X(topic_names) X(full_records) \
    X(set_sums) X(walk_set) X(_rebase) X(summarize) X(summary) X(topics) X(partitions) \
    X(records) X(records_bytes) X(uncompressed_bytes) X(error_code) X(error_codes) \
    X(throttle_time_ms)
/* the Exchange's (x_: a Slot is bound to one class at a time) */
#define EXCHANGE_NAMES(X) X(request_msg) X(response_msg) X(topics) X(partition_count) \
    X(api_key) X(record_count) X(records_bytes) X(records_uncompressed_bytes) X(error_code) \
    X(error_count) X(throttle_time_ms)
#define X_DECLARE(n) static Slot x_##n;
#define X_INTERN(n) if ((x_##n.name = PyUnicode_InternFromString(#n)) == NULL) return NULL;
EXCHANGE_NAMES(X_DECLARE)
NAMES(SLOT_DECLARE)

/* The slots of Message and Summary, in their __init__'s order. */
enum { M_API_KEY, M_API_VERSION, M_CORRELATION_ID, M_CLIENT_ID, M_HEADER_TAGS, M_BODY,
       M_ISSUES, M_HEADER_SIZE, M_SUMMARY, M_SLOTS };
static const char *message_slots[] = {"api_key", "api_version", "correlation_id", "client_id",
                                      "header_tags", "body", "issues", "header_size", "summary"};
enum { S_ERROR_CODES, S_TOPICS, S_PARTITIONS, S_RECORDS, S_RECORDS_BYTES,
       S_UNCOMPRESSED_BYTES, S_ERROR_CODE, S_THROTTLE_TIME_MS, S_RECORD_SETS, S_GROUPS,
       S_SETTINGS, S_SLOTS };
static const char *summary_slots[] = {"error_codes", "topics", "partitions", "records",
                                      "records_bytes", "uncompressed_bytes", "error_code",
                                      "throttle_time_ms", "record_sets", "groups", "settings"};
static Py_ssize_t message_off[M_SLOTS], summary_off[S_SLOTS];

/* The offsets of cls's object slots `names`: 0, or -1 with an error raised. */
static int slot_offsets(PyObject *cls, const char **names, int n, Py_ssize_t *off)
{
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        if (d == NULL)
            return -1;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
            && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        off[i] = ok ? ((PyMemberDescrObject *)d)->d_member->offset : -1;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "configure: %s is not a slot", names[i]);
            return -1;
        }
    }
    return 0;
}

/* A new object of cls with its n slots set to values (stolen, each non-NULL), or NULL. */
static PyObject *with_slots(PyObject *cls, const Py_ssize_t *off, PyObject **values, int n)
{
    PyTypeObject *t = (PyTypeObject *)cls;
    PyObject *o = t->tp_alloc(t, 0);
    for (int i = 0; i < n; i++) {
        if (o != NULL)
            *(PyObject **)((char *)o + off[i]) = values[i];
        else
            Py_DECREF(values[i]);
    }
    return o;
}

/* self.<name>(*args): the twin's method */
static PyObject *to_twin(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t n)
{
    PyObject *stack[12];
    stack[0] = self;
    for (Py_ssize_t i = 0; i < n; i++)
        stack[i + 1] = args[i];
    return PyObject_VectorcallMethod(name, stack, (size_t)(n + 1), NULL);
}

/* The decoder's (reader, plan, entry, response header version) for bodies walked on their
 * bytes: a new reference, or Py_None for the twin (NULL with an error raised). */
static PyObject *walkable(PyObject *self, int response, PyObject *key, PyObject *version)
{
    if (!PyLong_CheckExact(key) || !PyLong_CheckExact(version))
        Py_RETURN_NONE;
    long k = PyLong_AsLong(key), v = PyLong_AsLong(version);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (k < 0 || k >= 4096 || v < 0 || v >= 256)
        Py_RETURN_NONE;
    PyObject *walks = attr_get(&s__walks, self);
    if (walks == NULL)
        return NULL;
    PyObject *at = PyLong_FromLong(k << 9 | v << 1 | response), *w = NULL;
    if (at == NULL || !PyDict_CheckExact(walks)) {
        if (at != NULL)
            PyErr_SetString(PyExc_TypeError, "the decoder's _walks is not a dict");
        goto done;
    }
    w = PyDict_GetItemWithError(walks, at);
    if (w != NULL) {
        Py_INCREF(w);
        goto done;
    }
    if (PyErr_Occurred())
        goto done;
    PyObject *r = PyObject_CallMethodObjArgs(self, s__walkable.name, response ? Py_True : Py_False,
                                             key, version, NULL);
    if (r == NULL)
        goto done;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2) {
        PyErr_SetString(PyExc_TypeError, "_walkable returns (keep, entry)");
        Py_DECREF(r);
        goto done;
    }
    int keep = PyObject_IsTrue(PyTuple_GET_ITEM(r, 0));
    w = Py_NewRef(PyTuple_GET_ITEM(r, 1));
    Py_DECREF(r);
    if (keep < 0 || (keep && PyDict_SetItem(walks, at, w) < 0))
        Py_CLEAR(w);
done:
    Py_XDECREF(at);
    Py_DECREF(walks);
    if (w != NULL && w != Py_None && !(PyTuple_Check(w) && (PyTuple_GET_SIZE(w) == 4
            || (PyTuple_GET_SIZE(w) == 5 && PyTuple_Check(PyTuple_GET_ITEM(w, 4))
                && PyTuple_GET_SIZE(PyTuple_GET_ITEM(w, 4)) == 3)))) {
        PyErr_SetString(PyExc_TypeError, "_walkable's entry is (reader or None, plan, entry, "
                        "version) or (reader, None, entry, version, (class, walker, max "
                        "elements))");
        Py_CLEAR(w);
    }
    return w;
}

/* What a message's walk is given: a fresh budget (one a message, set on the decoder, as the
 * twin's _walk_bytes and _summary do), the decoder's topic names and full_records; 0, or -1
 * with an error raised (the caller releases what was set) */
static int walk_state(PyObject *self, PyObject **budget, PyObject **names, PyObject **full)
{
    PyObject *limit = attr_get(&s_max_uncompressed, self);
    if (limit == NULL)
        return -1;
    if ((*budget = PyList_New(1)) == NULL) {
        Py_DECREF(limit);
        return -1;
    }
    PyList_SET_ITEM(*budget, 0, limit);
    if (attr_set(&s__budget, self, *budget) < 0
            || (*names = attr_get(&s_topic_names, self)) == NULL
            || (*full = attr_get(&s_full_records, self)) == NULL)
        return -1;
    return 0;
}

/* The twin's _decoded for the body at data[offset:] (`tags` NULL: a new {}). */
static PyObject *twin_decoded(PyObject *self, PyObject *w, int response, PyObject *data,
                              PyObject *key, PyObject *version, PyObject *corr, PyObject *client,
                              PyObject *tags, PyObject *offset)
{
    PyObject *issues = PyList_New(0);
    PyObject *none = tags == NULL ? PyDict_New() : Py_NewRef(tags);
    PyObject *rest[10] = {data, PyTuple_GET_ITEM(w, 2), response ? Py_True : Py_False, key,
                          version, corr, client ? client : Py_None, none, offset, issues};
    PyObject *r = issues == NULL || none == NULL ? NULL : to_twin(self, s__decoded.name, rest, 10);
    Py_XDECREF(none);
    Py_XDECREF(issues);
    return r;
}

/* The message (its `summary` given: a new reference) as the twin makes it: Message's
 * header_tags are `header_tags or {}`. */
static PyObject *new_message(PyObject *key, PyObject *version, PyObject *corr, PyObject *client,
                             PyObject *tags, PyObject *body, PyObject *issues, PyObject *offset,
                             PyObject *summary)
{
    int has_tags = tags == NULL ? 0 : PyObject_IsTrue(tags);
    PyObject *own_tags = has_tags < 0 ? NULL : has_tags ? Py_NewRef(tags) : PyDict_New();
    if (own_tags == NULL) {
        Py_DECREF(summary);
        return NULL;
    }
    PyObject *values[M_SLOTS] = {Py_NewRef(key), Py_NewRef(version), Py_NewRef(corr),
                                 Py_NewRef(client ? client : Py_None), own_tags,
                                 Py_NewRef(body), Py_NewRef(issues), Py_NewRef(offset), summary};
    return with_slots(message_class, message_off, values, M_SLOTS);
}

/* The message whose body at data[offset:] is decoded and walked (`w` the decoder's (reader,
 * None, entry, version, (body class, walker, max elements))): the twin's _decoded with
 * decode_struct's fast path and _summary, without their Python frames (a kept body's, every
 * Produce and Fetch in analysis.load). A body the reader does not read to its end (or at all)
 * goes to the twin's _decoded before anything has happened, which says what is wrong. */
static PyObject *decoded_message(PyObject *self, PyObject *w, int response, PyObject *data,
                                 PyObject *key, PyObject *version, PyObject *corr,
                                 PyObject *client, PyObject *tags, PyObject *offset)
{
    PyObject *walk = PyTuple_GET_ITEM(w, 4);
    PyObject *args[3] = {data, offset, PyTuple_GET_ITEM(walk, 2)};
    PyObject *read = PyObject_Vectorcall(PyTuple_GET_ITEM(w, 0), args, 3, NULL);
    if (read == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyErr_Clear();
    }
    Py_ssize_t end = -1;
    if (read != NULL && PyTuple_CheckExact(read) && PyTuple_GET_SIZE(read) == 2
            && PyLong_CheckExact(PyTuple_GET_ITEM(read, 1))
            && PyTuple_GET_ITEM(read, 0) != Py_None)
        end = PyLong_AsSsize_t(PyTuple_GET_ITEM(read, 1));
    PyErr_Clear();   /* an end past any size is not this body's */
    if (end != PyBytes_GET_SIZE(data)) {
        Py_XDECREF(read);
        return twin_decoded(self, w, response, data, key, version, corr, client, tags, offset);
    }
    PyObject *body = Py_NewRef(PyTuple_GET_ITEM(read, 0));
    Py_DECREF(read);
    PyObject *budget = NULL, *names = NULL, *full = NULL, *walk_set = NULL, *issues = NULL;
    PyObject *bad_sets = NULL, *summary = NULL, *result = NULL;
    PyObject *values[S_SLOTS] = {PyList_New(0), PyList_New(0), Py_NewRef(zero), Py_NewRef(zero),
                                 Py_NewRef(zero), Py_NewRef(zero), Py_NewRef(Py_None),
                                 Py_NewRef(Py_None), Py_NewRef(Py_None), Py_NewRef(Py_None),
                                 Py_NewRef(Py_None)};
    if (values[0] == NULL || values[1] == NULL) {
        for (int i = 0; i < S_SLOTS; i++)
            Py_XDECREF(values[i]);
        goto done;
    }
    if ((summary = with_slots(summary_class, summary_off, values, S_SLOTS)) == NULL
            || walk_state(self, &budget, &names, &full) < 0
            || (walk_set = PyObject_GetAttr(module, s_walk_set.name)) == NULL
            || (issues = PyList_New(0)) == NULL || (bad_sets = PyList_New(0)) == NULL)
        goto done;
    if ((PyObject *)Py_TYPE(body) == PyTuple_GET_ITEM(walk, 0)) {
        PyObject *call[8] = {body, summary, bad_sets, response ? Py_True : Py_False, names,
                             budget, full, walk_set};
        PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(walk, 1), call, 8, NULL);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    PyObject *top = attr_or_none(body, s_error_code.name);
    if (top == NULL)
        goto done;
    Py_SETREF(*(PyObject **)((char *)summary + summary_off[S_ERROR_CODE]), top);
    PyObject *throttle = attr_or_none(body, s_throttle_time_ms.name);
    if (throttle == NULL)
        goto done;
    Py_SETREF(*(PyObject **)((char *)summary + summary_off[S_THROTTLE_TIME_MS]), throttle);
    if (PyList_GET_SIZE(bad_sets) > 0) {   /* their issues, at offsets in the message */
        PyObject *rebase = PyObject_GetAttr(module, s__rebase.name);
        PyObject *rest[3] = {data, bad_sets, issues};
        PyObject *r = rebase == NULL ? NULL : PyObject_Vectorcall(rebase, rest, 3, NULL);
        Py_XDECREF(rebase);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    result = new_message(key, version, corr, client, tags, body, issues, offset,
                         Py_NewRef(summary));
done:
    Py_DECREF(body);
    Py_XDECREF(budget);
    Py_XDECREF(names);
    Py_XDECREF(full);
    Py_XDECREF(walk_set);
    Py_XDECREF(issues);
    Py_XDECREF(bad_sets);
    Py_XDECREF(summary);
    return result;
}

/* The message whose body at data[offset:] the entry `w` walks (what the twin does once its
 * header is read): `client` NULL for a response, `tags` the header's tagged fields (NULL: none,
 * a response's plain header: a new {} where one is needed). */
static PyObject *walked_message(PyObject *self, PyObject *w, int response, PyObject *data,
                                PyObject *key, PyObject *version, PyObject *corr, PyObject *client,
                                PyObject *tags, PyObject *offset)
{
    PyObject *budget = NULL, *names = NULL, *full = NULL, *set_sums = NULL, *walked = NULL;
    PyObject *issues = NULL, *summary = NULL, *result = NULL;
    /* a RowSpec's plan (4 members) hands over the record sets whole: walk_set's */
    PyObject *plan = PyTuple_GET_ITEM(w, 1);
    int rows = PyTuple_Check(plan) && PyTuple_GET_SIZE(plan) == 4;
    if (walk_state(self, &budget, &names, &full) < 0
            || (set_sums = PyObject_GetAttr(module, rows ? s_walk_set.name : s_set_sums.name))
                == NULL
            || (issues = PyList_New(0)) == NULL)
        goto done;
    PyObject *args[9] = {PyTuple_GET_ITEM(w, 0), data, offset, plan,
                         response ? Py_True : Py_False, names, set_sums, full, budget};
    walked = PyObject_VectorcallMethod(s_summarize.name, args, 9, NULL);
    if (walked == NULL) {   /* malformed, or a layout it cannot walk: decoded instead */
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            goto done;
        PyErr_Clear();
        result = twin_decoded(self, w, response, data, key, version, corr, client, tags, offset);
        goto done;
    }
    if (!PyTuple_CheckExact(walked) || PyTuple_GET_SIZE(walked) != (rows ? 13 : 11)) {
        PyErr_SetString(PyExc_TypeError, "summarize returns an 11-tuple (13 with rows)");
        goto done;
    }
    Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(walked, 0));
    PyObject *bad_sets = PyTuple_GET_ITEM(walked, 3);
    if (end == -1 && PyErr_Occurred())
        goto done;
    if (end < PyBytes_GET_SIZE(data) || !PyList_CheckExact(bad_sets)
            || PyList_GET_SIZE(bad_sets) > 0) {   /* issues to add: the twin's */
        PyObject *rest[3] = {data, walked, issues};
        summary = to_twin(self, s__walked.name, rest, 3);
    } else {
        static const int from[S_SLOTS] = {1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12};
        PyObject *values[S_SLOTS];
        for (int i = 0; i < S_SLOTS; i++)
            values[i] = Py_NewRef(from[i] < PyTuple_GET_SIZE(walked)
                                  ? PyTuple_GET_ITEM(walked, from[i]) : Py_None);
        summary = with_slots(summary_class, summary_off, values, S_SLOTS);
    }
    if (summary == NULL)
        goto done;
    result = new_message(key, version, corr, client, tags, Py_None, issues, offset,
                         Py_NewRef(summary));
done:
    Py_XDECREF(budget);
    Py_XDECREF(names);
    Py_XDECREF(full);
    Py_XDECREF(set_sums);
    Py_XDECREF(walked);
    Py_XDECREF(issues);
    Py_XDECREF(summary);
    return result;
}

/* The message of a body not read (the decoder's `unread`: `w` has no reader): no body, no
 * summary, no issues */
static PyObject *unread_message(PyObject *key, PyObject *version, PyObject *corr,
                                PyObject *client, PyObject *tags, PyObject *offset)
{
    PyObject *issues = PyList_New(0);
    if (issues == NULL)
        return NULL;
    PyObject *msg = new_message(key, version, corr, client, tags, Py_None, issues, offset,
                                Py_NewRef(Py_None));
    Py_DECREF(issues);
    return msg;
}

/* The message of `w` (walkable's answer) */
static PyObject *message_of(PyObject *self, PyObject *w, int response, PyObject *data,
                            PyObject *key, PyObject *version, PyObject *corr, PyObject *client,
                            PyObject *tags, PyObject *offset)
{
    if (PyTuple_GET_ITEM(w, 0) == Py_None)
        return unread_message(key, version, corr, client, tags, offset);
    return (PyTuple_GET_SIZE(w) == 5 ? decoded_message : walked_message)(
        self, w, response, data, key, version, corr, client, tags, offset);
}

/* BodyDecoder.request(data, api_key, api_version, correlation_id, client_id, header_tags,
 * body_offset) */
static PyObject *request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyBytes_CheckExact(args[0]) || !PyLong_CheckExact(args[6]))
        return to_twin(self, s_py_request.name, args, nargs);
    PyObject *w = walkable(self, 0, args[1], args[2]);
    if (w == NULL || w == Py_None) {
        Py_XDECREF(w);
        return PyErr_Occurred() ? NULL : to_twin(self, s_py_request.name, args, nargs);
    }
    PyObject *msg = message_of(self, w, 0, args[0], args[1], args[2], args[3], args[4], args[5],
                               args[6]);
    Py_DECREF(w);
    return msg;
}

/* BodyDecoder.response(data, api_key, api_version, request=None) */
static PyObject *response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4 || !PyBytes_CheckExact(args[0]))
        return to_twin(self, s_py_response.name, args, nargs);
    PyObject *data = args[0], *key = args[1], *version = args[2];
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    PyObject *w = walkable(self, 1, key, version);
    if (w == NULL)
        return NULL;
    if (w == Py_None || n < 4) {
        Py_DECREF(w);
        return to_twin(self, s_py_response.name, args, nargs);
    }
    int v1 = PyObject_RichCompareBool(PyTuple_GET_ITEM(w, 3), one, Py_EQ);
    if (v1 < 0) {
        Py_DECREF(w);
        return NULL;
    }
    if (v1 && !(n > 4 && p[4] == 0)) {   /* tagged fields in the header: the twin's */
        Py_DECREF(w);
        return to_twin(self, s_py_response.name, args, nargs);
    }
    Py_ssize_t at = v1 ? 5 : 4;
    /* an ApiVersions reply above v0 carrying error 35 is read with the v0 layout: the twin's
       (embedded.v0_reply); walkable() answered, so the key and version are small ints */
    if (n >= at + 2 && p[at] == 0 && p[at + 1] == UNSUPPORTED_VERSION
        && PyLong_AsLong(key) == API_VERSIONS && PyLong_AsLong(version) != 0) {
        Py_DECREF(w);
        return to_twin(self, s_py_response.name, args, nargs);
    }
    PyObject *corr = PyLong_FromLong((int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16)
                                               | ((uint32_t)p[2] << 8) | p[3]));
    PyObject *offset = PyLong_FromLong(at), *msg = NULL;
    if (corr != NULL && offset != NULL)
        msg = message_of(self, w, 1, data, key, version, corr, NULL, NULL, offset);
    Py_DECREF(w);
    Py_XDECREF(corr);
    Py_XDECREF(offset);
    return msg;
}

/* ex.<which>.summary, or None where there is no message */
static PyObject *summary_of(PyObject *ex, Slot *which)
{
    PyObject *msg = attr_get(which, ex);
    if (msg == NULL || msg == Py_None)
        return msg;
    PyObject *s = attr_get(&s_summary, msg);
    Py_DECREF(msg);
    return s;
}

static int set_to(PyObject *o, Slot *name, PyObject *v)   /* steals v */
{
    if (v == NULL)
        return -1;
    int rc = attr_set(name, o, v);
    Py_DECREF(v);
    return rc;
}

/* s.name if s is not None and it is true, else NULL with *picked 0 (an error: -1) */
static PyObject *true_attr(PyObject *s, Slot *name, int *picked)
{
    *picked = 0;
    if (s == Py_None)
        return NULL;
    PyObject *v = attr_get(name, s);
    int t = v == NULL ? -1 : PyObject_IsTrue(v);
    if (t <= 0) {
        Py_XDECREF(v);
        *picked = t;
        return NULL;
    }
    *picked = 1;
    return v;
}

/* ex.topics or ex.partition_count: the request's when true, else the response's, else [] or 0
 * (`list`: which) */
static int either(PyObject *ex, PyObject *req, PyObject *resp, Slot *name, Slot *column,
                  int list)
{
    int picked;
    PyObject *v = true_attr(req, name, &picked);
    if (picked < 0)
        return -1;
    if (v == NULL)
        v = resp != Py_None ? attr_get(name, resp) : list ? PyList_New(0) : PyLong_FromLong(0);
    return set_to(ex, column, v);
}

/* self = self + x.name: 0, or -1 with an error raised */
static int add_attr(PyObject **sum, PyObject *x, Slot *name)
{
    PyObject *v = attr_get(name, x);
    if (v == NULL)
        return -1;
    Py_SETREF(*sum, PyNumber_Add(*sum, v));
    Py_DECREF(v);
    return *sum == NULL ? -1 : 0;
}

/* The record columns: counts and sizes added up, the uncompressed size None once unknown. */
static int record_columns(PyObject *ex, PyObject *req, PyObject *resp)
{
    PyObject *count = PyLong_FromLong(0), *size = PyLong_FromLong(0), *unc = PyLong_FromLong(0);
    PyObject *sides[2] = {req, resp};
    int rc = -1;
    for (int i = 0; i < 2; i++) {
        PyObject *x = sides[i];
        if (count == NULL || size == NULL || unc == NULL)
            goto done;
        if (x == Py_None)
            continue;
        if (add_attr(&count, x, &s_records) < 0 || add_attr(&size, x, &s_records_bytes) < 0)
            goto done;
        if (unc == Py_None)
            continue;
        PyObject *v = attr_get(&s_uncompressed_bytes, x);
        if (v == NULL)
            goto done;
        if (v == Py_None)
            Py_SETREF(unc, v);
        else {
            Py_SETREF(unc, PyNumber_Add(unc, v));
            Py_DECREF(v);
        }
    }
    if (count == NULL || size == NULL || unc == NULL)
        goto done;
    rc = set_to(ex, &x_record_count, Py_NewRef(count)) < 0
        || set_to(ex, &x_records_bytes, Py_NewRef(size)) < 0
        || set_to(ex, &x_records_uncompressed_bytes, Py_NewRef(unc)) < 0 ? -1 : 0;
done:
    Py_XDECREF(count);
    Py_XDECREF(size);
    Py_XDECREF(unc);
    return rc;
}

/* BodyDecoder.summarize(ex) */
static PyObject *summarize(PyObject *self, PyObject *ex)
{
    PyObject *req = summary_of(ex, &x_request_msg), *resp = NULL, *result = NULL;
    PyObject *top = NULL, *codes = NULL, *api_key = NULL;
    if (req == NULL || (resp = summary_of(ex, &x_response_msg)) == NULL)
        goto done;
    if (req != Py_None || resp != Py_None) {
        if (either(ex, req, resp, &s_topics, &x_topics, 1) < 0
                || either(ex, req, resp, &s_partitions, &x_partition_count, 0) < 0)
            goto done;
        if ((api_key = attr_get(&x_api_key, ex)) == NULL)
            goto done;
        int records = PySet_Contains(record_apis, api_key);
        if (records < 0 || (records && record_columns(ex, req, resp) < 0))
            goto done;
    }
    if (resp != Py_None) {
        if ((top = attr_get(&s_error_code, resp)) == NULL
                || (codes = attr_get(&s_error_codes, resp)) == NULL)
            goto done;
        int t = PyObject_IsTrue(top), any = t ? 0 : PyObject_IsTrue(codes);
        if (t < 0 || any < 0)
            goto done;
        PyObject *error = t ? Py_NewRef(top) : any ? PySequence_GetItem(codes, 0)
                                                   : PyLong_FromLong(0);
        Py_ssize_t count = PyObject_Length(codes);
        if (set_to(ex, &x_error_code, error) < 0 || count < 0
                || set_to(ex, &x_error_count, PyLong_FromSsize_t(count)) < 0
                || set_to(ex, &x_throttle_time_ms, attr_get(&s_throttle_time_ms, resp)) < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(req);
    Py_XDECREF(resp);
    Py_XDECREF(top);
    Py_XDECREF(codes);
    Py_XDECREF(api_key);
    return result;
}

static PyMethodDef request_def = {"request", (PyCFunction)(void (*)(void))request, METH_FASTCALL,
                                  "request(data, api_key, api_version, correlation_id, "
                                  "client_id, header_tags, body_offset): BodyDecoder.py_request"};
static PyMethodDef response_def = {"response", (PyCFunction)(void (*)(void))response,
                                   METH_FASTCALL, "response(data, api_key, api_version, "
                                   "request=None): BodyDecoder.py_response"};
static PyMethodDef summarize_def = {"summarize", (PyCFunction)summarize, METH_O,
                                    "summarize(ex): BodyDecoder.py_summarize"};

static PyObject *configure(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *decoder_class, *message, *summary, *apis, *mod;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O", &PyType_Type, &decoder_class, &PyType_Type,
                          &message, &PyType_Type, &summary, &PyFrozenSet_Type, &apis, &mod))
        return NULL;
    if (slot_offsets(message, message_slots, M_SLOTS, message_off) < 0
            || slot_offsets(summary, summary_slots, S_SLOTS, summary_off) < 0)
        return NULL;
    Py_XSETREF(message_class, Py_NewRef(message));
    Py_XSETREF(summary_class, Py_NewRef(summary));
    Py_XSETREF(record_apis, Py_NewRef(apis));
    Py_XSETREF(module, Py_NewRef(mod));
    PyTypeObject *cls = (PyTypeObject *)decoder_class;
    PyObject *r = PyDescr_NewMethod(cls, &request_def);
    PyObject *s = PyDescr_NewMethod(cls, &response_def);
    PyObject *z = PyDescr_NewMethod(cls, &summarize_def);
    PyObject *all = r == NULL || s == NULL || z == NULL ? NULL : PyTuple_Pack(3, r, s, z);
    Py_XDECREF(r);
    Py_XDECREF(s);
    Py_XDECREF(z);
    return all;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(decoder_class, message_class, summary_class, record_apis, module) "
     "-> the methods request, response and summarize"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, .m_name = "dissector._decoding",
                                        .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__decoding(void)
{
    NAMES(SLOT_INTERN)
    EXCHANGE_NAMES(X_INTERN)
    if ((one = PyLong_FromLong(1)) == NULL || (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}

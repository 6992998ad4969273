/* A connection's messages paired, compiled: session.Session.py_frame (the
 * pure-Python twin, with _request, _response and _paired) says what this does. On message-dense
 * traffic the session's Python was a fifth of the header level's time.
 *
 * configure(session_class, pending_class, exchange_class, request_head, flexible, ok, limits)
 * -> the methods `frame` and `_head_size` (twin Session.py_head_size: a message's first bytes
 * the headers level reads; a response's tagged fields go to the twin) for session_class (`limits`: the module whose MAX_IN_FLIGHT and
 * MAX_IN_FLIGHT_BYTES bound the requests in flight, read at each request): a
 * request whose header request_head reads (or _head_size read when the message started) goes in
 * flight; a response answering the oldest request in flight with a plain header (v0, or v1
 * without tagged fields) makes its Exchange, handed to the session's _emit. At the bodies
 * levels the session's decoder (decoding.BodyDecoder: its request, response and summarize, as
 * the twin calls them) decodes each message on the way, any response header. Everything else
 * (raw SASL tokens, a header request_head leaves to the full parse, a
 * response out of order or too short, SaslHandshake and ApiVersions answers, a request already
 * holding issues) goes to the twin's own methods at the same point, and every message while
 * responses wait for their requests (_early). `flexible` is the first
 * flexible response version of each api key (None: never), indexed by api key. The _Pending and
 * the Exchange are made without their __init__ calls where their classes have the members
 * listed here (in_place() says so). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_attrs.h"

#define PRODUCE 0
#define SASL_HANDSHAKE 17
#define API_VERSIONS 18
#define KEYS 1024

static PyObject *limits, *pending_class, *exchange_class, *request_head, *ok;
static int flexible[KEYS];   /* first flexible response version, or -1 */
static Py_ssize_t known;

#define NAMES(X) X(_decoder) X(_raw_sasl) X(_parsed) X(_sasl) X(_inflight) X(_inflight_bytes) \
    X(_raw_tokens) X(connection) X(_emit) X(_exchanges) X(output) X(index) X(direction) X(data) \
    X(acks) X(frame) X(api_key) X(api_version) X(correlation_id) X(client_id) X(msg) X(issues) \
    X(popleft) X(append) X(_request) X(_response) X(_paired) X(_give_up) X(MAX_IN_FLIGHT) \
    X(MAX_IN_FLIGHT_BYTES) X(py_head_size) X(request) X(response) X(summarize) X(response_msg) \
    X(_rebase) X(severity) X(status) X(ERROR) X(MALFORMED) X(emitted) X(walker) X(n) \
    X(_early) X(py_frame) X(_requests) X(owed) X(next)
NAMES(SLOT_DECLARE)

/* The objects made in place (_attrs.h slots_new) when their classes have these members. */
static Slot *const pending_members[] = {&s_frame, &s_api_key, &s_api_version, &s_correlation_id,
                                        &s_client_id, &s_msg, &s_acks, &s_issues};
#define PENDING_MEMBERS 8
static const char *const exchange_names[] = {
    "connection", "request", "response", "api_key", "api_version", "correlation_id", "client_id",
    "status", "request_msg", "response_msg", "issues", "error_code", "error_count",
    "throttle_time_ms", "topics", "partition_count", "record_count", "records_bytes",
    "records_uncompressed_bytes", "index", "raw_sasl"};
#define EXCHANGE_MEMBERS 21
static Slot exchange_slot[EXCHANGE_MEMBERS];
static Slot *exchange_members[EXCHANGE_MEMBERS];
static int pending_in_place, exchange_in_place;
static PyObject *numbering;   /* pipeline.Dissector._emit, done in place (emit) */

/* a correlation id: the big-endian int32 at p */
static inline int32_t be_i32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static PyObject *to_twin(PyObject *session, PyObject *method, PyObject *a, PyObject *b)
{
    return PyObject_CallMethodObjArgs(session, method, a, b, NULL);
}

/* Where a Produce request's acks are (session._acks_at): 0 with *at set, -1 where _acks_at
 * raises (the bytes end first) */
static int acks_at(const unsigned char *p, Py_ssize_t n, Py_ssize_t pos, long long version,
                   Py_ssize_t *at)
{
    if (version >= 9) {   /* a compact string: length + 1 as an unsigned varint */
        unsigned long long value = 0;
        int i;
        for (i = 0; i < 5; i++) {
            if (pos < 0 || pos >= n)
                return -1;
            unsigned char b = p[pos++];
            value |= (unsigned long long)(b & 0x7F) << (7 * i);
            if (b < 0x80)
                break;
        }
        if (i == 5)
            return -1;
        pos += value > 0 ? (Py_ssize_t)(value - 1) : 0;
    } else if (version >= 3) {   /* a nullable string: int16 length */
        if (pos < 0 || pos + 2 > n)
            return -1;
        int16_t len = (int16_t)((p[pos] << 8) | p[pos + 1]);
        pos += 2 + (len > 0 ? len : 0);
    }
    *at = pos;
    return 0;
}

/* a Produce request's acks (session.produce_acks), or None */
static PyObject *produce_acks(const unsigned char *p, Py_ssize_t n, Py_ssize_t pos,
                              long long version)
{
    if (acks_at(p, n, pos, version, &pos) < 0 || pos < 0 || pos + 2 > n)
        Py_RETURN_NONE;
    return PyLong_FromLong((int16_t)((p[pos] << 8) | p[pos + 1]));
}

/* d.emitted.append(d.walker.n) when the dissector's `emitted` is not None (a worker's note) */
static int note_packet(PyObject *d)
{
    PyObject *emitted = attr_get(&s_emitted, d);
    if (emitted == NULL || emitted == Py_None) {
        Py_XDECREF(emitted);
        return emitted == NULL ? -1 : 0;
    }
    PyObject *walker = attr_get(&s_walker, d);
    PyObject *n = walker == NULL ? NULL : attr_get(&s_n, walker);
    PyObject *r = n == NULL ? NULL : PyObject_CallMethodOneArg(emitted, s_append.name, n);
    Py_XDECREF(walker);
    Py_XDECREF(n);
    Py_DECREF(emitted);
    return call_none(r);
}

/* session._emit(ex); where that is pipeline.Dissector._emit, done here: the exchange numbered
 * and queued on the dissector's output, its packet noted when asked */
static PyObject *emit(PyObject *session, PyObject *ex)
{
    PyObject *to = attr_get(&s__emit, session);
    if (to == NULL)
        return NULL;
    if (numbering == NULL || !PyMethod_Check(to) || PyMethod_GET_FUNCTION(to) != numbering) {
        PyObject *r = PyObject_CallOneArg(to, ex);
        Py_DECREF(to);
        return r;
    }
    PyObject *d = PyMethod_GET_SELF(to), *one = PyLong_FromLong(1);
    PyObject *n = NULL, *out = NULL, *r = NULL;
    PyObject *count = one == NULL ? NULL : attr_get(&s__exchanges, d);
    if (count != NULL && (n = PyNumber_Add(count, one)) != NULL
            && attr_set(&s__exchanges, d, n) == 0 && attr_set(&s_index, ex, n) == 0
            && (out = attr_get(&s_output, d)) != NULL
            && (r = PyObject_CallMethodOneArg(out, s_append.name, ex)) != NULL
            && note_packet(d) < 0)
        Py_CLEAR(r);
    Py_XDECREF(one);
    Py_XDECREF(count);
    Py_XDECREF(n);
    Py_XDECREF(out);
    Py_DECREF(to);
    return r;
}

/* Session._pop: the oldest request in flight, its bytes no longer counted */
static PyObject *pop(PyObject *session)
{
    PyObject *inflight = attr_get(&s__inflight, session);
    if (inflight == NULL)
        return NULL;
    PyObject *pending = PyObject_CallMethodNoArgs(inflight, s_popleft.name);
    Py_DECREF(inflight);
    if (pending == NULL)
        return NULL;
    PyObject *frame = attr_get(&s_frame, pending);
    PyObject *data = frame == NULL ? NULL : attr_get(&s_data, frame);
    Py_XDECREF(frame);
    Py_ssize_t n = data == NULL ? -1 : PyObject_Length(data);
    Py_XDECREF(data);
    long long used;
    if (n < 0 || get_ll(&s__inflight_bytes, session, &used) < 0
            || set_ll(&s__inflight_bytes, session, used - n) < 0) {
        Py_DECREF(pending);
        return NULL;
    }
    return pending;
}

/* [session._rebase(i, frame) for i in issues] appended to `to`: 0, or -1 with an error */
static int rebased(PyObject *session, PyObject *issues, PyObject *frame, PyObject *to)
{
    PyObject *it = PyObject_GetIter(issues), *i;
    if (it == NULL)
        return -1;
    while ((i = PyIter_Next(it)) != NULL) {
        PyObject *r = PyObject_CallMethodObjArgs(session, s__rebase.name, i, frame, NULL);
        Py_DECREF(i);
        if (r == NULL || PyList_Append(to, r) < 0) {
            Py_XDECREF(r);
            break;
        }
        Py_DECREF(r);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* The bodies levels' decoding of a request in flight (Session._request's): pending.msg, and
 * its issues rebased as the pending request's own. 0, or -1 with an error raised. */
static int decode_request(PyObject *decoder, PyObject *session, PyObject *pending,
                          PyObject *frame, PyObject *data, PyObject *head)
{
    PyObject *args[8] = {decoder, data, PyTuple_GET_ITEM(head, 0), PyTuple_GET_ITEM(head, 1),
                         PyTuple_GET_ITEM(head, 2), PyTuple_GET_ITEM(head, 3),
                         PyTuple_GET_ITEM(head, 4), PyTuple_GET_ITEM(head, 5)};
    PyObject *msg = PyObject_VectorcallMethod(s_request.name, args, 8, NULL);
    if (msg == NULL || attr_set(&s_msg, pending, msg) < 0) {
        Py_XDECREF(msg);
        return -1;
    }
    PyObject *issues = PyObject_GetAttr(msg, s_issues.name), *own = NULL;
    Py_DECREF(msg);
    int any = issues == NULL ? -1 : PyObject_IsTrue(issues);
    int rc = any;
    if (any > 0) {
        own = PyList_New(0);
        rc = own == NULL || rebased(session, issues, frame, own) < 0
            || attr_set(&s_issues, pending, own) < 0 ? -1 : 0;
    }
    Py_XDECREF(issues);
    Py_XDECREF(own);
    return rc;
}

/* Session._request (`decoder`: the session's, None at the headers level) */
static PyObject *request(PyObject *session, PyObject *frame, PyObject *data, PyObject *decoder)
{
    PyObject *head = attr_get(&s__parsed, session);
    if (head == NULL)
        return NULL;
    if (head != Py_None) {   /* this message's, parsed by _head_size when it started */
        if (attr_set(&s__parsed, session, Py_None) < 0) {
            Py_DECREF(head);
            return NULL;
        }
    } else {
        Py_DECREF(head);
        head = PyObject_CallOneArg(request_head, data);
        if (head == NULL)
            return NULL;
        if (head == Py_None) {   /* the full parse, and what it says is wrong */
            Py_DECREF(head);
            return to_twin(session, s__request.name, frame, NULL);
        }
    }
    PyObject *result = NULL, *pending = NULL, *inflight = NULL;
    if (!PyTuple_Check(head) || PyTuple_GET_SIZE(head) != 6) {
        PyErr_SetString(PyExc_ValueError, "a request header is a 6-tuple");
        goto done;
    }
    PyObject *key = PyTuple_GET_ITEM(head, 0), *version = PyTuple_GET_ITEM(head, 1);
    long long api_key = PyLong_AsLongLong(key), api_version = PyLong_AsLongLong(version);
    Py_ssize_t body_offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(head, 5));
    if (PyErr_Occurred())
        goto done;
    if (api_key == SASL_HANDSHAKE && api_version == 0
            && attr_set(&s__sasl, session, Py_True) < 0)
        goto done;
    if (pending_in_place) {   /* _Pending.__init__ */
        PyObject *issues = PyList_New(0);
        if (issues == NULL)
            goto done;
        PyObject *values[PENDING_MEMBERS] = {frame, key, version, PyTuple_GET_ITEM(head, 2),
                                             PyTuple_GET_ITEM(head, 3), Py_None, Py_None, issues};
        pending = slots_new((PyTypeObject *)pending_class, pending_members, values,
                            PENDING_MEMBERS);
        Py_DECREF(issues);
    } else {
        PyObject *args[5] = {frame, key, version, PyTuple_GET_ITEM(head, 2),
                             PyTuple_GET_ITEM(head, 3)};
        pending = PyObject_Vectorcall(pending_class, args, 5, NULL);
    }
    if (pending == NULL)
        goto done;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t n = view.len;
    if (api_key == PRODUCE) {
        PyObject *acks = produce_acks(view.buf, n, body_offset, api_version);
        if (acks == NULL || attr_set(&s_acks, pending, acks) < 0) {
            Py_XDECREF(acks);
            PyBuffer_Release(&view);
            goto done;
        }
        Py_DECREF(acks);
    }
    PyBuffer_Release(&view);
    if (decoder != Py_None && decode_request(decoder, session, pending, frame, data, head) < 0)
        goto done;
    inflight = attr_get(&s__inflight, session);
    long long used;
    PyObject *bytes = inflight == NULL ? NULL : attr_get(&s__inflight_bytes, session);
    if (bytes == NULL || call_none(PyObject_CallMethodOneArg(inflight, s_append.name, pending)) < 0) {
        Py_XDECREF(bytes);
        goto done;
    }
    used = PyLong_AsLongLong(bytes);
    Py_DECREF(bytes);
    if (used == -1 && PyErr_Occurred())
        goto done;
    used += n;
    bytes = PyLong_FromLongLong(used);
    if (bytes == NULL || attr_set(&s__inflight_bytes, session, bytes) < 0) {
        Py_XDECREF(bytes);
        goto done;
    }
    Py_DECREF(bytes);
    for (;;) {   /* memory stays bounded: the oldest requests leave unanswered */
        Py_ssize_t count = PyObject_Length(inflight);
        long long most, most_bytes;
        if (count < 0 || get_ll(&s__inflight_bytes, session, &used) < 0
                || get_ll(&s_MAX_IN_FLIGHT, limits, &most) < 0
                || get_ll(&s_MAX_IN_FLIGHT_BYTES, limits, &most_bytes) < 0)
            goto done;
        if (!(count > most || (used > most_bytes && count > 1)))
            break;
        PyObject *oldest = pop(session);
        if (oldest == NULL || call_none(to_twin(session, s__give_up.name, oldest, NULL)) < 0) {
            Py_XDECREF(oldest);
            goto done;
        }
        Py_DECREF(oldest);
    }
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(head);
    Py_XDECREF(pending);
    Py_XDECREF(inflight);
    return result;
}

/* The bodies levels' decoding of an answer (Session._paired's): ex.response_msg, its issues
 * rebased onto the exchange's, the summary columns, the status of an exchange with errors. 0, or
 * -1 with an error raised. */
static int decode_response(PyObject *decoder, PyObject *session, PyObject *ex, PyObject *frame,
                           PyObject *data, PyObject *key, PyObject *version, PyObject *msg)
{
    PyObject *args[5] = {decoder, data, key, version, msg};
    PyObject *resp = PyObject_VectorcallMethod(s_response.name, args, 5, NULL);
    if (resp == NULL || attr_set(&s_response_msg, ex, resp) < 0) {
        Py_XDECREF(resp);
        return -1;
    }
    PyObject *issues = PyObject_GetAttr(resp, s_issues.name);
    Py_DECREF(resp);
    int any = issues == NULL ? -1 : PyObject_IsTrue(issues);
    PyObject *all = any > 0 ? attr_get(&s_issues, ex) : NULL;
    if (any < 0 || (any > 0 && (all == NULL || !PyList_Check(all)
                                || rebased(session, issues, frame, all) < 0))) {
        if (all != NULL && !PyList_Check(all))
            PyErr_SetString(PyExc_TypeError, "an exchange's issues are a list");
        Py_XDECREF(issues);
        Py_XDECREF(all);
        return -1;
    }
    Py_XDECREF(issues);
    if (call_none(PyObject_CallMethodOneArg(decoder, s_summarize.name, ex)) < 0) {
        Py_XDECREF(all);
        return -1;
    }
    /* the request's issues went to the twin: only these can make the exchange malformed */
    int rc = 0;
    for (Py_ssize_t i = 0; all != NULL && i < PyList_GET_SIZE(all) && rc == 0; i++) {
        PyObject *severity = PyObject_GetAttr(PyList_GET_ITEM(all, i), s_severity.name);
        PyObject *error = severity == NULL ? NULL : PyObject_GetAttr(limits, s_ERROR.name);
        int bad = error == NULL ? -1 : PyObject_RichCompareBool(severity, error, Py_EQ);
        Py_XDECREF(severity);
        Py_XDECREF(error);
        if (bad) {
            PyObject *status = bad < 0 ? NULL : PyObject_GetAttr(limits, s_MALFORMED.name);
            rc = status == NULL || attr_set(&s_status, ex, status) < 0 ? -1 : 1;
            Py_XDECREF(status);
        }
    }
    Py_XDECREF(all);
    return rc < 0 ? -1 : 0;
}

/* Session._paired for a plain response header (any header at the bodies levels, where the
 * decoder reads it); else the twin's */
static PyObject *paired(PyObject *session, PyObject *pending, PyObject *frame, PyObject *data,
                        PyObject *decoder)
{
    PyObject *key = NULL, *version = NULL, *issues = NULL, *ex = NULL, *result = NULL;
    PyObject *req = NULL, *corr = NULL, *client = NULL, *msg = NULL, *conn = NULL;
    if ((key = attr_get(&s_api_key, pending)) == NULL
            || (version = attr_get(&s_api_version, pending)) == NULL
            || (issues = attr_get(&s_issues, pending)) == NULL)
        goto done;
    long api_key = PyLong_AsLong(key), api_version = PyLong_AsLong(version);
    if (PyErr_Occurred())
        goto done;
    int plain = api_key != SASL_HANDSHAKE && api_key != API_VERSIONS;
    int has_issues = PyObject_IsTrue(issues);
    if (has_issues < 0)
        goto done;
    if (plain && !has_issues && decoder == Py_None) {
        int v1 = 0 <= api_key && api_key < known && flexible[api_key] >= 0
            && api_version >= flexible[api_key];
        if (v1) {   /* tagged fields after the correlation id: none is the plain case */
            Py_buffer view;
            if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
                goto done;
            plain = view.len > 4 && ((const unsigned char *)view.buf)[4] == 0;
            PyBuffer_Release(&view);
        }
    }
    if (!plain || has_issues) {
        result = to_twin(session, s__paired.name, pending, frame);
        goto done;
    }
    if ((req = attr_get(&s_frame, pending)) == NULL
            || (corr = attr_get(&s_correlation_id, pending)) == NULL
            || (client = attr_get(&s_client_id, pending)) == NULL
            || (msg = attr_get(&s_msg, pending)) == NULL
            || (conn = attr_get(&s_connection, session)) == NULL)
        goto done;
    if (exchange_in_place && issues != Py_None) {   /* Exchange.__init__ */
        PyObject *values[EXCHANGE_MEMBERS] = {
            conn, req, frame, key, version, corr, client, ok, msg, Py_None, issues, Py_None,
            Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None, Py_False};
        ex = slots_new((PyTypeObject *)exchange_class, exchange_members, values,
                       EXCHANGE_MEMBERS);
    } else {
        PyObject *args[11] = {conn, req, frame, key, version, corr, client, ok, msg, Py_None,
                              issues};
        ex = PyObject_Vectorcall(exchange_class, args, 11, NULL);
    }
    if (ex == NULL || (decoder != Py_None
                       && decode_response(decoder, session, ex, frame, data, key, version, msg) < 0))
        goto done;
    result = emit(session, ex);
done:
    Py_XDECREF(key);
    Py_XDECREF(version);
    Py_XDECREF(issues);
    Py_XDECREF(req);
    Py_XDECREF(corr);
    Py_XDECREF(client);
    Py_XDECREF(msg);
    Py_XDECREF(conn);
    Py_XDECREF(ex);
    return result;
}

/* Session._response */
static PyObject *response(PyObject *session, PyObject *frame, PyObject *data, PyObject *decoder)
{
    PyObject *tokens = attr_get(&s__raw_tokens, session);
    int raw = tokens == NULL ? -1 : PyObject_IsTrue(tokens);
    Py_XDECREF(tokens);
    if (raw < 0)
        return NULL;
    Py_buffer view;
    if (raw || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        if (PyErr_Occurred())
            return NULL;
        return to_twin(session, s__response.name, frame, NULL);
    }
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len;
    long long corr = n < 4 ? 0 : be_i32(p);
    PyBuffer_Release(&view);
    PyObject *inflight = attr_get(&s__inflight, session);
    if (inflight == NULL)
        return NULL;
    int usual = 0;   /* the answer to the oldest request in flight */
    if (n >= 4 && PyObject_Length(inflight) > 0) {
        PyObject *oldest = PySequence_GetItem(inflight, 0);
        long long first;
        if (oldest == NULL || get_ll(&s_correlation_id, oldest, &first) < 0) {
            Py_XDECREF(oldest);
            Py_DECREF(inflight);
            return NULL;
        }
        Py_DECREF(oldest);
        usual = first == corr;
    }
    Py_DECREF(inflight);
    if (PyErr_Occurred())
        return NULL;
    if (!usual)
        return to_twin(session, s__response.name, frame, NULL);
    PyObject *pending = pop(session);
    if (pending == NULL)
        return NULL;
    PyObject *r = paired(session, pending, frame, data, decoder);
    Py_DECREF(pending);
    return r;
}

/* Does the response whose first bytes are p[0:4] (its correlation id) answer the oldest request
 * in flight, one that expects an answer (acks not 0)? 1 or 0, or -1 with an error */
static int answers_oldest(PyObject *session, const unsigned char *p)
{
    PyObject *inflight = attr_get(&s__inflight, session);
    if (inflight == NULL)
        return -1;
    Py_ssize_t len = PyObject_Length(inflight);
    int r = len < 0 ? -1 : 0;
    if (len > 0) {
        PyObject *oldest = PySequence_GetItem(inflight, 0);
        /* acks: None unless a Produce */
        PyObject *acks = oldest == NULL ? NULL : attr_get(&s_acks, oldest);
        long long corr;
        if (acks == NULL || get_ll(&s_correlation_id, oldest, &corr) < 0) {
            r = -1;
        } else {
            int unanswered = acks != Py_None && PyLong_Check(acks) && PyLong_AsLongLong(acks) == 0;
            if (PyErr_Occurred())   /* acks out of range: not 0 */
                PyErr_Clear();
            r = !unanswered && corr == be_i32(p);
        }
        Py_XDECREF(acks);
        Py_XDECREF(oldest);
    }
    Py_DECREF(inflight);
    return r;
}

/* Session.owed(): has the broker acknowledged request bytes the capture has not shown yet? 1 or
 * 0, or -1 with an error */
static int owed(PyObject *session)
{
    PyObject *ref = attr_get(&s__requests, session);   /* a weak reference, or None */
    if (ref == NULL)
        return -1;
    int r = 0;
    if (ref != Py_None) {
        PyObject *stream = PyObject_CallNoArgs(ref);   /* None once it is gone */
        long long upto, next;
        if (stream == NULL)
            r = -1;
        else if (stream != Py_None)
            r = get_ll(&s_owed, stream, &upto) < 0 || get_ll(&s_next, stream, &next) < 0 ? -1
                : upto > next;
        Py_XDECREF(stream);
    }
    Py_DECREF(ref);
    return r;
}

/* Session._head_size(direction, data) */
static PyObject *head_size(PyObject *session, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_head_size(direction, data)");
        return NULL;
    }
    PyObject *sasl = attr_get(&s__sasl, session);
    int raw = sasl == NULL ? -1 : PyObject_IsTrue(sasl);
    Py_XDECREF(sasl);
    if (raw)
        return raw < 0 ? NULL : Py_NewRef(Py_None);
    long long direction = PyLong_AsLongLong(args[0]);
    if (direction == -1 && PyErr_Occurred())
        return NULL;
    PyObject *data = args[1], *head = NULL, *result = NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len;
    if (direction != 0) {   /* a response: its tagged fields, if any, to the twin */
        int oldest = n < 6 ? 0 : answers_oldest(session, p);
        if (oldest > 0) {   /* while request bytes are owed, an answer may precede its request */
            int owes = owed(session);
            oldest = owes < 0 ? -1 : !owes;
        }
        if (oldest <= 0)
            result = oldest < 0 ? NULL : Py_NewRef(Py_None);
        else if (p[4] == 0)
            result = PyLong_FromLong(6);
        else
            result = PyObject_CallMethodObjArgs(session, s_py_head_size.name, args[0], data, NULL);
        goto done;
    }
    head = PyObject_CallOneArg(request_head, data);
    if (head == NULL)
        goto done;
    if (head == Py_None || !PyTuple_Check(head) || PyTuple_GET_SIZE(head) != 6) {
        result = PyObject_CallMethodObjArgs(session, s_py_head_size.name, args[0], data, NULL);
        goto done;
    }
    Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(head, 5));
    long long api_key = PyLong_AsLongLong(PyTuple_GET_ITEM(head, 0));
    long long api_version = PyLong_AsLongLong(PyTuple_GET_ITEM(head, 1));
    if (PyErr_Occurred())
        goto done;
    if (api_key == PRODUCE) {
        if (acks_at(p, n, end, api_version, &end) < 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        end += 2;
    }
    if (end > n) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (attr_set(&s__parsed, session, head) == 0)   /* _request takes it */
        result = PyLong_FromSsize_t(end);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(head);
    return result;
}

/* Session.frame(frame) */
static PyObject *session_frame(PyObject *session, PyObject *frame)
{
    PyObject *decoder = attr_get(&s__decoder, session);
    if (decoder == NULL)
        return NULL;
    long long direction;
    PyObject *data = get_ll(&s_direction, frame, &direction) < 0 ? NULL
        : attr_get(&s_data, frame);
    if (data == NULL) {
        Py_DECREF(decoder);
        return NULL;
    }
    PyObject *r;
    PyObject *early = attr_get(&s__early, session);
    int waiting = early == NULL ? -1 : PyObject_IsTrue(early);
    Py_XDECREF(early);
    if (waiting) {   /* -1: the error; else the twin pairs them as their requests come */
        r = waiting < 0 ? NULL : to_twin(session, s_py_frame.name, frame, NULL);
    } else if (direction == 0) {
        PyObject *sasl = attr_get(&s__raw_sasl, session);
        int raw = sasl == NULL ? -1 : PyObject_IsTrue(sasl);
        Py_XDECREF(sasl);
        r = raw < 0 ? NULL : raw ? to_twin(session, s__request.name, frame, NULL)
            : request(session, frame, data, decoder);
    } else {
        r = response(session, frame, data, decoder);
    }
    Py_DECREF(data);
    Py_DECREF(decoder);
    return r;
}

static PyMethodDef frame_def = {"frame", (PyCFunction)session_frame, METH_O,
                                "frame(frame): a message of the connection (Session.py_frame)"};
static PyMethodDef head_size_def = {"_head_size", (PyCFunction)(void (*)(void))head_size,
                                    METH_FASTCALL, "_head_size(direction, data): "
                                    "Session.py_head_size"};

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *session_class, *pending, *exchange, *head, *table, *ok_status, *module;
    if (!PyArg_ParseTuple(args, "O!OOOO!UO", &PyType_Type, &session_class, &pending, &exchange,
                          &head, &PyTuple_Type, &table, &ok_status, &module))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(table);
    if (n > KEYS) {
        PyErr_SetString(PyExc_ValueError, "configure: at most 1024 api keys");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(table, i);
        long f = v == Py_None ? -1 : PyLong_AsLong(v);
        if (f == -1 && PyErr_Occurred())
            return NULL;
        flexible[i] = (int)f;
    }
    known = n;
    Py_XSETREF(pending_class, Py_NewRef(pending));
    Py_XSETREF(exchange_class, Py_NewRef(exchange));
    Py_XSETREF(request_head, Py_NewRef(head));
    Py_XSETREF(ok, Py_NewRef(ok_status));
    Py_XSETREF(limits, Py_NewRef(module));
    if ((pending_in_place = slots_cover(pending, pending_members, PENDING_MEMBERS)) < 0
            || (exchange_in_place = slots_cover(exchange, exchange_members,
                                                EXCHANGE_MEMBERS)) < 0)
        return NULL;
    PyObject *frame = PyDescr_NewMethod((PyTypeObject *)session_class, &frame_def);
    PyObject *sizes = PyDescr_NewMethod((PyTypeObject *)session_class, &head_size_def);
    PyObject *both = frame == NULL || sizes == NULL ? NULL : PyTuple_Pack(2, frame, sizes);
    Py_XDECREF(frame);
    Py_XDECREF(sizes);
    return both;
}

static PyObject *in_place(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return Py_BuildValue("(OO)", pending_in_place ? Py_True : Py_False,
                         exchange_in_place ? Py_True : Py_False);
}

static PyObject *number_in_place(PyObject *Py_UNUSED(module), PyObject *fn)
{
    Py_XSETREF(numbering, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"number_in_place", number_in_place, METH_O,
     "number_in_place(Dissector._emit): an exchange handed to it is numbered and queued here"},
    {"in_place", in_place, METH_NOARGS,
     "in_place() -> whether (_Pending, Exchange) are made without their __init__ call"},
    {"configure", configure, METH_VARARGS,
     "configure(session_class, pending_class, exchange_class, request_head, flexible, ok, "
     "limits) -> the methods frame and _head_size"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "dissector._pairing",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__pairing(void)
{
NAMES(SLOT_INTERN)
    for (int i = 0; i < EXCHANGE_MEMBERS; i++) {
        if ((exchange_slot[i].name = PyUnicode_InternFromString(exchange_names[i])) == NULL)
            return NULL;
        exchange_members[i] = &exchange_slot[i];
    }
    return PyModule_Create(&module);
}

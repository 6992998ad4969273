/* A live flow's segment, compiled: tcp.flows.py_handler (the handler made for each direction of
 * a flow) and framing.Framer.feed with the two states of its _take that carry a stream (_IDLE:
 * whole frames sliced out of a segment; _BODY: a frame that spans segments) are the pure-Python
 * twins and say what this does, step for step. The walker (capture/_walk.c) calls a handler once
 * per data segment: on message-dense traffic these Python calls were half of the header level.
 *
 * handler(flow, mine, peer, pinned) -> a callable as py_handler returns, for a direction whose
 * framer is a framing.Framer. Everything else a Framer does (a size prefix cut by the segment's
 * end, a bad size, a large frame to check, the frames checked after a resync, resynchronising,
 * holes) is left to the Framer's own `_take` from the byte where it starts, with the segment as
 * bytes, as Framer.feed would hand it on. State lives in the Python objects (attributes read and
 * written as the twins do), so the twins and this can take turns on one stream. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#include "../_attrs.h"

/* as tcp/reassembly.py and tcp/flows.py */
#define ACK 0x10
#define PLAIN 0x117             /* SYN | FIN | RST | ZERO_WINDOW | ACK */
#define ACK_HORIZON (1u << 30)
/* as framing.py */
#define IDLE 0
#define PREFIX 1
#define BODY 2
#define DONE 5
#define TRUST_SIZE (64 << 10)

static PyObject *Frame, *fill, *frame_buffer, *finished;   /* model.Frame, dissector.framebuf */
/* budget.Budget and framing.Framer, and the methods of theirs done in place (budget_reserve,
 * budget_release, settle's took) while the classes keep them */
static PyObject *Budget, *Framer, *reserve_fn, *release_fn, *took_fn;

#define NAMES(X) X(last_pkt) X(last_ts) X(base) X(next) X(held) X(done) X(fin) X(last_data) \
    X(waiting) X(settle) X(answers) X(acked) X(segment) X(framer) X(sink) X(frame) X(connection) \
    X(direction) X(max_frame) X(_head) X(budget) X(reserve) X(release) X(offset) X(_room) \
    X(_buf) X(_kept) X(_need) X(_state) X(_start) X(_first_pkt) X(_first_ts) X(_last_pkt) \
    X(_last_ts) X(_probation) X(_hdr) X(_replay) X(_run_replay) X(_take) X(conn) X(used) X(peak) \
    X(big_size) X(limit) X(big) X(over) X(took) X(pinned)
NAMES(SLOT_DECLARE)

/* model.Frame's members, set in place (_attrs.h slots_new) where it has exactly these */
static const char *const frame_names[] = {"connection", "direction", "stream_offset", "length",
                                          "data", "first_packet", "last_packet", "first_ts",
                                          "last_ts"};
#define FRAME_MEMBERS 9
static Slot frame_slot[FRAME_MEMBERS];
static Slot *frame_members[FRAME_MEMBERS];
static int frame_in_place;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *flow, *conn, *mine, *peer, *pinned, *waiting, *acked, *segment;
    /* mine's framer and what it keeps from its start */
    PyObject *framer, *emit, *connection, *direction, *head, *budget, *reserve, *release;
    long long max_frame;
    int budget_in_place;   /* budget is a Budget whose reserve and release are Budget's */
} Handler;

/* cls's attribute `name` is `fn` (a method not replaced), for an object of exactly cls */
static int keeps(PyObject *o, PyObject *cls, Slot *name, PyObject *fn)
{
    return Py_IS_TYPE(o, (PyTypeObject *)cls)
        && _PyType_Lookup((PyTypeObject *)cls, name->name) == fn;
}

/* -- attributes ------------------------------------------------------------------------------- */

/* the attribute mod 2**32, as Python's `& MASK` takes any int */
static int get_u32(Slot *name, PyObject *o, uint32_t *out)
{
    PyObject *v = attr_get(name, o);
    if (v == NULL)
        return -1;
    unsigned long long x = PyLong_AsUnsignedLongLongMask(v);
    Py_DECREF(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint32_t)x;
    return 0;
}

static int as_u32(PyObject *v, uint32_t *out)
{
    unsigned long long x = PyLong_AsUnsignedLongLongMask(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint32_t)x;
    return 0;
}

/* fill(buf, at, src, start, stop) */
static int fill_at(PyObject *buf, long long at, PyObject *src, Py_ssize_t start, Py_ssize_t stop)
{
    return call_none(PyObject_CallFunction(fill, "OLOnn", buf, at, src, start, stop));
}

/* -- the budget ------------------------------------------------------------------------------ */

/* A Budget's used, peak, big_size and limit when all are ints that fit, in place: 1; 0 when not */
static int budget_ints(PyObject *b, long long *used, long long *peak, long long *big_size,
                       long long *limit)
{
    PyObject **u = slot_at(&s_used, b), **p = slot_at(&s_peak, b), **g = slot_at(&s_big_size, b),
             **l = slot_at(&s_limit, b);
    if (u == NULL || p == NULL || g == NULL || l == NULL || *u == NULL || *p == NULL
            || *g == NULL || *l == NULL || !PyLong_CheckExact(*u) || !PyLong_CheckExact(*p)
            || !PyLong_CheckExact(*g) || !PyLong_CheckExact(*l))
        return 0;
    int o1, o2, o3, o4;
    *used = PyLong_AsLongLongAndOverflow(*u, &o1);
    *peak = PyLong_AsLongLongAndOverflow(*p, &o4);
    *big_size = PyLong_AsLongLongAndOverflow(*g, &o2);
    *limit = PyLong_AsLongLongAndOverflow(*l, &o3);
    return !o1 && !o2 && !o3 && !o4 && *used > -(1LL << 62) && *used < (1LL << 62);
}

/* budget.reserve(holder, size): Budget.reserve done here for a Budget */
static int budget_reserve(Handler *h, PyObject *holder, long long size)
{
    PyObject *b = h->budget;
    long long used, peak, big_size, limit;
    if (!h->budget_in_place || size < 0 || size > (1LL << 40)
            || !budget_ints(b, &used, &peak, &big_size, &limit)) {
        PyObject *n = PyLong_FromLongLong(size);
        int r = n == NULL ? -1 : call_none(PyObject_CallFunctionObjArgs(h->reserve, holder, n,
                                                                        NULL));
        Py_XDECREF(n);
        return r;
    }
    used += size;
    if (set_ll(&s_used, b, used) < 0 || (used > peak && set_ll(&s_peak, b, used) < 0))
        return -1;
    if (size >= big_size) {
        PyObject *big = attr_get(&s_big, b);
        int r = big == NULL ? -1 : PyObject_SetItem(big, holder, Py_None);
        Py_XDECREF(big);
        if (r < 0)
            return -1;
    }
    if (used > limit)
        return call_none(PyObject_CallMethodNoArgs(b, s_over.name));
    return 0;
}

/* budget.release(holder, size): Budget.release done here for a Budget */
static int budget_release(Handler *h, PyObject *holder, PyObject *size_obj)
{
    PyObject *b = h->budget;
    long long used, peak, big_size, limit, size;
    int overflow;
    size = PyLong_CheckExact(size_obj) ? PyLong_AsLongLongAndOverflow(size_obj, &overflow) : -1;
    if (!h->budget_in_place || size < 0 || size > (1LL << 40)
            || !budget_ints(b, &used, &peak, &big_size, &limit))
        return call_none(PyObject_CallFunctionObjArgs(h->release, holder, size_obj, NULL));
    if (set_ll(&s_used, b, used - size) < 0)
        return -1;
    if (size >= big_size) {
        PyObject *big = attr_get(&s_big, b);
        int r = big == NULL ? -1 : PyObject_DelItem(big, holder);
        Py_XDECREF(big);
        return r;
    }
    return 0;
}

/* -- Framer.feed and _take ---------------------------------------------------------------------- */


/* Frame(connection, direction, at, length, data, first_pkt, last_pkt, first_ts, last_ts) to the
 * sink's `frame`; `data` is a new reference, taken (NULL: an error already raised) */
static int emit(Handler *h, PyObject *at, long long length, PyObject *data, PyObject *first_pkt,
                PyObject *last_pkt, PyObject *first_ts, PyObject *last_ts)
{
    if (data == NULL)
        return -1;
    PyObject *len = PyLong_FromLongLong(length);
    if (len == NULL) {
        Py_DECREF(data);
        return -1;
    }
    PyObject *args[FRAME_MEMBERS] = {h->connection, h->direction, at, len, data, first_pkt,
                                     last_pkt, first_ts, last_ts};
    PyObject *frame = frame_in_place   /* Frame.__init__ */
        ? slots_new((PyTypeObject *)Frame, frame_members, args, FRAME_MEMBERS)
        : PyObject_Vectorcall(Frame, args, FRAME_MEMBERS, NULL);
    Py_DECREF(len);
    Py_DECREF(data);
    if (frame == NULL)
        return -1;
    int r = call_none(PyObject_CallOneArg(h->emit, frame));
    Py_DECREF(frame);
    return r;
}

/* The rest of the segment, from `pos`, to the Framer's own _take, the segment as bytes. */
static int hand_on(Handler *h, PyObject *data, Py_ssize_t pos, Py_ssize_t n, long long base,
                   PyObject *pkt, PyObject *ts)
{
    PyObject *b = PyBytes_CheckExact(data) ? Py_NewRef(data) : PyBytes_FromObject(data);
    if (b == NULL)
        return -1;
    PyObject *r = PyObject_CallMethod(h->framer, "_take", "OnnLOO", b, pos, n, base, pkt, ts);
    Py_DECREF(b);
    return call_none(r);
}

/* data[start:start + k] as Python slices it (k may be any int) */
static PyObject *first_bytes(const char *p, Py_ssize_t n, Py_ssize_t start, PyObject *k_obj)
{
    Py_ssize_t k = PyLong_AsSsize_t(k_obj);
    if (k == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t stop = start + k;
    if (stop < 0) {
        stop += n;
        if (stop < 0)
            stop = 0;
    }
    if (stop > n)
        stop = n;
    return PyBytes_FromStringAndSize(p + start, stop > start ? stop - start : 0);
}

/* _take's _IDLE case at p[pos:n] for a frame that spans segments: the frame starts (a size
 * within bounds and at most TRUST_SIZE). */
static int start_frame(Handler *h, PyObject *data, const char *p, Py_ssize_t pos, Py_ssize_t n,
                       long long size, long long base, PyObject *pkt, PyObject *ts)
{
    PyObject *f = h->framer;
    if (set_ll(&s__start, f, base + pos) < 0 || attr_set(&s__first_pkt, f, pkt) < 0
            || attr_set(&s__last_pkt, f, pkt) < 0
            || attr_set(&s__first_ts, f, ts) < 0
            || attr_set(&s__last_ts, f, ts) < 0 || set_ll(&s__need, f, size) < 0)
        return -1;
    PyObject *k = Py_NewRef(Py_None);
    if (h->head != Py_None) {
        Py_DECREF(k);
        PyObject *first = PyBytes_FromStringAndSize(p + pos + 4, n - pos - 4);
        if (first == NULL)
            return -1;
        PyObject *args[2] = {h->direction, first};
        k = PyObject_Vectorcall(h->head, args, 2, NULL);
        Py_DECREF(first);
        if (k == NULL)
            return -1;
    }
    int r;
    if (k == Py_None) {
        PyObject *buf = PyObject_CallFunction(frame_buffer, "L", size);
        r = buf == NULL || attr_set(&s__buf, f, buf) < 0
            || fill_at(buf, 0, data, pos + 4, n) < 0 ? -1 : 0;
        Py_XDECREF(buf);
    } else {   /* the sink reads no further: the rest is counted, not kept */
        PyObject *kept = first_bytes(p, n, pos + 4, k);
        r = kept == NULL || attr_set(&s__buf, f, Py_None) < 0
            || attr_set(&s__kept, f, kept) < 0 ? -1 : 0;
        Py_XDECREF(kept);
    }
    Py_DECREF(k);
    if (r < 0 || set_ll(&s__room, f, size - (n - pos - 4)) < 0 || set_ll(&s__state, f, BODY) < 0)
        return -1;
    return budget_reserve(h, f, size);
}

/* _take's _BODY case at p[pos:n]: the frame in progress continues, and may end here. Returns
 * the bytes taken, or -1. */
static Py_ssize_t continue_frame(Handler *h, PyObject *data, Py_ssize_t pos, Py_ssize_t n,
                                 PyObject *pkt, PyObject *ts)
{
    PyObject *f = h->framer;
    long long want, need;
    if (get_ll(&s__room, f, &want) < 0 || get_ll(&s__need, f, &need) < 0)
        return -1;
    PyObject *buf = attr_get(&s__buf, f);
    if (buf == NULL)
        return -1;
    if (n - pos < want) {
        int r = (buf != Py_None && fill_at(buf, need - want, data, pos, n) < 0)
            || set_ll(&s__room, f, want - (n - pos)) < 0
            || attr_set(&s__last_pkt, f, pkt) < 0
            || attr_set(&s__last_ts, f, ts) < 0 ? -1 : 0;
        Py_DECREF(buf);
        return r < 0 ? -1 : n - pos;
    }
    PyObject *whole;
    if (buf != Py_None)
        whole = fill_at(buf, need - want, data, pos, pos + (Py_ssize_t)want) < 0 ? NULL
            : PyObject_CallOneArg(finished, buf);
    else
        whole = attr_get(&s__kept, f);
    Py_DECREF(buf);
    if (whole == NULL || attr_set(&s__buf, f, Py_None) < 0
            || attr_set(&s__kept, f, Py_None) < 0 || set_ll(&s__room, f, 0) < 0
            || set_ll(&s__state, f, IDLE) < 0) {
        Py_XDECREF(whole);
        return -1;
    }
    PyObject *need_obj = attr_get(&s__need, f);
    if (need_obj == NULL || budget_release(h, f, need_obj) < 0) {
        Py_XDECREF(need_obj);
        Py_DECREF(whole);
        return -1;
    }
    Py_DECREF(need_obj);
    PyObject *start = attr_get(&s__start, f);
    PyObject *first_pkt = attr_get(&s__first_pkt, f);
    PyObject *first_ts = attr_get(&s__first_ts, f);
    int r = -1;
    if (start != NULL && first_pkt != NULL && first_ts != NULL && get_ll(&s__need, f, &need) == 0)
        r = emit(h, start, need + 4, Py_NewRef(whole), first_pkt, pkt, first_ts, ts);
    Py_DECREF(whole);
    Py_XDECREF(start);
    Py_XDECREF(first_pkt);
    Py_XDECREF(first_ts);
    return r < 0 ? -1 : (Py_ssize_t)want;
}

/* Framer._take(data, 0, n, base, pkt, ts) for the segment p[:n] (`data` its object). */
static int take(Handler *h, PyObject *data, const char *p, Py_ssize_t n, long long base,
                PyObject *pkt, PyObject *ts)
{
    PyObject *f = h->framer;
    Py_ssize_t pos = 0;
    while (pos < n) {
        long long state;
        if (get_ll(&s__state, f, &state) < 0)
            return -1;
        if (state == BODY) {
            Py_ssize_t took = continue_frame(h, data, pos, n, pkt, ts);
            if (took < 0)
                return -1;
            pos += took;
            continue;
        }
        if (state != IDLE)
            return hand_on(h, data, pos, n, base, pkt, ts);
        /* The hot loop: whole frames sliced out of this segment. */
        long long probation;
        if (get_ll(&s__probation, f, &probation) < 0)
            return -1;
        if (probation)   /* just after a resync every frame is checked */
            return hand_on(h, data, pos, n, base, pkt, ts);
        while (n - pos >= 4) {
            const unsigned char *q = (const unsigned char *)p + pos;
            long long size = (int32_t)(((uint32_t)q[0] << 24) | ((uint32_t)q[1] << 16)
                                       | ((uint32_t)q[2] << 8) | q[3]);
            if (size < 0 || size > h->max_frame)
                return hand_on(h, data, pos, n, base, pkt, ts);
            if (pos + 4 + size > n) {
                if (size > TRUST_SIZE)   /* _looks_right is asked first */
                    return hand_on(h, data, pos, n, base, pkt, ts);
                return start_frame(h, data, p, pos, n, size, base, pkt, ts);
            }
            PyObject *at = PyLong_FromLongLong(base + pos);
            if (at == NULL)
                return -1;
            int r = emit(h, at, size + 4, PyBytes_FromStringAndSize(p + pos + 4, size),
                         pkt, pkt, ts, ts);
            Py_DECREF(at);
            if (r < 0)
                return -1;
            pos += 4 + size;
        }
        if (pos < n) {   /* a size prefix cut by the segment's end */
            PyObject *hdr = PyBytes_FromStringAndSize(p + pos, n - pos);
            int r = hdr == NULL || attr_set(&s__hdr, f, hdr) < 0
                || set_ll(&s__start, f, base + pos) < 0
                || attr_set(&s__first_pkt, f, pkt) < 0
                || attr_set(&s__first_ts, f, ts) < 0
                || set_ll(&s__state, f, PREFIX) < 0 ? -1 : 0;
            Py_XDECREF(hdr);
            return r;
        }
        return 0;
    }
    return 0;
}

/* Framer.feed(data, pkt, ts): (bytes the frame in progress still lacks, its buffer) or None. */
static PyObject *feed(Handler *h, PyObject *data, PyObject *pkt, PyObject *ts)
{
    PyObject *f = h->framer;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t n = view.len;
    PyObject *result = NULL;
    long long room, offset, state;
    if (get_ll(&s__room, f, &room) < 0 || get_ll(&s_offset, f, &offset) < 0)
        goto done;
    if (n < room) {   /* the middle of a frame that spans segments */
        long long need;
        PyObject *buf = NULL;
        if (set_ll(&s_offset, f, offset + n) == 0 && (buf = attr_get(&s__buf, f)) != NULL
                && (buf == Py_None || (get_ll(&s__need, f, &need) == 0
                                       && fill_at(buf, need - room, data, 0, n) == 0))
                && set_ll(&s__room, f, room - n) == 0
                && attr_set(&s__last_pkt, f, pkt) == 0
                && attr_set(&s__last_ts, f, ts) == 0)
            result = Py_BuildValue("LO", room - n, buf);
        Py_XDECREF(buf);
        goto done;
    }
    if (get_ll(&s__state, f, &state) < 0)
        goto done;
    if (n == 0 || state == DONE) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (set_ll(&s_offset, f, offset + n) < 0 || take(h, data, view.buf, n, offset, pkt, ts) < 0)
        goto done;
    int replay = attr_true(&s__replay, f);
    if (replay < 0 || (replay && call_none(PyObject_CallMethodNoArgs(f, s__run_replay.name)) < 0))
        goto done;
    if (get_ll(&s__state, f, &state) < 0)
        goto done;
    if (state == BODY) {
        PyObject *buf = attr_get(&s__buf, f);
        if (buf != NULL && get_ll(&s__room, f, &room) == 0)
            result = Py_BuildValue("LO", room, buf);
        Py_XDECREF(buf);
    } else {
        result = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&view);
    return result;
}

/* -- the handler -------------------------------------------------------------------------------- */

/* handle(pkt, ts, seq, ack, flags, payload), as py_handler's */
static PyObject *Handler_call(PyObject *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames)
{
    Handler *h = (Handler *)self;
    if (PyVectorcall_NARGS(nargsf) != 6 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "handle(pkt, ts, seq, ack, flags, payload)");
        return NULL;
    }
    PyObject *pkt = args[0], *ts = args[1], *seq_obj = args[2], *ack_obj = args[3];
    PyObject *flags_obj = args[4], *payload = args[5];
    if (attr_set(&s_last_pkt, h->flow, pkt) < 0
            || attr_set(&s_last_ts, h->conn, ts) < 0)
        return NULL;
    long flags = PyLong_AsLong(flags_obj);
    if (flags == -1 && PyErr_Occurred())
        return NULL;
    if (flags & ACK) {
        PyObject *base = attr_get(&s_base, h->peer);
        if (base == NULL)
            return NULL;
        int call = 1;
        if (base != Py_None) {
            uint32_t b, nx, a;
            int bad = as_u32(base, &b) < 0 || get_u32(&s_next, h->peer, &nx) < 0
                || as_u32(ack_obj, &a) < 0;
            if (bad) {
                Py_DECREF(base);
                return NULL;
            }
            uint32_t d = a - b - nx;
            /* acked() acts on an ack ahead of the data seen (loss) or before the first data */
            call = 0 < d && d < ACK_HORIZON;
        }
        Py_DECREF(base);
        if (call && call_none(PyObject_CallFunctionObjArgs(h->acked, ack_obj, flags_obj, pkt,
                                                           NULL)) < 0)
            return NULL;
    }
    int has = PyObject_IsTrue(payload);
    if (has < 0)
        return NULL;
    if (!has)
        Py_RETURN_NONE;
    if (!PyBytes_CheckExact(payload) && PySet_Add(h->pinned, h->mine) < 0)
        return NULL;
    int waiting = attr_true(&s_waiting, h->waiting);
    if (waiting < 0)
        return NULL;
    if (waiting) {   /* the peer answers: its last frame is complete (rare: after a resync) */
        PyObject *answers = PyObject_CallMethodObjArgs(h->mine, s_answers.name, seq_obj, payload, NULL);
        if (answers == NULL
                || call_none(PyObject_CallMethodOneArg(h->waiting, s_settle.name, answers)) < 0) {
            Py_XDECREF(answers);
            return NULL;
        }
        Py_DECREF(answers);
    }
    PyObject *mine = h->mine;
    PyObject *base = attr_get(&s_base, mine);
    if (base == NULL)
        return NULL;
    int in_order = 0;
    if (base != Py_None) {
        uint32_t b, nx, s;
        if (as_u32(base, &b) < 0 || get_u32(&s_next, mine, &nx) < 0 || as_u32(seq_obj, &s) < 0) {
            Py_DECREF(base);
            return NULL;
        }
        in_order = (uint32_t)(s - b - nx) == 0;
    }
    Py_DECREF(base);
    if (in_order) {
        int held = attr_true(&s_held, mine), done = held ? 0 : attr_true(&s_done, mine);
        if (held < 0 || done < 0)
            return NULL;
        if (!held && !done) {
            PyObject *fin = attr_get(&s_fin, mine);
            if (fin == NULL)
                return NULL;
            in_order = fin == Py_None;
            Py_DECREF(fin);
        } else {
            in_order = 0;
        }
    }
    if (!in_order) {
        PyObject *zero = PyLong_FromLong(0);
        PyObject *r = zero == NULL ? NULL : PyObject_CallFunctionObjArgs(
            h->segment, pkt, ts, seq_obj, zero, payload, NULL);
        Py_XDECREF(zero);
        if (call_none(r) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *span = feed(h, payload, pkt, ts);
    if (span == NULL)
        return NULL;
    long long next;
    Py_ssize_t n = PyObject_Length(payload);
    if (n < 0 || attr_set(&s_last_data, mine, payload) < 0 || get_ll(&s_next, mine, &next) < 0
            || set_ll(&s_next, mine, next + n) < 0) {
        Py_DECREF(span);
        return NULL;
    }
    if (span != Py_None && (flags & PLAIN) == ACK) {
        waiting = attr_true(&s_waiting, h->waiting);
        if (waiting < 0) {
            Py_DECREF(span);
            return NULL;
        }
        if (!waiting) {
            PyObject *r = PyTuple_Pack(4, PyTuple_GET_ITEM(span, 0), PyTuple_GET_ITEM(span, 1),
                                       h->flow, mine);
            Py_DECREF(span);
            return r;
        }
    }
    Py_DECREF(span);
    Py_RETURN_NONE;
}

static int Handler_traverse(Handler *h, visitproc visit, void *arg)
{
    Py_VISIT(h->flow);
    Py_VISIT(h->conn);
    Py_VISIT(h->mine);
    Py_VISIT(h->peer);
    Py_VISIT(h->pinned);
    Py_VISIT(h->waiting);
    Py_VISIT(h->acked);
    Py_VISIT(h->segment);
    Py_VISIT(h->framer);
    Py_VISIT(h->emit);
    Py_VISIT(h->connection);
    Py_VISIT(h->direction);
    Py_VISIT(h->head);
    Py_VISIT(h->budget);
    Py_VISIT(h->reserve);
    Py_VISIT(h->release);
    return 0;
}

static int Handler_clear(Handler *h)
{
    Py_CLEAR(h->flow);
    Py_CLEAR(h->conn);
    Py_CLEAR(h->mine);
    Py_CLEAR(h->peer);
    Py_CLEAR(h->pinned);
    Py_CLEAR(h->waiting);
    Py_CLEAR(h->acked);
    Py_CLEAR(h->segment);
    Py_CLEAR(h->framer);
    Py_CLEAR(h->emit);
    Py_CLEAR(h->connection);
    Py_CLEAR(h->direction);
    Py_CLEAR(h->head);
    Py_CLEAR(h->budget);
    Py_CLEAR(h->reserve);
    Py_CLEAR(h->release);
    return 0;
}

static void Handler_dealloc(Handler *h)
{
    PyObject_GC_UnTrack(h);
    Handler_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyTypeObject HandlerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dissector.tcp._handler.Handler",
    .tp_basicsize = sizeof(Handler),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Handler, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = (traverseproc)Handler_traverse,
    .tp_clear = (inquiry)Handler_clear,
    .tp_dealloc = (destructor)Handler_dealloc,
    .tp_doc = "a live flow's handler for the segments of one direction (tcp.flows.py_handler)",
};

/* handler(flow, mine, peer, pinned) */
static PyObject *handler(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *flow, *mine, *peer, *pinned;
    if (!PyArg_ParseTuple(args, "OOOO!", &flow, &mine, &peer, &PySet_Type, &pinned))
        return NULL;
    Handler *h = PyObject_GC_New(Handler, &HandlerType);
    if (h == NULL)
        return NULL;
    h->vectorcall = Handler_call;
    h->flow = Py_NewRef(flow);
    h->mine = Py_NewRef(mine);
    h->peer = Py_NewRef(peer);
    h->pinned = Py_NewRef(pinned);
    h->conn = attr_get(&s_conn, flow);
    h->waiting = attr_get(&s_framer, peer);
    h->acked = attr_get(&s_acked, peer);
    h->segment = attr_get(&s_segment, mine);
    h->framer = attr_get(&s_framer, mine);
    h->emit = h->connection = h->direction = h->head = h->budget = h->reserve = h->release = NULL;
    PyObject_GC_Track(h);
    if (h->conn == NULL || h->waiting == NULL || h->acked == NULL || h->segment == NULL
            || h->framer == NULL)
        goto fail;
    PyObject *f = h->framer;
    PyObject *sink = attr_get(&s_sink, f);
    if (sink == NULL)
        goto fail;
    h->emit = attr_get(&s_frame, sink);
    Py_DECREF(sink);
    PyObject *budget = attr_get(&s_budget, f);
    if (budget == NULL)
        goto fail;
    h->budget = budget;
    h->reserve = attr_get(&s_reserve, budget);
    h->release = attr_get(&s_release, budget);
    h->budget_in_place = keeps(budget, Budget, &s_reserve, reserve_fn)
        && keeps(budget, Budget, &s_release, release_fn);
    h->connection = attr_get(&s_connection, f);
    h->direction = attr_get(&s_direction, f);
    h->head = attr_get(&s__head, f);
    if (h->emit == NULL || h->reserve == NULL || h->release == NULL || h->connection == NULL
            || h->direction == NULL || h->head == NULL || get_ll(&s_max_frame, f, &h->max_frame) < 0)
        goto fail;
    return (PyObject *)h;
fail:
    Py_DECREF(h);
    return NULL;
}

static PyObject *in_place(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(args))
{
    return PyBool_FromLong(frame_in_place);
}

/* -- a run settled (tcp.batch) -------------------------------------------------------------- */

/* o.name = o.name + by (op: PyNumber_Add or PyNumber_Subtract) */
static int bump(Slot *name, PyObject *o, PyObject *by, binaryfunc op)
{
    PyObject *v = attr_get(name, o);
    PyObject *w = v == NULL ? NULL : op(v, by);
    Py_XDECREF(v);
    int r = w == NULL ? -1 : attr_set(name, o, w);
    Py_XDECREF(w);
    return r;
}

/* settle(flows, flow, stream, taken, pkt, ts, last): tcp.batch.py_settle, with Framer.took
 * done here for a Framer */
static PyObject *settle(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "settle(flows, flow, stream, taken, pkt, ts, last)");
        return NULL;
    }
    PyObject *flows = args[0], *flow = args[1], *stream = args[2], *taken = args[3];
    PyObject *pkt = args[4], *ts = args[5], *last = args[6];
    PyObject *framer = attr_get(&s_framer, stream);
    if (framer == NULL)
        return NULL;
    int r;
    if (keeps(framer, Framer, &s_took, took_fn))   /* Framer.took */
        r = bump(&s_offset, framer, taken, PyNumber_Add) < 0
            || bump(&s__room, framer, taken, PyNumber_Subtract) < 0
            || attr_set(&s__last_pkt, framer, pkt) < 0
            || attr_set(&s__last_ts, framer, ts) < 0 ? -1 : 0;
    else
        r = call_none(PyObject_CallMethodObjArgs(framer, s_took.name, taken, pkt, ts, NULL));
    Py_DECREF(framer);
    if (r < 0 || attr_set(&s_last_data, stream, last) < 0
            || bump(&s_next, stream, taken, PyNumber_Add) < 0)
        return NULL;
    if (!PyBytes_CheckExact(last)) {
        PyObject *pinned = attr_get(&s_pinned, flows);
        r = pinned == NULL ? -1 : PySet_Check(pinned) ? PySet_Add(pinned, stream)
            : call_none(PyObject_CallMethod(pinned, "add", "O", stream));
        Py_XDECREF(pinned);
        if (r < 0)
            return NULL;
    }
    PyObject *conn = attr_set(&s_last_pkt, flow, pkt) < 0 ? NULL : attr_get(&s_conn, flow);
    r = conn == NULL ? -1 : attr_set(&s_last_ts, conn, ts);
    Py_XDECREF(conn);
    if (r < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"in_place", in_place, METH_NOARGS, "in_place() -> whether a Frame is made without its "
     "__init__ call"},
    {"handler", handler, METH_VARARGS,
     "handler(flow, mine, peer, pinned) -> handle(pkt, ts, seq, ack, flags, payload)"},
    {"settle", (PyCFunction)(void (*)(void))settle, METH_FASTCALL,
     "settle(flows, flow, stream, taken, pkt, ts, last): tcp.batch.py_settle"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dissector.tcp._handler",
    "A live flow's segment handler and its framer's common cases, compiled (tcp.flows.py_handler).",
    -1, methods, NULL, NULL, NULL, NULL,
};

static PyObject *attr_of(const char *module_name, const char *name)
{
    PyObject *m = PyImport_ImportModule(module_name);
    if (m == NULL)
        return NULL;
    PyObject *v = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return v;
}

PyMODINIT_FUNC PyInit__handler(void)
{
NAMES(SLOT_INTERN)
    if (PyType_Ready(&HandlerType) < 0)
        return NULL;
    if ((Frame = attr_of("dissector.model", "Frame")) == NULL
            || (fill = attr_of("dissector.framebuf", "fill")) == NULL
            || (frame_buffer = attr_of("dissector.framebuf", "frame_buffer")) == NULL
            || (finished = attr_of("dissector.framebuf", "finished")) == NULL
            || (Budget = attr_of("dissector.budget", "Budget")) == NULL
            || (Framer = attr_of("dissector.framing", "Framer")) == NULL
            || !PyType_Check(Budget) || !PyType_Check(Framer))
        return NULL;
    /* the methods as the classes define them */
    reserve_fn = Py_XNewRef(_PyType_Lookup((PyTypeObject *)Budget, s_reserve.name));
    release_fn = Py_XNewRef(_PyType_Lookup((PyTypeObject *)Budget, s_release.name));
    took_fn = Py_XNewRef(_PyType_Lookup((PyTypeObject *)Framer, s_took.name));
    for (int i = 0; i < FRAME_MEMBERS; i++) {
        if ((frame_slot[i].name = PyUnicode_InternFromString(frame_names[i])) == NULL)
            return NULL;
        frame_members[i] = &frame_slot[i];
    }
    if ((frame_in_place = slots_cover(Frame, frame_members, FRAME_MEMBERS)) < 0)
        return NULL;
    return PyModule_Create(&module);
}

/* The file reader's packet loop, compiled: capture.walk (the pure-Python twin) says what it
 * does, line for line; this file does the same for speed. Keep the two in step: the tests run
 * both over the same captures and compare everything they hand on.
 *
 * Per packet: the record header, the link tag and the IPv4 and TCP headers read at fixed
 * offsets; a segment continuing a run (tcp.batch) is written into its frame's buffer (or only
 * counted) here; any other goes to the live flow's handler, `flows.add` or `other`, with the
 * same arguments the Python loop passes. A run is settled before every call out and at the end of each call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define FOREIGN_SLOTS 256

typedef struct {
    PyObject_HEAD
    PyObject *flows, *other, *settle, *links;
    long long n;          /* the last packet number handed on (current after an error too) */
    long long nbytes;     /* batch, epbs: the captured bytes of the packets walked, all calls */
    Py_ssize_t pos;       /* pcap: the end of that packet's record */
    /* the link type in use and its shape (capture.fast.LINKS) */
    PyObject *lt;
    Py_ssize_t off, tag_at, tag_size, need;
    PyObject *tags;
    /* keys seen False in flows.direct (flows another process dissects: False for the rest of
     * the capture), by a hash of the key: their packets skipped without a key object and a
     * dict lookup each (half the packets of each of two workers) */
    unsigned char foreign[FOREIGN_SLOTS][12];
    unsigned char foreign_set[FOREIGN_SLOTS];
} Walker;

typedef struct {          /* one call's state */
    Walker *w;
    Py_buffer view;       /* the chunk buffer, held for the call (view.obj NULL until then) */
    const unsigned char *b;
    PyObject *mv, *direct, *sides, *add, *tick;
    int64_t deadline;     /* flows.deadline (inf as INT64_MAX) */
    int exact;            /* whether `ts > deadline` is exact for any 64-bit ts */
    PyObject *deadline_obj;
    int run;
    unsigned char r_key[12];
    uint32_t expect, r_ack;
    Py_ssize_t r_room, room;
    long long r_n;
    int64_t r_ts;
    Py_ssize_t r_a, r_e;  /* where the run's last payload is in the buffer */
    PyObject *r_ts_obj;   /* the run's last time as given (pcapng), or NULL (pcap) */
    PyObject *target;     /* the frame's buffer (bytes or bytearray), or None: counted only */
    PyObject *r_flow, *r_stream;
} Call;

static const Py_ssize_t NEVER_FAST = (Py_ssize_t)1 << 62;

static inline uint32_t be16(const unsigned char *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* deadline <- obj (an int, or a float such as inf); times compare exactly as Python would */
static int set_deadline(Call *c, PyObject *obj)
{
    if (obj == NULL)
        return -1;
    Py_XSETREF(c->deadline_obj, obj);
    c->exact = 1;
    if (PyFloat_Check(obj)) {
        double d = PyFloat_AS_DOUBLE(obj);
        if (d == Py_HUGE_VAL) {
            c->deadline = INT64_MAX;   /* no 64-bit time is later */
        } else if (d > -9.2e18 && d < 9.2e18) {
            double f = (double)(int64_t)d;
            c->deadline = (int64_t)(f > d ? f - 1 : f);   /* ts > d <=> ts > floor(d) */
        } else {
            c->exact = 0;
        }
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    c->deadline = v;
    c->exact = !overflow;
    return 0;
}

static int load_deadline(Call *c)
{
    return set_deadline(c, PyObject_GetAttrString(c->w->flows, "deadline"));
}

/* ts > deadline; big_ts is the time as given when it does not fit in 64 bits */
static int after(Call *c, int64_t ts, PyObject *big_ts)
{
    if (big_ts == NULL && c->exact)
        return ts > c->deadline;
    PyObject *t = big_ts ? (Py_INCREF(big_ts), big_ts) : PyLong_FromLongLong(ts);
    if (t == NULL)
        return -1;
    int r = PyObject_RichCompareBool(t, c->deadline_obj, Py_GT);
    Py_DECREF(t);
    return r;
}

static PyObject *ts_object(int64_t ts, PyObject *obj)
{
    if (obj != NULL) {
        Py_INCREF(obj);
        return obj;
    }
    return PyLong_FromLongLong(ts);
}

/* the run's last packet so far: number, time, payload at b[a:e] */
static void last_of_run(Call *c, long long n, int64_t ts, PyObject *big_ts, Py_ssize_t a,
                        Py_ssize_t e)
{
    c->r_n = n;
    c->r_ts = ts;
    c->r_a = a;
    c->r_e = e;
    Py_XINCREF(big_ts);
    Py_XSETREF(c->r_ts_obj, big_ts);
}

static void drop_run(Call *c)
{
    c->run = 0;
    Py_CLEAR(c->target);
    Py_CLEAR(c->r_flow);
    Py_CLEAR(c->r_stream);
    Py_CLEAR(c->r_ts_obj);
}

/* The payload at b[a:e] for a handler: a copy when small, which costs less than a view of the
 * chunk (~1,000 instructions) and pins nothing (flows.unpin), else the view. */
#define SMALL_PAYLOAD 4096   /* walk.py's */
static PyObject *payload_at(Call *c, Py_ssize_t a, Py_ssize_t e)
{
    if (e - a <= SMALL_PAYLOAD)
        return PyBytes_FromStringAndSize((const char *)c->b + a, e - a);
    return PySequence_GetSlice(c->mv, a, e);
}

/* settle(flows, flow, stream, taken, pkt, ts, last) for the run so far, if it took anything;
 * ends it */
static int end_run(Call *c)
{
    int rc = 0;
    if (c->room != c->r_room) {
        PyObject *ts = ts_object(c->r_ts, c->r_ts_obj);
        PyObject *last = ts == NULL ? NULL : payload_at(c, c->r_a, c->r_e);
        PyObject *r = last == NULL ? NULL : PyObject_CallFunction(
            c->w->settle, "OOOnLOO", c->w->flows, c->r_flow, c->r_stream,
            c->r_room - c->room, c->r_n, ts, last);
        Py_XDECREF(ts);
        Py_XDECREF(last);
        if (r == NULL)
            rc = -1;
        Py_XDECREF(r);
    }
    drop_run(c);
    return rc;
}

static int use_link(Walker *w, PyObject *lt)
{
    if (w->lt == lt || (w->lt != NULL && PyObject_RichCompareBool(w->lt, lt, Py_EQ) == 1)) {
        return 0;
    }
    Py_INCREF(lt);
    Py_XSETREF(w->lt, lt);
    Py_CLEAR(w->tags);
    w->need = NEVER_FAST;
    PyObject *shape = PyDict_GetItemWithError(w->links, lt);
    if (shape == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *tags;
    if (!PyArg_ParseTuple(shape, "nnO!", &w->off, &w->tag_at, &PyTuple_Type, &tags))
        return -1;
    /* every tag bytes of one size, read inside what `need` guarantees is there: tag_ok trusts it */
    Py_ssize_t k = PyTuple_GET_SIZE(tags);
    if (k < 1 || !PyBytes_CheckExact(PyTuple_GET_ITEM(tags, 0))) {
        PyErr_SetString(PyExc_ValueError, "link tags must be a tuple of bytes");
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(PyTuple_GET_ITEM(tags, 0));
    for (Py_ssize_t i = 1; i < k; i++) {
        PyObject *t = PyTuple_GET_ITEM(tags, i);
        if (!PyBytes_CheckExact(t) || PyBytes_GET_SIZE(t) != size) {
            PyErr_SetString(PyExc_ValueError, "link tags must be bytes of one size");
            return -1;
        }
    }
    if (w->off < 0 || w->off > (1 << 16) || w->tag_at < 0 || w->tag_at > (1 << 16)
            || size > (1 << 16)) {
        PyErr_SetString(PyExc_ValueError, "link shape out of range");
        return -1;
    }
    w->tag_size = size;
    Py_INCREF(tags);
    w->tags = tags;
    w->need = w->off + 40 > w->tag_at + size ? w->off + 40 : w->tag_at + size;
    return 0;
}

/* A buffer framebuf.frame_buffer made (dissector._framebuf.FrameBuffer): the only bytes object
 * a run may write into (as framebuf.fill). */
static int is_frame_buffer(PyObject *o)
{
    PyTypeObject *t = Py_TYPE(o);
    return t->tp_base == &PyBytes_Type && strcmp(t->tp_name, "dissector._framebuf.FrameBuffer") == 0;
}

static int tag_ok(Walker *w, const unsigned char *p)
{
    Py_ssize_t k = PyTuple_GET_SIZE(w->tags);
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *t = PyTuple_GET_ITEM(w->tags, i);
        if (PyBytes_GET_SIZE(t) == w->tag_size && memcmp(PyBytes_AS_STRING(t), p, w->tag_size) == 0)
            return 1;
    }
    return 0;
}

static PyObject *call6(PyObject *f, PyObject *a0, PyObject *a1, PyObject *a2, PyObject *a3,
                       PyObject *a4, PyObject *a5)
{
    PyObject *args[6] = {a0, a1, a2, a3, a4, a5};
    return PyObject_Vectorcall(f, args, 6, NULL);
}

static PyObject *s_rs, *s_base, *s_next, *s_last_pkt, *s_conn, *s_last_ts;

/* tcp.batch.ack_alone, compiled: an ACK alone of the live flow with direct key `kobj`, in
 * packet `pn` at `t`: 1 when noted here (the flow's last packet and time), 0 when its handler
 * must see it, -1 on an error. */
static int ack_alone(Call *c, PyObject *kobj, uint32_t ack, PyObject *pn, PyObject *t)
{
    PyObject *entry = PyDict_GetItemWithError(c->sides, kobj);   /* borrowed: (flow, side) */
    if (entry == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "flows.sides: (flow, side) expected");
        return -1;
    }
    PyObject *flow = PyTuple_GET_ITEM(entry, 0), *peer = NULL, *base = NULL, *next = NULL;
    long side = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
    int rc = -1;
    PyObject *rs = side == -1 && PyErr_Occurred() ? NULL : PyObject_GetAttr(flow, s_rs);
    if (rs == NULL || (peer = PySequence_GetItem(rs, 1 - side)) == NULL
            || (base = PyObject_GetAttr(peer, s_base)) == NULL)
        goto done;
    rc = 0;
    if (base == Py_None)   /* the acked stream has not started */
        goto done;
    if ((next = PyObject_GetAttr(peer, s_next)) == NULL) {
        rc = -1;
        goto done;
    }
    /* (ack - base - next) & MASK, from the low 32 bits of each (two's complement, as Python's
     * & on negative numbers) */
    unsigned long long vb = PyLong_AsUnsignedLongLongMask(base);
    unsigned long long vn = PyLong_AsUnsignedLongLongMask(next);
    if (PyErr_Occurred()) {
        rc = -1;
        goto done;
    }
    uint32_t d = (uint32_t)((unsigned long long)ack - vb - vn);
    if (0 < d && d < (1u << 30))   /* past the data seen (ACK_HORIZON): the handler's acked() */
        goto done;
    PyObject *conn = NULL;
    rc = PyObject_SetAttr(flow, s_last_pkt, pn) < 0 || (conn = PyObject_GetAttr(flow, s_conn)) == NULL
        || PyObject_SetAttr(conn, s_last_ts, t) < 0 ? -1 : 1;
    Py_XDECREF(conn);
done:
    Py_XDECREF(rs);
    Py_XDECREF(peer);
    Py_XDECREF(base);
    Py_XDECREF(next);
    return rc;
}

static inline int same_key(const unsigned char *a, const unsigned char *b)
{
    uint64_t a8, b8;
    uint32_t a4, b4;
    memcpy(&a8, a, 8); memcpy(&b8, b, 8); memcpy(&a4, a + 8, 4); memcpy(&b4, b + 8, 4);
    return a8 == b8 && a4 == b4;
}

/* the slot of a key: the top 8 bits of a multiplicative hash (FOREIGN_SLOTS) */
static inline unsigned foreign_slot(const unsigned char *key)
{
    uint32_t a, b, d;
    memcpy(&a, key, 4);
    memcpy(&b, key + 4, 4);
    memcpy(&d, key + 8, 4);
    return ((a ^ b * 0x9E3779B1u ^ d * 0x85EBCA77u) * 0xC2B2AE3Du) >> 24;
}

/* One packet: record bytes b[p:stop], number n, time ts (big_ts when it did not fit). */
static int packet(Call *c, long long n, int64_t ts, PyObject *big_ts, Py_ssize_t p,
                  Py_ssize_t stop)
{
    Walker *w = c->w;
    const unsigned char *b = c->b;
    Py_ssize_t incl = stop - p;
    if (incl >= w->need) {
        const unsigned char *ip = b + p + w->off;
        /* a zero window adds ZERO_WINDOW (0x100, tcp.reassembly) to the flags: such a segment
         * goes to `flows.add`, which counts it */
        uint32_t total = be16(ip + 2), doff = ip[32], flags = ip[33] | (ip[34] | ip[35] ? 0 : 0x100);
        uint32_t hl = doff >> 2 & 0x3C;
        if (ip[0] == 0x45 && ip[9] == 6 && tag_ok(w, b + p + w->tag_at)
                && !(be16(ip + 6) & 0x3FFF) && 40 <= hl + 20 && hl + 20 <= total
                && (Py_ssize_t)total <= incl - w->off) {
            const unsigned char *key = ip + 12;
            uint32_t seq = be32(ip + 24), ack = be32(ip + 28);
            Py_ssize_t a = p + w->off + 20 + hl, e = p + w->off + total, size = e - a;
            if (c->run) {
                if (seq == c->expect && ack == c->r_ack && (flags & 0x117) == 0x10
                        && same_key(key, c->r_key) && 0 < size && size < c->room) {
                    if (c->target != Py_None) {   /* framebuf.fill, here: checked at the start */
                        int bytes = PyBytes_Check(c->target);
                        char *dst = bytes
                            ? PyBytes_AS_STRING(c->target) : PyByteArray_AS_STRING(c->target);
                        Py_ssize_t len = bytes
                            ? PyBytes_GET_SIZE(c->target) : PyByteArray_GET_SIZE(c->target);
                        if (len < c->room) {
                            PyErr_SetString(PyExc_ValueError, "a run past its frame's buffer");
                            return -1;
                        }
                        memcpy(dst + len - c->room, b + a, size);
                    }
                    c->expect = seq + (uint32_t)size;
                    c->room -= size;
                    last_of_run(c, n, ts, big_ts, a, e);
                    int late = after(c, ts, big_ts);
                    if (late < 0)
                        return -1;
                    if (late) {
                        if (end_run(c) < 0)
                            return -1;
                        PyObject *t = ts_object(ts, big_ts);
                        if (t == NULL || set_deadline(c, PyObject_CallOneArg(c->tick, t)) < 0) {
                            Py_XDECREF(t);
                            return -1;
                        }
                        Py_DECREF(t);
                    }
                    return 0;
                }
                if (end_run(c) < 0)
                    return -1;
            }
            unsigned slot = foreign_slot(key);
            int foreign = w->foreign_set[slot] && same_key(w->foreign[slot], key);
            PyObject *kobj = NULL, *handle = Py_False;
            if (!foreign) {
                if ((kobj = PyBytes_FromStringAndSize((const char *)key, 12)) == NULL)
                    return -1;
                handle = PyDict_GetItemWithError(c->direct, kobj);   /* borrowed */
                if (handle == NULL && PyErr_Occurred()) {
                    Py_DECREF(kobj);
                    return -1;
                }
            }
            if (handle == Py_False) {   /* a flow another process dissects (dissector.parallel) */
                if (!foreign) {
                    memcpy(w->foreign[slot], key, 12);
                    w->foreign_set[slot] = 1;
                    Py_DECREF(kobj);
                }
                int late = after(c, ts, big_ts);
                if (late <= 0)
                    return late;
                PyObject *t = ts_object(ts, big_ts);
                if (t == NULL)
                    return -1;
                int r = set_deadline(c, PyObject_CallOneArg(c->tick, t));
                Py_DECREF(t);
                return r < 0 ? -1 : 0;
            }
            PyObject *pn = PyLong_FromLongLong(n), *t = ts_object(ts, big_ts);
            PyObject *ps = PyLong_FromUnsignedLong(seq), *pa = PyLong_FromUnsignedLong(ack);
            PyObject *pf = PyLong_FromUnsignedLong(flags), *r = NULL;
            int rc = -1;
            if (pn == NULL || t == NULL || ps == NULL || pa == NULL || pf == NULL)
                goto done;
            int alone = 0;
            if (handle != NULL && !(flags & 0x107) && size == 0 && (flags & 0x10)
                    && (alone = ack_alone(c, kobj, ack, pn, t)) < 0)
                goto done;
            if (alone) {
                int late = after(c, ts, big_ts);
                if (late < 0 || (late && set_deadline(c, PyObject_CallOneArg(c->tick, t)) < 0))
                    goto done;
            } else if (handle != NULL && !(flags & 0x107)) {   /* no FIN, SYN, RST, zero window */
                Py_INCREF(handle);
                PyObject *payload = payload_at(c, a, e);
                if (payload != NULL)
                    r = call6(handle, pn, t, ps, pa, pf, payload);
                Py_XDECREF(payload);
                Py_DECREF(handle);
                if (r == NULL)
                    goto done;
                if (r != Py_None) {   /* the handler started a run */
                    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 4) {
                        PyErr_SetString(PyExc_TypeError, "a run is (room, buffer, flow, stream)");
                        goto done;
                    }
                    PyObject *target = PyTuple_GET_ITEM(r, 1), *flow = PyTuple_GET_ITEM(r, 2);
                    PyObject *stream = PyTuple_GET_ITEM(r, 3);
                    Py_ssize_t room = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 0));
                    if (room == -1 && PyErr_Occurred())
                        goto done;
                    if (target != Py_None && !is_frame_buffer(target)
                            && !PyByteArray_CheckExact(target)) {
                        PyErr_SetString(PyExc_TypeError, "a run's buffer must be bytes or bytearray");
                        goto done;
                    }
                    Py_INCREF(target);
                    Py_INCREF(flow);
                    Py_INCREF(stream);
                    c->target = target;
                    c->r_flow = flow;
                    c->r_stream = stream;
                    c->r_room = c->room = room;
                    c->run = 1;
                    memcpy(c->r_key, key, 12);
                    c->expect = seq + (uint32_t)size;
                    c->r_ack = ack;
                    last_of_run(c, n, ts, big_ts, a, e);
                }
                Py_CLEAR(r);
                int late = after(c, ts, big_ts);
                if (late < 0)
                    goto done;
                if (late && set_deadline(c, PyObject_CallOneArg(c->tick, t)) < 0)
                    goto done;
            } else {
                PyObject *payload = PyBytes_FromStringAndSize((const char *)b + a, size);
                if (payload == NULL)
                    goto done;
                PyObject *args[10];
                args[0] = pn;
                args[1] = t;
                args[2] = PyBytes_FromStringAndSize((const char *)key, 4);
                args[3] = PyBytes_FromStringAndSize((const char *)key + 4, 4);
                args[4] = PyLong_FromUnsignedLong(be16(key + 8));
                args[5] = PyLong_FromUnsignedLong(be16(key + 10));
                args[6] = ps;
                args[7] = pa;
                args[8] = pf;
                args[9] = payload;
                if (args[2] && args[3] && args[4] && args[5])
                    r = PyObject_Vectorcall(c->add, args, 10, NULL);
                for (int i = 2; i < 6; i++)
                    Py_XDECREF(args[i]);
                Py_DECREF(payload);
                if (r == NULL || load_deadline(c) < 0)
                    goto done;
            }
            rc = 0;
        done:
            Py_XDECREF(r);
            Py_XDECREF(pn);
            Py_XDECREF(t);
            Py_XDECREF(ps);
            Py_XDECREF(pa);
            Py_XDECREF(pf);
            Py_DECREF(kobj);
            return rc;
        }
    }
    if (c->run && end_run(c) < 0)
        return -1;
    PyObject *pn = PyLong_FromLongLong(n), *t = ts_object(ts, big_ts);
    PyObject *data = PyBytes_FromStringAndSize((const char *)b + p, incl), *r = NULL;
    if (pn && t && data) {
        PyObject *args[4] = {pn, t, w->lt, data};
        r = PyObject_Vectorcall(w->other, args, 4, NULL);
    }
    Py_XDECREF(pn);
    Py_XDECREF(t);
    Py_XDECREF(data);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return load_deadline(c);
}

/* The start of a call over buf[pos:end] (0 <= pos <= end <= its length). */
static int begin(Call *c, Walker *w, PyObject *buf, PyObject *mv, Py_ssize_t pos, Py_ssize_t end)
{
    memset(c, 0, sizeof *c);
    c->w = w;
    c->mv = mv;
    if (PyObject_GetBuffer(buf, &c->view, PyBUF_SIMPLE) < 0)
        return -1;
    if (pos < 0 || pos > end || end > c->view.len) {
        PyErr_SetString(PyExc_ValueError, "pos/end outside the buffer");
        return -1;
    }
    c->b = c->view.buf;
    c->direct = PyObject_GetAttrString(w->flows, "direct");
    c->sides = PyObject_GetAttrString(w->flows, "sides");
    c->add = PyObject_GetAttrString(w->flows, "add");
    c->tick = PyObject_GetAttrString(w->flows, "tick");
    if (c->direct == NULL || c->sides == NULL || c->add == NULL || c->tick == NULL)
        return -1;
    if (!PyDict_Check(c->direct) || !PyDict_Check(c->sides)) {
        PyErr_SetString(PyExc_TypeError, "flows.direct and flows.sides must be dicts");
        return -1;
    }
    return load_deadline(c);
}

/* The end of a call: settle an open run (keeping an error already raised), release. Returns
 * rc, or -1 if settling failed. */
static int finish(Call *c, int rc)
{
    if (c->run) {
        if (rc < 0) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            end_run(c);
            PyErr_Restore(et, ev, tb);
        } else if (end_run(c) < 0) {
            rc = -1;
        }
    }
    drop_run(c);
    Py_CLEAR(c->direct);
    Py_CLEAR(c->sides);
    Py_CLEAR(c->add);
    Py_CLEAR(c->tick);
    Py_CLEAR(c->deadline_obj);
    if (c->view.obj != NULL)
        PyBuffer_Release(&c->view);
    return rc;
}

/* Each record's header is where the one before says, so the walk waits on memory once a record
 * (a quarter of the header level on bulk traffic, whose records take a page of the file each).
 * Records of a size come in runs (full segments): the headers that many records ahead are
 * where they would be if they were the size of the one at `pos`, and asking for those cache
 * lines early overlaps the waits (where the guess is wrong, a line comes in for nothing). */
#define AHEAD 8

static inline void ask_ahead(const unsigned char *b, Py_ssize_t pos, Py_ssize_t size,
                             Py_ssize_t end)
{
    for (int k = 1; k <= AHEAD; k++) {
        Py_ssize_t guess = pos + k * size;
        if (guess + 64 > end)
            break;
        __builtin_prefetch(b + guess);
    }
}

/* pcap(buf, mv, pos, end, n, big_endian, scale, linktype, limit) -> pos
 * Walks the complete records of buf[pos:end] from packet number n + 1 on; stops at the first
 * incomplete record or one whose length exceeds limit (the caller reports it). */
static PyObject *Walker_pcap(Walker *w, PyObject *args)
{
    PyObject *bufobj, *mv, *lt;
    Py_ssize_t pos, end, limit;
    long long n, scale;
    int big;
    if (!PyArg_ParseTuple(args, "OOnnLpLOn", &bufobj, &mv, &pos, &end, &n, &big, &scale, &lt,
                          &limit))
        return NULL;
    Call c;
    int rc = begin(&c, w, bufobj, mv, pos, end);
    if (rc == 0)
        rc = use_link(w, lt);
    const unsigned char *b = c.b;
    w->n = n;
    w->pos = pos;
    while (rc == 0 && pos + 16 <= end) {
        const unsigned char *h = b + pos;
        uint32_t sec, frac, incl;
        if (big) {
            sec = be32(h); frac = be32(h + 4); incl = be32(h + 8);
        } else {
            memcpy(&sec, h, 4); memcpy(&frac, h + 4, 4); memcpy(&incl, h + 8, 4);
        }
        if ((Py_ssize_t)incl > limit || pos + 16 + (Py_ssize_t)incl > end)
            break;
        Py_ssize_t p = pos + 16;
        pos = p + incl;
        ask_ahead(b, pos, 16 + (Py_ssize_t)incl, end);
        n++;
        w->n = n;
        w->pos = pos;
        rc = packet(&c, n, (int64_t)sec * 1000000000 + (int64_t)frac * scale, NULL, p, pos);
    }
    rc = finish(&c, rc);
    if (rc < 0)
        return NULL;
    return PyLong_FromSsize_t(pos);
}

/* batch(buf, mv, batch, n): pcapng's packets, a list of (ts_ns, linktype, start, stop),
 * numbered from n + 1 on; `nbytes` counts their captured bytes. */
static PyObject *Walker_batch(Walker *w, PyObject *args)
{
    PyObject *bufobj, *mv, *batch;
    long long n;
    if (!PyArg_ParseTuple(args, "OOO!L", &bufobj, &mv, &PyList_Type, &batch, &n))
        return NULL;
    Call c;
    int rc = begin(&c, w, bufobj, mv, 0, 0);
    w->n = n;
    Py_INCREF(batch);
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(batch); i++) {
        PyObject *item = PyList_GET_ITEM(batch, i), *tso, *lt;
        Py_ssize_t p, stop;
        if (!PyArg_ParseTuple(item, "OOnn", &tso, &lt, &p, &stop)) {
            rc = -1;
            break;
        }
        if (p < 0 || stop < p || stop > c.view.len) {
            PyErr_SetString(PyExc_ValueError, "packet outside the buffer");
            rc = -1;
            break;
        }
        n++;
        w->n = n;
        w->nbytes += stop - p;
        if ((rc = use_link(w, lt)) < 0)
            break;
        int overflow = 0;
        long long ts = PyLong_AsLongLongAndOverflow(tso, &overflow);
        if (ts == -1 && PyErr_Occurred()) {
            rc = -1;
            break;
        }
        rc = packet(&c, n, overflow ? 0 : ts, overflow ? tso : NULL, p, stop);
    }
    Py_DECREF(batch);
    rc = finish(&c, rc);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static inline uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* A pcapng timestamp in ns: ticks * scale when the interface has one (capture.pcapng), else
 * ticks * mul // div + offset. *big is set (a new reference) when it does not fit in 64 bits or
 * needs Python's integers. */
static int epb_time(uint64_t ticks, PyObject *iface, int64_t *ts, PyObject **big)
{
    PyObject *scale = PyTuple_GET_ITEM(iface, 1);
    *big = NULL;
    int overflow = 0;
    long long k = PyLong_AsLongLongAndOverflow(scale, &overflow);
    if (k == -1 && PyErr_Occurred())
        return -1;
    if (!overflow && k > 0) {
        __int128 t = (__int128)ticks * k;
        if (t <= INT64_MAX) {
            *ts = (int64_t)t;
            return 0;
        }
    }
    /* rare: no single scale (a divisor or an offset), or past 64 bits */
    PyObject *v = PyLong_FromUnsignedLongLong(ticks), *t = NULL, *q = NULL;
    if (v == NULL)
        return -1;
    if (!overflow && k > 0) {
        t = PyNumber_Multiply(v, scale);
    } else {
        PyObject *m = PyNumber_Multiply(v, PyTuple_GET_ITEM(iface, 2));
        q = m == NULL ? NULL : PyNumber_FloorDivide(m, PyTuple_GET_ITEM(iface, 3));
        t = q == NULL ? NULL : PyNumber_Add(q, PyTuple_GET_ITEM(iface, 4));
        Py_XDECREF(m);
        Py_XDECREF(q);
    }
    Py_DECREF(v);
    if (t == NULL)
        return -1;
    long long small = PyLong_AsLongLongAndOverflow(t, &overflow);
    if (small == -1 && PyErr_Occurred()) {
        Py_DECREF(t);
        return -1;
    }
    if (overflow) {
        *big = t;
        *ts = 0;
    } else {
        Py_DECREF(t);
        *ts = small;
    }
    return 0;
}

/* epbs(buf, mv, pos, end, n, big_endian, interfaces, limit) -> (pos, last timestamp or None)
 * pcapng: the consecutive well-formed Enhanced Packet Blocks of buf[pos:end] (interfaces: the
 * section's (linktype, scale, mul, div, offset, snaplen)), numbered from n + 1 on; stops at the
 * first block that is anything else, incomplete or wrong in any way, for capture.pcapng to
 * read or report. `nbytes` counts their captured bytes. */
static PyObject *Walker_epbs(Walker *w, PyObject *args)
{
    PyObject *bufobj, *mv, *ifaces;
    Py_ssize_t pos, end, limit;
    long long n;
    int big;
    if (!PyArg_ParseTuple(args, "OOnnLpO!n", &bufobj, &mv, &pos, &end, &n, &big, &PyList_Type,
                          &ifaces, &limit))
        return NULL;
    Call c;
    int rc = begin(&c, w, bufobj, mv, pos, end);
    const unsigned char *b = c.b;
    uint32_t (*u32)(const unsigned char *) = big ? be32 : le32;
    int64_t last = 0;
    PyObject *last_big = NULL, *last_obj = NULL;   /* the last EPB's time (SPBs carry none) */
    int any = 0;
    w->n = n;
    while (rc == 0 && pos + 28 <= end) {
        const unsigned char *h = b + pos;
        uint32_t blen = u32(h + 4), iid = u32(h + 8), caplen = u32(h + 20);
        Py_ssize_t stop = pos + blen;
        if (u32(h) != 6 || stop > end || blen < 32 || (blen & 3) || caplen > blen - 32
                || (Py_ssize_t)caplen > limit || u32(b + stop - 4) != blen
                || iid >= (uint32_t)PyList_GET_SIZE(ifaces))
            break;
        ask_ahead(b, stop, blen, end);
        PyObject *iface = PyList_GET_ITEM(ifaces, iid);
        if (!PyTuple_Check(iface) || PyTuple_GET_SIZE(iface) < 5) {
            PyErr_SetString(PyExc_TypeError, "interfaces must hold 6-tuples");
            rc = -1;
            break;
        }
        int64_t ts;
        PyObject *big_ts;
        if ((rc = epb_time(((uint64_t)u32(h + 12) << 32) | u32(h + 16), iface, &ts, &big_ts)) < 0)
            break;
        if ((rc = use_link(w, PyTuple_GET_ITEM(iface, 0))) == 0) {
            n++;
            w->n = n;
            w->nbytes += caplen;
            rc = packet(&c, n, ts, big_ts, pos + 28, pos + 28 + caplen);
        }
        any = 1;
        last = ts;
        Py_XSETREF(last_big, big_ts);
        pos = stop;
    }
    rc = finish(&c, rc);
    if (rc == 0)
        last_obj = !any ? (Py_INCREF(Py_None), Py_None) : ts_object(last, last_big);
    Py_XDECREF(last_big);
    if (last_obj == NULL)
        return NULL;
    return Py_BuildValue("nN", pos, last_obj);
}

static int Walker_init(Walker *w, PyObject *args, PyObject *kw)
{
    static char *names[] = {"flows", "other", "settle", "links", NULL};
    PyObject *flows, *other, *settle, *links;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO!", names, &flows, &other, &settle,
                                     &PyDict_Type, &links))
        return -1;
    Py_INCREF(flows);
    Py_XSETREF(w->flows, flows);
    Py_INCREF(other);
    Py_XSETREF(w->other, other);
    Py_INCREF(settle);
    Py_XSETREF(w->settle, settle);
    Py_INCREF(links);
    Py_XSETREF(w->links, links);
    Py_CLEAR(w->lt);
    Py_CLEAR(w->tags);
    w->need = NEVER_FAST;
    memset(w->foreign_set, 0, sizeof w->foreign_set);
    return 0;
}

/* the objects a Walker holds, for the collector */
#define WALKER_OBJECTS(X) X(flows) X(other) X(settle) X(links) X(lt) X(tags)
#define VISIT(field) Py_VISIT(w->field);
#define CLEAR(field) Py_CLEAR(w->field);

static int Walker_traverse(Walker *w, visitproc visit, void *arg)
{
    WALKER_OBJECTS(VISIT)
    return 0;
}

static int Walker_clear(Walker *w)
{
    WALKER_OBJECTS(CLEAR)
    return 0;
}

static void Walker_dealloc(Walker *w)
{
    PyObject_GC_UnTrack(w);
    Walker_clear(w);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyMethodDef Walker_methods[] = {
    {"pcap", (PyCFunction)Walker_pcap, METH_VARARGS,
     "pcap(buf, mv, pos, end, n, big_endian, scale, linktype, limit) -> pos"},
    {"batch", (PyCFunction)Walker_batch, METH_VARARGS, "batch(buf, mv, batch, n)"},
    {"epbs", (PyCFunction)Walker_epbs, METH_VARARGS,
     "epbs(buf, mv, pos, end, n, big_endian, interfaces, limit) -> (pos, last timestamp)"},
    {NULL}
};

static PyMemberDef Walker_members[] = {
    {"n", T_LONGLONG, offsetof(Walker, n), 0, "the last packet number handed on"},
    {"pos", T_PYSSIZET, offsetof(Walker, pos), READONLY, "pcap: the end of its record"},
    {"nbytes", T_LONGLONG, offsetof(Walker, nbytes), READONLY,
     "batch, epbs: the captured bytes of the packets walked, all calls"},
    {NULL}
};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dissector.capture._walk.Walker",
    .tp_basicsize = sizeof(Walker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The packet loop of capture.walk.Walker, compiled.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Walker_init,
    .tp_dealloc = (destructor)Walker_dealloc,
    .tp_traverse = (traverseproc)Walker_traverse,
    .tp_clear = (inquiry)Walker_clear,
    .tp_methods = Walker_methods,
    .tp_members = Walker_members,
};

static struct PyModuleDef walk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_walk",
    .m_doc = "The file reader's packet loop, compiled.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__walk(void)
{
    struct { PyObject **at; const char *s; } names[] = {
        {&s_rs, "rs"}, {&s_base, "base"}, {&s_next, "next"}, {&s_last_pkt, "last_pkt"},
        {&s_conn, "conn"}, {&s_last_ts, "last_ts"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].at = PyUnicode_InternFromString(names[i].s)) == NULL)
            return NULL;
    if (PyType_Ready(&WalkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&walk_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WalkerType);
    if (PyModule_AddObject(m, "Walker", (PyObject *)&WalkerType) < 0) {
        Py_DECREF(&WalkerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

"""The compiled packet walker (capture/_walk.c) against its pure-Python reference (capture.walk).

Random packet sequences over a few flows (continuing, repeated and stray sequence numbers, every
flag mix, damaged headers), random deadlines (ints, floats, inf, past 64 bits), runs started or
not (their segments written into a frame's buffer or only counted), a handler raising: both
walkers must make the same calls with the same arguments in the same order, write the same
bytes, stop at the same packet and raise the same error. And whole pcapng
files (sections in both byte orders, interfaces of every timestamp resolution and offset, EPB,
SPB and PB packets, unknown and damaged blocks, small read chunks), which the compiled walker
reads block by block itself: the same calls, the same error, the same counts as capture.pcapng
and the reference walker.
"""
import struct

import pytest
from hypothesis import given, settings, strategies as st

from dissector.capture import chunks, fast, read_packets
from dissector.capture.fast import LINKS
from dissector.capture.pcap import MAX_RECORD
from dissector.capture.walk import SMALL_PAYLOAD
from dissector.pipeline import dissect
from dissector.tcp.reassembly import Reassembler

from tests.capture import build
from tests.support import CAPTURES, walker_class

KEYS = [bytes([10, 0, 0, a, 10, 0, 0, b]) + struct.pack("!HH", 40000 + a, 9092)
        for a, b in ((1, 2), (2, 1), (3, 4))]


class Boom(Exception):
    pass


class Logged:
    """Logs the attributes the walker sets (a flow's last packet, a connection's last time)."""

    def __init__(self, log):
        object.__setattr__(self, "log", log)

    def __setattr__(self, name, value):
        self.log.append(("set", name, value))
        object.__setattr__(self, name, value)


class Flow(Logged):
    def __init__(self, log, rs):
        super().__init__(log)
        object.__setattr__(self, "rs", rs)
        object.__setattr__(self, "conn", Logged(log))


class Stream:
    acks_unseen = Reassembler.acks_unseen   # the rule the walkers apply to an ACK alone

    def __init__(self, base, next):
        self.base = base
        self.next = next


class Flows:
    """FlowTable's face to the walker, logging every call; a handler starts a run when `rooms`
    says so (the next of them, whatever the segment: an even room writes the run into a frame
    buffer kept in `buffers`, an odd one only counts it), and the handler of packet
    100 + fail_at raises."""

    def __init__(self, deadline, step, rooms, fail_at):
        self.log = []
        self.direct = {k: self._handler(k) for k in KEYS[:2]}
        # an ACK alone on the first key is taken by the walker unless it acks 2 (past the data
        # seen); the second key's peer stream has not started: its handler sees every one
        flow = Flow(self.log, (Stream(None, 0), Stream(4_294_967_295, 2)))
        self.sides = {KEYS[0]: (flow, 0), KEYS[1]: (flow, 1)}
        self.deadline = deadline
        self.step = step
        self.rooms = list(rooms)
        self.fail_at = fail_at
        self.buffers = []

    def _handler(self, key):
        def handle(n, ts, seq, ack, flags, payload):
            self.log.append(("handle", key, n, ts, seq, ack, flags, type(payload).__name__,
                             bytes(payload)))
            if n == 100 + self.fail_at:
                raise Boom(n)
            room = self.rooms.pop() if self.rooms else None
            if room is None:
                return None
            if room % 2:   # counted only (the headers level's framer)
                return room, None, "flow", "stream"
            self.buffers.append(bytearray(b"." * (room + 40)))   # 40 bytes of the frame had come
            return room, self.buffers[-1], "flow", "stream"
        return handle

    def add(self, *args):
        assert type(args[-1]) is bytes
        self.log.append(("add", *args))

    def tick(self, ts):
        self.log.append(("tick", ts))
        self.deadline = ts + self.step
        return self.deadline

    def other(self, n, ts, lt, data):
        assert type(data) is bytes
        self.log.append(("other", n, ts, lt, data))

    def settle(self, flows, flow, stream, taken, pkt, ts, last):
        assert (flows, flow, stream) == (self, "flow", "stream")
        self.log.append(("settle", taken, pkt, ts, type(last).__name__, bytes(last)))


def frame(key, seq, ack, flags, payload, damage):
    # window 0x0400: a damaged byte 48 (its high byte) of 0 makes it a zero window
    tcp = struct.pack("!II", seq, ack) + bytes([0x50, flags]) + b"\x04" + b"\0" * 5
    total = 40 + len(payload)
    ip = struct.pack("!BBHHHBBH", 0x45, 0, total, 1, 0, 64, 6, 0) + key[:8]
    data = bytearray(b"\2" * 12 + b"\x08\x00" + ip + key[8:] + tcp + payload)
    if damage:   # one byte of the link, IP or TCP headers changed
        at, value = damage
        data[at % 54] = value
    return bytes(data)


packets = st.lists(st.tuples(
    st.sampled_from(range(len(KEYS))),
    st.sampled_from(["next", "next", "next", "same", "stray"]),
    st.sampled_from([1, 2]),
    st.sampled_from([0x10, 0x10, 0x18, 0x11, 0x02, 0x12, 0x04, 0x00]),
    st.one_of(st.integers(0, 40), st.integers(0, 40), st.integers(4094, 4098)),   # 4096: SMALL_PAYLOAD
    st.one_of(st.none(), st.none(), st.none(), st.tuples(st.integers(0, 60), st.integers(0, 255))),
    st.integers(0, 3),
    st.integers(1, 5),   # the packet, then as many more continuing it
), min_size=1, max_size=25)

deadlines = st.one_of(st.just(float("inf")), st.integers(-5, 10**4), st.floats(-10, 1e4),
                      st.just(2**70), st.just(float("nan")))


def walk(walker_cls, shape, pkts, deadline, step, rooms, fail_at):
    flows = Flows(deadline, step, rooms, fail_at)
    w = walker_cls(flows, flows.other, flows.settle, LINKS)
    nxt = dict.fromkeys(range(len(KEYS)), 4_294_967_000)   # near the wrap
    buf = bytearray()
    spans, t = [], 0
    pkts = [(k, how if j == 0 else "next", *rest)
            for k, how, *rest, repeat in pkts for j in range(repeat)]
    for i, (k, how, ack, flags, size, damage, dt) in enumerate(pkts):
        payload = bytes([i % 251]) * size
        seq = {"next": nxt[k], "same": nxt[k] - size, "stray": nxt[k] + 7}[how] & 0xFFFFFFFF
        nxt[k] = (seq + size) & 0xFFFFFFFF
        data = frame(KEYS[k], seq, ack, flags, payload, damage)
        t += dt
        if shape == "pcap":
            buf += struct.pack("<IIII", 5, t, len(data), len(data))
        spans.append((t * 1000 + (2**64 if shape == "big ts" else 0), 1, len(buf), len(buf) + len(data)))
        buf += data
    error = None
    try:
        if shape == "pcap":
            out = w.pcap(buf, memoryview(buf), 0, len(buf), 100, False, 1000, 1, MAX_RECORD)
            out = (out, w.pos)
        else:
            w.batch(buf, memoryview(buf), spans, 100)
            out = w.nbytes
    except Boom as e:
        error, out = e.args, w.pos if shape == "pcap" else None
    return flows.log + [bytes(b) for b in flows.buffers], error, out, w.n


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["pcap", "batch", "big ts"]), packets, deadlines, st.integers(0, 4),
       st.lists(st.one_of(st.none(), st.integers(1, 200)), min_size=4, max_size=12),
       st.integers(0, 80))
def test_compiled_walker_does_what_the_reference_does(shape, pkts, deadline, step, rooms,
                                                      fail_at):
    compiled, python = walker_class("compiled"), walker_class("python")
    args = shape, pkts, deadline, step, rooms, fail_at
    assert walk(compiled, *args) == walk(python, *args)


@pytest.mark.parametrize("name", ["compiled", "python"])
def test_a_run_is_settled_before_the_error_leaves(name):
    """A run's packets are written and counted (settle) even when the next handler raises."""
    pkts = [(0, "next", 1, 0x10, 30, None, 1, 3), (0, "next", 2, 0x10, 30, None, 1, 1)]
    if True:
        cls = walker_class(name)
        log, error, _pos, n = walk(cls, "pcap", pkts, float("inf"), 0, [500], 4)
        assert error == (104,) and n == 104
        *calls, buffer = log
        assert [e[0] for e in calls] == ["handle", "settle", "handle"]
        assert calls[1][1:3] == (60, 103)   # two packets of 30 bytes, the last one packet 103
        # written after the 40 bytes the frame had: packets 102 and 103's payloads
        assert buffer == b"." * 40 + bytes([1]) * 30 + bytes([2]) * 30 + b"." * 440


@pytest.mark.parametrize("name", ["compiled", "python"])
def test_a_small_payload_is_a_copy_and_a_large_one_a_view(name):
    """A handler's payload of up to SMALL_PAYLOAD bytes is bytes (a copy costs less than a view
    and pins nothing), a larger one a view of the chunk; so is a run's last payload (settle)."""
    pkts = [(0, "next", 1, 0x10, SMALL_PAYLOAD, None, 1, 1),
            (0, "next", 1, 0x10, SMALL_PAYLOAD + 1, None, 1, 1),
            (0, "next", 1, 0x10, 30, None, 1, 2)]
    rooms = [500, None, None]   # popped from the end: the third packet starts a run
    log, error, _pos, _n = walk(walker_class(name), "pcap", pkts, float("inf"), 0, rooms, 99)
    assert error is None
    handled = [(e[-2], len(e[-1])) for e in log if e[0] == "handle"]
    assert handled == [("bytes", SMALL_PAYLOAD), ("memoryview", SMALL_PAYLOAD + 1), ("bytes", 30)]
    assert [(e[-2], len(e[-1])) for e in log if e[0] == "settle"] == [("bytes", 30)]


SOURCES = {name: list(read_packets(CAPTURES / name)) for name in
           ("kafka_python.mss1448.pcap", "librdkafka_produce_consume.mss1448.pcap")}
IFACES = st.tuples(st.sampled_from([None, 6, 9, 3, 12, 0x80 | 20, 0x80 | 70]),
                   st.sampled_from([None, 0, 5, -3]))
KINDS = st.lists(st.sampled_from(["epb", "epb", "epb", "epb1", "spb", "pb", "idb", "other", "shb"]),
                 min_size=1, max_size=12).map(lambda kinds: kinds + ["epb"])   # a packet kind


def pcapng(source, order, ifaces, kinds, ticks):
    """The packets of a real capture as a pcapng file: blocks of the kinds in `kinds` (cycled; an
    IDB, an unknown block or a new section in the other byte order comes between packets), on
    interfaces `ifaces` (a timestamp resolution and offset each)."""
    out = [build.shb(order)] + [build.idb(order, 1, 0, r, o) for r, o in ifaces]
    i = 0
    for _n, ts, _lt, data in source:
        while True:
            kind = kinds[i % len(kinds)]
            i += 1
            if kind == "idb":
                out.append(build.idb(order, 1, 0, 9, None))
            elif kind == "other":
                out.append(build.block(order, 0x0BAD, b"x" * (i % 50)))
            elif kind == "shb":
                order = ">" if order == "<" else "<"
                out += [build.shb(order)] + [build.idb(order, 1, 0, r, o) for r, o in ifaces]
            else:
                break
        t = ts // 1000 + (ticks if kind == "epb1" else 0)
        if kind.startswith("epb"):
            out.append(build.epb(order, i % len(ifaces), t % 2**64, data))
        elif kind == "spb":
            out.append(build.spb(order, data))
        else:
            out.append(build.pb(order, i % len(ifaces), t % 2**64, data))
    return out


def order_at(blocks, k):
    """The byte order of block k: that of the section header before it."""
    shb = next(b for b in reversed(blocks[:k + 1]) if b[:4] == b"\x0a\x0d\x0d\x0a")
    return "<" if shb[8:12] == b"\x4d\x3c\x2b\x1a" else ">"


def dissection(name, path, monkeypatch):
    """Everything a dissection of `path` with the named walker tells."""
    monkeypatch.setattr(fast, "Walker", walker_class(name))
    run = dissect(path, level="headers")
    frames = []
    for ex in run:
        for f in (ex.request, ex.response):
            if f is not None:
                frames.append((f.connection.connection_id, f.direction, f.stream_offset,
                               f.length, f.first_packet, f.last_packet, f.first_ts, f.last_ts,
                               bytes(f.data)))
    issues = [(i.code, i.frame, i.stream_offset, i.detail) for i in run.issues]
    return frames, issues, run.errors, run.packets, run.bytes


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(SOURCES)), st.sampled_from("<>"),
       st.lists(IFACES, min_size=1, max_size=3), KINDS, st.integers(0, 2**64 - 1),
       st.sampled_from([None, "flip", "cut", "trailer", "caplen"]), st.integers(0, 10**6),
       st.sampled_from([200, 4096, 1 << 20]))
def test_pcapng_files_read_alike(tmp_path_factory, source, order, ifaces, kinds, ticks, damage,
                                 at, chunk):
    blocks = pcapng(SOURCES[source], order, ifaces, kinds, ticks)
    k = 1 + at % (len(blocks) - 1)   # a block after the first section header
    if damage == "trailer":   # its trailing length
        b = bytearray(blocks[k])
        b[-4:] = bytes(x ^ y for x, y in zip(b[-4:], b"\x01\x02\0\x10"))
        blocks[k] = bytes(b)
    elif damage == "caplen":  # an EPB's or PB's captured length, at its limit or a little past
        packets = [i for i, b in enumerate(blocks) if b[:4] in (bytes([6, 0, 0, 0]), bytes(
            [0, 0, 0, 6]), bytes([2, 0, 0, 0]), bytes([0, 0, 0, 2]))]
        k = packets[at % len(packets)]
        b = bytearray(blocks[k])
        pack = struct.Struct(order_at(blocks, k) + "I")
        pack.pack_into(b, 20, pack.unpack_from(b, 4)[0] - 32 + at % 5)
        blocks[k] = bytes(b)
    data = bytearray(b"".join(blocks))
    if damage == "flip":
        data[28 + at % (len(data) - 28)] ^= 0xFF
    elif damage == "cut":
        del data[28 + at % (len(data) - 28):]
    path = tmp_path_factory.mktemp("ng") / "c.pcapng"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(chunks, "CHUNK", chunk)
        compiled = dissection("compiled", path, mp)
        python = dissection("python", path, mp)
    assert compiled == python
    assert compiled[0] or damage   # real exchanges, unless the damage hit early

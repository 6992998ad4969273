"""The compiled packet walker (capture/_walk.c) against its pure-Python reference (capture.walk).

Random packet sequences over a few flows (continuing, repeated and stray sequence numbers, every
flag mix, damaged headers), random deadlines (ints, floats, inf, past 64 bits), runs started or
not, a handler or `append` raising: both walkers must make the same calls with the same
arguments in the same order, stop at the same packet and raise the same error.
"""
import struct

import pytest
from hypothesis import given, settings, strategies as st

from dissector.capture.fast import LINKS
from dissector.capture.pcap import MAX_RECORD

from tests.support import walker_class

KEYS = [bytes([10, 0, 0, a, 10, 0, 0, b]) + struct.pack("!HH", 40000 + a, 9092)
        for a, b in ((1, 2), (2, 1), (3, 4))]


class Boom(Exception):
    pass


class Flows:
    """FlowTable's face to the walker, logging every call; the handler of packet 100 + fail_at
    raises, and so does `append` when it would be the log's entry `fail_append`."""

    def __init__(self, deadline, step, rooms, fail_at, fail_append=-1):
        self.log = []
        self.direct = {k: self._handler(k) for k in KEYS[:2]}
        self.deadline = deadline
        self.step = step
        self.rooms = list(rooms)
        self.fail_at = fail_at
        self.fail_append = fail_append

    def _handler(self, key):
        def handle(n, ts, seq, ack, flags, payload):
            self.log.append(("handle", key, n, ts, seq, ack, flags, bytes(payload)))
            if n == 100 + self.fail_at:
                raise Boom(n)
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

    def run_start(self, flows, key, seq, size):
        assert flows is self
        self.log.append(("run_start", key, seq, size))
        room = self.rooms.pop() if self.rooms else None
        return None if room is None else (room, self._append, "flow", "stream")

    def _append(self, piece):
        self.log.append(("append", bytes(piece)))
        if len(self.log) == self.fail_append:
            raise Boom("append")

    def settle(self, flows, flow, stream, taken, pkt, ts):
        assert (flows, flow, stream) == (self, "flow", "stream")
        self.log.append(("settle", taken, pkt, ts))


def frame(key, seq, ack, flags, payload, damage):
    tcp = struct.pack("!II", seq, ack) + bytes([0x50, flags]) + b"\0" * 6
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
    st.integers(0, 40),
    st.one_of(st.none(), st.none(), st.none(), st.tuples(st.integers(0, 60), st.integers(0, 255))),
    st.integers(0, 3),
    st.integers(1, 5),   # the packet, then as many more continuing it
), min_size=1, max_size=25)

deadlines = st.one_of(st.just(float("inf")), st.integers(-5, 10**4), st.floats(-10, 1e4),
                      st.just(2**70), st.just(float("nan")))


def walk(walker_cls, shape, pkts, deadline, step, rooms, fail_at, fail_append=-1):
    flows = Flows(deadline, step, rooms, fail_at, fail_append)
    w = walker_cls(flows, flows.other, flows.run_start, flows.settle, LINKS)
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
            out = w.batch(buf, memoryview(buf), spans, 100)
    except Boom as e:
        error, out = e.args, w.pos if shape == "pcap" else None
    return flows.log, error, out, w.n


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["pcap", "batch", "big ts"]), packets, deadlines, st.integers(0, 4),
       st.lists(st.one_of(st.none(), st.integers(1, 200)), min_size=4, max_size=12),
       st.integers(0, 80), st.integers(0, 80))
def test_compiled_walker_does_what_the_reference_does(shape, pkts, deadline, step, rooms,
                                                      fail_at, fail_append):
    compiled, python = walker_class("compiled"), walker_class("python")
    args = shape, pkts, deadline, step, rooms, fail_at, fail_append
    assert walk(compiled, *args) == walk(python, *args)


@pytest.mark.parametrize("name", ["compiled", "python"])
def test_a_run_is_settled_before_the_error_leaves(name):
    """A run's appended packets are counted (settle) even when the next handler raises."""
    pkts = [(0, "next", 1, 0x10, 30, None, 1, 3), (0, "next", 2, 0x10, 30, None, 1, 1)]
    if True:
        cls = walker_class(name)
        log, error, _pos, n = walk(cls, "pcap", pkts, float("inf"), 0, [500], 4)
        assert error == (104,) and n == 104
        kinds = [e[0] for e in log]
        assert kinds == ["handle", "run_start", "append", "append", "settle", "handle"]
        assert log[4][1:3] == (60, 103)   # two packets of 30 bytes, the last one packet 103

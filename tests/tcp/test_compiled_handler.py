"""The compiled segment handler (tcp/_handler.c) against its Python twin (tcp.flows.py_handler
with Framer.feed): the same exchanges, frames, issues and connections on the real captures and on
damaged ones, and on random segment streams that reach every state of the framer (a size prefix
cut by a segment's end, bad sizes, resyncs, holes, frames kept whole or only their first bytes)."""
import random
import struct

import pytest
from hypothesis import given, strategies as st

from dissector.pipeline import Dissector, dissect
from dissector.tcp import flows
from tests.fuzz.support import (REAL, REAL_PORTS, bounded, exchange_key, fuzz_settings, mutate,
                                packets, write_pcap)
from tests.support import require_compiled

LEVELS = ("headers", "bodies")


@pytest.fixture(autouse=True)
def compiled():
    require_compiled(flows.compiled_handler, "tcp/_handler.c")


def _frame(f):
    return f and (f.direction, f.stream_offset, f.length, bytes(f.data), f.first_packet,
                  f.last_packet, f.first_ts, f.last_ts)


def _issues(issues):
    return [(i.code, i.severity, i.detail, i.connection_id, i.frame, i.stream_offset)
            for i in issues]


def _seen(exchanges, issues, connections):
    return ([(exchange_key(e), e.index, _frame(e.request), _frame(e.response), _issues(e.issues))
             for e in exchanges], _issues(issues),
            [(c.connection_id, c.last_ts, c.retransmits, c.gaps) for c in connections])


def _both(monkeypatch, run):
    """run() with the compiled handler, then with the Python one."""
    compiled = run()
    with monkeypatch.context() as m:
        m.setattr(flows, "compiled_handler", None)
        twin = run()
    return compiled, twin


def _capture(path, level):
    def run():
        d = dissect(path, REAL_PORTS, level=level)
        exchanges = list(d)
        return _seen(exchanges, d.issues, d.connections)
    return run


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_captures(monkeypatch, path, level):
    compiled, twin = _both(monkeypatch, _capture(path, level))
    assert compiled[0], "no exchanges: the comparison would prove nothing"
    assert compiled == twin


@fuzz_settings(25)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32), level=st.sampled_from(LEVELS))
@bounded(60)
def test_damaged_captures(monkeypatch, tmp_path_factory, which, seed, level):
    rnd = random.Random(seed)
    pkts = list(packets(which))
    for _ in range(rnd.randint(1, 12)):
        i = rnd.randrange(len(pkts))
        op = rnd.randrange(4)
        if op == 0:
            ts, lt, data = pkts[i]
            pkts[i] = (ts, lt, mutate(data, rnd, 2))
        elif op == 1:
            pkts.insert(min(len(pkts), i + rnd.randint(1, 30)), pkts[i])
        elif op == 2:
            pkts.insert(min(len(pkts), i + rnd.randint(1, 5)), pkts.pop(i))
        else:
            del pkts[i]
    path = tmp_path_factory.mktemp("handler") / "m.pcap"
    path.write_bytes(write_pcap(pkts))
    compiled, twin = _both(monkeypatch, _capture(path, level))
    assert compiled == twin


_SEG = struct.Struct(">BHH")   # flags (bit 7: the broker's side), sequence step, payload length


def segment_run(data, level):
    """A run of the segments `data` describes (as the atheris stream target reads them), fed as
    the Spark job feeds them (Dissector.feed_segments: every live segment through its handler),
    returning what a reader sees."""
    def run():
        d = Dissector(REAL_PORTS, level=level)
        c, b = b"\x7f\0\0\1", b"\x7f\0\0\2"
        seq = [1000, 7000]
        cols = [[] for _ in range(10)]
        pos = n = 0
        while pos + _SEG.size <= len(data):
            flags, step, length = _SEG.unpack_from(data, pos)
            pos += _SEG.size
            payload = data[pos:pos + length]
            pos += length
            side = flags >> 7
            seq[side] = (seq[side] + step - 1024) & 0xFFFFFFFF
            n += 1
            ends = (c, b, 5000, 9092) if side == 0 else (b, c, 9092, 5000)
            for col, v in zip(cols, (n, n * 1000, *ends, seq[side], seq[1 - side],
                                     flags & 0x3F | 0x10, memoryview(payload))):
                col.append(v)
        d.feed_segments(*cols)
        d.finish()
        return _seen(d.output, d.issues, d.connections)
    return run


def _message(rnd):
    """A size-prefixed message, sometimes with a wrong size."""
    body = struct.pack(">hhi", rnd.choice((0, 1, 3, 18)), rnd.randrange(4),
                       rnd.randrange(6)) + bytes(rnd.randrange(3000))
    size = len(body) if rnd.random() < 0.9 else rnd.choice((-1, 0, 3, 1 << 30, len(body) + 5))
    return struct.pack(">i", size) + body


@fuzz_settings(40)
@given(seed=st.integers(0, 2**32), level=st.sampled_from(LEVELS))
@bounded(60)
def test_segment_streams(monkeypatch, seed, level):
    rnd = random.Random(seed)
    streams = [b"".join(_message(rnd) for _ in range(8)) for _ in (0, 1)]
    sent = [0, 0]
    last = [1, 1]   # sequence numbers the last segment of each side took (a SYN's: 1)
    parts = [_SEG.pack(0x02, 1024, 0), _SEG.pack(0x82, 1024, 0)]   # the handshake's SYNs
    while sent[0] < len(streams[0]) or sent[1] < len(streams[1]):
        side = rnd.randrange(2)
        size = rnd.choice((1, 3, 4, 5, 100, 1448, 4000))
        chunk = streams[side][sent[side]:sent[side] + size]
        step = 1024 + last[side]
        if rnd.random() < 0.05:
            step += rnd.choice((-3, 1, 50))   # a retransmission, a hole
        flags = 0x10 | (0x08 if rnd.random() < 0.5 else 0)
        parts.append(_SEG.pack(side << 7 | flags, step, len(chunk)) + chunk)
        sent[side] += len(chunk)
        last[side] = len(chunk)
    compiled, twin = _both(monkeypatch, segment_run(b"".join(parts), level))
    assert compiled == twin

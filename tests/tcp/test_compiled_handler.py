"""The compiled per-message paths of the header level against their Python twins: the segment
handler (tcp/_handler.c; twin tcp.flows.py_handler with Framer.feed, Budget.reserve and release,
and tcp.batch.py_settle with Framer.took) and the pairing
(_pairing.c; twins Session.py_frame and py_head_size). Each is replaced by its twin alone and the run compared: the
same exchanges, frames, issues and connections, the budget's peak and (on captures) the packet
each exchange completed in as a parallel worker notes it, on the real captures and on damaged ones, and on
random segment streams that reach every state of the framer (a size prefix cut by a segment's
end, bad sizes, resyncs, holes, frames kept whole or only their first bytes) and of the pairing
(answers out of order, unanswered and orphaned, too short, Produce with acks=0, SaslHandshake and
ApiVersions); and the body decoder's calls per message (_decoding.c; twins BodyDecoder.py_request,
py_response and py_summarize) at the bodies level."""
import random
import struct

import pytest
from hypothesis import given, strategies as st

from dissector import decoding, session
from dissector.pipeline import Dissector, dissect
from dissector.tcp import batch, flows
from tests.fuzz.atheris_targets import segments
from tests.fuzz.stream_seeds import SEG
from tests.fuzz.support import (REAL, REAL_PORTS, bounded, exchange_key, fuzz_settings, mutate,
                                packets, write_pcap)
from tests.support import require_compiled

LEVELS = ("headers", "bodies")


def use_twin(m, which):
    """Make monkeypatch context `m` run the named compiled path's twin instead."""
    if which == "handler":
        m.setattr(flows, "compiled_handler", None)
        m.setattr(batch, "settle", batch.py_settle)
    elif which == "decoder":
        for name in ("request", "response", "summarize"):
            m.setattr(decoding.BodyDecoder, name, getattr(decoding.BodyDecoder, "py_" + name))
    else:
        m.setattr(session.Session, "frame", session.Session.py_frame)
        m.setattr(session.Session, "_head_size", session.Session.py_head_size)


@pytest.fixture(params=["handler", "pairing", "decoder"])
def twin(request):
    if request.param == "handler":
        require_compiled(flows.compiled_handler, "segment handler (tcp/_handler.c)")
    elif request.param == "decoder":
        require_compiled(decoding.COMPILED or None, "body decoder (_decoding.c)")
    else:
        require_compiled(session.PAIRING_COMPILED or None, "pairing (_pairing.c)")
    return request.param


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


def _both(monkeypatch, which, run):
    """run() compiled, then with the twin of `which`."""
    compiled = run()
    with monkeypatch.context() as m:
        use_twin(m, which)
        twin = run()
    return compiled, twin


def _capture(path, level):
    def run():
        d = dissect(path, REAL_PORTS, level=level)
        d.dissector.emitted = []   # noted as a parallel worker notes it
        exchanges = list(d)
        return (_seen(exchanges, d.issues, d.connections), d.dissector.emitted,
                d.dissector._flows.budget.peak)
    return run


@pytest.mark.parametrize("level", LEVELS + ("records",))
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_captures(monkeypatch, twin, path, level):
    compiled, twins = _both(monkeypatch, twin, _capture(path, level))
    assert compiled[0], "no exchanges: the comparison would prove nothing"
    assert compiled == twins


@fuzz_settings(25)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32), level=st.sampled_from(LEVELS))
@bounded(60)
def test_damaged_captures(monkeypatch, tmp_path_factory, twin, which, seed, level):
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
    compiled, twins = _both(monkeypatch, twin, _capture(path, level))
    assert compiled == twins


def segment_run(data, level, limit=None):
    """A run of the segments `data` describes (atheris_targets.segments), fed as the Spark job
    feeds them (Dissector.feed_segments: every live segment through its handler), returning
    what a reader sees; `limit`: the buffer budget's (frames in progress given up past it)."""
    def run():
        d = Dissector(REAL_PORTS, level=level)
        if limit is not None:
            d._flows.budget.limit = limit
            d._flows.budget.big_size = max(limit >> 10, 1)
        cols = [[] for _ in range(10)]
        for segment in segments(data):
            for col, v in zip(cols, segment[:9] + (memoryview(segment[9]),)):
                col.append(v)
        d.feed_segments(*cols)
        d.finish()
        return _seen(d.output, d.issues, d.connections), d._flows.budget.peak
    return run


def _exchange(rnd, corr):
    """A size-prefixed request and its response, sometimes with a wrong size or a wrong
    correlation id (unanswered, orphaned): requests of a few api keys and versions (Produce with
    acks=0 among them, flexible ones, SaslHandshake v0, ApiVersions) with a client id or not,
    responses whose header has tagged fields or not, or damaged ones; or raw SASL tokens (which
    follow a successful SaslHandshake v0)."""
    if rnd.random() < 0.1:
        return [_sized(rnd, b"\0user\0" + rnd.randbytes(rnd.randrange(20))) for _ in (0, 1)]
    key, version = rnd.choice(((0, 3), (0, 9), (0, 7), (1, 11), (1, 12), (3, 9), (17, 0),
                               (17, 1), (18, 2), (18, 3)))
    n = rnd.choice((-1, 0, 3))
    request = struct.pack(">hhih", key, version, corr, n) + b"abc"[:max(n, 0)]
    if (key, version) in ((0, 9), (1, 12), (3, 9), (18, 3)):   # flexible: tagged fields
        request += rnd.choice((b"\0", b"\0", b"\1\0\0", b"\x80"))
    if key == 0:   # a transactional id, then acks
        request += (b"\0" if version >= 9 else b"\xff\xff") + struct.pack(
            ">h", rnd.choice((0, 1, -1)))
    answer = corr if rnd.random() < 0.85 else rnd.randrange(-1, corr + 3)
    # no tagged fields (or no error: SaslHandshake v0), tags, damaged, nothing after the id
    response = struct.pack(">i", answer) + rnd.choice((b"\0", b"\0\0\0", b"\1\0\0", b"\x80",
                                                       b""))
    if (key, version) == (17, 0) and rnd.random() < 0.7:   # the handshake succeeds
        response = struct.pack(">ih", answer, 0)
    return [_sized(rnd, m + rnd.randbytes(rnd.choice((0, 1, 10, rnd.randrange(3000)))))
            for m in (request, response)]


def _exchanges(rnd, n):
    """n exchanges (_exchange), raw SASL tokens mostly after a SaslHandshake v0."""
    pairs = []
    for corr in range(n):
        pairs.append(_exchange(rnd, corr))
        if pairs[-1][0][4:8] == b"\0\x11\0\0" and rnd.random() < 0.6:
            pairs.append([_sized(rnd, b"\0user\0" + rnd.randbytes(rnd.randrange(20)))
                          for _ in (0, 1)])
    return pairs


def _sized(rnd, message):
    size = len(message) if rnd.random() < 0.97 else rnd.choice((-1, 0, 3, 1 << 30,
                                                                  len(message) + 5))
    return struct.pack(">i", size) + message


@fuzz_settings(40)
@given(seed=st.integers(0, 2**32), level=st.sampled_from(LEVELS),
       limit=st.sampled_from([None, None, 100, 3000, 20000]))
@bounded(60)
def test_segment_streams(monkeypatch, twin, seed, level, limit):
    rnd = random.Random(seed)
    pairs = _exchanges(rnd, 12)
    streams = [b"".join(pair[side] for pair in pairs) for side in (0, 1)]
    ends = [[], []]   # where each message of a side ends
    for side in (0, 1):
        for pair in pairs:
            ends[side].append((ends[side] or [0])[-1] + len(pair[side]))
    sent = [0, 0]
    last = [1, 1]   # sequence numbers the last segment of each side took (a SYN's: 1)
    parts = [SEG.pack(0x02, 1024, 0), SEG.pack(0x82, 1024, 0)]   # the handshake's SYNs
    while sent[0] < len(streams[0]) or sent[1] < len(streams[1]):
        # the broker answers what it has been asked (mostly)
        asked = sum(e <= sent[0] for e in ends[0])
        answered = ends[1][asked - 1] if asked else 0
        side = 1 if sent[0] == len(streams[0]) or (
            sent[1] < answered and rnd.random() < 0.6) or rnd.random() < 0.05 else 0
        size = rnd.choice((1, 3, 4, 5, 100, 1448, 4000))
        if side:
            size = min(size, max(answered - sent[1], 1))
        chunk = streams[side][sent[side]:sent[side] + size]
        step = 1024 + last[side]
        if rnd.random() < 0.05:
            step += rnd.choice((-3, 1, 50))   # a retransmission, a hole
        flags = 0x10 | (0x08 if rnd.random() < 0.5 else 0)
        parts.append(SEG.pack(side << 7 | flags, step, len(chunk)) + chunk)
        sent[side] += len(chunk)
        last[side] = len(chunk)
    compiled, twins = _both(monkeypatch, twin, segment_run(b"".join(parts), level, limit))
    assert compiled == twins


def test_objects_made_in_place():
    """The compiled paths make each Frame, _Pending and Exchange without its class's __init__
    call, setting every member as the __init__ does: a member added to one of those classes must
    be added to the lists in tcp/_handler.c and _pairing.c too (until then they call the class,
    as the next test checks)."""
    require_compiled(flows.compiled_handler, "segment handler (tcp/_handler.c)")
    require_compiled(session.PAIRING_COMPILED or None, "pairing (_pairing.c)")
    from dissector import _pairing
    from dissector.tcp import _handler
    assert _handler.in_place()
    assert _pairing.in_place() == (True, True)


def _configure_pairing(pending_class):
    from dissector import _pairing
    _pairing.configure(session.Session, pending_class, session.Exchange, session.request_head,
                       session._flexible_responses(), session.OK, session)


def test_classes_called_where_their_members_differ(monkeypatch):
    require_compiled(session.PAIRING_COMPILED or None, "pairing (_pairing.c)")
    from dissector import _pairing

    class Pending(session._Pending):
        __slots__ = ("extra",)

    _configure_pairing(Pending)
    try:
        assert _pairing.in_place() == (False, True)
        compiled, twins = _both(monkeypatch, "pairing", _capture(REAL[0], "headers"))
    finally:
        _configure_pairing(session._Pending)
    assert compiled[0][0] and compiled == twins
    assert _pairing.in_place() == (True, True)

"""The headers level keeps only the first bytes of a message that spans segments, those its header
reads (Session.head_size): what it reports must be what it reports keeping every message whole."""
import random
import struct
from contextlib import contextmanager

import pytest
from hypothesis import given, settings, strategies as st

from dissector.pipeline import Dissector, dissect
from dissector.session import Session
from dissector.tables import exchange_row, issue_row
from dissector.tcp.reassembly import ACK
from tests.protocol.encoder import uvarint
from tests.support import CAPTURES, lose_dup_swap
from tests.tcp.fakes import PSH, Wire


@contextmanager
def whole_messages():
    """The headers level with its framers keeping every message whole, as the bodies level does."""
    mp = pytest.MonkeyPatch()
    mp.setattr(Session, "head_size", property(lambda self: None))
    try:
        yield
    finally:
        mp.undo()


def _report(exchanges, issues):
    rows = [exchange_row(ex) for ex in exchanges]
    found = [issue_row(i) for i in issues] + [issue_row(i) for ex in exchanges for i in ex.issues]
    return rows, found


def _frames(exchanges):
    return [f for ex in exchanges for f in (ex.request, ex.response) if f is not None]


def _captures():
    return sorted(CAPTURES.glob("*.pcap"))


def test_real_captures_report_the_same_with_heads_only():
    assert _captures()
    cut = 0
    for path in _captures():
        run = dissect(path, auto=True)
        heads = list(run)
        with whole_messages():
            run_whole = dissect(path, auto=True)
            whole = list(run_whole)
        assert _report(heads, run.issues) == _report(whole, run_whole.issues), path.name
        for h, w in zip(_frames(heads), _frames(whole)):
            assert (h.length, h.first_packet, h.last_packet) == (w.length, w.first_packet,
                                                                 w.last_packet)
            assert bytes(w.data).startswith(bytes(h.data)), path.name
            cut += len(h.data) < len(w.data)
    assert cut > 20   # the re-segmented captures' large messages were kept as heads only


# -- made-up conversations: header shapes the real clients do not send ---------------------------

def _tags(tags):
    return uvarint(len(tags)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in tags)


# (api key, version): Produce before and after transactional ids and flexible versions, Metadata
# with header v1 and v2, ApiVersions (response header v0 always), ControlledShutdown v0 (request
# header v0), SaslHandshake v0 (raw tokens follow), an unknown api key
APIS = [(0, 2), (0, 3), (0, 8), (0, 9), (0, 11), (3, 1), (3, 9), (3, 12), (18, 3), (7, 0),
        (17, 0), (17, 1), (999, 0)]

blobs = st.binary(max_size=40) | st.builds(lambda n: b"x" * n, st.integers(0, 3000))
tag_lists = st.lists(st.tuples(st.integers(0, 300), blobs), max_size=3)


def _flexible(api_key, version):
    return (api_key == 0 and version >= 9) or (api_key == 3 and version >= 9) or \
        (api_key == 18 and version >= 3)


@st.composite
def requests(draw, corr):
    api_key, version = draw(st.sampled_from(APIS))
    head = struct.pack(">hhi", api_key, version, corr)
    flexible = _flexible(api_key, version)
    if (api_key, version) != (7, 0):
        client_id = draw(st.none() | blobs)
        head += struct.pack(">h", -1 if client_id is None else len(client_id)) + (client_id or b"")
        if flexible:
            head += _tags(draw(tag_lists))
    body = b""
    if api_key == 0:
        txn = draw(st.none() | blobs)
        if version >= 9:
            body = uvarint(0 if txn is None else len(txn) + 1) + (txn or b"")
        elif version >= 3:
            body = struct.pack(">h", -1 if txn is None else len(txn)) + (txn or b"")
        body += struct.pack(">h", draw(st.sampled_from([0, 1, -1])))
    msg = head + body + draw(blobs)
    if draw(st.integers(0, 9)) == 0:
        msg = msg[:draw(st.integers(0, len(msg)))]   # a header cut short
    return msg, api_key, version


@st.composite
def conversations(draw):
    """The client's and the broker's byte streams: requests, responses to some of them (some
    with repeated or unknown correlation ids), tagged response headers, raw SASL tokens."""
    client, broker = [], []
    for i in range(draw(st.integers(1, 12))):
        corr = draw(st.integers(0, 5)) if draw(st.booleans()) else i
        msg, api_key, version = draw(requests(corr))
        client.append(msg)
        if draw(st.integers(0, 3)) == 0:
            continue   # unanswered: the next response answers a request behind the first
        if draw(st.integers(0, 6)) == 0:
            corr = draw(st.integers(-2, 50))   # an orphan or the answer to another
        sasl = (api_key, version) == (17, 0)
        body = draw(st.sampled_from([b"\0\0" if sasl else b"", b"\0", b"\0\0"])) + draw(blobs)
        if sasl:   # large enough to span segments
            body += b"m" * draw(st.integers(0, 2000))
        if draw(st.integers(0, 9)) < (7 if _flexible(api_key, version) else 2):
            body = _tags(draw(tag_lists)) + body   # the flexible header's tags
        broker.append(struct.pack(">i", corr) + body)
        if sasl and draw(st.integers(0, 3)):
            tokens = draw(st.lists(blobs, max_size=3))
            client += tokens
            broker += [b"t" + t for t in tokens]
    return [b"".join(struct.pack(">i", len(m)) + m for m in side) for side in (client, broker)]


def _segments(streams, seed):
    """Both streams cut at random and interleaved at random, as one connection's segments."""
    rng = random.Random(seed)
    table = []
    wire = Wire(type("T", (), {"add": lambda self, *seg: table.append(seg)})())
    wire.handshake()
    at = [0, 0]
    while at[0] < len(streams[0]) or at[1] < len(streams[1]):
        side = rng.randrange(2) if all(at[s] < len(streams[s]) for s in (0, 1)) else \
            int(at[0] >= len(streams[0]))
        n = rng.choice([1, 7, 100, 100, 300, 536, 536, 1448, 5000])
        wire.send(wire.segment(side, streams[side][at[side]:at[side] + n], flags=ACK | PSH))
        at[side] += n
    wire.close()
    return table


def _dissect(segments):
    """(what is reported, every frame's data, the data of the raw SASL tokens' frames)"""
    d = Dissector((9092,))
    for seg in segments:
        d.feed_segment(*seg)
    d.finish()
    exchanges = list(d.output)
    raw = [bytes(f.data) for ex in exchanges if ex.raw_sasl for f in _frames([ex])]
    return _report(exchanges, d.issues), [bytes(f.data) for f in _frames(exchanges)], raw


@settings(max_examples=1000, deadline=None)
@given(conversations(), st.integers(0, 2**32), st.booleans())
def test_made_up_conversations_report_the_same_with_heads_only(streams, seed, damage):
    segments = _segments(streams, seed)
    if damage:   # holes, retransmissions and reordering too
        segments = segments[:3] + lose_dup_swap(segments[3:], random.Random(seed))
    report, datas, raw = _dissect(segments)
    with whole_messages():
        whole_report, whole_datas, whole_raw = _dissect(segments)
    assert report == whole_report
    assert raw == whole_raw   # tokens have no header: kept whole
    assert all(w.startswith(h) for h, w in zip(datas, whole_datas))


@pytest.mark.parametrize("size", [Session._head_size, Session.py_head_size],
                         ids=["compiled", "twin"])
def test_a_response_is_a_head_only_when_it_answers_the_oldest_request_awaiting_one(size):
    """Else it is kept whole: in a damaged capture an answer can come before its request, which
    may be a SaslHandshake that makes it a raw token (whole where keeping every message). The
    made-up conversations found one answering, by its first bytes, an acks=0 Produce."""
    from dissector.session import _Pending
    data = struct.pack(">i", 7) + b"\x00\x00" + b"m" * 40
    cases = [([], None), ([(7, None)], 6), ([(7, 1)], 6), ([(7, -1)], 6), ([(7, 0)], None),
             ([(8, None)], None), ([(8, None), (7, None)], None), ([(7, None), (8, 0)], 6)]
    for inflight, want in cases:
        session = Session(None, None, None)
        for corr, acks in inflight:
            pending = _Pending(None, 0 if acks is not None else 3, 0, corr, None)
            pending.acks = acks
            session._inflight.append(pending)
        assert size(session, 1, data) == want, inflight
    assert size(Session(None, None, None), 1, data[:5]) is None


@pytest.mark.parametrize("size", [Session._head_size, Session.py_head_size],
                         ids=["compiled", "twin"])
def test_a_response_is_whole_while_the_broker_acknowledged_requests_not_shown(size):
    """An answer can then come before its request, whatever its first bytes (a raw SASL token,
    once the SaslHandshake request shows): kept whole, as where every message is."""
    from dissector.session import _Pending
    from dissector.tcp.reassembly import Reassembler
    data = struct.pack(">i", 7) + b"\x00\x00" + b"m" * 40
    for owed, want in ((0, 6), (100, 6), (101, None)):
        session = Session(None, None, None)
        session._inflight.append(_Pending(None, 3, 0, 7, None))
        requests = Reassembler(None, session, 1, 0, 1 << 20)
        requests.next, requests.owed = 100, owed
        session.follow(requests)
        assert size(session, 1, data) == want, owed
    del requests   # the session holds it weakly: once gone, nothing is owed
    assert size(session, 1, data) == 6

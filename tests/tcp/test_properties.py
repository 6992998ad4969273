"""Properties over random segmentations, orders, duplicates and losses (hypothesis)."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dissector.model import REQUEST

from tests.tcp.fakes import Wire, request
from tests.tcp.test_reassembly import Harness

FRAMES = [request(i, bytes((7 * i + j) & 0xFF for j in range((i * 97) % 700))) for i in range(60)]
STREAM = b"".join(FRAMES)
OFFSETS = [sum(map(len, FRAMES[:i])) for i in range(len(FRAMES))]

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def segmentation(draw):
    """Cut points, then each piece possibly duplicated or overlapping a neighbour."""
    cuts = sorted(draw(st.sets(st.integers(1, len(STREAM) - 1), max_size=80)))
    bounds = [0] + cuts + [len(STREAM)]
    pieces = list(zip(bounds, bounds[1:]))
    extra = draw(st.lists(st.tuples(st.integers(0, len(STREAM) - 1), st.integers(1, 3000)),
                          max_size=10))
    pieces += [(s, min(len(STREAM), s + n)) for s, n in extra]
    order = draw(st.permutations(range(len(pieces))))
    isn = draw(st.integers(0, 0xFFFFFFFF))
    return [pieces[i] for i in order], isn


def run(pieces, isn, lost=()):
    h = Harness()
    w = Wire(h.table, cisn=isn)
    w.handshake()
    base = w.seq[0]
    for i, (s, e) in enumerate(pieces):
        if i not in lost:
            w.send(w.segment(0, STREAM[s:e], seq=base + s))
    h.table.flush()
    if not h.sinks:  # no payload ever seen: nothing made it a Kafka connection
        assert all(i in lost for i in range(len(pieces)))
        return None
    return h.sink


@SETTINGS
@given(segmentation())
def test_any_order_duplication_or_overlap_gives_back_the_frames(seg):
    pieces, isn = seg
    sink = run(pieces, isn)
    assert sink.datas(REQUEST) == [f[4:] for f in FRAMES]
    assert [f.stream_offset for f in sink.frames] == OFFSETS
    assert sink.issues == []


@SETTINGS
@given(segmentation(), st.sets(st.integers(0, 200), min_size=1, max_size=5))
def test_losses_never_invent_bytes(seg, lost):
    pieces, isn = seg
    sink = run(pieces, isn, lost)
    if sink is None:
        return
    for f in sink.frames:
        # every byte handed on is the byte the sender sent at that offset
        assert bytes(f.data) == STREAM[f.stream_offset + 4:f.stream_offset + 4 + len(f.data)]
        assert len(f.data) <= f.length - 4
    received = bytearray(len(STREAM))
    for i, (s, e) in enumerate(pieces):
        if i not in lost:
            received[s:e] = b"\x01" * (e - s)
    first_hole = received.find(0)
    if first_hole < 0:
        assert sink.issues == []
        return
    # everything before the first hole comes out whole, and the hole is reported
    whole = [f for f, o in zip(FRAMES, OFFSETS) if o + len(f) <= first_hole]
    assert sink.datas(REQUEST)[:len(whole)] == [f[4:] for f in whole]
    if received.find(1, first_hole) >= 0:  # data beyond the hole shows it is one
        assert "tcp.gap" in sink.codes()
    assert sink.closed == 1


@st.composite
def junk_stream(draw):
    """Kafka frames mixed with arbitrary bytes, cut anywhere, with holes."""
    parts = draw(st.lists(st.one_of(st.binary(max_size=300),
                                    st.sampled_from(FRAMES[:20]),
                                    st.builds(lambda n: n.to_bytes(4, "big", signed=True),
                                              st.integers(-(1 << 31), (1 << 31) - 1))),
                          max_size=40))
    data = b"".join(parts)
    cuts = sorted(draw(st.sets(st.integers(0, max(len(data), 1)), max_size=30)))
    bounds = [0] + cuts + [len(data)]
    pieces = [(s, e) for s, e in zip(bounds, bounds[1:]) if e > s]
    lost = draw(st.sets(st.integers(0, 40), max_size=4))
    return data, pieces, lost


@SETTINGS
@given(junk_stream(), st.booleans())
def test_garbage_never_raises_and_never_invents(case, midstream):
    from dissector.framing import Framer
    from dissector.model import Connection

    from tests.tcp.fakes import RecordingSink

    data, pieces, lost = case
    sink = RecordingSink()
    f = Framer(Connection(1, "a", 1, "b", 2), REQUEST, sink, max_frame=1 << 16)
    if midstream:
        f.midstream()
    for i, (s, e) in enumerate(pieces):
        if i in lost:
            f.gap(e - s, i)
        else:
            f.feed(data[s:e], i, i)
        if i % 5 == 4:
            f.settle()
    f.finish(len(pieces))
    for fr in sink.frames:
        assert bytes(fr.data) == data[fr.stream_offset + 4:fr.stream_offset + 4 + len(fr.data)]
        assert fr.length == int.from_bytes(data[fr.stream_offset:fr.stream_offset + 4], "big") + 4
    assert all(i.connection_id == 1 and i.stream_offset is not None for i in sink.issues)

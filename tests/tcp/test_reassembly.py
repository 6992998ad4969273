"""Per-direction reassembly through the FlowTable: order, duplicates, overlaps, holes, wrap."""
import random

import pytest

from dissector.model import REQUEST, RESPONSE, WARNING
from dissector.tcp.flows import FlowTable
from dissector.tcp.reassembly import ACK

from tests.tcp.fakes import PSH, RecordingSink, Wire, chop, request, response

REQS = [request(i, bytes((i * j) & 0xFF for j in range(40 * i))) for i in range(1, 41)]
RESPS = [response(i, b"r" * (3 * i)) for i in range(1, 41)]
STREAM = b"".join(REQS)


def by_port(src, sport, dst, dport, payload):
    return 0 if dport == 9092 else 1 if sport == 9092 else None


class Harness:
    def __init__(self, **kw):
        self.sinks = []
        self.table = FlowTable(by_port, self._open, **kw)

    def _open(self, conn):
        sink = RecordingSink(conn)
        self.sinks.append(sink)
        return sink

    @property
    def sink(self):
        (sink,) = self.sinks
        return sink


@pytest.fixture
def h():
    return Harness()


def client_segments(w, data, size):
    return [w.segment(0, p) for p in chop(data, size)]


def expect_requests(sink, reqs=REQS):
    assert sink.datas(REQUEST) == [r[4:] for r in reqs]


def test_in_order(h):
    w = Wire(h.table)
    w.handshake()
    for seg in client_segments(w, STREAM, 1448):
        w.send(seg)
    w.send(w.segment(1, b"".join(RESPS)))
    w.close()
    expect_requests(h.sink)
    assert h.sink.datas(RESPONSE) == [r[4:] for r in RESPS]
    assert h.sink.issues == [] and h.sink.closed == 1  # closed by the FINs, before any flush
    h.table.flush()
    assert h.sink.closed == 1


@pytest.mark.parametrize("seed", range(5))
def test_out_of_order(h, seed):
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, STREAM, 700)
    random.Random(seed).shuffle(segs)
    for seg in segs:
        w.send(seg)
    expect_requests(h.sink)
    assert h.sink.issues == []


def test_out_of_order_frames_carry_the_packets_that_held_their_bytes(h):
    w = Wire(h.table)
    w.handshake()
    data = REQS[2]
    first, second = client_segments(w, data, len(data) // 2 + 1)
    p2 = w.send(second)
    p1 = w.send(first)
    (fr,) = h.sink.frames
    assert bytes(fr.data) == data[4:] and (fr.first_packet, fr.last_packet) == (p1, p2)


def test_retransmissions_are_dropped(h):
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, STREAM, 1000)
    for i, seg in enumerate(segs):
        w.send(seg)
        if i % 3 == 0:
            w.send(seg)            # the same segment again
        if i % 4 == 1:
            w.send(segs[i - 1])    # an older one
    expect_requests(h.sink)
    assert h.sink.issues == []


def test_partial_overlaps_with_identical_bytes_are_silent(h):
    w = Wire(h.table)
    w.handshake()
    isn = w.seq[0]
    rng = random.Random(7)
    # segments with random starts and lengths that overlap each other
    starts = sorted(rng.sample(range(len(STREAM)), 80)) + [0]
    segs = []
    for s in starts:
        e = min(len(STREAM), s + rng.randint(1, 3000))
        segs.append(w.segment(0, STREAM[s:e], seq=isn + s))
    segs.append(w.segment(0, STREAM, seq=isn))  # and one that covers all: fills the remaining holes
    rng.shuffle(segs)
    for seg in segs:
        w.send(seg)
    expect_requests(h.sink)
    assert h.sink.issues == []


def test_conflicting_overlap_with_held_data_keeps_the_first_copy(h):
    w = Wire(h.table)
    w.handshake()
    isn = w.seq[0]
    data = REQS[20] + REQS[21]
    w.send(w.segment(0, data[100:200], seq=isn + 100))          # held: arrives first
    forged = data[:150] + b"X" * 10 + data[160:250]
    w.send(w.segment(0, forged, seq=isn))                        # overlaps 100..250
    w.send(w.segment(0, data[250:], seq=isn + 250))
    expect_requests(h.sink, REQS[20:22])
    (issue,) = h.sink.issues
    assert issue.code == "tcp.overlap_conflict" and issue.severity == WARNING
    assert issue.stream_offset == 150 and "10 bytes" in issue.detail


def test_conflicting_retransmission_of_delivered_data(h):
    w = Wire(h.table)
    w.handshake()
    isn = w.seq[0]
    data = REQS[20] + REQS[21]
    w.send(w.segment(0, data[:300], seq=isn))
    w.send(w.segment(0, data[:290] + b"!!" + data[292:320], seq=isn))  # 290..291 differ
    w.send(w.segment(0, data[300:], seq=isn + 300))
    expect_requests(h.sink, REQS[20:22])
    (issue,) = h.sink.issues
    assert (issue.code, issue.stream_offset) == ("tcp.overlap_conflict", 290)
    assert "2 bytes" in issue.detail


def test_loss_inside_a_frame(h):
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, STREAM, 100)
    lost = 34                         # bytes 3400..3499, inside REQS[12] (3336..3873)
    for i, seg in enumerate(segs):
        if i != lost:
            w.send(seg)
    w.close()
    h.table.flush()
    codes = h.sink.codes()
    assert codes == ["tcp.gap", "kafka.truncated_frame"]
    gap = h.sink.issues[0]
    assert gap.stream_offset == 3400 and "100 bytes" in gap.detail
    # every frame not touched by the hole comes out whole
    hit = [r for r in REQS if bytes(r[4:]) not in h.sink.datas(REQUEST)]
    assert len(hit) == 1
    assert len(h.sink.datas(REQUEST)) == len(REQS)  # the cut one is handed on partially


def test_loss_across_frames_resyncs_and_later_frames_come_out(h):
    w = Wire(h.table)
    w.handshake()
    offsets = [sum(map(len, REQS[:i])) for i in range(len(REQS))]
    # lose the bytes from the middle of REQS[9] to the middle of REQS[11]
    start, end = offsets[9] + 20, offsets[11] + 30
    isn = w.seq[0]
    w.send(w.segment(0, STREAM[:start], seq=isn))
    w.send(w.segment(0, STREAM[end:], seq=isn + end))
    w.send(w.segment(1, b"", flags=ACK, ack=isn + len(STREAM)))  # the broker got it all
    got = h.sink.datas(REQUEST)
    whole = [r for r in REQS if r[4:] in got]
    assert whole == REQS[:9] + REQS[12:]
    assert h.sink.codes() == ["tcp.gap", "kafka.truncated_frame", "kafka.resync"]
    assert h.sink.issues[0].detail.startswith(f"{end - start} bytes missing")


def test_ack_evidence_declares_a_capture_drop_immediately(h):
    """A hole the receiver acknowledged will never be retransmitted: frames after it must come
    out before the responses to them, not at the end of the capture."""
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, REQS[0] + REQS[1] + REQS[2], 50)
    lost = 2                          # bytes 100..149, inside REQS[1] (58..155)
    sent = {i: w.send(seg) for i, seg in enumerate(segs) if i != lost}
    assert len(h.sink.frames) == 1                       # only what precedes the hole
    w.send(w.segment(1, RESPS[2], ack=w.seq[0]))         # acks everything the client sent
    gap = h.sink.issues[0]
    # reported at the first packet after the hole
    assert (gap.connection_id, gap.frame, gap.stream_offset) == (1, sent[lost + 1], 100)
    kinds = [(f.direction, bytes(f.data)) for f in h.sink.frames]
    assert (REQUEST, REQS[2][4:]) in kinds
    assert kinds.index((REQUEST, REQS[2][4:])) < kinds.index((RESPONSE, RESPS[2][4:]))
    assert h.sink.codes()[0] == "tcp.gap"


def test_an_ack_shown_before_the_data_it_acknowledges_loses_nothing(h):
    """A mirror port that queues the directions apart shows the broker's ack first; the bytes it
    acknowledges come after, in order: nothing is declared lost."""
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, REQS[0] + REQS[1] + REQS[2], 50)
    for seg in segs[:2]:
        w.send(seg)
    w.send(w.segment(1, RESPS[0], ack=w.seq[0]))     # acks everything: segs[2:] not yet seen
    for seg in segs[2:]:
        w.send(seg)
    assert h.sink.codes() == []
    expect_requests(h.sink, REQS[:3])


def test_data_after_its_declared_hole_is_late_data_once_a_stream(h):
    """Bytes after a hole came first and the broker acknowledged past them: the hole was the
    capture's drop (a direction keeps its order) and is declared; if its bytes come after all
    (a capture point that reorders one direction), they are named, once."""
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, REQS[0] + REQS[1] + REQS[2], 50)
    for i, seg in enumerate(segs):
        if i not in (2, 3):
            w.send(seg)
    w.send(w.segment(1, RESPS[0], ack=w.seq[0]))     # acks everything: the hole is declared
    w.send(segs[2])
    w.send(segs[3])
    codes = h.sink.codes()
    assert codes.count("tcp.gap") == 1 and codes.count("tcp.late_data") == 1
    late = next(i for i in h.sink.issues if i.code == "tcp.late_data")
    assert late.severity == WARNING and late.stream_offset == 100
    assert late.detail.startswith("50 bytes of the request stream from offset 100")


def test_a_retransmission_of_delivered_bytes_is_not_late_data(h):
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, REQS[0] + REQS[1], 50)
    for seg in segs + segs[:3]:
        w.send(seg)
    w.send(w.segment(1, RESPS[0], ack=w.seq[0]))
    w.send(segs[-1])
    assert h.sink.codes() == []


def test_buffer_cap_declares_the_lowest_hole_a_gap():
    h = Harness(max_buffered=3000)
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, STREAM, 1000)
    for i, seg in enumerate(segs):
        if i != 2:
            w.send(seg)
        if i == 6:  # 4000 bytes held past the hole by now: over the cap
            assert h.sink.codes()[:1] == ["tcp.gap"]
    assert h.sink.issues[0].stream_offset == 2000
    got = h.sink.datas(REQUEST)
    offsets = [sum(map(len, REQS[:i])) for i in range(len(REQS))]
    untouched = [r for r, o in zip(REQS, offsets) if o + len(r) <= 2000 or o >= 3000]
    assert [r for r in REQS if r[4:] in got] == untouched


def test_sequence_wrap_around(h):
    w = Wire(h.table, cisn=0xFFFFFFFF - 3000, bisn=0xFFFFFF00)
    w.handshake()
    segs = client_segments(w, STREAM, 1448)
    segs[1], segs[2] = segs[2], segs[1]                      # reordered across the wrap too
    for seg in segs:
        w.send(seg)
    w.send(w.segment(1, b"".join(RESPS)))
    assert any(s[4] < 50_000 for s in segs)                    # the numbers did wrap
    expect_requests(h.sink)
    assert h.sink.datas(RESPONSE) == [r[4:] for r in RESPS]
    assert h.sink.issues == []
    assert h.sink.frames[-1].stream_offset == sum(map(len, RESPS[:-1]))


def test_keepalives_are_ignored(h):
    w = Wire(h.table)
    w.handshake()
    half = len(REQS[0]) // 2
    w.send(w.segment(0, REQS[0][:half]))
    nxt = w.seq[0]
    w.send(w.segment(0, b"\x00", seq=nxt - 1))   # keep-alive probe with a junk byte
    w.send(w.segment(0, b"", flags=ACK, seq=nxt - 1))
    w.send(w.segment(1, b"", flags=ACK))          # its answer
    w.send(w.segment(0, REQS[0][half:] + REQS[1]))
    expect_requests(h.sink, REQS[:2])
    assert h.sink.issues == []


def test_midstream_start(h):
    w = Wire(h.table)                 # no handshake: the capture joins a running connection
    segs = client_segments(w, STREAM, 1448)
    for seg in segs[1:]:
        w.send(seg)
    w.close()
    got = h.sink.datas(REQUEST)
    first_whole = next(i for i, r in enumerate(REQS) if sum(map(len, REQS[:i])) >= 1448)
    assert got == [r[4:] for r in REQS[first_whole:]]
    (issue,) = h.sink.issues
    assert issue.code == "kafka.resync" and issue.severity == "note"
    assert h.sink.frames[0].stream_offset == sum(map(len, REQS[:first_whole])) - 1448


def test_fin_before_the_last_data_still_delivers_it(h):
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, REQS[0] + REQS[1], 100)
    fin = w.segment(0, b"", flags=ACK | 1)
    for seg in segs[:-1]:
        w.send(seg)
    w.send(fin)
    w.send(segs[-1])
    expect_requests(h.sink, REQS[:2])
    assert h.sink.issues == []


def test_truncated_final_frame_at_flush(h):
    w = Wire(h.table)
    w.handshake()
    w.send(w.segment(0, REQS[0] + REQS[1][:30]))
    h.table.flush()
    assert h.sink.codes() == ["kafka.truncated_frame"]
    assert h.sink.issues[0].stream_offset == len(REQS[0])
    assert h.sink.closed == 1


def test_fin_with_a_hole_before_it_becomes_a_gap_when_both_sides_close(h):
    w = Wire(h.table)
    w.handshake()
    isn = w.seq[0]
    w.send(w.segment(0, REQS[0], seq=isn))
    w.send(w.segment(0, REQS[2], seq=isn + len(REQS[0]) + len(REQS[1]), flags=ACK | PSH | 1))
    w.send(w.segment(1, b"", flags=ACK | 1, ack=isn + len(REQS[0])))  # no ack of the hole
    assert h.sink.codes() == ["tcp.gap"]
    assert h.sink.closed == 1
    expect_requests(h.sink, [REQS[0], REQS[2]])


def test_rst_ends_the_connection(h):
    w = Wire(h.table)
    w.handshake()
    w.send(w.segment(0, REQS[0] + REQS[1][:10]))
    w.send(w.segment(1, b"", flags=0x04 | ACK))
    assert h.sink.closed == 1
    assert h.sink.codes() == ["kafka.truncated_frame"]
    w.send(w.segment(0, REQS[1][10:]))     # late data after the reset is ignored
    assert len(h.sink.frames) == 2 and h.sink.closed == 1
    h.table.flush()
    assert h.sink.closed == 1


def test_lost_syn_ack_the_handshake_ack_anchors_the_broker_stream(h):
    w = Wire(h.table)
    w.send(w.segment(0, flags=0x02, ack=0))                  # SYN
    w.segment(1, flags=0x02 | ACK)                           # SYN-ACK: not captured
    w.send(w.segment(0, flags=ACK))
    w.send(w.segment(0, REQS[0]))
    w.send(w.segment(1, RESPS[0] + RESPS[1][:6]))
    assert h.sink.datas(RESPONSE) == [RESPS[0][4:]]          # no resync needed, no wait
    assert h.sink.issues == [] and h.sink.frames[-1].stream_offset == 0


def test_lost_syn_the_syn_ack_anchors_the_client_stream(h):
    w = Wire(h.table)
    w.segment(0, flags=0x02, ack=0)                          # SYN: not captured
    w.send(w.segment(1, flags=0x02 | ACK))
    w.send(w.segment(0, REQS[0][:10]))
    w.send(w.segment(0, REQS[0][10:]))
    assert h.sink.datas(REQUEST) == [REQS[0][4:]] and h.sink.issues == []


def test_memoryview_payloads(h):
    """Drivers may hand payloads as views into a larger buffer (the Spark job does)."""
    w = Wire(h.table)
    w.handshake()
    segs = client_segments(w, STREAM, 999)
    segs[3], segs[4] = segs[4], segs[3]
    big = bytearray()
    views = []
    for seg in segs:
        start = len(big)
        big += seg[7]
        views.append((seg, start, len(seg[7])))
    buf = memoryview(bytes(big))
    for seg, start, n in views:
        w.send(seg[:7] + (buf[start:start + n],))
    expect_requests(h.sink)
    assert h.sink.issues == []

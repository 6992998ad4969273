"""Framer on its own: size-prefixed frames out of a byte stream fed in arbitrary pieces."""
import struct

import pytest

from dissector.framing import Framer
from dissector.model import NOTE, REQUEST, RESPONSE, WARNING, Connection

from tests.tcp.fakes import RecordingSink, chop, request, response

CONN = Connection(7, "10.0.0.1", 40000, "10.0.0.2", 9092)


def framer(direction=REQUEST, **kw):
    sink = RecordingSink()
    return Framer(CONN, direction, sink, **kw), sink


def feed_all(f, pieces, first_pkt=1):
    for i, p in enumerate(pieces):
        f.feed(p, first_pkt + i, (first_pkt + i) * 1000)


REQS = [request(i, bytes(range(256)) * (i % 5) + b"z" * i) for i in range(1, 40)]
STREAM = b"".join(REQS)


@pytest.mark.parametrize("piece", [1, 3, 4, 5, 13, 100, 1448, len(STREAM)])
def test_any_segmentation_gives_the_same_frames(piece):
    f, sink = framer()
    feed_all(f, chop(STREAM, piece))
    f.finish(0)
    assert sink.datas(REQUEST) == [r[4:] for r in REQS]
    assert sink.issues == []
    # offsets and lengths describe the wire bytes exactly
    offsets = [sum(len(r) for r in REQS[:i]) for i in range(len(REQS))]
    assert [fr.stream_offset for fr in sink.frames] == offsets
    assert [fr.length for fr in sink.frames] == [len(r) for r in REQS]
    for fr in sink.frames:
        assert STREAM[fr.stream_offset + 4:fr.stream_offset + fr.length] == bytes(fr.data)


def test_first_and_last_packets_and_times():
    frame = request(1, b"a" * 300)          # 318 bytes on the wire
    f, sink = framer()
    pieces = [frame[:2], frame[2:100], frame[100:200], frame[200:] + request(2)[:10],
              request(2)[10:]]
    feed_all(f, pieces, first_pkt=10)
    a, b = sink.frames
    assert (a.first_packet, a.last_packet, a.first_ts, a.last_ts) == (10, 13, 10_000, 13_000)
    assert (b.first_packet, b.last_packet) == (13, 14)
    assert b.stream_offset == len(frame)


def test_many_frames_in_one_segment_are_sliced_out():
    small = [response(i, b"r") for i in range(500)]
    f, sink = framer(RESPONSE)
    f.feed(b"".join(small), 1, 1)
    assert len(sink.frames) == 500
    assert all(fr.first_packet == fr.last_packet == 1 for fr in sink.frames)
    assert sink.datas(RESPONSE) == [r[4:] for r in small]


def test_frame_spanning_100_segments():
    big = request(9, bytes(i % 251 for i in range(100 * 1000)))
    f, sink = framer()
    pieces = chop(big, (len(big) + 99) // 100)
    assert len(pieces) == 100
    feed_all(f, pieces)
    (fr,) = sink.frames
    assert bytes(fr.data) == big[4:]
    assert (fr.first_packet, fr.last_packet) == (1, 100)


def test_zero_size_frame_is_a_frame():
    # e.g. a SASL server token after SaslHandshake v0
    f, sink = framer(RESPONSE)
    f.feed(b"\x00\x00", 1, 1)
    f.feed(b"\x00\x00" + response(1), 2, 2)
    assert sink.datas(RESPONSE) == [b"", response(1)[4:]]


def test_oversized_claim_is_an_issue_and_a_resync_never_an_allocation():
    f, sink = framer(max_frame=1 << 20)
    junk = struct.pack(">i", 0x7FFFFFF0) + b"\x01" * 50
    feed_all(f, chop(REQS[0] + junk + b"".join(REQS[1:4]), 7))
    assert sink.codes() == ["kafka.frame_too_large", "kafka.resync"]
    too_large, resync = sink.issues
    assert too_large.stream_offset == len(REQS[0]) and too_large.severity == WARNING
    assert "skipped 53 bytes" in resync.detail      # the 3 rest of the bad prefix + 50
    assert sink.datas(REQUEST) == [r[4:] for r in REQS[:4]]


def test_negative_size_is_bad_frame_size_then_resync():
    f, sink = framer()
    f.feed(b"\xff\xff\xff\xfe" + REQS[1] + REQS[2], 1, 1)
    assert sink.codes() == ["kafka.bad_frame_size", "kafka.resync"]
    assert sink.datas(REQUEST) == [REQS[1][4:], REQS[2][4:]]


def test_midstream_start_resyncs_with_a_note():
    f, sink = framer()
    f.midstream()
    cut = STREAM[37:]          # starts inside the first frame
    feed_all(f, chop(cut, 61))
    f.finish(0)
    assert sink.datas(REQUEST) == [r[4:] for r in REQS[1:]]
    (issue,) = sink.issues
    assert (issue.code, issue.severity) == ("kafka.resync", NOTE)
    assert f"skipped {len(REQS[0]) - 37} bytes" in issue.detail
    assert issue.stream_offset == 0 and issue.connection_id == 7


def test_midstream_start_on_a_boundary_is_silent():
    f, sink = framer()
    f.midstream()
    f.feed(STREAM, 1, 1)
    assert sink.issues == [] and len(sink.frames) == len(REQS)


def test_response_resync_needs_a_correlation_id_in_flight():
    f, sink = framer(RESPONSE)
    sink.inflight = {5, 6}
    f.midstream()
    # a well-formed frame whose correlation id (3) is not in flight is skipped
    stream = response(3, b"xyzw") + response(5, b"abc") + response(6)
    feed_all(f, chop(stream, 3))
    assert sink.datas(RESPONSE) == [response(5, b"abc")[4:], response(6)[4:]]


def test_gap_inside_a_frame_skips_to_its_end_and_hands_on_the_seen_part():
    f, sink = framer()
    a, b, c = REQS[10], REQS[11], REQS[12]
    f.feed(a[:30], 1, 1)
    f.gap(20, 2)               # bytes 30..49 of `a` never arrive
    f.feed(a[50:] + b + c, 3, 3)
    f.finish(3)
    assert sink.codes() == ["kafka.truncated_frame"]
    cut, fb, fc = sink.frames
    assert bytes(cut.data) == a[4:30] and cut.length == len(a)
    assert [bytes(fb.data), bytes(fc.data)] == [b[4:], c[4:]]
    assert fb.stream_offset == len(a)


def test_gap_over_a_frame_boundary_resyncs():
    f, sink = framer()
    a, b, c, d = REQS[20:24]
    f.feed(a + b[:10], 1, 1)
    f.gap(len(b) - 10 + 6, 2)  # the rest of b and the start of c are lost
    f.feed(c[6:] + d, 3, 3)
    f.finish(3)
    assert sink.codes() == ["kafka.truncated_frame", "kafka.resync"]
    assert sink.issues[1].severity == WARNING
    assert f"skipped {len(c) - 6} bytes" in sink.issues[1].detail
    assert sink.datas(REQUEST) == [a[4:], b[4:10], d[4:]]


def test_gap_exactly_on_a_boundary_costs_nothing_more():
    f, sink = framer()
    a, b, c = REQS[:3]
    f.feed(a, 1, 1)
    f.gap(len(b), 2)
    f.feed(c, 3, 3)
    assert f.waiting  # c is held until something confirms it
    f.finish(3)
    assert sink.issues == [] and sink.datas(REQUEST) == [a[4:], c[4:]]


def test_truncated_final_frame_at_finish():
    f, sink = framer()
    f.feed(REQS[0] + REQS[1][:25], 1, 1)
    f.finish(2)
    (issue,) = sink.issues
    assert issue.code == "kafka.truncated_frame" and issue.stream_offset == len(REQS[0])
    assert sink.datas(REQUEST) == [REQS[0][4:], REQS[1][4:25]]
    assert sink.frames[1].length == len(REQS[1])


def test_partial_size_prefix_at_finish():
    f, sink = framer()
    f.feed(REQS[0] + b"\x00\x00", 1, 1)
    f.finish(1)
    assert sink.codes() == ["kafka.truncated_frame"]


def test_resync_that_never_finds_a_frame_reports_the_bytes_at_finish():
    f, sink = framer()
    f.midstream()
    f.feed(b"\xff" * 1000, 1, 1)
    f.finish(1)
    (issue,) = sink.issues
    assert issue.code == "kafka.resync" and "skipped 1000 bytes" in issue.detail
    assert sink.frames == []


def test_resync_scan_memory_is_bounded():
    f, sink = framer()
    f.midstream()
    for i in range(200):
        f.feed(b"\xff" * 10_000, i, i)
        assert f._slen < 16
    # a plausible claim just under the confirmation limit is held, then refuted
    from dissector.framing import CONFIRM_LIMIT
    claim = request(1, b"\xff" * (CONFIRM_LIMIT - 30))[:40]
    f.feed(claim, 300, 300)
    assert f.waiting
    most = 0
    for i in range(150):
        f.feed(b"\xff" * 10_000, 301 + i, 0)
        most = max(most, f._slen)
    assert not f.waiting and most <= CONFIRM_LIMIT + 20_000
    f.finish(0)
    assert sink.frames == [] and sink.codes() == ["kafka.resync"]


def test_resync_candidate_is_confirmed_by_the_next_frame():
    # After the hole, c[6:] starts with bytes that read as a 65536-byte request with a valid
    # header; the frame after that claim is not plausible, so the real frame d is found instead.
    f, sink = framer()
    c = request(0x17, b"q" * 40, api_key=3, version=1)
    a, d, e = REQS[0], REQS[1], REQS[2]
    f.feed(a, 1, 1)
    f.gap(6, 2)
    shifted = c[6:]
    assert sink.plausible(REQUEST, shifted, 0)  # the trap is real
    feed_all(f, chop(shifted + d + e + b"".join(REQS[3:30]), 500), first_pkt=3)
    f.finish(99)
    assert sink.datas(REQUEST) == [a[4:]] + [r[4:] for r in REQS[1:30]]
    assert sink.codes() == ["kafka.resync"]
    assert f"skipped {len(shifted)} bytes" in sink.issues[0].detail


def test_settle_releases_a_complete_candidate_when_the_peer_speaks():
    f, sink = framer()
    f.midstream()
    f.feed(b"\x01\x02\x03" + REQS[5], 1, 1)
    assert sink.frames == [] and f.waiting
    f.settle()
    assert sink.datas(REQUEST) == [REQS[5][4:]] and not f.waiting
    assert sink.frames[0].first_packet == 1
    f.feed(REQS[6], 2, 2)      # back in sync: straight through
    assert len(sink.frames) == 2


def _false_then_real():
    """Leftover bytes holding a plausible header (id 99) whose frame runs to the end of the real
    request (id 5) after it: both are complete resync candidates."""
    real = request(5, b"r" * 30)
    head = struct.pack(">hhih", 3, 1, 99, 4) + b"fake" + b"\x00" * 6
    return b"\x01\x02" + struct.pack(">i", len(head) + len(real)) + head + real, real


@pytest.mark.parametrize("answers, taken", [
    (None, 99),      # nothing known of the answer: the first complete candidate
    ([5], 5),        # the answer names the real request: it is taken past the false header
    ([7, 5], 5),     # ... among several responses in the segment
])
def test_settle_takes_the_candidate_the_other_side_answers(answers, taken):
    f, sink = framer()
    f.midstream()
    data, real = _false_then_real()
    f.feed(data, 1, 1)
    assert f.waiting
    f.settle(answers)
    assert [fr.data[4:8] for fr in sink.frames] == [struct.pack(">i", taken)]
    assert sink.frames[0].data == real[4:] or taken == 99


def test_settle_waits_while_the_answers_name_no_candidate():
    """Responses to requests from before the resync say nothing of the candidates: wait on (a
    response continued, or one to a request the capture cut), then take the one answered."""
    f, sink = framer()
    f.midstream()
    data, real = _false_then_real()
    f.feed(data, 1, 1)
    f.settle([1])
    f.settle([])
    assert sink.frames == [] and f.waiting
    f.settle([5])
    assert sink.datas(REQUEST) == [real[4:]] and not f.waiting
    f.finish(2)
    assert sink.codes() == ["kafka.resync"]


def test_settle_without_an_answer_at_the_end_takes_the_first_candidate():
    f, sink = framer()
    f.midstream()
    data, _ = _false_then_real()
    f.feed(data, 1, 1)
    f.settle([1])
    f.finish(2)
    assert [fr.data[4:8] for fr in sink.frames] == [struct.pack(">i", 99)]


def test_answers_reads_the_response_heads_a_segment_starts():
    f, _ = framer(RESPONSE)
    two = response(3, b"c" * 10) + response(4)
    assert f.answers(two) == [3, 4]                     # at a frame boundary
    assert f.answers(two + b"\x00\x00\x00") is None     # a head not yet in view
    assert f.answers(b"\xff" * 8) is None                # an impossible size: unknown
    f.feed(response(1, b"x" * 100)[:50], 1, 1)          # a frame in progress ...
    assert f.answers(response(1, b"x" * 100)[50:] + response(9)) == [9]   # ... past its rest
    assert f.answers(b"x" * 20) == []                   # ... or all of it: none starts
    g, _ = framer(RESPONSE)
    cut = two + response(5, b"e" * 10)[:-2]             # the last one continues
    assert g.answers(cut) == [3, 4, 5]                  # the stream's start: a boundary ...
    assert g.answers(cut, joined=True) is None          # ... joined there: only an exact cover
    assert g.answers(two, joined=True) == [3, 4]
    g.midstream()                                       # out of sync: only an exact cover
    assert g.answers(two) == [3, 4]
    assert g.answers(cut) is None
    assert g.answers(b"") is None
    assert framer(REQUEST)[0].answers(two) is None      # requests answer nothing


def test_resynced_frames_keep_their_packets():
    f, sink = framer()
    f.midstream()
    feed_all(f, [b"\xff" * 5 + REQS[3][:10], REQS[3][10:], REQS[4]], first_pkt=20)
    f.finish(22)
    first, second = sink.frames
    assert (first.first_packet, first.last_packet) == (20, 21)
    assert (second.first_packet, second.last_packet) == (22, 22)
    assert first.stream_offset == 5


def test_candidate_confirmed_further_down_the_chain():
    # After a hole: responses 3, 4, 5. The request of 4 was lost, so 4 looks wrong, but the
    # sizes chain on to 5, whose id is in flight: 3 is the real boundary and is kept.
    f, sink = framer(RESPONSE)
    sink.inflight = {3, 5}
    f.feed(response(1), 1, 1)
    f.gap(20, 2)
    f.feed(response(3, b"c" * 30) + response(4, b"d" * 10) + response(5, b"e"), 3, 3)
    assert sink.datas(RESPONSE)[1:2] == [response(3, b"c" * 30)[4:]]
    f.finish(3)
    assert response(5, b"e")[4:] in sink.datas(RESPONSE)


def test_probation_catches_a_wrong_guess():
    """A frame accepted on weak evidence whose successor makes no sense to the session."""
    f, sink = framer(RESPONSE)
    sink.inflight = {7, 8}
    f.midstream()
    # 12 junk bytes that read as a response to 7 whose successor says 0x00000009 (size 9,
    # "correlation id" 0x00000000): not in flight once 7 is answered
    junk = b"\x00\x00\x00\x04\x00\x00\x00\x07\x00\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    f.feed(junk, 1, 1)
    f.settle()                        # the client speaks: take the complete candidate
    sink.inflight.discard(7)          # as the session does once 7 is paired
    f.feed(response(8, b"x"), 2, 2)
    f.finish(2)
    assert sink.datas(RESPONSE) == [b"\x00\x00\x00\x07", response(8, b"x")[4:]]
    (issue,) = sink.issues            # the first guess skipped nothing: only the second counts
    assert (issue.code, issue.severity, issue.stream_offset) == ("kafka.resync", WARNING, 8)


def test_unconfirmed_candidate_is_taken_after_the_confirmation_limit():
    from dissector.framing import CONFIRM_LIMIT
    f, sink = framer()
    f.midstream()
    big = request(1, b"\x00" * (3 * CONFIRM_LIMIT))
    feed_all(f, [b"\xff\xff"] + chop(big, 64 * 1024))
    assert not f.waiting and f._slen == 0     # resumed after about CONFIRM_LIMIT bytes
    assert sink.codes() == ["kafka.resync"]
    f.feed(request(2), 999, 999)
    assert sink.datas(REQUEST) == [big[4:], request(2)[4:]]

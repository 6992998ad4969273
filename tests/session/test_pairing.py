"""Pairing by correlation id, statuses and the raw SASL phase, on frames built by hand."""
import struct

import pytest

from dissector.model import (MALFORMED, NO_RESPONSE_EXPECTED, OK, ORPHAN_RESPONSE, REQUEST,
                             RESPONSE, UNANSWERED, Connection, Frame)
from dissector.session import Session, produce_acks


def req(api_key, version, corr, client_id=b"cli", body=b""):
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body


def resp(corr, body=b""):
    return struct.pack(">i", corr) + body


class Harness:
    def __init__(self):
        self.conn = Connection(1, "10.0.0.1", 50000, "10.0.0.2", 9092)
        self.exchanges = []
        self.issues = []
        self.session = Session(self.conn, self.exchanges.append, self.issues.append)
        self.offset = {REQUEST: 0, RESPONSE: 0}
        self.packet = 0
        self.ts = 1_000_000_000_000

    def send(self, direction, data, dt_ns=1_000_000):
        self.packet += 1
        self.ts += dt_ns
        f = Frame(self.conn, direction, self.offset[direction], len(data) + 4, data,
                  self.packet, self.packet, self.ts, self.ts + 10)
        self.offset[direction] += len(data) + 4
        self.session.frame(f)
        return f


def produce_v3(acks, corr):
    body = struct.pack(">h", -1) + struct.pack(">hi", acks, 1000) + struct.pack(">i", 0)
    return req(0, 3, corr, body=body)


def test_in_order_pairing_and_latency():
    h = Harness()
    q = h.send(REQUEST, req(3, 1, 7))
    r = h.send(RESPONSE, resp(7), dt_ns=5_000_000)
    (ex,) = h.exchanges
    assert (ex.api_key, ex.api_version, ex.correlation_id, ex.client_id, ex.status) == (3, 1, 7, "cli", OK)
    assert ex.latency_ms == (r.first_ts - q.last_ts) / 1e6
    assert ex.total_ms == (r.last_ts - q.first_ts) / 1e6
    assert ex.latency_ms == pytest.approx(4.99999)


def test_reused_correlation_ids_pair_in_order():
    h = Harness()
    a = h.send(REQUEST, req(3, 1, 1))
    b = h.send(REQUEST, req(3, 1, 1))
    ra = h.send(RESPONSE, resp(1))
    rb = h.send(RESPONSE, resp(1))
    assert [(e.request, e.response) for e in h.exchanges] == [(a, ra), (b, rb)]


def test_acks0_passed_over_is_no_response_expected_but_paired_when_answered():
    h = Harness()
    h.send(REQUEST, produce_v3(0, 1))
    h.send(REQUEST, produce_v3(0, 2))
    h.send(RESPONSE, resp(2))                 # a broker that answers acks=0 anyway
    h.send(REQUEST, produce_v3(1, 3))
    h.session.close()
    assert [(e.correlation_id, e.status) for e in h.exchanges] == [
        (1, NO_RESPONSE_EXPECTED), (2, OK), (3, UNANSWERED)]


def test_orphan_response_and_unanswered():
    h = Harness()
    h.send(RESPONSE, resp(99))
    h.send(REQUEST, req(3, 1, 5))
    h.send(REQUEST, req(3, 1, 6))
    h.send(RESPONSE, resp(6))
    assert [(e.correlation_id, e.status) for e in h.exchanges] == [
        (99, ORPHAN_RESPONSE), (5, UNANSWERED), (6, OK)]


def test_garbage_request_header_is_malformed_with_issue():
    h = Harness()
    h.send(REQUEST, b"\x00\x03\x00")
    (ex,) = h.exchanges
    assert ex.status == MALFORMED
    assert ex.issues[0].code == "kafka.bad_request_header"
    assert ex.issues[0].connection_id == 1 and ex.issues[0].frame == 1


@pytest.mark.parametrize("version,prefix", [
    (0, b""), (2, b""), (3, struct.pack(">h", -1)), (3, struct.pack(">h", 3) + b"txn"),
    (9, b"\x00"), (9, b"\x04txn")])
def test_produce_acks_at_every_layout(version, prefix):
    data = req(0, version, 1) + prefix + struct.pack(">h", -1)
    body_offset = len(req(0, version, 1))
    assert produce_acks(data, body_offset, version) == -1


def test_raw_sasl_tokens_after_handshake_v0():
    h = Harness()
    h.send(REQUEST, req(17, 0, 1, body=struct.pack(">h", 5) + b"PLAIN"))
    h.send(RESPONSE, resp(1, struct.pack(">hi", 0, 1) + struct.pack(">h", 5) + b"PLAIN"))
    h.send(REQUEST, b"\x00user\x00secret")     # raw token: no Kafka header
    h.send(RESPONSE, b"")                       # raw empty reply
    h.send(REQUEST, req(3, 1, 2))
    h.send(RESPONSE, resp(2))
    assert [(e.api_key, e.raw_sasl, e.status) for e in h.exchanges] == [
        (17, False, OK), (None, True, OK), (3, False, OK)]


def test_plausible_response_needs_correlation_id_in_flight():
    h = Harness()
    h.send(REQUEST, req(3, 1, 42))
    assert h.session.plausible(RESPONSE, struct.pack(">ii", 8, 42), 0)
    assert not h.session.plausible(RESPONSE, struct.pack(">ii", 8, 41), 0)
    good = struct.pack(">i", 13) + req(3, 1, 1)
    assert h.session.plausible(REQUEST, good, 0)
    assert not h.session.plausible(REQUEST, struct.pack(">ihhi", 12, 999, 0, 1), 0)


def test_in_flight_requests_are_capped_by_count_and_bytes(monkeypatch):
    """Past the caps the oldest request is given up (unanswered, flagged), so a connection
    whose responses are never seen holds a bounded queue; a late answer to it is an orphan,
    while the requests still held pair as usual."""
    from dissector import session
    monkeypatch.setattr(session, "MAX_IN_FLIGHT", 5)
    monkeypatch.setattr(session, "MAX_IN_FLIGHT_BYTES", 3000)
    h = Harness()
    for corr in range(8):                          # 8 small requests: count cap 5
        h.send(REQUEST, req(3, 1, corr))
    assert [ex.correlation_id for ex in h.exchanges] == [0, 1, 2]
    assert all(ex.status == UNANSWERED and [i.code for i in ex.issues] == ["kafka.in_flight_limit"]
               for ex in h.exchanges)
    h.send(REQUEST, req(3, 1, 100, body=bytes(3000)))   # over the bytes cap alone: held alone
    assert [ex.correlation_id for ex in h.exchanges] == [0, 1, 2, 3, 4, 5, 6, 7]
    h.send(RESPONSE, resp(1))
    h.send(RESPONSE, resp(100))
    assert [(ex.correlation_id, ex.status) for ex in h.exchanges[8:]] == [
        (1, ORPHAN_RESPONSE), (100, OK)]


def test_acks0_produce_past_the_cap_is_not_flagged(monkeypatch):
    from dissector import session
    monkeypatch.setattr(session, "MAX_IN_FLIGHT", 2)
    h = Harness()
    for corr in range(4):
        h.send(REQUEST, produce_v3(0, corr))
    assert [(ex.correlation_id, ex.status, ex.issues) for ex in h.exchanges] == [
        (0, NO_RESPONSE_EXPECTED, []), (1, NO_RESPONSE_EXPECTED, [])]


class _Owing:
    """A request stream the broker acknowledged `owed` bytes of, `next` of them shown."""
    def __init__(self, owed, next=0):
        self.owed, self.next = owed, next

    def owes(self):
        return self.owed > self.next


@pytest.fixture(params=["compiled", "python"])
def pairing(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(Session, "frame", Session.py_frame)


def test_answers_before_their_requests_wait_while_the_request_stream_owes_bytes(pairing):
    h = Harness()
    stream = _Owing(owed=100)
    h.session.follow(stream)
    r5 = h.send(RESPONSE, resp(5))
    r6 = h.send(RESPONSE, resp(6))
    assert h.exchanges == []                   # the broker has requests the capture has not shown
    q5 = h.send(REQUEST, req(3, 1, 5))
    stream.next = 100                          # the bytes owed came
    q6 = h.send(REQUEST, req(3, 1, 6))
    h.send(RESPONSE, resp(7))                  # nothing owed: an orphan at once
    assert [(e.request, e.response, e.status) for e in h.exchanges] == [
        (q5, r5, OK), (q6, r6, OK), (None, h.exchanges[2].response, ORPHAN_RESPONSE)]


def test_an_answer_whose_request_never_comes_is_an_orphan_once_nothing_is_owed(pairing):
    h = Harness()
    stream = _Owing(owed=100)
    h.session.follow(stream)
    h.send(RESPONSE, resp(5))                  # its request was dropped by the capture
    h.send(RESPONSE, resp(6))
    stream.next = 100
    q6 = h.send(REQUEST, req(3, 1, 6))
    assert [(e.correlation_id, e.status) for e in h.exchanges] == [(5, ORPHAN_RESPONSE), (6, OK)]
    assert h.exchanges[1].request is q6


def test_answers_held_for_owed_requests_are_bounded_and_let_go_at_the_end(pairing):
    from dissector import session
    h = Harness()
    stream = _Owing(owed=1 << 20)               # an ack that claims far more than ever comes
    h.session.follow(stream)
    for corr in range(session.MAX_EARLY + 10):
        h.send(RESPONSE, resp(corr))
    assert len(h.exchanges) == 10 and {e.status for e in h.exchanges} == {ORPHAN_RESPONSE}
    h.session.close()
    assert [e.correlation_id for e in h.exchanges] == list(range(session.MAX_EARLY + 10))


def test_answers_held_for_owed_requests_are_bounded_by_bytes_too(pairing, monkeypatch):
    from dissector import session
    monkeypatch.setattr(session, "MAX_IN_FLIGHT_BYTES", 100)
    h = Harness()
    stream = _Owing(owed=1 << 20)
    h.session.follow(stream)
    for corr in range(5):
        h.send(RESPONSE, resp(corr, b"x" * 40))   # 44 bytes each: the third passes 100
    assert [e.correlation_id for e in h.exchanges] == [0, 1, 2]

"""The flow table stays bounded on hostile captures (issue 8): SYN floods, floods of tiny flows,
masses of flows awaiting `--port auto` detection. Never-data flows expire by capture time and
the table is capped (never-data flows evicted first), with one `tcp.flow_limit` Issue; the
exchanges of a real capture come out unchanged when a SYN flood is spliced into it."""
import gc
import random
import socket
import struct
import tracemalloc

import pytest
from hypothesis import given, strategies as st

from dissector import detect
from dissector.detect import BrokerSide
from dissector.pipeline import Dissector, dissect
from dissector.tcp import flows
from dissector.tcp.flows import FlowTable
from dissector.tcp.reassembly import ACK, FIN, RST, SYN
from tests.support import CAPTURES
from tests.tcp.fakes import PSH, RecordingSink, request, response

from .support import (REAL_PORTS, exchange_key, fuzz_settings, packets, run_syn_flood,
                      write_pcap)

B = b"\x0a\x00\x00\x02"
SECOND = 10**9


def _client(i):
    return struct.pack("!I", 0x0a400000 + (i >> 15)), 1024 + (i & 0x7FFF)


def _table(issues=None, classify=None, keep=True):
    """A FlowTable over recording sinks (kept in the returned list when `keep`)."""
    sinks = []

    def open_connection(conn):
        sink = RecordingSink(conn)
        if keep:
            sinks.append(sink)
        return sink
    t = FlowTable(classify or BrokerSide((9092,)), open_connection,
                  issue=None if issues is None else issues.append)
    return t, sinks


def _syn(t, i, ts, answered=False):
    ip, port = _client(i)
    t.add(2 * i + 1, ts, ip, B, port, 9092, 1000, 0, SYN, b"")
    if answered:
        t.add(2 * i + 2, ts, B, ip, 9092, port, 7000, 1001, SYN | ACK, b"")


def _traced(fn):
    """Memory `fn` leaves allocated (garbage cycles collected: what the table retains)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_syn_flood_memory_stops_growing(monkeypatch):
    """Half-open connections (SYN and SYN-ACK, never data) within one second of capture time:
    the table holds at most MAX_QUIET of them, so 4x more of them cost no more memory."""
    monkeypatch.setattr(flows, "MAX_QUIET", 512)
    t, _ = _table(keep=False)
    n = 2 * flows.MAX_QUIET
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            _syn(t, i, i, True)
        gc.collect()
        first = tracemalloc.get_traced_memory()[0] - base
        for i in range(n, 5 * n):
            _syn(t, i, i, True)
        gc.collect()
        more = tracemalloc.get_traced_memory()[0] - base - first
    finally:
        tracemalloc.stop()
    assert first > 1000 * flows.MAX_QUIET          # the flows really were held
    assert more < first / 10, (first, more)
    assert len(t._live) <= flows.MAX_QUIET and len(t._table) <= 2 * flows.MAX_QUIET
    assert t.evicted["quiet"] == 5 * n - flows.MAX_QUIET


def test_never_data_flows_expire_by_capture_time():
    """A slow SYN scan (one a second for an hour of capture time) never reaches the cap: flows
    that carry no data are forgotten after QUIET_NS, and expiry alone is no Issue."""
    issues = []
    t, _ = _table(issues, keep=False)
    window = flows.QUIET_NS // SECOND + 1
    most = 0
    for i in range(3600):
        _syn(t, i, i * SECOND, answered=i % 2 == 0)
        most = max(most, len(t._quiet))
    assert most <= window, most
    assert len(t._table) <= 2 * window
    t.flush()
    assert issues == []


def test_data_after_the_quiet_timeout_still_comes_out():
    """A client that connects and only speaks after the quiet timeout: its flow was forgotten,
    not kept lingering, so the request and its response still pair."""
    d = Dissector((9092,))
    c = b"\x0a\0\0\1"
    d.feed_segment(1, 0, c, B, 40000, 9092, 999, 0, SYN, b"")
    d.feed_segment(2, 1, B, c, 9092, 40000, 4999, 1000, SYN | ACK, b"")
    d.feed_segment(3, 2, c, B, 40000, 9092, 1000, 5000, ACK, b"")
    late = flows.QUIET_NS + 5 * SECOND
    req = request(7, api_key=18, version=0)
    d.feed_segment(4, late, c, B, 40000, 9092, 1000, 5000, ACK | PSH, req)
    d.feed_segment(5, late + 1000, B, c, 9092, 40000, 5000, 1000 + len(req), ACK | PSH,
                   response(7, b"\0\0\0\0\0\0"))
    d.finish()
    out = list(d.output)
    assert [(e.correlation_id, e.status) for e in out] == [(7, "ok")]


def test_floods_of_tiny_connections_are_capped(monkeypatch):
    """Connections that each carry one request are live flows: beyond MAX_LIVE the least
    recently active are closed early (as at the end of the capture) and summed up in one Issue."""
    monkeypatch.setattr(flows, "MAX_LIVE", 256)
    issues = []
    t, sinks = _table(issues)
    req = request(1)
    for i in range(2000):
        ip, port = _client(i)
        t.add(2 * i + 1, i, ip, B, port, 9092, 1000, 0, SYN, b"")
        t.add(2 * i + 2, i, ip, B, port, 9092, 1001, 0, ACK | PSH, req)
        assert len(t._live) <= 256
    t.flush()
    assert sum(len(s.frames) for s in sinks) == 2000      # every request was still framed
    assert t.evicted["live"] > 0
    assert [i.code for i in issues] == ["tcp.flow_limit"]
    assert f"closed {t.evicted['live']} idle connections" in issues[0].detail


def test_flows_awaiting_detection_are_bounded(monkeypatch):
    """`--port auto`: flows whose bytes never look like Kafka hold at most MAX_UNSURE_BYTES in
    all; a Kafka connection after them is still recognised."""
    monkeypatch.setattr(flows, "MAX_UNSURE", 32)
    monkeypatch.setattr(flows, "MAX_UNSURE_BYTES", 1 << 20)
    issues = []
    t, sinks = _table(issues, BrokerSide((), auto=True))
    junk = b"GET / HTTP/1.1\r\n" + bytes(20000)

    def flood():
        for i in range(300):
            ip, port = _client(i)
            for k in range(3):
                t.add(3 * i + k, i, ip, B, port, 8080, 1000 + k * len(junk), 0, ACK | PSH, junk)
            assert t._unsure_bytes <= 1 << 20
    grown = _traced(flood)
    assert grown < 4 << 20, grown                          # 18 MB of payload fed
    c, cport = b"\x0a\0\0\x09", 50000
    req = request(5, api_key=18, version=0)
    t.add(10_000, 400, c, B, cport, 19092, 1, 0, ACK | PSH, req)
    t.add(10_001, 401, B, c, 19092, cport, 1, 1 + len(req), ACK | PSH,
          response(5, b"\0\0\0\0\0\0"))
    t.flush()
    assert [bytes(f.data) for f in sinks[-1].frames] == [req[4:], response(5, b"\0\0\0\0\0\0")[4:]]
    assert t.evicted["unsure"] >= 300 - 32
    assert [i.code for i in issues] == ["tcp.flow_limit"]


def test_other_traffic_is_bounded_quietly(monkeypatch):
    """With fixed ports, flows on other ports can never become connections: beyond the caps
    they are forgotten without an Issue (nothing that could be Kafka was dropped)."""
    monkeypatch.setattr(flows, "MAX_UNSURE", 32)
    monkeypatch.setattr(flows, "MAX_QUIET", 32)
    issues = []
    t, _ = _table(issues)
    for i in range(500):
        ip, port = _client(i)
        t.add(2 * i, i, ip, B, port, 443, 1000, 0, SYN, b"")
        t.add(2 * i + 1, i, ip, B, port, 443, 1001, 0, ACK | PSH, bytes(1000))
    assert len(t._unsure) <= 32 and len(t._quiet) <= 32
    t.flush()
    assert issues == []


def test_port_detection_heads_are_bounded():
    bs = BrokerSide((), auto=True)
    for i in range(3 * detect.MAX_FLOWS):
        ip, port = _client(i)
        assert bs(ip, port, B, 8080, bytes(100)) is None
    assert len(bs._heads) <= detect.MAX_FLOWS
    assert sum(len(h) for h in bs._heads.values()) <= detect.MAX_BYTES
    assert bs.dropped >= 3 * detect.MAX_FLOWS - detect.MAX_BYTES // detect.HEAD_BYTES


# -- nothing lost ------------------------------------------------------------------------------

def _syn_packet(template, src, sport, dst, dport, flags):
    """An Ethernet/IPv4/TCP packet like `template` (a real SYN-less packet's headers) with new
    addresses, ports and flags and no payload (checksums are not checked by the dissector)."""
    b = bytearray(template[:14 + 20 + 20])
    b[14 + 2:14 + 4] = struct.pack("!H", 40)
    b[14 + 12:14 + 20] = src + dst
    b[34:38] = struct.pack("!HH", sport, dport)
    b[34 + 12] = 0x50
    b[34 + 13] = flags
    return bytes(b)


@pytest.mark.parametrize("name", ["librdkafka_produce_consume.pcap", "kafka_python.pcap"])
def test_a_syn_flood_spliced_into_a_real_capture_changes_no_exchange(tmp_path, monkeypatch, name):
    """40 half-open connections to the broker port between any two packets of a real capture,
    with the cap lowered so that evictions happen all the time (the capture's own connections'
    handshakes included): every exchange comes out as in the clean capture."""
    monkeypatch.setattr(flows, "MAX_QUIET", 64)
    path = CAPTURES / name
    clean = dissect(path, REAL_PORTS, level="bodies")
    full = sorted(repr(exchange_key(e)) for e in clean)
    assert full
    one = next(iter(clean.connections))
    broker = socket.inet_aton(one.broker_ip), one.broker_port
    pkts = packets(path)
    rnd = random.Random(8)
    out = []
    n = 0
    for ts, lt, data in pkts:
        for _ in range(40):
            ip, port = _client(n)
            n += 1
            out.append((ts, lt, _syn_packet(data, ip, port, *broker, SYN)))
            if rnd.random() < 0.5:
                out.append((ts, lt, _syn_packet(data, broker[0], broker[1], ip, port, SYN | ACK)))
        out.append((ts, lt, data))
    flooded = tmp_path / "flooded.pcap"
    flooded.write_bytes(write_pcap(out))
    run = dissect(flooded, REAL_PORTS, level="bodies")
    got = sorted(repr(exchange_key(e)) for e in run)
    assert run.errors == []
    assert got == full
    assert [i.code for i in run.issues].count("tcp.flow_limit") == 1


def test_syn_flood_rss_per_connection():
    """A fresh interpreter fed SYNs to the broker port through the pipeline: past the flow cap,
    what each further SYN adds is the connections table's row (the Connection, ~350 bytes), not
    the flow's state (~7.4 KB before the cap)."""
    result = run_syn_flood('{"per_connection": grown / 60_000}')
    assert result["per_connection"] < 1024, result


# -- the table's own bookkeeping under random traffic ------------------------------------------

def _check(t):
    quiet, unsure, live = t._quiet, t._unsure, t._live
    assert len(quiet) <= flows.MAX_QUIET and len(unsure) <= flows.MAX_UNSURE
    assert t._unsure_bytes == sum(f.pending_bytes for f in unsure)
    assert t._unsure_bytes <= flows.MAX_UNSURE_BYTES or len(unsure) == 1
    assert len(live) <= flows.MAX_LIVE + 1
    for f in quiet:
        assert f.state in (flows._PENDING, flows._LIVE) and f not in unsure
    for f in unsure:
        assert f.state == flows._PENDING and f.pending_bytes
    for f in live.values():
        assert f.state == flows._LIVE
        ends = [flows.direct_key(*f.key), flows.direct_key(f.key[1], f.key[0], f.key[3], f.key[2])]
        assert all((k in t.direct) == (f not in quiet) for k in ends)
    for (flow, _side) in t._table.values():
        assert flow.state != flows._CLOSED or flow in t._closed


@fuzz_settings(40)
@given(ops=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 1), st.sampled_from(
    [SYN, SYN | ACK, ACK, ACK | PSH, FIN | ACK, RST]), st.integers(0, 3000), st.integers(0, 3)),
    max_size=300), auto=st.booleans())
def test_random_traffic_keeps_the_books(monkeypatch, ops, auto):
    """Random segments over a few dozen tuples, on one broker port or `--port auto`, with tiny
    caps and timestamps jumping past the quiet timeout: no exception, and the table's counts,
    byte totals and `direct` entries stay consistent after every segment."""
    for name, value in (("MAX_QUIET", 4), ("MAX_UNSURE", 3), ("MAX_UNSURE_BYTES", 2000),
                        ("MAX_LIVE", 5), ("MAX_CLOSED", 6)):
        monkeypatch.setattr(flows, name, value)
    t, _ = _table([], BrokerSide(() if auto else (9092,), auto=auto))
    ts = 0
    seqs = {}
    for n, (who, side, flags, size, jump) in enumerate(ops):
        ts += (0, 1000, SECOND, flows.QUIET_NS)[jump]
        ip, port = _client(who)
        ends = (ip, B, port, 9092) if side == 0 else (B, ip, 9092, port)
        seq = seqs.get((who, side), 1000)
        payload = (request(n) + bytes(size))[:size] if not flags & (SYN | RST) else b""
        t.add(n + 1, ts, *ends, seq, 0, flags, payload)
        seqs[(who, side)] = seq + len(payload) + (1 if flags & (SYN | FIN) else 0)
        _check(t)
    t.flush()
    assert not t._live and not t._table and not t._quiet and not t._unsure


def test_peaks_say_when_a_cap_was_hit(monkeypatch):
    """FlowTable.peaks (what a parallel run's parent checks against the caps) count a flow past
    a cap before the cap sheds it: a table that hit the cap reports more than the cap."""
    monkeypatch.setattr(flows, "MAX_QUIET", 6)
    t, _ = _table(keep=False)
    for i in range(5):
        _syn(t, i, i)
    assert t.peaks[0] == 5 and t.evicted["quiet"] == 0
    for i in range(5, 9):
        _syn(t, i, i)
    assert t.peaks[0] == 7 and t.evicted["quiet"] == 3
    t.peaks = t.held()
    assert t.peaks[0] == 6
    monkeypatch.setattr(flows, "MAX_CLOSED", 3)
    for i in range(9, 14):   # refused: closed, lingering
        _syn(t, i, i)
        ip, port = _client(i)
        t.add(100 + i, i, B, ip, 9092, port, 7000, 1001, RST | ACK, b"")
    assert t.peaks[2] == 4 and t.evicted["closed"] == 2

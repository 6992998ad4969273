"""FlowTable: connection identity, which side is the broker, lifetime."""
import ipaddress

from dissector.model import REQUEST, RESPONSE
from dissector.tcp.flows import FlowTable
from dissector.tcp.reassembly import ACK, FIN, RST, SYN

from tests.tcp.fakes import PSH, RecordingSink, Wire, request, response
from tests.tcp.test_reassembly import Harness, by_port

A = (b"\xc0\xa8\x01\x05", 51000)
B = (b"\xc0\xa8\x01\x06", 9092)


def test_connection_endpoints_and_directions():
    h = Harness()
    w = Wire(h.table, client=A, broker=B)
    w.handshake()
    w.send(w.segment(0, request(1)))
    w.send(w.segment(1, response(1)))
    (conn,) = [s.conn for s in h.sinks]
    assert (conn.connection_id, conn.client_ip, conn.client_port, conn.broker_ip,
            conn.broker_port) == (1, "192.168.1.5", 51000, "192.168.1.6", 9092)
    assert conn.first_packet == 1 and conn.last_ts > conn.first_ts
    assert [f.direction for f in h.sink.frames] == [REQUEST, RESPONSE]
    assert all(f.connection is conn for f in h.sink.frames)


def test_ipv6_addresses_are_text():
    c = (ipaddress.ip_address("2001:db8::1").packed, 40000)
    b = (ipaddress.ip_address("2001:db8::2").packed, 9092)
    h = Harness()
    w = Wire(h.table, client=c, broker=b)
    w.send(w.segment(0, request(1)))
    assert (h.sink.conn.client_ip, h.sink.conn.broker_ip) == ("2001:db8::1", "2001:db8::2")


def test_broker_side_from_classify_when_the_broker_speaks_first():
    h = Harness()
    w = Wire(h.table, client=A, broker=B)
    w.send(w.segment(1, response(4)))       # first packet seen is from the broker
    w.send(w.segment(0, request(5)))
    w.send(w.segment(1, response(5)))
    h.table.flush()                         # the last resynced frame waits for confirmation
    conn = h.sink.conn
    assert (conn.broker_port, conn.client_port) == (9092, 51000)
    # response 4 answers a request from before the capture: skipped by the resync
    assert h.sink.datas(REQUEST) == [request(5)[4:]]
    assert h.sink.datas(RESPONSE) == [response(5)[4:]]
    assert [f.direction for f in h.sink.frames] == [REQUEST, RESPONSE]


def test_unclassified_packets_are_kept_and_replayed():
    calls = []

    def late(src, sport, dst, dport, payload):
        if not payload:
            return None                        # a SYN: the port says nothing here
        calls.append(payload)
        return 0 if len(calls) == 3 else None  # decides on the third payload

    sinks = []
    table = FlowTable(late, lambda c: sinks.append(RecordingSink(c)) or sinks[-1])
    w = Wire(table, client=A, broker=(B[0], 7777))
    w.handshake()
    reqs = [request(i, b"p" * i) for i in range(1, 6)]
    for r in reqs:
        w.send(w.segment(0, r))
    (sink,) = sinks
    assert sink.datas(REQUEST) == [r[4:] for r in reqs]
    assert len(calls) == 3                       # not called again once decided
    assert sink.conn.first_packet == 1           # the SYN, not the packet that decided
    assert sink.issues == []


def test_a_flow_that_never_classifies_is_dropped():
    opened = []
    table = FlowTable(lambda *a: None, opened.append)
    w = Wire(table)
    w.handshake()
    for i in range(2000):
        w.send(w.segment(0, b"GET / HTTP/1.1\r\n" * 50))
    (flow, _side) = next(iter(table._table.values()))
    assert flow.pending_bytes <= 64 << 10          # bounded while waiting
    w.close()
    table.flush()
    assert opened == []


def test_connection_ids_follow_the_order_connections_open():
    h = Harness()
    wires = [Wire(h.table, client=(A[0], 50000 + i), broker=B) for i in range(3)]
    for w in wires:
        w.handshake()
    for w in reversed(wires):                  # the last to open speaks first
        w.send(w.segment(0, request(1)))
    assert [s.conn.connection_id for s in h.sinks] == [1, 2, 3]
    assert [s.conn.client_port for s in h.sinks] == [50000, 50001, 50002]
    assert [len(s.frames) for s in h.sinks] == [1, 1, 1]


def test_reused_tuple_after_fin_is_a_new_connection():
    h = Harness()
    w = Wire(h.table, client=A, broker=B, cisn=1000, bisn=5000)
    w.handshake()
    w.send(w.segment(0, request(1)))
    w.send(w.segment(1, response(1)))
    w.close()
    w2 = Wire(h.table, client=A, broker=B, cisn=9_000_000, bisn=77)
    w2.pkt, w2.ts = w.pkt, w.ts
    w2.handshake()
    w2.send(w2.segment(0, request(1, b"second")))
    w2.send(w2.segment(1, response(1, b"second")))
    first, second = h.sinks
    assert (first.conn.connection_id, second.conn.connection_id) == (1, 2)
    assert first.closed == 1 and second.closed == 0
    assert second.datas(REQUEST) == [request(1, b"second")[4:]]
    assert second.frames[0].stream_offset == 0
    assert first.issues == [] and second.issues == []


def test_reused_tuple_after_one_fin_whose_new_syn_was_not_captured_is_a_new_connection():
    """A SYN-ACK that answers another SYN than the one this flow saw starts a new connection,
    also where the flow never saw the broker's first SYN-ACK. Only the answer to the SYN seen
    stays on a flow past a FIN (a capture point that delays the broker shows the client's
    SYN, requests and close before the broker's SYN-ACK)."""
    h = Harness()
    w = Wire(h.table, client=A, broker=B, cisn=1000, bisn=5000)
    w.send(w.segment(0, flags=SYN, ack=0))
    w.segment(1, flags=SYN | ACK)                # not captured
    w.send(w.segment(0, flags=ACK))
    w.send(w.segment(0, request(1)))
    w.send(w.segment(1, response(1)))
    w.send(w.segment(0, flags=FIN | ACK))        # the client's FIN; the broker's never captured
    w2 = Wire(h.table, client=A, broker=B, cisn=9_000_000, bisn=77)
    w2.pkt, w2.ts = w.pkt, w.ts
    w2.segment(0, flags=SYN, ack=0)              # not captured
    w2.send(w2.segment(1, flags=SYN | ACK))
    w2.send(w2.segment(0, flags=ACK))
    w2.send(w2.segment(0, request(1, b"second")))
    assert [s.conn.connection_id for s in h.sinks] == [1, 2]
    assert h.sinks[1].datas(REQUEST) == [request(1, b"second")[4:]]


def test_reused_tuple_without_fin_seen_but_far_isn():
    h = Harness()
    w = Wire(h.table, client=A, broker=B, cisn=1000)
    w.send(w.segment(0, request(1)))             # mid-stream, the end never captured
    w2 = Wire(h.table, client=A, broker=B, cisn=1000 + (1 << 30))
    w2.pkt, w2.ts = w.pkt, w.ts
    w2.handshake()
    w2.send(w2.segment(0, request(2)))
    assert [s.conn.connection_id for s in h.sinks] == [1, 2]
    assert h.sinks[1].datas(REQUEST) == [request(2)[4:]]


def test_retransmitted_syn_is_the_same_connection():
    h = Harness()
    w = Wire(h.table)
    syn = w.segment(0, flags=SYN, ack=0)
    w.send(syn)
    w.send(syn)
    w.send(w.segment(1, flags=SYN | ACK))
    w.send(w.segment(0, flags=ACK))
    w.send(w.segment(0, request(1)))
    w.send(syn)                                   # very late duplicate
    w.send(w.segment(0, request(2)))
    assert h.sink.datas(REQUEST) == [request(1)[4:], request(2)[4:]]
    assert h.sink.issues == []


def test_late_packets_after_close_are_ignored():
    h = Harness()
    w = Wire(h.table)
    w.handshake()
    late = w.segment(0, request(1))
    w.send(late)
    w.close()
    w.send(late)                                  # a retransmission after the close
    w.send(w.segment(0, flags=FIN | ACK, seq=w.seq[0] - 1))
    assert len(h.sinks) == 1 and h.sink.closed == 1 and h.sink.issues == []


def test_rst_on_an_unknown_flow_is_ignored():
    opened = []
    table = FlowTable(by_port, opened.append)
    w = Wire(table)
    w.send(w.segment(1, flags=RST))
    table.flush()
    assert opened == [] and table._table == {}


def test_flush_closes_every_connection_once():
    h = Harness()
    wires = [Wire(h.table, client=(A[0], 50000 + i), broker=B) for i in range(4)]
    for w in wires:
        w.handshake()
        w.send(w.segment(0, request(1)))
    wires[0].close()
    h.table.flush()
    assert [s.closed for s in h.sinks] == [1, 1, 1, 1]


def test_expire_closes_idle_connections():
    h = Harness()
    idle = Wire(h.table, client=(A[0], 50000), broker=B)
    busy = Wire(h.table, client=(A[0], 50001), broker=B)
    idle.send(idle.segment(0, request(1) + request(2)[:5]))
    busy.ts = idle.ts + 60 * 10**9
    busy.send(busy.segment(0, request(1)))
    h.table.expire(busy.ts + 1, 30 * 10**9)
    first, second = h.sinks
    assert (first.closed, second.closed) == (1, 0)
    assert first.codes() == ["kafka.truncated_frame"]
    busy.send(busy.segment(0, request(2)))
    assert len(second.frames) == 2


def test_closed_tuples_are_forgotten_after_a_while():
    h = Harness()
    for i in range(50):
        w = Wire(h.table, client=(A[0], 40000 + i), broker=B)
        w.ts += i * 10**9
        w.handshake()
        w.send(w.segment(0, request(1)))
        w.close()
    w = Wire(h.table, client=(A[0], 1), broker=B)
    w.ts += 10**12
    w.send(w.segment(0, request(1)))
    assert len(h.table._table) == 2               # only the last flow's two directions


def test_fin_then_data_from_the_other_side_keeps_the_connection_open():
    h = Harness()
    w = Wire(h.table)
    w.handshake()
    w.send(w.segment(0, request(1), flags=ACK | PSH | FIN))   # half-close after the request
    w.send(w.segment(1, response(1)))
    assert h.sink.closed == 0
    w.send(w.segment(1, flags=FIN | ACK))
    assert h.sink.closed == 1
    assert [f.direction for f in h.sink.frames] == [REQUEST, RESPONSE]


def test_the_handshake_names_the_client_over_a_wrong_guess():
    """A content-based classifier can mistake an early response for a request (a response with a
    small correlation id reads like a Produce request header); the SYN sender is the client."""
    sinks = []
    table = FlowTable(lambda s, sp, d, dp, p: 0 if p else None,  # "src is the client", wrongly
                      lambda c: sinks.append(RecordingSink(c)) or sinks[-1])
    w = Wire(table, client=A, broker=(B[0], 7777))
    w.handshake()
    w.send(w.segment(1, response(1)))        # the broker speaks first in this capture
    w.send(w.segment(0, request(2)))
    (sink,) = sinks
    assert (sink.conn.client_port, sink.conn.broker_port) == (51000, 7777)
    assert sink.datas(REQUEST) == [request(2)[4:]]

"""Connections that carry no data make no framers and no TLS fronts until they do (tcp.flows:
_Unborn), and end as they would have with them: nothing reported. A hole before any data is
reported as it was with them (these tests but the first pass with the fronts made at once)."""
import pytest

from dissector.budget import Budget
from dissector.framing import Framer
from dissector.model import REQUEST, RESPONSE, Connection
from dissector.tables import issue_row
from dissector.tcp import flows
from dissector.tcp.reassembly import ACK, FIN, RST, SYN
from dissector.tls.layer import TlsLayer

from tests.tcp.fakes import BROKER, Wire, request, response
from tests.tcp.test_reassembly import Harness

CLIENT_IP = b"\x0a\x00\x00\x01"


@pytest.fixture
def made(monkeypatch):
    """The framers the flow table makes."""
    framers = []

    def framer(*args, **kwargs):
        framers.append(Framer(*args, **kwargs))
        return framers[-1]
    monkeypatch.setattr(flows, "Framer", framer)
    return framers


def test_without_data_no_framers_are_made(made):
    h = Harness(tls=TlsLayer())
    refused = Wire(h.table, client=(CLIENT_IP, 40001))
    refused.send(refused.segment(0, flags=SYN, ack=0))
    refused.send(refused.segment(1, flags=RST | ACK))
    probed = Wire(h.table, client=(CLIENT_IP, 40002))
    probed.handshake()
    probed.close()
    flood = Wire(h.table, client=(CLIENT_IP, 40003))
    flood.send(flood.segment(0, flags=SYN, ack=0))
    h.table.flush()
    assert made == []
    assert [s.closed for s in h.sinks] == [1, 1, 1]
    assert [s.issues for s in h.sinks] == [[], [], []]

    spoken = Wire(h.table, client=(CLIENT_IP, 40004))
    spoken.handshake()   # its last ACK goes to handlers made before the fronts
    spoken.send(spoken.segment(0, request(7)))
    spoken.send(spoken.segment(1, response(7)))
    spoken.close()
    assert len(made) == 2
    sink = h.sinks[-1]
    assert sink.datas(REQUEST) == [request(7)[4:]] and sink.datas(RESPONSE) == [response(7)[4:]]
    assert sink.issues == [] and sink.closed == 1


@pytest.mark.parametrize("tls", [False, True])
def test_a_fresh_front_ends_silently(tls):
    # what an unborn front's end (nothing at all) stands for
    conn = Connection(1, "10.0.0.1", 40000, "10.0.0.2", 9092, first_ts=5, first_packet=1)
    sink_issues, budget = [], Budget()
    sink = type("Sink", (), {"issue": lambda self, i: sink_issues.append(i),
                             "frame": lambda self, f: pytest.fail("a frame"),
                             "plausible": lambda self, *a: False, "close": lambda self: None})()
    layer = TlsLayer()
    pair = layer.pair(conn, sink, budget) if tls else None
    fronts = []
    for d in (REQUEST, RESPONSE):
        framer = Framer(conn, d, sink, budget=budget)
        fronts.append(framer if pair is None else pair.front(d, framer))
    for front in fronts:
        assert front.buffered() == 0 and not front.waiting
        front.finish(9)
    assert sink_issues == [] and conn.gaps == [] and conn.tls is None
    assert budget.used == 0 and layer.connections == 0


@pytest.mark.parametrize("tls", [False, True])
def test_a_hole_before_any_data(tls):
    h = Harness(tls=TlsLayer() if tls else None)
    w = Wire(h.table, client=(CLIENT_IP, 40005), broker=BROKER)
    w.handshake()
    # the broker acknowledges 100 bytes of the client's that the capture never saw
    w.seq[0] += 100
    w.send(w.segment(1, flags=ACK))
    sink = h.sink
    assert sink.codes() == []   # they may still come (a capture point that delays the client)
    past = []
    for corr in (1, 2):   # the framer finds the frames again after the hole
        past.append(w.send(w.segment(0, request(corr))))
        w.send(w.segment(1, response(corr)))
    # data after them came first: the capture dropped them
    assert sink.codes()[0] == "tcp.gap"
    assert sink.issues[0].detail == "100 bytes missing from the request stream at offset 0"
    w.close()
    assert sink.conn.gaps == past[:1]   # (a TLS front hands the hole on once it has decided)
    assert sink.datas(REQUEST)[-1] == request(2)[4:]
    assert sink.datas(RESPONSE)[-1] == response(2)[4:]
    assert sink.closed == 1


def test_a_fin_past_the_data_seen_is_a_hole():
    h = Harness(tls=TlsLayer())
    w = Wire(h.table, client=(CLIENT_IP, 40006), broker=BROKER)
    w.handshake()
    w.seq[0] += 40   # the client's 40 bytes were not captured, its FIN was
    w.send(w.segment(0, flags=FIN | ACK))
    acked = w.send(w.segment(1, flags=FIN | ACK))   # the broker acknowledges them, and the FIN
    w.send(w.segment(0, flags=ACK))
    sink = h.sink
    assert sink.codes() == ["tcp.gap"] and sink.conn.gaps == [acked]
    assert sink.issues[0].detail == "40 bytes missing from the request stream at offset 0"
    assert sink.closed == 1


def _streams(table):
    """Each live connection's reassemblers' state and its last packet and time."""
    return [(flow.last_pkt, flow.conn.last_ts,
             [(r.anchor, r.base, r.next, r.owed) for r in flow.rs])
            for flow in table._live.values()]


@pytest.mark.parametrize("ack", ["handshake", "old", "ahead", "far"])
def test_an_ack_before_any_data_makes_no_handlers_and_does_what_they_would(ack, monkeypatch):
    """The handshake's last ACK comes before the first data, which makes the handlers anew
    (_birth): flows._ack_before_data notes it as py_handler would, handlers unmade."""
    def fed(table):
        w = Wire(table)
        w.send(w.segment(0, flags=SYN, ack=0))
        w.send(w.segment(1, flags=SYN | ACK))
        offset = {"handshake": 0, "old": -1, "ahead": 300, "far": 1 << 30}[ack]
        w.send(w.segment(0, flags=ACK, ack=w.seq[1] + offset))
        return w
    h = Harness()
    w = fed(h.table)
    (flow,) = h.table._live.values()
    assert flow.handlers is None
    made = Harness()
    monkeypatch.setattr(flows, "_ack_before_data",   # what add did before: made them
                        lambda flow, side, *seg: made.table._handlers(flow)[side](
                            seg[0], seg[1], 0, seg[2], seg[3], b""))
    w_made = fed(made.table)
    assert _streams(h.table) == _streams(made.table)
    for wire, harness in ((w, h), (w_made, made)):
        wire.send(wire.segment(0, request(1)))
        wire.send(wire.segment(1, response(1)))
        wire.close()
    def seen(sink):
        return ([(f.direction, f.stream_offset, f.length, bytes(f.data), f.first_packet,
                  f.last_packet) for f in sink.frames], [issue_row(i) for i in sink.issues])
    assert seen(h.sink) == seen(made.sink)
    assert seen(h.sink)[0]   # the exchange came through

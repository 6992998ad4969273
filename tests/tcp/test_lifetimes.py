"""What a connection leaves behind once closed, and Dissector.expire_requests over the open ones."""
import gc
import weakref

import pytest

from dissector.model import UNANSWERED
from dissector.pipeline import Dissector
from dissector.tcp.reassembly import ACK, FIN, SYN

from tests.fuzz.support import REAL, REAL_PORTS
from tests.tcp.fakes import PSH, request


class _Tracking(Dissector):
    """Keeps a weak reference to every session it opens."""

    def __init__(self, *args, **kwargs):
        self.opened = []
        super().__init__(*args, **kwargs)

    def _open(self, connection):
        session = super()._open(connection)
        self.opened.append(weakref.ref(session))
        return session


@pytest.mark.parametrize("level", ["headers", "records"])
def test_closed_connections_are_freed_without_the_cyclic_collector(level):
    # a reference cycle left by a closed connection would keep its session, framers and
    # reassemblers alive until the cyclic collector runs (a cost on captures of many connections)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for path in REAL:
            d = _Tracking(REAL_PORTS, level=level)
            exchanges = list(d.feed_file(path))
            d.finish()
            exchanges.extend(d.output)
            d.output.clear()
            assert exchanges and d.opened
            assert [r for r in d.opened if r() is not None] == [], path
    finally:
        if was_enabled:
            gc.enable()


C = (b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02")


def _feed(d, pkt, ts, sport, seq, ack, flags, payload=b"", reply=False):
    src, dst = C if not reply else C[::-1]
    ports = (sport, 9092) if not reply else (9092, sport)
    d.feed_segment(pkt, ts, src, dst, *ports, seq, ack, flags, payload)


def _connection_with_a_request(d, pkt, sport, corr):
    """Handshake and one request the broker does not answer; returns the next packet number."""
    _feed(d, pkt, pkt, sport, 100, 0, SYN)
    _feed(d, pkt + 1, pkt + 1, sport, 500, 101, SYN | ACK, reply=True)
    _feed(d, pkt + 2, pkt + 2, sport, 101, 501, ACK)
    _feed(d, pkt + 3, pkt + 3, sport, 101, 501, ACK | PSH, request(corr))
    return pkt + 4


def test_expire_requests_visits_the_open_connections_in_the_order_they_opened():
    d = Dissector((9092,))
    pkt = 1
    for sport, corr in ((41000, 7), (41001, 8), (41002, 9)):
        pkt = _connection_with_a_request(d, pkt, sport, corr)
    # the second connection ends (both FINs): its request is reported unanswered then
    n = len(request(8))
    _feed(d, pkt, pkt, 41001, 101 + n, 501, FIN | ACK)
    _feed(d, pkt + 1, pkt + 1, 41001, 501, 102 + n, FIN | ACK, reply=True)
    assert [(e.correlation_id, e.status) for e in d.output] == [(8, UNANSWERED)]
    d.output.clear()
    d.expire_requests(now_ns=pkt + 2, timeout_ns=pkt + 3)   # nothing that old yet
    assert not d.output
    d.expire_requests(now_ns=1000, timeout_ns=10)
    assert [(e.correlation_id, e.status) for e in d.output] == [(7, UNANSWERED), (9, UNANSWERED)]
    assert [e.connection.connection_id for e in d.output] == [1, 3]

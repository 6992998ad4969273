"""Deciding TLS or plaintext per connection: a plaintext connection joined mid-stream (as a live
capture joins every connection) is handed on at once, not held until enough bytes prove it is
not TLS; a TLS one joined mid-stream is never framed as Kafka."""
from dissector.capture.files import read_packets
from dissector.pipeline import Dissector

from tests.support import CAPTURES
from tests.tls.conftest import TLS_PORT


def _emitted_before_the_end(packets, ports, **kw):
    d = Dissector(ports, level="bodies", **kw)
    early = 0
    for no, ts, linktype, data in packets:
        d.feed(no, ts, linktype, data)
        early += len(d.output)
        d.output.clear()
    d.finish()
    return early, early + len(d.output), d


def test_plaintext_joined_mid_stream_is_not_held_back():
    packets = list(read_packets(CAPTURES / "kafka_python.pcap"))
    whole_early, whole, _ = _emitted_before_the_end(packets, (9092,))
    # no handshake seen: every connection that was open is joined mid-stream
    early, total, d = _emitted_before_the_end(packets[12:], (9092,))
    assert total >= whole - 4 and early >= total - (whole - whole_early) - 2
    assert d.tls.connections == 0


def test_tls_joined_mid_stream_is_never_kafka(make_tls):
    cap, _keys = make_tls("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    packets = list(read_packets(cap))
    for start in (4, 9, 15, 30):
        early, total, d = _emitted_before_the_end(packets[start:], (TLS_PORT,))
        assert total == 0 and d.tls.connections > 0
        assert {i.code for i in d.issues} <= {"tls.no_keys", "tls.resync"}

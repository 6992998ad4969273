"""Real packets end to end: scapy builds Ethernet/IP/TCP packets carrying requests that kafka-python
encodes, dissector.capture.layers.tcp_segment takes them apart, the FlowTable frames them.

The expected frames are kafka-python's own encodings, one per request, and the resync uses the
project's real request plausibility check."""
import random

import pytest

from dissector.capture.layers import LT_ETHERNET, tcp_segment
from dissector.model import REQUEST, RESPONSE
from dissector.protocol.headers import plausible_request
from dissector.tcp.flows import FlowTable

from tests.support import require_module
from tests.tcp.fakes import RecordingSink, chop, request, response

MSS = 1448

# kafka-python loads its schemas through deprecated importlib.resources calls
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


class RealPlausibility(RecordingSink):
    def plausible(self, direction, data, pos):
        if direction == REQUEST:
            if len(data) < pos + 4:
                return False
            size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            return plausible_request(data, pos + 4, size)
        return super().plausible(direction, data, pos)


def client_requests(n=30, seed=3):
    """`n` requests as kafka-python puts them on the wire: (correlation id, frame bytes)."""
    require_module("kafka")
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    rng = random.Random(seed)
    proto = KafkaProtocol(client_id="wire-test")
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            req = ApiVersionsRequest(version=3, client_software_name="t",
                                     client_software_version="1")
        elif kind == 1:
            req = MetadataRequest(version=1, topics=None)
        else:
            b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
            for j in range(rng.randint(1, 40)):
                b.append(timestamp=None, key=b"k%d" % j, value=rng.randbytes(rng.randint(0, 900)))
            b.close()
            t = ProduceRequest.TopicProduceData
            req = ProduceRequest(version=7, transactional_id=None, acks=-1, timeout_ms=1000,
                                 topic_data=[t(name="topic", partition_data=[
                                     t.PartitionProduceData(index=0, records=bytes(b.buffer()))])])
        corr = proto.send_request(req)
        out.append((corr, bytes(proto.send_bytes())))
    return out


def packets(scapy, stream_pieces, *, v6=False, vlan=False, isn=100, bisn=900, reply=None):
    """Ethernet frames of a connection: handshake, client data pieces (offset, bytes), replies."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Dot1Q, Ether

    ip_c = IPv6(src="fd00::1", dst="fd00::2") if v6 else IP(src="10.1.1.1", dst="10.1.1.2")
    ip_b = IPv6(src="fd00::2", dst="fd00::1") if v6 else IP(src="10.1.1.2", dst="10.1.1.1")
    eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
    if vlan:
        eth = eth / Dot1Q(vlan=12)
    c, b = 43210, 9092
    out = [eth / ip_c / TCP(sport=c, dport=b, flags="S", seq=isn),
           eth / ip_b / TCP(sport=b, dport=c, flags="SA", seq=bisn, ack=isn + 1),
           eth / ip_c / TCP(sport=c, dport=b, flags="A", seq=isn + 1, ack=bisn + 1)]
    for off, data in stream_pieces:
        out.append(eth / ip_c / TCP(sport=c, dport=b, flags="PA", seq=(isn + 1 + off) & 0xFFFFFFFF,
                                    ack=bisn + 1) / data)
    if reply is not None:
        out.append(eth / ip_b / TCP(sport=b, dport=c, flags="PA", seq=bisn + 1,
                                    ack=(isn + 1 + reply[0]) & 0xFFFFFFFF) / reply[1])
    return [bytes(p) for p in out]


def run(raw_packets, sink_class=RecordingSink):
    sinks = []
    table = FlowTable(lambda s, sp, d, dp, p: 0 if dp == 9092 else 1 if sp == 9092 else None,
                      lambda conn: sinks.append(sink_class(conn)) or sinks[-1])
    for i, raw in enumerate(raw_packets, 1):
        seg = tcp_segment(LT_ETHERNET, raw)
        assert isinstance(seg, tuple)
        table.add(i, i * 1000, *seg)
    table.flush()
    (sink,) = sinks
    return sink


def pieces_of(stream):
    return [(i * MSS, p) for i, p in enumerate(chop(stream, MSS))]


@pytest.fixture(scope="module")
def reqs():
    return client_requests()


@pytest.fixture(scope="module")
def scapy():
    return require_module("scapy")


@pytest.mark.parametrize("v6,vlan", [(False, False), (True, False), (False, True)])
def test_reordered_retransmitted_client_stream(scapy, reqs, v6, vlan):
    stream = b"".join(f for _, f in reqs)
    pieces = pieces_of(stream)
    rng = random.Random(5)
    noisy = []
    for i, p in enumerate(pieces):
        noisy.append(p)
        if rng.random() < 0.1:
            noisy.append(pieces[rng.randrange(i + 1)])   # retransmission
    for i in range(0, len(noisy) - 1, 7):
        noisy[i], noisy[i + 1] = noisy[i + 1], noisy[i]  # local reordering
    sink = run(packets(scapy, noisy, v6=v6, vlan=vlan))
    assert sink.datas(REQUEST) == [f[4:] for _, f in reqs]
    assert sink.issues == []
    assert sink.conn.client_ip == ("fd00::1" if v6 else "10.1.1.1")


def test_ethernet_padding_does_not_enter_the_stream(scapy):
    frame = request(1)
    raw = packets(scapy, [(0, frame[:3]), (3, frame[3:])])
    # Ethernet pads frames to 60 bytes; the IP length says where the TCP payload ends
    padded = [r + b"\xee" * (60 - len(r)) if len(r) < 60 else r for r in raw]
    assert padded != raw
    sink = run(padded)
    assert sink.datas(REQUEST) == [frame[4:]]
    assert sink.issues == []


def test_sequence_wrap_with_real_packets(scapy, reqs):
    stream = b"".join(f for _, f in reqs)
    isn = (1 << 32) - len(stream) // 2
    sink = run(packets(scapy, pieces_of(stream), isn=isn))
    assert sink.datas(REQUEST) == [f[4:] for _, f in reqs]
    assert sink.issues == []


def test_capture_drops_and_midstream_start_with_real_plausibility(scapy, reqs):
    """The capture starts mid-stream and misses two segments later; the broker's ack covers the
    whole stream. Every request the capture holds in full comes out."""
    stream = b"".join(f for _, f in reqs)
    pieces = pieces_of(stream)
    lost = {0, 1, 2, len(pieces) // 3, 2 * len(pieces) // 3}
    kept = [p for i, p in enumerate(pieces) if i not in lost]
    raw = packets(scapy, kept, reply=(len(stream), response(reqs[-1][0])))
    sink = run(raw[3:], RealPlausibility)   # no handshake either
    offsets = [sum(len(f) for _, f in reqs[:i]) for i in range(len(reqs))]
    held = [(o, o + len(f)) for o, (_, f) in zip(offsets, reqs)]
    missing = [(i * MSS, (i + 1) * MSS) for i in lost]
    whole = [f[4:] for (s, e), (_, f) in zip(held, reqs)
             if not any(a < e and s < b for a, b in missing)]
    got = sink.datas(REQUEST)
    assert [g for g in got if g in whole] == whole
    codes = sink.codes()
    assert codes.count("tcp.gap") == 2 and "kafka.resync" in codes
    assert sink.datas(RESPONSE) == [response(reqs[-1][0])[4:]]

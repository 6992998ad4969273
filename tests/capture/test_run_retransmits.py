"""A retransmission of the last segment of a run (the middle segments of a frame, taken without
their handler calls: tcp.batch) is checked against that segment as it was first seen, at every
level (the headers level only counts a run's segments): a changed byte is a
`tcp.overlap_conflict`, an identical copy is nothing; as packet by packet (no runs)."""
import struct

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from dissector.pipeline import dissect
from tests.capture import build
from tests.support import feed_packets

CLIENT, BROKER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)


def _packet(side, seq, ack, flags, payload=b""):
    (src, sport), (dst, dport) = (CLIENT, BROKER) if side == 0 else (BROKER, CLIENT)
    return bytes(Ether() / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport, seq=seq, ack=ack,
                                                      flags=flags) / Raw(payload))


def _capture(tmp_path, change):
    """A Metadata v1 request of 5 segments (the middle ones a run) whose fourth is sent again
    right after it, with byte 100 of it XORed with `change`; then the response."""
    body = bytes(range(256)) * 20
    msg = struct.pack(">hhih", 3, 1, 7, 4) + b"test" + body
    request = struct.pack(">i", len(msg)) + msg
    response = struct.pack(">ii", 12, 7) + bytes(8)
    c, b = 1000, 5000
    pkts = [_packet(0, c, 0, "S"), _packet(1, b, c + 1, "SA"), _packet(0, c + 1, b + 1, "A")]
    cuts = [0, 1200, 2400, 3600, 4800, len(request)]
    segs = [(c + 1 + a, request[a:e]) for a, e in zip(cuts, cuts[1:])]
    for i, (seq, data) in enumerate(segs):
        pkts.append(_packet(0, seq, b + 1, "A", data))
        if i == 3:
            seq2, again = segs[3]
            again = bytearray(again)
            again[100] ^= change
            pkts.append(_packet(0, seq2, b + 1, "A", bytes(again)))
    pkts.append(_packet(1, b + 1, c + 1 + len(request), "PA", response))
    path = tmp_path / "retransmit.pcap"
    path.write_bytes(build.pcap([(1, i, p) for i, p in enumerate(pkts)]))
    return path


def _conflicts(issues):
    return [(i.code, i.stream_offset) for i in issues if i.code.startswith("tcp.")]


@pytest.mark.parametrize("level", ["headers", "bodies"])
@pytest.mark.parametrize("change", [0, 0x40])
def test_a_run_s_last_segment_sent_again(tmp_path, level, change):
    path = _capture(tmp_path, change)
    run = dissect(path, level=level)
    exchanges = list(run)
    assert [(ex.api_key, ex.request.length, ex.response is not None) for ex in exchanges] == \
        [(3, 4 + 14 + 5120, True)]
    want = [("tcp.overlap_conflict", 3600 + 100)] if change else []
    assert _conflicts(run.issues) == want
    d, _ = feed_packets(path, level=level)   # packet by packet: no runs
    assert _conflicts(d.issues) == want

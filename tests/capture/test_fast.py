"""capture.fast: the fused hot loop hands on exactly what read_packets + tcp_segment give.

Every test runs with each packet walker (the compiled one and its pure-Python reference).

Each packet shape (built by scapy, an independent encoder) is checked both ways: the fused reader
must route it as the general path would (a segment with the same fields and payload, an issue
code, or nothing), whichever of its branches (fused or `other`) takes it.
"""
import random
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import IP, TCP, UDP, IPOption_RR
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Dot1Q, Ether
from scapy.packet import Raw

from dissector.capture import CaptureError, read_packets, tcp_segment
from dissector.capture import chunks
from dissector.capture.fast import scan
from dissector.pipeline import dissect
from dissector.tcp.flows import direct_key

from tests.capture import build
from tests.support import feed_packets, lose_dup_swap, use_walker

pytestmark = pytest.mark.usefixtures("reading")   # both file readers (conftest)

A, B = "10.1.2.3", "10.9.8.7"


@pytest.fixture(autouse=True, params=["compiled", "python"])
def walker(request, monkeypatch):
    use_walker(monkeypatch, request.param)
    return request.param


class Recorder:
    """Stands in for FlowTable and the pipeline: records where each packet went."""

    def __init__(self, direct_keys=(), deadline=float("inf")):
        self.calls = []
        self.direct = {direct_key(*k): self._handler(k) for k in direct_keys}
        self.sides = {}   # no runs: every segment goes to its handler
        self.deadline = deadline
        self.ticks = []
        self.unpins = 0
        self.packets = 0
        self.bytes = 0

    def _handler(self, key):
        def handle(pkt, ts, seq, ack, flags, payload):
            payload = bytes(payload)  # a view of the reader's buffer, valid until unpin()
            self.calls.append((pkt, ts, (*key, seq, ack, flags, payload), "direct"))
        return handle

    def unpin(self):
        self.unpins += 1

    def add(self, pkt, ts, src, dst, sport, dport, seq, ack, flags, payload):
        assert type(payload) is bytes
        self.calls.append((pkt, ts, (src, dst, sport, dport, seq, ack, flags, payload), "add"))

    def other(self, pkt, ts, linktype, data):
        assert type(data) is bytes
        self.calls.append((pkt, ts, tcp_segment(linktype, data), "other"))

    def tick(self, ts):
        self.ticks.append(ts)
        self.deadline = ts + 10
        return self.deadline


def run_fast(path, recorder, start=0):
    for _ in scan(path, start, recorder, recorder.other, recorder):
        pass
    return recorder


def reference(path, start=0):
    return [(start + n, ts, tcp_segment(lt, data)) for n, ts, lt, data in read_packets(path)]


def routed(recorder):
    return [(pkt, ts, seg) for pkt, ts, seg, _how in recorder.calls]


def eth(ip):
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / ip)


def tcp4(payload=b"kafka", flags="PA", **ip):
    return IP(src=A, dst=B, **ip) / TCP(sport=40001, dport=9092, seq=4_000_000_000, ack=77,
                                        flags=flags) / Raw(payload)


SHAPES = {
    "plain": eth(tcp4()),
    "empty payload": eth(tcp4(b"")),
    "syn": eth(IP(src=A, dst=B) / TCP(sport=40001, dport=9092, flags="S")),
    "fin": eth(tcp4(flags="FA")),
    "rst": eth(tcp4(b"", flags="R")),
    "tcp options": eth(IP(src=A, dst=B) / TCP(sport=1, dport=9092, flags="PA",
                                              options=[("NOP", None), ("Timestamp", (1, 2))])
                       / Raw(b"xyz")),
    "ethernet padding": eth(tcp4(b"ab")) + b"\0" * 20,
    "ip options": eth(IP(src=A, dst=B, options=[IPOption_RR()]) / TCP(dport=9092) / Raw(b"x")),
    "fragment": eth(IP(src=A, dst=B, flags="MF") / TCP(dport=9092) / Raw(b"frag")),
    "vlan": bytes(Ether() / Dot1Q(vlan=5) / tcp4()),
    "ipv6": bytes(Ether() / IPv6(src="::1", dst="::2") / TCP(dport=9092) / Raw(b"six")),
    "udp": eth(IP(src=A, dst=B) / UDP(dport=9092) / Raw(b"u")),
    "tso zero length": eth(tcp4(b"offload", len=0)),
    "ip length past capture": eth(tcp4(b"0123456789"))[:-4],
    "bad data offset": eth(IP(src=A, dst=B) / TCP(dport=9092, dataofs=3) / Raw(b"abcdefgh")),
    "data offset past ip length": eth(IP(src=A, dst=B) / TCP(dport=9092, dataofs=15)
                                      / Raw(b"abcd")),
    "short": eth(tcp4())[:30],
    "not ip version 4": eth(tcp4())[:14] + b"\x65" + eth(tcp4())[15:],
}


def pcap_file(tmp_path, frames, linktype=1, order="<", nano=False, name="c.pcap"):
    recs = [(1_700_000_000 + i, 1000 * i + 7, f) for i, f in enumerate(frames)]
    path = tmp_path / name
    path.write_bytes(build.pcap(recs, order=order, nano=nano, linktype=linktype))
    return path


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_every_shape_routed_as_the_general_path(tmp_path, order, nano):
    path = pcap_file(tmp_path, list(SHAPES.values()), order=order, nano=nano)
    r = run_fast(path, Recorder(), start=100)
    assert routed(r) == reference(path, start=100)
    assert r.packets == 100 + len(SHAPES)
    assert r.bytes == sum(map(len, SHAPES.values()))
    # the plain shapes took the fused branch, the odd ones the general one
    fused = {"plain", "empty payload", "syn", "fin", "rst", "tcp options", "ethernet padding"}
    assert [h for *_, h in r.calls] == ["add" if s in fused else "other" for s in SHAPES]


def _link_frames(ip):
    raw = bytes(ip)
    family = 2 if raw[0] >> 4 == 4 else 24  # AF_INET, NetBSD's AF_INET6
    return {
        1: eth(ip),
        113: bytes(CookedLinux() / ip),
        276: bytes(CookedLinuxV2() / ip),
        0: struct.pack("<I", family) + raw,
        108: struct.pack(">I", family) + raw,
        101: raw,
        228: raw,
    }


@pytest.mark.parametrize("linktype", [1, 113, 276, 0, 108, 101, 228])
def test_fused_links(tmp_path, linktype):
    frames = [_link_frames(tcp4(b"p%d" % i))[linktype] for i in range(3)]
    frames.append(_link_frames(IPv6(src="::1", dst="::2") / TCP(dport=9092) / Raw(b"v6"))[linktype])
    path = pcap_file(tmp_path, frames, linktype=linktype)
    r = run_fast(path, Recorder())
    assert routed(r) == reference(path)
    assert [h for *_, h in r.calls[:3]] == ["add"] * 3


def test_pcapng_interfaces_and_links(tmp_path):
    ip = tcp4(b"ng")
    blocks = [build.shb(), build.idb("<", 1), build.idb("<", 276, tsresol=9)]
    for i in range(10):
        iface = i % 2
        frame = _link_frames(ip)[1 if iface == 0 else 276]
        if i == 4:
            frame = SHAPES["ip options"]
        blocks.append(build.epb("<", iface, 1_700_000_000_000_000 + i, frame))
    path = tmp_path / "c.pcapng"
    path.write_bytes(b"".join(blocks))
    r = run_fast(path, Recorder(), start=5)
    assert routed(r) == reference(path, start=5)
    assert r.packets == 15


def test_live_flows_go_to_their_handler_unless_syn_fin_rst(tmp_path):
    key = (bytes([10, 1, 2, 3]), bytes([10, 9, 8, 7]), 40001, 9092)
    frames = [eth(tcp4(b"one")), eth(tcp4(b"", flags="A")), eth(tcp4(b"two", flags="FA")),
              eth(tcp4(b"", flags="R")), SHAPES["syn"], eth(tcp4(b"three", flags="PAU"))]
    path = pcap_file(tmp_path, frames)
    r = run_fast(path, Recorder([key]))
    assert routed(r) == reference(path)
    assert [h for *_, h in r.calls] == ["direct", "direct", "add", "add", "add", "direct"]


def test_deadline_ticks_after_direct_segments(tmp_path):
    key = (bytes([10, 1, 2, 3]), bytes([10, 9, 8, 7]), 40001, 9092)
    path = pcap_file(tmp_path, [eth(tcp4(b"%d" % i)) for i in range(4)])
    r = run_fast(path, Recorder([key], deadline=0))
    ts = [t for _p, t, _s in reference(path)]
    # each packet is a second later than the last: past every new deadline (ts + 10 ns)
    assert r.ticks == ts


def test_damaged_tail_delivers_what_came_before(tmp_path):
    path = pcap_file(tmp_path, [eth(tcp4(b"a")), eth(tcp4(b"b"))])
    path.write_bytes(path.read_bytes()[:-5])
    r = Recorder()
    with pytest.raises(CaptureError, match="truncated packet record"):
        run_fast(path, r, start=10)
    assert [seg[7] for _p, _t, seg in routed(r)] == [b"a"]
    assert r.packets == 11


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=12),
       st.sampled_from([0, 1, 101, 113, 276]))
def test_random_bytes_after_a_real_header(tmp_path_factory, tails, linktype):
    """Junk and cut headers (prefixes of a real one plus random bytes) route the same way."""
    real = _link_frames(tcp4(b"payload"))[linktype]
    frames = [real[:len(real) * (i % 4) // 3] + t for i, t in enumerate(tails)]
    path = pcap_file(tmp_path_factory.mktemp("f"), frames, linktype=linktype)
    assert routed(run_fast(path, Recorder())) == reference(path)


CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def _frames(path, fast=True):
    """Every frame's bytes and place, as the pipeline pairs them (fast: the file path; else
    packet by packet through Dissector.feed, the general path), whole messages kept (the
    headers level keeps only their first bytes)."""
    if fast:
        exchanges = list(dissect(path, level="bodies"))
    else:
        exchanges = feed_packets(path, level="bodies")[1]
    out = []
    for ex in exchanges:
        for f in (ex.request, ex.response):
            if f is not None:
                out.append((f.connection.connection_id, f.direction, f.stream_offset, f.length,
                            f.first_packet, f.last_packet, bytes(f.data)))
    return out


@pytest.mark.parametrize("chunk", [1000, 7777, 65536])
def test_payload_views_survive_the_reused_buffer(monkeypatch, chunk):
    """Handlers get views of the reader's buffer; what the streams keep of them (frames spanning
    segments) is copied out before each refill overwrites it: tiny chunks change nothing."""
    captures = sorted(CAPTURES.glob("*.mss1448.pcap"))
    assert captures
    ref = {c: _frames(c) for c in captures}
    monkeypatch.setattr(chunks, "CHUNK", chunk)
    for c in captures:
        assert _frames(c) == ref[c], c.name
    spanning = [f for c in captures for f in ref[c] if f[4] != f[5]]
    assert sum(len(f[6]) for f in spanning) > 4 * chunk  # frames longer than chunks, too


def test_pcapng_damaged_block_delivers_what_came_before(tmp_path):
    blocks = [build.shb(), build.idb("<", 1)]
    blocks += [build.epb("<", 0, 10 + i, eth(tcp4(b"p%d" % i))) for i in range(3)]
    path = tmp_path / "c.pcapng"
    data = b"".join(blocks)
    path.write_bytes(data[:-8] + b"\xff" * 8)  # the last block's trailing length is wrong
    r = Recorder()
    with pytest.raises(CaptureError, match="block length mismatch"):
        run_fast(path, r)
    assert [seg[7] for _p, _t, seg in routed(r)] == [b"p0", b"p1"]
    assert r.packets == 2


def _damaged(path, out, seed):
    """The capture with packets lost, duplicated and swapped (seeded): holes, retransmissions
    and out-of-order data, so held bytes are drained into frames between payload views."""
    rng = random.Random(seed)
    data = path.read_bytes()
    recs, pos = [], 24
    while pos + 16 <= len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        recs.append(data[pos:pos + 16 + incl])
        pos += 16 + incl
    kept = lose_dup_swap(recs, rng)
    out.write_bytes(data[:24] + b"".join(kept))
    return out


@pytest.mark.parametrize("chunk", [1000, 7777])
def test_damaged_streams_same_as_the_general_path(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(chunks, "CHUNK", chunk)
    for i, c in enumerate(sorted(CAPTURES.glob("*.mss1448.pcap"))):
        for seed in (i, 100 + i):
            path = _damaged(c, tmp_path / c.name, seed)
            assert _frames(path) == _frames(path, fast=False), (c.name, seed)

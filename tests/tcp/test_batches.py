"""Runs (tcp.batch) change nothing: Dissector.feed_segments gives what feeding one segment at a
time gives, the file reader what Dissector.feed packet by packet gives."""
import random
import struct
from pathlib import Path

import pytest

from dissector import budget as budget_module
from dissector.capture import chunks, read_packets, tcp_segment
from dissector.pipeline import Dissection, Dissector
from dissector.tcp.reassembly import ACK, FIN, SYN

from tests.fuzz.support import write_pcap, write_pcapng
from tests.support import feed_packets, lose_dup_swap
from tests.tcp.fakes import PSH, request, response
from tests.tcp.snapshot import snapshot

CAPTURES = Path(__file__).resolve().parents[2] / "captures"


def _segments(path):
    out = []
    for n, ts, lt, data in read_packets(path):
        seg = tcp_segment(lt, data)
        if seg is not None and seg.__class__ is not str:
            out.append((n, ts, *seg))
    return out


def _one_by_one(segments, **kw):
    d = Dissector(**kw)
    emitted = []
    for s in segments:
        before = len(d.output)
        d.feed_segment(*s)
        emitted += [s[0]] * (len(d.output) - before)
    d.finish()
    return snapshot(d, list(d.output)), emitted


def _batched(segments, sizes, **kw):
    d = Dissector(**kw)
    emitted = []
    i = 0
    for k in sizes:
        cols = list(zip(*segments[i:i + k])) or [()] * 10
        d.feed_segments(*cols, emitted=emitted)
        i += k
    d.finish()
    return snapshot(d, list(d.output)), emitted


def _sizes(n, rng):
    sizes = []
    while n > 0:
        k = rng.choice((1, 2, 7, 50, 1000))
        sizes.append(k)
        n -= k
    return sizes


@pytest.mark.parametrize("budget", [None, 1 << 15], ids=["budget", "tiny budget"])
@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.name)
def test_feed_segments_same_as_one_by_one(path, budget, monkeypatch):
    """Every capture, also damaged (holes, retransmissions, out-of-order data), in one call or
    in calls of random sizes; a budget so small that streams give up all the time."""
    if budget is not None:
        monkeypatch.setattr(budget_module, "BUFFER_BUDGET", budget)
    rng = random.Random(path.name)
    segments = _segments(path)
    for segs in (segments, lose_dup_swap(segments, rng)):
        ref, ref_emitted = _one_by_one(segs)
        for sizes in ([len(segs)], _sizes(len(segs), rng)):
            got, emitted = _batched(segs, sizes)
            assert got == ref
            assert emitted == ref_emitted


def _by_connection(segments):
    """The segments of each tuple together, in packet order (as the Spark job feeds them)."""
    groups = {}
    for s in segments:
        ends = (s[2], s[4]), (s[3], s[5])
        groups.setdefault(min(ends) + max(ends), []).append(s)
    return list(groups.values())


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.mss1448.pcap")), ids=lambda p: p.name)
def test_feed_segments_a_connection_at_a_time(path):
    """One call per connection, each flushed after it (the Spark job's way): long runs of
    middle segments, settled at the end of each call."""
    rng = random.Random(path.name)
    segments = _segments(path)
    for segs in (segments, lose_dup_swap(segments, rng)):
        groups = _by_connection(segs)
        d, ref_emitted = Dissector(), []
        for g in groups:
            for s in g:
                before = len(d.output)
                d.feed_segment(*s)
                ref_emitted += [s[0]] * (len(d.output) - before)
            d.finish()
            ref_emitted += [None] * (len(d.output) - len(ref_emitted))
        ref = snapshot(d, list(d.output))
        d, emitted = Dissector(), []
        for g in groups:
            d.feed_segments(*zip(*g), emitted=emitted)
            d.finish()
            emitted += [None] * (len(d.output) - len(emitted))
        assert snapshot(d, list(d.output)) == ref
        assert emitted == ref_emitted


def test_feed_segments_ipv6_and_views():
    """Addresses of 16 bytes (keys of another length) and payloads given as views."""
    path = CAPTURES / "kafka_python.mss1448.pcap"
    six = [(n, ts, b"\xfd" + b"\0" * 11 + src, b"\xfd" + b"\0" * 11 + dst, *rest)
           for n, ts, src, dst, *rest in _segments(path)]
    ref, ref_emitted = _one_by_one(six)
    views = [(*s[:9], memoryview(bytearray(s[9]))) for s in six]
    got, emitted = _batched(views, [len(views)])
    assert got == ref and emitted == ref_emitted
    assert ref[0] and ref[0][0][0][1].startswith("fd00:")


def _traffic(rng, conns=3):
    """Connections exchanging requests and responses of 0-600 kB in 1448-byte segments (the
    handshake, pure acks of the other side now and then, a FIN at the end), interleaved at
    random: each connection's segments in order, the connections' mixed."""
    streams = []
    for c in range(conns):
        ip, port = b"\x0a\x01\x00" + bytes([c + 1]), 40000 + c
        b = b"\x0a\x00\x00\x02"
        seq = [rng.randrange(1 << 32), rng.randrange(1 << 32)]
        ends = ((ip, b, port, 9092), (b, ip, 9092, port))
        segs = [(ends[0], seq[0] - 1, 0, SYN, b""), (ends[1], seq[1] - 1, seq[0], SYN | ACK, b""),
                (ends[0], seq[0], seq[1], ACK, b"")]

        def send(side, data):
            for k in range(0, len(data), 1448):
                piece = data[k:k + 1448]
                segs.append((ends[side], seq[side] & 0xFFFFFFFF, seq[1 - side] & 0xFFFFFFFF,
                             ACK | PSH, piece))
                seq[side] += len(piece)
                if rng.random() < 0.1:   # the other side acks
                    segs.append((ends[1 - side], seq[1 - side] & 0xFFFFFFFF,
                                 seq[side] & 0xFFFFFFFF, ACK, b""))
        for corr in range(rng.randrange(1, 6)):
            size = rng.choice((0, 100, 5000, 70_000, 300_000, 600_000))
            send(0, request(corr, rng.randbytes(size), api_key=0, version=3))
            send(1, response(corr, rng.randbytes(rng.choice((2, 3000, 200_000)))))
        segs.append((ends[0], seq[0] & 0xFFFFFFFF, seq[1] & 0xFFFFFFFF, FIN | ACK, b""))
        segs.append((ends[1], seq[1] & 0xFFFFFFFF, (seq[0] + 1) & 0xFFFFFFFF, FIN | ACK, b""))
        streams.append(segs)
    out = []
    while any(streams):
        s = rng.choice([s for s in streams if s])
        for _ in range(rng.choice((1, 1, 3, 40))):
            if s:
                out.append(s.pop(0))
    return [(n, 1000 * n, *e, seq, ack, fl, data)
            for n, (e, seq, ack, fl, data) in enumerate(out, 1)]


def _seeded_traffic(seed, rng, monkeypatch):
    """_traffic, damaged (losses, duplicates, swaps) for odd seeds, under a budget that makes the
    largest holders give up (1 MB) for seeds not divisible by 3."""
    segs = _traffic(rng)
    if seed % 2:
        segs = lose_dup_swap(segs, rng)
    if seed % 3:
        monkeypatch.setattr(budget_module, "BUFFER_BUDGET", 1 << 20)
    return segs


@pytest.mark.parametrize("seed", range(12))
def test_feed_segments_random_traffic(seed, monkeypatch):
    """Random interleavings of big and small frames, with and without losses, duplicates and
    swaps, under a budget that makes the largest holders give up (1 MB) and without."""
    rng = random.Random(seed)
    segs = _seeded_traffic(seed, rng, monkeypatch)
    ref, ref_emitted = _one_by_one(segs)
    for sizes in ([len(segs)], _sizes(len(segs), rng)):
        got, emitted = _batched(segs, sizes)
        assert got == ref
        assert emitted == ref_emitted
    assert ref[0]   # exchanges came out


# -- the file reader's runs (capture.fast): the same as packet by packet through Dissector.feed

def _general(path):
    return snapshot(*feed_packets(path))


def _fast(path):
    d = Dissector()
    exchanges = list(Dissection([path], d))
    return snapshot(d, exchanges)


def _packet(src, dst, sport, dport, seq, ack, flags, payload):
    """Ethernet, IPv4 and TCP headers (checksums are not checked) around the payload."""
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, src, dst)
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip + tcp + payload


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.name)
def test_file_runs_same_as_packet_by_packet(path, tmp_path, monkeypatch):
    """Every capture, whole and damaged, in chunks of every size."""
    from tests.capture.test_fast import _damaged
    for seed in (None, 1, 2):
        p = path if seed is None else _damaged(path, tmp_path / path.name, seed)
        ref = _general(p)
        for chunk in (1000, 7777, 4 << 20):
            monkeypatch.setattr(chunks, "CHUNK", chunk)
            assert _fast(p) == ref, (seed, chunk)


@pytest.mark.parametrize("seed", range(8))
def test_file_runs_random_traffic(seed, tmp_path, monkeypatch):
    """Random interleavings of big and small frames (long runs of consecutive packets and
    short ones), with losses, duplicates and swaps, a tight budget, pcap and pcapng."""
    segs = _seeded_traffic(seed, random.Random(seed), monkeypatch)
    pkts = [(ts, 1, _packet(*s)) for _n, ts, *s in segs]
    for name, data in (("t.pcap", write_pcap(pkts)), ("t.pcapng", write_pcapng(pkts))):
        path = tmp_path / name
        path.write_bytes(data)
        ref = _general(path)
        assert ref[0]
        for chunk in (5000, 4 << 20):
            monkeypatch.setattr(chunks, "CHUNK", chunk)
            assert _fast(path) == ref, (name, chunk)

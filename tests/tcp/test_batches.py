"""Batched feeding (Dissector.feed_segments) gives what feeding one segment at a time gives."""
import random
from pathlib import Path

import pytest

from dissector.capture import read_packets, tcp_segment
from dissector.pipeline import Dissector

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


def _damaged(segments, rng):
    """Segments lost, duplicated and swapped: holes, retransmissions, out-of-order data."""
    out = []
    for s in segments:
        x = rng.random()
        if x < 0.03:
            continue
        if x < 0.05:
            out.append(s)
        if x < 0.08 and out:
            out.insert(len(out) - 1, s)
            continue
        out.append(s)
    return out


def _sizes(n, rng):
    sizes = []
    while n > 0:
        k = rng.choice((1, 2, 7, 50, 1000))
        sizes.append(k)
        n -= k
    return sizes


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.name)
def test_feed_segments_same_as_one_by_one(path):
    rng = random.Random(path.name)
    segments = _segments(path)
    for segs in (segments, _damaged(segments, rng)):
        ref, ref_emitted = _one_by_one(segs)
        for sizes in ([len(segs)], _sizes(len(segs), rng)):
            got, emitted = _batched(segs, sizes)
            assert got == ref
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

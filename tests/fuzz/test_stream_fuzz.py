"""Reassembly, framing and pairing under adversarial segment sequences, fed through
Dissector.feed_segment (the entry point the Spark job uses), seeded with real captures."""
import random
from functools import lru_cache

from hypothesis import given, strategies as st

from dissector.capture.layers import ACK, FIN, PSH, RST, SYN, tcp_segment
from dissector.pipeline import Dissector

from .support import REAL, REAL_PORTS, bounded, exchange_key, fuzz_settings, packets
from .test_capture_fuzz import check_dissector_run


@lru_cache(maxsize=None)
def segments(path):
    """(ts, src, dst, sport, dport, seq, ack, flags, payload) of every TCP segment."""
    out = []
    for ts, lt, data in packets(path):
        seg = tcp_segment(lt, data)
        if seg is not None and not isinstance(seg, str):
            out.append((ts,) + seg[:7] + (bytes(seg[7]),))
    return tuple(out)


def feed(d, segs):
    """The exchanges of segments (ts, src, dst, sport, dport, seq, ack, flags, payload) through
    Dissector `d`, the run checked (nothing escapes, every finding an Issue)."""
    out = []
    for n, (ts, src, dst, sport, dport, seq, ack, flags, payload) in enumerate(segs, 1):
        d.feed_segment(n, ts, src, dst, sport, dport, seq & 0xFFFFFFFF, ack, flags, payload)
        out.extend(d.output)
        d.output.clear()
    d.finish()
    out.extend(d.output)
    check_dissector_run(d, out)
    return out


def run(segs, level="bodies"):
    return feed(Dissector(REAL_PORTS, level=level), segs)


def resegment(segs, rnd, sizes):
    """Each payload cut into pieces of random `sizes`, some pieces sent twice (same bytes), a
    few swapped with their neighbour: what a real network's MSS, retransmits and reordering
    make of the same stream."""
    out = []
    for ts, src, dst, sport, dport, seq, ack, flags, payload in segs:
        if not payload:
            out.append((ts, src, dst, sport, dport, seq, ack, flags, payload))
            continue
        pos = 0
        while pos < len(payload):
            n = rnd.choice(sizes)
            piece = payload[pos:pos + n]
            f = flags & ~(FIN | SYN) if pos + n < len(payload) else flags
            out.append((ts, src, dst, sport, dport, seq + pos, ack, f, piece))
            if rnd.random() < 0.1:
                out.append(out[-1])
            pos += n
    for i in range(len(out) - 1):
        a, b = out[i], out[i + 1]
        if a[8] and b[8] and a[1:5] == b[1:5] and rnd.random() < 0.1:
            out[i], out[i + 1] = b, a
    return out


def _keys(exchanges):
    return sorted(map(repr, map(exchange_key, exchanges)))


@fuzz_settings(25)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32))
@bounded(60)
def test_resegmented_with_exact_duplicates_gives_the_same_exchanges(which, seed):
    """Each payload cut into random pieces, some pieces sent twice (same bytes), a few swapped
    with their neighbour: the same exchanges come out (a real network's MSS, retransmits and
    reordering)."""
    segs = segments(which)
    out = resegment(segs, random.Random(seed), (1, 7, 100, 1448, 65536))
    assert _keys(run(out)) == _keys(run(segs))


@fuzz_settings(40)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32),
       level=st.sampled_from(["headers", "bodies", "records"]))
@bounded(60)
def test_hostile_segment_sequences_never_escape(which, seed, level):
    """Reordering far beyond any window, conflicting retransmissions, losses, stray SYN/FIN/RST,
    sequence jumps and wrap-around, zero-length and huge-offset segments."""
    rnd = random.Random(seed)
    segs = list(segments(which))
    for _ in range(rnd.randint(1, 12)):
        i = rnd.randrange(len(segs))
        ts, src, dst, sport, dport, seq, ack, flags, payload = segs[i]
        op = rnd.randrange(8)
        if op == 0:    # conflicting retransmission of part of the segment
            bad = bytes(rnd.getrandbits(8) for _ in range(len(payload)))
            segs.insert(i + rnd.randint(0, 20), (ts, src, dst, sport, dport, seq, ack, flags, bad))
        elif op == 1:  # loss
            del segs[i]
        elif op == 2:  # far reordering
            segs.insert(rnd.randrange(len(segs)), segs.pop(i))
        elif op == 3:  # stray control flags
            segs[i] = (ts, src, dst, sport, dport, seq, ack, flags | rnd.choice((SYN, FIN, RST)),
                       payload)
        elif op == 4:  # sequence jump, possibly across the 2^32 wrap
            segs[i] = (ts, src, dst, sport, dport, seq + rnd.choice((2**31, 2**32 - 3, 10**6)),
                       ack, flags, payload)
        elif op == 5:  # overlapping piece shifted by a few bytes
            k = rnd.randint(1, 9)
            segs.insert(i + 1, (ts, src, dst, sport, dport, seq + k, ack, flags,
                                payload[k:] + b"x"))
        elif op == 6:  # time going backwards
            segs[i] = (ts - 10**12, src, dst, sport, dport, seq, ack, flags, payload)
        else:          # a whole stream of the segment's flow replayed with other ports
            segs.append((ts, src, dst, sport ^ 1, dport, seq, ack, ACK | PSH, payload))
    run(segs, level)

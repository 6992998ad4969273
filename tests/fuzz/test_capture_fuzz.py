"""Capture files and packets: mutated real captures through the readers, mutated real packets
through link/IP/TCP parsing, and mutated real captures through the whole pipeline."""
import gzip
import random

from hypothesis import example, given, strategies as st

from dissector.capture.layers import tcp_segment
from dissector.tcp.reassembly import ZERO_WINDOW
from dissector.model import Issue
from dissector.pipeline import Dissector

from .support import (BUG_CODES, REAL, REAL_PORTS, bounded, fuzz_settings, mutate, packets,
                      read_all, write_pcap, write_pcapng)

# A few dozen packets of each real capture keep one example fast; the seeds differ per capture.
HEAD = 40


def _record_ends(pkts, fmt):
    """End offset of each packet's record in the file written by write_pcap / write_pcapng."""
    pos = 24 if fmt == "pcap" else 28 + 32  # pcap header; pcapng SHB + first IDB
    seen = {pkts[0][1]} if pkts else set()
    ends = []
    for _, lt, data in pkts:
        if fmt == "pcap":
            pos += 16 + len(data)
        else:
            if lt not in seen:
                seen.add(lt)
                pos += 32
            pos += 32 + len(data) + (-len(data) & 3)
        ends.append(pos)
    return ends


@fuzz_settings(60)
@given(which=st.sampled_from(REAL), fmt=st.sampled_from(["pcap", "pcap-us", "pcapng"]),
       zipped=st.booleans(), seed=st.integers(0, 2**32))
@bounded(30)
def test_mutated_real_captures_read_up_to_the_damage(tmp_path_factory, which, fmt, zipped, seed):
    pkts = packets(which)[:HEAD]
    if fmt == "pcapng":
        raw = write_pcapng(pkts)
    else:
        raw = write_pcap(pkts, nanosecond=(fmt == "pcap"))
    rnd = random.Random(seed)
    bad = mutate(raw, rnd, 4)
    path = tmp_path_factory.mktemp("cap") / "m.cap"
    path.write_bytes(gzip.compress(bad) if zipped else bad)
    got, error = read_all(path)
    if error is not None:
        assert "\n" not in error and error.startswith(f"{path}: ")
    for _, ts, lt, data in got:
        assert type(ts) is int and type(lt) is int and type(data) is bytes
        assert len(data) <= len(bad)
    # Every packet whose record lies wholly before the first changed byte comes out unchanged.
    same = next((i for i, (a, b) in enumerate(zip(raw, bad)) if a != b), min(len(raw), len(bad)))
    intact = sum(1 for end in _record_ends(pkts, "pcapng" if fmt == "pcapng" else "pcap")
                 if end <= same)
    want = [(ts if fmt != "pcap-us" else ts // 1000 * 1000, data) for ts, _, data in pkts[:intact]]
    assert [(ts, data) for _, ts, _, data in got[:intact]] == want


@fuzz_settings(300)
@given(which=st.sampled_from(REAL), index=st.integers(0, 10**6), seed=st.integers(0, 2**32),
       linktype=st.sampled_from([None, 0, 1, 12, 101, 108, 113, 228, 229, 276]))
@example(which=next(p for p in REAL if p.name == "codecs.mss1448.pcap"), index=117, seed=1809,
         linktype=None)   # a window mutated to 0: the flags carry ZERO_WINDOW beside the TCP byte
@bounded(30)
def test_mutated_real_packets_parse_or_are_refused(which, index, seed, linktype):
    pkts = packets(which)
    _, lt, data = pkts[index % len(pkts)]
    bad = mutate(data, random.Random(seed), 3)
    got = tcp_segment(lt if linktype is None else linktype, bad)
    if got is None or isinstance(got, str):
        assert got is None or got.split(".")[0] in ("ip", "tcp")
        return
    src, dst, sport, dport, seq, ack, flags, payload = got
    assert len(src) in (4, 16) and len(dst) == len(src)
    assert 0 <= sport < 65536 and 0 <= dport < 65536 and 0 <= flags <= 0xFF | ZERO_WINDOW
    assert 0 <= seq < 2**32 and 0 <= ack < 2**32
    # The payload is a slice of the packet's tail region, never more than was captured.
    assert len(payload) <= len(bad) - 20 and bytes(payload) in bad


def check_dissector_run(d: Dissector, exchanges):
    issues = list(d.issues) + [i for ex in exchanges for i in ex.issues]
    for i in issues:
        assert isinstance(i, Issue) and i.code not in BUG_CODES, i
        assert "." in i.code and i.severity in ("error", "warning", "note")
    for ex in exchanges:
        assert ex.status in ("ok", "no_response_expected", "unanswered", "orphan_response",
                             "malformed")
        assert ex.request is not None or ex.response is not None


@fuzz_settings(40)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32),
       level=st.sampled_from(["headers", "bodies", "records"]))
@bounded(30)
def test_mutated_packets_through_the_whole_pipeline(which, seed, level):
    """A handful of packets of a real capture damaged anywhere (headers or payload): the run
    ends, nothing escapes, every finding is an Issue."""
    rnd = random.Random(seed)
    pkts = list(packets(which))
    for _ in range(rnd.randint(1, 6)):
        i = rnd.randrange(len(pkts))
        ts, lt, data = pkts[i]
        pkts[i] = (ts, lt, mutate(data, rnd, 3))
    d = Dissector(REAL_PORTS, level=level, auto=rnd.random() < 0.3)
    out = []
    for n, (ts, lt, data) in enumerate(pkts, 1):
        d.feed(n, ts, lt, data)
        out.extend(d.output)
        d.output.clear()
    d.finish()
    out.extend(d.output)
    check_dissector_run(d, out)

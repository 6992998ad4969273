"""The file reader's fused fast path (capture.fast, behind dissect()) against the reference path
(read_packets -> Dissector.feed, one layer call per packet) on mutated real captures: the same
exchanges and the same issues, whatever the damage, with a small read chunk so that payload
views of the reused buffer are refilled under the streams often."""
import random

import pytest
from hypothesis import given, strategies as st

from dissector.capture import chunks
from dissector.capture.files import read_packets
from dissector.capture.errors import CaptureError
from dissector.pipeline import Dissector, dissect

from .support import REAL, REAL_PORTS, bounded, exchange_key, fuzz_settings, mutate, packets, \
    write_pcap, write_pcapng


def _issues(issues):
    return sorted((i.code, i.frame, i.stream_offset, i.connection_id) for i in issues)


def _reference(path, level, auto):
    d = Dissector(REAL_PORTS, level=level, auto=auto)
    out = []
    error = None
    try:
        for no, ts, lt, data in read_packets(path):
            d.feed(no, ts, lt, data)
            out.extend(d.output)
            d.output.clear()
    except CaptureError as e:
        error = str(e)
    d.finish()
    out.extend(d.output)
    return out, d, error


@fuzz_settings(30)
@given(which=st.sampled_from(REAL), seed=st.integers(0, 2**32), fmt=st.sampled_from(
    ["pcap", "pcapng"]), level=st.sampled_from(["headers", "bodies", "records"]),
    auto=st.booleans(), chunk=st.sampled_from([1 << 11, 1 << 14, 1 << 22]))
@bounded(60)
def test_fast_path_equals_the_reference_path(tmp_path_factory, monkeypatch_chunk, which, seed,
                                             fmt, level, auto, chunk):
    rnd = random.Random(seed)
    pkts = list(packets(which))
    for _ in range(rnd.randint(0, 10)):
        i = rnd.randrange(len(pkts))
        op = rnd.randrange(4)
        if op == 0:    # damaged bytes anywhere in the packet
            ts, lt, data = pkts[i]
            pkts[i] = (ts, lt, mutate(data, rnd, 2))
        elif op == 1:  # a retransmission, later
            pkts.insert(min(len(pkts), i + rnd.randint(1, 30)), pkts[i])
        elif op == 2:  # reordered
            pkts.insert(min(len(pkts), i + rnd.randint(1, 5)), pkts.pop(i))
        else:          # lost
            del pkts[i]
    raw = write_pcap(pkts) if fmt == "pcap" else write_pcapng(pkts)
    if rnd.random() < 0.2:
        raw = raw[:rnd.randrange(len(raw))]
    path = tmp_path_factory.mktemp("fast") / f"m.{fmt}"
    path.write_bytes(raw)
    monkeypatch_chunk(chunk)
    run = dissect(path, REAL_PORTS, level=level, auto=auto)
    fast = list(run)
    ref, d, error = _reference(path, level, auto)
    assert [exchange_key(e) for e in fast] == [exchange_key(e) for e in ref]
    assert [_issues(e.issues) for e in fast] == [_issues(e.issues) for e in ref]
    assert _issues(i for i in run.issues if i.code != "capture.error") == _issues(d.issues)
    assert run.errors == ([] if error is None else [error])
    assert run.packets == d.packets


@pytest.fixture
def monkeypatch_chunk():
    """Set the capture reader's chunk size for the rest of the test (restored after)."""
    old = chunks.CHUNK

    def set_chunk(n):
        chunks.CHUNK = n
    yield set_chunk
    chunks.CHUNK = old

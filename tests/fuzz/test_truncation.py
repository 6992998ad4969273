"""A real capture cut at every byte offset (a small one: every offset; the full captures: a dense
sample around record boundaries plus random offsets). Whatever the cut, the run ends without
an exception, reports the damage unless the cut falls between records, and yields a prefix of
the full run: every exchange the kept packets hold comes out exactly as in the full run, and
the only others are requests whose responses were cut off."""
import random

import pytest

from dissector.pipeline import dissect

from .support import REAL, REAL_PORTS, examples, exchange_key, packets, request_key, write_pcap

SMALL = (REAL[0].parent / "kafka_python.pcap", 24)  # the first 24 packets: a few kB


def _boundaries(pkts):
    ends = [24]
    for _, _, data in pkts:
        ends.append(ends[-1] + 16 + len(data))
    return ends


def _run(path):
    run = dissect(path, REAL_PORTS, level="bodies")
    return list(run), run


def check_prefix(full, cut_run, cut_exchanges, kept_packets, at_boundary):
    if at_boundary:
        assert cut_run.errors == []
    else:
        assert len(cut_run.errors) == 1 and "\n" not in cut_run.errors[0]
    assert cut_run.packets == kept_packets
    full_ok = [exchange_key(e) for e in full if e.status == "ok"]
    cut_ok = [exchange_key(e) for e in cut_exchanges if e.status == "ok"]
    assert cut_ok == full_ok[:len(cut_ok)]
    # every exchange wholly inside the kept packets is there, whatever its status
    full_keys = {exchange_key(e) for e in full}
    cut_keys = {exchange_key(e) for e in cut_exchanges}
    inside = [exchange_key(e) for e in full if e.request is not None and e.response is not None
              and max(e.request.last_packet, e.response.last_packet) <= kept_packets]
    assert not set(inside) - cut_keys
    # the rest: requests whose response was cut off (unanswered), or whose own bytes or
    # response were cut by the end of the file (malformed, with an Issue); all of them requests
    # of the full run
    full_requests = {request_start(e) for e in full}
    for e in cut_exchanges:
        if e.status != "ok" and exchange_key(e) not in full_keys:
            assert e.status in ("unanswered", "no_response_expected", "malformed"), e
            assert request_start(e) in full_requests, e
            if e.status == "malformed":
                frames = [f for f in (e.request, e.response) if f is not None]
                assert e.issues and any(len(f.data) < f.length - 4 for f in frames), e


def request_start(ex):
    """A request as far as its first packet tells (its end may be cut off)."""
    return request_key(ex)[:8] + (ex.request.stream_offset, ex.request.first_ts,
                                  ex.request.first_packet)


def test_small_real_capture_cut_at_every_offset(tmp_path):
    path, n = SMALL
    pkts = packets(path)[:n]
    raw = write_pcap(pkts)
    whole = tmp_path / "whole.pcap"
    whole.write_bytes(raw)
    full, run = _run(whole)
    assert run.errors == [] and len([e for e in full if e.status == "ok"]) >= 3
    ends = _boundaries(pkts)
    cut = tmp_path / "cut.pcap"
    for offset in range(len(raw)):
        cut.write_bytes(raw[:offset])
        got, cut_run = _run(cut)
        kept = sum(1 for e in ends[1:] if e <= offset)
        check_prefix(full, cut_run, got, kept, offset in ends)


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_captures_cut_at_a_dense_sample(tmp_path, path):
    raw = path.read_bytes()
    pkts = packets(path)
    full, run = _run(path)
    assert run.errors == []
    assert raw == write_pcap(pkts, nanosecond=raw[:4] == b"\x4d\x3c\xb2\xa1")  # the layout
    ends = _boundaries(pkts)
    rnd = random.Random(path.name)
    # around the boundaries of a few records (header cut, payload cut, exact), plus anywhere
    offsets = {e + d for e in rnd.sample(ends, min(len(ends), examples(8))) for d in (-1, 0, 1, 9)}
    offsets |= {rnd.randrange(len(raw)) for _ in range(examples(8))}
    offsets = sorted(o for o in offsets if 0 <= o < len(raw))
    cut = tmp_path / "cut.pcap"
    for offset in offsets:
        cut.write_bytes(raw[:offset])
        got, cut_run = _run(cut)
        kept = sum(1 for e in ends[1:] if e <= offset)
        check_prefix(full, cut_run, got, kept, offset in ends)

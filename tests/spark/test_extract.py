"""The extract stage (no Spark): runs of segments replay every TCP packet exactly, with far fewer
rows than packets; damaged files end in a summary saying what went wrong."""
from __future__ import annotations

import pyarrow as pa
import pytest

from analysis.spark.decode import _segments_in_order
from analysis.spark.extract import CHUNK, RAW, SUMMARY, extract_file
from dissector.capture.files import read_packets
from dissector.capture.layers import tcp_segment
from tests.support import require_path

from .inputs import CAPTURES, damaged_files

NAMES = ["librdkafka_produce_consume.mss1448.pcap", "codecs.pcap", "transactions.mss1448.pcap"]


def _extract(path):
    return pa.Table.from_batches(list(extract_file(path)))


def _tcp_packets(path):
    out = []
    for no, ts, lt, data in read_packets(path):
        seg = tcp_segment(lt, data)
        if isinstance(seg, tuple):
            src, dst, sport, dport, seq, ack, flags, payload = seg
            out.append((no, ts, bytes(src), bytes(dst), sport, dport, seq, ack, flags,
                        bytes(payload)))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_runs_replay_every_tcp_packet_exactly(name):
    path = CAPTURES / name
    require_path(path)
    t = _extract(path)
    chunks = t.filter(pa.compute.equal(t.column("kind"), CHUNK))
    chunks = chunks.append_column("offset", pa.array([0] * chunks.num_rows, pa.int64()))
    replayed = [(p, ts, bytes(s), bytes(d), sp, dp, seq, ack, fl, bytes(pl))
                for p, ts, s, d, sp, dp, seq, ack, fl, pl in _segments_in_order(chunks)]
    expected = _tcp_packets(path)
    assert len(expected) > 50
    assert replayed == expected


@pytest.mark.parametrize("name", NAMES)
def test_no_row_per_packet(name):
    path = CAPTURES / name
    require_path(path)
    t = _extract(path)
    kinds = t.column("kind").to_pylist()
    packets = len(_tcp_packets(path))
    assert kinds.count(CHUNK) < packets * 0.6
    summary = t.filter(pa.compute.equal(t.column("kind"), SUMMARY)).to_pylist()
    assert len(summary) == 1 and summary[0]["error"] is None
    assert summary[0]["count"] == sum(1 for _ in read_packets(path))


def test_damaged_files(tmp_path):
    require_path(CAPTURES / "transactions.pcap")
    text, cut, bad = damaged_files(tmp_path)

    t = _extract(text).to_pylist()
    assert [r["kind"] for r in t] == [SUMMARY]
    assert t[0]["count"] == 0 and t[0]["ts"] is None and "not a pcap" in t[0]["error"]

    t = _extract(cut).to_pylist()
    summary = t[-1]
    assert summary["kind"] == SUMMARY and str(cut) in summary["error"]
    complete = 0
    try:
        for _ in read_packets(cut):
            complete += 1
    except Exception:
        pass
    assert summary["count"] == complete > 0

    t = _extract(bad).to_pylist()
    assert [r["kind"] for r in t] == [RAW, RAW, RAW, SUMMARY]
    assert [r["packet"] for r in t[:3]] == [1, 2, 3]
    codes = [tcp_segment(r["linktype"], r["payload"]) for r in t[:3]]   # the packets as read
    assert codes[:2] == ["ip.fragment", "ip.fragment"] and isinstance(codes[2], str)

"""The extract stage (no Spark): its index replays every TCP packet exactly (payloads read back from
the file at their offsets, or carried inline), with far fewer rows than packets; damaged files end
in a summary saying what went wrong."""
from __future__ import annotations

import gzip

import pyarrow as pa
import pytest

from analysis.spark.decode import _Files
from analysis.spark.extract import INLINE, RAW, SEGMENT, SEGMENTS, SUMMARY, extract_file
from dissector.capture.files import read_packets
from dissector.capture.layers import tcp_segment
from tests.support import require_path

from .inputs import CAPTURES, damaged_files, mixed_shapes

NAMES = ["librdkafka_produce_consume.mss1448.pcap", "codecs.pcap", "transactions.mss1448.pcap"]


def segments(rows, offsets, files):
    """The reference replay: (global packet, ts, src, dst, sport, dport, seq, ack, flags, payload) of every segment of
    `rows` (dicts of extract.SCHEMA's columns: the rows of one connection), in packet order."""
    rows = sorted(rows, key=lambda r: offsets[r["file"]] + r["packet"])
    for r in rows:
        offset = offsets[r["file"]]
        ends = ((r["src"], r["dst"], r["sport"], r["dport"]),
                (r["dst"], r["src"], r["dport"], r["sport"]))
        inline = memoryview(r["payload"])
        data = None
        pos = 0
        for packet, ts, at, n, seq, ack, flags, side in SEGMENT.iter_unpack(r["meta"]):
            if at == INLINE:
                view = inline[pos:pos + n]
                pos += n
            else:
                if data is None:
                    data = files.view(r["file"])
                view = data[at:at + n]
            yield (packet + offset, ts, *ends[side], seq, ack, flags, view)


def _extract(path, inline=False):
    return pa.Table.from_batches(list(extract_file(path, inline=inline)))


def _usable(path):
    """(number, segment or issue code) of the packets that are TCP, usable or not."""
    return [(no, seg) for no, _ts, lt, data in read_packets(path)
            if (seg := tcp_segment(lt, bytes(data))) is not None]


def _tcp_packets(path):
    out = []
    for no, ts, lt, data in read_packets(path):
        seg = tcp_segment(lt, data)
        if isinstance(seg, tuple):
            src, dst, sport, dport, seq, ack, flags, payload = seg
            out.append((no, ts, bytes(src), bytes(dst), sport, dport, seq, ack, flags,
                        bytes(payload)))
    return out


@pytest.mark.parametrize("inline", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_index_replays_every_tcp_packet_exactly(name, inline):
    path = CAPTURES / name
    require_path(path)
    _check_replay(path, inline)


@pytest.mark.parametrize("kind", ["pcap", "pcapng", "gzip"])
def test_every_shape_replayed_exactly(tmp_path, kind):
    """VLAN tags, IP options, IPv6, every link type, unusable packets between: the fast path and
    the general parser's packets of one connection end up in its rows, in packet order."""
    require_path(CAPTURES / "codecs.pcap")
    path = mixed_shapes(CAPTURES / "codecs.pcap", tmp_path / "mixed", pcapng=kind != "pcap")
    if kind == "gzip":
        packed = tmp_path / "mixed.gz"
        packed.write_bytes(gzip.compress(path.read_bytes()))
        path = packed
    at = _check_replay(path, kind == "gzip")
    if kind != "gzip":   # the general parser's packets carry their payloads, the rest do not
        assert INLINE in at and len(set(at)) > len(at) // 3


def _check_replay(path, inline):
    """The rows replay every TCP packet exactly; the payload offsets of their segments."""
    t = _extract(path, inline)
    rows = t.filter(pa.compute.equal(t.column("kind"), SEGMENTS))
    offsets = {str(path): 0}
    files = _Files({str(path): path})
    replayed = []
    for key in set(rows.column("key").to_pylist()):   # connection by connection
        mine = [r for r in rows.to_pylist() if r["key"] == key]
        conn = [(p, ts, bytes(s), bytes(d), sp, dp, seq, ack, fl, bytes(pl))
                for p, ts, s, d, sp, dp, seq, ack, fl, pl in segments(mine, offsets, files)]
        assert [c[0] for c in conn] == sorted(c[0] for c in conn)   # in packet order
        replayed += conn
    expected = _tcp_packets(path)
    assert len(expected) > 50
    assert sorted(replayed) == expected
    raw = t.filter(pa.compute.equal(t.column("kind"), RAW)).column("packet").to_pylist()
    assert sorted(raw + [c[0] for c in replayed]) == [n for n, *_ in _usable(path)]
    at = [seg[2] for m in rows.column("meta").to_pylist() for seg in SEGMENT.iter_unpack(m)]
    if inline:
        assert set(at) == {INLINE}
    elif path.name in NAMES:   # payloads stay in the file
        assert INLINE not in at and sum(len(p) for p in rows.column("payload").to_pylist()) == 0
    return at


@pytest.mark.parametrize("name", NAMES)
def test_no_row_per_packet(name):
    path = CAPTURES / name
    require_path(path)
    t = _extract(path)
    kinds = t.column("kind").to_pylist()
    packets = len(_tcp_packets(path))
    assert kinds.count(SEGMENTS) < packets * 0.1
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

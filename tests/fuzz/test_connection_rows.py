"""`Dissector.connections` under a SYN flood (issue 8): one row per connection attempt would grow
without bound, so past pipeline.MAX_ROWS rows a new connection is listed only once it carries
data, and those that close without any are counted in the `tcp.flow_limit` Issue."""
import re

from dissector import pipeline
from dissector.pipeline import Dissector
from dissector.tcp.reassembly import ACK, SYN
from tests.tcp.fakes import PSH, request, response

from .support import run_syn_flood

B = b"\x0a\x00\x00\x02"


def _syn(d, i):
    d.feed_segment(i + 1, i, (0x0a400000 + (i >> 15)).to_bytes(4, "big"), B, 1024 + (i & 0x7FFF),
                   9092, 1000, 0, SYN, b"")


def test_connections_with_data_past_the_cap_are_listed(monkeypatch):
    """Rows cap 10: 30 SYN-only attempts, then a real exchange on a new connection, then 30 more
    attempts. The table keeps the first 10 rows (all of them while under the cap) and the real
    connection; its exchange comes out; the other 50 attempts are counted."""
    monkeypatch.setattr(pipeline, "MAX_ROWS", 10)
    d = Dissector((9092,))
    for i in range(30):
        _syn(d, i)
    c = b"\x0a\0\0\x01"
    req = request(7, api_key=18, version=0)
    d.feed_segment(100, 100, c, B, 40000, 9092, 999, 0, SYN, b"")
    d.feed_segment(101, 101, B, c, 9092, 40000, 4999, 1000, SYN | ACK, b"")
    d.feed_segment(102, 102, c, B, 40000, 9092, 1000, 5000, ACK | PSH, req)
    d.feed_segment(103, 103, B, c, 9092, 40000, 5000, 1000 + len(req), ACK | PSH,
                   response(7, b"\0\0\0\0\0\0"))
    for i in range(30, 60):
        _syn(d, 200 + i)
    d.finish()
    assert [(e.correlation_id, e.status) for e in d.output] == [(7, "ok")]
    rows = d.connections
    assert len(rows) == 11
    assert [r.client_port for r in rows[:10]] == [1024 + i for i in range(10)]
    assert (rows[10].client_ip, rows[10].client_port) == ("10.0.0.1", 40000)
    [summary] = [i for i in d.issues if i.code == "tcp.flow_limit"]
    assert "left 50 connections that never carried data out" in summary.detail


def test_a_real_capture_keeps_every_row():
    """Under the cap nothing changes: every attempt is a row, SYN-only ones included, and no
    Issue is raised for them."""
    d = Dissector((9092,))
    for i in range(100):
        _syn(d, i)
    d.finish()
    assert [r.connection_id for r in d.connections] == list(range(1, 101))
    assert not [i for i in d.issues if i.code == "tcp.flow_limit"]


def test_a_syn_flood_does_not_grow_the_table():
    """A fresh interpreter fed 80k SYNs to the broker port, rows cap lowered to 4096 (the default
    would take 200k SYNs, too slow here): the last 60k add no memory (320 B a row before the cap:
    19 MB), the table stops at the cap, and the Issue counts exactly the attempts past it."""
    result = run_syn_flood(
        '{"grown": grown, "rows": len(d.connections), "cap": pipeline.MAX_ROWS, '
        '"issues": [i.detail for i in d.issues if i.code == "tcp.flow_limit"]}',
        setup="pipeline.MAX_ROWS = 4096")
    assert result["rows"] == result["cap"], result
    assert result["grown"] < 4 << 20, result
    [detail] = result["issues"]
    left = int(re.search(r"left (\d+) connections that never carried data", detail).group(1))
    assert left == 80_000 - result["cap"]

"""A connection's verdict (tls.sniff.Pair.verdict) with nothing logged to look at, as a flow
that never carried data closes with: plaintext at the end, undecided before, plaintext once a
client segment looked like a Kafka request; and with bytes to look at, the record headers'
chain decides."""
from __future__ import annotations

from dissector.budget import Budget
from dissector.tls.sniff import Pair


def _pair(since=((), ()), kafka=False):
    p = Pair(None, None, None, Budget())
    p._since = [list(since[0]), list(since[1])]
    p.kafka = kafka
    return p


def test_nothing_to_look_at():
    assert _pair().verdict(final=True) is False
    assert _pair().verdict(final=False) is None
    assert _pair(kafka=True).verdict(final=False) is False
    assert _pair(kafka=True).verdict(final=True) is False


def test_bytes_to_look_at():
    records = (bytes([0x16, 3, 3, 0, 4]) + bytes(4)) * 3   # three headers chained by length
    assert _pair(since=([records], [])).verdict(final=False) is True
    assert _pair(since=([b"\0\0\0\x10" + bytes(12)], [])).verdict(final=True) is False

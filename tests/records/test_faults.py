"""Malformed record sets: every fault is an Issue, nothing raises, good neighbours survive."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dissector.records import decode_record_set
from tests.records.builders import build, control_batch, expected, got, with_body

ITEMS = [(1_700_000_000_000 + i, b"key%d" % i, b"value%d" % i, [("h", b"x")]) for i in range(5)]
LEGACY = [(t, k, v, []) for t, k, v, _ in ITEMS]


def mixed_set():
    parts = [build(0, 0, LEGACY[:2]), build(1, 1, LEGACY, offset=2), build(2, 0, ITEMS, offset=7),
             control_batch(False, offset=12), build(2, 1, ITEMS, offset=13)]
    return parts, b"".join(parts)


def codes(rs):
    return [i.code for i in rs.issues]


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_crc_mismatch_keeps_the_records(magic):
    buf = bytearray(build(magic, 0, (ITEMS if magic == 2 else LEGACY)[:1]))
    at = bytes(buf).index(b"value0") + 5
    buf[at] ^= 0x01  # value0 -> value1
    rs = decode_record_set(bytes(buf))
    assert codes(rs) == ["records.crc_mismatch"]
    assert rs.batches[0].crc_ok is False
    assert rs.records()[0].value == b"value1"
    assert rs.issues[0].stream_offset == 0


def test_truncated_at_every_offset_never_raises():
    parts, buf = mixed_set()
    full = got(decode_record_set(buf))
    ends = {0}
    pos = 0
    for p in parts:
        pos += len(p)
        ends.add(pos)
    legacy0_ends = {len(build(0, 0, LEGACY[:1]))}  # uncompressed v0: one entry per message
    boundaries = ends | legacy0_ends
    for i in range(len(buf) + 1):
        rs = decode_record_set(buf[:i])
        assert rs.issues == [], i
        assert rs.truncated == (i not in boundaries), i
        assert got(rs) == full[:len(got(rs))]
        assert sum(b.size for b in rs.batches) <= i


def test_truncated_memoryview_input():
    _, buf = mixed_set()
    rs = decode_record_set(memoryview(bytearray(buf))[:len(buf) - 3])
    assert rs.truncated and rs.issues == []


@pytest.mark.parametrize("length", [-1, -2**31, 0, 5, 48])
def test_impossible_batch_length(length):
    good = build(2, 0, ITEMS)
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, length)
    rs = decode_record_set(good + bytes(bad) + good)
    assert codes(rs) == ["records.bad_length"]
    assert rs.issues[0].stream_offset == len(good) + 8
    assert len(rs.batches) == 1 and got(rs) == expected(good)


def test_bad_magic_is_stepped_over():
    good = build(2, 0, ITEMS)
    bad = bytearray(good)
    bad[16] = 7
    rs = decode_record_set(good + bytes(bad) + good)
    assert codes(rs) == ["records.bad_magic"]
    assert rs.issues[0].stream_offset == len(good) + 16
    assert len(rs.batches) == 2 and rs.record_count == 10


@pytest.mark.parametrize("delta", [1, -1, 1000])
def test_record_count_mismatch(delta):
    good = build(2, 0, ITEMS)
    bad = with_body(good, good[61:], count=len(ITEMS) + delta)
    rs = decode_record_set(bad + good)
    assert codes(rs) == ["records.count_mismatch"]
    assert rs.batches[0].crc_ok is True
    assert len(rs.batches[0].records) == len(ITEMS) + min(delta, 0)
    assert got(rs)[-5:] == expected(good)


def test_varint_overflow():
    good = build(2, 0, ITEMS[:1])
    # length 20, attributes 0, then a timestamp delta of 11 continuation bytes
    body = bytes([40, 0]) + b"\xff" * 11 + b"\x00" * 8
    rs = decode_record_set(with_body(good, body, count=1) + good)
    assert codes(rs) == ["records.bad_varint"]
    assert rs.issues[0].stream_offset == 61
    assert got(rs) == expected(good)


@pytest.mark.parametrize("body", [
    bytes([0x7e]) + b"\x00" * 4,                     # record length 63, 4 bytes left
    bytes([0x01]),                                    # negative record length
    bytes([12, 0, 0, 0, 200, 1, 0, 0]),             # key length 100 inside a 6-byte record
    bytes([12, 0, 0, 0, 3, 0, 0]),                  # key length -2
    bytes([14, 0, 0, 0, 1, 1, 2, 0]),               # header count 1 with no header bytes
])
def test_impossible_record_lengths(body):
    good = build(2, 0, ITEMS[:1])
    rs = decode_record_set(with_body(good, body, count=1) + good)
    assert codes(rs) == ["records.bad_length"]
    assert rs.batches[0].records == []
    assert got(rs) == expected(good)


def test_legacy_message_with_impossible_key_length():
    good = build(1, 0, LEGACY[:1])
    bad = bytearray(good)
    struct.pack_into(">i", bad, 34, 10**6)
    rs = decode_record_set(bytes(bad) + good)
    assert codes(rs) == ["records.bad_length"] and got(rs) == expected(good)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_corruption_never_raises(data):
    _, buf = mixed_set()
    buf = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 8))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    rs = decode_record_set(bytes(buf), max_uncompressed=1 << 20)
    assert "records.decode_error" not in codes(rs)
    assert all(i.code.startswith("records.") for i in rs.issues)
    decode_record_set(bytes(buf), records=False)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(blob):
    rs = decode_record_set(blob, max_uncompressed=1 << 16)
    assert "records.decode_error" not in codes(rs)


def test_null_and_empty_record_sets():
    for data in (None, b"", bytearray(), memoryview(b"")):
        rs = decode_record_set(data)
        assert (rs.batches, rs.issues, rs.truncated) == ([], [], False)
        assert rs.size == rs.record_count == 0


def test_negative_record_count_is_one_issue():
    good = build(2, 0, ITEMS)
    rs = decode_record_set(with_body(good, good[61:], count=-3))
    assert codes(rs) == ["records.count_mismatch"]
    assert rs.issues[0].stream_offset == 57


def every_codec_set():
    from tests.records.builders import require_codec
    parts = []
    for magic, codec in [(0, 2), (0, 3), (1, 1), (1, 3), (2, 2), (2, 3), (2, 4)]:
        require_codec(magic, codec)
        parts.append(build(magic, codec, LEGACY if magic < 2 else ITEMS))
    return b"".join(parts)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_corruption_of_compressed_batches_never_raises(data):
    buf = bytearray(every_codec_set())
    for _ in range(data.draw(st.integers(1, 6))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    rs = decode_record_set(bytes(buf), max_uncompressed=1 << 20)
    assert "records.decode_error" not in codes(rs)

"""Our decoder against kafka-python's record builders and reader (an independent implementation)."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from dissector.records import decode_record_set
from tests.records.builders import build, control_batch, expected, fix_crc32, got, require_codec

FORMATS = [(m, c) for m in (0, 1, 2) for c in (0, 1, 2, 3, 4) if not (c == 4 and m < 2)]
LARGE = bytes(range(256)) * 600  # 153,600 bytes: larger than one xerial snappy block or lz4 block


def sample_items(magic):
    hdrs = (lambda h: h) if magic == 2 else (lambda h: [])
    return [
        (1_700_000_000_000, b"key-0", b"value-0", hdrs([("trace", b"abc"), ("empty", b"")])),
        (1_700_000_000_005, None, b"no key", hdrs([("null-value", None)])),
        (1_700_000_000_003, b"no value", None, []),
        (1_700_000_000_010, None, None, []),
        (1_700_000_000_011, b"", b"", hdrs([("utf8-\u00e9\u4e2d", b"\x00\xff")])),
        (1_700_000_000_020, b"big", LARGE, []),
        (1_699_999_999_000, b"k" * 300, b"v" * 200,
         hdrs([("h%d" % i, bytes([i])) for i in range(20)])),
    ]


@pytest.mark.parametrize("magic,codec", FORMATS)
def test_records_match_kafka_python(magic, codec):
    require_codec(magic, codec)
    buf = build(magic, codec, sample_items(magic), offset=40)
    rs = decode_record_set(buf)
    assert rs.issues == []
    assert not rs.truncated
    assert got(rs) == expected(buf)
    assert rs.record_count == len(sample_items(magic))
    assert rs.size == len(buf)
    assert sum(b.size for b in rs.batches) == len(buf)
    for b in rs.batches:
        assert b.magic == magic and b.crc_ok is True
        assert b.codec == codec
        if magic == 0:
            assert all(r.timestamp is None for r in b.records)


@pytest.mark.parametrize("magic,codec", FORMATS)
def test_batch_header_fields_match_kafka_python(magic, codec):
    require_codec(magic, codec)
    producer = ({"transactional": True, "producer_id": 987654321, "producer_epoch": 5,
                 "base_sequence": 17} if magic == 2 else None)
    buf = build(magic, codec, sample_items(magic)[:4], producer=producer)
    ours = decode_record_set(buf).batches
    theirs = list(MemoryRecords(buf))
    assert len(ours) == len(theirs)
    for b, t in zip(ours, theirs, strict=True):
        assert b.size == t.size_in_bytes
        assert b.codec == t.compression_type
        assert b.timestamp_type == t.timestamp_type
        assert b.crc_ok is t.validate_crc()
        if magic == 2:
            assert (b.producer_id, b.producer_epoch, b.base_sequence) == (987654321, 5, 17)
            assert b.is_transactional and not b.is_control
            assert b.base_offset == t.base_offset
            assert b.last_offset_delta == t.last_offset_delta
            assert b.partition_leader_epoch == t.leader_epoch
            assert (b.first_timestamp, b.max_timestamp) == (t.first_timestamp, t.max_timestamp)
            assert b.record_count == t.records_count
        else:
            assert b.producer_id is None and not b.is_transactional


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit):
    buf = control_batch(commit, coordinator_epoch=9, offset=77)
    rs = decode_record_set(buf)
    assert rs.issues == []
    (b,) = rs.batches
    assert b.is_control and b.is_transactional and b.crc_ok
    oracle = next(iter(DefaultRecordBatch(buf)))
    assert b.control == (oracle.type, oracle.version) == (1 if commit else 0, 0)
    (r,) = b.records
    assert r.offset == 77
    assert struct.unpack(">hi", r.value) == (0, 9)


def _with_wrapper(buf, wrapper_offset, log_append_ts=None):
    """Set a broker-assigned offset (and LogAppendTime) on a v1 wrapper, as a broker does."""
    buf = bytearray(buf)
    struct.pack_into(">q", buf, 0, wrapper_offset)
    if log_append_ts is not None:
        buf[17] |= 0x08
        struct.pack_into(">q", buf, 18, log_append_ts)
    return fix_crc32(buf)


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_v1_wrapper_relative_offsets_and_log_append_time(codec):
    require_codec(1, codec)
    items = sample_items(1)[:5]
    buf = _with_wrapper(build(1, codec, items), 1004, log_append_ts=1_800_000_000_000)
    rs = decode_record_set(buf)
    assert rs.issues == []
    assert got(rs) == expected(buf)
    assert [r.offset for r in rs.records()] == [1000, 1001, 1002, 1003, 1004]
    assert {r.timestamp for r in rs.records()} == {1_800_000_000_000}
    (b,) = rs.batches
    assert (b.base_offset, b.last_offset_delta, b.timestamp_type) == (1000, 4, 1)


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_v0_wrapper_inner_offsets_absolute(codec):
    require_codec(0, codec)
    buf = build(0, codec, sample_items(0)[:3], offset=500)
    rs = decode_record_set(_with_wrapper(buf, 502))
    assert [r.offset for r in rs.records()] == [500, 501, 502]
    assert got(rs) == expected(buf)


def test_mixed_magic_and_several_batches_in_one_set():
    parts = [build(0, 0, sample_items(0)[:2], offset=0), build(1, 1, sample_items(1)[:3], offset=2),
             build(2, 0, sample_items(2)[:4], offset=5), control_batch(True, offset=9),
             build(2, 1, sample_items(2)[4:], offset=10)]
    buf = b"".join(parts)
    rs = decode_record_set(buf)
    assert rs.issues == []
    assert [b.magic for b in rs.batches] == [0, 0, 1, 2, 2, 2]
    starts = [sum(map(len, parts[:i])) for i in range(1, 5)]
    assert [b.offset_in_set for b in rs.batches][2:] == starts
    assert got(rs) == expected(buf)
    assert rs.record_count == 2 + 3 + 4 + 1 + 3


@pytest.mark.parametrize("magic,codec", FORMATS)
def test_headers_only_mode(magic, codec):
    require_codec(magic, codec)
    buf = build(magic, codec, sample_items(magic)) + build(magic, 0, sample_items(magic)[:2])
    rs = decode_record_set(buf, records=False)
    assert rs.issues == []
    assert all(b.records is None and b.uncompressed_size is None for b in rs.batches)
    full = decode_record_set(buf)
    assert [(b.codec, b.size, b.offset_in_set) for b in rs.batches] == \
        [(b.codec, b.size, b.offset_in_set) for b in full.batches]
    if magic == 2 or codec == 0:
        assert rs.record_count == full.record_count == len(sample_items(magic)) + 2
    else:  # a legacy wrapper's count is inside its compressed payload
        assert rs.batches[0].record_count is None


values = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=50)))
item = st.tuples(st.integers(0, 2**41), values, values, st.lists(header, max_size=4))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# kafka-python writes v2 offsets as int32 deltas from base offset 0
@given(st.sampled_from(FORMATS), st.lists(item, min_size=1, max_size=30),
       st.integers(0, 2**31 - 100))
def test_hypothesis_records_roundtrip(fmt, items, offset):
    magic, codec = fmt
    require_codec(magic, codec)
    if magic < 2:
        items = [(ts, k, v, []) for ts, k, v, _ in items]
    buf = build(magic, codec, items, offset=offset)
    rs = decode_record_set(buf)
    assert rs.issues == []
    assert got(rs) == expected(buf)
    assert [r.key for r in rs.records()] == [i[1] for i in items]
    assert [r.value for r in rs.records()] == [i[2] for i in items]
    if magic == 2:
        assert [r.headers for r in rs.records()] == [i[3] for i in items]

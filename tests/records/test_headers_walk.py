"""The compiled headers-only walk of a record set (records/_headers.c) decodes what the Python walk
(record_set._decode through record_batch.decode) decodes, batch field for batch field, or leaves
the set to it: on random record sets of v2 batches with any header values (good and bad CRCs,
negative counts, short lengths), MessageSet entries, unknown magics and partial tails, given as
bytes or as views into a larger message, with and without the CRC check; and on kafka-python's
own batches."""
import struct

import pytest
from hypothesis import given, settings, strategies as st

from dissector.records import record_batch, record_set
from dissector.records.checksums import crc32c
from dissector.records.model import Batch, RecordSet
from tests.records.builders import build
from tests.support import _missing, require_module

FIELDS = Batch.__slots__


def compiled():
    try:
        from dissector.records._headers import v2_headers
    except ImportError:
        _missing("the compiled headers walk (dissector/records/_headers.c; pip install -e . "
                 "builds it, which needs a C compiler)")
    return v2_headers


def _view(rs):
    batches = [tuple(getattr(b, f, "<unset>") for f in FIELDS) for b in rs.batches]
    issues = [(i.code, i.severity, i.detail, i.stream_offset) for i in rs.issues]
    return batches, issues, rs.truncated, rs.size, rs.record_count


def _both(data, accelerated=True):
    """(compiled, Python) headers-only decodes of `data`."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(record_batch, "ACCELERATED", accelerated)   # no CRC32C library: no check
        mp.setattr(record_set, "v2_headers", compiled())
        fast = _view(record_set.decode_record_set(data, records=False))
        mp.setattr(record_set, "v2_headers", None)
        slow = _view(record_set.decode_record_set(data, records=False))
    return fast, slow


@st.composite
def v2_batch(draw):
    body = draw(st.binary(max_size=60))
    fields = [draw(st.integers(-2**63, 2**63 - 1)), 0, draw(st.integers(-2**31, 2**31 - 1)), 2, 0,
              draw(st.integers(-2**15, 2**15 - 1)), draw(st.integers(-2**31, 2**31 - 1)),
              draw(st.integers(-2**63, 2**63 - 1)), draw(st.integers(-2**63, 2**63 - 1)),
              draw(st.integers(-2**63, 2**63 - 1)), draw(st.integers(-2**15, 2**15 - 1)),
              draw(st.integers(-2**31, 2**31 - 1)),
              draw(st.integers(0, 2**31 - 1) | st.integers(-2**31, -1))]
    buf = bytearray(struct.pack(">qiibIhiqqqhii", *fields) + body)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    damage = draw(st.sampled_from(["none"] * 6 + ["crc", "length", "short", "magic"]))
    if damage == "crc":
        buf[17] ^= 1
    elif damage == "length":
        struct.pack_into(">i", buf, 8, draw(st.integers(-5, 48)))
    elif damage == "short":
        buf = buf[:draw(st.integers(0, len(buf) - 1))]
    elif damage == "magic":
        buf[16] = draw(st.sampled_from([0, 1, 3, 255]))
    return bytes(buf)


legacy = st.sampled_from([build(0, 0, [(None, b"k", b"v", None)]),
                          build(1, 0, [(1_700_000_000_000, None, b"value", None)])])


@settings(max_examples=1000, deadline=None)
@given(st.lists(v2_batch() | legacy, max_size=5), st.binary(max_size=3), st.binary(max_size=3),
       st.booleans(), st.booleans())
def test_random_record_sets(batches, before, after, as_view, accelerated):
    data = b"".join(batches)
    if as_view:   # a view into the message, as the generated decoders hand it over
        data = memoryview(before + data + after)[len(before):len(before) + len(data)]
    fast, slow = _both(data, accelerated)
    assert fast == slow


@pytest.mark.parametrize("codec", [0, 1])
def test_kafka_python_batches(codec):
    items = [(1_700_000_000_000 + i, b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(20)]
    data = b"".join(build(2, codec, items, offset=100 * i) for i in range(3))
    fast, slow = _both(data)
    assert fast == slow
    assert len(fast[0]) == 3 and fast[4] == 60 and fast[1] == []
    assert compiled()(data, Batch, RecordSet, crc32c) is not None   # taken by the compiled walk


@settings(max_examples=300, deadline=None)
@given(st.lists(v2_batch() | legacy, max_size=4), st.booleans(), st.booleans())
def test_the_summary_walks_call_makes_what_decode_record_set_makes(batches, as_view, records):
    """record_set.walk_set (compiled: its empty sets and v2 headers made in C, the rest handed to
    decode_record_set) gives what decode_record_set gives, at both levels."""
    compiled()
    data = b"".join(batches)
    if as_view:
        data = memoryview(b"\x00" + data)[1:]
    got = record_set.walk_set(data, records, [64 << 20])
    want = record_set.decode_record_set(data, records=records, budget=[64 << 20])
    assert type(got) is RecordSet and _records_view(got) == _records_view(want)


def _records_view(rs):
    """_view, with decoded records compared by what they hold (a Record has no __eq__)."""
    batches, *rest = _view(rs)
    return [tuple([repr(r) for r in v] if type(v) is list else v for v in b)
            for b in batches], *rest


def test_the_summary_walks_call_is_compiled_and_makes_empty_sets():
    compiled()
    assert record_set.walk_set is not record_set.py_walk_set
    for empty in (b"", memoryview(b"xy")[1:1]):
        rs = record_set.walk_set(empty, False, [1])
        assert _view(rs) == ([], [], False, 0, 0) and type(rs.batches) is list
        assert rs.batches is not record_set.walk_set(empty, False, [1]).batches


@settings(max_examples=500, deadline=None)
@given(st.lists(v2_batch() | legacy, max_size=4), st.booleans(), st.booleans(),
       st.sampled_from([0, 1, 2]))
def test_the_byte_walks_sums_are_its_twins(batches, as_view, records, codec):
    """record_set.set_sums (compiled: a v2-only set without issues summed in C, no object per
    batch) gives what its twin py_set_sums gives: the sums alone, or the same RecordSet."""
    compiled()
    assert record_set.set_sums is not record_set.py_set_sums
    data = bytearray(b"".join(batches))
    if codec and len(data) > 22 and data[16] == 2:   # the first batch compressed, CRC kept
        end = 12 + struct.unpack_from(">i", data, 8)[0]
        data[22] = (data[22] & ~7) | codec
        if 21 < end <= len(data):
            struct.pack_into(">I", data, 17, crc32c(bytes(data[21:end])))
    data = bytes(data)
    if as_view:
        data = memoryview(b"\x00" + data)[1:]
    got = record_set.set_sums(data, records, [64 << 20])
    want = record_set.py_set_sums(data, records, [64 << 20])
    if type(want) is tuple:
        assert type(got) is tuple and got == want
    else:
        assert type(got) is RecordSet and _records_view(got) == _records_view(want)


# Lengths the CRC covers (a batch from byte 21 on) around the compiled CRC32C's three streams of
# 2048 and of 256 bytes (records/_batchsums.h), and where in them a byte is damaged
CRC_LENGTHS = [40, 767, 768, 769, 775, 776, 1536, 6143, 6144, 6145, 6144 + 767, 6144 + 768,
               12288 + 1535, 20011]
CRC_DAMAGE = [0, 255, 256, 511, 512, 767, 2047, 2048, 4095, 4096, 6143, 6144, -1]


@pytest.mark.parametrize("covered", CRC_LENGTHS)
def test_the_byte_walks_crc_of_long_batches_is_the_crc32c_librarys(covered):
    """The compiled CRC32C (set_sums) accepts what the crc32c library accepts, by itself (the
    walk it falls back to would check again), and rejects a batch damaged anywhere, in each of its
    streams and in the rest, as py_set_sums does."""
    from dissector.records import _headers
    from dissector.records.model import RECORD_COST
    compiled()
    require_module("crc32c")
    body = bytes((i * 7 + covered) & 0xFF for i in range(covered - 40))
    buf = bytearray(struct.pack(">qiibIhiqqqhii", 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1) + body)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    want = record_set.py_set_sums(bytes(buf), False, [64 << 20])
    assert type(want) is tuple

    def no_python(*_args, **_kwargs):
        raise AssertionError("the compiled CRC32C rejected a good batch")
    _headers.configure(Batch, RecordSet, no_python, no_python, record_batch._build_records,
                       RECORD_COST)
    try:
        assert record_set.set_sums(bytes(buf), False, [64 << 20]) == want
    finally:
        record_set._configure_walk_set(
            Batch, RecordSet, record_batch.crc32c if record_set.checks_crc() else None,
            record_set.decode_record_set, record_batch._build_records, RECORD_COST)
    for at in sorted({a % covered for a in CRC_DAMAGE if a < covered}):
        bad = bytearray(buf)
        bad[21 + at] ^= 0x10
        got = record_set.set_sums(bytes(bad), False, [64 << 20])
        assert type(got) is RecordSet, at
        assert [i.code for i in got.issues] == ["records.crc_mismatch"], at


ITEMS = st.lists(st.tuples(st.integers(0, 1 << 42), st.one_of(st.none(), st.binary(max_size=200)),
                           st.one_of(st.none(), st.binary(max_size=300)),
                           st.lists(st.tuples(st.sampled_from(["h", "é", "trace"]),
                                              st.one_of(st.none(), st.binary(max_size=4))),
                                    max_size=2)), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ITEMS, st.sampled_from([0, 0, 0, 1])), min_size=1, max_size=4),
       st.sampled_from(["none", "log_append_time", "control", "damaged", "tail"]),
       st.sampled_from([0, 159, 160, 480, 1 << 20]), st.booleans())
def test_the_records_level_walk_is_the_python_walk(sets, odd, budget, as_view):
    """walk_set at the records level (records/_headers.c checked_set for sets of uncompressed v2
    batches whose records all check, the Python walk for the rest) makes what decode_record_set
    makes, pays the same budget, and leaves the records to build on first read: on kafka-python's
    batches of any keys, values, headers and varint widths, gzip ones among them, with a batch
    in LogAppendTime or a control batch, a damaged record, or a partial tail, and budgets that
    run out within the set."""
    compiled()
    batches = [bytearray(build(2, codec, items, offset=10 * i)) for i, (items, codec) in
               enumerate(sets)]
    last = batches[-1]
    if odd in ("log_append_time", "control"):
        last[22] |= 0x08 if odd == "log_append_time" else 0x20
    elif odd == "damaged":
        last[-1] ^= 0x55
    if odd in ("log_append_time", "control", "damaged"):
        struct.pack_into(">I", last, 17, crc32c(bytes(last[21:])))
    data = b"".join(batches)
    if odd == "tail":
        data += bytes(batches[0][:30])
    if as_view:
        data = memoryview(b"\x00" + data)[1:]
    fast, slow = [budget], [budget]
    got = record_set.walk_set(data, True, fast)
    want = record_set.decode_record_set(data, records=True, budget=slow)
    assert fast == slow and _records_view(got) == _records_view(want)
    assert [b._deferred is not None for b in got.batches] == \
        [b._deferred is not None for b in want.batches]


def test_the_records_level_walk_of_plain_batches_is_compiled():
    """A set of uncompressed v2 batches whose records check is made in C (the Python walk, the
    fallback, is not called), with the records unbuilt until read."""
    from dissector.records import _headers
    from dissector.records.model import RECORD_COST
    compiled()
    data = b"".join(build(2, 0, [(1_700_000_000_000 + i, b"k", b"v" * i, [("h", b"x")])
                                 for i in range(3)], offset=3 * n) for n in range(2))

    def no_python(*_args, **_kwargs):
        raise AssertionError("the Python walk was called")
    _headers.configure(Batch, RecordSet, None, no_python, record_batch._build_records,
                       RECORD_COST)
    try:
        budget = [1 << 20]
        rs = _headers.walk_set(data, True, budget)
    finally:
        record_set._configure_walk_set(
            Batch, RecordSet, record_batch.crc32c if record_set.checks_crc() else None,
            record_set.decode_record_set, record_batch._build_records, RECORD_COST)
    assert budget == [(1 << 20) - 6 * RECORD_COST] and rs.record_count == 6
    assert all(b.crc_ok and b._deferred[0] == 3 for b in rs.batches)
    assert [r.offset for r in rs.records()] == list(range(6))
    assert [r.value for r in rs.records()] == [b"", b"v", b"vv"] * 2

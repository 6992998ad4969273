"""Record sets and decompression: batches of every magic and codec built by kafka-python (the
seeds), mutated on the wire, and mutated inside their compressed payload (re-compressed with the
codec libraries and the CRCs fixed, so the damage reaches the record parser)."""
import gzip
import random
import struct

import pytest
from hypothesis import given, strategies as st

from dissector.records import decode_record_set
from tests.records.builders import build, fix_crc32, with_body
from tests.support import require_compiled, require_module

from .support import BUG_CODES, bounded, fuzz_settings, mutate

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ITEMS = [(1_700_000_000_000 + i, None if i % 3 == 0 else b"k%d" % i, b"v" * (i * 7),
          [("h", b"x"), ("n", None)] if i % 2 else []) for i in range(6)]


def _compress(codec, data):
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        return require_module("snappy").compress(data)
    if codec == 3:
        return require_module("lz4.frame").compress(data)
    if codec == 4:
        return require_module("zstandard").ZstdCompressor().compress(data)
    return data


def _seed(magic, codec):
    if codec == 2:
        require_module("snappy")
    if codec == 3:
        require_module("lz4")
        if magic == 0:
            require_module("xxhash")
    if codec == 4:
        require_module("zstandard")
        if magic < 2:
            pytest.skip("zstd exists for RecordBatch v2 only")
    return build(magic, codec, ITEMS if magic == 2 else [(t, k, v, None) for t, k, v, _ in ITEMS])


SEEDS = [(m, c) for m in (0, 1, 2) for c in CODECS if not (c == 4 and m < 2)]


def check_set(data, **kw):
    for records in (True, False):
        rs = decode_record_set(data, records=records, **kw)
        for i in rs.issues:
            assert i.code not in BUG_CODES, i
            assert i.code.startswith("records."), i
            assert 0 <= (i.stream_offset or 0) <= len(data), i
        assert 0 <= rs.record_count
        for b in rs.batches:
            assert 0 <= b.offset_in_set and b.offset_in_set + b.size <= len(data)
        list(rs.records())  # the records table's walk
    return rs


@pytest.mark.parametrize("magic,codec", SEEDS, ids=[f"magic{m}-{CODECS[c]}" for m, c in SEEDS])
@fuzz_settings(40)
@given(seed=st.integers(0, 2**32), edits=st.integers(1, 6), copies=st.integers(1, 3))
@bounded(30)
def test_mutated_batches(magic, codec, seed, edits, copies):
    raw = _seed(magic, codec) * copies
    rs = decode_record_set(raw)
    assert rs.issues == [] and rs.record_count == len(ITEMS) * copies
    check_set(mutate(raw, random.Random(seed), edits))


def _inner(magic, codec):
    """(payload before compression, rebuild(payload) -> whole batch with valid CRCs)."""
    plain = _seed(magic, 0)
    if magic == 2:
        body = plain[61:]
        return body, lambda b: with_body(plain, _compress(codec, b), codec=codec)
    # v0/v1: a wrapper message whose value is the compressed inner message set.
    head = 8 + 4 + 4 + 1 + 1 + (8 if magic else 0)

    def rebuild(inner):
        value = _compress(codec, inner)
        msg = bytearray(plain[:head]) + b"\xff\xff\xff\xff" + struct.pack(">i", len(value)) + value
        msg[17] = codec
        struct.pack_into(">i", msg, 8, len(msg) - 12)
        return fix_crc32(bytes(msg))
    return plain, rebuild


@pytest.mark.parametrize("magic,codec", [s for s in SEEDS if s[1]],
                         ids=[f"magic{m}-{CODECS[c]}" for m, c in SEEDS if c])
@fuzz_settings(40)
@given(seed=st.integers(0, 2**32), edits=st.integers(1, 6))
@bounded(30)
def test_mutated_payload_inside_every_codec(magic, codec, seed, edits):
    _seed(magic, codec)  # skips when the codec library is missing
    inner, rebuild = _inner(magic, codec)
    good = decode_record_set(rebuild(inner))
    assert good.issues == [] and good.record_count == len(ITEMS)
    check_set(rebuild(mutate(inner, random.Random(seed), edits)))


@fuzz_settings(200)
@given(data=st.binary(max_size=400), magic=st.integers(0, 3), length=st.integers(-5, 2**31 - 1))
@bounded(30)
def test_random_bytes_behind_a_plausible_batch_header(data, magic, length):
    head = struct.pack(">qi", 0, length) + b"\0\0\0\0" + bytes((magic,))
    check_set(head + data)
    check_set(data)


def _text_inputs():
    """A records table's column buffers and batch pieces as records/text.py hands them to the
    compiled writers: three batches of rows with keys, values and headers of several sizes."""
    from dissector.records import text
    from dissector.records.columns import RecordColumns, _append_record
    cols = RecordColumns()
    cols.batches = [(1, 2, 0, 0, "t", 3, 2, "none", 0, -1, -1, -1, False, False, True)] * 3
    for i in range(9):
        _append_record(cols, i % 3, i, 1_700_000_000_000 + i, None if i % 4 == 0 else b"k" * i,
                       b"v" * (7 * i), [("h\u00e9", b"x" * i), ("n", None)] if i % 2 else [])
    return text, cols


@pytest.mark.parametrize("csv", [True, False], ids=["csv", "jsonl"])
@fuzz_settings(300)
@given(seed=st.integers(0, 2**32), edits=st.integers(1, 4),
       cut=st.sampled_from([None, "shorter", "bytes", "other"]))
@bounded(30)
def test_the_text_writers_refuse_buffers_out_of_step(csv, seed, edits, cut):
    """records/_text.c trusts nothing it is handed: column buffers with damaged offsets, batch
    indices and lengths, and batch pieces missing or of another type give a ValueError or a
    TypeError, never a read out of bounds (the sanitizers' run) or a text the size of memory;
    undamaged, it writes what its Python twin writes."""
    text, cols = _text_inputs()
    try:
        from dissector.records import _text
    except ImportError:
        _text = None
    compiled = require_compiled(_text, "records text writer (dissector/records/_text.c)")
    fn = compiled.csv_text if csv else compiled.jsonl_text
    pieces = [list(p) for p in text.py_batch_texts(cols.batches, csv)]
    twin = text.py_csv_text if csv else text.py_jsonl_text
    assert fn(cols.buffers, *pieces) == twin(cols.buffers, *pieces)
    rng = random.Random(seed)
    buffers = [bytearray(b) for b in cols.buffers]
    for _ in range(edits):
        b = rng.choice(buffers)
        if b and rng.random() < 0.7:
            b[rng.randrange(len(b))] = rng.randrange(256)
        else:
            del b[rng.randrange(len(b) + 1):]
    if cut == "shorter":
        pieces[rng.randrange(3)].pop()
    elif cut == "bytes":
        pieces[rng.randrange(3)][rng.randrange(3)] = "text"
    elif cut == "other":
        pieces[rng.randrange(3)][rng.randrange(3)] = None
    try:
        out = fn(tuple(buffers), *pieces, [])
    except (ValueError, TypeError):
        return
    assert len(out) < 1 << 20

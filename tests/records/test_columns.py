"""The records table's column buffers: the compiled records/_columns.c against its pure-Python
twin columns.py_append_v2 (the specification), on every v2 batch of every shipped capture and on
hand-encoded records of every varint width, odd header keys (not UTF-8), LogAppendTime, offsets
and timestamps past int64, and damaged copies (both must refuse the same ones)."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from dissector.pipeline import dissect
from dissector.records.columns import BUFFERS, RecordColumns, partitions, py_append_v2
from dissector.records.model import RecordSet
from tests.records.builders import varint
from tests.support import CAPTURES, require_compiled

try:
    from dissector.records._columns import append_v2 as compiled
except ImportError:
    compiled = None


@pytest.fixture(scope="module")
def c_append():
    return require_compiled(compiled, "column builder (dissector/records/_columns.c)")


def fresh():
    return RecordColumns().buffers


def both(c_append, body, count, base, first_ts, fixed, index=0, start=None):
    """Run both on copies of the same buffers: (python result, c result), each the count or
    ValueError, with the buffers after (as they were, after a ValueError)."""
    out = []
    for fn in (py_append_v2, c_append):
        bufs = tuple(bytearray(b) for b in (start or fresh()))
        try:
            out.append((fn(bufs, body, count, base, first_ts, fixed, index), bufs))
        except ValueError:
            out.append((ValueError, bufs))
    return out


def deferred_batches():
    """(capture, args) of every v2 batch whose records the pipeline left for a deferred parse."""
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        truth = CAPTURES / f"{pcap.name.split('.')[0]}.truth.json"
        port = json.loads(truth.read_text())["broker_port"]
        for ex in dissect(pcap, (port,), level="records"):
            _, sets = partitions(ex) or (None, ())
            for _, _, rs in sets:
                if isinstance(rs, RecordSet):
                    for b in rs.batches:
                        if b._deferred is not None:
                            yield pcap.name, b._deferred


def test_every_capture_batch_gives_the_same_buffers(c_append):
    seen = 0
    start = fresh()
    for name, (found, _, (body, _, base, first_ts, fixed)) in deferred_batches():
        py, c = both(c_append, body, found, base, first_ts, fixed, seen, start)
        assert py == c, name
        start = py[1]   # batches appended one after the other, as a table grows
        seen += 1
    assert seen > 100


def blob(b):
    return varint(-1) if b is None else varint(len(b)) + b


def encode(attributes, ts_delta, offset_delta, key, value, headers):
    body = bytes([attributes]) + varint(ts_delta) + varint(offset_delta) + blob(key) + blob(value)
    body += varint(len(headers)) + b"".join(blob(k) + blob(v) for k, v in headers)
    return varint(len(body)) + body


BLOBS = st.one_of(st.none(), st.binary(max_size=20), st.sampled_from([b"x" * 200, b"y" * 9000]))
KEYS = st.one_of(st.binary(max_size=8), st.sampled_from(
    [b"trace-id", "\u00e9t\u00e9".encode(), b"\xff\xfe", b"a\xc0\xafb", b"\xed\xa0\x80",
     "\U0001f600".encode(), b"\xf4\x90\x80\x80"]))
DELTAS = st.sampled_from([0, 1, -1, 63, 64, -65, 8191, 8192, 1 << 20, 1 << 40, -(1 << 62)])
RECORD = st.tuples(st.integers(0, 255), DELTAS, st.sampled_from([0, 1, 2, 63, 64, 8192, -3]),
                   BLOBS, BLOBS, st.lists(st.tuples(KEYS, BLOBS), max_size=3))
BASES = st.sampled_from([0, 5, 1 << 40, (1 << 63) - 3, -(1 << 63)])
TIMES = st.sampled_from([0, 1_700_000_000_000, -5, ((1 << 63) - 1) // 1_000_000, 1 << 62])


@settings(max_examples=150, deadline=None)
@given(st.lists(RECORD, max_size=6), BASES, TIMES, st.one_of(st.none(), TIMES), st.integers(0, 9))
def test_random_records_give_the_same_buffers(c_append, records, base, first_ts, fixed, index):
    body = b"".join(encode(*r) for r in records)
    py, c = both(c_append, body, len(records), base, first_ts, fixed, index)
    assert py == c
    assert py[0] == len(records)


@settings(max_examples=150, deadline=None)
@given(st.lists(RECORD, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_damaged_records_are_refused_by_both_or_read_alike(c_append, records, rnd):
    body = bytearray(b"".join(encode(*r) for r in records))
    for _ in range(rnd.randint(1, 3)):
        body[rnd.randrange(len(body))] = rnd.randrange(256)
    if rnd.random() < 0.3:
        del body[rnd.randrange(len(body)):]
    count = len(records) + rnd.choice([0, 0, 1, -1])
    start = fresh()
    py_append_v2(start, b"".join(encode(*r) for r in records), len(records), 0, 0, None, 0)
    py, c = both(c_append, bytes(body), max(count, 0), 7, 1_700_000_000_000, None, 1, start)
    assert py == c
    if py[0] is ValueError:
        assert py[1] == start


def test_buffers_are_arrow_layout():
    cols = RecordColumns()
    body = encode(0, 3, 0, b"k", None, [(b"h", b"v"), (b"\xff", None)]) + \
        encode(0, -1, 1, None, b"", [])
    assert py_append_v2(cols.buffers, body, 2, 10, 1000, None, 4) == 2
    i32 = lambda b: [int.from_bytes(b[i:i + 4], "little", signed=True)   # noqa: E731
                     for i in range(0, len(b), 4)]
    assert i32(cols.batch_index) == [4, 4]
    assert cols.offset == (10).to_bytes(8, "little") + (11).to_bytes(8, "little")
    assert cols.timestamp_valid == bytearray([0b11])
    assert i32(cols.key_offsets) == [0, 1, 1] and cols.key_data == b"k"
    assert cols.key_valid == bytearray([0b01]) and cols.value_valid == bytearray([0b10])
    assert i32(cols.header_offsets) == [0, 2, 2]
    assert cols.hkey_data == "h\ufffd".encode() and i32(cols.hkey_offsets) == [0, 1, 4]
    assert cols.hvalue_valid == bytearray([0b01])
    assert len(BUFFERS) == 17


def _filled(walks, found, rows, data_bytes):
    """RecordColumns.fill over `found` (exchange_records' (stem, sets), per exchange) with
    `walks` as its walks (columns' append_sets, a dict), cutting where
    sourced_chunks cuts: per chunk (buffers, batch fields, sources), and what each walk
    returned."""
    import dissector.records.columns as C
    chunks, returned = [], []
    cols, sources = RecordColumns(), []

    def logged(fn):
        def walk(*args):
            returned.append(fn(*args))
            return returned[-1]
        return walk
    saved = {name: getattr(C, name) for name in walks}
    for name, fn in walks.items():
        setattr(C, name, logged(fn))
    try:
        for i, (stem, sets) in enumerate(found):
            at = batch_at = 0
            while at < len(sets):
                at, batch_at, full = cols.fill(stem, sets, at, batch_at, rows, data_bytes,
                                               sources, i)
                assert full == cols.full(rows, data_bytes)
                if full:
                    chunks.append((cols.buffers, cols.batches, sources))
                    cols, sources = RecordColumns(), []
    finally:
        for name, fn in saved.items():
            setattr(C, name, fn)
    chunks.append((cols.buffers, cols.batches, sources))
    return chunks, returned


def _capture_records():
    """exchange_records' (stem, sets) of every exchange with records in every shipped
    capture."""
    from dissector.records.columns import exchange_records
    found = []
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        port = json.loads((CAPTURES / f"{pcap.name.split('.')[0]}.truth.json").read_text())[
            "broker_port"]
        found += [f for f in map(exchange_records, dissect(pcap, (port,), level="records"))
                  if f is not None]
    return found


@pytest.mark.parametrize("rows, data_bytes", [(1 << 62, 1 << 62), (1, 1 << 62), (7, 1 << 62),
                                              (1 << 62, 300)])
def test_the_batch_walks_are_their_twins_on_every_capture(c_append, rows, data_bytes):
    """records/_columns.c's append_sets (RecordColumns.fill's walk over an exchange's record
    sets and their checked batches) fills the same buffers, batch fields and sources, cut at the
    same batches, as its twin columns.py_append_sets, on every exchange of every shipped
    capture."""
    from dissector.records import _columns
    from dissector.records.columns import py_append_sets
    found = _capture_records()
    fast = _filled({"append_sets": _columns.append_sets}, found, rows, data_bytes)
    slow = _filled({"append_sets": py_append_sets}, found, rows, data_bytes)
    assert fast == slow
    assert sum(len(s) for _, _, s in fast[0]) > 100   # batches with records were walked


def test_the_set_walk_takes_only_record_sets_and_hands_back_built_batches(c_append):
    """append_sets and its twin pass over a set that is not a RecordSet and an empty one, and
    stop at a batch without a deferred parse (its records built: the caller's), at the same
    place, with the same rows before it."""
    from dissector.records._columns import append_sets
    from dissector.records.columns import CODEC_NAMES, py_append_sets
    stem, sets = next(f for f in _capture_records()
                      if any(b._deferred is not None for _, _, rs in f[1] for b in rs.batches))
    topic, partition, rs = next(e for e in sets if e[2].batches[0]._deferred is not None)
    built = type(rs.batches[0]).__new__(type(rs.batches[0]))
    for name in type(built).__slots__:
        if name not in ("records", "_deferred"):   # reading records would parse them
            setattr(built, name, getattr(rs.batches[0], name))
    built._deferred = None
    odd = [(topic, partition, b"raw"), (topic, partition, RecordSet([], [], False, 0, 0)),
           (topic, partition, RecordSet([rs.batches[0], built, rs.batches[0]], [], False, 0, 0))]
    out = []
    for fn in (append_sets, py_append_sets):
        cols, sources = RecordColumns(), []
        got = fn(cols.buffers, cols.batches, stem, odd, 0, 0, 1 << 62, 1 << 62, sources, 3,
                 CODEC_NAMES)
        out.append((got, cols.buffers, cols.batches, sources))
    assert out[0] == out[1]
    assert out[0][0] == (2, 1, False) and len(out[0][2]) == 1


def test_a_batch_the_check_passed_but_the_parse_refuses_is_left_out_by_both(c_append):
    """A deferred batch whose records do not parse (a bug upstream: the check passed them) is
    left out, the buffers as before it, and the walk goes on to the next."""
    from dissector.records._columns import append_sets
    from dissector.records.columns import CODEC_NAMES, py_append_sets
    stem, sets = next(f for f in _capture_records()
                      if any(b._deferred is not None for _, _, rs in f[1] for b in rs.batches))
    topic, partition, rs = next(e for e in sets if e[2].batches[0]._deferred is not None)
    good = next(b for b in rs.batches if b._deferred is not None)
    bad = type(good).__new__(type(good))
    for name in type(good).__slots__:
        if name != "records":
            setattr(bad, name, getattr(good, name))
    found, parse, (body, _, base, first_ts, fixed) = good._deferred
    bad._deferred = (found, parse, (body[:-1], found, base, first_ts, fixed))
    out = []
    one = [(topic, partition, RecordSet([bad, good], [], False, 0, 0))]
    for fn in (append_sets, py_append_sets):
        cols, heads, sources = RecordColumns(), [], []
        at = fn(cols.buffers, heads, stem, one, 0, 0, 1 << 62, 1 << 62, sources, 5, CODEC_NAMES)
        out.append((at, cols.buffers, heads, sources))
    assert out[0] == out[1]
    assert out[0][0] == (1, 0, False) and out[0][3] == [(5, found)] and len(out[0][2]) == 1


class _Int(int):
    pass


def test_batch_field_buffers_are_their_twins_on_every_capture_and_odd_values(c_append):
    """records/_columns.c's batch_buffers makes the same column buffers as its twin
    columns.py_batch_buffers from the batch fields of every shipped capture, and from fields of
    the wrong type, out of their column's range or not encodable (null in both)."""
    from dissector.records._columns import batch_buffers
    from dissector.records.columns import BATCH_KINDS, py_batch_buffers
    heads = []
    for stem, sets in _capture_records():
        cols = RecordColumns()
        cols.fill(stem, sets)
        heads += cols.batches
    assert len(heads) > 100
    assert batch_buffers(heads, BATCH_KINDS) == py_batch_buffers(heads, BATCH_KINDS)
    odd = (None, 0, -1, 127, 128, -129, 1 << 15, -(1 << 31) - 1, (1 << 63) - 1, 1 << 63,
           1 << 70, True, False, 1.5, "a", "é", "\ud800", b"x", _Int(3), ())
    rows = [tuple(odd[(i + k) % len(odd)] for k in range(len(BATCH_KINDS)))
            for i in range(len(odd))]
    kinds = (0, -1, 1, 2, 4, 8) * 3
    wide = [r + r[:3] for r in rows]
    for got, want in ((batch_buffers(rows, BATCH_KINDS), py_batch_buffers(rows, BATCH_KINDS)),
                      (batch_buffers(wide, kinds), py_batch_buffers(wide, kinds)),
                      (batch_buffers([], BATCH_KINDS), py_batch_buffers([], BATCH_KINDS))):
        assert got == want
    for fn in (batch_buffers, py_batch_buffers):
        with pytest.raises(ValueError):
            fn(rows, (3,))
        with pytest.raises(TypeError):
            fn([(1,)], BATCH_KINDS)

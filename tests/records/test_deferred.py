"""RecordBatch v2 records are checked at decode time and built on first read (Batch.records),
or built in the same pass with build=True: both ways must give the same Issues, counts and
records on every input, and the records must match kafka-python's reader (an independent
implementation) whatever the varint widths."""
import pickle
import random

from hypothesis import given, settings, strategies as st

from dissector.protocol.jsonify import to_json
from dissector.records import decode_record_set
from dissector.records.model import Batch
from tests.fuzz.support import mutate
from tests.records.builders import build, expected, got

# lengths around the one/two/three-byte zigzag varint limits (63/64, 8191/8192)
LENGTHS = st.sampled_from([0, 1, 63, 64, 200, 8191, 8192, 20000])
BLOB = st.one_of(st.none(), LENGTHS.map(lambda n: bytes(random.Random(n).randbytes(n))))
HEADER = st.tuples(st.text(max_size=70), BLOB)
ITEM = st.tuples(
    st.integers(-(1 << 40), 1 << 40).map(lambda d: 1_700_000_000_000 + d),  # any timestamp delta
    BLOB, BLOB, st.lists(HEADER, max_size=70))


@settings(max_examples=60, deadline=None)
@given(items=st.lists(ITEM, min_size=1, max_size=8), offset=st.integers(0, (1 << 31) - 100),
       codec=st.sampled_from([0, 1]))
def test_built_records_match_kafka_python(items, offset, codec):
    buf = build(2, codec, items, offset=offset)
    for eager in (False, True):
        rs = decode_record_set(buf, build=eager)
        assert rs.issues == []
        assert rs.record_count == len(items)
        assert [b.decoded_count() for b in rs.batches] == [len(items)]
        assert got(rs) == expected(buf)


SEED = build(2, 0, [(1_700_000_000_000 + i, None if i % 3 == 0 else b"k%d" % i, b"v" * (i * 40),
                     [("h", b"x"), ("n", None)] if i % 2 else []) for i in range(8)]) * 2


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), edits=st.integers(1, 8))
def test_check_and_build_agree_on_damaged_batches(seed, edits):
    """Whatever the damage, checking now and building later gives what building at once gives:
    the same Issues, counts and records (the deferred build re-reads what the check accepted)."""
    data = mutate(SEED, random.Random(seed), edits)
    later = decode_record_set(data)
    counted = [b.decoded_count() for b in later.batches]
    now = decode_record_set(data, build=True)
    assert [(i.code, i.stream_offset, i.detail) for i in later.issues] == \
        [(i.code, i.stream_offset, i.detail) for i in now.issues]
    assert later.record_count == now.record_count
    assert counted == [b.decoded_count() for b in now.batches]
    assert got(later) == got(now)
    assert counted == [None if b.records is None else len(b.records) for b in later.batches]


def test_unread_records_pickle_and_serialize():
    """A batch whose records were never read still pickles, and the JSON view (which reads every
    public field) shows them."""
    buf = build(2, 0, [(1_700_000_000_000, b"k", b"v", [("h", b"1")])], offset=5)
    batch = decode_record_set(buf).batches[0]
    copy = pickle.loads(pickle.dumps(batch))
    assert [(r.offset, r.key, r.value, r.headers) for r in copy.records] == \
        [(5, b"k", b"v", [("h", b"1")])]
    records = to_json(batch)["records"]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [(5, "aw==", "dg==")]


def test_headers_only_mode_decodes_no_records():
    rs = decode_record_set(build(2, 0, [(1, b"k", b"v", [])]), records=False)
    assert [b.records for b in rs.batches] == [None]
    assert [b.decoded_count() for b in rs.batches] == [None]


def test_every_batch_slot_is_set():
    """record_batch.decode stores each Batch slot itself (no __init__): none may be left unset
    but a deferred `records`, or reading it would raise AttributeError."""
    buf = build(2, 1, [(1_700_000_000_000, b"k", b"v", [("h", b"1")])], offset=5)
    for kwargs in ({}, {"build": True}, {"records": False}):
        batch = decode_record_set(buf, **kwargs).batches[0]
        for slot in Batch.__slots__:
            if slot != "records" or batch._deferred is None:
                object.__getattribute__(batch, slot)
        assert batch.records is None or len(batch.records) == 1

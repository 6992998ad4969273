"""The records table in Arrow (analysis.records_table) holds what the core's rows say, batch by
batch, on every shipped capture: the arrays wrap the column buffers (from_buffers), the rows read
them with struct (records.columns.iter_rows), two readings of the same bytes."""
import json

import pyarrow as pa
import pytest

import analysis
from analysis.records_table import RecordTable
from dissector.pipeline import dissect
from dissector.records.rows import RECORD_COLUMN_NAMES, record_rows
from tests.support import CAPTURES

NAMES = ["codecs", "transactions", "kafka_python", "librdkafka_produce_consume", "aiokafka",
         "legacy_messageset"]


def port(name):
    return json.loads((CAPTURES / f"{name}.truth.json").read_text())["broker_port"]


def as_row(d):
    d = dict(d)
    if d["timestamp"] is not None:
        d["timestamp"] = pa.scalar(d["timestamp"], pa.timestamp("ns", tz="UTC")).value
    d["headers"] = [dict(h) for h in d["headers"]]
    return tuple(d[n] for n in RECORD_COLUMN_NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_arrow_table_is_the_rows(name):
    exchanges = list(dissect(CAPTURES / f"{name}.pcap", (port(name),), level="records"))
    want = [row for ex in exchanges for row in record_rows(ex)]
    table = RecordTable(rows=7)   # many batches: each one's indices start again
    for ex in exchanges:
        table.add_exchange(ex)
    t = table.table()
    assert len(table) == t.num_rows == len(want) > 0
    assert t.column("key").num_chunks > 1 or len(want) <= 7
    got = [as_row(r) for r in t.to_pylist()]
    assert got == want


def test_load_keeps_the_chunks_and_one_dictionary():
    tables = analysis.load(CAPTURES / "codecs.pcap", port("codecs"), records=True)
    topic = tables.arrow["records"].column("topic")
    assert len({tuple(c.dictionary.to_pylist()) for c in topic.chunks}) == 1
    assert tables.records["topic"].value_counts()["codec-zstd"] > 0
    assert tables.records["value"].dropna().map(len).max() > 100_000


@pytest.mark.parametrize("seed", range(6))
def test_batch_fields_are_pyarrows_own_conversion_with_damaged_values_null(seed):
    """Each batch column is what pyarrow makes of the same values, a value not of the column's
    exact type, out of its range or not encodable (a damaged body's) being null, whether the
    column holds such a value or not."""
    import random

    from analysis import records_table as RT
    from dissector.records.columns import BATCH_COLUMNS
    rng = random.Random(seed)
    odd = [None, True, 1 << 70, -1 << 70, 200, "x", "é", "\ud800", 3.5, b"b"]
    plain = {"string": lambda: rng.choice(["t", "topic-1", "", "x" * 40, "é"]),
             "bool": lambda: rng.random() < 0.5}
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}

    def fits(v, kind):
        if kind == "string":
            return type(v) is str and v.isascii() or v == "é"
        if kind == "bool":
            return type(v) is bool
        return type(v) is int and -(1 << bits[kind] - 1) <= v < 1 << bits[kind] - 1
    for i, (_, kind) in enumerate(BATCH_COLUMNS):
        for damaged in (False, True):
            values = [plain.get(kind, lambda: rng.randrange(-100, 100))() for _ in range(50)]
            if damaged:
                values[rng.randrange(50)] = rng.choice(odd)
            heads = [tuple(v if j == i else None for j in range(len(BATCH_COLUMNS)))
                     for v in values]
            want = pa.array([v if fits(v, kind) else None for v in values], RT._BATCH_TYPES[i])
            assert RT.batch_fields(heads)[i].equals(want), (kind, values)


def test_a_batch_wraps_its_large_buffers_and_copies_its_small_ones(monkeypatch):
    """A batch's arrays read the column buffers themselves where they are large (no copy of the
    keys and values) and exact-size copies of the small ones (which frees their doubled
    allocations in the heap): analysis.records_table.SMALL_BUFFER."""
    from analysis import records_table as RT
    from dissector.records.columns import RecordColumns
    cols = RecordColumns()
    for ex in dissect(CAPTURES / "codecs.pcap", (port("codecs"),), level="records"):
        found = RT.exchange_records(ex)
        if found is not None:
            cols.fill(*found)
    monkeypatch.setattr(RT, "SMALL_BUFFER", 100_000)   # the capture holds 0.5 MB of values
    assert len(cols.value_data) >= RT.SMALL_BUFFER > len(cols.value_offsets) > 0
    value = RT.record_batch(cols).column("value")
    _, offsets, data = value.buffers()
    assert data.address == pa.py_buffer(cols.value_data).address
    assert offsets.address != pa.py_buffer(cols.value_offsets).address
    assert offsets.to_pybytes() == bytes(cols.value_offsets)

"""The partitions table built in columns (analysis.partition_columns) against the row-by-row
specification (analysis.partitions.partition_rows through the generic column builder), on every
shipped capture and the benchmark sources: the same Arrow table in memory, in batches to a sink
and from a parallel run's pieces. And the compiled walk (dissector/_partition_walk.c) against
its Python twins (partition_walk.py_walk_side, py_walk_exchange): the same columns, shape, row
count or exception for every body and exchange of those captures and for random bodies of every
version of every partition API."""
import json
import random

import pyarrow as pa
import pytest

from analysis import partition_columns as PC
from analysis.partitions import row_by_row_table
from analysis.schema import PARTITION_COLUMNS
from dissector import partition_walk
from dissector.partition_walk import Irregular, py_walk_exchange, py_walk_side
from dissector.pipeline import dissect
from dissector.protocol.decode import tables
from tests.protocol.encoder import random_body
from tests.support import CAPTURES, ROOT, require_compiled

try:
    from dissector._partition_walk import walk_exchange as compiled_exchange
    from dissector._partition_walk import walk_side as compiled
except ImportError:
    compiled = compiled_exchange = None

BENCH = ROOT / "benchmarks" / "corpus"


@pytest.fixture(scope="module")
def c_walk():
    return require_compiled(compiled, "partition walk (dissector/_partition_walk.c)")


@pytest.fixture(scope="module")
def c_exchange():
    return require_compiled(compiled_exchange, "partition walk (dissector/_partition_walk.c)")


def _captures():
    for pcap in sorted(CAPTURES.glob("*.pcap")):
        truth = CAPTURES / f"{pcap.name.split('.')[0]}.truth.json"
        yield pcap, json.loads(truth.read_text())["broker_port"]
    for name in ("source.pcap", "source-dense.pcap"):
        meta = BENCH / f"{name}.json"
        if meta.is_file():
            yield BENCH / name, json.loads(meta.read_text())["port"]


@pytest.fixture(scope="module")
def exchanges():
    """(capture name, its exchanges at the bodies and at the records level)."""
    return [(pcap.name, list(dissect(pcap, (port,), level=level)))
            for pcap, port in _captures() for level in ("bodies", "records")]


def test_every_capture_gives_the_row_by_row_table(exchanges):
    rows = 0
    for name, exs in exchanges:
        expected = row_by_row_table(exs)
        table = PC.PartitionTable(batch_rows=97)   # several batches
        batches, handed = [], []
        sunk = PC.PartitionTable(batches.append, batch_rows=50)
        # a parallel run: a worker's table hands over its rows every few exchanges, the
        # parent's cuts its batches where `sunk` did
        worker, counts = PC.PartitionTable(batch_rows=1 << 40), []
        parent = PC.PartitionTable(handed.append, batch_rows=50)
        for i, ex in enumerate(exs):
            table.add_exchange(ex)
            sunk.add_exchange(ex)
            before = len(worker)
            worker.add_exchange(ex)
            if len(worker) > before:
                counts.append(len(worker) - before)
            if i % 7 == 6 or i == len(exs) - 1:
                parent.extend(worker.arrays(), counts)
                counts = []
        sunk.finish()
        parent.finish()
        assert table.table().equals(expected), name
        assert len(table) == len(sunk) == len(parent) == expected.num_rows, name
        assert all(b.schema == expected.schema for b in batches), name
        assert [b.num_rows for b in handed] == [b.num_rows for b in batches], name
        assert all(a.equals(b) for a, b in zip(handed, batches)), name
        streamed = pa.Table.from_batches(batches, expected.schema) if batches else None
        if streamed is not None:
            assert streamed.cast(expected.schema).to_pylist() == expected.to_pylist(), name
        rows += expected.num_rows
    assert rows > 1500


def test_the_python_walk_gives_the_same_table(exchanges, monkeypatch):
    """The pure-Python twin, where the extension is not built, makes the same table."""
    monkeypatch.setattr(PC, "walk_exchange", py_walk_exchange)
    for name, exs in exchanges[:6]:
        table = PC.PartitionTable()
        for ex in exs:
            table.add_exchange(ex)
        assert table.table().equals(row_by_row_table(exs)), name


def _outcome(walk, topics, side, shape, start=3):
    cols = [[] for _ in PARTITION_COLUMNS]
    try:
        got = walk(cols, start, topics, side, PC.LAYOUT, shape)
    except (Irregular, AttributeError, TypeError, IndexError, KeyError) as exc:
        got = type(exc)
    return got, cols


def _compare(c_walk, api_key, req, resp):
    """Both walks on both bodies, the second given the first's shape; returns how many were
    walked."""
    shape, walked = None, 0
    for sided, body in zip(PC.SIDES[api_key], (req, resp)):
        if sided is None or body is None:
            continue
        topics, side = sided
        try:
            listed = topics(body)
        except AttributeError:
            continue
        ours = _outcome(py_walk_side, listed, side, shape)
        assert _outcome(c_walk, listed, side, shape) == ours, (api_key, side)
        walked += 1
        if isinstance(ours[0], list) and ours[0]:
            shape = ours[0]
    return walked


def test_compiled_walk_is_its_twin_on_every_capture(c_walk, exchanges):
    walked = 0
    for _, exs in exchanges:
        for ex in exs:
            if ex.api_key in PC.SIDES:
                walked += _compare(c_walk, ex.api_key,
                                   ex.request_msg.body if ex.request_msg else None,
                                   ex.response_msg.body if ex.response_msg else None)
    assert walked > 1000


@pytest.mark.parametrize("api_key", sorted(PC.SIDES))
def test_compiled_walk_is_its_twin_on_random_bodies(c_walk, c_exchange, api_key):
    rnd = random.Random(f"partition walk {api_key}")
    requests, responses = tables(api_key)
    for version in sorted(set(requests) & set(responses)):
        for _ in range(8):
            req = random_body(requests[version][1], rnd)
            resp = random_body(responses[version][1], rnd)
            _compare(c_walk, api_key, req, resp)
            _compare(c_walk, api_key, None, resp)
            _compare_exchange(c_exchange, api_key, req, resp)
            _compare_exchange(c_exchange, api_key, None, resp)


_START = 3   # rows already in the columns, each holding 7, None, -1


def _exchange_outcome(walk, sides, req, resp, offsets, cols=None):
    cols = cols if cols is not None else [[7, None, -1] for _ in PARTITION_COLUMNS]
    try:
        got = walk(cols, _START, sides, req, resp, PC.LAYOUT, offsets)
    except (Irregular, AttributeError, TypeError, IndexError, KeyError) as exc:
        got = type(exc)
    return got, cols


def _compare_exchange(c_walk, api_key, req, resp):
    """Both exchange walks on the bodies; returns the rows the twin wrote (0 on an error)."""
    args = (PC.SIDES[api_key], req, resp, PC._OFFSETS.get(api_key))
    ours = _exchange_outcome(py_walk_exchange, *args)
    assert _exchange_outcome(c_walk, *args) == ours, api_key
    return ours[0] if isinstance(ours[0], int) else 0


def test_compiled_exchange_walk_is_its_twin_on_every_capture(c_exchange, exchanges):
    rows = produced = 0
    for _, exs in exchanges:
        for ex in exs:
            if ex.api_key in PC.SIDES:
                n = _compare_exchange(c_exchange, ex.api_key,
                                      ex.request_msg.body if ex.request_msg else None,
                                      ex.response_msg.body if ex.response_msg else None)
                rows += n
                produced += n if ex.api_key == PC.PRODUCE else 0
    assert rows > 1500 and produced > 100


def test_compiled_produced_offsets_are_the_twins(c_exchange):
    """The first and last offsets of the records a Produce response placed, for base offsets
    and counts of every kind a damaged body can give: the same values, or the same error."""
    class Odd(int):
        pass
    values = [None, 0, 1, -1, 5, True, False, 2 ** 63 - 1, 2 ** 70, -(2 ** 70), Odd(4), 1.5, "3",
              b"x"]
    offsets = PC._OFFSETS[PC.PRODUCE]
    for base in values:
        for count in values:
            outcomes = []
            for walk in (py_walk_exchange, c_exchange):
                cols = [[7, None, -1] for _ in PARTITION_COLUMNS]
                cols[PC._PARTITION] += [0, 1]
                cols[PC._BASE_OFF] += [base]   # the second row's is padded
                cols[PC._RECORDS] += [count, count]
                outcomes.append(_exchange_outcome(walk, (None, None), None, None, offsets, cols))
            assert outcomes[0] == outcomes[1], (base, count)
            assert outcomes[0][0] in (2, TypeError), (base, count)


def test_a_second_body_listing_other_partitions_is_irregular(c_walk):
    """Merged by key row by row: the walk refuses, both the same way, and the table still
    matches the specification (checked on the captures above, whose brokers answer topics in
    another order than asked)."""
    topics, side = PC.SIDES[PC.OFFSET_COMMIT][1]
    shape = [("a", [0, 1])]
    for walk in (py_walk_side, c_walk):
        with pytest.raises(Irregular):
            walk([[] for _ in PARTITION_COLUMNS], 0, [], side, PC.LAYOUT, shape)


def test_a_walk_within_a_walk_keeps_the_outer_walks_parse(c_walk):
    """The compiled walk keeps its parse of each (side, layout) pair. A walk run by Python
    within another (here by the layout's topic id function, 40 pairs of fresh tuples: more than
    are kept) is parsed apart and replaces nothing in use: both walks give the twin's rows."""
    from types import SimpleNamespace as NS

    def body(name):
        return [NS(name=name, topic_id=None, partitions=[NS(partition_index=i, error_code=i)
                                                         for i in range(3)])]
    side = ("partitions", "partition_index", ((PC._ERROR[0], "error_code", True),), None, -1)
    inner = []

    def topic_id(value):   # the inner walks write the codes to another column
        for _ in range(40):
            cols = [[] for _ in PARTITION_COLUMNS]
            fresh = side[:2] + (((PC._LEADER, "error_code", True),),) + side[3:], PC.LAYOUT[:]
            c_walk(cols, 0, body("inner"), fresh[0], tuple(list(fresh[1])), None)
            inner.append(cols)
        return PC.topic_id(value)
    layout = PC.LAYOUT[:-1] + (topic_id,)
    outer = []
    for walk in (c_walk, py_walk_side):
        cols = [[] for _ in PARTITION_COLUMNS]
        walk(cols, 0, body("outer") + body("other"), side, layout, None)
        outer.append(cols)
    assert outer[0] == outer[1] and outer[0][PC._ERROR[0]] == [0, 1, 2] * 2
    assert inner and all(cols == inner[0] for cols in inner)
    assert inner[0][PC._TOPIC] == ["inner"] * 3 and inner[0][PC._LEADER] == [0, 1, 2]


def test_the_compiled_walk_is_used():
    assert compiled is None or partition_walk.walk_side is compiled

"""The parent of `records --jobs N` (and of a parallel load) puts the workers' records in one
process's order (parallel_records._gathered): run by run where they come in long runs, else row
by row with Arrow's `take`. Both must give the rows `take` gives, for every kind of column the
records table has, runs that cross from one worker's step to the next included."""
import random

import numpy as np
import pyarrow as pa
import pytest

from analysis import parallel_records as PR


def _parts(rnd, sizes):
    def column(n):
        return [
            pa.array([rnd.randrange(1 << 40) if rnd.random() < 0.9 else None for _ in range(n)],
                     pa.int64()),
            pa.array([bytes(rnd.randrange(256) for _ in range(rnd.randrange(40)))
                      if rnd.random() < 0.8 else None for _ in range(n)], pa.binary()),
            pa.array([[{"key": f"k{rnd.randrange(9)}", "value": b"v" * rnd.randrange(5)}
                       for _ in range(rnd.randrange(3))] for _ in range(n)],
                     pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    # slices, as the parent's parts are (offsets into the workers' arrays)
    return [[a.slice(2, n) for a in column(n + 4)] for n in sizes]


def _taken(parts, at):
    index = pa.array(at, pa.int64())
    return [pa.concat_arrays([p[i] for p in parts]).take(index) for i in range(len(parts[0]))]


@pytest.mark.parametrize("seed", range(12))
def test_gathered_is_take(seed):
    rnd = random.Random(seed)
    parts = _parts(rnd, [rnd.randrange(0, 300) for _ in range(rnd.randrange(1, 5))])
    total = sum(len(p[0]) for p in parts)
    if not total:
        return
    at, runs = [], rnd.choice([1, 3, 40, 200])   # rows a run, about
    while len(at) < total:
        start = rnd.randrange(total)
        at += range(start, min(total, start + rnd.randrange(1, 2 * runs)))
    at = np.array(at, np.int64)
    got = PR._gathered(parts, at)
    for a, b in zip(got, _taken(parts, at)):
        assert a.equals(b)
        assert a.type == b.type and a.null_count == b.null_count


def test_long_runs_are_copied_run_by_run_short_ones_taken():
    parts = _parts(random.Random(1), [100, 100])
    assert PR._runs(parts, np.arange(150, dtype=np.int64)) == [(0, 0, 100), (1, 0, 50)]
    assert PR._runs(parts, np.arange(0, 200, 2, dtype=np.int64)) is None
    assert PR._runs(parts, np.array([], np.int64)) is None


@pytest.mark.parametrize("step", [1, 2])   # run by run; taken
def test_gathered_columns_live_in_the_system_allocator(step):
    """The gathered copies are made in GATHER_POOL (the C library's allocator): under pyarrow's
    default one the parent of a parallel load spent much of its CPU in the kernel, clearing
    fresh huge pages (benchmarks/README.md)."""
    parts = _parts(random.Random(2), [300, 300])
    pool = PR.GATHER_POOL
    before = pool.bytes_allocated()
    got = PR._gathered(parts, np.arange(0, 600, step, dtype=np.int64))
    assert pool.backend_name == "system"
    assert pool.bytes_allocated() - before >= sum(a.nbytes for a in got) // 2

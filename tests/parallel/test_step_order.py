"""The parent of a parallel load places each exchange's rows among the workers' in numpy
(parallel_tables._rows_at) and sums the connections' totals column by column
(load._Collector.count_all); the exchange-by-exchange ways they replaced are their
specification."""
import random

import numpy as np
import pytest

from analysis import parallel_tables as PT
from analysis.load import _Collector


def _one_by_one(owner, counts, sizes):
    starts = [sum(sizes[:w]) for w in range(len(sizes))]
    at = []
    for w, n in zip(owner, counts):
        at.extend(range(starts[w], starts[w] + n))
        starts[w] += n
    return at


@pytest.mark.parametrize("seed", range(20))
def test_rows_at_is_the_loop(seed):
    rnd = random.Random(seed)
    jobs = rnd.randrange(1, 4)
    tokens = rnd.randrange(0, 60)
    owner = [rnd.randrange(jobs) for _ in range(tokens)]
    counts = [rnd.choice([0, 0, 1, 1, 2, 7]) for _ in range(tokens)]
    sizes = [sum(n for o, n in zip(owner, counts) if o == w) + rnd.randrange(3)
             for w in range(jobs)]
    got = PT._rows_at(np.asarray(owner, np.int64), np.asarray(counts, np.int64), sizes)
    assert got.tolist() == _one_by_one(owner, counts, sizes)


@pytest.mark.parametrize("seed", range(20))
def test_count_all_is_count_one_by_one(seed):
    rnd = random.Random(seed)
    n = rnd.randrange(0, 80)
    ids = [rnd.randrange(5) for _ in range(n)]
    if seed % 5 == 4 and n:
        ids[rnd.randrange(n)] = None   # not a plain id: the one-by-one way
    clients = [rnd.choice([None, "a", "b", "c"]) for _ in range(n)]
    req = [rnd.randrange(1 << 33) for _ in range(n)]
    resp = [rnd.randrange(1 << 20) for _ in range(n)]
    one, all_ = _Collector(False), _Collector(False)
    for _ in range(2):   # a second step adds to the first's totals
        for values in zip(ids, clients, req, resp):
            one.count(*values)
        all_.count_all(ids, clients, req, resp)
    assert all_.conn_stats == one.conn_stats

"""A parallel run's tables (dissector.parallel): built in the workers, put in order by the parent.

A worker turns its exchanges of a step into Arrow arrays, one set per table (exchanges,
partitions, issues), and a token per exchange. The parent takes each table's rows in one
process's order (one `take` per column over the workers' arrays) and hands them to its builders,
which cut the batches where one process would have (ColumnBuilder.extend, PartitionTable.extend):
the Parquet files are byte for byte those of one process. The parent used to unpickle every
exchange's rows and append them value by value, which was most of its CPU and kept the run
from scaling.
"""
from __future__ import annotations

from itertools import chain

import numpy as np
import pyarrow as pa

from dissector.parallel import Shared
from dissector.tables import issue_row

from .columns import UNCUT, ColumnBuilder
from .parallel_records import render as record_arrays, taken
from .partition_columns import PartitionTable


class WorkerTables:
    """In a worker: render(exchanges) gives a Shared token per exchange, None for one the filter
    leaves out, else (its partitions rows, its issue rows, connection id, client id, request
    bytes, response bytes, its record batches); `shared` is the step's rows: ((exchange arrays,
    their payloads), partition arrays, (issue arrays, their payloads), the records as
    parallel_records shares them, or None without `records`)."""

    def __init__(self, row, exchange_columns, issue_columns, client_id, records=False):
        self.row = row   # the exchange's row, None when left out (load._Collector.row)
        self.client_id = client_id
        self.records = records
        # they hold a whole step: the parent's builders cut the batches
        self.exchanges = ColumnBuilder(exchange_columns, batch_rows=UNCUT, batch_bytes=UNCUT)
        self.issues = ColumnBuilder(issue_columns, batch_rows=UNCUT, batch_bytes=UNCUT)
        self.partitions = PartitionTable(batch_rows=UNCUT)

    def render(self, exchanges) -> Shared:
        tokens = Shared()
        partitions = self.partitions
        kept = []
        for ex in exchanges:
            row = self.row(ex)
            if row is None:
                tokens.append(None)
                continue
            kept.append(len(tokens))
            self.exchanges.append(row)
            before = len(partitions)
            partitions.add_exchange(ex, row)
            for issue in ex.issues:
                self.issues.append(issue_row(issue))
            tokens.append((len(partitions) - before, len(ex.issues), row[0],
                           row[self.client_id],
                           ex.request.length if ex.request is not None else 0,
                           ex.response.length if ex.response is not None else 0, 0))
        records = None
        if self.records:
            batches = record_arrays([exchanges[i] for i in kept])
            for i, n in zip(kept, batches):
                tokens[i] = tokens[i][:6] + (n,)
            records = batches.shared
        tokens.shared = (self.exchanges.arrays(), partitions.arrays(), self.issues.arrays(),
                         records)
        return tokens


def add_step(col, tokens, whose, shared) -> None:
    """The workers' step (`tokens` in exchange order, `whose` their workers, `shared` each
    worker's WorkerTables.render value) added to load._Collector `col` in that order. Where
    each exchange's rows are among the workers' is worked out in numpy, not exchange by
    exchange (on dense traffic a Python step per exchange was a fifth of the parent's CPU)."""
    kept = [i for i, t in enumerate(tokens) if t is not None]
    if kept:
        parts, issues, connection_ids, client_ids, request_bytes, response_bytes, _ = zip(
            *[tokens[i] for i in kept])
        owner = np.asarray(whose, np.int64)[kept]
        parts, issues = np.asarray(parts, np.int64), np.asarray(issues, np.int64)
        ex_at = _rows_at(owner, np.ones(len(kept), np.int64), [len(s[0][1]) for s in shared])
        col.exchanges.extend(*_taken([s[0] for s in shared], ex_at))
        if parts.any():
            part_at = _rows_at(owner, parts, [len(s[1][0]) for s in shared])
            col.partitions.extend(_arrays_taken([s[1] for s in shared], part_at),
                                  parts[parts > 0].tolist())
        if issues.any():
            issue_at = _rows_at(owner, issues, [len(s[2][1]) for s in shared])
            col.issues.extend(*_taken([s[2] for s in shared], issue_at))
        col.count_all(connection_ids, client_ids, request_bytes, response_bytes)
    if col.want_records:
        col.records.write([t and t[6] for t in tokens], None, whose, [s[3] for s in shared])


def _rows_at(owner, counts, sizes):
    """The rows, among all workers' rows of a table one after another (worker w's `sizes[w]`),
    of exchanges whose worker is `owner` and that have `counts` rows each, in exchange order:
    each worker's rows in its exchanges' order."""
    first = np.empty(len(counts), np.int64)   # each exchange's first row
    base = 0
    for w, size in enumerate(sizes):
        mine = owner == w
        n = counts[mine]
        first[mine] = base + np.cumsum(n) - n
        base += size
    before = np.cumsum(counts) - counts
    total = int(before[-1] + counts[-1]) if len(counts) else 0
    return np.repeat(first - before, counts) + np.arange(total)


def _taken(parts, at):
    """The rows at `at` of the workers' (arrays, payloads) parts, one after another."""
    sizes = np.fromiter(chain.from_iterable(p[1] for p in parts), np.int64)
    return _arrays_taken([p[0] for p in parts], at), sizes[at].tolist()


def _arrays_taken(parts, at) -> list:
    """The rows at `at` of the workers' arrays, one after another, column by column."""
    return taken(parts, pa.array(at, pa.int64()))

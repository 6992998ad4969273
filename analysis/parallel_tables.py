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

import pyarrow as pa
import pyarrow.compute as pc

from dissector.parallel import Shared
from dissector.tables import issue_row

from .columns import UNCUT, ColumnBuilder
from .parallel_records import GATHER_POOL, render as record_arrays
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
    worker's WorkerTables.render value) added to load._Collector `col` in that order."""
    jobs = len(shared)
    # where each worker's rows start among all workers' rows, per table
    starts = [[0, 0, 0] for _ in range(jobs)]
    for w in range(1, jobs):
        prev = shared[w - 1]
        starts[w] = [starts[w - 1][0] + len(prev[0][1]), starts[w - 1][1] + len(prev[1][0]),
                     starts[w - 1][2] + len(prev[2][1])]
    ex_at, part_at, issue_at, part_counts = [], [], [], []
    for token, w in zip(tokens, whose):
        if token is None:
            continue
        parts, issues, connection_id, client_id, request_bytes, response_bytes, _ = token
        at = starts[w]
        ex_at.append(at[0])
        at[0] += 1
        if parts:
            part_at.extend(range(at[1], at[1] + parts))
            part_counts.append(parts)
            at[1] += parts
        if issues:
            issue_at.extend(range(at[2], at[2] + issues))
            at[2] += issues
        col.count(connection_id, client_id, request_bytes, response_bytes)
    if ex_at:
        col.exchanges.extend(*_taken([s[0] for s in shared], ex_at))
    if part_at:
        col.partitions.extend(_arrays_taken([s[1] for s in shared], part_at), part_counts)
    if issue_at:
        col.issues.extend(*_taken([s[2] for s in shared], issue_at))
    if col.want_records:
        col.records.write([t and t[6] for t in tokens], None, whose, [s[3] for s in shared])


def _taken(parts, at):
    """The rows at `at` of the workers' (arrays, payloads) parts, one after another."""
    sizes = list(chain.from_iterable(p[1] for p in parts))
    return _arrays_taken([p[0] for p in parts], at), [sizes[i] for i in at]


def _arrays_taken(parts, at) -> list:
    """The rows at `at` of the workers' arrays, one after another, column by column."""
    index = pa.array(at, pa.int64())
    return [pc.take(pa.concat_arrays([p[i] for p in parts], memory_pool=GATHER_POOL), index,
                    memory_pool=GATHER_POOL) for i in range(len(parts[0]))]

"""`records --format parquet --jobs N`: the workers decode the records into Arrow arrays, the parent
writes one process's row groups from them.

A worker turns a step's exchanges into one RecordColumns and sends the records' own columns
(OWN), the batch fields of each batch with records, and per batch its records and bytes (what
record_chunks counts to cut). The parent walks the batches in one process's order, cuts a row
group where record_chunks would, takes its records from the workers' arrays and makes its batch
columns and trace context as record_batch does: the file is byte for byte one process's.
"""
from __future__ import annotations

from array import array

import numpy as np
import pyarrow as pa

from dissector.parallel import Shared
from dissector.records.columns import sourced_chunks

from .columns import UNCUT
from .records_table import OWN, assembled, batch_fields, own_columns


def render(exchanges) -> Shared:
    """In a worker: a Shared token per exchange (how many of its batches have records); shared
    is (OWN arrays, the batches' fields as arrays, each batch's records and bytes)."""
    tokens = Shared([0] * len(exchanges))
    tokens.shared = (None, None, [], [])
    for cols, sources in sourced_chunks(exchanges, UNCUT, UNCUT):   # one: never cut
        for i, _ in sources:
            tokens[i] += 1
        rows = [n for _, n in sources]
        own = own_columns(cols)
        tokens.shared = ([own[name] for name in OWN], batch_fields(cols.batches), rows,
                         _batch_bytes(cols, rows))
    return tokens


def _batch_bytes(cols, rows) -> list:
    """Each batch's share of cols.data_bytes: its keys', values' and headers' bytes and 32 a
    record."""
    ends = np.cumsum(rows)
    starts = ends - rows

    def spans(buffer, lo, hi):
        offsets = np.frombuffer(buffer, np.int32)
        return offsets[hi] - offsets[lo]
    headers = np.frombuffer(cols.header_offsets, np.int32)
    h0, h1 = headers[starts], headers[ends]
    total = (spans(cols.key_offsets, starts, ends) + spans(cols.value_offsets, starts, ends)
             + spans(cols.hkey_offsets, h0, h1) + spans(cols.hvalue_offsets, h0, h1)
             + 32 * np.asarray(rows))
    return total.tolist()


class Writer:
    """In the parent: the workers' steps (write) as row groups of at most `rows` records or
    about `data_bytes` (record_chunks' cut) handed to `sink`; `count` the records so far."""

    def __init__(self, sink, rows, data_bytes):
        self.sink = sink
        self.max_rows, self.max_bytes = rows, data_bytes
        self.count = 0
        self._new()

    def _new(self):
        self.parts = []     # [OWN arrays, first record, records]: runs of a worker's records
        self.fields = []    # [field arrays, first batch, batches]: and of their batches
        self.batches = 0
        self.batch_index = array("i")
        self.rows = self.bytes = 0

    def write(self, tokens, _first, whose, shared) -> None:
        batch = [0] * len(shared)    # per worker: its next batch
        record = [0] * len(shared)   # and that batch's first record
        for batches, w in zip(tokens, whose):
            arrays, fields, rows, sizes = shared[w]
            for _ in range(batches or 0):
                b, start, n = batch[w], record[w], rows[batch[w]]
                batch[w] += 1
                record[w] += n
                _run(self.parts, arrays, start, n)
                _run(self.fields, fields, b, 1)
                self.batch_index.extend([self.batches] * n)
                self.batches += 1
                self.rows += n
                self.bytes += sizes[b]
                if self.rows >= self.max_rows or self.bytes >= self.max_bytes:
                    self.finish()

    def finish(self) -> None:
        """The records so far as a row group."""
        if not self.rows:
            return
        own = dict(zip(OWN, _joined(self.parts)))
        batch = assembled(own, _joined(self.fields), self.batch_index)
        self.count += self.rows
        self._new()
        self.sink(batch)


def _run(runs, arrays, start, n) -> None:
    """Rows start..start+n of `arrays` after `runs`: the last run grown when they follow it."""
    if runs and runs[-1][0] is arrays and runs[-1][1] + runs[-1][2] == start:
        runs[-1][2] += n
    else:
        runs.append([arrays, start, n])


def _joined(runs) -> list:
    """The rows of `runs`, one array per column."""
    return [pa.concat_arrays([arrays[i].slice(start, n) for arrays, start, n in runs])
            for i in range(len(runs[0][0]))]

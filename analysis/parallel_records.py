"""`records --format parquet --jobs N`: the workers decode the records into Arrow arrays, the parent
writes one process's row groups from them.

A worker turns a step's exchanges into one RecordColumns and sends the records' own columns
(OWN), the batch fields of each batch with records, and per batch its records and bytes (what
record_chunks counts to cut). The parent walks the batches in one process's order, cuts a row
group where record_chunks would, takes its records from the workers' arrays and makes its batch
columns and trace context as record_batch does: the file is byte for byte one process's.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dissector.parallel import Shared
from dissector.records.columns import sourced_chunks

from .columns import UNCUT
from .records_table import OWN, assembled, batch_fields, own_columns

# Where the parent's copies of the workers' columns are made: the C library's allocator, not
# pyarrow's default (mimalloc). A load of the 400 MB bulk capture with two workers: the parent's
# CPU 2.4 s -> 1.7 s (medians of 3), most of the difference system time, the kernel clearing
# fresh huge pages under mimalloc's allocations of the gathered values.
GATHER_POOL = pa.system_memory_pool()


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
    about `data_bytes` (record_chunks' cut) handed to `sink`; `count` the records so far. The
    batches are followed in numpy arrays, not one by one: on dense traffic a batch holds a
    record or two, and a Python step per batch was most of the parent's time."""

    def __init__(self, sink, rows, data_bytes):
        self.sink = sink
        self.max_rows, self.max_bytes = rows, data_bytes
        self.count = 0
        self.sources = []   # the workers' steps' (OWN arrays, field arrays); None once used
        self._new()

    def _new(self):
        self.pending = []   # arrays of (source, batch there, its first record, its records)
        self.rows = self.bytes = 0

    def write(self, tokens, _first, whose, shared) -> None:
        counts = np.fromiter((t or 0 for t in tokens), np.int64, len(tokens))
        owner = np.repeat(np.asarray(whose, np.int64), counts)   # each batch's worker, in order
        total = len(owner)
        if not total:
            return
        self._forget()
        source, batch, first, rows, sizes = (np.empty(total, np.int64) for _ in range(5))
        for w, (arrays, fields, counted, sized) in enumerate(shared):
            mine = np.flatnonzero(owner == w)
            if len(mine):
                counted = np.asarray(counted, np.int64)
                source[mine] = len(self.sources)
                self.sources.append((arrays, fields))
                batch[mine] = np.arange(len(mine))
                first[mine] = np.cumsum(counted) - counted
                rows[mine] = counted
                sizes[mine] = sized
        at = 0
        while at < total:   # cut where record_chunks does: after the batch that fills it
            held_rows = self.rows + np.cumsum(rows[at:])
            held_bytes = self.bytes + np.cumsum(sizes[at:])
            full = np.flatnonzero((held_rows >= self.max_rows) | (held_bytes >= self.max_bytes))
            end = at + int(full[0]) + 1 if len(full) else total
            self.pending.append((source[at:end], batch[at:end], first[at:end], rows[at:end]))
            self.rows, self.bytes = int(held_rows[end - at - 1]), int(held_bytes[end - at - 1])
            at = end
            if len(full):
                self.finish()

    def _forget(self) -> None:
        """Let go of the steps no pending batch is from."""
        live = {int(s) for chunk in self.pending for s in np.unique(chunk[0])}
        for s in range(len(self.sources)):
            if s not in live:
                self.sources[s] = None

    def finish(self) -> None:
        """The records so far as a row group."""
        if not self.rows:
            return
        source, batch, first, rows = (np.concatenate(x) for x in zip(*self.pending))
        records = int(rows.sum())
        starts = np.repeat(np.cumsum(rows) - rows, rows)
        record = np.repeat(first, rows) + (np.arange(records) - starts)   # in its step
        record_source = np.repeat(source, rows)
        own_parts, field_parts = [], []
        record_at, batch_at = np.empty(records, np.int64), np.empty(len(batch), np.int64)
        for s in np.unique(source):   # the records and batches used of each step, sliced
            arrays, fields = self.sources[s]
            _slice(own_parts, arrays, record, record_source == s, record_at)
            _slice(field_parts, fields, batch, source == s, batch_at)
        own = dict(zip(OWN, _gathered(own_parts, record_at)))
        index = np.repeat(np.arange(len(batch), dtype=np.int32), rows)
        table_batch = assembled(own, _gathered(field_parts, batch_at), index)
        self.count += self.rows
        self._new()
        self.sink(table_batch)


def _slice(parts, arrays, rows, mask, at) -> None:
    """The slice of `arrays` from the first to the last of rows[mask] added to `parts`; where
    those rows are in all of `parts` written in `at`."""
    used = rows[mask]
    lo, hi = int(used.min()), int(used.max()) + 1
    at[mask] = used - lo + sum(len(p[0]) for p in parts)
    parts.append([a.slice(lo, hi - lo) for a in arrays])


def _gathered(parts, at) -> list:
    """Rows `at` of `parts` joined, one array per column: copied run by run where the rows come
    in runs of RUN_ROWS or more on average (bulk traffic: a batch's records, the values the most
    of the bytes; `take` gathered them one by one, most of the parent's CPU), else taken. The
    copies are made in GATHER_POOL."""
    at = np.ascontiguousarray(at, np.int64)
    runs = _runs(parts, at)
    if runs is not None:
        return [pa.concat_arrays([parts[p][i].slice(start, n) for p, start, n in runs],
                                 memory_pool=GATHER_POOL)
                for i in range(len(parts[0]))]
    return taken(parts, pa.Array.from_buffers(pa.int64(), len(at), [None, pa.py_buffer(at)]))


def taken(parts, index) -> list:
    """Rows `index` (an Arrow int64 array) of `parts` (one list of arrays per part, the same
    columns) joined, one array per column, in GATHER_POOL."""
    return [pc.take(pa.concat_arrays([p[i] for p in parts], memory_pool=GATHER_POOL), index,
                    memory_pool=GATHER_POOL) for i in range(len(parts[0]))]


RUN_ROWS = 16


def _runs(parts, at):
    """(part, first row there, rows) per run of consecutive rows of one part in `at` (rows of
    `parts` one after another), or None where the runs are shorter than RUN_ROWS on average."""
    if not len(at):
        return None
    sizes = [len(p[0]) for p in parts]
    ends = np.cumsum(sizes)
    part = np.searchsorted(ends, at, side="right")
    breaks = np.flatnonzero((np.diff(at) != 1) | (np.diff(part) != 0)) + 1
    if (len(breaks) + 1) * RUN_ROWS > len(at):
        return None
    firsts = np.concatenate(([0], breaks))
    lengths = np.diff(np.concatenate((firsts, [len(at)])))
    starts = ends - sizes
    return [(int(part[f]), int(at[f] - starts[part[f]]), int(n))
            for f, n in zip(firsts, lengths)]

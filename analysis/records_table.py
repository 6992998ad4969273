"""The records table as Arrow: the core's column buffers (dissector.records.columns) wrapped
(pa.Array.from_buffers; only the small ones copied, SMALL_BUFFER), the batch fields built once
per batch and repeated by index (take).

RecordTable is fed exchange by exchange and cuts a batch every CHUNK_ROWS rows or about
CHUNK_BYTES of keys, values and headers: each batch goes to a sink (streaming: Parquet row
groups, memory bounded by one batch) or is kept for table() (in memory: the batches stay chunks
of one table, never concatenated, so the frame's buffers are the only copy).
"""
from __future__ import annotations

import pyarrow as pa

from dissector.records.columns import (BATCH_COLUMNS, BATCH_KINDS, CHUNK_BYTES, CHUNK_ROWS,
                                       RecordColumns, batch_buffers, exchange_records,
                                       record_chunks)
from dissector.records.rows import RECORD_COLUMNS

from .columns import kept_table, shared_nulls, table_schema
from .parquet_codec import DEFAULT as DEFAULT_CODEC
from .schema import CATEGORICAL, arrow_type
from .trace_context import TRACE_COLUMNS, trace_columns

# the core's columns, then the trace context parsed from the headers (analysis.trace_context)
RECORD_TABLE_COLUMNS = RECORD_COLUMNS + TRACE_COLUMNS
SCHEMA = table_schema(RECORD_TABLE_COLUMNS)
_BATCH_TYPES = tuple(arrow_type(kind) for _, kind in BATCH_COLUMNS)
_BATCH_INDEX = {name: i for i, (name, _) in enumerate(BATCH_COLUMNS)}
_HEADER = arrow_type("list<struct<key: string, value: binary>>")
OWN = ("offset", "timestamp", "key", "value", "headers")   # a record's own columns


def record_batch(cols: RecordColumns) -> pa.RecordBatch:
    """The rows of `cols` as one RecordBatch in RECORD_TABLE_COLUMNS order, over its buffers
    (_wrapped: the bytearrays must not grow afterwards)."""
    take = pa.Array.from_buffers(pa.int32(), cols.rows, [None, _wrapped(cols.batch_index)])
    batch = [_encoded(i, column).take(take) for i, column in enumerate(batch_fields(cols.batches))]
    return _assembled(own_columns(cols), batch)


# The buffers grow by doubling. A large one is a mapping of its own, whose pages past what was
# written are never resident: wrapped as it is (copying the keys and values to exact size, and
# faulting in fresh pages for them, was 8% of a dense load's CPU). A small one lies in the heap,
# in memory used before: copied to its exact size, which frees the rest for the next batch
# (load(records=True) peak RSS, dense400: 633 MB wrapping all, 627 MB copying all, 621 MB so).
SMALL_BUFFER = 1 << 20


def _wrapped(b) -> pa.Buffer:
    return pa.py_buffer(bytes(b) if len(b) < SMALL_BUFFER else b)


def own_columns(cols: RecordColumns) -> dict:
    """The records' own columns (OWN: name -> array) over the buffers of `cols`."""
    n = cols.rows
    buf = _wrapped

    def binary(valid, offsets, data, typ=pa.binary()):
        return pa.Array.from_buffers(typ, n, [buf(valid), buf(offsets), buf(data)])

    headers = len(cols.hkey_offsets) // 4 - 1
    struct = pa.StructArray.from_arrays(
        [pa.Array.from_buffers(pa.string(), headers, [None, buf(cols.hkey_offsets),
                                                      buf(cols.hkey_data)]),
         pa.Array.from_buffers(pa.binary(), headers, [buf(cols.hvalue_valid),
                                                      buf(cols.hvalue_offsets),
                                                      buf(cols.hvalue_data)])],
        fields=list(_HEADER.value_type))
    return {
        "offset": pa.Array.from_buffers(pa.int64(), n, [buf(cols.offset_valid),
                                                        buf(cols.offset)]),
        "timestamp": pa.Array.from_buffers(arrow_type("timestamp"), n,
                                           [buf(cols.timestamp_valid), buf(cols.timestamp)]),
        "key": binary(cols.key_valid, cols.key_offsets, cols.key_data),
        "value": binary(cols.value_valid, cols.value_offsets, cols.value_data),
        "headers": pa.ListArray.from_buffers(_HEADER, n, [None, buf(cols.header_offsets)],
                                             children=[struct]),
    }


def _assembled(own, batch) -> pa.RecordBatch:
    """The table's batch from the records' own columns (OWN: name -> array) and the batch
    columns (repeated per record), the trace context parsed from the headers."""
    arrays = [own[name] if name in own else batch[_BATCH_INDEX[name]]
              for name, _ in RECORD_COLUMNS]
    return pa.RecordBatch.from_arrays(shared_nulls(arrays + trace_columns(own["headers"])),
                                      schema=SCHEMA)


def assembled(own, fields, batch_index) -> pa.RecordBatch:
    """record_batch() of records given as arrays elsewhere: `own` (name -> array, OWN), the
    fields of their batches (batch_fields()) and each record's batch there (an array("i"))."""
    take = pa.Array.from_buffers(pa.int32(), len(batch_index),
                                 [None, pa.py_buffer(batch_index)])
    return _assembled(own, [_encoded(i, column).take(take) for i, column in enumerate(fields)])


def batch_fields(batches) -> list:
    """The batch fields of `batches` (one row each) as plain arrays, one per BATCH_COLUMNS,
    over records.columns.batch_buffers (pa.array on a list imports pandas); a damaged body's
    value of the wrong type or out of range is null, as in analysis.columns."""
    n = len(batches)
    return [pa.Array.from_buffers(typ, n, [None if b is None else pa.py_buffer(b) for b in bufs])
            for typ, bufs in zip(_BATCH_TYPES, batch_buffers(batches, BATCH_KINDS), strict=True)]


def _encoded(i, column):
    return column.dictionary_encode() if BATCH_COLUMNS[i][0] in CATEGORICAL else column


class RecordTable:
    """The records of exchanges added one by one, cut into batches (see the module doc).
    len() is the number of rows added so far."""

    def __init__(self, sink=None, rows=None, data_bytes=None):
        self._sink = sink
        self._rows, self._bytes = rows or CHUNK_ROWS, data_bytes or CHUNK_BYTES
        self._cols = RecordColumns()
        self._batches = []
        self._done = 0
        self._parallel = None   # a parallel_records.Writer: write()

    def __len__(self):
        return self._done + self._cols.rows + (self._parallel.rows if self._parallel else 0)

    def write(self, tokens, first, whose, shared) -> None:
        """A parallel run's records (analysis.parallel_records), cut as add_exchange cuts;
        not mixed with add_exchange."""
        if self._parallel is None:
            from .parallel_records import Writer
            self._parallel = Writer(self._built, self._rows, self._bytes)
        self._parallel.write(tokens, first, whose, shared)

    def _built(self, batch) -> None:
        self._done += batch.num_rows
        if self._sink is None:
            self._batches.append(batch)
        else:
            self._sink(batch)

    def add_exchange(self, ex) -> None:
        found = exchange_records(ex)
        if found is None:
            return
        stem, sets = found
        at = batch_at = 0
        while at < len(sets):
            at, batch_at, full = self._cols.fill(stem, sets, at, batch_at, self._rows,
                                                 self._bytes)
            if full:
                self._cut()

    def _cut(self) -> None:
        cols = self._cols
        if not cols.rows:
            return
        self._cols = RecordColumns()
        self._done += cols.rows
        batch = record_batch(cols)
        if self._sink is None:
            self._batches.append(batch)
        else:
            self._sink(batch)

    def finish(self) -> None:
        if self._parallel is not None:
            self._parallel.finish()
        self._cut()

    def table(self) -> pa.Table:
        """The kept batches as one table (analysis.columns.kept_table)."""
        self.finish()
        return kept_table(self._batches, SCHEMA)


def write_parquet(exchanges, path, rows=CHUNK_ROWS, data_bytes=CHUNK_BYTES,
                  codec=DEFAULT_CODEC) -> int:
    """The records of `exchanges` as a Parquet file compressed with `codec`, a row group every
    `rows` rows or about `data_bytes` of keys, values and headers; returns the rows written."""
    from .parquet_sink import ParquetSink
    with ParquetSink(path, SCHEMA, codec) as sink:
        for cols in record_chunks(exchanges, rows, data_bytes):
            sink(record_batch(cols))
    return sink.rows

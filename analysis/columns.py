"""Typed column builders: rows are held as they come, and every batch of rows becomes Arrow
arrays, so Python objects are only ever held for one batch.

No row dicts and no temporary files: a row is kept as the sequence it came as, and a batch is
turned into one list per column at once (zip, in C; appending each value to its column's list
in Python cost about as much as the Arrow conversion). A batch is cut every `BATCH_ROWS` rows
or once its values reach about `BATCH_BYTES` in memory: VALUE_COST per value (a Python object
and its slot) plus the length of strings and binaries (record keys and values). That size is
summed over the rows added since the last look, not on each append; the next look comes halfway
to the budget at the mean row size so far (at most CHECK_EVERY rows on). Rows made elsewhere (a
parallel run's workers) come as Arrow arrays with each row's size (`extend`), and are cut where
the same rows appended one by one would have been. A full batch is either kept (in-memory
tables: `table()` concatenates the batches) or handed to a sink such as
parquet_sink.ParquetSink (streaming export: memory bounded by one batch per table). Names in
CATEGORICAL are dictionary-encoded, which pandas shows as categories.
"""
from __future__ import annotations

from itertools import chain
from operator import itemgetter, length_hint

import pyarrow as pa

from .schema import CATEGORICAL, arrow_type

try:
    from dissector._value_buffers import buffers as _buffers, text_length as _rows_length
except ImportError:   # not compiled: pyarrow converts every column, _text_length counts
    _buffers = _rows_length = None

BATCH_ROWS = 65536
BATCH_BYTES = 8 << 20
VALUE_COST = 32   # measured: ~1.5 kB of Python objects per 41-column exchange row
CHECK_EVERY = 1024
UNCUT = 1 << 62   # a budget for builders that hold rows for another's extend()
_SIZED = ("string", "binary")
_TEXT = (str, bytes)
_PLAIN = frozenset((str, bytes, type(None)))


def table_schema(columns) -> pa.Schema:
    """The Arrow schema of a table built from `columns` ((name, type name) pairs)."""
    return pa.schema([pa.field(name, _field_type(name, kind)) for name, kind in columns])


def _field_type(name, kind) -> pa.DataType:
    typ = arrow_type(kind)   # a list of names (clients' compression) stays a list
    return pa.dictionary(pa.int32(), typ) if name in CATEGORICAL and kind == "string" else typ


class ColumnBuilder:
    """Rows appended as sequences of values in column order. `sink(record_batch)` receives each
    full batch (and the last one on `finish()`); without a sink the batches are kept for
    `table()`. len() is the number of rows appended so far."""

    def __init__(self, columns, sink=None, batch_rows=None, batch_bytes=None):
        self.columns = tuple(columns)
        self.names = tuple(name for name, _ in self.columns)
        self.schema = table_schema(self.columns)
        self._types = tuple(arrow_type(kind) for _, kind in self.columns)
        self._encode = tuple(name in CATEGORICAL for name in self.names)
        self._sized = tuple(i for i, (_, kind) in enumerate(self.columns) if kind in _SIZED)
        self._picked = _picker(self._sized)
        self._row_cost = VALUE_COST * len(self.columns)
        self._sink = sink
        self._batch_rows = batch_rows or BATCH_ROWS
        self._batch_bytes = batch_bytes or BATCH_BYTES
        self._chunks = []     # kept batches (no sink)
        self._done = 0        # rows in earlier batches
        self._handed = False  # rows given to extend(): later rows go the same way
        self._new_batch()

    def _new_batch(self):
        self._rows = []
        self._check_at = 1    # the first row gives a first size estimate
        self._measured = 0    # rows whose size is counted in _bytes
        self._bytes = 0
        self._parts = []      # extend(): pending rows as slices of arrays, one list per part
        self._part_rows = 0
        self._sizes = []      # extend(): each pending row's payload

    def __len__(self):
        return self._done + len(self._rows) + self._part_rows

    def append(self, row) -> None:
        """Append one row given as a sequence of values in column order."""
        if len(row) != len(self.columns):
            raise ValueError(f"a row of {len(row)} values for {len(self.columns)} columns")
        self._rows.append(row)
        rows = len(self._rows)
        if rows >= self._check_at and self._full(rows, self._rows_payload):
            self._cut()

    def extend(self, arrays, sizes) -> None:
        """Append rows given as Arrow arrays in column order (made by `arrays()` elsewhere)
        and each row's payload (`payloads()`); rows added after go by append_rows(), not
        append()."""
        self._handed = True
        i, n = 0, len(sizes)
        while i < n:
            j = min(n, i + self._check_at - self._part_rows)
            self._parts.append([a.slice(i, j - i) for a in arrays])
            self._sizes += sizes[i:j]
            self._part_rows += j - i
            i = j
            if self._part_rows >= self._check_at and self._full(self._part_rows,
                                                                self._sizes_payload):
                self._cut()

    def append_rows(self, rows) -> None:
        """Append rows given as sequences of values in column order, after the rows extend()
        was given if it was."""
        held = ColumnBuilder(self.columns, batch_rows=UNCUT, batch_bytes=UNCUT) \
            if self._handed else self
        for row in rows:
            held.append(row)
        if held is not self:
            self.extend(*held.arrays())

    def _rows_payload(self, start, stop):
        rows = self._rows[start:stop]
        counted = _rows_length(rows, self._sized) if _rows_length is not None else None
        return counted if counted is not None else _text_length(self._picked(rows))

    def _sizes_payload(self, start, stop):
        return sum(self._sizes[start:stop])

    def _full(self, rows, payload) -> bool:
        """The look at `rows` pending rows (payload(start, stop): their strings' and binaries'
        lengths): whether the batch is full; if not, when to look next."""
        start, self._measured = self._measured, rows
        self._bytes += (rows - start) * self._row_cost + payload(start, rows)
        if rows >= self._batch_rows or self._bytes >= self._batch_bytes:
            return True
        ahead = int((self._batch_bytes - self._bytes) * rows / self._bytes / 2)
        self._check_at = min(rows + max(1, min(ahead, CHECK_EVERY)), self._batch_rows)
        return False

    def arrays(self) -> tuple[list, list]:
        """The pending rows as plain Arrow arrays, one per column, and each row's payload, for
        another builder's extend(); the builder is empty after."""
        lists = self._lists()
        sizes = payloads(lists, self._sized)
        arrays = [_array(values, typ) for values, typ in zip(lists, self._types)]
        self._new_batch()
        return arrays, sizes

    def _lists(self) -> list:
        """The pending rows as one sequence of values per column."""
        if not self._rows:
            return [() for _ in self.columns]
        return list(zip(*self._rows))

    def _cut(self) -> None:
        """Turn the pending rows into one batch (kept or handed to the sink)."""
        if self._parts:
            arrays = [pa.concat_arrays([part[i] for part in self._parts])
                      for i in range(len(self._types))]
            self._done += self._part_rows
        elif self._rows:
            arrays = [_array(values, typ) for values, typ in zip(self._lists(), self._types)]
            self._done += len(self._rows)
        else:
            return
        self._new_batch()
        batch = pa.RecordBatch.from_arrays(shared_nulls(self._encoded(arrays)),
                                           schema=self.schema)
        if self._sink is None:
            self._chunks.append(batch)
        else:
            self._sink(batch)

    def _encoded(self, arrays):
        return [a.dictionary_encode() if enc else a for a, enc in zip(arrays, self._encode)]

    def finish(self) -> None:
        """Hand the last rows to the sink."""
        self._cut()

    def table(self) -> pa.Table:
        """All rows as one table (no sink): kept_table of the batches."""
        self._cut()
        return kept_table(self._chunks, self.schema)


_NULLS = {}   # Arrow type -> the longest all-null array of it made so far


def shared_nulls(arrays) -> list:
    """`arrays` with each all-null one replaced by a slice of one all-null array of its type,
    shared by every batch: the columns of other api keys' fields (a fifth of the partitions
    table's memory on produce/fetch traffic) and an absent trace context then hold no memory
    of their own."""
    return [_nulls(a.type, len(a)) if a.null_count == len(a) and len(a) else a for a in arrays]


def _nulls(typ, n) -> pa.Array:
    held = _NULLS.get(typ)
    if held is None or len(held) < n:
        held = _NULLS[typ] = pa.nulls(max(n, BATCH_ROWS), typ)
    return held.slice(0, n)


def kept_table(batches, schema) -> pa.Table:
    """The kept batches as one table: a chunk each, one dictionary for all (as the records
    table, and as load_parquet reads them back). Joining the chunks into one array per column
    held the table twice at the peak of a load (a fifth more than the table on dense traffic)."""
    return pa.Table.from_batches(batches, schema=schema).unify_dictionaries()


def _text_length(values) -> int:
    """Length of the str/bytes among `values` (a damaged body may put another type there:
    counted as nothing). Without such a value, the usual case, the lengths are summed in C: a
    type test per value cost as much as converting the batch to Arrow."""
    values = list(values)
    if _plain(values):
        return sum(map(length_hint, values))   # None: 0
    return sum([len(v) for v in values if isinstance(v, _TEXT)])


def _plain(values) -> bool:
    """Are `values` all str, bytes or None?"""
    return _PLAIN.issuperset(map(type, values))


def _picker(sized):
    """A function of rows giving the values of the columns `sized`, row after row."""
    if not sized:
        return lambda rows: ()
    get = itemgetter(*sized)
    if len(sized) == 1:
        return lambda rows: map(get, rows)
    return lambda rows: chain.from_iterable(map(get, rows))


def payloads(lists, sized) -> list:
    """Each row's payload in column lists `lists`, of the columns `sized`, as _text_length counts."""
    rows = len(lists[0]) if lists else 0
    if not sized:
        return [0] * rows
    columns = [lists[i] for i in sized]
    if all(map(_plain, columns)):   # as _text_length, column by column
        return list(map(sum, zip(*(map(length_hint, c) for c in columns))))
    return list(map(_text_length, zip(*columns)))


# Arrow type -> the kind of _value_buffers.buffers that makes its buffers
_KINDS = {pa.int8(): "b", pa.int16(): "h", pa.int32(): "i", pa.int64(): "q",
          pa.timestamp("ns", tz="UTC"): "q", pa.float64(): "d", pa.string(): "s",
          pa.binary(): "y", pa.list_(pa.string()): "L"}
_STRINGS = pa.list_(pa.string())


def _array(values, typ) -> pa.Array:
    """The column as one Arrow array; a value of the wrong type (from a damaged body) becomes
    null instead of failing the whole table. Plain values are laid out in C (_value_buffers),
    what pa.array would make of them at a tenth of the cost; pa.array takes the others."""
    kind = _KINDS.get(typ) if _buffers is not None else None
    made = _buffers(values, kind) if kind is not None else None
    if made is not None:
        return _from_buffers(typ, len(values), *made)
    try:
        return pa.array(values, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return pa.array([_scalar(v, typ) for v in values], type=typ)


def _from_buffers(typ, n, nulls, buffers) -> pa.Array:
    """The array of `n` values of `typ` from _value_buffers.buffers' answer."""
    bufs = [None if b is None else pa.py_buffer(b) for b in buffers]
    if typ == _STRINGS:
        strings = pa.Array.from_buffers(pa.string(), len(buffers[2]) // 4 - 1, [None] + bufs[2:])
        return pa.Array.from_buffers(typ, n, bufs[:2], nulls, children=[strings])
    return pa.Array.from_buffers(typ, n, bufs, nulls)


def _scalar(value, typ):
    try:
        pa.scalar(value, type=typ)
        return value
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


def to_pandas(table: pa.Table):
    """Arrow-backed pandas frame (pd.ArrowDtype for every column)."""
    import pandas as pd   # here: the streaming writers need no pandas
    return table.to_pandas(types_mapper=pd.ArrowDtype)

"""The Spark job's schemas, all derived from the analysis layer's own table builders.

The decode stage returns the rows of every table from one grouped call, so its output is the
union of the tables' columns, each named `<table>__<column>`, plus a `table` discriminator and
the provisional keys the job turns into global ids. Inside Spark, timestamps travel as int64
nanoseconds (Spark's timestamps stop at microseconds) and categorical columns as plain values;
`target_schema()` is the exact Arrow schema the Parquet files get, the one the pandas path writes.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import pyarrow as pa

from ..load import TABLES, _Collector

# The tables whose rows come from one exchange each (issues: only those attached to one).
EXCHANGE_TABLES = ("exchanges", "partitions", "records", "issues")

# Provisional keys set by the decode stage on the rows of EXCHANGE_TABLES: the exchange's
# emission key (global packet number that completed it, then its rank among that packet's
# exchanges) and the row's position among its exchange's rows of that table.
EMIT_PACKET = "emit_packet"
EMIT_SEQ = "emit_seq"
EMIT_ROW = "emit_row"
EMIT_KEYS = (EMIT_PACKET, EMIT_SEQ, EMIT_ROW)


@functools.cache
def _empty_tables() -> dict:
    col = _Collector(records=True)
    col.finish(SimpleNamespace(issues=(), connections=()), "")
    return col.arrow()


def target_schema(name: str) -> pa.Schema:
    """The Arrow schema of table `name` as the pandas path (analysis.load) builds and writes it:
    taken from its own column builders."""
    return _empty_tables()[name].schema


def spark_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type a column has while it is inside Spark."""
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_timestamp(t):
        return pa.int64()
    return t


def column(table: str, name: str) -> str:
    return f"{table}__{name}"


@functools.cache
def union_schema() -> pa.Schema:
    fields = [pa.field("table", pa.string())] + [pa.field(k, pa.int64()) for k in EMIT_KEYS]
    for table in TABLES:
        for f in target_schema(table):
            fields.append(pa.field(column(table, f.name), spark_type(f.type)))
    return pa.schema(fields)


def to_union(name: str, table: pa.Table, *emit_keys) -> pa.Table:
    """Rows of table `name` (target schema) as union rows; other tables' columns are null.
    emit_keys: the EMIT_KEYS columns' values (a list each; the issues not tied to an exchange
    have None), or nothing."""
    n = table.num_rows
    schema = union_schema()
    mine = {column(name, f): table.column(f) for f in table.column_names}
    if emit_keys:
        if name == "issues":   # the issues of exchanges come first (analysis.load._Collector)
            emit_keys = [k + [None] * (n - len(k)) for k in emit_keys]
        mine.update((k, pa.array(v, pa.int64())) for k, v in zip(EMIT_KEYS, emit_keys))
    arrays = []
    for f in schema:
        if f.name == "table":
            arrays.append(pa.array([name] * n, pa.string()))
        elif f.name in mine:
            arrays.append(_to_spark(mine[f.name], f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _to_spark(col, t):
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col.cast(t)


def from_spark(batch, name: str) -> pa.Table:
    """A batch of table `name`'s columns (plain names, Spark types) in the target schema."""
    schema = target_schema(name)
    arrays = []
    for f in schema:
        col = batch.column(batch.schema.get_field_index(f.name))
        if pa.types.is_dictionary(f.type):
            col = col.cast(f.type.value_type).dictionary_encode()
            if col.type != f.type:
                col = col.cast(f.type)
        else:
            col = col.cast(f.type)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)

"""The Spark job's schemas, all derived from the analysis tables' own (analysis.schema).

The decode stage returns the rows of every table from one grouped call, so its output is the
union of the tables' columns, each named `<table>__<column>`, plus a `table` discriminator and
the provisional keys the job turns into global ids. Inside Spark, timestamps travel as int64
nanoseconds (Spark's timestamps stop at microseconds) and categorical columns as plain values;
`target_schema()` is the exact Arrow schema the Parquet files get, the one the pandas path writes.
"""
from __future__ import annotations

import pyarrow as pa

from ..columns import empty_table
from ..schema import CONNECTION_COLUMNS, PARTITION_COLUMNS, exchange_columns, issue_columns
from ..records import record_columns

TABLES = ("exchanges", "partitions", "records", "issues", "connections")

# Provisional keys set by the decode stage: the exchange's emission key (global packet number
# that completed it, then its rank among that packet's exchanges) on exchanges and partitions.
EMIT_PACKET = "emit_packet"
EMIT_SEQ = "emit_seq"


def table_columns(name: str):
    return {"exchanges": exchange_columns, "partitions": lambda: PARTITION_COLUMNS,
            "records": record_columns, "issues": issue_columns,
            "connections": lambda: CONNECTION_COLUMNS}[name]()


def target_schema(name: str) -> pa.Schema:
    """The Arrow schema of table `name` as the pandas path builds and writes it."""
    return empty_table(table_columns(name)).schema


def spark_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type a column has while it is inside Spark."""
    if pa.types.is_dictionary(t):
        return spark_type(t.value_type)
    if pa.types.is_timestamp(t):
        return pa.int64()
    return t


def column(table: str, name: str) -> str:
    return f"{table}__{name}"


def union_schema() -> pa.Schema:
    fields = [pa.field("table", pa.string()), pa.field(EMIT_PACKET, pa.int64()),
              pa.field(EMIT_SEQ, pa.int64())]
    for table in TABLES:
        for f in target_schema(table):
            fields.append(pa.field(column(table, f.name), spark_type(f.type)))
    return pa.schema(fields)


def to_union(name: str, table: pa.Table, emit_packet=None, emit_seq=None) -> pa.Table:
    """Rows of table `name` (target schema) as union rows; other tables' columns are null."""
    n = table.num_rows
    schema = union_schema()
    mine = {column(name, f): table.column(f) for f in table.column_names}
    arrays = []
    for f in schema:
        if f.name == "table":
            arrays.append(pa.array([name] * n, pa.string()))
        elif f.name == EMIT_PACKET and emit_packet is not None:
            arrays.append(pa.array(emit_packet, pa.int64()))
        elif f.name == EMIT_SEQ and emit_seq is not None:
            arrays.append(pa.array(emit_seq, pa.int64()))
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

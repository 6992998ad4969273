"""Write the tables as Parquet from the executors, in exactly the pandas path's Arrow schema.

Spark's own writer would store its microsecond timestamps and plain strings; the tables are
written with pyarrow instead, so they keep nanosecond UTC timestamps and dictionary-encoded names
and read back (pyarrow, pandas, Spark) as the same tables the single-machine `export` writes.

The decode stage's blobs arrive grouped by part (a range of emission packet numbers, so parts
follow each other in exchange order); a task merges each part's blobs of a table, sorts them by
emission key and numbers its exchanges itself: the exchanges of the parts before (counted
beforehand) plus its rank in the part. Connection ids are the ranks of the provisional ids among
all of them. Every table gets one file per part, `<out>/<table>.parquet/part-<part>.parquet`:
names sort in exchange order, and a retried task rewrites the same files.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from .schemas import EMIT_KEYS, LOCAL_EXCHANGE, TABLES, target_schema


def output_fs(out: str):
    """(filesystem, base path) of an output directory given as a path or URI."""
    if "://" in out:
        return fs.FileSystem.from_uri(out)
    return fs.LocalFileSystem(), os.path.abspath(out)


def table_dir(out: str, name: str):
    filesystem, base = output_fs(out)
    return filesystem, f"{base}/{name}.parquet"


def prepare(out: str) -> None:
    """Empty directories for the tables (a previous run's parts are removed)."""
    for name in TABLES:
        filesystem, path = table_dir(out, name)
        if filesystem.get_file_info(path).type != fs.FileType.NotFound:
            filesystem.delete_dir(path)
        filesystem.create_dir(path, recursive=True)


def write_tables(df, out: str, starts: dict, provisional) -> dict:
    """Write the blobs of `df` (rows of PARTS, partitioned by part) as the tables. starts: part
    -> exchanges in the parts before it; provisional: every provisional connection id, sorted.
    Returns the rows written per table."""
    prepare(out)
    ids = pa.array(provisional, pa.int64())

    def write(batches):
        blobs = {}
        for batch in batches:
            for part, table, data in zip(*(batch.column(c).to_pylist()
                                           for c in ("part", "table", "data"))):
                blobs.setdefault(part, {}).setdefault(table, []).append(data)
        rows = dict.fromkeys(TABLES, 0)
        for part, tables in blobs.items():
            numbers = None
            for name in TABLES:   # exchanges before partitions: their numbers
                if name not in tables:
                    continue
                t = pa.concat_tables([pa.ipc.open_stream(b).read_all() for b in tables[name]]
                                     ).unify_dictionaries()
                if name != "connections":
                    t = t.sort_by([(k, "ascending") for k in EMIT_KEYS])
                if name == "exchanges":
                    numbers = (LOCAL_EXCHANGE, t.column(LOCAL_EXCHANGE), pa.array(
                        np.arange(starts.get(part, 0) + 1, starts.get(part, 0) + 1 + t.num_rows)))
                t = _global_ids(t, ids, numbers)
                filesystem, path = table_dir(out, name)
                pq.write_table(t.select(target_schema(name).names).cast(target_schema(name)),
                               f"{path}/part-{part:05d}.parquet", filesystem=filesystem)
                rows[name] += t.num_rows
        yield pa.RecordBatch.from_pydict({"table": list(rows), "rows": list(rows.values())})

    totals = dict.fromkeys(TABLES, 0)
    for r in df.mapInArrow(write, "table string, rows long").collect():
        totals[r["table"]] += r["rows"]
    for name, n in totals.items():
        if n == 0:   # keep the table's schema readable
            filesystem, path = table_dir(out, name)
            pq.write_table(target_schema(name).empty_table(), f"{path}/part-00000.parquet",
                           filesystem=filesystem)
    return totals


def _global_ids(t: pa.Table, ids, numbers) -> pa.Table:
    """Connection ids: ranks among all provisional ids; exchange numbers from `numbers`."""
    if "connection_id" in t.column_names:
        i = t.column_names.index("connection_id")
        t = t.set_column(i, "connection_id",
                         pc.add(pc.index_in(t.column(i), value_set=ids), 1).cast(pa.int64()))
    if "exchange" in t.column_names and numbers is not None:
        key, local, values = numbers
        at = pc.index_in(t.column(key), value_set=local)
        t = t.set_column(t.column_names.index("exchange"), "exchange", values.take(at))
    return t


def read_table(out: str, name: str) -> pa.Table:
    """A table as written, in one Arrow table (parts in name order, dictionaries unified)."""
    filesystem, path = table_dir(out, name)
    parts = sorted(i.path for i in filesystem.get_file_info(fs.FileSelector(path))
                   if i.path.endswith(".parquet"))
    tables = [pq.read_table(p, filesystem=filesystem) for p in parts]
    if not tables:
        return target_schema(name).empty_table()
    return pa.concat_tables(tables).unify_dictionaries()

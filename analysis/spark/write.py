"""Write the tables as Parquet from the executors, in exactly the pandas path's Arrow schema.

Spark's own writer would store its microsecond timestamps and plain strings; the tables are
written with pyarrow instead, so they keep nanosecond UTC timestamps and dictionary-encoded names
and read back (pyarrow, pandas, Spark) as the same tables the single-machine `export` writes.

The decode tasks store their blobs as files under `<out>/_blobs/` (`spill`: Spark then moves
only their names and counts, never the rows themselves); a write task takes a part's blobs (a
range of emission packet numbers, so parts follow each other in exchange order), merges them per
table, sorts them by
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


def _blobs_dir(out: str):
    filesystem, base = output_fs(out)
    return filesystem, f"{base}/_blobs"   # hidden from Hadoop and Spark readers (underscore)


def prepare(out: str) -> None:
    """Empty directories for the tables (a previous run's parts are removed)."""
    for name in TABLES:
        filesystem, path = table_dir(out, name)
        if filesystem.get_file_info(path).type != fs.FileType.NotFound:
            filesystem.delete_dir(path)
        filesystem.create_dir(path, recursive=True)


def spill(parts: pa.Table, out: str, bucket: int) -> pa.Table:
    """Store the blobs of a decode task's rows of PARTS in files; its rows of BLOBS."""
    filesystem, base = _blobs_dir(out)
    filesystem.create_dir(base, recursive=True)
    paths = []
    for part, name, data in zip(*(parts.column(c).to_pylist() for c in ("part", "table", "data"))):
        path = f"{base}/{name}-{part:05d}-{bucket:05d}.arrow"   # a retry rewrites the same
        with filesystem.open_output_stream(path) as f:
            f.write(data)
        paths.append(path)
    return parts.drop_columns(["data"]).append_column("path", pa.array(paths, pa.string()))


def write_tables(spark, out: str, blobs: dict, starts: dict, provisional, codec) -> dict:
    """Write the tables from the blobs (part -> table -> their files), one task per part, as
    Parquet compressed with `codec`. starts: part -> exchanges in the parts before it;
    provisional: every provisional connection id, sorted. Returns the rows written per table;
    the blobs are removed."""
    prepare(out)
    ids = pa.array(provisional, pa.int64())

    def write(batches):
        filesystem, _ = output_fs(out)
        rows = dict.fromkeys(TABLES, 0)
        for part in (parts[i] for batch in batches for i in batch.column(0).to_pylist()):
            tables = blobs.get(part, {})
            numbers = None
            for name in TABLES:   # exchanges before partitions: their numbers
                if name not in tables:
                    continue
                read = []
                for path in tables[name]:
                    with filesystem.open_input_stream(path) as f:
                        read.append(pa.ipc.open_stream(f).read_all())
                t = pa.concat_tables(read).unify_dictionaries()
                if name != "connections":
                    t = t.sort_by([(k, "ascending") for k in EMIT_KEYS])
                if name == "exchanges":
                    numbers = (LOCAL_EXCHANGE, t.column(LOCAL_EXCHANGE), pa.array(
                        np.arange(starts.get(part, 0) + 1, starts.get(part, 0) + 1 + t.num_rows)))
                t = _global_ids(t, ids, numbers)
                filesystem, path = table_dir(out, name)
                pq.write_table(t.select(target_schema(name).names).cast(target_schema(name)),
                               f"{path}/part-{part:05d}.parquet", filesystem=filesystem,
                               compression=codec)
                rows[name] += t.num_rows
        yield pa.RecordBatch.from_pydict({"table": list(rows), "rows": list(rows.values())})

    totals = dict.fromkeys(TABLES, 0)
    parts = sorted(blobs)
    if parts:   # a task per part, by index (no Python worker needed to list them)
        tasks = spark.range(0, len(parts), numPartitions=len(parts))
        for r in tasks.mapInArrow(write, "table string, rows long").collect():
            totals[r["table"]] += r["rows"]
    for name, n in totals.items():
        if n == 0:   # keep the table's schema readable
            filesystem, path = table_dir(out, name)
            pq.write_table(target_schema(name).empty_table(), f"{path}/part-00000.parquet",
                           filesystem=filesystem, compression=codec)
    remove_blobs(out)
    return totals


def remove_blobs(out: str) -> None:
    """Remove the blobs of a run (done, or stopped before its write stage)."""
    filesystem, path = _blobs_dir(out)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)


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

"""Write one table as Parquet from the executors, in exactly the pandas path's Arrow schema.

Spark's own writer would store its microsecond timestamps and plain strings; the tables are
written with pyarrow instead, one part file per partition under `<out>/<table>.parquet/`,
so they keep nanosecond UTC timestamps and dictionary-encoded names, and read back (pyarrow,
pandas, Spark) as the same table the single-machine `export` writes. A retried task rewrites its
own part file: part names come from the partition index.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from .schemas import from_spark, target_schema


def output_fs(out: str):
    """(filesystem, base path) of an output directory given as a path or URI."""
    if "://" in out:
        return fs.FileSystem.from_uri(out)
    import os
    return fs.LocalFileSystem(), os.path.abspath(out)


def table_dir(out: str, name: str):
    filesystem, base = output_fs(out)
    return filesystem, f"{base}/{name}.parquet"


def prepare(out: str, name: str) -> None:
    """An empty directory for the table (a previous run's parts are removed)."""
    filesystem, path = table_dir(out, name)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)
    filesystem.create_dir(path, recursive=True)


def write_table(df, name: str, out: str) -> int:
    """Write DataFrame `df` (the table's columns, Spark types) as `<out>/<name>.parquet/`; the
    number of rows written."""
    prepare(out, name)

    def write(batches):
        from pyspark import TaskContext
        filesystem, path = table_dir(out, name)
        part = f"{path}/part-{TaskContext.get().partitionId():05d}.parquet"
        writer = None
        rows = 0
        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if writer is None:
                    writer = pq.ParquetWriter(part, target_schema(name), filesystem=filesystem)
                writer.write_table(from_spark(batch, name))
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    rows = sum(r[0] for r in df.mapInArrow(write, "rows long").collect())
    if rows == 0:   # keep the table's schema readable
        filesystem, path = table_dir(out, name)
        pq.write_table(target_schema(name).empty_table(), f"{path}/part-00000.parquet",
                       filesystem=filesystem)
    return rows


def read_table(out: str, name: str) -> pa.Table:
    """A table written by write_table, back in one Arrow table (dictionaries unified)."""
    filesystem, path = table_dir(out, name)
    parts = sorted(i.path for i in filesystem.get_file_info(fs.FileSelector(path))
                   if i.path.endswith(".parquet"))
    tables = [pq.read_table(p, filesystem=filesystem) for p in parts]
    return pa.concat_tables(tables).unify_dictionaries() if tables else \
        target_schema(name).empty_table()

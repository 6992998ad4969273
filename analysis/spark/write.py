"""Write the tables as Parquet from the executors, in exactly the pandas path's Arrow schema.

Spark's own writer would store its microsecond timestamps and plain strings; the tables are
written with pyarrow instead, so they keep nanosecond UTC timestamps and dictionary-encoded names
and read back (pyarrow, pandas, Spark) as the same tables the single-machine `export` writes.

The decoded rows arrive partitioned by bucket (a range of emission packet numbers) and sorted by
emission key, so each task numbers its exchanges itself: the exchanges of the buckets before
(counted beforehand) plus the distinct emission keys before the row in its bucket. Every table
gets one file per bucket, `<out>/<table>.parquet/part-<bucket>.parquet`: names sort in exchange
order, and a retried task rewrites the same files.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from .schemas import EMIT_PACKET, EMIT_SEQ, TABLES, column, from_spark, target_schema

BUCKET = "bucket"


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


class _Numbering:
    """Exchange numbers of sorted rows, bucket by bucket."""

    def __init__(self, starts):
        self.starts = starts   # bucket -> exchanges in the buckets before it
        self.bucket = None
        self.last = None       # the previous row's emission key
        self.count = 0

    def number(self, bucket, packets, seqs):
        """Exchange numbers (1-based, global) for rows of one bucket; -1 where no key."""
        if bucket != self.bucket:
            self.bucket, self.last, self.count = bucket, None, 0
        has = packets >= 0
        new = np.zeros(len(packets), dtype=bool)
        if len(packets):
            new[1:] = (packets[1:] != packets[:-1]) | (seqs[1:] != seqs[:-1])
            new[0] = self.last is None or (packets[0], seqs[0]) != self.last
            new &= has
            self.last = (packets[-1], seqs[-1]) if has[-1] else self.last
        idx = self.count + np.cumsum(new)
        self.count = int(idx[-1]) if len(idx) else self.count
        return np.where(has, self.starts.get(bucket, 0) + idx, -1)


def write_tables(df, out: str, starts: dict, connection_ids: dict) -> dict:
    """Write the union rows of `df` (with BUCKET, partitioned by it and sorted by bucket and
    emission key) as the tables; rows written per table."""
    prepare(out)

    def write(batches):
        numbering = _Numbering(starts)
        writers = {}
        rows = dict.fromkeys(TABLES, 0)
        current = None

        def close():
            for w in writers.values():
                w.close()
            writers.clear()

        try:
            for batch in batches:
                buckets = batch.column(BUCKET).to_numpy(zero_copy_only=False)
                cuts = np.flatnonzero(np.diff(buckets)) + 1
                for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(buckets)]):
                    if hi <= lo:
                        continue
                    part = batch.slice(lo, hi - lo)
                    bucket = int(buckets[lo])
                    if bucket != current:
                        close()
                        current = bucket
                    packets = _int64s(part, EMIT_PACKET)
                    seqs = _int64s(part, EMIT_SEQ)
                    numbers = numbering.number(bucket, packets, seqs)
                    tables = part.column(part.schema.get_field_index("table"))
                    for name in TABLES:
                        mask = pc.equal(tables, name)
                        if not pc.any(mask).as_py():
                            continue
                        t = _table_rows(part.filter(mask), name, connection_ids,
                                        numbers[mask.to_numpy(zero_copy_only=False)])
                        w = writers.get(name)
                        if w is None:
                            filesystem, path = table_dir(out, name)
                            w = writers[name] = pq.ParquetWriter(
                                f"{path}/part-{bucket:05d}.parquet", target_schema(name),
                                filesystem=filesystem)
                        w.write_table(t)
                        rows[name] += t.num_rows
        finally:
            close()
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


def _int64s(batch, name):
    return batch.column(batch.schema.get_field_index(name)).fill_null(-1).to_numpy(
        zero_copy_only=False)


def _table_rows(part, name, connection_ids, numbers) -> pa.Table:
    """The rows of table `name` with global connection ids and exchange numbers."""
    names = target_schema(name).names
    cols = {c: part.column(part.schema.get_field_index(column(name, c))) for c in names}
    if "connection_id" in cols:
        prov = cols["connection_id"].to_pylist()
        cols["connection_id"] = pa.array([None if p is None else connection_ids.get(p)
                                          for p in prov], pa.int64())
    if name in ("exchanges", "partitions"):
        cols["exchange"] = pa.array(numbers, pa.int64())
    return from_spark(pa.RecordBatch.from_pydict(cols), name)


def read_table(out: str, name: str) -> pa.Table:
    """A table as written, in one Arrow table (parts in name order, dictionaries unified)."""
    filesystem, path = table_dir(out, name)
    parts = sorted(i.path for i in filesystem.get_file_info(fs.FileSelector(path))
                   if i.path.endswith(".parquet"))
    tables = [pq.read_table(p, filesystem=filesystem) for p in parts]
    if not tables:
        return target_schema(name).empty_table()
    return pa.concat_tables(tables).unify_dictionaries()

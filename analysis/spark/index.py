"""The segment index between the extract and decode stages, stored as files next to the output.

An extract task hashes each index row to its decode bucket (by connection key; rows without one,
the raw packets and capture errors, go to bucket 0) and appends the rows to one Arrow IPC file
per capture file, `<out>/_index/<n>.arrow`, a record batch per bucket and batch of the extract.
Spark only carries one small row per file and bucket (where its batches are) and the files'
summaries: the index itself never becomes JVM rows, is never checkpointed nor shuffled. A decode
task reads its bucket's batches from every file (random access, Arrow's file format).
"""
from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .extract import SCHEMA, SUMMARY
from .write import output_fs

LISTING = pa.schema([
    ("file", pa.string()),
    ("ts", pa.int64()),        # a summary (bucket -1): the file's first timestamp...
    ("count", pa.int64()),     # ...its packets...
    ("error", pa.string()),    # ...and the capture error that stopped it...
    ("secrets", pa.binary()),  # ...and the TLS key log of its Decryption Secrets Blocks
    ("bucket", pa.int32()),    # else: a bucket with rows in the file...
    ("path", pa.string()),     # ...the file of the index...
    ("batches", pa.binary()),  # ...and the positions of the bucket's batches in it (int32s)
])


def index_dir(out: str):
    filesystem, base = output_fs(out)
    return filesystem, f"{base}/_index"   # hidden from Hadoop and Spark readers (underscore)


def remove_index(out: str) -> None:
    from pyarrow import fs
    filesystem, path = index_dir(out)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)


def bucket_of(keys, buckets: int) -> np.ndarray:
    """The decode bucket of each connection key (None: bucket 0), the same in every process."""
    return np.array([zlib.crc32(k) % buckets if k is not None else 0 for k in keys.to_pylist()],
                    np.int32)


def store(batches, out: str, number: int, file: str, buckets: int):
    """Write the extract batches of one capture file (number: its position in the listing) to
    its index file; yield LISTING batches: the summary, then where each bucket's rows are."""
    filesystem, base = index_dir(out)
    filesystem.create_dir(base, recursive=True)
    path = f"{base}/{number:05d}.arrow"   # a retried task rewrites the same file
    where = {}
    summaries = []
    with filesystem.open_output_stream(path) as f, pa.ipc.new_file(f, SCHEMA) as w:
        written = 0
        for batch in batches:
            summary = pc.equal(batch.column("kind"), SUMMARY)
            summaries += batch.filter(summary).to_pylist()
            # a capture error also goes to the decode stage: it becomes an Issue there
            keep = batch.filter(pc.or_(pc.invert(summary), pc.is_valid(batch.column("error"))))
            if not keep.num_rows:
                continue
            bucket = bucket_of(keep.column("key"), buckets)
            for b in np.unique(bucket).tolist():
                w.write_batch(keep.filter(pa.array(bucket == b)))
                where.setdefault(b, []).append(written)
                written += 1
    rows = [{"file": file, "ts": s["ts"], "count": s["count"], "error": s["error"],
             "secrets": s["secrets"], "bucket": -1} for s in summaries]
    rows += [{"file": file, "bucket": b, "path": path,
              "batches": np.array(at, np.int32).tobytes()} for b, at in sorted(where.items())]
    yield pa.RecordBatch.from_pylist(rows, schema=LISTING)


def load(out: str, places) -> pa.Table:
    """The index rows of one bucket: places, its (path, batch positions) in every file."""
    filesystem, _ = index_dir(out)
    tables = []
    for path, batches in places:
        with filesystem.open_input_file(path) as f:
            reader = pa.ipc.open_file(f)
            tables.append(pa.Table.from_batches(
                [reader.get_batch(i) for i in np.frombuffer(batches, np.int32).tolist()],
                schema=SCHEMA))
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()

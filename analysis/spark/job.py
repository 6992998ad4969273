"""The Spark job: capture files -> an index of segments -> connections -> the analysis tables in Parquet.

1. extract, one task per file: packets -> an index of each connection's TCP segments, with where
   each payload lies in the file, not the payload (extract.py);
2. number packets globally: files are read in the order of their first timestamp (then name),
   packet numbers run on across them, as `kafka-dissect export FILES...` numbers them when given
   the files in that order;
3. decode a bucket of connections (hash of their key) per task with the dissector core, its
   index rows read from what the extract tasks stored (index.py), its payloads straight from
   the capture files (decode.py);
4. give connections and exchanges their global ids and write every table (write.py);
5. join the tables into those that cross connections: deliveries (deliveries.py) and clients
   (clients.py), in Spark SQL.
Only small rows cross between the JVM and Python: where the index rows of each bucket are (the
extract tasks store them under `<out>/_index/`), then the names of the Arrow IPC blobs (one per
table and part of each bucket's output) the decode tasks store under `<out>/_blobs/` for the
write tasks.
"""
from __future__ import annotations

import time

import numpy as np

from dissector.pipeline import DEFAULT_PORTS, MAX_FRAME, as_keylog
from dissector.tls.keylog import KeyLog

from ..parquet_codec import DEFAULT as DEFAULT_CODEC
from . import clients, deliveries, index
from .decode import Options, decode_bucket
from .extract import extract_file
from .inputs import basename, check_local, list_files, local_copy, local_path
from .stages import Stages
from .schemas import BLOBS, TABLES
from .write import read_table, remove_blobs, spill, write_tables

BUCKET_BYTES = 32 << 20   # capture bytes per decode call (a bucket of connections)


class Result:
    """What a run wrote: `out`, `files` (in reading order), `errors` (one line per damaged or
    unreadable file), `rows` per table, `seconds`, and `stages`: (name, wall s, CPU s or None)
    of each stage (stages.py)."""

    def __init__(self, out, files, errors, rows, seconds, stages=()):
        self.out = out
        self.files = files
        self.errors = errors
        self.rows = rows
        self.seconds = seconds
        self.stages = list(stages)

    def table(self, name):
        """Table `name` as written, as one Arrow table."""
        return read_table(self.out, name)

    def __repr__(self):
        return f"Result({self.out!r}, files={len(self.files)}, rows={self.rows})"


def run(inputs, out, master=None, *, ports=DEFAULT_PORTS, auto=False, records=False,
        level=None, max_frame=MAX_FRAME, spark=None, conf=None, keylog=None,
        codec=DEFAULT_CODEC) -> Result:
    """Dissect capture files (paths, directories, globs or URIs) into `out` on Spark.

    Writes `<out>/<table>.parquet/` for exchanges, partitions, records, issues and connections in
    the pandas path's schema; `analysis.spark.load_output(out)` reads them back as Tables.
    master: a Spark master URL (default: spark-submit's, else local[*]); spark: an existing
    session instead; conf: extra Spark settings. ports/auto: where the brokers listen, as in
    `dissect()`. level: "headers", "bodies" (default) or "records" (records=True), as in
    `analysis.load`. keylog: TLS key log file(s) to decrypt TLS connections with, as for
    `analysis.load` (default $SSLKEYLOGFILE): read here, on the driver, and shipped to the decode
    tasks with their options, with the key logs of the pcapng files' Decryption Secrets Blocks
    (which the extract tasks collect). codec: how the Parquet files are compressed
    (analysis.parquet_codec). The files are read as one capture, in the order of their first
    packet.
    """
    from ..load import keylog_or_default
    from .session import spark_session
    keys = as_keylog(keylog_or_default(keylog))   # a file that cannot be read fails here
    if isinstance(inputs, str) or hasattr(inputs, "__fspath__"):
        inputs = [inputs]
    start = time.monotonic()
    if level is None:
        level = "records" if records else "bodies"
    check_local(inputs)
    own = spark is None
    spark = spark or spark_session(master, conf, quiet=True)
    stages = Stages(spark, start if own else None)
    listed = list_files(spark, inputs)
    stages.stage("list")
    files = [uri for uri, _size in listed]
    parallelism = spark.sparkContext.defaultParallelism
    conn_buckets = max(2 * parallelism, -(-sum(size for _, size in listed) // BUCKET_BYTES))

    # 1. extract, one task per file: the index of its segments (payloads stay in the file),
    # stored by bucket under <out>/_index/ (index.py)
    def extract(batches):
        for batch in batches:
            for i in batch.column(0).to_pylist():
                uri = files[i]
                path = local_path(uri)
                if path is not None:
                    yield from index.store(extract_file(path, uri), str(out), i, uri,
                                           conn_buckets)
                else:   # the decode stage cannot read it at an offset: payloads in the rows
                    with local_copy(uri) as path:
                        yield from index.store(extract_file(path, uri, inline=True), str(out),
                                               i, uri, conn_buckets)

    index.remove_index(str(out))
    remove_blobs(str(out))
    # one task per file, by index: spark.range needs no Python worker of its own (a Python RDD
    # of the names started a second worker pool, with its imports)
    listing = (spark.range(0, len(files), numPartitions=len(files))
               .mapInArrow(extract, _spark_schema(index.LISTING)).collect())
    stages.stage("extract")

    # 2. global packet numbers
    summaries = [r for r in listing if r.bucket == -1]
    ordered = sorted(summaries, key=lambda r: (r.ts is None, r.ts or 0, r.file))
    offsets, errors, total = {}, [], 0
    for r in ordered:
        offsets[r.file] = total
        total += r["count"]
        if r.error is not None:
            errors.append(r.error)
        if r.secrets:   # pcapng Decryption Secrets Blocks: keys for every decode task
            keys = keys if keys is not None else KeyLog()
            keys.add_text(bytes(r.secrets), where=f"{basename(r.file)}: decryption secrets")
    file_order = [r.file for r in ordered]

    # 3. decode a bucket of connections per task (payloads read from the files)
    malformed_keys = keys is not None and keys.malformed > 0   # one issue, from bucket 0
    opts = Options(ports, auto, level, max_frame,
                   ", ".join(basename(f) for f in file_order), offsets,
                   {f: local_path(f) for f in files if local_path(f) is not None}, keys)
    places = {}
    for r in listing:
        if r.bucket >= 0:
            places.setdefault(r.bucket, []).append((r.path, r.batches))
    parts = 2 * parallelism

    def decode(batches):
        for bucket in (b for batch in batches for b in batch.column(0).to_pylist()):
            table = index.load(str(out), places.get(bucket, ()))
            if table.num_rows or (bucket == 0 and malformed_keys):
                parts_rows = decode_bucket(table, bucket, opts, total, parts)
                yield from spill(parts_rows, str(out), bucket).to_batches()

    decoded = (spark.range(0, conn_buckets, numPartitions=conn_buckets)
               .mapInArrow(decode, _spark_schema(BLOBS)).collect())
    index.remove_index(str(out))
    stages.stage("decode")

    # 4. global ids (connections: numbered in the order they opened; exchanges: counted per part,
    # numbered by the writing tasks), then the tables
    blobs, starts, n = {}, {}, 0
    for r in decoded:
        blobs.setdefault(r.part, {}).setdefault(r.table, []).append(r.path)
    for part in sorted({r.part for r in decoded if r.table == "exchanges"}):
        starts[part] = n
        n += sum(r.rows for r in decoded if r.part == part and r.table == "exchanges")
    provisional = np.sort(np.concatenate(
        [np.frombuffer(r.ids, np.int64) for r in decoded if r.table == "connections"]
        or [np.zeros(0, np.int64)]))
    stages.stage("number")
    rows = write_tables(spark, str(out), blobs, starts, provisional, codec)
    stages.stage("write")
    # 5. the tables that join rows across connections and files, from the tables written
    rows["deliveries"] = deliveries.write(spark, str(out), codec)
    stages.stage("deliveries")
    rows["clients"] = clients.write(spark, str(out), codec)
    stages.stage("clients")
    return Result(str(out), file_order, errors, rows, time.monotonic() - start, stages.rows)


def _spark_schema(schema):
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def load_output(out):
    """The tables a run wrote, as analysis.Tables (the same object analysis.load returns)."""
    from ..load import Tables
    arrow = {name: read_table(str(out), name) for name in TABLES}
    for name, module in (("deliveries", deliveries), ("clients", clients)):
        derived = module.read(out)
        if derived is not None:
            arrow[name] = derived
    return Tables(arrow)

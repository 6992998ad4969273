"""The Spark job: capture files -> runs of segments -> connections -> the analysis tables in Parquet.

1. extract, one task per file: packets -> runs of TCP segments (extract.py);
2. number packets globally: files are read in the order of their first timestamp (then name),
   packet numbers run on across them, as `kafka-dissect export FILES...` numbers them when given
   the files in that order;
3. shuffle by connection and decode each connection with the dissector core (decode.py);
4. give connections and exchanges their global ids and write every table (write.py).
"""
from __future__ import annotations

import time

from dissector.pipeline import DEFAULT_PORTS, MAX_FRAME

from .decode import Options, decode_bucket
from .extract import SCHEMA as EXTRACT_SCHEMA
from .extract import SUMMARY, extract_file
from .inputs import basename, check_local, list_files, local_copy, local_path
from .schemas import EMIT_KEYS, EMIT_PACKET, TABLES, column, target_schema, union_schema
from .write import BUCKET, read_table, write_tables
BUCKET_BYTES = 32 << 20   # capture bytes per decode call (a bucket of connections)
CONNECTION_BUCKET = "connection_bucket"


class Result:
    """What a run wrote: `out`, `files` (in reading order), `errors` (one line per damaged or
    unreadable file), `rows` per table, `seconds`."""

    def __init__(self, out, files, errors, rows, seconds):
        self.out = out
        self.files = files
        self.errors = errors
        self.rows = rows
        self.seconds = seconds

    def table(self, name):
        """Table `name` as written, as one Arrow table."""
        return read_table(self.out, name)

    def __repr__(self):
        return f"Result({self.out!r}, files={len(self.files)}, rows={self.rows})"


def run(inputs, out, master=None, *, ports=DEFAULT_PORTS, auto=False, records=False,
        level=None, max_frame=MAX_FRAME, spark=None, conf=None) -> Result:
    """Dissect capture files (paths, directories, globs or URIs) into `out` on Spark.

    Writes `<out>/<table>.parquet/` for exchanges, partitions, records, issues and connections in
    the pandas path's schema; `analysis.spark.load_output(out)` reads them back as Tables.
    master: a Spark master URL (default: spark-submit's, else local[*]); spark: an existing
    session instead; conf: extra Spark settings. ports/auto: where the brokers listen, as in
    `dissect()`. level: "headers", "bodies" (default) or "records" (records=True), as in
    `analysis.load`. The files are read as one capture, in the order of their first packet.
    """
    from pyspark.sql import functions as F

    from .session import spark_session
    if isinstance(inputs, str) or hasattr(inputs, "__fspath__"):
        inputs = [inputs]
    start = time.monotonic()
    if level is None:
        level = "records" if records else "bodies"
    check_local(inputs)
    spark = spark or spark_session(master, conf, quiet=True)
    listed = list_files(spark, inputs)
    files = [uri for uri, _size in listed]
    parallelism = spark.sparkContext.defaultParallelism
    conn_buckets = max(2 * parallelism, -(-sum(size for _, size in listed) // BUCKET_BYTES))

    # 1. extract, one task per file: the index of its segments (payloads stay in the file)
    def extract(batches):
        for batch in batches:
            for uri in batch.column(0).to_pylist():
                path = local_path(uri)
                if path is not None:
                    yield from extract_file(path, uri)
                else:   # the decode stage cannot read it at an offset: payloads in the rows
                    with local_copy(uri) as path:
                        yield from extract_file(path, uri, inline=True)

    extract_spark = _spark_schema(EXTRACT_SCHEMA)
    file_df = spark.sparkContext.parallelize([(f,) for f in files], len(files)).toDF("file string")
    extracted = file_df.mapInArrow(extract, extract_spark).localCheckpoint(eager=True)

    # 2. global packet numbers
    summaries = (extracted.filter(F.col("kind") == SUMMARY)
                 .select("file", "ts", "count", "error").collect())
    ordered = sorted(summaries, key=lambda r: (r.ts is None, r.ts or 0, r.file))
    offsets, errors, total = {}, [], 0
    for r in ordered:
        offsets[r.file] = total
        total += r["count"]
        if r.error is not None:
            errors.append(r.error)
    file_order = [r.file for r in ordered]

    # 3. shuffle the index by connection, decode (payloads read from the files)
    opts = Options(ports, auto, level, max_frame,
                   ", ".join(basename(f) for f in file_order), offsets,
                   {f: local_path(f) for f in files if local_path(f) is not None})
    work = (extracted.filter((F.col("kind") != SUMMARY) | F.col("error").isNotNull())
            .withColumn(CONNECTION_BUCKET, F.pmod(F.xxhash64("key"), F.lit(conn_buckets))))
    decoded = (work.groupBy(CONNECTION_BUCKET)
               .applyInArrow(lambda t: decode_bucket(t, opts), _spark_schema(union_schema()))
               .localCheckpoint(eager=True))

    # 4. global ids (connections: few, numbered on the driver; exchanges: counted per bucket of
    # emission packets, numbered by the writing tasks), then the tables
    buckets = 2 * parallelism
    emitted = F.col(EMIT_PACKET)
    unkeyed = F.pmod(F.xxhash64(*(column(t, c) for t in ("issues", "connections")
                                  for c in target_schema(t).names)), F.lit(buckets))
    decoded = decoded.withColumn(BUCKET, F.when(emitted.isNull(), unkeyed).otherwise(
        F.least(F.lit(buckets - 1).cast("long"),
                F.floor(emitted.cast("double") * buckets / (total + 1))).cast("int")))
    provisional = sorted(r[0] for r in decoded.filter(F.col("table") == "connections")
                         .select(column("connections", "connection_id")).collect())
    connection_ids = {p: i for i, p in enumerate(provisional, 1)}
    counts = dict(decoded.filter(F.col("table") == "exchanges").groupBy(BUCKET).count()
                  .collect())
    starts, n = {}, 0
    for b in sorted(counts):
        starts[b] = n
        n += counts[b]
    ordered_rows = (decoded.repartition(buckets, BUCKET)
                    .sortWithinPartitions(BUCKET, *(F.col(k).asc_nulls_first() for k in EMIT_KEYS)))
    rows = write_tables(ordered_rows, str(out), starts, connection_ids)
    return Result(str(out), file_order, errors, rows, time.monotonic() - start)


def _spark_schema(schema):
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def load_output(out):
    """The tables a run wrote, as analysis.Tables (the same object analysis.load returns)."""
    from ..load import Tables
    return Tables({name: read_table(str(out), name) for name in TABLES})

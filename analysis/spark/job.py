"""The Spark job: capture files -> runs of segments -> connections -> the analysis tables in Parquet.

1. extract, one task per file: packets -> runs of TCP segments (extract.py);
2. number packets globally: files are read in the order of their first timestamp (then name),
   packet numbers run on across them, as `kafka-dissect export FILES...` numbers them when given
   the files in that order;
3. shuffle by connection and decode each connection with the dissector core (decode.py);
4. give connections and exchanges their global ids (ranks.py) and write every table (write.py).
"""
from __future__ import annotations

import time

from dissector.pipeline import DEFAULT_PORTS, MAX_FRAME

from .decode import Options, decode_group
from .extract import SCHEMA as EXTRACT_SCHEMA
from .extract import SUMMARY, extract_file
from .inputs import basename, list_files, local_copy
from .schemas import EMIT_PACKET, EMIT_SEQ, TABLES, column, target_schema, union_schema
from .write import read_table, write_table

SORT_KEYS = {
    "exchanges": ("exchange",),
    "partitions": ("exchange", "topic", "partition"),
    "records": ("connection_id", "correlation_id", "direction", "topic", "partition", "offset"),
    "issues": ("connection_id", "frame", "stream_offset", "code", "detail"),
    "connections": ("connection_id",),
}


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

    from .ranks import global_rank
    from .session import spark_session
    if isinstance(inputs, str) or hasattr(inputs, "__fspath__"):
        inputs = [inputs]
    start = time.monotonic()
    if level is None:
        level = "records" if records else "bodies"
    spark = spark or spark_session(master, conf)
    files = [uri for uri, _size in list_files(spark, inputs)]

    # 1. extract: one task per file
    def extract(batches):
        for batch in batches:
            for uri in batch.column(0).to_pylist():
                with local_copy(uri) as path:
                    yield from extract_file(path, uri)

    extract_spark = _spark_schema(EXTRACT_SCHEMA)
    file_df = spark.sparkContext.parallelize([(f,) for f in files], len(files)).toDF("file string")
    extracted = file_df.mapInArrow(extract, extract_spark).localCheckpoint(eager=True)
    print('T extract', time.monotonic()-start)

    # 2. global packet numbers
    summaries = (extracted.filter(F.col("kind") == SUMMARY)
                 .select("file", "ts", "count", "error").collect())
    ordered = sorted(summaries, key=lambda r: (r.ts is None, r.ts or 0, r.file))
    offsets, errors, total = [], [], 0
    for r in ordered:
        offsets.append((r.file, total))
        total += r["count"]
        if r.error is not None:
            errors.append(r.error)
    file_order = [r.file for r in ordered]
    offsets_df = spark.createDataFrame(offsets, "file string, offset long")

    # 3. shuffle by connection, decode
    opts = Options(ports, auto, level, max_frame,
                   ", ".join(basename(f) for f in file_order))
    work = (extracted.filter((F.col("kind") != SUMMARY) | F.col("error").isNotNull())
            .join(F.broadcast(offsets_df), "file"))
    decoded = (work.groupBy("key").applyInArrow(lambda t: decode_group(t, opts),
                                                _spark_schema(union_schema()))
               .localCheckpoint(eager=True))
    print('T decode', time.monotonic()-start)

    # 4. global ids, then the tables
    conn_ids = global_rank(decoded.filter(F.col("table") == "connections")
                           .select(F.col(column("connections", "connection_id")).alias("_prov")),
                           ["_prov"], "_connection_id")
    exchange_ids = global_rank(decoded.filter(F.col("table") == "exchanges"),
                               [EMIT_PACKET, EMIT_SEQ], "_exchange")
    print('T ranks', time.monotonic()-start)
    rows = {}
    for name in TABLES:
        names = target_schema(name).names
        df = decoded.filter(F.col("table") == name).select(
            *(F.col(column(name, c)).alias(c) for c in names), EMIT_PACKET, EMIT_SEQ)
        if "connection_id" in names:
            df = (df.join(conn_ids, df.connection_id == conn_ids._prov, "left")
                  .withColumn("connection_id", F.col("_connection_id")))
        if name in ("exchanges", "partitions"):
            df = (df.join(exchange_ids, [EMIT_PACKET, EMIT_SEQ], "left")
                  .withColumn("exchange", F.col("_exchange")))
        df = df.select(*names).orderBy(*(F.col(k).asc_nulls_first() for k in SORT_KEYS[name]))
        rows[name] = write_table(df, name, out)
        print('T', name, time.monotonic()-start)
    extracted.unpersist()
    decoded.unpersist()
    return Result(str(out), file_order, errors, rows, time.monotonic() - start)


def _spark_schema(schema):
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def load_output(out):
    """The tables a run wrote, as analysis.Tables (the same object analysis.load returns)."""
    from ..load import Tables
    return Tables({name: read_table(str(out), name) for name in TABLES})

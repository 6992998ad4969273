"""The deliveries table (analysis.deliveries) in Spark SQL: produced records joined with the Fetch
responses that delivered them by (cluster, topic, partition, offset), across every connection and
file, from the Parquet tables a run wrote; written by the executors in the pandas table's schema.

Same definitions and tie-breaks as the pandas function: a client's group is the one it names
most in its group requests (then the smallest name); a broker address's cluster is the one the
latest Metadata or DescribeCluster response says (the address it came from before any address
it advertises; later responses, then later brokers in one, win), and none unless the run names
two cluster ids or more (analysis.cluster.broker_clusters); an offset claimed by two Produce
requests belongs to the earlier (then the lower exchange number); a consumer's first delivery is
the earliest Fetch response (then the lower exchange number). Timestamps are nanosecond longs
here (spark.sql.legacy.parquet.nanosAsLong), as in the tables.
"""
from __future__ import annotations

from ..cluster import DESCRIBE_CLUSTER, METADATA
from ..deliveries import DELIVERY_COLUMNS, FETCH, GROUP_APIS, PRODUCE, delivery_columns, sort_rows

MIN_RECORD_BYTES = 7   # as analysis.deliveries: a damaged count cannot exceed bytes / 7 + 1

# CTEs over a CTE `ex` of exchanges: `groups` (client_ip, client_id, group_id), each client's
# group as deliveries.client_groups chooses it (also used by spark/clients.py)
GROUPS = f"""
named AS (
    SELECT client_ip, client_id, group_id, count(*) AS n FROM ex
    WHERE api_key IN ({", ".join(map(str, GROUP_APIS))}) AND group_id IS NOT NULL
    GROUP BY client_ip, client_id, group_id),
groups AS (
    SELECT client_ip, client_id, group_id FROM (
        SELECT *, row_number() OVER (PARTITION BY client_ip, client_id
                                     ORDER BY n DESC, group_id) AS rn FROM named)
    WHERE rn = 1)"""

# CTE `addr` (ip, port, cluster_id): each broker address's cluster, as broker_clusters says it
CLUSTERS = f"""
meta AS (
    SELECT exchange, response_ts, cluster_id, brokers, broker_ip, broker_port FROM kd_exchanges
    WHERE api_key IN ({METADATA}, {DESCRIBE_CLUSTER}) AND cluster_id IS NOT NULL),
said AS (
    SELECT b.host AS ip, b.port AS port, cluster_id, 0 AS own, response_ts, exchange, i
    FROM meta LATERAL VIEW posexplode(brokers) x AS i, b
    WHERE b.host IS NOT NULL AND b.port IS NOT NULL
    UNION ALL
    SELECT broker_ip, broker_port, cluster_id, 1, response_ts, exchange, 0 FROM meta
    WHERE broker_ip IS NOT NULL AND broker_port IS NOT NULL),
addr AS (
    SELECT ip, port, cluster_id FROM (
        SELECT *, row_number() OVER (PARTITION BY ip, port
                                     ORDER BY own DESC, response_ts DESC, exchange DESC,
                                              i DESC) AS rn
        FROM said)
    WHERE rn = 1 AND (SELECT count(DISTINCT cluster_id) FROM meta) >= 2)"""

SQL = f"""
WITH {CLUSTERS},
ex AS (
    SELECT e.exchange, e.api_key, e.client_id, e.client_ip, e.group_id, e.request_ts,
           e.response_end_ts, e.replica_id, coalesce(a.cluster_id, '') AS cluster
    FROM kd_exchanges e LEFT JOIN addr a ON a.ip = e.broker_ip AND a.port = e.broker_port),
{GROUPS},
produced AS (
    SELECT e.cluster, p.topic, p.partition, p.exchange, e.client_id, e.client_ip, e.request_ts,
           e.response_end_ts, p.first_offset,
           least(p.last_offset, p.first_offset + coalesce(p.bytes, 0) div {MIN_RECORD_BYTES})
               AS last_offset
    FROM kd_partitions p JOIN ex e ON p.exchange = e.exchange
    WHERE p.api_key = {PRODUCE} AND p.first_offset IS NOT NULL AND p.last_offset IS NOT NULL),
records AS (
    SELECT * FROM (
        SELECT cluster, topic, partition, offset, exchange, client_id, client_ip, request_ts,
               response_end_ts,
               row_number() OVER (PARTITION BY cluster, topic, partition, offset
                                  ORDER BY request_ts, exchange) AS rn
        FROM produced
        LATERAL VIEW explode(sequence(first_offset, last_offset)) o AS offset
        WHERE last_offset >= first_offset)
    WHERE rn = 1),
fetched AS (
    SELECT e.cluster, p.topic, p.partition, p.exchange, e.client_id, e.client_ip, g.group_id,
           e.response_end_ts AS ts,
           greatest(p.first_offset, coalesce(p.fetch_offset, p.first_offset)) AS lo,
           p.last_offset AS hi,
           coalesce(g.group_id, concat('client:', coalesce(e.client_id, ''), '@',
                                       coalesce(e.client_ip, ''))) AS consumer
    FROM kd_partitions p JOIN ex e ON p.exchange = e.exchange
         LEFT JOIN groups g ON g.client_ip <=> e.client_ip AND g.client_id <=> e.client_id
    WHERE p.api_key = {FETCH} AND p.first_offset IS NOT NULL AND p.last_offset IS NOT NULL
          AND coalesce(e.replica_id, -1) < 0),
pairs AS (
    SELECT r.cluster, r.topic, r.partition, r.offset, f.exchange, f.client_id, f.client_ip,
           f.group_id, f.ts,
           row_number() OVER (PARTITION BY r.cluster, r.topic, r.partition, r.offset, f.consumer
                              ORDER BY f.ts, f.exchange) AS rn,
           count(*) OVER (PARTITION BY r.cluster, r.topic, r.partition, r.offset, f.consumer)
               AS n
    FROM records r JOIN fetched f
         ON r.cluster = f.cluster AND r.topic = f.topic AND r.partition = f.partition
            AND r.offset BETWEEN f.lo AND f.hi)
SELECT r.cluster AS cluster_id, r.topic, r.partition, r.offset,
       r.client_id AS producer_client_id, r.client_ip AS producer_ip,
       r.exchange AS produce_exchange, r.request_ts AS produce_request_ts,
       r.response_end_ts AS ack_ts,
       d.client_id AS consumer_client_id, d.client_ip AS consumer_ip,
       d.group_id AS consumer_group, d.exchange AS fetch_exchange, d.ts AS delivery_ts,
       (d.ts - r.request_ts) / 1e6 AS end_to_end_ms,
       (r.response_end_ts - r.request_ts) / 1e6 AS ack_ms,
       coalesce(d.n, 0) AS deliveries
FROM records r LEFT JOIN (SELECT * FROM pairs WHERE rn = 1) d
     ON r.cluster = d.cluster AND r.topic = d.topic AND r.partition = d.partition
        AND r.offset = d.offset
"""


def several_clusters(spark) -> bool:
    """Does the run name two cluster ids or more (analysis.cluster.broker_clusters)? Over the
    views summaries.register made."""
    return spark.sql(f"""
        SELECT count(DISTINCT cluster_id) FROM kd_exchanges
        WHERE api_key IN ({METADATA}, {DESCRIBE_CLUSTER})""").first()[0] >= 2


def deliveries(spark):
    """The deliveries as a Spark DataFrame (timestamps as nanosecond longs), over the views
    summaries.register made (kd_exchanges, kd_partitions); its first column, cluster_id, is ''
    unless the run names two cluster ids or more."""
    return spark.sql(SQL)


def write(spark, out: str, codec) -> int:
    """Compute the deliveries of the run in `out` and write them as
    `<out>/deliveries.parquet/part-*.parquet` from the executors, compressed with `codec`;
    returns the row count."""
    import pyarrow as pa

    from ..columns import table_schema
    from .summaries import register
    from .write import output_fs

    register(spark, out)
    filesystem, base = output_fs(out)
    path = f"{base}/deliveries.parquet"
    from pyarrow import fs
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)
    filesystem.create_dir(path, recursive=True)
    schema = table_schema(delivery_columns(several_clusters(spark)))
    target = str(out)

    def write_part(batches):
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        from .write import output_fs as fs_of
        part = TaskContext.get().partitionId()
        dest_fs, dest = fs_of(target)
        rows = 0
        tables = [_typed(pa.Table.from_batches([b]), schema) for b in batches]
        if tables:
            table = pa.concat_tables(tables)
            rows = table.num_rows
            pq.write_table(table, f"{dest}/deliveries.parquet/part-{part:05d}.parquet",
                           filesystem=dest_fs, compression=codec)
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    counts = deliveries(spark).mapInArrow(write_part, "rows long").collect()
    return sum(r.rows for r in counts)


def _typed(table, schema):
    """Spark's columns in the pandas table's types (nanosecond longs to UTC timestamps, names
    dictionary-encoded), those of `schema` only."""
    import pyarrow as pa
    arrays = []
    for field in schema:
        col = table.column(field.name).combine_chunks()
        typ = field.type
        if pa.types.is_timestamp(typ):
            col = col.cast(pa.int64()).view(typ)
        elif pa.types.is_dictionary(typ):
            col = col.cast(typ.value_type).dictionary_encode()
        else:
            col = col.cast(typ)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema)


def read(out: str):
    """The deliveries a run wrote, as one Arrow table in the pandas function's row order, or None
    when the run wrote none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .write import output_fs
    filesystem, base = output_fs(str(out))
    path = f"{base}/deliveries.parquet"
    from pyarrow import fs
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return None
    parts = sorted(i.path for i in filesystem.get_file_info(fs.FileSelector(path))
                   if i.path.endswith(".parquet"))
    from ..columns import table_schema
    schema = table_schema(DELIVERY_COLUMNS)
    table = pa.concat_tables([pq.read_table(p, filesystem=filesystem) for p in parts]) \
        .unify_dictionaries() if parts else schema.empty_table()
    return sort_rows(table)


"""The clients table (analysis.clients) in Spark SQL: one row per client (address and client id)
across every connection and file, from the Parquet tables a run wrote; one row per client, so
the rows are collected and written by the driver, in the pandas table's schema and order.

Same definitions as the pandas function: the software of the client's last ApiVersions v3+
request (by exchange number); the group it names most (spark/deliveries.GROUPS); a broker's
offer per connection from its last ApiVersions response (last range of an api in it), else the
highest any response made. Timestamps are nanosecond longs here, as in the tables.
"""
from __future__ import annotations

from dissector.protocol.names import APIS, api_name

from ..clients import ADMIN_APIS, CLIENT_COLUMNS, FETCH, GROUP_APIS, PRODUCE
from .deliveries import GROUPS


def _in(keys) -> str:
    return ", ".join(map(str, sorted(keys)))


def _api_name(column: str) -> str:
    """api_name(column) as SQL (Unknown(N) beyond the keys the specs define)."""
    cases = " ".join(f"WHEN {k} THEN '{api_name(k)}'" for k in sorted(APIS))
    return f"CASE {column} {cases} ELSE concat('Unknown(', CAST({column} AS STRING), ')') END"


SAME = "{a}.client_ip <=> {b}.client_ip AND {a}.client_id <=> {b}.client_id"


def _same(a, b) -> str:
    return SAME.format(a=a, b=b)


SQL = f"""
WITH ex AS (
    SELECT exchange, connection_id, client_ip, client_id, api_key, api_version, replica_id,
           client_software_name, client_software_version, error_code, error_name,
           transactional_id, acks, request_ts, group_id
    FROM kd_exchanges),{GROUPS},
per AS (
    SELECT client_ip, client_id,
           coalesce(bool_or(api_key = {PRODUCE}), false) AS producer,
           coalesce(bool_or((api_key = {FETCH} AND coalesce(replica_id, -1) < 0)
                            OR api_key IN ({_in(GROUP_APIS)})), false) AS consumer,
           coalesce(bool_or(api_key IN ({_in(ADMIN_APIS)})), false) AS admin,
           max_by(struct(client_software_name AS name, client_software_version AS version),
                  CASE WHEN client_software_name IS NOT NULL THEN exchange END) AS software,
           array_sort(collect_set(CASE WHEN api_key = {PRODUCE} THEN acks END)) AS acks,
           bool_or(transactional_id IS NOT NULL) AS transactional_id,
           count(DISTINCT connection_id) AS connections,
           count(*) AS requests,
           count_if(coalesce(error_code, 0) != 0) AS errors,
           array_sort(collect_set(CASE WHEN coalesce(error_code, 0) != 0 THEN error_name END))
               AS error_names,
           min(request_ts) AS first_seen, max(request_ts) AS last_seen
    FROM ex GROUP BY client_ip, client_id),
parts AS (
    SELECT e.client_ip, e.client_id,
           array_sort(collect_set(CASE WHEN p.api_key = {PRODUCE} THEN p.topic END))
               AS topics_produced,
           array_sort(collect_set(CASE WHEN p.api_key = {FETCH}
                                       AND coalesce(p.record_count, 0) > 0 THEN p.topic END))
               AS topics_consumed,
           array_sort(collect_set(CASE WHEN p.api_key = {PRODUCE} THEN p.compression END))
               AS compression,
           coalesce(bool_or(p.api_key = {PRODUCE} AND coalesce(p.producer_id, -1) >= 0), false)
               AS idempotent,
           coalesce(bool_or(p.api_key = {PRODUCE} AND coalesce(p.is_transactional, false)),
                    false) AS transactional_batches
    FROM kd_partitions p JOIN ex e ON p.exchange = e.exchange
    GROUP BY e.client_ip, e.client_id),
ranges AS (
    SELECT e.connection_id, e.exchange, x.pos, x.r.api_key AS key, x.r.max_version AS top
    FROM kd_exchanges e LATERAL VIEW posexplode(e.api_versions) x AS pos, r
    WHERE e.connection_id IS NOT NULL AND x.r.api_key IS NOT NULL
          AND x.r.max_version IS NOT NULL),
anywhere AS (SELECT key, max(top) AS top FROM ranges GROUP BY key),
per_connection AS (
    SELECT connection_id, key, top FROM (
        SELECT *, row_number() OVER (PARTITION BY connection_id, key
                                     ORDER BY exchange DESC, pos DESC) AS rn FROM ranges)
    WHERE rn = 1),
used AS (
    SELECT client_ip, client_id, api_key AS key, max(api_version) AS version FROM ex
    WHERE api_key IS NOT NULL AND api_version IS NOT NULL GROUP BY client_ip, client_id, api_key),
mine AS (
    SELECT c.client_ip, c.client_id, o.key, min(o.top) AS top
    FROM (SELECT DISTINCT client_ip, client_id, connection_id FROM ex
          WHERE api_key IS NOT NULL AND api_version IS NOT NULL) c
         JOIN per_connection o ON c.connection_id = o.connection_id
    GROUP BY c.client_ip, c.client_id, o.key),
stale AS (
    SELECT client_ip, client_id,
           transform(array_sort(collect_list(struct(key, text))), s -> s.text) AS stale_apis
    FROM (SELECT u.client_ip, u.client_id, u.key,
                 concat({_api_name("u.key")}, ' v', CAST(u.version AS STRING),
                        '<v', CAST(coalesce(m.top, a.top) AS STRING)) AS text
          FROM used u LEFT JOIN mine m ON {_same("m", "u")} AND m.key = u.key
               LEFT JOIN anywhere a ON a.key = u.key
          WHERE u.version < coalesce(m.top, a.top))
    GROUP BY client_ip, client_id)
SELECT p.client_ip, p.client_id, p.software.name AS software_name,
       p.software.version AS software_version,
       coalesce(nullif(concat_ws('+', CASE WHEN p.producer THEN 'producer' END,
                                 CASE WHEN p.consumer THEN 'consumer' END,
                                 CASE WHEN p.admin THEN 'admin' END), ''), 'other') AS role,
       CASE WHEN g.group_id IS NULL THEN array() ELSE array(g.group_id) END AS groups,
       coalesce(q.topics_produced, array()) AS topics_produced,
       coalesce(q.topics_consumed, array()) AS topics_consumed,
       p.acks, coalesce(q.compression, array()) AS compression,
       coalesce(q.idempotent, false) AS idempotent,
       coalesce(p.transactional_id, false) OR coalesce(q.transactional_batches, false)
           AS transactional,
       p.connections, p.requests, p.errors, p.error_names,
       coalesce(s.stale_apis, array()) AS stale_apis, p.first_seen, p.last_seen
FROM per p LEFT JOIN parts q ON {_same("q", "p")}
     LEFT JOIN groups g ON {_same("g", "p")}
     LEFT JOIN stale s ON {_same("s", "p")}
ORDER BY p.requests DESC, p.client_ip ASC NULLS LAST, p.client_id ASC NULLS LAST
"""


def clients(spark):
    """The clients as a Spark DataFrame (timestamps as nanosecond longs), over the views
    summaries.register made (kd_exchanges, kd_partitions)."""
    return spark.sql(SQL)


def write(spark, out: str, codec) -> int:
    """Compute the clients of the run in `out` and write them as
    `<out>/clients.parquet/part-00000.parquet`, compressed with `codec`; returns the row
    count."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyarrow import fs

    from ..columns import table_schema
    from .deliveries import _typed
    from .summaries import register
    from .write import table_dir

    register(spark, out)
    schema = table_schema(CLIENT_COLUMNS)
    rows = clients(spark).toArrow()
    table = _typed(rows, schema) if rows.num_rows else schema.empty_table()
    filesystem, path = table_dir(out, "clients")
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_dir(path)
    filesystem.create_dir(path, recursive=True)
    pq.write_table(pa.Table.from_batches(table.to_batches(), schema), f"{path}/part-00000.parquet",
                   filesystem=filesystem, compression=codec)
    return table.num_rows


def read(out: str):
    """The clients a run wrote, as one Arrow table, or None when the run wrote none."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    from .write import table_dir
    filesystem, path = table_dir(str(out), "clients")
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return None
    return pq.read_table(f"{path}/part-00000.parquet", filesystem=filesystem)

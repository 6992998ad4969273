"""The latency and error summaries of analysis.latency / analysis.errors, in Spark SQL, computed from
the Parquet tables a run wrote (so they scale with the cluster, not the driver).

Same definitions as the pandas functions: latency is `latency_ms`; Fetch long polls (answered no
sooner than max_wait_ms less the same tolerance, no records) are left out unless asked for;
percentiles are exact and interpolate linearly between order statistics (Spark's `percentile`,
numpy's default); null group keys are kept as groups where pandas keeps them (dropna=False).
Each function returns a Spark DataFrame with the pandas function's columns.
"""
from __future__ import annotations

import os

from dissector.protocol.generated.errors import ERRORS
from dissector.protocol.names import error_name, is_retriable

from ..latency import DIMENSIONS, FETCH, QUANTILES, long_poll_mask
from .deliveries import CLUSTERS, several_clusters

TOLERANCE_MS, TOLERANCE_FRAC = long_poll_mask.__defaults__

_KEYS = {   # the DIMENSIONS columns that are not exchange columns, as SQL expressions
    "client": "client_ip AS client",
    "broker": "concat(broker_ip, ':', CAST(broker_port AS STRING)) AS broker",
}


def register(spark, out) -> None:
    """Temporary views kd_exchanges and kd_partitions over a run's Parquet output, and
    kd_answered: exchanges with a latency, with `long_poll`."""
    out = str(out)
    prefix = out if "://" in out else os.path.abspath(out)
    for name in ("exchanges", "partitions"):
        spark.read.parquet(f"{prefix}/{name}.parquet").createOrReplaceTempView(f"kd_{name}")
    spark.sql(f"""
        CREATE OR REPLACE TEMP VIEW kd_answered AS
        SELECT *,
               coalesce(api_key = {FETCH} AND max_wait_ms > 0
                        AND latency_ms >= max_wait_ms - greatest(max_wait_ms * {TOLERANCE_FRAC},
                                                                 {TOLERANCE_MS})
                        AND coalesce(record_count, 0) = 0, false) AS long_poll
        FROM kd_exchanges WHERE latency_ms IS NOT NULL""")


def _stats(value="latency_ms"):
    qs = ", ".join(f"percentile({value}, {q}) AS `{name}`" for name, q in QUANTILES)
    return f"count({value}) AS count, avg({value}) AS mean, {qs}, max({value}) AS max"


def percentiles(spark, by="api", include_long_polls=False):
    """count, mean, p50, p90, p99, p99.9, max of latency_ms per value of `by` (DIMENSIONS)."""
    if by not in DIMENSIONS:
        raise ValueError(f"by must be one of {', '.join(DIMENSIONS)}")
    polls = "" if include_long_polls else "AND NOT long_poll"
    if by == "topic":
        source = (f"(SELECT latency_ms, topic FROM kd_answered "
                  f"LATERAL VIEW explode(topics) t AS topic WHERE topic IS NOT NULL {polls})")
        select = "topic"
    else:
        keys = DIMENSIONS[by]
        extra = "".join(f", {_KEYS[k]}" for k in keys if k in ("client", "broker"))
        source = f"(SELECT *{extra} FROM kd_answered WHERE true {polls})"
        select = ", ".join(keys)
    return spark.sql(f"SELECT {select}, {_stats()} FROM {source} GROUP BY {select} "
                     f"ORDER BY p99 DESC")


def time_series(spark, include_long_polls=False):
    """Per second and api: requests, p50, p99, max latency, errors (analysis.latency.time_series
    with its default 1 s)."""
    polls = "" if include_long_polls else "AND NOT long_poll"
    return spark.sql(f"""
        SELECT timestamp_seconds(floor(request_ts / 1000000000)) AS second, api_name,
               count(latency_ms) AS requests, percentile(latency_ms, 0.5) AS p50,
               percentile(latency_ms, 0.99) AS p99, max(latency_ms) AS max,
               sum(CASE WHEN coalesce(error_code, 0) != 0 THEN 1 ELSE 0 END) AS errors
        FROM kd_answered
        WHERE request_ts IS NOT NULL AND api_name IS NOT NULL {polls}
        GROUP BY 1, 2 ORDER BY 1, 2""")


def _rates(spark, key):
    return spark.sql(f"""
        SELECT {key}, count(*) AS requests,
               sum(CASE WHEN coalesce(error_code, 0) != 0 THEN 1 ELSE 0 END) AS errors,
               sum(CASE WHEN status = 'unanswered' THEN 1 ELSE 0 END) AS unanswered,
               sum(CASE WHEN coalesce(throttle_time_ms, 0) > 0 THEN 1 ELSE 0 END) AS throttled,
               sum(CASE WHEN coalesce(error_code, 0) != 0 THEN 1 ELSE 0 END) / count(*)
                   AS error_rate
        FROM kd_exchanges GROUP BY {key} ORDER BY errors DESC, requests DESC""")


def errors_by_api(spark):
    """Per api: requests, errors, unanswered, throttled, error_rate (analysis.errors.by_api)."""
    return _rates(spark, "api_name")


def errors_by_client(spark):
    """Per client id (analysis.errors.by_client)."""
    return _rates(spark, "client_id")


def errors_by_error(spark):
    """Per error code: its name, failing exchanges (and `top_level`: those where it is the
    response's own top-level code), partition rows carrying it, their shares of all exchanges and
    partition rows, retriable or not (analysis.errors.by_error)."""
    codes = spark.createDataFrame([(c, error_name(c), is_retriable(c)) for c in sorted(ERRORS)],
                                  "code int, error_name string, retriable boolean")
    codes.createOrReplaceTempView("kd_error_codes")

    def count(column, table):
        return (f"SELECT CAST({column} AS INT) AS code, count(*) AS n FROM {table} "
                f"WHERE coalesce({column}, 0) != 0 GROUP BY 1")
    return spark.sql(f"""
        WITH e AS ({count("error_code", "kd_exchanges")}),
             t AS ({count("top_error_code", "kd_exchanges")}),
             p AS ({count("error_code", "kd_partitions")}),
             all_codes AS (SELECT code FROM e UNION SELECT code FROM t UNION SELECT code FROM p)
        SELECT a.code AS error_code,
               coalesce(c.error_name, concat('Unknown(', a.code, ')')) AS error_name,
               coalesce(e.n, 0) AS exchanges, coalesce(t.n, 0) AS top_level,
               coalesce(e.n, 0) / greatest((SELECT count(*) FROM kd_exchanges), 1)
                   AS exchange_rate,
               coalesce(p.n, 0) AS partitions,
               coalesce(p.n, 0) / greatest((SELECT count(*) FROM kd_partitions), 1)
                   AS partition_rate,
               coalesce(c.retriable, false) AS retriable
        FROM all_codes a LEFT JOIN e ON e.code = a.code LEFT JOIN t ON t.code = a.code
             LEFT JOIN p ON p.code = a.code LEFT JOIN kd_error_codes c ON c.code = a.code
        ORDER BY exchanges DESC, partitions DESC""")


def errors_by_partition(spark):
    """Per (topic, partition): rows, errors, error_rate (analysis.errors.by_partition without
    top_error); per (cluster_id, topic, partition) where the run names two cluster ids or more,
    each row in its broker's cluster (analysis.cluster.broker_clusters)."""
    several = several_clusters(spark)
    by = "cluster_id, " if several else ""
    rows = f"""
        WITH {CLUSTERS},
        rows AS (
            SELECT coalesce(a.cluster_id, '') AS cluster_id, p.topic, p.partition, p.error_code
            FROM kd_partitions p LEFT JOIN kd_exchanges e ON e.exchange = p.exchange
                 LEFT JOIN addr a ON a.ip = e.broker_ip AND a.port = e.broker_port)""" \
        if several else "WITH rows AS (SELECT topic, partition, error_code FROM kd_partitions)"
    return spark.sql(f"""{rows}
        SELECT {by}topic, partition, count(*) AS rows,
               sum(CASE WHEN coalesce(error_code, 0) != 0 THEN 1 ELSE 0 END) AS errors,
               sum(CASE WHEN coalesce(error_code, 0) != 0 THEN 1 ELSE 0 END) / count(*)
                   AS error_rate
        FROM rows GROUP BY {by}topic, partition ORDER BY errors DESC, rows DESC""")

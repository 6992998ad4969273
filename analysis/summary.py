"""The answers a report shows, computed once from Tables: (section title, DataFrame) pairs in
reading order. The terminal (stats) and HTML (report) renderings both walk this list."""
from __future__ import annotations

import pandas as pd

from . import anatomy, cluster, consumers, deliveries, errors, latency, producers, rebalances, tls


SHOWN_CLUSTERS = 5   # cluster ids named in the overview: a forged capture can hold thousands
CLIENTS_TITLE = "Clients (the"
CLIENTS_SHOWN = ["client_id", "client_ip", "role", "groups", "topics_produced",
                 "topics_consumed", "requests", "errors", "stale"]
SLOW_SHOWN = ["exchange", "request_packet", "response_packet", "request_ts", "api_name",
              "api_version", "client_id", "latency_ms", "error_name"]


def overview(t) -> pd.DataFrame:
    ex = t.exchanges
    status = ex["status"].astype("string").value_counts()
    span = producers.span_seconds(t)
    tls_connections, decrypted = tls.counts(t)
    # the batch headers' counts; at the headers level no Produce or Fetch has one
    counts = ex["record_count"]
    carriers = counts[ex["api_key"].isin([producers.PRODUCE, latency.FETCH])]
    in_batches = None if len(carriers) and carriers.isna().all() else int(counts.fillna(0).sum())
    decoded = len(t.records)
    rows = [
        ("exchanges", len(ex)),
        ("connections", len(t.connections)),
    ] + _clusters(t) + ([("TLS connections", tls_connections),
          ("TLS connections not decrypted", tls_connections - decrypted)]
         if tls_connections else []) + [
        ("client ids", ex["client_id"].nunique()),
        ("span (s)", round(span, 3) if span else 0),
        ("answered", int(ex["latency_ms"].notna().sum())),
    ] + [(f"status {k}", int(v)) for k, v in status.items()] + [
        ("exchanges with an error", int((ex["error_code"].fillna(0) != 0).sum())),
        ("partition rows", len(t.partitions)),
        ("records in batches", "not read (--level headers)" if in_batches is None
         else in_batches),
        ("records decoded", "0 (--level records decodes them)" if in_batches and not decoded
         else decoded),
        ("issues", len(t.issues)),
    ]
    return pd.DataFrame([(k, str(v)) for k, v in rows], columns=["what", "value"])


def _clusters(t) -> list:
    """The overview's row of the cluster ids where the capture holds several (the tables below
    then have a cluster id column), else none."""
    named = sorted(set(cluster.broker_clusters(t).values()))
    more = len(named) - SHOWN_CLUSTERS
    shown = ", ".join(named[:SHOWN_CLUSTERS]) + (f" and {more} more" if more > 0 else "")
    return [("clusters", f"{len(named)}: {shown}")] if named else []


def issues_by_code(t) -> pd.DataFrame:
    i = t.issues
    if i.empty:
        return pd.DataFrame(columns=["code", "severity", "count"])
    return i.groupby(["code", "severity"], observed=True).size().rename("count") \
        .reset_index().sort_values("count", ascending=False)


def clients_shown(t) -> pd.DataFrame:
    """The clients table (analysis.clients) as stats shows it: the number of its stale apis
    (the software section lists them)."""
    c = t.clients
    return c.assign(stale=c["stale_apis"].list.len())[CLIENTS_SHOWN]


def client_software(t) -> pd.DataFrame:
    """Per client software (name and version from ApiVersions v3+): how many clients run it and
    the api versions they used below the broker's ("Fetch v12<v17")."""
    c = t.clients
    rows = []
    for (name, version), g in c.groupby(["software_name", "software_version"], dropna=False,
                                        observed=True, sort=False):
        stale = {s for apis in g["stale_apis"] for s in apis}
        rows.append((name, version, len(g), sorted(stale, key=_api_then_version)))
    return pd.DataFrame(rows, columns=["software_name", "software_version", "clients",
                                       "stale_apis"])


def _rebalances_shown(t) -> pd.DataFrame:
    r = rebalances.rebalances(t)
    return r[[c for c in ("cluster_id", "group_id", "generation", "start_ts", "sync_ms",
                          "duration_ms", "members", "trigger", "trigger_client") if c in r]]


def _coordinators_found(t) -> pd.DataFrame:
    """Each client's coordinators, once (per cluster where the capture holds several)."""
    found = cluster.coordinators(t)
    return found.drop_duplicates([c for c in ("cluster_id", "client_id", "key", "node_id")
                                  if c in found])


def _api_then_version(stale: str):
    name, versions = stale.split(" ", 1)
    return name, versions


def sections(t, top: int = 10):
    """(title, frame) pairs; empty frames are left for the renderer to skip."""
    ex = t.exchanges
    d = t.deliveries
    return [
        ("Overview", overview(t)),
        ("Latency by api (ms)", latency.percentiles(ex, "api")),
        ("Latency by api version (ms)", latency.percentiles(ex, "version")),
        ("Latency by client id (ms)", latency.percentiles(ex, "client_id")),
        ("Latency by client (ms)", latency.percentiles(ex, "client")),
        ("Latency by broker (ms)", latency.percentiles(ex, "broker")),
        ("Latency by topic (ms)", latency.percentiles(ex, "topic").head(top)),
        ("Where the time goes by api (mean ms: request, network, broker, response)",
         anatomy.where_time_goes(ex, "api")),
        ("Where the time goes by broker (mean ms)", anatomy.where_time_goes(ex, "broker")),
        (f"Slowest {top} exchanges (packet numbers for drill-down)",
         latency.slowest(ex, top)[SLOW_SHOWN]),
        ("Fetch long polls (waited out max_wait_ms, no records; not counted as slow)",
         latency.long_polls(ex)),
        ("Errors by name", errors.by_error(t)),
        ("Retriable and fatal errors", errors.retriable_split(t)),
        ("Errors by api", errors.by_api(t)),
        ("Errors by client id", errors.by_client(t)),
        ("Errors by topic-partition", errors.by_partition(t).head(top)),
        ("Unanswered requests", errors.unanswered(t).head(top)),
        ("Throttling", errors.throttling(t)),
        ("Consumer groups", consumers.groups(t)),
        ("Rebalances (ms the group did not consume)", _rebalances_shown(t)),
        ("Group timeline", consumers.timeline(t).head(4 * top)),
        ("Committed offsets (latest)", consumers.committed_offsets(t)),
        ("Consumer lag (high watermark - fetch offset)", consumers.lag_summary(t)),
        ("End-to-end record latency by topic (ms: Produce request to first delivery)",
         deliveries.percentiles(d, "topic")),
        ("End-to-end record latency by producer (ms)", deliveries.percentiles(d, "producer")),
        ("End-to-end record latency by consumer group (ms)", deliveries.percentiles(d, "group")),
        ("Records produced and never fetched in the capture",
         deliveries.undelivered(d).query("undelivered > 0")),
        ("Brokers (as Metadata and DescribeCluster responses advertise them)",
         cluster.brokers(t)),
        ("Cluster misconfiguration", cluster.misconfigurations(t)),
        ("Partition leader changes (with the leader errors before them)",
         cluster.leader_changes(t).head(4 * top)),
        ("Coordinators found", _coordinators_found(t).head(4 * top)),
        (f"{CLIENTS_TITLE} {4 * top} busiest; stale: apis used below the broker's version)",
         clients_shown(t).head(4 * top)),
        ("Client software (ApiVersions v3+) and the api versions its clients used below the "
         "broker's", client_software(t)),
        ("Producer throughput", producers.throughput(t)),
        ("Batch sizes", producers.batch_sizes(t)),
        ("Compression", producers.compression(t)),
        ("Acks", producers.acks_mix(t)),
        ("Idempotent and transactional producers", producers.producer_ids(t)),
        ("TLS connections (not decrypted: no keys for them)", tls.connections(t)),
        ("Issues", issues_by_code(t)),
    ]

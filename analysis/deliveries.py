"""End-to-end record latency: each produced record from its Produce request to the Fetch
responses that delivered it, on any connection.

A produced record's offset is the Produce response's base offset plus its place in the request's
record set for that partition (the partitions table's first_offset..last_offset of a Produce row).
A Fetch response delivers the offsets of its record set from the fetch offset on (a batch may start
before it: the consumer skips those) to the set's last record (partitions first_offset,
last_offset, fetch_offset). The two are joined by (topic, partition, offset), and by cluster where
the capture holds several (cluster.broker_clusters: the cluster id its Metadata responses give
each broker address; two clusters number the same topic's offsets each their own way): one row per
produced record and consumer (its group, or the consumer's client id and address when it fetched
outside a group), with the first delivery and how many Fetch responses carried the record to that
consumer. A record no consumer fetched in the capture keeps one row with no consumer. Where the
capture holds several clusters, the table starts with each record's cluster id, and the
summaries below are per cluster.

Times: produce_request_ts is the Produce request's first packet, ack_ts the response's last
packet (when the producer has the offset), delivery_ts the Fetch response's last packet (when the
consumer has the record): end_to_end_ms = first delivery - produce request. Follower fetches
(replica_id >= 0) are not consumers. Produce requests without an answer (acks=0) or with a
partition error give no offsets, so their records are not here.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from .cluster import CLUSTER_COLUMNS, broker_clusters, with_cluster
from .latency import QUANTILES

PRODUCE, FETCH = 0, 1
# the group APIs whose requests name the consumer's group (and the client sending them)
GROUP_APIS = (8, 9, 11, 12, 13, 14, 68)   # OffsetCommit/Fetch, Join, Heartbeat, Leave, Sync, CGH

DELIVERY_COLUMNS = (
    ("topic", "string"),
    ("partition", "int32"),
    ("offset", "int64"),
    ("producer_client_id", "string"),
    ("producer_ip", "string"),
    ("produce_exchange", "int64"),
    ("produce_request_ts", "timestamp"),
    ("ack_ts", "timestamp"),
    ("consumer_client_id", "string"),
    ("consumer_ip", "string"),
    ("consumer_group", "string"),
    ("fetch_exchange", "int64"),        # the Fetch that delivered it first to this consumer
    ("delivery_ts", "timestamp"),       # first delivery: that Fetch response's last packet
    ("end_to_end_ms", "float64"),
    ("ack_ms", "float64"),              # produce request to acknowledgement
    ("deliveries", "int64"),            # Fetch responses that carried it to this consumer
)
CLUSTER_ID = ("cluster_id", "string")   # first, where the capture holds several clusters
# the columns deliveries() reads, per table
NEEDS = {
    "exchanges": tuple(dict.fromkeys(("exchange", "api_key", "client_id", "client_ip", "group_id",
                                      "request_ts", "response_end_ts", "replica_id")
                                     + CLUSTER_COLUMNS)),
    "partitions": ("exchange", "api_key", "topic", "partition", "first_offset", "last_offset",
                   "fetch_offset", "bytes"),
}
SUMMARY_BY = {"topic": ["topic"], "producer": ["producer_client_id"],
              "group": ["consumer_group"], "consumer": ["consumer_client_id"]}


def client_groups(exchanges: pd.DataFrame) -> pd.DataFrame:
    """(client_ip, client_id, group_id): the group each client (address and client id) names in
    its group requests; the most used when a client names several."""
    ex = exchanges
    df = ex.loc[ex["api_key"].isin(GROUP_APIS).fillna(False) & ex["group_id"].notna(),
                ["client_ip", "client_id", "group_id"]].astype("string")
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype="string")
                             for c in ("client_ip", "client_id", "group_id")})
    counts = df.value_counts(dropna=False).reset_index(name="n") \
        .sort_values(["n", "group_id"], ascending=[False, True], kind="stable")
    return counts.drop_duplicates(["client_ip", "client_id"]).drop(columns="n") \
        .reset_index(drop=True)


def delivery_columns(several: bool) -> tuple:
    """DELIVERY_COLUMNS, after CLUSTER_ID where the capture holds several clusters."""
    return ((CLUSTER_ID,) if several else ()) + DELIVERY_COLUMNS


def _empty() -> pd.DataFrame:
    """No records produced: no rows (and no cluster id column, as the Spark job writes none)."""
    from .columns import table_schema, to_pandas
    return to_pandas(table_schema(DELIVERY_COLUMNS).empty_table())


def _produced(t) -> pd.DataFrame:
    p = t.partitions
    keep = (p["api_key"] == PRODUCE).fillna(False) & p["first_offset"].notna() \
        & p["last_offset"].notna()
    df = p.loc[keep, ["exchange", "topic", "partition", "first_offset", "last_offset", "bytes"]]
    ex = t.exchanges[["exchange", "client_id", "client_ip", "request_ts", "response_end_ts"]]
    df = df.merge(with_cluster(t, ex), on="exchange", how="left")
    # a damaged count must not become an allocation: a record takes at least 7 bytes on the wire
    n = (df["last_offset"] - df["first_offset"] + 1).clip(lower=0)
    df["n"] = np.minimum(n.to_numpy("int64", na_value=0),
                         df["bytes"].to_numpy("int64", na_value=0) // 7 + 1)
    return df


def _fetched(t) -> pd.DataFrame:
    p = t.partitions
    keep = (p["api_key"] == FETCH).fillna(False) & p["first_offset"].notna() \
        & p["last_offset"].notna()
    df = p.loc[keep, ["exchange", "topic", "partition", "first_offset", "last_offset",
                      "fetch_offset"]]
    ex = t.exchanges[["exchange", "client_id", "client_ip", "response_end_ts", "replica_id"]]
    df = df.merge(with_cluster(t, ex), on="exchange", how="left")
    df = df[(df["replica_id"].fillna(-1) < 0).astype(bool)]
    groups = client_groups(t.exchanges)
    df = df.assign(client_id=df["client_id"].astype("string"),
                   client_ip=df["client_ip"].astype("string"))
    df = df.merge(groups, on=["client_ip", "client_id"], how="left")
    lo = df["first_offset"].to_numpy("int64")
    fo = df["fetch_offset"].to_numpy("int64", na_value=np.iinfo(np.int64).min)
    df["lo"] = np.maximum(lo, fo)
    df["hi"] = df["last_offset"].to_numpy("int64")
    # consumers: by group, else by client id and address
    key = df["group_id"].astype("object")
    solo = key.isna()
    key[solo] = ("client:" + df["client_id"].astype("object").fillna("") + "@"
                 + df["client_ip"].astype("object").fillna(""))[solo]
    df["consumer"] = key
    return df


def deliveries(t) -> pd.DataFrame:
    """The deliveries table (delivery_columns): one row per produced record and consumer."""
    prod = _produced(t)
    if prod.empty or prod["n"].sum() == 0:
        return _empty()
    # one row per produced record, in numpy arrays until deduplicated: as a frame, sorted and
    # deduplicated, its copies took 140 MB for 800,000 records
    n = prod["n"].to_numpy()
    rows = np.repeat(np.arange(len(prod)), n)
    starts = np.cumsum(n) - n
    offset = prod["first_offset"].to_numpy("int64")[rows] + (np.arange(len(rows))
                                                             - np.repeat(starts, n))
    topics = prod["topic"].astype("object").to_numpy()
    partitions = prod["partition"].to_numpy("int64", na_value=-1)
    clusters = prod["cluster"].to_numpy(object)
    # an offset claimed twice (a retried Produce answered with its first offsets): the first
    # by request time, then exchange (stable sorts both)
    order = np.lexsort((prod["exchange"].to_numpy("int64")[rows],
                        _instants(prod["request_ts"])[rows]))
    keep = order[_first_of_each(pd.factorize(clusters)[0][rows][order],
                                pd.factorize(topics)[0][rows][order],
                                partitions[rows][order], offset[order])[0]]
    rec = pd.DataFrame({"p": rows[keep], "offset": offset[keep], "cluster": clusters[rows[keep]],
                        "topic": topics[rows[keep]], "partition": partitions[rows[keep]]})
    pairs = _pairs(rec, _fetched(t))
    return _table(prod, rec, pairs, bool(broker_clusters(t)))


def _first_of_each(*keys):
    """(where the first row of each distinct key is, how many rows have it), in the order of
    those first rows; the rows are given as one array per key column."""
    order = np.lexsort(keys[::-1])   # stable: a key's rows stay in their order
    if not len(order):
        return order, order
    ordered = [k[order] for k in keys]
    starts = np.flatnonzero(np.concatenate(
        [[True], np.any([k[1:] != k[:-1] for k in ordered], axis=0)]))
    first = order[starts]
    counts = np.diff(np.append(starts, len(order)))
    by_place = np.argsort(first)
    return first[by_place], counts[by_place]


def _instants(column) -> np.ndarray:
    """A timestamp column as datetime64[ns] for sorting (to_numpy() gives Timestamp objects,
    which pandas then converts back, a third of the table's time)."""
    return column.to_numpy("datetime64[ns]", na_value=np.datetime64("NaT"))


def _pairs(rec: pd.DataFrame, fetch: pd.DataFrame):
    """(record row, fetch row) for every fetch delivering a produced record: per cluster and
    topic-partition, the produced offsets sorted, each fetch's range found in them by binary
    search."""
    rec_idx, fetch_idx = [], []
    if fetch.empty:
        return np.empty(0, np.int64), np.empty(0, np.int64), fetch
    fkeys = fetch.groupby([fetch["cluster"].astype("object"), fetch["topic"].astype("object"),
                           fetch["partition"].astype("int64")], sort=False).indices
    for key, idx in rec.groupby(["cluster", "topic", "partition"], sort=False).indices.items():
        f = fkeys.get(key)
        if f is None:
            continue
        offsets = rec["offset"].to_numpy()[idx]
        order = np.argsort(offsets, kind="stable")
        sorted_off = offsets[order]
        lo = np.searchsorted(sorted_off, fetch["lo"].to_numpy()[f], "left")
        hi = np.searchsorted(sorted_off, fetch["hi"].to_numpy()[f], "right")
        count = np.maximum(hi - lo, 0)
        if not count.sum():
            continue
        fr = np.repeat(f, count)
        starts = np.repeat(lo, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count)
                                                                           - count, count))
        rec_idx.append(idx[order[starts]])
        fetch_idx.append(fr)
    if not rec_idx:
        return np.empty(0, np.int64), np.empty(0, np.int64), fetch
    return np.concatenate(rec_idx), np.concatenate(fetch_idx), fetch


def _table(prod, rec, pairs, several) -> pd.DataFrame:
    rec_idx, fetch_idx, fetch = pairs
    first_r = first_f = first_n = np.empty(0, np.int64)
    if len(rec_idx):
        # per record and consumer: the first Fetch by delivery time, then exchange (stable
        # sorts), and how many; in numpy arrays (as a frame, 150 MB for 800,000 pairs)
        order = np.lexsort((fetch["exchange"].to_numpy("int64")[fetch_idx],
                            _instants(fetch["response_end_ts"])[fetch_idx]))
        consumer = pd.factorize(fetch["consumer"].to_numpy())[0][fetch_idx]
        at, first_n = _first_of_each(rec_idx[order], consumer[order])
        first_r, first_f = rec_idx[order[at]], fetch_idx[order[at]]
    undelivered = np.setdiff1d(np.arange(len(rec)), first_r)
    r = np.concatenate([first_r.astype("int64"), undelivered])
    f = np.concatenate([first_f.astype("int64"), np.full(len(undelivered), -1)])
    count = np.concatenate([first_n.astype("int64"), np.zeros(len(undelivered), np.int64)])
    p = rec["p"].to_numpy()[r]
    has = f >= 0
    fs = np.where(has, f, 0)

    def from_fetch(col):
        if fetch.empty:
            return pa.nulls(len(r))
        values = pa.array(fetch[col].to_numpy(dtype=object)[fs], from_pandas=True)
        return pa.compute.if_else(pa.array(has), values, pa.nulls(len(r), values.type))

    def from_prod(col):
        return pa.array(prod[col].to_numpy(dtype=object)[p], from_pandas=True)

    req = prod["request_ts"].to_numpy("datetime64[ns]")[p]
    ack = prod["response_end_ts"].to_numpy("datetime64[ns]", na_value=np.datetime64("NaT"))[p]
    delivered = (fetch["response_end_ts"].to_numpy("datetime64[ns]",
                                                   na_value=np.datetime64("NaT"))[fs]
                 if not fetch.empty else np.full(len(r), np.datetime64("NaT"), "datetime64[ns]"))
    delivered = np.where(has, delivered, np.datetime64("NaT"))
    def ms(a, b):
        diff = (a - b).astype("timedelta64[ns]")
        return np.where(np.isnat(diff), np.nan, diff.astype("int64") / 1e6)

    e2e, ack_ms = ms(delivered, req), ms(ack, req)
    columns = {
        "cluster_id": pa.array(rec["cluster"].to_numpy()[r], pa.string()),
        "topic": pa.array(rec["topic"].to_numpy()[r], pa.string()),
        "partition": pa.array(rec["partition"].to_numpy()[r], pa.int32()),
        "offset": pa.array(rec["offset"].to_numpy()[r], pa.int64()),
        "producer_client_id": from_prod("client_id"),
        "producer_ip": from_prod("client_ip"),
        "produce_exchange": pa.array(prod["exchange"].to_numpy("int64")[p]),
        "produce_request_ts": pa.array(req, pa.timestamp("ns"), mask=np.isnat(req)),
        "ack_ts": pa.array(ack, pa.timestamp("ns"), mask=np.isnat(ack)),
        "consumer_client_id": from_fetch("client_id"),
        "consumer_ip": from_fetch("client_ip"),
        "consumer_group": from_fetch("group_id"),
        "fetch_exchange": pa.array(np.where(has, fetch["exchange"].to_numpy("int64")[fs]
                                            if not fetch.empty else 0, 0), mask=~has),
        "delivery_ts": pa.array(delivered, pa.timestamp("ns"), mask=np.isnat(delivered)),
        "end_to_end_ms": pa.array(e2e, mask=np.isnan(e2e)),
        "ack_ms": pa.array(ack_ms, mask=np.isnan(ack_ms)),
        "deliveries": pa.array(count),
    }
    return _frame(columns, several)


def _frame(columns, several) -> pd.DataFrame:
    from .columns import table_schema, to_pandas
    schema = table_schema(delivery_columns(several))
    arrays = [columns[f.name].cast(f.type) if not pa.types.is_dictionary(f.type)
              else columns[f.name].cast(f.type.value_type).dictionary_encode()
              for f in schema]
    return to_pandas(sort_rows(pa.Table.from_arrays(arrays, schema=schema)))


def sort_rows(table: pa.Table) -> pa.Table:
    """The table's rows by cluster id (where it has one), topic (its text), partition, offset
    and delivery time (the undelivered last): the one order of the pandas and Spark tables."""
    import pyarrow.compute as pc
    keys = {"t": table.column("topic").cast(pa.string()), "p": table.column("partition"),
            "o": table.column("offset"), "d": table.column("delivery_ts")}
    if "cluster_id" in table.column_names:
        keys = {"c": table.column("cluster_id"), **keys}
    order = pc.sort_indices(pa.table(keys), sort_keys=[(k, "ascending", "at_end") for k in keys])
    return table.take(order).unify_dictionaries()


def percentiles(d: pd.DataFrame, by: str = "topic") -> pd.DataFrame:
    """count, mean, p50, p90, p99, p99.9, max of end_to_end_ms per topic, producer (client id),
    consumer group or consumer (client id), and cluster id where `d` has one; delivered records
    only, slowest p99 first."""
    if by not in SUMMARY_BY:
        raise ValueError(f"by must be one of {', '.join(SUMMARY_BY)}")
    keys = _by_cluster(d) + SUMMARY_BY[by]
    df = d[d["end_to_end_ms"].notna()]
    cols = ["count", "mean"] + [name for name, _ in QUANTILES] + ["max"]
    if df.empty:
        return pd.DataFrame(columns=keys + cols)
    g = df.groupby(keys, observed=True, dropna=False)["end_to_end_ms"]
    out = g.agg(["count", "mean", "max"])
    for name, q in QUANTILES:
        out[name] = g.quantile(q)
    return out[cols].sort_values("p99", ascending=False).reset_index()


def undelivered(d: pd.DataFrame) -> pd.DataFrame:
    """Per topic and partition (and cluster id where `d` has one): records produced, records no
    consumer fetched in the capture."""
    keys = _by_cluster(d) + ["topic", "partition"]
    cols = keys + ["produced", "undelivered"]
    if d.empty:
        return pd.DataFrame(columns=cols)
    got = d["delivery_ts"].notna().astype(bool).rename("got")
    per = got.groupby([d[k] for k in keys + ["offset"]], observed=True).any()
    out = per.groupby(level=list(range(len(keys))), observed=True) \
        .agg(produced="size", delivered="sum")
    out["undelivered"] = (out["produced"] - out["delivered"]).astype("int64")
    return out.reset_index()[cols]


def _by_cluster(d: pd.DataFrame) -> list:
    return ["cluster_id"] if "cluster_id" in d else []

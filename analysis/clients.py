"""Who talks to whom: one row per client (its address and client id) with what it is and does.

The software name and version are what the client's ApiVersions v3+ requests say (the last that
named one). Roles: a producer sends Produce; a consumer fetches (not as a follower broker) or
takes part in a group; an admin sends the cluster-management APIs (ADMIN_APIS). groups: the group
the client names most in its group requests (deliveries.client_groups). topics_consumed: topics
of the Fetch responses that carried records to it. A client is stale on an api when the highest
version it used is below the highest the broker offered it: the lowest of what the last
ApiVersions response on each of its connections offered, else the highest any response in the
capture offered ("Fetch v12<v17").

Computed over the columns at once (group codes per client, then aggregates by code), so tens of
thousands of clients take a second.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dissector.protocol.names import api_name

from .deliveries import client_groups

PRODUCE, FETCH = 0, 1
GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14, 68, 76})
# CreateTopics, DeleteTopics, DeleteRecords, Describe/Create/DeleteAcls, Describe/AlterConfigs,
# AlterReplicaLogDirs, DescribeLogDirs, CreatePartitions, delegation tokens, DeleteGroups,
# ElectLeaders, IncrementalAlterConfigs, partition reassignments, OffsetDelete, client quotas,
# SCRAM credentials, AlterPartition(s), features, DescribeCluster, DescribeProducers,
# DescribeTransactions, ListTransactions, ConsumerGroupDescribe, ListGroups, DescribeGroups
ADMIN_APIS = frozenset({19, 20, 21, 29, 30, 31, 32, 33, 34, 35, 37, 38, 39, 40, 41, 42, 43, 44,
                        45, 46, 47, 48, 49, 50, 51, 56, 57, 60, 61, 65, 66, 69, 15, 16})

CLIENT_COLUMNS = (
    ("client_ip", "string"),
    ("client_id", "string"),
    ("software_name", "string"),        # from ApiVersions v3+ requests
    ("software_version", "string"),
    ("role", "string"),                 # producer, consumer, admin joined with "+", or other
    ("groups", "list<string>"),
    ("topics_produced", "list<string>"),
    ("topics_consumed", "list<string>"),
    ("acks", "list<int16>"),            # the acks of its Produce requests
    ("compression", "list<string>"),    # the codecs of the batches it produced
    ("idempotent", "bool"),             # produced with a producer id
    ("transactional", "bool"),          # a transactional id, or transactional batches
    ("connections", "int64"),
    ("requests", "int64"),
    ("errors", "int64"),                # exchanges with an error code
    ("error_names", "list<string>"),
    ("stale_apis", "list<string>"),     # "Api vUSED<vMAX", by api key
    ("first_seen", "timestamp"),        # its first and last request
    ("last_seen", "timestamp"),
)
# the columns clients() reads, per table
NEEDS = {
    "exchanges": ("exchange", "connection_id", "client_ip", "client_id", "api_key",
                  "api_version", "replica_id", "client_software_name",
                  "client_software_version", "error_code", "error_name", "transactional_id",
                  "acks", "api_versions", "request_ts", "group_id"),
    "partitions": ("exchange", "api_key", "topic", "record_count", "compression", "producer_id",
                   "is_transactional"),
}
KEYS = ["client_ip", "client_id"]


def clients(t) -> pd.DataFrame:
    """The clients table (CLIENT_COLUMNS), busiest first (then by address and client id)."""
    from .columns import table_schema, to_pandas
    schema = table_schema(CLIENT_COLUMNS)
    ex = t.exchanges
    if ex.empty:
        return to_pandas(schema.empty_table())
    ex = ex[list(NEEDS["exchanges"])]
    ex = ex.assign(client_ip=ex["client_ip"].astype("string"),
                   client_id=ex["client_id"].astype("string"))
    code = ex.groupby(KEYS, dropna=False, observed=True, sort=True).ngroup().to_numpy()
    n = int(code.max()) + 1
    first_row = pd.Series(np.arange(len(code))).groupby(code).first().to_numpy()
    api = ex["api_key"].astype("float64").to_numpy(na_value=np.nan)

    def any_of(mask) -> np.ndarray:
        return np.bincount(code[np.asarray(mask, bool)], minlength=n) > 0

    replica = ex["replica_id"].astype("float64").fillna(-1).to_numpy()
    producer = any_of(api == PRODUCE)
    consumer = any_of((api == FETCH) & (replica < 0)) | any_of(np.isin(api, list(GROUP_APIS)))
    admin = any_of(np.isin(api, list(ADMIN_APIS)))
    roles = np.array(["other", "producer", "consumer", "producer+consumer", "admin",
                      "producer+admin", "consumer+admin", "producer+consumer+admin"], object)
    role = roles[producer.astype(int) + 2 * consumer + 4 * admin]

    # partition rows belong to the client of their exchange
    p = t.partitions[list(NEEDS["partitions"])]
    pcode = pd.Series(code, index=ex["exchange"].to_numpy()).reindex(
        p["exchange"].to_numpy()).to_numpy()
    has = ~np.isnan(pcode)
    p, pcode = p[has], pcode[has].astype(np.int64)
    papi = p["api_key"].astype("float64").to_numpy(na_value=np.nan)
    made = papi == PRODUCE
    produced = p[made]
    fetched = (papi == FETCH) & (p["record_count"].astype("float64").fillna(0) > 0).to_numpy()

    soft = ex[ex["client_software_name"].notna().to_numpy()]
    soft = soft.assign(code=code[ex["client_software_name"].notna().to_numpy()]) \
        .drop_duplicates("code", keep="last")
    errs = (ex["error_code"].astype("float64").fillna(0) != 0).to_numpy()
    transactional = any_of(ex["transactional_id"].notna())
    txn_rows = produced["is_transactional"].astype("boolean").fillna(False).to_numpy(bool)
    transactional |= np.bincount(pcode[made][txn_rows], minlength=n) > 0
    idem_rows = (produced["producer_id"].astype("float64").fillna(-1) >= 0).to_numpy()
    ts = ex["request_ts"].groupby(code)
    columns = {
        "client_ip": pa.array(ex["client_ip"].iloc[first_row], pa.string()),
        "client_id": pa.array(ex["client_id"].iloc[first_row], pa.string()),
        "software_name": _at(soft, "client_software_name", n),
        "software_version": _at(soft, "client_software_version", n),
        "role": pa.array(role, pa.string()),
        "groups": _groups(t.exchanges, ex, code, n),
        "topics_produced": _names(pcode[made], produced["topic"], n),
        "topics_consumed": _names(pcode[fetched], p["topic"][fetched], n),
        "acks": _names(code[api == PRODUCE], ex["acks"][api == PRODUCE], n, pa.int16()),
        "compression": _names(pcode[made], produced["compression"], n),
        "idempotent": pa.array(np.bincount(pcode[made][idem_rows], minlength=n) > 0),
        "transactional": pa.array(transactional),
        "connections": pa.array(np.bincount(
            pd.DataFrame({"c": code, "k": ex["connection_id"].to_numpy()}).dropna()
            .drop_duplicates()["c"].to_numpy(), minlength=n)),
        "requests": pa.array(np.bincount(code, minlength=n)),
        "errors": pa.array(np.bincount(code[errs], minlength=n)),
        "error_names": _names(code[errs], ex["error_name"][errs], n),
        "stale_apis": _stale(ex, code, api, n),
        "first_seen": _times(ts.min(), n),
        "last_seen": _times(ts.max(), n),
    }
    table = pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)
    order = np.argsort(-np.bincount(code, minlength=n), kind="stable")
    return to_pandas(table.take(order))


def _at(rows: pd.DataFrame, column: str, n: int) -> pa.Array:
    """rows[column] at each client code (rows has one row per code it names), null elsewhere."""
    out = np.full(n, None, object)
    values = rows[column]
    out[rows["code"].to_numpy()] = values.astype(object).where(values.notna(), None).to_numpy()
    return pa.array(out, pa.string())


def _times(values: pd.Series, n: int) -> pa.Array:
    return pa.array(values.reindex(range(n)).astype("datetime64[ns, UTC]"),
                    pa.timestamp("ns", tz="UTC"))


def _lists(codes: np.ndarray, values: np.ndarray, n: int, typ) -> pa.ListArray:
    """A list per client code from (code, value) pairs sorted by code."""
    offsets = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=n))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, typ))


def _names(codes: np.ndarray, values: pd.Series, n: int, typ=pa.string()) -> pa.ListArray:
    """The distinct non-null values of each client, sorted (as text, or as numbers)."""
    kept = values.notna().to_numpy()
    v = values[kept]
    v = v.astype("float64").astype("int64") if pa.types.is_integer(typ) else v.astype(str)
    df = pd.DataFrame({"c": codes[kept], "v": v.to_numpy()}).drop_duplicates() \
        .sort_values(["c", "v"], kind="stable")
    return _lists(df["c"].to_numpy(), df["v"].to_numpy(), n, typ)


def _groups(exchanges, ex, code, n) -> pa.ListArray:
    """The group each client names most (deliveries.client_groups), as a list of one or none."""
    named = client_groups(exchanges)
    keys = pd.DataFrame({"c": code, "client_ip": ex["client_ip"], "client_id": ex["client_id"]}) \
        .drop_duplicates("c")
    df = keys.merge(named, on=KEYS, how="inner").sort_values("c")
    return _lists(df["c"].to_numpy(), df["group_id"].to_numpy(object), n, pa.string())


def _offered(ex: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """(connection_id, api_key, top) from the last ApiVersions response on each connection, and
    each api's highest top in any response."""
    rows = ex[ex["api_versions"].notna()]
    ranges = pa.array(rows["api_versions"].array)
    flat = pc.list_flatten(ranges)
    df = pd.DataFrame({
        "connection_id": rows["connection_id"].to_numpy()[
            pc.list_parent_indices(ranges).to_numpy()],
        "api_key": pc.struct_field(flat, "api_key").to_pandas(),
        "top": pc.struct_field(flat, "max_version").to_pandas()}).dropna()
    anywhere = df.groupby("api_key")["top"].max()
    return df.drop_duplicates(["connection_id", "api_key"], keep="last"), anywhere


def _stale(ex, code, api, n) -> pa.ListArray:
    used = ex["api_version"].notna().to_numpy() & ~np.isnan(api)
    df = pd.DataFrame({"c": code[used], "api_key": api[used].astype(np.int64),
                       "version": ex["api_version"][used].astype("int64").to_numpy(),
                       "connection_id": ex["connection_id"][used].to_numpy()})
    per_conn, anywhere = _offered(ex)
    top_used = df.groupby(["c", "api_key"], sort=True)["version"].max().reset_index()
    conns = df[["c", "connection_id"]].drop_duplicates()
    mine = conns.merge(per_conn.astype({"api_key": "int64"}), on="connection_id") \
        .groupby(["c", "api_key"])["top"].min().rename("mine")
    top_used = top_used.join(mine, on=["c", "api_key"])
    top = top_used["mine"].astype("float64").fillna(
        top_used["api_key"].map(anywhere.astype("float64"))).to_numpy("float64", na_value=np.nan)
    stale = top_used.assign(top=top)[top_used["version"].to_numpy() < top]
    text = [f"{api_name(k)} v{u}<v{int(m)}"
            for k, u, m in zip(stale["api_key"], stale["version"], stale["top"])]
    return _lists(stale["c"].to_numpy(), np.array(text, object), n, pa.string())

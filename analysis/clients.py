"""Who talks to whom: one row per client (its address and client id) with what it is and does.

The software name and version are what the client's ApiVersions v3+ requests say. Roles: a
producer sends Produce; a consumer fetches (not as a follower broker) or takes part in a group;
an admin sends the cluster-management APIs (ADMIN_APIS). A client is stale on an api when the
highest version it used is below the highest the broker offered it (the ApiVersions responses on
its own connections, else any in the capture).
"""
from __future__ import annotations

import pandas as pd

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

CLIENT_COLUMNS = ["client_ip", "client_id", "software_name", "software_version", "role",
                  "groups", "topics_produced", "topics_consumed", "acks", "compression",
                  "idempotent", "transactional", "connections", "requests", "errors",
                  "error_names", "stale_apis", "first_seen", "last_seen"]


def _names(values) -> list:
    return sorted({str(v) for v in values if v is not None and not pd.isna(v)})


def _broker_max(ex: pd.DataFrame) -> dict:
    """{connection_id: {api_key: max version}} from ApiVersions responses, and None: the
    highest any offered."""
    out, any_conn = {}, {}
    rows = ex[ex["api_versions"].notna()]
    for cid, ranges in zip(rows["connection_id"], rows["api_versions"]):
        mine = out.setdefault(cid, {})
        for r in ranges if ranges is not None else ():
            key, top = r["api_key"], r["max_version"]
            if key is None or top is None:
                continue
            mine[key] = top
            any_conn[key] = max(any_conn.get(key, top), top)
    out[None] = any_conn
    return out


def clients(t) -> pd.DataFrame:
    """The clients table (CLIENT_COLUMNS), busiest first."""
    ex = t.exchanges
    if ex.empty:
        return pd.DataFrame(columns=CLIENT_COLUMNS)
    # only the columns used: each client's rows are taken from these frames
    ex = ex[["exchange", "connection_id", "client_ip", "client_id", "api_key", "api_version",
             "replica_id", "client_software_name", "client_software_version", "error_code",
             "error_name", "transactional_id", "acks", "api_versions", "request_ts"]]
    ex = ex.assign(client_ip=ex["client_ip"].astype("string"),
                   client_id=ex["client_id"].astype("string"))
    p = t.partitions[["exchange", "client_id", "api_key", "topic", "record_count", "compression",
                      "producer_id", "is_transactional"]]
    p = p.merge(ex[["exchange", "client_ip"]], on="exchange", how="left")
    p = p.assign(client_id=p["client_id"].astype("string"))
    groups = client_groups(t.exchanges)
    group_of = {}
    for ip, cid, g in zip(groups["client_ip"], groups["client_id"], groups["group_id"]):
        group_of.setdefault((ip, cid), []).append(g)
    offered = _broker_max(ex)
    rows = []
    keys = ["client_ip", "client_id"]
    pgroups = dict(tuple(p.groupby(keys, dropna=False, observed=True)))
    for (ip, cid), e in ex.groupby(keys, dropna=False, observed=True):
        api = set(e["api_key"].dropna().astype(int))
        fetch = e[(e["api_key"] == FETCH).fillna(False)]
        consumer = (fetch["replica_id"].fillna(-1) < 0).any() or bool(api & GROUP_APIS)
        role = "+".join(r for r, yes in (("producer", PRODUCE in api), ("consumer", consumer),
                                         ("admin", bool(api & ADMIN_APIS))) if yes) or "other"
        part = pgroups.get((ip, cid), p.iloc[:0])
        produced = part[(part["api_key"] == PRODUCE).fillna(False)]
        fetched = part[(part["api_key"] == FETCH).fillna(False)
                       & part["record_count"].fillna(0).gt(0)]
        soft = e[e["client_software_name"].notna()]
        errs = e[(e["error_code"].fillna(0) != 0)]
        txn = e["transactional_id"].notna().any() or \
            produced["is_transactional"].fillna(False).astype(bool).any()
        rows.append((ip, cid,
                     soft["client_software_name"].iloc[-1] if len(soft) else None,
                     soft["client_software_version"].iloc[-1] if len(soft) else None,
                     role, sorted(group_of.get((ip, cid), [])),
                     _names(produced["topic"]), _names(fetched["topic"]),
                     sorted({int(a) for a in e.loc[(e["api_key"] == PRODUCE).fillna(False),
                                                   "acks"].dropna()}),
                     _names(produced["compression"]),
                     bool((produced["producer_id"].fillna(-1) >= 0).any()), bool(txn),
                     int(e["connection_id"].nunique()), len(e), len(errs),
                     _names(errs["error_name"]), _stale(e, offered),
                     e["request_ts"].min(), e["request_ts"].max()))
    out = pd.DataFrame(rows, columns=CLIENT_COLUMNS)
    return out.sort_values("requests", ascending=False, kind="stable").reset_index(drop=True)


def _stale(e: pd.DataFrame, offered: dict) -> list:
    """"Api vUSED<vMAX" for each api the client used below the broker's maximum."""
    used = e[e["api_key"].notna() & e["api_version"].notna()]
    out = []
    for key, versions in used.groupby("api_key")["api_version"]:
        top_used = int(versions.max())
        tops = [offered.get(c, {}).get(int(key)) for c in set(used["connection_id"])]
        tops = [t for t in tops if t is not None] or \
            [offered[None][int(key)]] if int(key) in offered[None] else []
        if tops and top_used < min(tops):
            out.append(f"{api_name(int(key))} v{top_used}<v{min(tops)}")
    return out

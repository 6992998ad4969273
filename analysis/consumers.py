"""Consumers: group membership timeline, committed offsets, and lag per partition over time.

Lag is measured where it is visible on the wire: in a Fetch, the partition's high watermark (from
the response) minus the offset the consumer asked for (from the request).
"""
from __future__ import annotations

import pandas as pd

from .cluster import clustered

GROUP_EVENTS = {"JoinGroup": "join", "SyncGroup": "sync", "LeaveGroup": "leave",
                "Heartbeat": "heartbeat", "ConsumerGroupHeartbeat": "heartbeat"}
REBALANCE_ERRORS = frozenset({"REBALANCE_IN_PROGRESS"})
TIMELINE_COLUMNS = ["request_ts", "group_id", "event", "api_name", "client_id", "member_id",
                    "generation_id", "error_name", "latency_ms", "exchange"]


def timeline(t) -> pd.DataFrame:
    """Group events in time order: every join, sync and leave, and the heartbeats that failed
    (`rebalance` when the coordinator answered REBALANCE_IN_PROGRESS). A KIP-848 heartbeat with
    member epoch 0 is a join, with -1 a leave; its generation is the epoch the coordinator gave
(the one it sent when the answer is an error)."""
    ex = t.exchanges
    api = ex["api_name"].astype("string")
    df = ex[api.isin(list(GROUP_EVENTS)).fillna(False)].copy()
    if df.empty:
        return pd.DataFrame(columns=TIMELINE_COLUMNS)
    err = df["error_name"].astype("string")
    failed = (df["error_code"].fillna(0) != 0).astype(bool)
    event = df["api_name"].astype("string").map(GROUP_EVENTS)
    kip848 = (df["api_name"].astype("string") == "ConsumerGroupHeartbeat").fillna(False)
    epoch = df["generation_id"]
    event = event.mask(kip848 & (epoch == 0).fillna(False), "join")
    event = event.mask(kip848 & (epoch == -1).fillna(False), "leave")
    given = df["response_epoch"].where((df["response_epoch"] > 0).fillna(False))
    given = given.fillna(epoch.where((epoch > 0).fillna(False)))  # a failed one: the epoch sent
    df["generation_id"] = df["generation_id"].mask(kip848, given)
    df["event"] = event.where(~err.isin(list(REBALANCE_ERRORS)).fillna(False), "rebalance")
    keep = (event != "heartbeat") | failed
    df = df[keep.astype(bool)]
    return df.sort_values("request_ts")[TIMELINE_COLUMNS].reset_index(drop=True)


def groups(t) -> pd.DataFrame:
    """Per group: joins, syncs, leaves, rebalance signals, distinct members and generations
    (per cluster id and group where the capture holds several clusters)."""
    tl = timeline(t)
    cols = ["group_id", "join", "sync", "leave", "rebalance", "heartbeat", "members",
            "generations"]
    if tl.empty:
        return pd.DataFrame(columns=cols)
    tl, by = clustered(t, tl.assign(group_id=tl["group_id"].astype("string")))
    keys = by + ["group_id"]
    counts = pd.crosstab([tl[k] for k in keys], tl["event"])
    for c in ("join", "sync", "leave", "rebalance", "heartbeat"):
        if c not in counts:
            counts[c] = 0
    g = tl.groupby(keys)
    counts["members"] = g["member_id"].nunique()
    counts["generations"] = g["generation_id"].nunique()
    counts.index.names = keys
    counts.columns.name = None
    return counts.reset_index()[by + cols]


def committed_offsets(t, latest: bool = True) -> pd.DataFrame:
    """Offsets committed (OffsetCommit requests) per group, topic and partition (and cluster id
    where the capture holds several clusters); the latest commit of each when latest=True, else
    every commit in time order."""
    p = t.partitions
    df = p[(p["api_name"].astype("string") == "OffsetCommit").fillna(False)
           & p["committed_offset"].notna()]
    cols = ["request_ts", "group_id", "client_id", "topic", "partition", "committed_offset",
            "error_name"]
    df, by = clustered(t, df.sort_values("request_ts"))
    df = df[by + cols]
    if latest and not df.empty:
        df = df.groupby(by + ["group_id", "topic", "partition"], observed=True,
                        dropna=False).tail(1)
    return df.reset_index(drop=True)


def lag(t) -> pd.DataFrame:
    """Lag per Fetch and partition over time: high_watermark - fetch_offset (with the cluster id
    first where the capture holds several clusters: each has its own watermarks)."""
    p = t.partitions
    df = p[(p["api_key"] == 1).fillna(False) & p["fetch_offset"].notna()
           & p["high_watermark"].notna() & (p["high_watermark"] >= 0).fillna(False)].copy()
    df["lag"] = df["high_watermark"] - df["fetch_offset"]
    cols = ["response_ts", "client_id", "topic", "partition", "fetch_offset", "high_watermark",
            "lag", "exchange"]
    df, by = clustered(t, df.sort_values("response_ts"))
    return df[by + cols].reset_index(drop=True)


def lag_summary(t) -> pd.DataFrame:
    """Per client id, topic and partition (and cluster id where the capture holds several):
    fetches, last and max lag."""
    df = lag(t)
    by = ["cluster_id"] if "cluster_id" in df else []
    keys = by + ["client_id", "topic", "partition"]
    cols = keys + ["fetches", "last_lag", "max_lag"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(keys, observed=True, dropna=False)["lag"]
    out = g.agg(fetches="count", last_lag="last", max_lag="max")
    return out.reset_index()[cols]

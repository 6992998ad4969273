"""Errors: counts and rates by error name, api, topic-partition and client; unanswered requests;
throttling.

Two levels are counted: the exchange's error (`error_code`: the top-level code, else the first
non-zero nested one, as in the exchanges contract) and every non-zero per-partition code of the
partitions table. A rate is errors divided by requests (or by partition rows) in the same group.
"""
from __future__ import annotations

import pandas as pd

from dissector.protocol.names import error_name, is_retriable

from .cluster import clustered

UNANSWERED = "unanswered"


def _is_error(series):
    return (series.fillna(0) != 0).astype(bool)


def by_error(t) -> pd.DataFrame:
    """Per error code: exchanges failing with it (`exchanges`, and `top_level` for those where
    it is the response's own top-level code rather than a nested one), partition rows carrying
    it, their shares of all exchanges and partition rows, and retriable or not."""
    ex = t.exchanges
    parts = t.partitions
    e = ex.loc[_is_error(ex["error_code"]), "error_code"].astype("int64").value_counts()
    top = ex.loc[_is_error(ex["top_error_code"]), "top_error_code"].astype("int64").value_counts()
    p = parts.loc[_is_error(parts["error_code"]), "error_code"].astype("int64").value_counts()
    codes = sorted(set(e.index) | set(p.index) | set(top.index))
    out = pd.DataFrame({
        "error_code": codes,
        "error_name": [error_name(c) for c in codes],
        "exchanges": [int(e.get(c, 0)) for c in codes],
        "top_level": [int(top.get(c, 0)) for c in codes],
        "partitions": [int(p.get(c, 0)) for c in codes],
        "retriable": [is_retriable(c) for c in codes],
    })
    out.insert(4, "exchange_rate", out["exchanges"] / max(len(ex), 1))
    out.insert(6, "partition_rate", out["partitions"] / max(len(parts), 1))
    return out.sort_values(["exchanges", "partitions"], ascending=False).reset_index(drop=True)


def _rates(df, keys):
    df = df.assign(is_error=_is_error(df["error_code"]),
                   is_unanswered=(df["status"].astype("string") == UNANSWERED).fillna(False),
                   is_throttled=(df["throttle_time_ms"].fillna(0) > 0))
    g = df.groupby(keys, observed=True, dropna=False)
    out = g.agg(requests=("is_error", "size"), errors=("is_error", "sum"),
                unanswered=("is_unanswered", "sum"), throttled=("is_throttled", "sum"))
    out["error_rate"] = out["errors"] / out["requests"]
    return out.reset_index().sort_values(["errors", "requests"], ascending=False) \
        .reset_index(drop=True)


def by_api(t) -> pd.DataFrame:
    """Per api: requests, errors, error_rate, unanswered, throttled."""
    return _rates(t.exchanges, ["api_name"])


def by_client(t) -> pd.DataFrame:
    """Per client id: requests, errors, error_rate, unanswered, throttled."""
    return _rates(t.exchanges, ["client_id"])


def by_partition(t) -> pd.DataFrame:
    """Per (topic, partition): partition rows, errors, error_rate and the most frequent error;
    per (cluster id, topic, partition) where the capture holds several clusters."""
    parts = t.partitions
    cols = ["topic", "partition", "rows", "errors", "error_rate", "top_error"]
    if parts.empty:
        return pd.DataFrame(columns=cols)
    df, by = clustered(t, parts[["exchange", "topic", "partition", "error_code", "error_name"]])
    df = df.assign(is_error=_is_error(df["error_code"]))
    keys = by + ["topic", "partition"]
    g = df.groupby(keys, observed=True, dropna=False)
    out = g.agg(rows=("is_error", "size"), errors=("is_error", "sum"))
    out["error_rate"] = out["errors"] / out["rows"]
    failing = df[df["is_error"]]
    top = failing.groupby(keys, observed=True)["error_name"] \
        .agg(lambda s: s.astype("string").value_counts().index[0])
    out["top_error"] = top.reindex(out.index)
    out = out.reset_index()
    # plain strings, not the dictionary-encoded names: pandas 2.x cannot build a MultiIndex
    # (set_index(["topic", "partition"])) from an Arrow dictionary column
    out["topic"] = out["topic"].astype("string[pyarrow]")
    return out[by + cols].sort_values(["errors", "rows"], ascending=False) \
        .reset_index(drop=True)


def unanswered(t) -> pd.DataFrame:
    """Requests that never got a response (not counting acks=0 Produce)."""
    ex = t.exchanges
    df = ex[(ex["status"].astype("string") == UNANSWERED).fillna(False)]
    return df[["exchange", "request_packet", "request_ts", "api_name", "api_version",
               "client_id", "correlation_id", "connection_id"]].reset_index(drop=True)


def throttling(t) -> pd.DataFrame:
    """Per client id and api: throttled responses, total and max throttle time (ms)."""
    ex = t.exchanges
    df = ex[(ex["throttle_time_ms"].fillna(0) > 0)]
    cols = ["client_id", "api_name", "throttled", "throttle_ms_total", "throttle_ms_max"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(["client_id", "api_name"], observed=True, dropna=False)["throttle_time_ms"]
    out = g.agg(throttled="count", throttle_ms_total="sum", throttle_ms_max="max")
    return out.reset_index()[cols]


def retriable_split(t) -> pd.DataFrame:
    """Failing exchanges and partition rows split into retriable and not."""
    b = by_error(t)
    return b.groupby("retriable")[["exchanges", "partitions"]].sum().reset_index()

"""Latency: percentiles by dimension, per-second series, the slowest exchanges, Fetch long polls.

Latency is `latency_ms` (response's first packet minus request's last packet). A Fetch that waits
out its max_wait_ms and returns no records is a long poll: the broker had nothing to send, so it
is reported by `long_polls()` and left out of the other answers (it would swamp every p99).
Percentiles interpolate linearly between order statistics (numpy's default).
"""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p99.9", 0.999))
FETCH = 1
DIMENSIONS = {
    "api": ["api_name"],
    "version": ["api_name", "api_version"],
    "client_id": ["client_id"],
    "client": ["client"],
    "broker": ["broker"],
    "topic": ["topic"],
}
SLOW_COLUMNS = ["exchange", "request_packet", "response_packet", "request_ts", "api_name",
                "api_version", "client_id", "client", "broker", "correlation_id", "latency_ms",
                "status", "error_name"]


def long_poll_mask(ex: pd.DataFrame, tolerance_ms: float = 1.0, tolerance_frac: float = 0.01):
    """True for Fetches answered no sooner than their max_wait_ms (less a small tolerance for
    timer granularity) that carried no records."""
    wait = ex["max_wait_ms"].astype("float64[pyarrow]")
    tol = (wait * tolerance_frac).clip(lower=tolerance_ms)
    records = ex["record_count"].fillna(0)
    mask = (ex["api_key"] == FETCH) & wait.notna() & (wait > 0) & \
        (ex["latency_ms"] >= wait - tol) & (records == 0)
    return mask.fillna(False).astype(bool)


def answered(ex: pd.DataFrame, include_long_polls: bool = False, columns=None) -> pd.DataFrame:
    """Exchanges with a latency, with `client` (ip) and `broker` (ip:port) columns added; only
    `columns` of them (and the endpoints) when given, which spares copying the others."""
    keep = ex["latency_ms"].notna()
    if not include_long_polls:
        keep &= ~long_poll_mask(ex)
    if columns is not None:
        ex = ex[list(dict.fromkeys([*columns, "client_ip", "broker_ip", "broker_port"]))]
    return with_endpoints(ex[keep.to_numpy(dtype=bool)])


def _arrow_strings(series: pd.Series) -> pa.ChunkedArray:
    """A column as Arrow strings: a dictionary column is decoded by one cast, not one Python
    string per row."""
    if isinstance(series.dtype, (pd.ArrowDtype, pd.StringDtype)):
        return pa.array(series.array).cast(pa.string())
    return pa.chunked_array([pa.array(series.to_numpy(dtype=object), pa.string(),
                                      from_pandas=True)])


def with_endpoints(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy(deep=False)   # the new columns go on a new frame; the others are shared
    client = _arrow_strings(df["client_ip"])
    port = _arrow_strings(df["broker_port"].astype("int64[pyarrow]"))
    broker = pc.binary_join_element_wise(_arrow_strings(df["broker_ip"]), port, ":")
    df["client"] = pd.Series(pd.arrays.ArrowStringArray(client), index=df.index)
    df["broker"] = pd.Series(pd.arrays.ArrowStringArray(broker), index=df.index)
    return df


def _frame_for(df, by):
    if by == "topic":
        df = df[df["topics"].notna()].explode("topics").rename(columns={"topics": "topic"})
        df = df[df["topic"].notna()]
    return df


def percentiles(ex: pd.DataFrame, by: str = "api", include_long_polls: bool = False):
    """count, mean, p50, p90, p99, p99.9 and max of latency_ms per value of `by`
    (one of DIMENSIONS), slowest p99 first."""
    if by not in DIMENSIONS:
        raise ValueError(f"by must be one of {', '.join(DIMENSIONS)}")
    keys = DIMENSIONS[by]
    own = [k for k in keys if k in ex.columns] + (["topics"] if by == "topic" else [])
    df = _frame_for(answered(ex, include_long_polls, columns=[*own, "latency_ms"]), by)
    return summarize(df, keys)


def summarize(df: pd.DataFrame, keys) -> pd.DataFrame:
    cols = ["count", "mean"] + [name for name, _ in QUANTILES] + ["max"]
    if df.empty:
        return pd.DataFrame(columns=list(keys) + cols)
    g = df.groupby(keys, observed=True, dropna=False)["latency_ms"]
    out = g.agg(["count", "mean", "max"])
    for name, q in QUANTILES:
        out[name] = g.quantile(q)
    return out[cols].sort_values("p99", ascending=False).reset_index()


def time_series(ex: pd.DataFrame, freq: str = "1s", include_long_polls: bool = False):
    """Per interval and api: requests, p50, p99 and max latency, errors."""
    df = answered(ex, include_long_polls,
                  columns=["request_ts", "api_name", "latency_ms", "error_code"])
    cols = ["second", "api_name", "requests", "p50", "p99", "max", "errors"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["second"] = df["request_ts"].dt.floor(freq)
    df["is_error"] = (df["error_code"].fillna(0) != 0).astype(int)
    g = df.groupby(["second", "api_name"], observed=True)
    out = g["latency_ms"].agg(requests="count", max="max")
    out["p50"] = g["latency_ms"].quantile(0.5)
    out["p99"] = g["latency_ms"].quantile(0.99)
    out["errors"] = g["is_error"].sum()
    return out.reset_index()[cols]


def slowest(ex: pd.DataFrame, n: int = 10, include_long_polls: bool = False) -> pd.DataFrame:
    """The n slowest exchanges with the packet numbers to look at in the capture."""
    df = answered(ex, include_long_polls,
                  columns=[c for c in SLOW_COLUMNS if c not in ("client", "broker")])
    top = df["latency_ms"].sort_values(ascending=False).index[:n]   # sorts one column, not all
    return df.loc[top, SLOW_COLUMNS].reset_index(drop=True)


def long_polls(ex: pd.DataFrame) -> pd.DataFrame:
    """Fetch long polls per client: how many, their max wait and observed latency."""
    df = with_endpoints(ex[long_poll_mask(ex)])
    cols = ["client_id", "client", "count", "max_wait_ms", "latency_p50", "latency_max"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(["client_id", "client"], observed=True, dropna=False)
    out = g["latency_ms"].agg(count="count", latency_p50="median", latency_max="max")
    out["max_wait_ms"] = g["max_wait_ms"].max()
    return out.reset_index()[cols]

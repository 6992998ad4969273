"""Producers: throughput per topic and client, batch sizes, compression, acks, idempotence and
transactions, from the Produce rows of the partitions table.

Rates divide by the capture's span (first to last request of the whole capture), so every row is
comparable; a capture shorter than one millisecond has no rate.
"""
from __future__ import annotations

import pandas as pd

PRODUCE = 0


def _produce(t) -> pd.DataFrame:
    p = t.partitions
    return p[(p["api_key"] == PRODUCE).fillna(False)]


def span_seconds(t) -> float | None:
    ts = t.exchanges["request_ts"].dropna()
    if ts.empty:
        return None
    span = (ts.max() - ts.min()).total_seconds()
    return span if span >= 1e-3 else None


def throughput(t, by=("topic", "client_id")) -> pd.DataFrame:
    """Records and bytes produced per group, and per second over the capture span."""
    df = _produce(t)
    keys = list(by)
    cols = keys + ["batches", "records", "bytes", "records_per_s", "bytes_per_s"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(keys, observed=True, dropna=False)
    out = g.agg(batches=("batch_count", "sum"), records=("record_count", "sum"),
                bytes=("bytes", "sum"))
    span = span_seconds(t)
    out["records_per_s"] = out["records"] / span if span else float("nan")
    out["bytes_per_s"] = out["bytes"] / span if span else float("nan")
    return out.reset_index()[cols].sort_values("bytes", ascending=False).reset_index(drop=True)


def batch_sizes(t) -> pd.DataFrame:
    """Per topic: mean records and bytes per batch, and the largest record set sent."""
    df = _produce(t)
    df = df[df["batch_count"].fillna(0) > 0]
    cols = ["topic", "batches", "records_per_batch", "bytes_per_batch", "max_bytes"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby("topic", observed=True)
    out = g.agg(batches=("batch_count", "sum"), records=("record_count", "sum"),
                total=("bytes", "sum"), max_bytes=("bytes", "max"))
    out["records_per_batch"] = out["records"] / out["batches"]
    out["bytes_per_batch"] = out["total"] / out["batches"]
    return out.reset_index()[cols]


def compression(t) -> pd.DataFrame:
    """Per codec: record sets, wire bytes, and where the records were decompressed (records
    level) the compressed and uncompressed payload bytes and their ratio (batch headers left
    out, so the ratio is the codec's own)."""
    df = _produce(t)
    df = df[df["compression"].notna()]
    cols = ["compression", "record_sets", "bytes", "compressed_bytes", "uncompressed_bytes",
            "ratio"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby("compression", observed=True)
    out = g.agg(record_sets=("bytes", "size"), bytes=("bytes", "sum"))
    # unknown (not decompressed: bodies level) stays missing rather than 0
    out["compressed_bytes"] = g["compressed_bytes"].sum(min_count=1)
    out["uncompressed_bytes"] = g["uncompressed_bytes"].sum(min_count=1)
    out["ratio"] = out["uncompressed_bytes"] / out["compressed_bytes"]
    return out.reset_index()[cols]


def acks_mix(t) -> pd.DataFrame:
    """Produce requests per acks setting (-1 all, 1 leader, 0 none) and client id."""
    ex = t.exchanges
    df = ex[(ex["api_key"] == PRODUCE).fillna(False)]
    cols = ["acks", "client_id", "requests"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    out = df.groupby(["acks", "client_id"], observed=True, dropna=False).size()
    return out.rename("requests").reset_index()[cols]


def producer_ids(t) -> pd.DataFrame:
    """Idempotent producers (producer id >= 0 in their batches), with their transactional ids
    and whether their batches were transactional."""
    df = _produce(t)
    df = df[(df["producer_id"].fillna(-1) >= 0)]
    cols = ["client_id", "producer_id", "producer_epoch", "transactional", "transactional_id",
            "batches", "records"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    ex = t.exchanges[["exchange", "transactional_id"]]
    df = df.merge(ex, on="exchange", how="left")
    g = df.groupby(["client_id", "producer_id"], observed=True, dropna=False)
    out = g.agg(producer_epoch=("producer_epoch", "max"),
                transactional=("is_transactional", "max"),
                transactional_id=("transactional_id", "first"),
                batches=("batch_count", "sum"), records=("record_count", "sum"))
    return out.reset_index()[cols]

"""The tables of the HTML report, in reading order: the summary's sections (as `stats` shows
them), then clients and connections. Each is (title, DataFrame); empty frames are skipped by
the renderer."""
from __future__ import annotations

import pandas as pd

from .summary import sections


def clients(t) -> pd.DataFrame:
    """Per client id and address: connections, exchanges, apis used, errors, bytes, first and
    last request."""
    ex = t.exchanges
    cols = ["client_id", "client_ip", "connections", "exchanges", "apis", "errors",
            "request_bytes", "response_bytes", "first_request", "last_request"]
    if ex.empty:
        return pd.DataFrame(columns=cols)
    df = ex.assign(is_error=(ex["error_code"].fillna(0) != 0).astype(bool))
    g = df.groupby(["client_id", "client_ip"], observed=True, dropna=False)
    out = g.agg(connections=("connection_id", "nunique"), exchanges=("is_error", "size"),
                apis=("api_key", "nunique"), errors=("is_error", "sum"),
                request_bytes=("request_bytes", "sum"), response_bytes=("response_bytes", "sum"),
                first_request=("request_ts", "min"), last_request=("request_ts", "max"))
    return out.reset_index()[cols].sort_values("exchanges", ascending=False) \
        .reset_index(drop=True)


TLS_COLUMNS = ["tls_version", "tls_cipher", "tls_sni", "tls_alpn", "tls_decrypted",
               "tls_handshake_ms"]


def connections(t) -> pd.DataFrame:
    """One row per TCP connection, busiest first: endpoints, client ids, times, exchanges, bytes
    and its TLS (version, cipher, server name, decrypted or not) where it had any."""
    c = t.connections
    if c.empty:
        return c
    out = pd.DataFrame({
        "client": c["client_ip"].astype("string") + ":" + c["client_port"].astype("string"),
        "broker": c["broker_ip"].astype("string") + ":" + c["broker_port"].astype("string"),
        "client_ids": [", ".join(map(str, ids)) if ids is not None and len(ids) else ""
                       for ids in c["client_ids"]],
    }, index=c.index)
    for col in ["first_ts", "last_ts", "exchange_count", "request_bytes", "response_bytes",
                *TLS_COLUMNS, "capture"]:
        if col in c.columns:
            out[col] = c[col]
    return out.sort_values("exchange_count", ascending=False).reset_index(drop=True)


def report_tables(t, top: int):
    out = sections(t, top=top)
    out[len(out) - 1:len(out) - 1] = [
        ("Clients (client id and address)", clients(t)),
        ("Connections", connections(t)),
    ]
    return out

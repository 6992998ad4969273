"""The tables of the HTML report, in reading order: the summary's sections (as `stats` shows them)
and a clients table. Each is (title, DataFrame); empty frames are skipped by the renderer."""
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


def report_tables(t, top: int):
    out = sections(t, top=top)
    out.insert(len(out) - 1, ("Clients (client id and address)", clients(t)))
    return out

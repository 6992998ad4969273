"""The tables of the HTML report, in reading order: the summary's sections (as `stats` shows
them, but every client with every column of the clients table), then the connections. Each is
(title, DataFrame); empty frames are skipped by the renderer."""
from __future__ import annotations

import pandas as pd

from .summary import CLIENTS_TITLE, sections


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
    out = [("Clients (busiest first)", t.clients) if name.startswith(CLIENTS_TITLE) else (name, df)
           for name, df in sections(t, top=top)]
    out[len(out) - 1:len(out) - 1] = [("Connections", connections(t))]
    return out

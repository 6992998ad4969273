"""TLS connections in the analysis tables: how many were TLS, how many could be decrypted (a
connection without keys shows no exchanges at all, so the count says what is missing), by
protocol version and cipher suite, with the handshake time (ClientHello to the first
application data: the cost of setting TLS up)."""
from __future__ import annotations

import pandas as pd

COLUMNS = ["tls_version", "tls_cipher", "connections", "decrypted", "not_decrypted",
           "handshake_ms_p50", "handshake_ms_max"]


def _tls(t) -> pd.DataFrame:
    """The TLS rows of the connections table (tls_decrypted is null for plaintext ones)."""
    c = t.connections
    if "tls_decrypted" not in c.columns:
        return c.iloc[0:0]
    return c[c["tls_decrypted"].notna()]


def counts(t) -> tuple[int, int]:
    """(TLS connections, of which decrypted)."""
    tls = _tls(t)
    return len(tls), int(tls["tls_decrypted"].astype(bool).sum()) if len(tls) else 0


def connections(t) -> pd.DataFrame:
    """Per TLS version and cipher suite (unknown where the handshake was not captured):
    connections, decrypted, not decrypted, and the median and largest handshake time (ms)."""
    tls = _tls(t)
    if not len(tls):
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame({
        "tls_version": tls["tls_version"].astype("string").fillna("unknown"),
        "tls_cipher": tls["tls_cipher"].astype("string").fillna("unknown"),
        "decrypted": tls["tls_decrypted"].astype(bool),
        "handshake_ms": tls["tls_handshake_ms"].astype("float64"),
    })
    g = df.groupby(["tls_version", "tls_cipher"], observed=True, dropna=False)
    out = g.agg(connections=("decrypted", "size"), decrypted=("decrypted", "sum"),
                handshake_ms_p50=("handshake_ms", "median"),
                handshake_ms_max=("handshake_ms", "max")).reset_index()
    out["decrypted"] = out["decrypted"].astype("int64")
    out["not_decrypted"] = out["connections"] - out["decrypted"]
    return out[COLUMNS].sort_values(["connections", "tls_version", "tls_cipher"],
                                    ascending=[False, True, True]).reset_index(drop=True)

"""Large analysis tables made directly as Arrow columns (no capture, no dissection): n exchanges
over a few apis and clients in two bursts an hour apart, for the report's size and speed tests."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from analysis.columns import table_schema
from analysis.load import TABLES, Tables, table_columns

T0 = 1_700_000_000_000_000_000
APIS = [(0, "Produce", 9), (1, "Fetch", 12), (3, "Metadata", 12), (8, "OffsetCommit", 8),
        (12, "Heartbeat", 4), (18, "ApiVersions", 3)]


def _dict(indices, values, mask=None):
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32(), mask=mask),
                                          pa.array(values))


def tables(n: int, seed: int = 1) -> Tables:
    rng = np.random.default_rng(seed)
    api = rng.choice(len(APIS), n, p=[0.4, 0.4, 0.05, 0.05, 0.07, 0.03])
    clients = 5000
    client = rng.integers(0, clients, n)
    # two bursts of 10 minutes, an hour apart: the plots must show the idle time as a gap
    burst = rng.integers(0, 2, n)
    req = np.sort(T0 + burst * 3_600_000_000_000 + rng.integers(0, 600_000_000_000, n))
    lat_ms = rng.lognormal(1.0, 0.8, n)
    answered = rng.random(n) > 0.001
    error = np.where(rng.random(n) < 0.01, 6, 0).astype("int16")
    col = {
        "connection_id": pa.array(client.astype("int64")),
        "client_ip": _dict(client % 50, [f"10.0.{i // 250}.{i % 250}" for i in range(50)]),
        "client_port": pa.array((40000 + client).astype("int32")),
        "broker_ip": _dict(np.zeros(n, "int32"), ["10.0.9.1"]),
        "broker_port": pa.array(np.full(n, 9092, "int32")),
        "api_key": pa.array(np.array([a[0] for a in APIS], "int16")[api]),
        "api_name": _dict(api, [a[1] for a in APIS]),
        "api_version": pa.array(np.array([a[2] for a in APIS], "int16")[api]),
        "correlation_id": pa.array(np.arange(n, dtype="int32")),
        "client_id": _dict(client, [f"client-{i}" for i in range(clients)]),
        "request_ts": pa.array(req, pa.timestamp("ns", tz="UTC")),
        "response_ts": pa.array(np.where(answered, req + (lat_ms * 1e6).astype("int64"), 0),
                                pa.timestamp("ns", tz="UTC"), mask=~answered),
        "latency_ms": pa.array(lat_ms, mask=~answered),
        "request_bytes": pa.array(rng.integers(50, 5000, n)),
        "response_bytes": pa.array(rng.integers(50, 5000, n)),
        "error_code": pa.array(error),
        "error_name": _dict(np.zeros(n, "int32"), ["NOT_LEADER_OR_FOLLOWER"], mask=error == 0),
        "status": _dict(np.where(answered, 0, 1), ["ok", "unanswered"]),
        "exchange": pa.array(np.arange(n, dtype="int64")),
        "request_packet": pa.array(np.arange(n, dtype="int64") * 2 + 1),
        "response_packet": pa.array(np.arange(n, dtype="int64") * 2 + 2),
    }
    arrow = {}
    for name in TABLES:
        schema = table_schema(table_columns(name))
        rows = n if name == "exchanges" else 0
        arrow[name] = pa.table([col[f.name].cast(f.type) if name == "exchanges" and f.name in col
                                else pa.nulls(rows, f.type) for f in schema], schema=schema)
    return Tables(arrow)

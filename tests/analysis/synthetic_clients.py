"""Analysis tables of many clients made directly as Arrow columns (no capture): for the clients
table's tests and benchmark. Client k (address and client id; some share an id across two
addresses, some have none) is a producer, a consumer, a transactional producer-consumer, an
admin or a follower broker, over one to three connections that each open with ApiVersions (v3
with the software name for most, the broker's ranges answered on most), with acks, compression,
producer ids, groups (two for some: the most used counts), topics, errors and damaged rows
without an api key, interleaved in time."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from analysis.columns import table_schema
from analysis.load import TABLES, Tables, table_columns

T0 = 1_700_000_000_000_000_000
PRODUCE, FETCH, METADATA, OFFSET_COMMIT, JOIN, HEARTBEAT, API_VERSIONS, CREATE_TOPICS = \
    0, 1, 3, 8, 11, 12, 18, 19
NAMES = {0: "Produce", 1: "Fetch", 3: "Metadata", 8: "OffsetCommit", 11: "JoinGroup",
         12: "Heartbeat", 18: "ApiVersions", 19: "CreateTopics"}
TOP = {0: 11, 1: 16, 3: 12, 8: 9, 11: 9, 12: 4, 18: 3, 19: 7}   # the broker's maximum versions
SOFTWARE = [("librdkafka", "2.3.0"), ("kafka-python", "3.0.1"), ("apache-kafka-java", "3.7.0")]
ERRORS = [(6, "NOT_LEADER_OR_FOLLOWER"), (15, "COORDINATOR_NOT_AVAILABLE"), (3, "UNKNOWN_TOPIC")]
APIS_OF = {0: [PRODUCE, METADATA], 1: [FETCH, HEARTBEAT, OFFSET_COMMIT, JOIN, METADATA],
           2: [PRODUCE, FETCH, HEARTBEAT, OFFSET_COMMIT], 3: [CREATE_TOPICS, METADATA],
           4: [FETCH]}


def tables(clients: int, seed: int = 1) -> Tables:
    rng = np.random.default_rng(seed)
    ex = {k: [] for k in ("connection_id", "client_ip", "client_id", "api_key", "api_name",
                          "api_version", "request_ts", "error_code", "error_name", "acks",
                          "transactional_id", "group_id", "replica_id", "client_software_name",
                          "client_software_version", "api_versions")}
    parts = {k: [] for k in ("row", "api_key", "topic", "record_count", "compression",
                             "producer_id", "is_transactional")}
    conn = 0
    for k in range(clients):
        kind = k % 5
        ip = f"10.{k % 2}.{(k // 2) // 250 % 250}.{(k // 2) % 250}"
        cid = None if k % 97 == 0 else f"client-{k // 2}"
        software = SOFTWARE[k % 3] if k % 4 else (None, None)
        acks = [-1, 1, 0][k % 3] if k % 11 else None
        compression = ["gzip", "lz4", "none", None][k % 4]
        idempotent = kind == 2 or k % 3 == 0
        groups = [f"group-{k % 40}"] + ([f"group-{(k + 1) % 40}"] if k % 6 == 0 else [])
        topics = [f"topic-{(k + j) % 50}" for j in range(1 + k % 3)]
        for c in range(1 + k % 3):
            conn += 1
            n = 4 + (k + c) % 9
            apis = [API_VERSIONS] + list(rng.choice(APIS_OF[kind], n))
            for i, api in enumerate(apis):
                api = int(api)
                damaged = i > 0 and rng.random() < 0.01
                err = ERRORS[int(rng.integers(0, 3))] if rng.random() < 0.03 else (0, None)
                ex["connection_id"].append(conn)
                ex["client_ip"].append(ip)
                ex["client_id"].append(cid)
                ex["api_key"].append(None if damaged else api)
                ex["api_name"].append(None if damaged else NAMES[api])
                ex["api_version"].append(None if damaged else
                                         int(TOP[api] - rng.integers(0, 3) * (k % 2)))
                ex["request_ts"].append(T0 + int(rng.integers(0, 600_000_000_000)))
                ex["error_code"].append(err[0])
                ex["error_name"].append(err[1])
                ex["acks"].append(acks if api == PRODUCE else None)
                ex["transactional_id"].append(f"txn-{k}" if kind == 2 and api == PRODUCE
                                              and i % 2 else None)
                ex["group_id"].append(groups[i % len(groups) if i % 3 else 0]
                                      if api in (OFFSET_COMMIT, JOIN, HEARTBEAT) else None)
                ex["replica_id"].append((1 if kind == 4 else -1 if k % 7 else None)
                                        if api == FETCH else None)
                first = api == API_VERSIONS and i == 0
                ex["client_software_name"].append(software[0] if first else None)
                ex["client_software_version"].append(software[1] if first else None)
                ex["api_versions"].append(
                    [{"api_key": a, "min_version": 0, "max_version": m - (c % 2)}
                     for a, m in TOP.items()] if first and (k + c) % 7 else None)
                if api in (PRODUCE, FETCH) and not damaged:
                    for topic in topics[:1 + i % len(topics)]:
                        parts["row"].append(len(ex["api_key"]) - 1)
                        parts["api_key"].append(api)
                        parts["topic"].append(topic)
                        parts["record_count"].append(int(rng.integers(0, 3)) if api == FETCH
                                                     else 5)
                        parts["compression"].append(compression if api == PRODUCE else None)
                        parts["producer_id"].append((1000 + k if idempotent else -1)
                                                    if api == PRODUCE else None)
                        parts["is_transactional"].append(kind == 2 if api == PRODUCE else None)
    # in time order, numbered as exchanges are
    order = np.argsort(np.array(ex["request_ts"]), kind="stable")
    number = np.empty(len(order), np.int64)
    number[order] = np.arange(len(order))
    ex = {name: [values[i] for i in order] for name, values in ex.items()}
    ex["exchange"] = list(range(len(order)))
    rows = parts.pop("row")
    parts["exchange"] = [int(number[r]) for r in rows]
    for name in ("connection_id", "client_id", "request_ts"):
        parts[name] = [ex[name][number[r]] for r in rows]
    arrow = {}
    for name in TABLES:
        schema = table_schema(table_columns(name))
        cols = ex if name == "exchanges" else parts if name == "partitions" else {}
        rows_n = len(next(iter(cols.values()))) if cols else 0
        arrow[name] = pa.table([_array(cols[f.name], f.type) if f.name in cols
                                else pa.nulls(rows_n, f.type) for f in schema], schema=schema)
    return Tables(arrow)


def _array(values, typ):
    if pa.types.is_dictionary(typ):
        return pa.array(values, typ.value_type).dictionary_encode().cast(typ)
    if pa.types.is_timestamp(typ):
        return pa.array(values, pa.int64()).cast(typ)
    return pa.array(values, typ)

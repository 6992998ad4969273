"""Column schemas of the analysis tables, extending dissector.tables (DESIGN.md convention 7).

`exchanges` is EXCHANGE_COLUMNS plus EXCHANGE_EXTRA_COLUMNS (request settings the analyses need:
Fetch max wait, Produce acks, group membership; the latency anatomy; what the cluster said);
`records` is the core's RECORD_COLUMNS plus trace_id, span_id and trace_format parsed from the
trace context headers (analysis.trace_context, analysis.records_table.RECORD_TABLE_COLUMNS).
Types are the Arrow type names used by
dissector.tables; CATEGORICAL names become dictionary-encoded (pandas shows them as categories).
"""
from __future__ import annotations

import pyarrow as pa

from dissector.tables import CONNECTION_TLS_COLUMNS, EXCHANGE_COLUMNS, ISSUE_COLUMNS

from .anatomy import ANATOMY_COLUMNS
from .cluster_facts import BROKERS_TYPE, CLUSTER_COLUMNS, VERSIONS_TYPE
from .group_facts import GROUP_COLUMNS

EXCHANGE_EXTRA_COLUMNS = (
    ("acks", "int16"),
    ("transactional_id", "string"),
    ("max_wait_ms", "int32"),
    ("min_bytes", "int32"),
    ("isolation_level", "int8"),
    ("group_id", "string"),
    ("member_id", "string"),
    ("generation_id", "int32"),
    ("top_error_code", "int16"),   # the response's own top-level error code, if it has one
    ("replica_id", "int32"),       # Fetch, ListOffsets: a follower broker's id (-1: a consumer)
) + ANATOMY_COLUMNS + CLUSTER_COLUMNS + GROUP_COLUMNS   # timing; the cluster; the groups

PARTITION_COLUMNS = (
    ("exchange", "int64"),
    ("connection_id", "int64"),
    ("api_key", "int16"),
    ("api_name", "string"),
    ("api_version", "int16"),
    ("client_id", "string"),
    ("group_id", "string"),
    ("request_ts", "timestamp"),
    ("response_ts", "timestamp"),
    ("latency_ms", "float64"),
    ("topic", "string"),
    ("topic_id", "string"),
    ("partition", "int32"),
    ("error_code", "int16"),
    ("error_name", "string"),
    ("fetch_offset", "int64"),
    ("high_watermark", "int64"),
    ("last_stable_offset", "int64"),
    ("log_start_offset", "int64"),
    ("committed_offset", "int64"),
    ("base_offset", "int64"),
    ("timestamp_query", "int64"),     # ListOffsets: the timestamp asked for (-1 latest, -2 earliest)
    ("listed_offset", "int64"),       # ListOffsets: the offset answered
    ("bytes", "int64"),               # size of the record set carried (request or response)
    ("record_count", "int64"),
    ("batch_count", "int32"),
    ("compressed_bytes", "int64"),    # compressed payload of the compressed batches (no headers)
    ("uncompressed_bytes", "int64"),  # the same payload after decompression (records level)
    ("compression", "string"),
    ("producer_id", "int64"),
    ("producer_epoch", "int16"),
    ("base_sequence", "int32"),
    ("is_transactional", "bool"),
    # the offsets of the first and last record carried: Produce as the broker assigned them
    # (base_offset on), Fetch/ShareFetch from the batch headers (a batch may start before the
    # fetch offset: the consumer skips those)
    ("first_offset", "int64"),
    ("last_offset", "int64"),
    ("leader_id", "int32"),           # Metadata: the partition's leader (and its epoch)
    ("leader_epoch", "int32"),
)

CONNECTION_COLUMNS = (
    ("connection_id", "int64"),
    ("capture", "string"),
    ("client_ip", "string"),
    ("client_port", "int32"),
    ("broker_ip", "string"),
    ("broker_port", "int32"),
    ("first_ts", "timestamp"),
    ("last_ts", "timestamp"),
    ("first_packet", "int64"),
    ("exchange_count", "int64"),
    ("request_bytes", "int64"),
    ("response_bytes", "int64"),
    ("client_ids", "list<string>"),
) + CONNECTION_TLS_COLUMNS

CATEGORICAL = frozenset({
    "api_name", "status", "error_name", "client_id", "topic", "compression", "group_id",
    "transactional_id", "code", "severity", "capture", "client_ip", "broker_ip",
    "tls_version", "tls_cipher", "trace_format",
})

_SIMPLE = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string(), "binary": pa.binary(),
    "timestamp": pa.timestamp("ns", tz="UTC"), "list<string>": pa.list_(pa.string()),
    "list<int16>": pa.list_(pa.int16()),
    "list<struct<key: string, value: binary>>": pa.list_(pa.struct(
        [("key", pa.string()), ("value", pa.binary())])),
    BROKERS_TYPE: pa.list_(pa.struct([("node_id", pa.int32()), ("host", pa.string()),
                                      ("port", pa.int32()), ("rack", pa.string())])),
    VERSIONS_TYPE: pa.list_(pa.struct([("api_key", pa.int16()), ("min_version", pa.int16()),
                                       ("max_version", pa.int16())])),
}


def arrow_type(kind: str) -> pa.DataType:
    """The Arrow type of a schema type name (dissector.tables' names, plus a few here)."""
    try:
        return _SIMPLE[kind]
    except KeyError:
        raise ValueError(f"unknown column type {kind!r}") from None


def exchange_columns():
    return EXCHANGE_COLUMNS + EXCHANGE_EXTRA_COLUMNS


def issue_columns():
    return ISSUE_COLUMNS

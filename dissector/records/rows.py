"""Rows of the `records` table (DESIGN.md contract): one per record in Produce requests and in
Fetch and ShareFetch responses.

The table is built in columns (records.columns); `record_rows` reads one exchange's back as
tuples, for the text view and the tests. Record sets are taken from the decoded bodies: a
RecordSet already decoded is used as it is; a raw `records` field (bytes or memoryview) is
decoded here. Batches whose records were not decoded (headers-only mode, missing codec, capped)
contribute no rows. Timestamps are integer nanoseconds (UTC) like every time column in the core;
headers are [{"key": str, "value": bytes | None}] for the Arrow list<struct> column.
"""
from __future__ import annotations

from .columns import RecordColumns, iter_rows

RECORD_COLUMNS = (
    ("connection_id", "int64"),
    ("correlation_id", "int32"),
    ("api_key", "int16"),
    ("direction", "int8"),
    ("topic", "string"),
    ("partition", "int32"),
    ("magic", "int8"),
    ("compression", "string"),
    ("offset", "int64"),
    ("timestamp", "timestamp"),
    ("timestamp_type", "int8"),
    ("key", "binary"),
    ("value", "binary"),
    ("headers", "list<struct<key: string, value: binary>>"),
    ("producer_id", "int64"),
    ("producer_epoch", "int16"),
    ("base_sequence", "int32"),
    ("is_transactional", "bool"),
    ("is_control", "bool"),
    ("batch_crc_ok", "bool"),
)
RECORD_COLUMN_NAMES = tuple(name for name, _ in RECORD_COLUMNS)


def record_rows(exchange, topic_names=None, max_uncompressed=64 << 20):
    """Yield one tuple per record of the exchange, in RECORD_COLUMNS order.

    topic_names: optional {topic id: name} for topics that travel by id and were not resolved
    in the body (else the id's text is used).
    """
    cols = RecordColumns()
    cols.add_exchange(exchange, topic_names, max_uncompressed)
    yield from iter_rows(cols)

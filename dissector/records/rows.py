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

from .columns import BATCH_COLUMNS, RECORD_FIELD_COLUMNS, RecordColumns, iter_rows

# the batch fields with each record's own in between: the table's column order
RECORD_COLUMN_NAMES = (
    "connection_id", "correlation_id", "api_key", "direction", "topic", "partition", "magic",
    "compression", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
    "producer_id", "producer_epoch", "base_sequence", "is_transactional", "is_control",
    "batch_crc_ok")
_TYPES = dict(BATCH_COLUMNS + RECORD_FIELD_COLUMNS)
RECORD_COLUMNS = tuple((name, _TYPES[name]) for name in RECORD_COLUMN_NAMES)


def record_rows(exchange, topic_names=None, max_uncompressed=64 << 20):
    """Yield one tuple per record of the exchange, in RECORD_COLUMNS order.

    topic_names: optional {topic id: name} for topics that travel by id and were not resolved
    in the body (else the id's text is used).
    """
    cols = RecordColumns()
    cols.add_exchange(exchange, topic_names, max_uncompressed)
    yield from iter_rows(cols)

"""Rows of the `records` table (DESIGN.md contract): one per record in Produce requests and in
Fetch and ShareFetch responses.

Record sets are taken from the decoded bodies: a RecordSet already decoded with records=True is
used as it is; a raw `records` field (bytes or memoryview) is decoded here. Batches whose
records were not decoded (headers-only mode, missing codec, capped) contribute no rows.
Timestamps are integer nanoseconds (UTC) like every time column in the core; headers become
[{"key": str, "value": bytes | None}] for the Arrow list<struct> column.
"""
from __future__ import annotations

from ..model import REQUEST, RESPONSE
from .codecs import CODEC_NAMES
from .model import RecordSet
from .record_set import decode_record_set

PRODUCE, FETCH, SHARE_FETCH = 0, 1, 78

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
    conn = exchange.connection.connection_id if exchange.connection is not None else None
    corr = exchange.correlation_id
    api_key = exchange.api_key
    for direction, topic, partition, records in _partitions(exchange, topic_names):
        if isinstance(records, RecordSet):
            rs = records
        elif isinstance(records, (bytes, bytearray, memoryview)):
            rs = decode_record_set(records, build=True, max_uncompressed=max_uncompressed)
        else:
            continue
        for b in rs.batches:
            if not b.records:
                continue
            head = (conn, corr, api_key, direction, topic, partition, b.magic,
                    CODEC_NAMES.get(b.codec, str(b.codec)))
            tail = (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional,
                    b.is_control, b.crc_ok)
            ts_type = b.timestamp_type
            for r in b.records:
                ts = r.timestamp
                hs = r.headers
                yield head + (
                    r.offset, ts * 1_000_000 if ts is not None and ts >= 0 else None, ts_type,
                    r.key, r.value, [{"key": k, "value": v} for k, v in hs] if hs else [],
                ) + tail


def _partitions(ex, topic_names):
    """(direction, topic, partition, records field) for every partition carrying records."""
    if ex.api_key == PRODUCE:
        body = ex.request_msg.body if ex.request_msg is not None else None
        direction, topics_attr, parts_attr, index_attr = (REQUEST, "topic_data", "partition_data",
                                                          "index")
    elif ex.api_key in (FETCH, SHARE_FETCH):
        body = ex.response_msg.body if ex.response_msg is not None else None
        direction, topics_attr, parts_attr, index_attr = (RESPONSE, "responses", "partitions",
                                                          "partition_index")
    else:
        return
    if body is None:
        return
    for t in getattr(body, topics_attr, None) or ():
        name = getattr(t, "name", None) or getattr(t, "topic", None)
        if not name:
            topic_id = getattr(t, "topic_id", None)
            name = (topic_names or {}).get(topic_id)
            if name is None and topic_id is not None:
                name = str(topic_id)
        for p in getattr(t, parts_attr, None) or ():
            records = getattr(p, "records", None)
            if records is not None:
                yield direction, name, getattr(p, index_attr, None), records

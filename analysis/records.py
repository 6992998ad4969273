"""The records table: one row per record in Produce requests and Fetch responses.

dissector.records.rows (the records layer's own row builder) is used when it exists; until then
the rows are built here from the decoded RecordSets in the bodies, in the DESIGN.md contract.
"""
from __future__ import annotations

from dissector.model import REQUEST, RESPONSE

from .partitions import FETCH, PRODUCE, codec_name, topic_id_str
from .schema import RECORD_COLUMNS

try:   # the records layer's own schema and rows, when it has landed
    from dissector.records.rows import RECORD_COLUMNS as _CORE_COLUMNS
    from dissector.records.rows import record_rows as _core_record_rows
except ImportError:
    _CORE_COLUMNS = _core_record_rows = None


def record_columns():
    return _CORE_COLUMNS if _CORE_COLUMNS is not None else RECORD_COLUMNS


def _partitions(ex):
    """(direction, topic, partition, record set) of a Produce request or Fetch response."""
    if ex.api_key == PRODUCE and ex.request_msg is not None and ex.request_msg.body is not None:
        for t in ex.request_msg.body.topic_data or ():
            name = getattr(t, "name", None) or topic_id_str(getattr(t, "topic_id", None))
            for p in t.partition_data or ():
                yield REQUEST, name, p.index, p.records
    elif ex.api_key == FETCH and ex.response_msg is not None and ex.response_msg.body is not None:
        for t in ex.response_msg.body.responses or ():
            name = getattr(t, "topic", None) or topic_id_str(getattr(t, "topic_id", None))
            for p in t.partitions or ():
                yield RESPONSE, name, p.partition_index, p.records


def _ns(ms):
    return ms * 1_000_000 if isinstance(ms, int) and ms >= 0 else None


def record_rows(ex):
    """Rows in record_columns() order for every decoded record of the exchange."""
    if _core_record_rows is not None:
        return _core_record_rows(ex)
    out = []
    conn = ex.connection.connection_id
    for direction, topic, partition, rs in _partitions(ex):
        for b in getattr(rs, "batches", None) or ():
            if not b.records:
                continue
            head = (conn, ex.correlation_id, ex.api_key, direction, topic, partition, b.magic,
                    codec_name(b.codec))
            tail = (b.producer_id, b.producer_epoch, b.base_sequence, bool(b.is_transactional),
                    bool(b.is_control), b.crc_ok)
            for r in b.records:
                headers = [{"key": k, "value": v} for k, v in r.headers or ()]
                out.append(head + (r.offset, _ns(r.timestamp), b.timestamp_type, r.key, r.value,
                                   headers) + tail)
    return out

"""The partitions table: one row per (exchange, topic, partition) of the partition-level APIs
(and of Metadata responses: the partition leaders).

Request and response are walked separately and merged by (topic, partition): the request gives
fetch and committed offsets and the produced record sets, the response gives error codes, high
watermarks and fetched record sets. Field names are the specs' names in snake_case.
"""
from __future__ import annotations

import uuid

from dissector.protocol.names import error_name
from dissector.records.codecs import CODEC_NAMES
from dissector.tables import exchange_api_name

from .schema import PARTITION_COLUMNS

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
PARTITION_APIS = frozenset({PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH,
                            SHARE_FETCH, SHARE_ACKNOWLEDGE})

# bytes of a batch around its (compressed) payload: RecordBatch v2 header; MessageSet v0/v1
# wrapper (offset, size, crc, magic, attributes, [timestamp], null key, value length)
BATCH_OVERHEAD = {0: 26, 1: 34, 2: 61}

_COL = {name: i for i, (name, _) in enumerate(PARTITION_COLUMNS)}
_WIDTH = len(PARTITION_COLUMNS)
(_TOPIC, _TOPIC_ID, _PARTITION, _ERR, _ERR_NAME, _FETCH_OFF, _HW, _LSO, _LOG_START, _COMMITTED,
 _BASE_OFF, _TS_QUERY, _LISTED, _BYTES, _RECORDS, _BATCHES, _COMP, _UNCOMP, _CODEC, _PID, _PEPOCH,
 _BASE_SEQ, _TXN, _FIRST, _LAST, _LEADER, _LEADER_EPOCH) = (_COL[n] for n in (
    "topic", "topic_id", "partition", "error_code", "error_name", "fetch_offset", "high_watermark",
    "last_stable_offset", "log_start_offset", "committed_offset", "base_offset", "timestamp_query",
    "listed_offset", "bytes", "record_count", "batch_count", "compressed_bytes",
    "uncompressed_bytes", "compression",
    "producer_id", "producer_epoch", "base_sequence", "is_transactional", "first_offset",
    "last_offset", "leader_id", "leader_epoch"))


def topic_id_str(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    return str(value)


def _topic_key(topic):
    """(name, id string) of a topic entry: by name before Fetch v13, by id after (with the name
    when the decoders resolved it into `topic`/`name`)."""
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    tid = topic_id_str(getattr(topic, "topic_id", None))
    if tid == "00000000-0000-0000-0000-000000000000":
        tid = None
    return name, tid


class _Rows:
    """The rows of one exchange, keyed by (topic id or name, partition) in first-seen order."""

    def __init__(self):
        self.rows = {}

    def get(self, topic, partition):
        name, tid = _topic_key(topic)
        key = (tid or name, partition)   # by id when there is one: one side may lack the name
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [None] * _WIDTH
            row[_TOPIC_ID] = tid
            row[_PARTITION] = partition
        if name or row[_TOPIC] is None:
            row[_TOPIC] = name or tid
        return row


def _add_records(row, records) -> None:
    """Size, record and batch counts of a record set (decoded RecordSet or raw bytes)."""
    if records is None:
        return
    if isinstance(records, (bytes, bytearray, memoryview)):
        row[_BYTES] = len(records)
        return
    size = getattr(records, "size", None)
    row[_BYTES] = size
    batches = getattr(records, "batches", None)
    if batches is None:
        row[_RECORDS] = getattr(records, "record_count", None)
        return
    row[_BATCHES] = len(batches)
    count = 0
    counted = True
    uncompressed = compressed = 0
    compressed_seen = False
    for b in batches:
        if b.record_count is None:
            counted = False
        else:
            count += b.record_count
        if b.codec and b.uncompressed_size is not None:
            uncompressed += b.uncompressed_size
            compressed += b.size - BATCH_OVERHEAD.get(b.magic, 0)
            compressed_seen = True
    rc = getattr(records, "record_count", None)
    row[_RECORDS] = rc if rc is not None else (count if counted else None)
    _offsets(row, batches)
    if batches:
        first = batches[0]
        row[_CODEC] = CODEC_NAMES.get(first.codec, str(first.codec))
        row[_PID] = first.producer_id
        row[_PEPOCH] = first.producer_epoch
        row[_BASE_SEQ] = first.base_sequence
        row[_TXN] = bool(first.is_transactional) if first.magic == 2 else None
        if compressed_seen:
            row[_COMP] = compressed
            row[_UNCOMP] = uncompressed


def _offsets(row, batches) -> None:
    """First and last offsets of the data batches (control batches hold no produced record;
    a legacy compressed wrapper read headers-only has no offsets: left unknown)."""
    data = [b for b in batches if not b.is_control]
    if data and data[0].base_offset is not None:
        last = data[-1]
        if last.base_offset is not None and last.last_offset_delta is not None:
            row[_FIRST] = data[0].base_offset
            row[_LAST] = last.base_offset + last.last_offset_delta


def _error(row, code) -> None:
    if code is not None:
        row[_ERR] = code
        row[_ERR_NAME] = error_name(code)


def _produce(rows, req, resp):
    if req is not None:
        for t in req.topic_data or ():
            for p in t.partition_data or ():
                _add_records(rows.get(t, p.index), p.records)
    if resp is not None:
        for t in resp.responses or ():
            for p in t.partition_responses or ():
                row = rows.get(t, p.index)
                _error(row, p.error_code)
                row[_BASE_OFF] = p.base_offset
                row[_LOG_START] = getattr(p, "log_start_offset", None)
    for row in rows.rows.values():   # the offsets the broker gave the records
        base, count = row[_BASE_OFF], row[_RECORDS]
        first = base if isinstance(base, int) and base >= 0 and count else None
        row[_FIRST] = first
        row[_LAST] = first + count - 1 if first is not None else None


def _fetch(rows, req, resp):
    if req is not None:
        for t in req.topics or ():
            for p in t.partitions or ():
                row = rows.get(t, p.partition)
                row[_FETCH_OFF] = p.fetch_offset
    if resp is not None:
        for t in resp.responses or ():
            for p in t.partitions or ():
                row = rows.get(t, p.partition_index)
                _error(row, p.error_code)
                row[_HW] = p.high_watermark
                row[_LSO] = getattr(p, "last_stable_offset", None)
                row[_LOG_START] = getattr(p, "log_start_offset", None)
                _add_records(row, p.records)


def _list_offsets(rows, req, resp):
    if req is not None:
        for t in req.topics or ():
            for p in t.partitions or ():
                rows.get(t, p.partition_index)[_TS_QUERY] = getattr(p, "timestamp", None)
    if resp is not None:
        for t in resp.topics or ():
            for p in t.partitions or ():
                row = rows.get(t, p.partition_index)
                _error(row, p.error_code)
                offset = getattr(p, "offset", None)
                if offset is None:   # v0 answers a list of old-style offsets
                    olds = getattr(p, "old_style_offsets", None)
                    offset = olds[0] if olds else None
                row[_LISTED] = offset


def _offset_commit(rows, req, resp):
    if req is not None:
        for t in req.topics or ():
            for p in t.partitions or ():
                rows.get(t, p.partition_index)[_COMMITTED] = p.committed_offset
    if resp is not None:
        for t in resp.topics or ():
            for p in t.partitions or ():
                _error(rows.get(t, p.partition_index), p.error_code)


def _offset_fetch_topics(resp):
    if getattr(resp, "groups", None):
        for g in resp.groups:
            yield from g.topics or ()
    else:
        yield from getattr(resp, "topics", None) or ()


def _offset_fetch(rows, req, resp):
    if req is not None:
        topics = list(getattr(req, "topics", None) or ())
        for g in getattr(req, "groups", None) or ():
            topics.extend(g.topics or ())
        for t in topics:
            for index in t.partition_indexes or ():
                rows.get(t, index)
    if resp is not None:
        for t in _offset_fetch_topics(resp):
            for p in t.partitions or ():
                row = rows.get(t, p.partition_index)
                _error(row, p.error_code)
                row[_COMMITTED] = p.committed_offset


def _share_fetch(rows, req, resp):
    if req is not None:
        for t in req.topics or ():
            for p in t.partitions or ():
                rows.get(t, p.partition_index)
    if resp is not None:
        for t in resp.responses or ():
            for p in t.partitions or ():
                row = rows.get(t, p.partition_index)
                _error(row, p.error_code)
                _add_records(row, getattr(p, "records", None))


def _metadata(rows, req, resp):
    if resp is not None:
        for t in resp.topics or ():
            for p in t.partitions or ():
                row = rows.get(t, p.partition_index)
                _error(row, p.error_code)
                row[_LEADER] = p.leader_id
                row[_LEADER_EPOCH] = getattr(p, "leader_epoch", None)


_EXTRACT = {PRODUCE: _produce, FETCH: _fetch, LIST_OFFSETS: _list_offsets, METADATA: _metadata,
            OFFSET_COMMIT: _offset_commit, OFFSET_FETCH: _offset_fetch,
            SHARE_FETCH: _share_fetch, SHARE_ACKNOWLEDGE: _share_fetch}


def _group_id(body):
    gid = getattr(body, "group_id", None)
    if gid is None and getattr(body, "groups", None):
        gid = body.groups[0].group_id
    return gid


def partition_rows(ex):
    """The exchange's partitions rows (tuples in PARTITION_COLUMNS order); none for other APIs
    or when no body was decoded."""
    extract = _EXTRACT.get(ex.api_key)
    if extract is None:
        return []
    req = ex.request_msg.body if ex.request_msg is not None else None
    resp = ex.response_msg.body if ex.response_msg is not None else None
    if req is None and resp is None:
        return []
    rows = _Rows()
    try:
        extract(rows, req, resp)
    except (AttributeError, TypeError):
        pass   # a partially decoded body: keep the rows found so far
    if not rows.rows:
        return []
    req_f, resp_f = ex.request, ex.response
    head = (ex.index, ex.connection.connection_id, ex.api_key, exchange_api_name(ex),
            ex.api_version, ex.client_id, _group_id(req) if req is not None else None,
            req_f.first_ts if req_f else None, resp_f.first_ts if resp_f else None,
            ex.latency_ms)
    n = len(head)
    out = []
    for row in rows.rows.values():
        row[:n] = head
        out.append(tuple(row))
    return out

"""The partitions table: one row per (exchange, topic, partition) of the partition-level APIs
(and of Metadata responses: the partition leaders).

Request and response are walked separately and merged by (topic, partition): the request gives
fetch and committed offsets and the produced record sets, the response gives error codes, high
watermarks and fetched record sets. Field names are the specs' names in snake_case.

This makes the rows of one exchange at a time (partition_rows): the specification of the table.
analysis.partition_columns builds the same table in columns, and takes the exchanges its walk
does not (sides that list other partitions, a partial body) from here.
"""
from __future__ import annotations

import uuid
from operator import itemgetter

from dissector.partition_walk import (
    RECORD_COLUMNS, listed_offset, produced_offsets, record_values)
from dissector.protocol.names import error_name
from dissector.protocol.primitives import UUID0
from dissector.tables import EXCHANGE_COLUMN_NAMES, exchange_api_name

from .columns import ColumnBuilder
from .schema import EXCHANGE_EXTRA_COLUMNS, PARTITION_COLUMNS

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79

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


_ID_TEXTS = {}          # topic id (a UUID or its 16 bytes) -> its text: the same few ids recur
MAX_ID_TEXTS = 1 << 12  # in every exchange; forged ones must not fill memory


def topic_id_str(value) -> str | None:
    if value is None:
        return None
    known = type(value) is uuid.UUID or type(value) is bytes
    if known:
        text = _ID_TEXTS.get(value)
        if text is not None:
            return text
    if isinstance(value, (bytes, bytearray, memoryview)) and len(value) == 16:
        text = str(uuid.UUID(bytes=bytes(value)))
    else:
        text = str(value)
    if known:
        if len(_ID_TEXTS) >= MAX_ID_TEXTS:
            _ID_TEXTS.clear()
        _ID_TEXTS[value] = text
    return text


_ZERO_ID = str(UUID0)


def topic_id(value) -> str | None:
    """A topic entry's topic_id as text; None when it has none (absent or all zeros)."""
    if value is None or value is UUID0:   # the decoders' default, before Fetch v13
        return None
    tid = topic_id_str(value)
    return None if tid == _ZERO_ID else tid


def _topic_key(topic):
    """(name, id string) of a topic entry: by name before Fetch v13, by id after (with the name
    when the decoders resolved it into `topic`/`name`)."""
    name = getattr(topic, "name", None) or getattr(topic, "topic", None)
    return name, topic_id(getattr(topic, "topic_id", None))


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


RECORD_COLS = tuple(_COL[name] for name in RECORD_COLUMNS)


def _add_records(row, records) -> None:
    """Size, record and batch counts of a record set (decoded RecordSet or raw bytes)."""
    if records is not None:
        for col, value in zip(RECORD_COLS, record_values(records)):
            if value is not None:
                row[col] = value


def _error(row, code) -> None:
    if code is not None:
        row[_ERR] = code
        row[_ERR_NAME] = error_name(code)


def _entries(topics, parts="partitions"):
    """(topic, partition entry) for every partition of `topics` (a body's list; None: none)."""
    for t in topics or ():
        for p in getattr(t, parts) or ():
            yield t, p


def _produce(rows, req, resp):
    if req is not None:
        for t, p in _entries(req.topic_data, "partition_data"):
            _add_records(rows.get(t, p.index), p.records)
    if resp is not None:
        for t, p in _entries(resp.responses, "partition_responses"):
            row = rows.get(t, p.index)
            _error(row, p.error_code)
            row[_BASE_OFF] = p.base_offset
            row[_LOG_START] = getattr(p, "log_start_offset", None)
    for row in rows.rows.values():   # the offsets the broker gave the records
        row[_FIRST], row[_LAST] = produced_offsets(row[_BASE_OFF], row[_RECORDS])


def _fetch(rows, req, resp):
    if req is not None:
        for t, p in _entries(req.topics):
            rows.get(t, p.partition)[_FETCH_OFF] = p.fetch_offset
    if resp is not None:
        for t, p in _entries(resp.responses):
            row = rows.get(t, p.partition_index)
            _error(row, p.error_code)
            row[_HW] = p.high_watermark
            row[_LSO] = getattr(p, "last_stable_offset", None)
            row[_LOG_START] = getattr(p, "log_start_offset", None)
            _add_records(row, p.records)


def _list_offsets(rows, req, resp):
    if req is not None:
        for t, p in _entries(req.topics):
            rows.get(t, p.partition_index)[_TS_QUERY] = getattr(p, "timestamp", None)
    if resp is not None:
        for t, p in _entries(resp.topics):
            row = rows.get(t, p.partition_index)
            _error(row, p.error_code)
            row[_LISTED] = listed_offset(p)


def _offset_commit(rows, req, resp):
    if req is not None:
        for t, p in _entries(req.topics):
            rows.get(t, p.partition_index)[_COMMITTED] = p.committed_offset
    if resp is not None:
        for t, p in _entries(resp.topics):
            _error(rows.get(t, p.partition_index), p.error_code)


def offset_fetch_topics(body):
    """The topics of an OffsetFetch request or response: its own (v0-v7) or its groups' (v8+)."""
    topics = list(getattr(body, "topics", None) or ())
    for g in getattr(body, "groups", None) or ():
        topics.extend(g.topics or ())
    return topics


def _offset_fetch(rows, req, resp):
    if req is not None:
        for t, index in _entries(offset_fetch_topics(req), "partition_indexes"):
            rows.get(t, index)
    if resp is not None:
        for t, p in _entries(offset_fetch_topics(resp)):
            row = rows.get(t, p.partition_index)
            _error(row, p.error_code)
            row[_COMMITTED] = p.committed_offset


def _share_fetch(rows, req, resp):
    if req is not None:
        for t, p in _entries(req.topics):
            rows.get(t, p.partition_index)
    if resp is not None:
        for t, p in _entries(resp.responses):
            row = rows.get(t, p.partition_index)
            _error(row, p.error_code)
            _add_records(row, getattr(p, "records", None))


def _metadata(rows, req, resp):
    if resp is not None:
        for t, p in _entries(resp.topics):
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


def partition_rows(ex, bodies=None):
    """The exchange's partitions rows (tuples in PARTITION_COLUMNS order); none for other APIs
    or when no body was decoded. `bodies`: (request, response) to read instead of its
    messages' bodies (theirs, or where the byte walk kept none, the ones its groups stand for)."""
    extract = _EXTRACT.get(ex.api_key)
    if extract is None:
        return []
    if bodies is not None:
        req, resp = bodies
    else:
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
    head = exchange_head(ex, req)
    n = len(head)
    out = []
    for row in rows.rows.values():
        row[:n] = head
        out.append(tuple(row))
    return out


def exchange_head(ex, req) -> tuple:
    """The exchange's own columns of its partitions rows (the first ones); `req` its request
    body."""
    req_f, resp_f = ex.request, ex.response
    return (ex.index, ex.connection.connection_id, ex.api_key, exchange_api_name(ex),
            ex.api_version, ex.client_id, _group_id(req) if req is not None else None,
            req_f.first_ts if req_f else None, resp_f.first_ts if resp_f else None,
            ex.latency_ms)


_ROW_NAMES = EXCHANGE_COLUMN_NAMES + tuple(name for name, _ in EXCHANGE_EXTRA_COLUMNS)
# head_of_row(row): exchange_head from the exchange's row in the exchanges table (the same
# values, read once there; its group id a string or None, which the table's string column makes
# of any other value alike)
head_of_row = itemgetter(*(_ROW_NAMES.index(name) for name in (
    "exchange", "connection_id", "api_key", "api_name", "api_version", "client_id", "group_id",
    "request_ts", "response_ts", "latency_ms")))


def row_by_row_table(exchanges):
    """The partitions table of `exchanges` as this module makes it, a row at a time through the
    generic column builder (analysis.partition_columns builds the same in columns)."""
    builder = ColumnBuilder(PARTITION_COLUMNS)
    for ex in exchanges:
        for row in partition_rows(ex):
            builder.append(row)
    return builder.table()

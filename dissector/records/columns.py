"""The records table in Arrow's columnar layout, as plain buffers (no pyarrow here: analysis
wraps them with pa.Array.from_buffers; the text writers read them as they are).

A RecordColumns holds the records of many batches. The batch fields (connection, topic,
producer, ...) are kept once per batch in `batches` (tuples in BATCH_COLUMNS order); each record
row holds its batch's index in `batch_index`. The record fields go straight from the batch's
decompressed bytes into little-endian buffers: int64 offsets and timestamps (ns, with a validity
bitmap), keys and values as binary columns (int32 offsets + data + validity), headers as
list<struct<key: string, value: binary>> (list offsets, then the keys' and the values' own
offsets and data). No key, value or header is ever a Python object on this path.

`append_v2` fills the buffers from the records of one v2 batch that record_batch.decode already
checked (its deferred parse): records/_columns.c does it compiled; `py_append_v2` here is the
specification, parsing exactly as record_batch._parse_records does. `append_sets` does it for
an exchange's record sets, batch after batch (RecordColumns.fill), with their batch fields, in
one call: on message-dense traffic a batch holds a record or two. The tests compare the twins.
"""
from __future__ import annotations

import struct

from ..model import REQUEST, RESPONSE
from .codecs import CODEC_NAMES
from .model import RecordSet
from .record_set import decode_record_set

PRODUCE, FETCH, SHARE_FETCH = 0, 1, 78
RECORD_APIS = frozenset((PRODUCE, FETCH, SHARE_FETCH))
# (is response, api key) of their sides that carry none: Produce's response, the fetch requests
RECORDLESS_SIDES = frozenset(((True, PRODUCE), (False, FETCH), (False, SHARE_FETCH)))

# The columns that come from the batch (stored once a batch), in the table's order (RECORD_COLUMNS
# in rows.py interleaves them with RECORD_FIELD_COLUMNS).
BATCH_COLUMNS = (
    ("connection_id", "int64"),
    ("correlation_id", "int32"),
    ("api_key", "int16"),
    ("direction", "int8"),
    ("topic", "string"),
    ("partition", "int32"),
    ("magic", "int8"),
    ("compression", "string"),
    ("timestamp_type", "int8"),
    ("producer_id", "int64"),
    ("producer_epoch", "int16"),
    ("base_sequence", "int32"),
    ("is_transactional", "bool"),
    ("is_control", "bool"),
    ("batch_crc_ok", "bool"),
)
# The columns of each record's own fields, from its bytes.
RECORD_FIELD_COLUMNS = (
    ("offset", "int64"),
    ("timestamp", "timestamp"),
    ("key", "binary"),
    ("value", "binary"),
    ("headers", "list<struct<key: string, value: binary>>"),
)

# The buffers, in the order append_v2 takes them.
BUFFERS = ("batch_index", "offset", "offset_valid", "timestamp", "timestamp_valid",
           "key_offsets", "key_data", "key_valid", "value_offsets", "value_data", "value_valid",
           "header_offsets", "hkey_offsets", "hkey_data", "hvalue_offsets", "hvalue_data",
           "hvalue_valid")
_OFFSET_BUFFERS = ("key_offsets", "value_offsets", "header_offsets", "hkey_offsets",
                   "hvalue_offsets")

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_ZERO32 = _I32.pack(0)
NS_PER_MS = 1_000_000
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_TS_MAX = _I64_MAX // NS_PER_MS   # the last millisecond whose ns fit int64
UNCUT = 1 << 62   # RecordColumns.fill's limits when nothing is cut


class RecordColumns:
    """Record rows as buffers (see the module doc). `rows` counts them, `data_bytes` sums the
    bytes of their keys, values and headers (what a batch of rows costs in memory)."""

    def __init__(self):
        self.batches = []
        for name in BUFFERS:
            setattr(self, name, bytearray(_ZERO32 if name in _OFFSET_BUFFERS else b""))
        self.buffers = tuple(getattr(self, name) for name in BUFFERS)

    @property
    def rows(self) -> int:
        return len(self.offset) >> 3

    @property
    def data_bytes(self) -> int:
        return (len(self.key_data) + len(self.value_data) + len(self.hkey_data)
                + len(self.hvalue_data) + 32 * self.rows)

    def __len__(self):
        return self.rows

    def add_batch(self, head, batch) -> int:
        """Append the records of a decoded Batch whose batch fields are `head` (a tuple of
        BATCH_COLUMNS values); returns how many. A checked v2 batch whose records are not built
        yet goes straight from its bytes; others (v0/v1, control, built) from their Records."""
        deferred = batch._deferred
        index = len(self.batches)
        if deferred is not None:
            found, _, (body, _, base_offset, first_ts, ts_fixed) = deferred
            if not found:
                return 0
            try:
                append_v2(self.buffers, body, found, base_offset, first_ts, ts_fixed, index)
            except ValueError:   # a bug (the check passed these records): the batch is left out
                return 0
            self.batches.append(head)
            return found
        records = batch.records
        if not records:
            return 0
        self.batches.append(head)
        for r in records:
            _append_record(self, index, r.offset, r.timestamp, r.key, r.value, r.headers)
        return len(records)

    def full(self, rows, data_bytes) -> bool:
        """Whether the columns hold `rows` rows or `data_bytes` (where a chunk is cut)."""
        return self.rows >= rows or self.data_bytes >= data_bytes

    def fill(self, stem, sets, at=0, batch_at=0, rows=UNCUT, data_bytes=UNCUT, sources=None,
             source=None) -> tuple[int, int, bool]:
        """Append the records of an exchange's record sets (exchange_records' `stem` and
        `sets`) from sets[at]'s batch `batch_at` on, until the columns are full(rows,
        data_bytes); returns where to go on (the set's index, the batch's: len(sets) when all
        are in) and whether they are full. `sources`, if a list, gets (source, records) per
        batch with records."""
        while at < len(sets):
            at, batch_at, full = append_sets(self.buffers, self.batches, stem, sets, at,
                                             batch_at, rows, data_bytes, sources, source,
                                             CODEC_NAMES)
            if full or at == len(sets):
                return at, batch_at, full
            topic, partition, rs = sets[at]   # a batch with its records built (v0/v1,
            b = rs.batches[batch_at]          # control) or none: one by one
            batch_at += 1
            if batch_at == len(rs.batches):
                at, batch_at = at + 1, 0
            if b.records:
                n = self.add_batch(batch_head(stem + (topic, partition), b), b)
                if n and sources is not None:
                    sources.append((source, n))
                if self.full(rows, data_bytes):
                    return at, batch_at, True
        return at, batch_at, False

    def add_exchange(self, exchange, topic_names=None, max_uncompressed=64 << 20) -> int:
        """Append the records of an exchange; returns how many (see exchange_records)."""
        before = self.rows
        found = exchange_records(exchange, topic_names, max_uncompressed)
        if found is not None:
            self.fill(*found)
        return self.rows - before


def exchange_records(exchange, topic_names=None, max_uncompressed=64 << 20):
    """(stem, sets) of an exchange with record sets (Produce requests, Fetch and ShareFetch
    responses), else None: stem its (connection, correlation id, api key, direction), the
    first batch fields; sets (topic, partition, RecordSet) per partition with records, as
    partitions() finds them. topic_names: {topic id: name} for topics that travel by id and
    were not resolved in the body (else the id's text is used). A raw `records` field (not
    decoded by the pipeline) is decoded here."""
    api_key = exchange.api_key
    if api_key not in RECORD_APIS:
        return None
    found = partitions(exchange, topic_names)
    if found is None:
        return None
    direction, sets = found
    if type(sets) is not list:   # from a decoded body
        sets = [(topic, partition, records if isinstance(records, RecordSet)
                 else decode_record_set(records, max_uncompressed=max_uncompressed))
                for topic, partition, records in sets
                if isinstance(records, (RecordSet, bytes, bytearray, memoryview))]
    if not sets:
        return None
    conn = exchange.connection.connection_id if exchange.connection is not None else None
    return (conn, exchange.correlation_id, api_key, direction), sets


def batch_head(prefix, b, codec_names=CODEC_NAMES) -> tuple:
    """A batch's BATCH_COLUMNS values: `prefix` (exchange_sets'), then the batch's own."""
    return prefix + (b.magic, codec_names.get(b.codec, str(b.codec)), b.timestamp_type,
                     b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional,
                     b.is_control, b.crc_ok)


def py_append_batches(buffers, heads, prefix, batches, at, rows, data_bytes, sources, source,
                      codec_names) -> tuple[int, bool]:
    """py_append_sets' walk over one set's batches whose records are checked and not built
    (`_deferred`), from batches[at] on: each one's records appended to `buffers` (as
    append_v2) with its batch fields in `heads`, (source, records) in `sources` (a list, or
    None), until the buffers hold `rows` rows or `data_bytes` (RecordColumns.full) or a batch
    without `_deferred` comes (the caller takes it); returns the index of the next batch and
    whether the buffers are full. records/_columns.c's walk_batches is this without a Python
    call per batch; `codec_names` is CODEC_NAMES."""
    cols = _over(buffers, heads)
    while at < len(batches):
        b = batches[at]
        deferred = b._deferred
        if deferred is None:
            break
        at += 1
        found, _, (body, _, base_offset, first_ts, ts_fixed) = deferred
        if not found:
            continue
        try:
            py_append_v2(buffers, body, found, base_offset, first_ts, ts_fixed, len(heads))
        except ValueError:   # a bug (the check passed these records): the batch is left out
            continue
        heads.append(batch_head(prefix, b, codec_names))
        if sources is not None:
            sources.append((source, found))
        if cols.full(rows, data_bytes):
            break
    return at, cols.full(rows, data_bytes)


def py_append_sets(buffers, heads, stem, sets, at, batch_at, rows, data_bytes, sources,
                   source, codec_names) -> tuple[int, int, bool]:
    """RecordColumns.fill's walk over an exchange's record sets: py_append_batches over the
    batches of each RecordSet in `sets` ((topic, partition, set) each; other sets are passed
    over), from sets[at]'s batch `batch_at` on, each with the batch fields `stem` + (topic,
    partition), until the buffers are full or a batch without `_deferred` comes; returns the
    set's and the batch's index to go on from (a set all taken: the next set's, batch 0) and
    whether the buffers are full. records/_columns.c's append_sets is this without a Python
    call per set."""
    cols = _over(buffers, heads)
    at, batch_at = max(at, 0), max(batch_at, 0)
    while at < len(sets):
        topic, partition, rs = sets[at]
        if type(rs) is RecordSet:
            batches = rs.batches
            n = len(batches) if isinstance(batches, list) else 0
            if batch_at < n:
                batch_at, _ = py_append_batches(buffers, heads, stem + (topic, partition),
                                                batches, batch_at, rows, data_bytes, sources,
                                                source, codec_names)
                n = len(batches) if isinstance(batches, list) else 0
            if batch_at < n:   # full, or a batch the caller takes
                break
            if cols.full(rows, data_bytes):
                at, batch_at = at + 1, 0
                break
        at, batch_at = at + 1, 0
    return at, batch_at, cols.full(rows, data_bytes)


# batch_buffers' kind of each BATCH_COLUMNS column: 0 text, -1 bool, else an int's bytes
BATCH_KINDS = tuple({"string": 0, "bool": -1, "int8": 1, "int16": 2, "int32": 4, "int64": 8}[kind]
                    for _, kind in BATCH_COLUMNS)


def py_batch_buffers(heads, kinds) -> list:
    """The batch fields `heads` (tuples, one per batch) as Arrow column buffers, per column of
    `kinds` (BATCH_KINDS): (validity, offsets, UTF-8 data) for text, (validity, bits) for bools,
    (validity, little-endian values) for ints; validity None when every value is valid. A
    value not of its column's exact type (from a damaged body), an int out of its column's
    range or text that does not encode is null. records/_columns.c's batch_buffers is this
    without a Python step per value."""
    n = len(heads)
    if kinds and not all(isinstance(h, tuple) and len(h) >= len(kinds) for h in heads):
        raise TypeError("a batch's fields are a tuple of every column")
    out = []
    for col, kind in enumerate(kinds):
        if kind not in (0, -1, 1, 2, 4, 8):
            raise ValueError("a kind is 0 (text), -1 (bool) or an int's width in bytes")
        valid = bytearray((n + 7) >> 3)
        count = 0
        if kind == 0:
            offsets, data = bytearray(_ZERO32), bytearray()
        elif kind == -1:
            data = bytearray((n + 7) >> 3)
        else:
            data = bytearray()
        for row, head in enumerate(heads):
            v = head[col]
            ok = False
            if kind == 0:
                if type(v) is str:
                    try:
                        data += v.encode()
                        ok = True
                    except UnicodeEncodeError:   # a lone surrogate
                        pass
                offsets += _I32.pack(len(data))
            elif kind == -1:
                ok = type(v) is bool
                if v is True:
                    data[row >> 3] |= 1 << (row & 7)
            else:
                lim = 1 << (8 * kind - 1)
                ok = type(v) is int and -lim <= v < lim
                data += (v if ok else 0).to_bytes(kind, "little", signed=True)
            if ok:
                valid[row >> 3] |= 1 << (row & 7)
                count += 1
        validity = None if count == n else bytes(valid)
        out.append((validity, bytes(offsets), bytes(data)) if kind == 0
                   else (validity, bytes(data)))
    return out


def _over(buffers, batches=None) -> RecordColumns:
    """A RecordColumns over existing buffers (BUFFERS order)."""
    cols = RecordColumns.__new__(RecordColumns)
    cols.batches = batches
    cols.buffers = buffers
    for name, buf in zip(BUFFERS, buffers, strict=True):
        setattr(cols, name, buf)
    return cols


def partitions(ex, topic_names=None):
    """(direction, sets) for an exchange whose bodies carry records, else None: sets is the
    (topic, partition, records field) of every partition carrying records, from the decoded
    body (an iterator), or where the body was walked at the records level, on its bytes or
    decoded, what that walk took (Summary.record_sets, a list: the same, its topics named when
    walked; topic_names, where given, name a decoded body's unnamed topics instead)."""
    if ex.api_key == PRODUCE:
        msg = ex.request_msg
        direction, topics_attr, parts_attr, index_attr = (REQUEST, "topic_data", "partition_data",
                                                          "index")
    elif ex.api_key in (FETCH, SHARE_FETCH):
        msg = ex.response_msg
        direction, topics_attr, parts_attr, index_attr = (RESPONSE, "responses", "partitions",
                                                          "partition_index")
    else:
        return None
    if msg is None:
        return None
    walked = msg.summary.record_sets if msg.summary is not None else None
    if msg.body is None or (walked is not None and not topic_names):
        return (direction, walked) if walked else None
    return direction, _body_sets(msg.body, topics_attr, parts_attr, index_attr, topic_names)


def _body_sets(body, topics_attr, parts_attr, index_attr, topic_names):
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
                yield name, getattr(p, index_attr, None), records


def _set_bit(bitmap, i):
    if len(bitmap) <= i >> 3:
        bitmap.append(0)
    bitmap[i >> 3] |= 1 << (i & 7)


def _grow_bitmap(bitmap, rows):
    """Room for `rows` bits (new bits clear: null)."""
    need = (rows + 7) >> 3
    if len(bitmap) < need:
        bitmap.extend(bytes(need - len(bitmap)))


def _append_binary(offsets, data, valid, row, value):
    if value is not None:
        data += value
        _set_bit(valid, row)
    else:
        _grow_bitmap(valid, row + 1)
    offsets += _I32.pack(len(data))


def _append_record(cols, index, offset, ts, key, value, headers):
    """One record's row: `ts` in ms (None, negative or past int64 in ns: null)."""
    row = cols.rows
    cols.batch_index += _I32.pack(index)
    if _I64_MIN <= offset <= _I64_MAX:
        cols.offset += _I64.pack(offset)
        _set_bit(cols.offset_valid, row)
    else:   # past int64 (a hostile base offset): null
        cols.offset += _I64.pack(0)
        _grow_bitmap(cols.offset_valid, row + 1)
    if ts is not None and 0 <= ts <= _TS_MAX:
        cols.timestamp += _I64.pack(ts * NS_PER_MS)
        _set_bit(cols.timestamp_valid, row)
    else:
        cols.timestamp += _I64.pack(0)
        _grow_bitmap(cols.timestamp_valid, row + 1)
    _append_binary(cols.key_offsets, cols.key_data, cols.key_valid, row, key)
    _append_binary(cols.value_offsets, cols.value_data, cols.value_valid, row, value)
    for name, hvalue in headers:
        cols.hkey_data += name.encode("utf-8", "replace")
        cols.hkey_offsets += _I32.pack(len(cols.hkey_data))
        _append_binary(cols.hvalue_offsets, cols.hvalue_data, cols.hvalue_valid,
                       (len(cols.hvalue_offsets) >> 2) - 1, hvalue)
    cols.header_offsets += _I32.pack((len(cols.hkey_offsets) >> 2) - 1)


def _truncate(cols, sizes, rows, headers):
    """Back to `sizes` (the buffers' lengths when they held `rows` rows and `headers`
    headers), the bits past those cleared."""
    for buf, size in zip(cols.buffers, sizes):
        del buf[size:]
    for bitmap, n in ((cols.offset_valid, rows), (cols.timestamp_valid, rows),
                      (cols.key_valid, rows), (cols.value_valid, rows),
                      (cols.hvalue_valid, headers)):
        if n & 7 and len(bitmap) > n >> 3:
            bitmap[n >> 3] &= (1 << (n & 7)) - 1


def py_append_v2(buffers, body, count, base_offset, first_ts, ts_fixed, index) -> int:
    """Append the `count` records at the start of `body` (checked by record_batch.decode) to
    `buffers` (BUFFERS order) as rows of batch `index`; returns count. Parses as
    record_batch._parse_records: offset base_offset + delta, timestamp first_ts + delta (ms) or
    ts_fixed when not None (LogAppendTime); header keys decoded as UTF-8 with replacement. A
    record the check passed cannot fail here: if one does anyway, ValueError, and the buffers
    are as they were."""
    cols = _over(buffers)
    rows, headers = cols.rows, (len(cols.hvalue_offsets) >> 2) - 1
    sizes = [len(b) for b in buffers]
    try:
        _parse(cols, body, count, base_offset, first_ts, ts_fixed, index)
    except ValueError:
        _truncate(cols, sizes, rows, headers)
        raise
    return count


def _parse(cols, body, count, base_offset, first_ts, ts_fixed, index):
    pos = 0
    n = len(body)
    for _ in range(count):
        length, pos = _varint(body, pos, 5)
        end = pos + length
        if length < 6 or end > n:
            raise ValueError("record overruns its batch")
        pos += 1   # attributes
        ts_delta, pos = _varint(body, pos, 10)
        off_delta, pos = _varint(body, pos, 5)
        key, pos = _bytes(body, pos)
        value, pos = _bytes(body, pos)
        hcount, pos = _varint(body, pos, 5)
        if hcount < 0 or hcount > end - pos:
            raise ValueError("bad header count")
        headers = []
        for _ in range(hcount):
            hkey, pos = _bytes(body, pos)
            if hkey is None:
                raise ValueError("null header key")
            hvalue, pos = _bytes(body, pos)
            headers.append((bytes(hkey).decode("utf-8", "replace"), hvalue))
        if pos != end:
            raise ValueError("record length does not match its fields")
        ts = first_ts + ts_delta if ts_fixed is None else ts_fixed
        _append_record(cols, index, base_offset + off_delta, ts, key, value, headers)


def _varint(buf, pos, limit):
    """A zigzag varint of at most `limit` bytes at buf[pos]: (value, next position)."""
    value = shift = 0
    for i in range(limit):
        if pos + i >= len(buf):
            break
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos + i + 1
        shift += 7
    raise ValueError("bad varint")


def _bytes(buf, pos):
    """A varint length (-1: null) and that many bytes: (bytes or None, next position)."""
    length, pos = _varint(buf, pos, 5)
    if length < -1:
        raise ValueError("bad length")
    if length == -1:
        return None, pos
    if pos + length > len(buf):
        raise ValueError("field overruns its batch")
    return buf[pos:pos + length], pos + length


try:   # compiled (records/_columns.c); the same, without a Python call per record or batch
    from ._columns import append_sets, append_v2, batch_buffers, configure
    configure(RecordSet)
except ImportError:
    append_sets, append_v2 = py_append_sets, py_append_v2
    batch_buffers = py_batch_buffers


def iter_rows(cols):
    """The rows of `cols` as tuples in rows.RECORD_COLUMNS order (bytes for keys and values,
    [{"key": str, "value": bytes | None}] for headers): for the text view and the tests."""
    batch_index = [v for (v,) in _I32.iter_unpack(cols.batch_index)]
    offsets = [v for (v,) in _I64.iter_unpack(cols.offset)]
    stamps = [v for (v,) in _I64.iter_unpack(cols.timestamp)]
    key_off = [v for (v,) in _I32.iter_unpack(cols.key_offsets)]
    value_off = [v for (v,) in _I32.iter_unpack(cols.value_offsets)]
    header_off = [v for (v,) in _I32.iter_unpack(cols.header_offsets)]
    hkey_off = [v for (v,) in _I32.iter_unpack(cols.hkey_offsets)]
    hvalue_off = [v for (v,) in _I32.iter_unpack(cols.hvalue_offsets)]
    hkeys = bytes(cols.hkey_data)
    hvalues = bytes(cols.hvalue_data)
    keys = bytes(cols.key_data)
    values = bytes(cols.value_data)
    for row in range(cols.rows):
        (conn, corr, api_key, direction, topic, partition, magic, compression, ts_type,
         producer_id, producer_epoch, base_sequence, txn, control, crc_ok) = \
            cols.batches[batch_index[row]]
        headers = []
        for h in range(header_off[row], header_off[row + 1]):
            value = (hvalues[hvalue_off[h]:hvalue_off[h + 1]] if _bit(cols.hvalue_valid, h)
                     else None)
            headers.append({"key": hkeys[hkey_off[h]:hkey_off[h + 1]].decode("utf-8"),
                            "value": value})
        yield (conn, corr, api_key, direction, topic, partition, magic, compression,
               offsets[row] if _bit(cols.offset_valid, row) else None,
               stamps[row] if _bit(cols.timestamp_valid, row) else None, ts_type,
               keys[key_off[row]:key_off[row + 1]] if _bit(cols.key_valid, row) else None,
               values[value_off[row]:value_off[row + 1]] if _bit(cols.value_valid, row)
               else None,
               headers, producer_id, producer_epoch, base_sequence, txn, control, crc_ok)


def _bit(bitmap, i):
    return bitmap[i >> 3] >> (i & 7) & 1


CHUNK_ROWS = 65536
CHUNK_BYTES = 4 << 20


def record_chunks(exchanges, rows=CHUNK_ROWS, data_bytes=CHUNK_BYTES, topic_names=None):
    """The records of `exchanges` as RecordColumns of about `rows` rows or `data_bytes` bytes
    each (cut between batches): what a streaming writer holds at a time."""
    for cols, _ in sourced_chunks(exchanges, rows, data_bytes, topic_names, sourced=False):
        yield cols


def sourced_chunks(exchanges, rows=CHUNK_ROWS, data_bytes=CHUNK_BYTES, topic_names=None,
                   sourced=True):
    """record_chunks' RecordColumns, each with its batches' sources: per batch (the index of
    its exchange in `exchanges`, its records); None without `sourced`."""
    cols, sources = RecordColumns(), [] if sourced else None
    for i, ex in enumerate(exchanges):
        found = exchange_records(ex, topic_names)
        if found is None:
            continue
        stem, sets = found
        at = batch_at = 0
        while at < len(sets):
            at, batch_at, full = cols.fill(stem, sets, at, batch_at, rows, data_bytes, sources, i)
            if full:
                yield cols, sources
                cols, sources = RecordColumns(), [] if sourced else None
    if cols.rows:
        yield cols, sources

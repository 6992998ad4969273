"""MessageSet v0/v1 (magic 0 and 1): one top-level message, possibly a compressed wrapper.

Entry layout: offset int64, message_size int32 (bytes after it), crc uint32 (CRC32 of magic..end),
magic int8, attributes int8 (codec bits 0-2; bit 3 LogAppendTime in v1), timestamp int64 (v1
only), key bytes (int32 length, -1 null), value bytes (same). A compressed wrapper's value is an
inner message set. Its offset is the LAST inner offset; inner offsets are absolute in v0 and
relative in v1, and a v1 wrapper with LogAppendTime gives its timestamp to every inner message.
"""
from __future__ import annotations

import struct
import zlib

from ..model import ERROR, WARNING, Issue
from . import codecs
from .model import RECORD_COST, Batch, Record

ENTRY = struct.Struct(">qiIbb")       # offset, size, crc, magic, attributes
TIMESTAMP = struct.Struct(">q")
LENGTH = struct.Struct(">i")
MIN_LENGTH = (14, 22)                 # smallest message_size for magic 0 and 1


class _Bad(Exception):
    """An unparseable message: (code, detail)."""


def _message(buf, pos, end):
    """Parse the message at buf[pos:end] (its entry header included).

    Returns (offset, crc_ok, magic, attributes, timestamp, key, value).
    """
    offset, _, crc, magic, attributes = ENTRY.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise _Bad("records.bad_magic", f"inner message magic {magic}")
    if end - pos < 12 + MIN_LENGTH[magic]:
        raise _Bad("records.bad_length",
                   f"message size {end - pos - 12} too small for magic {magic}")
    crc_ok = zlib.crc32(buf[pos + 16:end]) == crc
    p = pos + 18
    timestamp = None
    if magic:
        (timestamp,) = TIMESTAMP.unpack_from(buf, p)
        p += 8
    key, p = _bytes(buf, p, end)
    value, p = _bytes(buf, p, end)
    if p != end:
        raise _Bad("records.bad_length", f"message size leaves {end - p} unused bytes")
    return offset, crc_ok, magic, attributes, timestamp, key, value


def _bytes(buf, pos, end):
    if pos + 4 > end:
        raise _Bad("records.bad_length", "message too short for its key/value lengths")
    (n,) = LENGTH.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise _Bad("records.bad_length", f"key/value length {n} does not fit the message")
    return bytes(buf[pos:pos + n]), pos + n


def decode(data, pos, size, want_records, budget, issues, build=True):
    """Decode the top-level v0/v1 message of `size` bytes at data[pos:] (a memoryview). Records
    are always built at once (`build` is for the v2 decoder's signature): old formats are rare."""
    batch = Batch(pos, size, data[pos + 16])
    try:
        offset, crc_ok, magic, attributes, timestamp, key, value = _message(data, pos, pos + size)
    except _Bad as e:
        issues.append(Issue(e.args[0], ERROR, e.args[1], stream_offset=pos))
        return batch
    codec = attributes & 0x07
    ts_type = (attributes >> 3) & 1 if magic else None
    batch.codec = codec
    batch.timestamp_type = ts_type
    batch.crc_ok = crc_ok
    batch.max_timestamp = timestamp
    if not crc_ok:
        issues.append(Issue("records.crc_mismatch", ERROR, "message CRC32 does not match",
                            stream_offset=pos))
    if not codec:
        batch.base_offset = offset
        batch.last_offset_delta = 0
        batch.first_timestamp = timestamp
        batch.record_count = 1
        if want_records:
            batch.records = [Record(offset, timestamp, key, value, [], attributes)]
        return batch
    if not want_records:
        return batch
    if value is None:
        issues.append(Issue("records.bad_compression", ERROR,
                            "compressed wrapper with a null value", stream_offset=pos))
        return batch
    inner = codecs.decompress_payload(codec, value, budget, issues, pos)
    if inner is None:
        return batch
    batch.uncompressed_size = len(inner)
    records, all_ok, problem = _inner_set(inner, magic, budget[0] // RECORD_COST)
    budget[0] -= len(records) * RECORD_COST
    if problem:
        severity = WARNING if problem[0] == "records.decode_limit" else ERROR
        issues.append(Issue(problem[0], severity, "inner message set: " + problem[1],
                            stream_offset=pos))
    if not all_ok:
        batch.crc_ok = False
        issues.append(Issue("records.crc_mismatch", ERROR, "inner message CRC32 does not match",
                            stream_offset=pos))
    if records:
        base = offset - records[-1].offset
        if magic and base >= 0:  # relative inner offsets; a producer's wrapper offset 0 keeps them
            for r in records:
                r.offset += base
        if ts_type == 1:
            for r in records:
                r.timestamp = timestamp
        batch.base_offset = records[0].offset
        batch.last_offset_delta = records[-1].offset - records[0].offset
        batch.first_timestamp = records[0].timestamp
    batch.record_count = len(records)
    batch.records = records
    return batch


def _inner_set(buf, wrapper_magic, room):
    """Messages of a decompressed inner set, at most `room` of them: (records, all CRCs ok,
    problem or None)."""
    records = []
    all_ok = True
    n = len(buf)
    pos = 0
    try:
        while pos < n:
            if len(records) >= room:
                raise _Bad("records.decode_limit",
                           f"decode budget spent after {len(records)} messages")
            if n - pos < 12:
                raise _Bad("records.bad_length", "partial message at the end")
            (size,) = LENGTH.unpack_from(buf, pos + 8)
            end = pos + 12 + size
            if size < MIN_LENGTH[0] or end > n:
                raise _Bad("records.bad_length",
                           f"message size {size} with {n - pos - 12} bytes left")
            offset, crc_ok, magic, attributes, timestamp, key, value = _message(buf, pos, end)
            if attributes & 0x07:
                raise _Bad("records.nested_compression",
                           "compressed message inside a compressed message")
            if magic != wrapper_magic:
                raise _Bad("records.bad_magic",
                           f"inner magic {magic} in a magic {wrapper_magic} wrapper")
            all_ok = all_ok and crc_ok
            records.append(Record(offset, timestamp, key, value, [], attributes))
            pos = end
    except _Bad as e:
        return records, all_ok, e.args
    except struct.error:
        return records, all_ok, ("records.bad_length", "message shorter than its header")
    return records, all_ok, None

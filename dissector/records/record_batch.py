"""RecordBatch v2 (magic 2): the 61-byte header, CRC32C, and the varint-encoded records.

Layout (offsets from the batch start): baseOffset int64 @0, batchLength int32 @8 (counts the
bytes after it), partitionLeaderEpoch int32 @12, magic int8 @16, crc uint32 @17 (CRC32C of
attributes..end), attributes int16 @21, lastOffsetDelta int32 @23, firstTimestamp int64 @27,
maxTimestamp int64 @35, producerId int64 @43, producerEpoch int16 @51, baseSequence int32 @53,
recordCount int32 @57, records @61. Each record: length varint, attributes int8, timestampDelta
varlong, offsetDelta varint, key (varint length, -1 = null), value (same), header count varint,
headers (key string, value bytes or null). All varints are zigzag-encoded.
"""
from __future__ import annotations

import gc
import struct

from ..model import ERROR, WARNING, Issue
from ..text_safety import decode_text
from . import codecs
from .checksums import ACCELERATED, crc32c
from .model import RECORD_COST, Batch, Record

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
MIN_LENGTH = HEADER_SIZE - 12  # smallest sane batchLength
_CONTROL_KEY = struct.Struct(">hh")
_new = object.__new__


def _zigzag_table(n):
    """Zigzag decoding of 0..n-1 (n even): 0, -1, 1, -2, 2, ... (slice stores: no Python loop,
    the two-byte table costs ~0.1 ms at import instead of ~5 ms)."""
    t = [0] * n
    t[0::2] = range(n // 2)
    t[1::2] = range(-1, -n // 2 - 1, -1)
    return tuple(t)


def _takes2_table(n):
    """2 + the zigzag value of each index of _zigzag_table(n), _PAST where it is negative (its odd
    indices): slice stores, as there."""
    t = [_PAST] * n
    t[0::2] = range(2, n // 2 + 2)
    return tuple(t)


# Zigzag varints of one byte b (index b) and of two bytes b, c (index b + (c << 7): b >= 0x80,
# so the payload bits (b & 0x7F) | (c << 7) are the index minus 128).
_ZIGZAG = _zigzag_table(128)
_ZIGZAG2 = (0,) * 128 + _zigzag_table(1 << 14)

# Bytes taken by a key or value (length varint + data) for its one-byte varint b, and for two
# bytes b, c (index b + (c << 7), as _ZIGZAG2). A length below -1 takes _PAST: the position
# lands past every buffer, so the fast check gives up and _scan_records reports the record.
_PAST = 1 << 62
_TAKES = tuple(1 + v if v >= 0 else 1 if v == -1 else _PAST for v in _ZIGZAG)
_TAKES2 = (_PAST,) * 128 + _takes2_table(1 << 14)
_HEAD = struct.Struct("7B").unpack_from  # a record's first bytes (a record takes 7 or more)


class _BadRecord(Exception):
    """A record that cannot be parsed: (issue code, detail)."""


def _varint(buf, pos, limit=10):
    """Any zigzag varint starting at buf[pos] (the loop's slow path): (value, next position)."""
    value = shift = 0
    stop = pos + limit
    while pos < stop:
        b = buf[pos]  # IndexError past the end is handled by the caller
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    raise _BadRecord("records.bad_varint", f"varint longer than {limit} bytes at {pos - limit}")


def decode(data, pos, size, want_records, budget, issues, build=False):
    """Decode the v2 batch of `size` bytes at data[pos:] (a memoryview).

    budget: list holding the bytes of decompressed output (and RECORD_COST per decoded record)
    still allowed for this record set. With want_records, every record is checked now; the
    Record objects are built in the same pass with `build`, else when Batch.records is first
    read (a second pass: cheaper only when the records are not read, as for the exchanges table).
    Returns the Batch; problems are appended to `issues` (stream_offset relative to `data`).
    """
    (base_offset, _, leader_epoch, magic, crc, attributes, last_delta, first_ts, max_ts,
     producer_id, producer_epoch, base_sequence, count) = HEADER.unpack_from(data, pos)
    batch = _new(Batch)  # every slot stored once here (Batch.__init__ would store most twice)
    batch.offset_in_set = pos
    batch.size = size
    batch.magic = magic
    batch.base_offset = base_offset
    batch.partition_leader_epoch = leader_epoch
    batch.codec = codec = attributes & 0x07
    batch.timestamp_type = ts_type = (attributes >> 3) & 1
    batch.is_transactional = attributes & 0x10 != 0
    batch.is_control = is_control = attributes & 0x20 != 0
    batch.last_offset_delta = last_delta
    batch.first_timestamp = first_ts
    batch.max_timestamp = max_ts
    batch.producer_id = producer_id
    batch.producer_epoch = producer_epoch
    batch.base_sequence = base_sequence
    batch.record_count = count
    batch.uncompressed_size = batch.crc_ok = batch.control = batch._deferred = None
    end = pos + size

    if want_records or ACCELERATED:  # headers-only mode skips the slow pure-Python CRC
        crc_ok = batch.crc_ok = crc32c(data[pos + 21:end]) == crc
        if not crc_ok:
            issues.append(Issue("records.crc_mismatch", ERROR,
                                f"RecordBatch CRC32C {crc:#010x} does not match its contents",
                                stream_offset=pos))
    if count < 0:
        issues.append(Issue("records.count_mismatch", ERROR, f"negative record count {count}",
                            stream_offset=pos + 57))
    if not want_records:
        batch.records = None
        return batch

    body = data[pos + HEADER_SIZE:end]
    if codec:
        body = codecs.decompress_payload(codec, body, budget, issues, pos + HEADER_SIZE)
        if body is None:
            batch.records = None
            return batch
        batch.uncompressed_size = len(body)
        rec_pos = None  # issue offsets inside decompressed data point at the batch payload
    else:
        body = bytes(body)
        rec_pos = pos + HEADER_SIZE

    ts_base = max_ts if ts_type else None  # LogAppendTime: every record carries the batch time
    room = budget[0] // RECORD_COST  # records the budget still pays for
    want = count if count <= room else room
    if build or is_control:
        records, bad_at, problem = _parse_records(body, want, base_offset, first_ts, ts_base)
        found = len(records)
    elif want > 0 and (bad_at := check_records(body, want)) is not None:
        found, problem = want, None
    else:  # a record the fast check does not take: the full scan finds which and why
        found, bad_at, problem = _scan_records(body, want)
    budget[0] -= found * RECORD_COST
    if problem is not None:
        code, detail = problem
        at = pos + HEADER_SIZE if rec_pos is None else rec_pos + bad_at
        issues.append(Issue(code, ERROR, detail, stream_offset=at))
    elif count < 0:
        pass  # reported above
    elif want < count and bad_at < len(body):
        issues.append(Issue("records.decode_limit", WARNING,
                            f"decode budget spent after {found} of {count} records",
                            stream_offset=pos + HEADER_SIZE))
    elif found != count:
        issues.append(Issue("records.count_mismatch", ERROR,
                            f"batch declares {count} records but holds {found}",
                            stream_offset=pos + 57))
    elif bad_at != len(body):
        issues.append(Issue("records.count_mismatch", ERROR,
                            f"{len(body) - bad_at} bytes left after the declared {count} records",
                            stream_offset=pos + 57))
    if not (build or is_control):  # Record objects built when first asked for (Batch.records)
        batch._deferred = (found, _build_records, (body, found, base_offset, first_ts, ts_base))
        return batch  # `records` left unset: Batch.__getattr__ builds them on first read
    batch.records = records
    if is_control and records:
        key = records[0].key
        if key is not None and len(key) >= 4:
            version, ctype = _CONTROL_KEY.unpack_from(key)
            batch.control = (ctype, version)
        else:
            issues.append(Issue("records.bad_control", ERROR,
                                "control record key shorter than 4 bytes",
                                stream_offset=pos + HEADER_SIZE))
    return batch


def _past_deltas(buf, pos):
    """The position after the timestamp and offset deltas at buf[pos:] (varints of any width)."""
    return _varint(buf, _varint(buf, pos)[1], 5)[1]


def _check_records(buf, count):
    """The end of `count` (> 0) well-formed records at the start of `buf` (bytes), or None.

    A fast path for _scan_records: it accepts only what _scan_records accepts, with the same
    end, but gives up (None) on anything wrong or unusual instead of telling what it is: bad
    lengths push the position past the buffer (an IndexError or a final mismatch), a record
    shorter than six bytes overruns itself, header varints over one byte (two for values) give
    up. One unpack reads the first bytes of a record: its length and deltas in the common shapes
    (one- or two-byte length and deltas) are taken from there.
    """
    zz = _ZIGZAG
    zz2 = _ZIGZAG2
    takes = _TAKES
    takes2 = _TAKES2
    head = _HEAD
    varint = _varint
    pos = 0
    try:
        for _ in range(count):
            # a record starts with its length, attributes, timestamp and offset deltas, key length
            l0, l1, l2, l3, l4, l5, l6 = head(buf, pos)  # struct.error: under 7 bytes left
            if l0 >= 0x80 and l1 < 0x80:  # two-byte length (64 B to 8 kB): deltas from l3
                end = pos + 2 + zz2[l0 + (l1 << 7)]
                if (l3 | l4) < 0x80:  # one-byte deltas
                    pos += 5
                elif (l3 | l5) < 0x80:  # one-byte timestamp, two-byte offset delta
                    pos += 6
                elif (l4 | l5) < 0x80:  # two-byte timestamp, one-byte offset delta
                    pos += 6
                elif (l4 | l6) < 0x80:  # two-byte deltas
                    pos += 7
                else:
                    pos = _past_deltas(buf, pos + 3)
            elif l0 < 0x80:  # one-byte length: deltas from l2
                end = pos + 1 + zz[l0]
                if (l2 | l3) < 0x80:
                    pos += 4
                elif (l2 | l4) < 0x80:
                    pos += 5
                elif (l3 | l4) < 0x80:
                    pos += 5
                elif (l3 | l5) < 0x80:
                    pos += 6
                else:
                    pos = _past_deltas(buf, pos + 2)
            else:
                length, pos = varint(buf, pos, 5)
                end = pos + length
                pos = _past_deltas(buf, pos + 1)
            for _field in (0, 1):  # the key, then the value: a length (-1: null), its bytes
                b = buf[pos]
                if b < 0x80:
                    pos += takes[b]
                elif (c := buf[pos + 1]) < 0x80:
                    pos += takes2[b + (c << 7)]
                else:
                    b, pos = varint(buf, pos, 5)
                    if b > 0:
                        pos += b
                    elif b < -1:
                        return None
            b = buf[pos]  # the header count, zigzag
            if not b:
                pos += 1
            elif b == 2:  # one header: inlined, the loop's set-up costs as much as its body
                h = buf[pos + 1]  # key length: >= 0 and one byte, else give up
                if h & 0x81:
                    return None
                pos += (h >> 1) + 2
                h = buf[pos]
                pos += takes[h] if h < 0x80 else takes2[h + (buf[pos + 1] << 7)]
            elif b & 0x81:
                return None
            else:
                pos += 1
                for _ in range(b >> 1):
                    h = buf[pos]
                    if h & 0x81:
                        return None
                    pos += (h >> 1) + 1
                    h = buf[pos]
                    pos += takes[h] if h < 0x80 else takes2[h + (buf[pos + 1] << 7)]
            if pos != end:
                return None
    except (IndexError, struct.error, _BadRecord):
        return None
    return pos if pos <= len(buf) else None  # the last record's fields may jump past the end


try:  # the check compiled (records/_check.c): exact, so the scan runs only on damaged records
    from ._check import check_records
except ImportError:   # no compiler where it was installed
    check_records = _check_records


def _scan_records(buf, count):
    """Check the framing of up to `count` records in `buf` (bytes) without building anything:
    every length, count and varint is read and checked exactly as _parse_records does.

    Returns (records found, position reached, None) or (good records, position of the bad
    record, (code, detail)).
    """
    zz = _ZIGZAG
    zz2 = _ZIGZAG2
    varint = _varint
    n = len(buf)
    pos = start = i = 0
    if count <= 0:
        return 0, 0, None
    try:
        for i in range(count):
            start = pos
            b = buf[pos]  # IndexError at start == n: fewer records than declared
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                length = zz2[b + (c << 7)]
                pos += 2
            else:
                length, pos = varint(buf, pos, 5)
            end = pos + length
            if length < 6 or end > n:
                raise _BadRecord("records.bad_length",
                                 f"record length {length} with {n - pos} bytes left")
            # the timestamp and offset deltas: only their extent matters here
            if buf[pos + 1] < 0x80:
                pos += 2
            elif buf[pos + 2] < 0x80:
                pos += 3
            else:
                pos = varint(buf, pos + 1)[1]
            if buf[pos] < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                pos += 2
            else:
                pos = varint(buf, pos, 5)[1]
            b = buf[pos]
            if b < 0x80:
                klen = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                klen = zz2[b + (c << 7)]
                pos += 2
            else:
                klen, pos = varint(buf, pos, 5)
            if klen >= 0:
                pos += klen
            elif klen != -1:
                raise _BadRecord("records.bad_length", f"key length {klen}")
            b = buf[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                vlen = zz2[b + (c << 7)]
                pos += 2
            else:
                vlen, pos = varint(buf, pos, 5)
            if vlen >= 0:
                pos += vlen
            elif vlen != -1:
                raise _BadRecord("records.bad_length", f"value length {vlen}")
            b = buf[pos]
            pos += 1
            if b:
                if b >= 0x80:
                    b, pos = varint(buf, pos - 1, 5)
                else:
                    b = zz[b]
                if b < 0 or b > end - pos:
                    raise _BadRecord("records.bad_length", f"header count {b}")
                while b:
                    b -= 1
                    h = buf[pos]
                    if h < 0x80:
                        hlen = zz[h]
                        pos += 1
                    else:
                        hlen, pos = varint(buf, pos, 5)
                    if hlen < 0:
                        raise _BadRecord("records.bad_length", f"header key length {hlen}")
                    pos += hlen
                    h = buf[pos]
                    if h < 0x80:
                        hlen = zz[h]
                        pos += 1
                    else:
                        hlen, pos = varint(buf, pos, 5)
                    if hlen >= 0:
                        pos += hlen
                    elif hlen != -1:
                        raise _BadRecord("records.bad_length", f"header value length {hlen}")
            if pos != end:  # also catches key, value and header lengths that overran the record
                raise _BadRecord("records.bad_length",
                                 f"record length {length} does not match its fields")
    except _BadRecord as e:
        return i, start, e.args
    except IndexError:
        if start == n:
            return i, n, None
        return i, start, ("records.bad_length", "record runs past the end of the batch")
    return count, pos, None


def _build_records(*args):
    """_parse_records over records _scan_records accepted, run when Batch.records is first read,
    with the cyclic GC paused: it makes many small acyclic objects, and GC passes over them
    would be pure cost (as in decode_record_set)."""
    if not gc.isenabled():
        return _parse_records(*args)[0]
    gc.disable()
    try:
        return _parse_records(*args)[0]
    finally:
        gc.enable()


def _parse_records(buf, count, base_offset, first_ts, ts_fixed):
    """Parse up to `count` records from `buf` (bytes), with the same checks as _scan_records.

    Returns (records, position reached, None) or (records so far, position of the bad record,
    (code, detail)). Zigzag varints of one and two bytes (nearly all of them) are decoded inline;
    longer ones go through _varint.
    """
    out = []
    append = out.append
    zz = _ZIGZAG
    zz2 = _ZIGZAG2
    names = {}
    varint = _varint
    record = Record
    new = object.__new__
    n = len(buf)
    pos = 0
    start = 0
    try:
        for _ in range(count):
            start = pos
            b = buf[pos]  # IndexError at start == n: fewer records than declared
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                length = zz2[b + (c << 7)]
                pos += 2
            else:
                length, pos = varint(buf, pos, 5)
            end = pos + length
            if length < 6 or end > n:
                raise _BadRecord("records.bad_length",
                                 f"record length {length} with {n - pos} bytes left")
            attributes = buf[pos]
            b = buf[pos + 1]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            elif (c := buf[pos + 2]) < 0x80:
                ts_delta = zz2[b + (c << 7)]
                pos += 3
            else:
                ts_delta, pos = varint(buf, pos + 1)
            b = buf[pos]
            if b < 0x80:
                off_delta = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                off_delta = zz2[b + (c << 7)]
                pos += 2
            else:
                off_delta, pos = varint(buf, pos, 5)
            b = buf[pos]
            if b < 0x80:
                klen = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                klen = zz2[b + (c << 7)]
                pos += 2
            else:
                klen, pos = varint(buf, pos, 5)
            if klen < 0:
                if klen != -1:
                    raise _BadRecord("records.bad_length", f"key length {klen}")
                key = None
            else:  # slices never read past the buffer; an overrun shows as pos != end below
                key = buf[pos:pos + klen]
                pos += klen
            b = buf[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            elif (c := buf[pos + 1]) < 0x80:
                vlen = zz2[b + (c << 7)]
                pos += 2
            else:
                vlen, pos = varint(buf, pos, 5)
            if vlen < 0:
                if vlen != -1:
                    raise _BadRecord("records.bad_length", f"value length {vlen}")
                value = None
            else:
                value = buf[pos:pos + vlen]
                pos += vlen
            b = buf[pos]
            pos += 1
            headers = []
            if b:
                if b >= 0x80:
                    b, pos = varint(buf, pos - 1, 5)
                else:
                    b = zz[b]
                if b < 0 or b > end - pos:
                    raise _BadRecord("records.bad_length", f"header count {b}")
                for _ in range(b):
                    b = buf[pos]
                    if b < 0x80:
                        hklen = zz[b]
                        pos += 1
                    else:
                        hklen, pos = varint(buf, pos, 5)
                    if hklen < 0:
                        raise _BadRecord("records.bad_length", f"header key length {hklen}")
                    hkey = buf[pos:pos + hklen]
                    pos += hklen
                    name = names.get(hkey)  # header keys repeat: decode each once per batch
                    if name is None:
                        name = names[hkey] = decode_text(hkey)
                    b = buf[pos]
                    if b < 0x80:
                        hvlen = zz[b]
                        pos += 1
                    else:
                        hvlen, pos = varint(buf, pos, 5)
                    if hvlen < 0:
                        if hvlen != -1:
                            raise _BadRecord("records.bad_length", f"header value length {hvlen}")
                        headers.append((name, None))
                    else:
                        headers.append((name, buf[pos:pos + hvlen]))
                        pos += hvlen
            if pos != end:  # also catches key, value and header lengths that overran the record
                raise _BadRecord("records.bad_length",
                                 f"record length {length} does not match its fields")
            r = new(record)  # no __init__ call: slot stores are cheaper than the call
            r.offset = base_offset + off_delta
            r.timestamp = first_ts + ts_delta if ts_fixed is None else ts_fixed
            r.key = key
            r.value = value
            r.headers = headers
            r.attributes = attributes
            append(r)
    except _BadRecord as e:
        return out, start, e.args
    except IndexError:
        if start == n:
            return out, n, None
        return out, start, ("records.bad_length", "record runs past the end of the batch")
    return out, pos, None

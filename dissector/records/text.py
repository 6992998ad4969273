"""The records table as CSV or JSON Lines, written from the column buffers a chunk at a time.

The content is that of the row-at-a-time writers these replace (kept as golden copies under
captures/expected): CSV as csv.writer writes it, None as an empty field, bytes as base64,
timestamps as UTC ISO 8601 with nanoseconds, headers as json.dumps gives the list of
{"key", "value"} dicts (value base64 or null); JSON Lines as json.dumps with compact separators
gives each row's dict. The batch fields are rendered once a batch, by csv.writer and json.dumps
themselves (the text before the record's offset, between its timestamp and key, after its
headers); the record fields are written by records/_text.c (compiled) or by the twins here
(`py_csv_text`, `py_jsonl_text`: the specification, compared with it by the tests).
"""
from __future__ import annotations

import base64
import csv
import io
import json
import struct

from ..output import iso_ns, plain_join
from .columns import BATCH_COLUMNS

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_NAMES = tuple(name for name, _ in BATCH_COLUMNS)
# the batch fields before it are written before a record's offset, those after it after its
# headers
_TS_TYPE = _NAMES.index("timestamp_type")


def csv_chunk(cols, ends=None) -> bytes:
    """The rows of `cols` (RecordColumns) as CSV lines (no header line); `ends` (a list) gets
    where each batch's lines end (the text's length after them)."""
    return csv_text(cols.buffers, *_batch_texts(cols.batches, True),
                    *(() if ends is None else (ends,)))


def jsonl_chunk(cols, ends=None) -> bytes:
    """The rows of `cols` as JSON lines; `ends` as csv_chunk's."""
    return jsonl_text(cols.buffers, *_batch_texts(cols.batches, False),
                      *(() if ends is None else (ends,)))


def _batch_texts(batches, csv_format):
    texts = batch_texts(batches, csv_format, _NAMES)
    return texts if texts is not None else py_batch_texts(batches, csv_format, _NAMES)


def py_batch_texts(batches, csv_format, names=_NAMES):
    """(pre, mid, post): per batch (a tuple of BATCH_COLUMNS values named `names`), the text
    written before a record's offset, between its timestamp and key, and after its headers,
    as bytes: CSV as csv.writer writes the fields, JSON as json.dumps writes the dict.
    records/_text.c's batch_texts is the same compiled (None where it leaves a batch's values
    to this)."""
    pre, mid, post = [], [], []
    t = _TS_TYPE
    head_names, tail_names = names[:t], names[t + 1:]
    for b in batches:
        if csv_format:
            pre.append((_csv_fields(b[:t]) + ",").encode())
            mid.append(("," + ("" if b[t] is None else str(b[t])) + ",").encode())
            post.append(("," + _csv_fields(b[t + 1:]) + "\n").encode())
        else:
            head = json.dumps(dict(zip(head_names, b[:t])), separators=(",", ":"))
            tail = json.dumps(dict(zip(tail_names, b[t + 1:])), separators=(",", ":"))
            pre.append((head[:-1] + ',"offset":').encode())
            mid.append((',"timestamp_type":' + json.dumps(b[t]) + ',"key":').encode())
            post.append(("," + tail[1:] + "\n").encode())
    return pre, mid, post


def _csv_fields(values) -> str:
    """The values as csv.writer writes them in a row (its dialect's line terminator decides
    which fields are quoted: the row writers' "\n", taken off here). Where none needs quoting,
    joined here: a writer made per call was most of the time of the records table's batch
    fields, twice a batch."""
    text = plain_join(["" if v is None else str(v) for v in values])
    if text is not None:
        return text
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(["" if v is None else v for v in values])
    return out.getvalue()[:-1]


def _rows(buffers):
    """Per row: (batch index, offset, timestamp ns, key, value, [(header key, value)]), None
    for nulls (the buffers in columns.BUFFERS order)."""
    (batch_index, offset, offset_valid, timestamp, timestamp_valid, key_offsets, key_data,
     key_valid, value_offsets, value_data, value_valid, header_offsets, hkey_offsets, hkey_data,
     hvalue_offsets, hvalue_data, hvalue_valid) = buffers

    def bit(bitmap, i):
        return bitmap[i >> 3] >> (i & 7) & 1

    def i32(buf, i):
        return _I32.unpack_from(buf, 4 * i)[0]

    def binary(offsets, data, valid, i):
        return bytes(data[i32(offsets, i):i32(offsets, i + 1)]) if bit(valid, i) else None

    for row in range(len(offset) >> 3):
        headers = [(bytes(hkey_data[i32(hkey_offsets, h):i32(hkey_offsets, h + 1)])
                    .decode("utf-8", "replace"),
                    binary(hvalue_offsets, hvalue_data, hvalue_valid, h))
                   for h in range(i32(header_offsets, row), i32(header_offsets, row + 1))]
        yield (i32(batch_index, row),
               _I64.unpack_from(offset, 8 * row)[0] if bit(offset_valid, row) else None,
               _I64.unpack_from(timestamp, 8 * row)[0] if bit(timestamp_valid, row) else None,
               binary(key_offsets, key_data, key_valid, row),
               binary(value_offsets, value_data, value_valid, row), headers)


def _b64(value):
    return None if value is None else base64.b64encode(value).decode("ascii")


def _ended(rows, out, ends):
    """`rows` (_rows'), appending len(out) to `ends` (unless None) after each run of one
    batch's rows."""
    last = None
    for row in rows:
        if ends is not None and last is not None and row[0] != last:
            ends.append(len(out))
        last = row[0]
        yield row
    if ends is not None and last is not None:
        ends.append(len(out))


def py_csv_text(buffers, pre, mid, post, ends=None) -> bytes:
    """CSV lines of the rows in `buffers`: pre[b], offset, timestamp, mid[b], key, value,
    headers, post[b] for a row of batch b (pre, mid and post: bytes holding the commas);
    `ends` (a list) gets the length of the text after each run of one batch's rows."""
    out = bytearray()
    for b, offset, ts, key, value, headers in _ended(_rows(buffers), out, ends):
        hs = json.dumps([{"key": k, "value": _b64(v)} for k, v in headers])
        hs = '"' + hs.replace('"', '""') + '"' if '"' in hs else hs
        out += pre[b]
        out += (f"{'' if offset is None else offset},{iso_ns(ts) or ''}").encode()
        out += mid[b]
        out += f"{_b64(key) or ''},{_b64(value) or ''},{hs}".encode()
        out += post[b]
    return bytes(out)


def py_jsonl_text(buffers, pre, mid, post, ends=None) -> bytes:
    """JSON lines of the rows in `buffers`: pre[b] (up to '"offset":'), offset, timestamp,
    mid[b] (from ',"timestamp_type":' to '"key":'), key, value, headers, post[b]; `ends` as
    py_csv_text's."""
    out = bytearray()
    dumps = json.dumps
    for b, offset, ts, key, value, headers in _ended(_rows(buffers), out, ends):
        hs = dumps([{"key": k, "value": _b64(v)} for k, v in headers], separators=(",", ":"))
        out += pre[b]
        out += f"{dumps(offset)},\"timestamp\":{dumps(iso_ns(ts))}".encode()
        out += mid[b]
        out += f"{dumps(_b64(key))},\"value\":{dumps(_b64(value))},\"headers\":{hs}".encode()
        out += post[b]
    return bytes(out)


try:   # compiled (records/_text.c): the same without Python objects per record or batch
    from ._text import batch_texts, csv_text, jsonl_text
except ImportError:
    batch_texts, csv_text, jsonl_text = py_batch_texts, py_csv_text, py_jsonl_text

"""A `records` field: concatenated batches of any magic, walked by their declared lengths.

Every entry starts with offset int64 and a length int32 counting the bytes after it, and has its
magic byte at offset 16 in all three formats, so the walk is format-independent: the magic picks
the decoder, and a corrupt batch is stepped over by its length when that length is sane.
"""
from __future__ import annotations

import gc
import struct

from ..model import ERROR, Issue
from . import legacy, record_batch
from .model import RECORD_COST, Batch, RecordSet

try:  # the headers-only walk of a v2 record set compiled (records/_headers.c); else _decode
    from ._headers import configure as _configure_walk_set, set_sums, v2_headers, walk_set
except ImportError:
    v2_headers = walk_set = set_sums = None

_LENGTH = struct.Struct(">i")
_MIN_LENGTH = {0: legacy.MIN_LENGTH[0], 1: legacy.MIN_LENGTH[1], 2: record_batch.MIN_LENGTH}
_DECODERS = {0: legacy.decode, 1: legacy.decode, 2: record_batch.decode}


def decode_record_set(data, *, records=True, build=False, max_uncompressed=64 << 20,
                      budget=None):
    """Decode a `records` field (bytes or memoryview) into a RecordSet.

    records=True checks every record now (counts and Issues are final) and builds the v2
    Record objects when a batch's `records` is first read; build=True builds them now, in the
    same pass (cheaper when every record will be read: the records table). records=False
    decodes batch headers only: no decompression and no per-record parsing (the v2 CRC is still
    checked when the fast CRC32C library is present). `max_uncompressed` caps the
    total decompressed output of the whole set plus model.RECORD_COST per decoded record (past
    it: `records.decompression_limit` / `records.decode_limit` Issues). `budget`, a one-item list,
    replaces it to share one cap between several sets (those of one message). Never raises on
    bad input: faults are Issues whose stream_offset is relative to `data`; a partial last batch
    sets `truncated`.
    """
    if not data:  # null or empty (most partitions of a Fetch response): nothing to walk
        return RecordSet([], [], False, 0, 0)
    if not records and v2_headers is not None:
        # the CRC as record_batch.decode checks it (not at all without the fast library)
        crc = record_batch.crc32c if record_batch.ACCELERATED else None
        rs = v2_headers(data, Batch, RecordSet, crc)
        if rs is not None:   # RecordBatch v2 only, nothing to report
            return rs
    if budget is None:
        budget = [max_uncompressed]
    if not records:  # batch headers only: a few objects a batch, too few for the GC to matter
        return _decode(data, False, build, budget)
    # Decoding makes many small acyclic objects (records, header lists) that the caller keeps:
    # cyclic GC passes over them during the decode are pure cost (about 40% of the time).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode(data, records, build, budget)
    finally:
        if gc_was_enabled:
            gc.enable()


def py_walk_set(data, records, budget):
    """The summary walk's call for each `records` field (dissector.summary_walk): the record set
    of `data`, every record checked when `records`, `budget` shared by the message's sets.
    records/_headers.c's walk_set is the same compiled, without a Python call per set."""
    return decode_record_set(data, records=records, budget=budget)


def py_set_sums(data, records, budget):
    """The byte walk's call for each `records` field (protocol/_reader.c summarize): walk_set's
    record set; or where that holds no issue and `records` is false (batch headers only), only
    what the walk takes of it: (records, bytes, uncompressed bytes or None once a batch is
    compressed). records/_headers.c's set_sums is the same compiled, with no object per batch."""
    rs = walk_set(data, records, budget)
    if records or rs.issues:
        return rs
    unc = 0
    for b in rs.batches:
        size = b.size if b.codec == 0 else b.uncompressed_size
        if size is None:
            unc = None
            break
        unc += size
    return rs.record_count, rs.size, unc


def checks_crc() -> bool:
    """Whether the headers-only walk checks each v2 batch's CRC, as record_batch.decode does:
    not at all without the fast library."""
    return record_batch.ACCELERATED


if walk_set is None:
    walk_set, set_sums = py_walk_set, py_set_sums
else:
    _configure_walk_set(Batch, RecordSet, record_batch.crc32c if checks_crc() else None,
                        decode_record_set, record_batch._build_records, RECORD_COST)


def _decode(data, records, build, budget):
    # the generated decoders hand over byte views of the message: those need no new view
    mv = (data if type(data) is memoryview and data.format == "B" and data.c_contiguous
          else memoryview(data).cast("B"))
    n = len(mv)
    batches = []
    issues = []
    truncated = False
    pos = 0
    while pos < n:
        if n - pos < 17:
            truncated = True
            break
        (length,) = _LENGTH.unpack_from(mv, pos + 8)
        magic = mv[pos + 16]
        minimum = _MIN_LENGTH.get(magic, 5)
        if length < minimum:
            issues.append(Issue("records.bad_length", ERROR,
                                f"batch length {length} below the minimum {minimum} "
                                f"for magic {magic}",
                                stream_offset=pos + 8))
            break
        size = length + 12
        if pos + size > n:
            truncated = True
            break
        decoder = _DECODERS.get(magic)
        if decoder is None:
            issues.append(Issue("records.bad_magic", ERROR, f"unknown magic {magic}",
                                stream_offset=pos + 16))
        else:
            try:
                batches.append(decoder(mv, pos, size, records, budget, issues, build))
            except Exception as e:  # a bug, not bad input: report it and keep going
                issues.append(Issue("records.decode_error", ERROR, f"{type(e).__name__}: {e}",
                                    stream_offset=pos))
        pos += size
    count = 0
    for b in batches:
        decoded = b.decoded_count()
        if decoded is not None:
            count += decoded
        elif b.record_count is not None and b.record_count > 0:
            count += b.record_count
    return RecordSet(batches, issues, truncated, n, count)

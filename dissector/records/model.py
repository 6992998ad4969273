"""Decoded record sets, batches and records (plain __slots__ objects: there are millions)."""
from __future__ import annotations


# What one decoded Record costs in memory (the object, its header list and offset/timestamp ints;
# measured ~160 bytes for a minimal one), charged to the decode budget along with the
# decompressed bytes: a 7-byte record on the wire must not be free, or a few kB of compressed
# minimal records would decode into gigabytes of objects.
RECORD_COST = 160


class Record:
    """One record. offset/timestamp are absolute (timestamp None in magic 0); key/value bytes
    or None; headers a list of (str, bytes | None); attributes the record's own attribute byte."""
    __slots__ = ("offset", "timestamp", "key", "value", "headers", "attributes")

    def __init__(self, offset, timestamp, key, value, headers, attributes):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes

    def __repr__(self):
        return (f"Record(offset={self.offset}, ts={self.timestamp}, key={self.key!r:.40}, "
                f"value={self.value!r:.40}, headers={len(self.headers)})")


class Batch:
    """One RecordBatch v2 or one top-level MessageSet v0/v1 entry (a plain message or a
    compressed wrapper holding an inner message set).

    offset_in_set: byte offset of the batch in the decoded `data`; size: bytes on the wire.
    Fields a format lacks are None (producer fields in v0/v1, timestamps in v0). record_count is
    None for a v0/v1 compressed wrapper decoded headers-only (the count is inside the payload).
    crc_ok: True/False, or None when not checked (headers-only mode may skip it).
    records: list of Record, or None when not decoded (headers-only, codec unavailable, capped).
    A v2 batch decoded without build=True has every record checked but its Record objects built
    only when `records` is first read: the decoder leaves `records` unset and `_deferred` holds
    (count, parse, args), records = parse(*args). Most readers want counts and sizes only.
    control: (type, version) of the first control record in a control batch (0 abort, 1 commit).
    """
    __slots__ = ("offset_in_set", "base_offset", "last_offset_delta", "magic", "codec",
                 "timestamp_type", "is_transactional", "is_control", "producer_id",
                 "producer_epoch", "base_sequence", "partition_leader_epoch", "first_timestamp",
                 "max_timestamp", "record_count", "size", "uncompressed_size", "crc_ok",
                 "records", "control", "_deferred")

    def __init__(self, offset_in_set, size, magic):
        self.offset_in_set = offset_in_set
        self.size = size
        self.magic = magic
        self.base_offset = None
        self.last_offset_delta = None
        self.codec = 0
        self.timestamp_type = None
        self.is_transactional = False
        self.is_control = False
        self.producer_id = None
        self.producer_epoch = None
        self.base_sequence = None
        self.partition_leader_epoch = None
        self.first_timestamp = None
        self.max_timestamp = None
        self.record_count = None
        self.uncompressed_size = None
        self.crc_ok = None
        self.records = None
        self.control = None
        self._deferred = None

    def decoded_count(self):
        """How many records were decoded (built or deferred); None when they were not."""
        deferred = self._deferred
        if deferred is not None:  # asked first: reading an unset `records` would build them
            return deferred[0]
        records = self.records
        return None if records is None else len(records)

    def __getattr__(self, name):  # called only for an unset slot: a deferred `records`
        if name != "records":
            raise AttributeError(name)
        _, parse, args = self._deferred
        self._deferred = None
        records = self.records = parse(*args)
        return records

    def __repr__(self):
        return (f"Batch(magic={self.magic}, at={self.offset_in_set}, size={self.size}, "
                f"base_offset={self.base_offset}, codec={self.codec}, count={self.record_count}, "
                f"crc_ok={self.crc_ok})")


class RecordSet:
    """The decoded `records` field: its batches, the issues found, and whether it ends with a
    partial batch (normal at the end of a Fetch response)."""
    __slots__ = ("batches", "issues", "truncated", "size", "record_count")

    def __init__(self, batches, issues, truncated, size, record_count):
        self.batches = batches
        self.issues = issues
        self.truncated = truncated
        self.size = size
        self.record_count = record_count

    def records(self):
        """All decoded records in order (batches that were not decoded contribute none)."""
        return [r for b in self.batches if b.records for r in b.records]

    def __repr__(self):
        return (f"RecordSet(batches={len(self.batches)}, records={self.record_count}, "
                f"size={self.size}, truncated={self.truncated}, issues={len(self.issues)})")

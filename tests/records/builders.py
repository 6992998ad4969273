"""Record sets built with kafka-python's record builders (the oracle) and helpers to patch them.

Patching helpers recompute checksums with zlib / the `crc32c` package, not with our code.
"""
import struct
import zlib

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from tests.support import require_module

CODEC_MODULES = {1: None, 2: "snappy", 3: "lz4", 4: "zstandard"}


def require_codec(magic, codec):
    """Skip/fail unless kafka-python can build this (magic, codec)."""
    if CODEC_MODULES.get(codec):
        require_module(CODEC_MODULES[codec])
    if codec == 3 and magic == 0:
        require_module("xxhash")  # kafka-python writes the old wrong lz4 header checksum with it


def build(magic, codec, items, offset=0, producer=None):
    """One kafka-python batch from items (timestamp, key, value, headers)."""
    b = MemoryRecordsBuilder(magic, codec, 1 << 30, offset=offset, **(producer or {}))
    for ts, key, value, headers in items:
        assert b.append(ts, key, value, headers if magic == 2 else None) is not None
    b.close()
    return bytes(b.buffer())


def expected(buf):
    """What kafka-python's reader returns: [(offset, timestamp, key, value, headers)]."""
    out = []
    for batch in MemoryRecords(buf):
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def got(record_set):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in record_set.records()]


def fix_crc32c(buf):
    """Recompute the CRC32C of the v2 batch at the start of `buf` (after a deliberate patch)."""
    crc32c = require_module("crc32c")
    buf = bytearray(buf)
    end = 12 + struct.unpack_from(">i", buf, 8)[0]
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:end])))
    return bytes(buf)


def fix_crc32(buf):
    """Recompute the CRC32 of the v0/v1 message at the start of `buf`."""
    buf = bytearray(buf)
    end = 12 + struct.unpack_from(">i", buf, 8)[0]
    struct.pack_into(">I", buf, 12, zlib.crc32(bytes(buf[16:end])))
    return bytes(buf)


def control_batch(commit, coordinator_epoch=7, producer_id=1234, producer_epoch=3, offset=0):
    """A transaction marker batch as a broker writes it: control bit set, one control record
    (key: version int16 0, type int16 1=commit/0=abort; value: version int16 0, epoch int32)."""
    b = DefaultRecordBatchBuilder(2, 0, True, producer_id, producer_epoch, -1, 1 << 20)
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    b.append(0, 1_700_000_000_000, key, value, [])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, offset)
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | 0x20)
    return fix_crc32c(buf)


def with_body(v2_batch, body, codec=None, count=None):
    """The v2 batch with its records section replaced by `body` (and codec/count if given),
    batchLength and CRC32C recomputed: for payloads kafka-python cannot produce."""
    buf = bytearray(v2_batch[:61]) + body
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    if codec is not None:
        attrs = struct.unpack_from(">h", buf, 21)[0]
        struct.pack_into(">h", buf, 21, (attrs & ~7) | codec)
    if count is not None:
        struct.pack_into(">i", buf, 57, count)
    return fix_crc32c(buf)


def varint(v):
    """Zigzag varint of v (any width, as the wire allows)."""
    u = ((v << 1) ^ (v >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)

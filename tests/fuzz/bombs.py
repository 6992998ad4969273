"""Decompression bombs, one per codec form, built by the codec libraries (streaming, so building
one never holds its output) or by hand from the format where a library cannot stream.

Each function returns the compressed payload of `size` zero bytes.
"""
from __future__ import annotations

import struct
import zlib

from tests.support import require_module

STEP = 1 << 20
ZEROS = bytes(STEP)


def gzip_bomb(size):
    c = zlib.compressobj(1, zlib.DEFLATED, 31)  # 16 + 15: a gzip member
    return b"".join(c.compress(ZEROS) for _ in range(size // STEP)) + c.flush()


def zstd_bomb(size, content_size):
    """zstd frame; with content_size the frame header declares `size` (pledged up front)."""
    zstandard = require_module("zstandard")
    c = zstandard.ZstdCompressor(write_content_size=content_size)
    obj = c.compressobj(size=size if content_size else -1)
    return b"".join(obj.compress(ZEROS) for _ in range(size // STEP)) + obj.flush()


def lz4_bomb(size):
    lz4_frame = require_module("lz4.frame")
    c = lz4_frame.LZ4FrameCompressor()
    return c.begin() + b"".join(c.compress(ZEROS) for _ in range(size // STEP)) + c.flush()


def _uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def snappy_raw_bomb(size):
    """Raw snappy block by hand (the format: uvarint uncompressed length, then elements): one
    literal zero byte, then copies of 64 bytes at offset 1 (tag (64-1) << 2 | 2, 2-byte LE
    offset) and one shorter copy for the rest. python-snappy has no streaming raw compressor."""
    assert size >= 5
    rest = size - 1
    full, tail = divmod(rest, 64)
    out = [_uvarint(size), b"\x00\x00", bytes((63 << 2 | 2, 1, 0)) * full]
    if tail >= 1:
        out.append(bytes(((tail - 1) << 2 | 2, 1, 0)))
    return b"".join(out)


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def snappy_xerial_bomb(size, block=32 << 10):
    """Kafka's Java framing: header, then (int32 length, raw snappy block) repeated."""
    snappy = require_module("snappy")
    one = snappy.compress(bytes(block))
    return XERIAL_HEADER + (struct.pack(">i", len(one)) + one) * (size // block)


BOMBS = {
    "gzip": gzip_bomb,
    "snappy-raw": snappy_raw_bomb,
    "snappy-xerial": snappy_xerial_bomb,
    "lz4": lz4_bomb,
    "zstd-content-size": lambda n: zstd_bomb(n, True),
    "zstd-streamed": lambda n: zstd_bomb(n, False),
}
CODEC_OF = {"gzip": 1, "snappy-raw": 2, "snappy-xerial": 2, "lz4": 3, "zstd-content-size": 4,
            "zstd-streamed": 4}

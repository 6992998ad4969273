"""Decompression of record payloads: gzip, snappy (raw and xerial-framed), lz4 frames, zstd.

Every codec is bounded: output beyond `limit` bytes raises DecompressionLimit before it is
allocated (streaming decompressors with a max length; snappy's length preamble is checked first).
Optional libraries are imported at call time, so a missing one (or one hidden by a test) becomes
CodecUnavailable rather than an import error at start-up.
"""
from __future__ import annotations

import functools
import struct
import zlib

from ..model import ERROR, WARNING, Issue
from .checksums import xxh32

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


class CodecError(Exception):
    """Corrupt or unsupported compressed data."""


class CodecUnavailable(CodecError):
    """The optional library for this codec is not installed."""


class DecompressionLimit(CodecError):
    """The output would exceed the caller's cap."""


def decompress(codec, data, limit):
    """Decompress `data` (bytes-like) compressed with `codec` (1-4); at most `limit` bytes out."""
    if codec == GZIP:
        return _gzip(data, limit)
    if codec == SNAPPY:
        return _snappy(data, limit)
    if codec == LZ4:
        return _lz4(data, limit)
    if codec == ZSTD:
        return _zstd(data, limit)
    raise CodecError(f"unknown compression codec {codec}")


def decompress_payload(codec, data, budget, issues, at):
    """decompress() for a batch payload within what is left of the set's `budget` (a one-item
    list, reduced by the output); failures become Issues at stream offset `at` and return None."""
    try:
        out = decompress(codec, data, budget[0])
    except CodecUnavailable as e:
        issues.append(Issue("records.codec_unavailable", WARNING, str(e), stream_offset=at))
    except DecompressionLimit as e:
        issues.append(Issue("records.decompression_limit", WARNING, str(e), stream_offset=at))
    except CodecError as e:
        issues.append(Issue("records.bad_compression", ERROR, str(e), stream_offset=at))
    else:
        budget[0] -= len(out)
        return out
    return None


def _over(limit):
    return DecompressionLimit(f"decompressed size exceeds the cap of {limit} bytes")


@functools.cache   # at the first gzip payload: most runs never meet one
def _inflater():
    """The inflater module and the errors it raises: ISA-L (about twice as fast, same stream
    API and results) when installed, else zlib."""
    try:
        from isal import isal_zlib
    except ImportError:  # pragma: no cover - depends on the environment
        return zlib, (zlib.error,)
    return isal_zlib, (isal_zlib.error, zlib.error)


_GZIP_IN = 64 << 10    # input per call, so the unconsumed tail copied after a capped call is small
_GZIP_OUT = 1 << 20    # output per call: a call's output buffer grows to its max_length


def _gzip(data, limit):
    """gzip (or zlib) members, concatenated members as one stream. Input and output go through
    the inflater in bounded steps, so that memory stays within the cap plus one step (a single
    call would grow its output buffer to the cap and copy it once more at the end)."""
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    n = len(mv)
    out = []
    size = 0
    pos = 0
    inflate, errors = _inflater()
    try:
        while pos < n:  # one member per pass
            d = inflate.decompressobj(47)  # 32+15: gzip or zlib header, auto-detected
            pending = b""
            while not d.eof:
                if not pending and pos < n:
                    pending = mv[pos:pos + _GZIP_IN]
                    pos += len(pending)
                chunk = d.decompress(pending, min(limit + 1 - size, _GZIP_OUT))
                pending = d.unconsumed_tail
                if not chunk and not pending and pos >= n and not d.eof:
                    raise CodecError("gzip: truncated stream")
                size += len(chunk)
                if size > limit:
                    raise _over(limit)
                out.append(chunk)
            # input fed past the member's end comes back as unused_data: rewind to it
            pos -= len(d.unused_data) + len(pending)
    except errors as e:
        raise CodecError(f"gzip: {e}") from None
    return out[0] if len(out) == 1 else b"".join(out)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_BLOCK_LEN = struct.Struct(">i")


def _snappy(data, limit):
    try:
        import snappy
    except ImportError:
        raise CodecUnavailable("snappy codec needs the python-snappy package") from None
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_block(snappy, data, limit)
    # Xerial framing (Kafka's Java client): 16-byte header (magic, version, compat), then
    # blocks of int32 length + raw snappy block.
    if len(data) < 16:
        raise CodecError("snappy: truncated xerial header")
    out = []
    size = 0
    pos = 16
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise CodecError("snappy: truncated xerial block length")
        (n,) = _BLOCK_LEN.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CodecError(f"snappy: xerial block length {n} exceeds the data")
        block = _snappy_block(snappy, data[pos:pos + n], limit - size)
        size += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


def _snappy_block(snappy, block, limit):
    # The raw format starts with the uncompressed length as an unsigned varint: check it first.
    claimed = shift = 0
    for b in block[:5]:
        claimed |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    else:
        raise CodecError("snappy: bad length preamble")
    if claimed > limit:
        raise _over(limit)
    try:
        out = snappy.uncompress(block)
    except Exception as e:  # the library's error classes differ between versions
        raise CodecError(f"snappy: {e}") from None
    if len(out) != claimed:
        raise CodecError("snappy: length preamble does not match the output")
    return bytes(out)


_LZ4_MAGIC = b"\x04\x22\x4d\x18"


_LZ4_STEP = 1 << 20  # output per call: python-lz4 allocates max_length up front


def _lz4(data, limit):
    try:
        import lz4.frame
    except ImportError:
        raise CodecUnavailable("lz4 codec needs the lz4 package") from None
    data = _lz4_fix_header_checksum(bytes(data))
    d = lz4.frame.LZ4FrameDecompressor()
    out = []
    size = 0
    try:
        chunk = d.decompress(data, max_length=min(limit + 1, _LZ4_STEP))
        while True:
            size += len(chunk)
            if size > limit:
                raise _over(limit)
            out.append(chunk)
            if d.eof:
                return b"".join(out)
            if d.needs_input or not chunk:
                raise CodecError("lz4: truncated frame")
            chunk = d.decompress(b"", max_length=min(limit + 1 - size, _LZ4_STEP))
    except RuntimeError as e:
        raise CodecError(f"lz4: {e}") from None


def _lz4_fix_header_checksum(frame):
    """Return the frame with a valid header checksum byte.

    Kafka's old lz4 code (magic 0/1 era, KAFKA-1493) computed the checksum over the magic number
    as well as the frame descriptor; such frames are accepted by rewriting that byte.
    """
    if len(frame) < 7 or not frame.startswith(_LZ4_MAGIC):
        raise CodecError("lz4: not an lz4 frame")
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= hc_pos:
        raise CodecError("lz4: truncated frame descriptor")
    good = (xxh32(frame[4:hc_pos]) >> 8) & 0xFF
    hc = frame[hc_pos]
    if hc == good:
        return frame
    if hc != (xxh32(frame[0:hc_pos]) >> 8) & 0xFF:
        raise CodecError("lz4: bad frame header checksum")
    return frame[:hc_pos] + bytes((good,)) + frame[hc_pos + 1:]


_ZSTD_BLOCK = 128 << 10  # largest output of one zstd block, made from as little as 4 input bytes


def _zstd(data, limit):
    try:
        import zstandard
    except ImportError:
        raise CodecUnavailable("zstd codec needs the zstandard package") from None
    # A decompressobj reports an incomplete frame (eof), which readers over the whole input do
    # not, but returns all the output its input makes: so input goes in slices sized to what is
    # left of the cap, so that one call overshoots it by at most 32 blocks (4 MiB).
    out = []
    size = 0
    rest = memoryview(bytes(data))
    try:
        while rest:
            d = zstandard.ZstdDecompressor().decompressobj()
            pos = 0
            while pos < len(rest) and not d.eof:
                step = 128 + 4 * ((limit - size) // _ZSTD_BLOCK)
                chunk = d.decompress(rest[pos:pos + step])
                pos += step
                size += len(chunk)
                if size > limit:
                    raise _over(limit)
                out.append(chunk)
            if not d.eof:
                raise CodecError("zstd: truncated frame")
            rest = memoryview(d.unused_data + rest[pos:])  # concatenated frames: one stream
    except zstandard.ZstdError as e:
        raise CodecError(f"zstd: {e}") from None
    return b"".join(out)

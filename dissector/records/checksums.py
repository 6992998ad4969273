"""Checksums used inside record sets: CRC32C (RecordBatch v2) and xxHash32 (lz4 frame headers).

CRC32 (MessageSet v0/v1) is zlib.crc32 and needs nothing here. CRC32C runs over every v2 batch,
so it uses the `crc32c` package (hardware-accelerated) when installed and falls back to a
pure-Python slicing-by-8 table otherwise (~10x faster than one table lookup per byte).
"""
from __future__ import annotations

import functools
import struct

_POLY_C = 0x82F63B78  # Castagnoli polynomial, bit-reflected


@functools.cache   # built at first use: with the accelerated library, never
def _tables():
    t0 = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY_C if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[n] >> 8) ^ t0[prev[n] & 0xFF] for n in range(256)])
    return tuple(tuple(t) for t in tables)


_WORDS = struct.Struct("<II")


def crc32c_python(data, crc=0):
    """CRC32C of `data` (bytes-like), continuing from `crc`; slicing-by-8, pure Python."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _tables()
    mv = memoryview(data).cast("B")
    n8 = len(mv) & ~7
    c = crc ^ 0xFFFFFFFF
    for lo, hi in _WORDS.iter_unpack(mv[:n8]):
        lo ^= c
        c = (t7[lo & 0xFF] ^ t6[(lo >> 8) & 0xFF] ^ t5[(lo >> 16) & 0xFF] ^ t4[lo >> 24]
             ^ t3[hi & 0xFF] ^ t2[(hi >> 8) & 0xFF] ^ t1[(hi >> 16) & 0xFF] ^ t0[hi >> 24])
    for b in mv[n8:]:
        c = (c >> 8) ^ t0[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def _accelerated_crc32c():
    """The `crc32c` package's C function, or None when it is not installed. Its extension module
    is loaded without running the package's __init__, which imports importlib.metadata for
    __version__ (about 40 ms of CPU at every start of the CLI, whose core avoids that module)."""
    import importlib.machinery
    import importlib.util
    try:
        package = importlib.util.find_spec("crc32c")
        where = package.submodule_search_locations if package is not None else None
        spec = where and importlib.machinery.PathFinder.find_spec("crc32c._crc32c", where)
        if not spec:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.crc32c
    except (ImportError, AttributeError):  # pragma: no cover - an unexpected package layout
        try:
            from crc32c import crc32c as function
        except ImportError:
            return None
        return function


# optional accelerator; same results (checked by tests/records/test_checksums.py)
crc32c = _accelerated_crc32c() or crc32c_python
ACCELERATED = crc32c is not crc32c_python


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF
_U32 = struct.Struct("<I")


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data, seed=0):
    """xxHash32 of a short byte string (lz4 frame descriptors are at most 19 bytes)."""
    data = bytes(data)
    n = len(data)
    pos = 0
    if n >= 16:
        v1, v2 = (seed + _P1 + _P2) & _M32, (seed + _P2) & _M32
        v3, v4 = seed & _M32, (seed - _P1) & _M32
        while pos + 16 <= n:
            lanes = struct.unpack_from("<4I", data, pos)
            v1 = _rotl((v1 + lanes[0] * _P2) & _M32, 13) * _P1 & _M32
            v2 = _rotl((v2 + lanes[1] * _P2) & _M32, 13) * _P1 & _M32
            v3 = _rotl((v3 + lanes[2] * _P2) & _M32, 13) * _P1 & _M32
            v4 = _rotl((v4 + lanes[3] * _P2) & _M32, 13) * _P1 & _M32
            pos += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = _rotl((h + _U32.unpack_from(data, pos)[0] * _P3) & _M32, 17) * _P4 & _M32
        pos += 4
    while pos < n:
        h = _rotl((h + data[pos] * _P5) & _M32, 11) * _P1 & _M32
        pos += 1
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    return h ^ (h >> 16)

"""Primitives shared by the generated decoders and the tree interpreter.

Kept tiny on purpose: the generated code inlines the common cases (fixed-size runs through
precompiled Structs, one-byte varints) and calls these only for the rare ones.
"""
from __future__ import annotations

from struct import Struct, unpack_from
from uuid import UUID, SafeUUID

UUID0 = UUID(int=0)
DEFAULT_STRUCT = "<default struct>"  # schema-table marker: the default is a default-filled struct
new = object.__new__
_set = object.__setattr__
_UNKNOWN = SafeUUID.unknown

# Array elements one message may decode, all arrays together (the only place the default is set).
# Each element is a Python object: ~36 bytes of memory per 2-byte element, so this bounds a
# message at ~150 MB of objects whatever its size. A Metadata response of 100k partitions with
# 3 replicas and 3 ISR needs ~700k.
MAX_ELEMENTS = 2_000_000


class Malformed(Exception):
    """Raised inside decoders; `code` is a stable Issue code, `offset` the byte where it happened.

    The fast generated decoders raise it (or let struct.error/IndexError escape) without details;
    the tree interpreter re-decodes such messages field by field and fills in code and offset.
    """

    def __init__(self, code="kafka.malformed", offset=None, detail=""):
        super().__init__(code, offset, detail)
        self.code = code
        self.offset = offset
        self.detail = detail


def uvarint(b, p):
    """Unsigned varint (at most 5 bytes: Kafka's varints hold 32-bit values) -> (value, next p)."""
    byte = b[p]
    if byte < 0x80:
        return byte, p + 1
    value = byte & 0x7F
    for i, shift in ((1, 7), (2, 14), (3, 21), (4, 28)):
        byte = b[p + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p + i + 1
    raise Malformed("kafka.bad_varint", p, "unsigned varint longer than 5 bytes")


UUIDS = _uuids = {bytes(16): UUID0}  # topic ids repeat in every message: build each once


def uuid_at(b, p):
    """The UUID in b[p:p+16] (a short slice is caught by the caller's final bounds check)."""
    raw = b[p:p + 16]
    u = _uuids.get(raw)
    if u is None:
        u = new(UUID)
        _set(u, "int", int.from_bytes(raw, "big"))
        _set(u, "is_safe", _UNKNOWN)
        if len(_uuids) > 65536:
            _uuids.clear()
        _uuids[bytes(raw)] = u
    return u


# Unpackers of short fixed-size arrays, indexed by element count (longer ones use unpack_from).
ARRAYS = {c: tuple(Struct(f">{n}{c}").unpack_from for n in range(16)) for c in "bhiqHId?"}


class Body:
    """Base of the generated body classes: slots named after the spec fields in snake_case, plus
    `unknown_tags` ({tag: raw bytes} or None) for tagged fields this build does not know."""
    __slots__ = ()

    def _items(self):
        """(attr, value) pairs in declaration order."""
        return [(name, getattr(self, name, None)) for name in self.__slots__]

    def __eq__(self, other):
        return type(other) is type(self) and self._items() == other._items()

    __hash__ = None

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self._items() if k != "unknown_tags" or v)
        return f"{type(self).__name__}({inner})"


__all__ = ["MAX_ELEMENTS", "ARRAYS", "UUIDS", "DEFAULT_STRUCT", "Struct", "unpack_from", "UUID0", "new", "Malformed", "uvarint", "uuid_at", "Body"]

"""Kafka request and response headers.

Request header v0 has no client id (only ControlledShutdown v0 uses it), v1 adds the client id
(a classic nullable int16 string, even in v2), v2 adds a tagged-field section. Response header v0 is
the correlation id alone; v1 adds tagged fields. The version follows from the request's api key and
version: flexible api versions use the flexible headers, except ApiVersions responses, which always
use v0 so that a client can read the error of an unsupported-version reply.
"""
from __future__ import annotations

import re
import struct

from ..text_safety import decode_text
from .generated.apis import APIS

_CONTROL = re.compile(rb"[\x00-\x1f\x7f]")
_HEAD = struct.Struct(">hhi")      # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

API_VERSIONS = 18
CONTROLLED_SHUTDOWN = 7


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    info = APIS.get(api_key)
    flexible = info[3] if info else None
    return 2 if flexible is not None and api_version >= flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS:
        return 0
    info = APIS.get(api_key)
    flexible = info[4] if info else None
    return 1 if flexible is not None and api_version >= flexible else 0


def is_known_version(api_key: int, api_version: int) -> bool:
    info = APIS.get(api_key)
    return info is not None and info[1] <= api_version <= info[2]


def read_uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    """Unsigned LEB128 varint at buf[pos]; returns (value, next position). At most 5 bytes."""
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def read_tagged_fields(buf, pos: int, end: int) -> tuple[dict, int]:
    """A tagged-field section kept raw: {tag: bytes}."""
    count, pos = read_uvarint(buf, pos, end)
    tags = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        if pos + size > end:
            raise ValueError("tagged field runs past the header")
        tags[tag] = bytes(buf[pos:pos + size])
        pos += size
    return tags, pos


def parse_request_header(buf) -> tuple[int, int, int, str | None, dict, int]:
    """(api_key, api_version, correlation_id, client_id, header_tags, body_offset).

    buf is the message after its size prefix. Raises ValueError when the bytes cannot hold the
    header the api key and version call for.
    """
    end = len(buf)
    if end < 8:
        raise ValueError("request shorter than its header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    version = request_header_version(api_key, api_version)
    if version == 0:
        return api_key, api_version, correlation_id, None, {}, 8
    if end < 10:
        raise ValueError("request header cut before the client id")
    (n,) = _INT16.unpack_from(buf, 8)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > end:
            raise ValueError("client id runs past the message")
        client_id = decode_text(bytes(buf[pos:pos + n]))
        pos += n
    elif n != -1:
        raise ValueError("negative client id length")
    if version == 1:
        return api_key, api_version, correlation_id, client_id, {}, pos
    if pos < end and buf[pos] == 0:  # no tagged fields, the usual case: no varint to read
        return api_key, api_version, correlation_id, client_id, {}, pos + 1
    tags, pos = read_tagged_fields(buf, pos, end)
    return api_key, api_version, correlation_id, client_id, tags, pos


def py_request_head(buf):
    """parse_request_header's common case: its result, or None where that takes more (tagged
    fields in the header, a client id that is not UTF-8, bytes that cannot hold the header;
    parse_request_header then says what is wrong). The specification of _reqhead.request_head,
    which the session calls first: `request_head(data) or parse_request_header(data)`."""
    end = len(buf)
    if end < 8:
        return None
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    version = request_header_version(api_key, api_version)
    if version == 0:
        return api_key, api_version, correlation_id, None, {}, 8
    if end < 10:
        return None
    (n,) = _INT16.unpack_from(buf, 8)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > end:
            return None
        try:
            client_id = bytes(buf[pos:pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            return None
        pos += n
    elif n != -1:
        return None
    if version == 2:
        if pos < end and buf[pos] == 0:
            pos += 1
        else:
            return None
    return api_key, api_version, correlation_id, client_id, {}, pos


def _flexible_table():
    """The first flexible request version of each api key (None: never), indexed by api key."""
    return tuple(APIS[k][3] if k in APIS else None for k in range(max(APIS) + 1))


try:
    from ._reqhead import configure as _configure, request_head
    _configure(_flexible_table())
    COMPILED = True
except ImportError:   # no compiler where it was installed: the full parse at once
    request_head = parse_request_header
    COMPILED = False


def parse_response_header(buf, api_key: int, api_version: int) -> tuple[int, dict, int]:
    """(correlation_id, header_tags, body_offset) for a response to (api_key, api_version)."""
    end = len(buf)
    if end < 4:
        raise ValueError("response shorter than its correlation id")
    (correlation_id,) = _INT32.unpack_from(buf, 0)
    if response_header_version(api_key, api_version) == 0:
        return correlation_id, {}, 4
    if end > 4 and buf[4] == 0:  # no tagged fields, the usual case: no varint to read
        return correlation_id, {}, 5
    tags, pos = read_tagged_fields(buf, 4, end)
    return correlation_id, tags, pos


def plausible_request(buf, pos: int, size: int) -> bool:
    """Could a request of `size` bytes start at buf[pos] (just after its size prefix)?

    Used to resynchronise after a gap and to recognise Kafka on unknown ports: the api key must be
    known with a valid version, and the client id must fit inside the frame and, when in view, be
    UTF-8 without control characters (what clients send; a false start inside a payload rarely is).
    """
    if size < 8 or pos + 8 > len(buf):
        return False
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, pos)
    if not is_known_version(api_key, api_version) or correlation_id < 0:
        return False
    if request_header_version(api_key, api_version) == 0:
        return True
    if size < 10 or pos + 10 > len(buf):
        return False
    (n,) = _INT16.unpack_from(buf, pos + 8)
    if n == -1:
        return True
    if not 0 <= n <= size - 10:
        return False
    if pos + 10 + n > len(buf):
        return True   # not in view: the benefit of the doubt
    client_id = bytes(buf[pos + 10:pos + 10 + n])
    if _CONTROL.search(client_id):
        return False
    try:
        client_id.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True

"""Protocol special cases on top of the generated decoders (off the fast path: a few api keys).

- ApiVersions: a broker that does not support the requested version answers with a v0-shaped
  body and error 35 (UNSUPPORTED_VERSION); such a reply is decoded with the v0 layout.
- Envelope (key 58): the inner request (`request_data`, header + body) and, given the inner
  request, the inner response (`response_data`) are decoded recursively; `request_principal`
  is decoded when it is a version-prefixed DefaultPrincipalData (the default serialisation).
- JoinGroup / SyncGroup: metadata and assignments of protocol type "consumer" are
  version-prefixed ConsumerProtocolSubscription / ConsumerProtocolAssignment structures.
  When the message does not say its protocol type (JoinGroup responses before v7, SyncGroup
  before v5) a clean decode is kept and anything else stays raw.

A decoded field keeps its bytes: it becomes an `Embedded` (a bytes subclass, so it still
compares and serialises as the raw bytes) carrying `version` and `decoded` (a body or Message).

Embedded structures share the enclosing message's array element budget (primitives.MAX_ELEMENTS):
each is decoded within what the body and the structures before it left, so one message never
holds more elements than the budget, however many members' metadata each claim just under it.
"""
from __future__ import annotations

import struct

from ..model import WARNING, Issue
from .primitives import MAX_ELEMENTS, Body

API_VERSIONS = 18
JOIN_GROUP = 11
SYNC_GROUP = 14
ENVELOPE = 58
UNSUPPORTED_VERSION = 35
EMBEDDING = frozenset({JOIN_GROUP, SYNC_GROUP, ENVELOPE})   # bodies that embed structures
# and ApiVersions, whose replies with error 35 are read with the v0 layout (v0_reply)
SPECIAL = EMBEDDING | {API_VERSIONS}

_INT16 = struct.Struct(">h")
_NO = object()  # "protocol type not carried by this message"


class Embedded(bytes):
    """Raw bytes of a field that holds an embedded structure, with the structure decoded:
    `version` (its int16 version prefix, None for whole messages) and `decoded` (a body, or a
    Message for Envelope's inner messages). Fields that do not decode stay plain bytes."""

    def __new__(cls, raw, version=None, decoded=None, structure=None):
        self = super().__new__(cls, raw)
        self.version = version
        self.decoded = decoded
        self.structure = structure  # the generated data structure's module name, for tree mode
        return self


def layout_version(versions, version):
    """The layout to read a version-prefixed structure with: its own, or the newest this build
    knows for a newer one (Kafka reads newer consumer-protocol versions that way); None if older."""
    if version in versions:
        return version
    newest = max(versions)
    return newest if version > newest else None


# -- ApiVersions -----------------------------------------------------------------------------------

def v0_reply(b, offset, api_version) -> bool:
    """Whether the ApiVersions response body at b[offset:] is a reply carrying error 35 at a
    version above 0 (the broker answers it with the v0 layout)."""
    return (api_version != 0 and len(b) >= offset + 2
            and _INT16.unpack_from(b, offset)[0] == UNSUPPORTED_VERSION)


def api_versions_response(b, offset, api_version, entries, decode_struct):
    """The ApiVersions response body at b[offset:], or None to decode it the usual way: a reply
    carrying error 35 at a version above 0 is read with the v0 layout when that fits exactly."""
    if not v0_reply(b, offset, api_version):
        return None
    trial = []
    body = decode_struct(b, offset, entries[0], trial)
    return body if not trial else None


# -- the element budget ----------------------------------------------------------------------------

def elements(obj):
    """Array elements a decoded body holds (what the decoders charge to the budget: each list's
    length), embedded structures included."""
    n = 0
    todo = [obj]
    while todo:
        o = todo.pop()
        if isinstance(o, Embedded):
            o = o.decoded
            o = getattr(o, "body", o)  # a Message: its body
        if isinstance(o, Body):
            todo.extend(getattr(o, a, None) for a in o.__slots__ if a != "unknown_tags")
        elif type(o) is list:
            n += len(o)
            if o and not isinstance(o[0], (int, float, str, bool)):
                todo.extend(o)
    return n


# -- version-prefixed data structures ------------------------------------------------------------

def _versioned(raw, name, strict, issues, where, budget):
    """Decode a version-prefixed structure; returns an Embedded, or the raw value unchanged.

    strict (the message says the structure is there): faults become one warning Issue at
    `where` (the field's offset in the message); a newer version than this build knows is read
    with the newest layout, ignoring what follows. Not strict: only a clean decode is kept, but
    a spent element budget (`budget`, a one-item list, charged with what is kept) is reported."""
    from .decode import decode_struct, data_versions
    if raw is None or len(raw) == 0:
        return raw
    data = bytes(raw)
    versions = data_versions(name)
    detail = None
    if len(data) < 2:
        detail = "shorter than its version"
    else:
        version = _INT16.unpack_from(data, 0)[0]
        layout = layout_version(versions, version)
        if layout is None:
            detail = f"unknown version {version}"
        else:
            trial = []
            body = decode_struct(data, 2, versions[layout], trial, max_elements=budget[0])
            newer = layout != version
            faults = [i for i in trial if not (newer and i.code == "kafka.trailing_bytes")]
            if not faults:
                budget[0] -= elements(body)
                return Embedded(data, version, body, name)
            detail = f"{faults[0].code} at byte {faults[0].stream_offset}: {faults[0].detail}"
            strict = strict or faults[0].code == "kafka.too_many_elements"
    if strict:
        issues.append(Issue("kafka.bad_embedded", WARNING, f"{name}: {detail}; kept raw",
                            stream_offset=where(raw)))
    return raw


def _consumer(protocol_type):
    """(decode?, strict?) for a protocol type; _NO when the message does not carry it."""
    if protocol_type is _NO or protocol_type is None:
        return True, False
    return protocol_type == "consumer", True


def _join_group(body, which, api_version, issues, where, budget):
    if which == 0:
        decode, strict = _consumer(body.protocol_type)
        items = body.protocols
    else:
        decode, strict = _consumer(body.protocol_type if api_version >= 7 else _NO)
        items = body.members
    if decode:
        for item in items or ():
            item.metadata = _versioned(item.metadata, "consumer_protocol_subscription", strict,
                                       issues, where, budget)


def _sync_group(body, which, api_version, issues, where, budget):
    decode, strict = _consumer(body.protocol_type if api_version >= 5 else _NO)
    if not decode:
        return
    name = "consumer_protocol_assignment"
    if which == 0:
        for a in body.assignments or ():
            a.assignment = _versioned(a.assignment, name, strict, issues, where, budget)
    else:
        body.assignment = _versioned(body.assignment, name, strict, issues, where, budget)


# -- Envelope --------------------------------------------------------------------------------------

def _inner(raw, message, issues, where, budget):
    """An Envelope's inner message, charged to the budget; a spent budget is reported here."""
    budget[0] -= elements(message.body)
    for i in message.issues:
        if i.code == "kafka.too_many_elements":
            issues.append(Issue(i.code, WARNING, f"envelope's inner message: {i.detail}",
                                stream_offset=where(raw)))
    return Embedded(raw, None, message)


def _envelope(body, which, issues, where, request, budget):
    from .decode import decode_request, decode_response
    if which == 0:
        raw = body.request_data
        if raw and raw[:2] != b"\x00\x3a":   # Kafka never nests envelopes: no deep recursion
            body.request_data = _inner(raw, decode_request(raw, max_elements=budget[0]), issues,
                                       where, budget)
        # principal serialisation is pluggable in Kafka (KafkaPrincipalSerde): another form
        # is not an error, so only a clean DefaultPrincipalData is kept
        body.request_principal = _versioned(body.request_principal, "default_principal_data",
                                            False, issues, where, budget)
        return
    raw = body.response_data
    inner = getattr(request, "request_data", None) if request is not None else None
    inner = getattr(inner, "decoded", None)
    if raw and inner is not None and inner.api_key is not None:
        message = decode_response(raw, inner.api_key, inner.api_version,
                                  max_elements=budget[0])
        body.response_data = _inner(raw, message, issues, where, budget)


def attach(api_key, api_version, which, body, buf, issues, request=None, *,
           max_elements=MAX_ELEMENTS):
    """Decode the embedded structures of a decoded body in place (which: 0 request, 1 response).
    `request`: the request body an Envelope response answers (to decode its inner response).
    `max_elements`: the message's element budget, which the body has already drawn on."""
    def where(raw):
        i = buf.find(bytes(raw))
        return i if i >= 0 else None

    if api_key not in (JOIN_GROUP, SYNC_GROUP, ENVELOPE):
        return
    try:
        budget = [max(max_elements - elements(body), 0)]
        if api_key == JOIN_GROUP:
            _join_group(body, which, api_version, issues, where, budget)
        elif api_key == SYNC_GROUP:
            _sync_group(body, which, api_version, issues, where, budget)
        else:
            _envelope(body, which, issues, where, request, budget)
    except Exception as e:  # a partial body (fields at defaults) must never make decoding raise
        issues.append(Issue("kafka.bad_embedded", WARNING, f"embedded structure: {e}", stream_offset=None))

"""Decode entry points: message bytes (after the 4-byte size prefix) -> Message.

The fast reader runs first (the generated one, or its compiled twin: readers.py). If it fails
in any way, or overruns the message, the message is decoded again by the schema interpreter
(tree.py), which keeps everything decoded before the fault and reports one Issue with the byte
offset. Nothing here raises on bad input.
Both charge array elements to a budget (`max_elements`, default primitives.MAX_ELEMENTS): each
element is a Python object many times its wire size, so this bounds a message's memory.
"""
from __future__ import annotations

import importlib

from ..model import ERROR, WARNING, Issue
from . import embedded, tree
from .generated.apis import APIS, MODULES
from .headers import parse_request_header, parse_response_header
from .message import Message
from .primitives import MAX_ELEMENTS
from .readers import compiled_readers

_tables: dict = {}  # api_key -> (REQUEST, RESPONSE) tables of its generated module


def tables(api_key):
    """({version: (reader, schema)} for requests, same for responses), or None for an unknown key."""
    t = _tables.get(api_key)
    if t is None:
        name = MODULES.get(api_key)
        if name is None:
            return None
        mod = importlib.import_module(f"{__package__}.generated.{name}")
        t = _tables[api_key] = (compiled_readers(mod.REQUEST), compiled_readers(mod.RESPONSE))
    return t


def _bytes(buf):
    return buf if type(buf) is bytes else bytes(buf)


def decode_struct(b, offset, entry, issues, max_elements=MAX_ELEMENTS):
    """Decode one struct with (reader, schema) `entry` at b[offset:], which must fill b exactly;
    at most `max_elements` array elements in all."""
    reader, schema = entry
    try:
        body, p = reader(b, offset, max_elements)
        if p == len(b):
            return body
        if p < len(b):
            issues.append(Issue("kafka.trailing_bytes", WARNING,
                                f"{len(b) - p} bytes after the end of the body", stream_offset=p))
            return body
    except Exception:  # any failure of the fast path: the interpreter finds out what it was
        pass
    body, end, _, fault = tree.decode(b, offset, schema, max_elements=max_elements)
    if fault is not None:
        issues.append(Issue(fault.code, ERROR, fault.detail, stream_offset=fault.offset))
    elif end < len(b):
        issues.append(Issue("kafka.trailing_bytes", WARNING,
                            f"{len(b) - end} bytes after the end of the body", stream_offset=end))
    else:  # the fast reader failed where the interpreter did not: a generator bug
        issues.append(Issue("kafka.decoder_mismatch", WARNING,
                            "fast decoder failed; body decoded by the interpreter", stream_offset=offset))
    return body


def _body(buf, offset, api_key, api_version, issues, which, request, max_elements):
    t = tables(api_key)
    if t is None:
        issues.append(Issue("kafka.unknown_api", WARNING, f"unknown api key {api_key}", stream_offset=0))
        return None
    entry = t[which].get(api_version)
    if entry is None:
        info = APIS[api_key]
        issues.append(Issue("kafka.unknown_version", WARNING,
                            f"{info[0]} v{api_version} is not defined (known: v{info[1]}-{info[2]})",
                            stream_offset=0))
        return None
    b = _bytes(buf)
    if api_key not in embedded.SPECIAL:
        return decode_struct(b, offset, entry, issues, max_elements)
    body = None
    if which == 1 and api_key == embedded.API_VERSIONS:
        body = embedded.api_versions_response(b, offset, api_version, t[1], decode_struct)
    if body is None:
        body = decode_struct(b, offset, entry, issues, max_elements)
    embedded.attach(api_key, api_version, which, body, b, issues, request,
                    max_elements=max_elements)
    return body


def decode_request_body(buf, offset, api_key, api_version, issues, *, max_elements=MAX_ELEMENTS):
    """The request body at buf[offset:] (None for an unknown api key or version); appends Issues.
    Embedded structures (dissector.protocol.embedded) are decoded in place, within what the
    body left of the element budget."""
    return _body(buf, offset, api_key, api_version, issues, 0, None, max_elements)


def decode_response_body(buf, offset, api_key, api_version, issues, request=None, *,
                         max_elements=MAX_ELEMENTS):
    """The response body at buf[offset:] (None for an unknown api key or version); appends Issues.
    `request`: the decoded request body, which an Envelope response needs for its inner one."""
    return _body(buf, offset, api_key, api_version, issues, 1, request, max_elements)


def data_versions(name):
    """{version: (reader, schema)} of a data structure with its own spec, e.g.
    "consumer_protocol_subscription"."""
    try:
        return importlib.import_module(f"{__package__}.generated.{name}").VERSIONS
    except (ImportError, AttributeError):
        raise ValueError(f"no generated data structure {name!r}") from None


def decode_data(name, buf, offset, version, issues):
    """A data structure with its own spec (e.g. "consumer_protocol_subscription",
    "default_principal_data") at buf[offset:], laid out as `version`; None if the version is
    not defined (with a `kafka.unknown_version` Issue). The caller reads any version prefix."""
    entry = data_versions(name).get(version)
    if entry is None:
        issues.append(Issue("kafka.unknown_version", WARNING, f"{name} v{version} is not defined",
                            stream_offset=offset))
        return None
    return decode_struct(_bytes(buf), offset, entry, issues)


def decode_request(buf, *, max_elements=MAX_ELEMENTS) -> Message:
    """A request message (bytes after the size prefix) -> Message; never raises.
    `max_elements`: array elements the body may decode (kafka.too_many_elements beyond)."""
    b = _bytes(buf)
    issues = []
    try:
        api_key, api_version, correlation_id, client_id, tags, offset = parse_request_header(b)
    except Exception as e:  # header too short or inconsistent
        head = [None, None, None]
        if len(b) >= 8:
            head = [int.from_bytes(b[0:2], "big", signed=True), int.from_bytes(b[2:4], "big", signed=True),
                    int.from_bytes(b[4:8], "big", signed=True)]
        issues.append(Issue("kafka.bad_header", ERROR, f"request header: {e}", stream_offset=0))
        return Message(*head, issues=issues)
    body = decode_request_body(b, offset, api_key, api_version, issues, max_elements=max_elements)
    return Message(api_key, api_version, correlation_id, client_id, tags, body, issues, offset)


def decode_response(buf, api_key, api_version, request=None, *, max_elements=MAX_ELEMENTS) -> Message:
    """A response message to a request of (api_key, api_version) -> Message; never raises.
    `request`: the request's Message or body, if known (an Envelope response needs it);
    `max_elements`: array elements the body may decode (kafka.too_many_elements beyond)."""
    b = _bytes(buf)
    issues = []
    try:
        correlation_id, tags, offset = parse_response_header(b, api_key, api_version)
    except Exception as e:
        corr = int.from_bytes(b[0:4], "big", signed=True) if len(b) >= 4 else None
        issues.append(Issue("kafka.bad_header", ERROR, f"response header: {e}", stream_offset=0))
        return Message(api_key, api_version, corr, issues=issues)
    if isinstance(request, Message):
        request = request.body
    body = decode_response_body(b, offset, api_key, api_version, issues, request,
                                max_elements=max_elements)
    return Message(api_key, api_version, correlation_id, None, tags, body, issues, offset)

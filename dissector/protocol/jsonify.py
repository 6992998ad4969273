"""Lossless JSON form of decoded bodies: bytes (and raw records) as base64, UUIDs as strings.

`to_json(obj)` returns plain JSON-compatible Python data (dicts, lists, str, int, float, bool,
None), ready for json.dumps; `unknown_tags` appears only when a struct carried unknown tags, as
{"<tag>": base64}. A field holding an embedded structure (dissector.protocol.embedded) becomes
{"raw": base64, "version": int or null, "decoded": ...}.
"""
from __future__ import annotations

import base64
from uuid import UUID

from .embedded import Embedded
from .message import Message
from .primitives import Body


def to_json(obj):
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, Body):
        out = {}
        for name in type(obj).__slots__:
            value = getattr(obj, name, None)
            if name == "unknown_tags":
                if value:
                    out[name] = {str(t): base64.b64encode(v).decode("ascii") for t, v in sorted(value.items())}
                continue
            out[name] = to_json(value)
        return out
    if isinstance(obj, Embedded):  # raw bytes that hold a decoded structure: both
        return {"raw": base64.b64encode(obj).decode("ascii"), "version": obj.version,
                "decoded": to_json(obj.decoded)}
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(obj).decode("ascii")
    if isinstance(obj, UUID):
        return str(obj)
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, Message):
        return {"api_key": obj.api_key, "api_version": obj.api_version,
                "correlation_id": obj.correlation_id, "client_id": obj.client_id,
                "header_tags": to_json(obj.header_tags), "body": to_json(obj.body),
                "issues": [{"code": i.code, "severity": i.severity, "detail": i.detail,
                            "offset": i.stream_offset} for i in obj.issues]}
    if hasattr(obj, "__slots__") or hasattr(obj, "__dict__"):  # e.g. decoded record batches
        names = getattr(type(obj), "__slots__", None) or vars(obj).keys()
        return {n: to_json(getattr(obj, n, None)) for n in names if not n.startswith("_")}
    return str(obj)

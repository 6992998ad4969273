"""kafka-python (3.x) as an independent encoder: its generic schema engine builds message classes
from Kafka's JSON specs and writes them, whether the spec comes with kafka-python or from
../shared/kafka-specs (for the versions kafka-python's bundled specs no longer have)."""
from __future__ import annotations

import json
import re


def build(cls, values: dict, version: int):
    """A kafka-python message of `cls` at `version` from plain values (nested dicts and lists)."""
    return cls(version=version, **_convert(cls._struct, values))


def _convert(struct, values):
    out = {}
    fields = struct.fields
    for name, value in values.items():
        f = fields[name]
        if getattr(f, "is_struct_array", lambda: False)() and value is not None:
            value = [f.data_class(**_convert(f.array_of, v)) for v in value]
        elif getattr(f, "is_struct", lambda: False)() and value is not None:
            value = f.data_class(**_convert(f, value))
        out[name] = value
    return out


def encode_request(msg, correlation_id, client_id="kp") -> bytes:
    """The request after its size prefix: header + body."""
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True))


def encode_response(msg, correlation_id) -> bytes:
    msg.with_header(correlation_id=correlation_id)
    return bytes(msg.encode(header=True))


def framed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def load_spec(path) -> dict:
    """A spec file as kafka-python's loader reads it (whole-line // comments removed, common
    structs resolved)."""
    from kafka.protocol.schemas.load_json import _resolve_common_structs
    with open(path, encoding="utf-8") as fh:
        data = json.loads(re.sub(r"(?m)^\s*//.*$", "", fh.read()))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    if common:
        _resolve_common_structs(data.get("fields", []), common)
    return data


def class_from_spec(path):
    """A kafka-python message class for a spec file outside kafka-python (its metaclass loads a
    bundled resource by class name first; json_patch replaces it with ours)."""
    from kafka.protocol.api_message import ApiMessage
    spec = load_spec(path)
    name = "ProduceRequest" if spec["type"] == "request" else "ProduceResponse"
    return type(ApiMessage)(name, (ApiMessage,), {"json_patch": classmethod(lambda mcs, j: spec)})

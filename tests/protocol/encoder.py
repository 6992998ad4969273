"""Test-only encoder and random-body generator, driven by the generated schema tables.

This shares the schema with the decoders, so it proves that the fast readers, the interpreter and
the wire encodings agree with each other; fidelity to Kafka itself is proved by the kio and
hand-annotated tests. Encodings follow the protocol guide: classic int16/int32 lengths, compact
unsigned-varint lengths (+1, 0 = null), int8 presence for nullable structs, tagged sections.
"""
from __future__ import annotations

import random
import struct
import uuid

from dissector.protocol.tree import new_body

FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
         "float64": "d", "bool": "?"}
RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _length(n, compact, wide):
    if compact:
        return uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def encode_value(f, v):
    attr, kind, elem, nullable, compact, _, _, child = f
    if kind in FIXED:
        return struct.pack(">" + FIXED[kind], v)
    if kind == "uuid":
        return v.bytes
    if kind == "struct":
        if nullable:
            return b"\xff" if v is None else b"\x01" + encode(child, v)
        return encode(child, v)
    if v is None:
        return _length(-1, compact, kind != "string")
    if kind == "array":
        ef = ("value", elem, None, False, compact, None, None, child)
        return _length(len(v), compact, True) + b"".join(encode_value(ef, x) for x in v)
    raw = v.encode() if kind == "string" else bytes(v)
    return _length(len(raw), compact, kind != "string") + raw


def encode(schema, obj):
    """The wire bytes of `obj` (a body object) laid out by `schema`."""
    _, flexible, fields, tagged, _ = schema
    out = [encode_value(f, getattr(obj, f[0])) for f in fields]
    if flexible:
        tags = {}
        for f in tagged:
            v = getattr(obj, f[0])
            if v != f[6]:
                tags[f[5]] = encode_value(f, v)
        for t, raw in (obj.unknown_tags or {}).items():
            tags[t] = bytes(raw)
        out.append(uvarint(len(tags)))
        for t in sorted(tags):
            out.append(uvarint(t) + uvarint(len(tags[t])) + tags[t])
    return b"".join(out)


def random_value(f, rnd: random.Random, depth, tame=False):
    attr, kind, elem, nullable, compact, _, _, child = f
    if nullable and rnd.random() < 0.2:
        return None
    if tame and kind in RANGES:  # small non-negative values (valid error codes, times)
        return rnd.randrange(0, 31)
    if kind in RANGES:
        bits = RANGES[kind]
        return rnd.choice([0, -1, 1, rnd.randrange(-(1 << bits - 1), 1 << bits - 1)])
    if kind == "uint16":
        return rnd.randrange(0, 1 << 16)
    if kind == "uint32":
        return rnd.randrange(0, 1 << 32)
    if kind == "float64":
        return rnd.choice([0.0, 1.5, -2.25e10, rnd.random()])
    if kind == "bool":
        return rnd.random() < 0.5
    if kind == "uuid":
        return uuid.UUID(int=0) if rnd.random() < 0.3 else uuid.UUID(int=rnd.getrandbits(128))
    if kind == "string":
        return "".join(rnd.choice("abcxyz-_.é€") for _ in range(rnd.randrange(0, 12)))
    if kind in ("bytes", "records"):
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 20)))
    if kind == "struct":
        return random_body(child, rnd, depth + 1, tame)
    if kind == "array":
        n = rnd.randrange(0, 4 if depth < 3 else 2)
        ef = ("value", elem, None, False, compact, None, None, child)
        return [random_value(ef, rnd, depth + 1, tame) for _ in range(n)]
    raise AssertionError(kind)


def random_body(schema, rnd: random.Random, depth=0, tame=False):
    """A random object of the schema's class; absent fields at their defaults; sometimes
    tagged fields set and unknown tags added. `tame`: small non-negative integers and no
    unknown tags (for readers with typed fields, like kio's)."""
    o = new_body(schema)
    _, flexible, fields, tagged, _ = schema
    for f in fields:
        setattr(o, f[0], random_value(f, rnd, depth, tame))
    for f in tagged:
        if rnd.random() < 0.5:
            setattr(o, f[0], random_value(f, rnd, depth, tame))
    if flexible and not tame and rnd.random() < 0.2:
        known = {f[5] for f in tagged}
        tag = rnd.choice([t for t in (7, 42, 1000, 70000) if t not in known])
        o.unknown_tags = {tag: bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 6)))}
    return o


def body_uuids(obj, out=None):
    """The UUIDs in a decoded or random body, in slot order (the zero UUID too)."""
    from dissector.protocol.primitives import Body
    out = [] if out is None else out
    if isinstance(obj, Body):
        for a in obj.__slots__:
            body_uuids(getattr(obj, a, None), out)
    elif isinstance(obj, list):
        for x in obj:
            body_uuids(x, out)
    elif isinstance(obj, uuid.UUID):
        out.append(obj)
    return out

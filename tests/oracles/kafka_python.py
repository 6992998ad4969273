"""kafka-python (3.x) as an independent encoder: its generic schema engine builds message classes
from Kafka's JSON specs and writes them, whether the spec comes with kafka-python or from
the repository's kafka-specs/ (for the versions kafka-python's bundled specs no longer have)."""
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
    bundled resource by class name first; json_patch replaces it with ours).

    A response class registers itself, by a weak proxy, as its api key's response class for
    every client in the process; the registry is put back as it was, or a kafka-python client
    run later in the same process (tests/protocol/test_real_sasl.py) would look its responses
    up through a proxy to this class once it is collected (ReferenceError)."""
    from kafka.protocol.api_header import ResponseClassRegistry
    from kafka.protocol.api_message import ApiMessage
    spec = load_spec(path)
    name = "ProduceRequest" if spec["type"] == "request" else "ProduceResponse"
    registry = ResponseClassRegistry._response_class_registry
    saved = dict(registry)
    try:
        return type(ApiMessage)(name, (ApiMessage,), {"json_patch": classmethod(lambda mcs, j: spec)})
    finally:
        registry.clear()
        registry.update(saved)


def random_values(struct, version, rnd, depth=0):
    """Random plain values for every field of a kafka-python struct present at `version`, chosen
    from kafka-python's reading of the spec (types, nullability, tagged fields)."""
    out = {}
    for f in struct._fields:
        if f.for_version_q(version):
            out[f.name] = _random_field(f, version, rnd, depth)
    return out


_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _random_simple(t, rnd, nullable):
    if nullable and t in ("string", "bytes", "records") and rnd.random() < 0.2:
        return None
    if t in _INTS:
        bits = _INTS[t]
        return rnd.randrange(-(1 << (bits - 1)), 1 << (bits - 1))
    if t == "uint16":
        return rnd.randrange(0, 1 << 16)
    if t == "float64":
        return rnd.uniform(-1e9, 1e9)
    if t == "bool":
        return rnd.random() < 0.5
    if t == "uuid":
        import uuid
        return uuid.UUID(int=rnd.getrandbits(128))
    if t == "string":
        return "".join(rnd.choice("abcxyz-._\u00e9\u4e2d") for _ in range(rnd.randrange(0, 12)))
    if t in ("bytes", "records"):
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 16)))
    raise ValueError(f"type {t}")


def _random_field(f, version, rnd, depth):
    nullable = f.nullable_for_version_q(version)
    if f.is_struct_array() or f.is_array():
        if nullable and rnd.random() < 0.2:
            return None
        n = rnd.randrange(0, 3 if depth < 2 else 2)
        if f.is_struct_array():
            return [random_values(f.array_of, version, rnd, depth + 1) for _ in range(n)]
        return [_random_simple(f.array_of._type_str, rnd, False) for _ in range(n)]
    if f.is_struct():
        if nullable and rnd.random() < 0.3:
            return None
        return random_values(f, version, rnd, depth + 1)
    return _random_simple(f._type_str, rnd, nullable)


def differences(struct, version, values, ours, path="body"):
    """Differences between the values kafka-python encoded and our decoded object."""
    import uuid
    out = []
    for f in struct._fields:
        if not f.for_version_q(version):
            continue
        want = values[f.name]
        attr = _our_attr(ours, f.name)
        if attr is None:
            out.append(f"{path}.{f.name}: missing from ours")
            continue
        got = getattr(ours, attr)
        p = f"{path}.{attr}"
        if want is None or got is None:
            if not (want is None and got is None):
                out.append(f"{p}: kafka-python {want!r:.40} != ours {got!r:.40}")
        elif f.is_struct_array():
            if len(want) != len(got):
                out.append(f"{p}: {len(want)} items != ours {len(got)}")
            else:
                for i, (w, g) in enumerate(zip(want, got)):
                    out += differences(f.array_of, version, w, g, f"{p}[{i}]")
        elif f.is_struct():
            out += differences(f, version, want, got, p)
        else:
            if isinstance(got, (bytes, memoryview)):
                got = bytes(got)
            if isinstance(want, uuid.UUID) or isinstance(got, uuid.UUID):
                want, got = str(want), str(got)
            if want != got:
                out.append(f"{p}: kafka-python {want!r:.40} != ours {got!r:.40}")
    return out


def _our_attr(ours, name):
    if hasattr(ours, name):
        return name
    squash = name.replace("_", "")
    for attr in type(ours).__slots__:   # e.g. "is_kraft_controller" vs "is_k_raft_controller"
        if attr.replace("_", "") == squash:
            return attr
    return None


# -- kafka-python's hand-written protocol classes (kafka.protocol.old) ----------------------------

def old_classes():
    """{(api_key, api_version, 0 request | 1 response): class} of kafka.protocol.old."""
    import importlib
    import pkgutil
    import kafka.protocol.old as old
    from kafka.protocol.old.api import Request, Response
    out = {}
    for m in pkgutil.iter_modules(old.__path__):
        mod = importlib.import_module(f"kafka.protocol.old.{m.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, (Request, Response)) and \
                    obj not in (Request, Response) and isinstance(getattr(obj, "API_VERSION", None), int):
                out[(obj.API_KEY, obj.API_VERSION, 0 if issubclass(obj, Request) else 1)] = obj
    return out


def old_random(t, rnd, depth=0):
    """Random values (nested tuples and lists) for an old-style Schema or type."""
    from kafka.protocol.old import types as T
    if isinstance(t, T.Schema):
        return tuple(old_random(f, rnd, depth + 1) for f in t.fields)
    if isinstance(t, T.Array):
        return [old_random(t.array_of, rnd, depth + 1) for _ in range(rnd.randrange(0, 3 if depth < 4 else 1))]
    for cls, kind in ((T.Int8, "int8"), (T.Int16, "int16"), (T.Int32, "int32"), (T.Int64, "int64"),
                      (T.Boolean, "bool"), (T.Float64, "float64"), (T.UUID, "uuid")):
        if t is cls:
            return _random_simple(kind, rnd, False)
    if t is T.BitField:   # authorized operations: a set of bit numbers
        return {b for b in range(31) if rnd.random() < 0.3}
    if isinstance(t, T.String):
        return _random_simple("string", rnd, False)
    if t is T.Bytes:
        return _random_simple("bytes", rnd, False)
    raise ValueError(f"old type {t!r}")


def old_differences(t, value, schema, ours, path="body"):
    """Compare old-style values with our body, field by field in order (the old classes name
    fields their own way; the order is the wire order)."""
    from kafka.protocol.old import types as T
    _, _, fields, _, _ = schema
    flat = list(_flat(t, value))
    if len(flat) != len(fields):
        return [f"{path}: kafka-python has {len(flat)} fields, ours {len(fields)}"]
    out = []
    for (ft, v), f in zip(flat, fields):
        if ft is T.BitField:
            v = T.BitField.to_32_bit_field(v)
        attr, kind, elem, child = f[0], f[1], f[2], f[7]
        got = getattr(ours, attr)
        p = f"{path}.{attr}"
        if isinstance(ft, T.Array):
            if got is None or len(got) != len(v):
                out.append(f"{p}: {len(v)} items != ours {got!r:.40}")
                continue
            inner = ft.array_of
            for i, (vi, gi) in enumerate(zip(v, got)):
                if elem == "struct" and not isinstance(inner, T.Schema):
                    # a one-field struct, which kafka-python writes as its bare value
                    out += old_differences(T.Schema(("value", inner)), (vi,), child, gi, f"{p}[{i}]")
                elif elem == "struct":
                    out += old_differences(inner, vi, child, gi, f"{p}[{i}]")
                elif _plain(gi) != vi:
                    out.append(f"{p}[{i}]: kafka-python {vi!r:.40} != ours {gi!r:.40}")
        elif _plain(got) != (str(v) if kind == "uuid" else v):
            out.append(f"{p}: kafka-python {v!r:.40} != ours {got!r:.40}")
    return out


def _flat(t, value):
    """(type, value) pairs of a Schema, with nested Schemas (no wire form of their own) inlined."""
    from kafka.protocol.old import types as T
    for ft, v in zip(t.fields, value):
        if isinstance(ft, T.Schema):
            yield from _flat(ft, v)
        else:
            yield ft, v


def _plain(x):
    import uuid
    if isinstance(x, (bytes, memoryview)):
        return bytes(x)
    if isinstance(x, uuid.UUID):
        return str(x)
    return x

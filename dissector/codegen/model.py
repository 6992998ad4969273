"""Stage 2: the prepared model. For every spec version, each struct's wire layout: which fields
are present, their resolved types (compact or classic, nullable or not), tagged fields, defaults,
and commonStructs resolved. Layouts are shared between versions with the same shape.
"""
from __future__ import annotations

import re

from .loader import SpecError

FIXED = {  # spec type -> struct format character
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
    "float64": "d", "bool": "?",
}
FIXED_SIZE = {"b": 1, "B": 1, "h": 2, "i": 4, "q": 8, "H": 2, "I": 4, "d": 8, "?": 1}
SCALARS = set(FIXED) | {"uuid", "string", "bytes"}


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


class Field:
    """One field of a struct layout at one version.

    kind: a FIXED type name, "uuid", "string", "bytes", "records", "struct" or "array".
    For arrays, `elem` is the element kind (a scalar type name or "struct"). `struct` is the
    Layout of a struct or struct-array element. `compact` selects the flexible encodings.
    """
    __slots__ = ("name", "attr", "kind", "elem", "nullable", "compact", "tag", "default", "struct")

    def __init__(self, name, kind, elem, nullable, compact, tag, default, struct):
        self.name = name
        self.attr = snake(name)
        self.kind = kind
        self.elem = elem
        self.nullable = nullable
        self.compact = compact
        self.tag = tag
        self.default = default
        self.struct = struct

    def wire(self):
        """The wire shape only (names and defaults excluded): for conflict checks."""
        return (self.kind, self.elem, self.nullable, self.compact, self.tag,
                self.struct.wire() if self.struct else None)

    def full(self):
        return (self.attr, self.kind, self.elem, self.nullable, self.compact, self.tag,
                repr(self.default), self.struct.cls if self.struct else None,
                self.struct.full() if self.struct else None)


class Layout:
    """A struct at one version: its class, ordered untagged fields, tagged fields (by tag), and
    whether it ends with a tagged-field section (flexible versions)."""
    __slots__ = ("cls", "fields", "tagged", "flexible", "_full")

    def __init__(self, cls, fields, tagged, flexible):
        self.cls = cls
        self.fields = fields
        self.tagged = sorted(tagged, key=lambda f: f.tag)
        self.flexible = flexible
        self._full = None

    def wire(self):
        return (self.flexible, tuple(f.wire() for f in self.fields),
                tuple(f.wire() for f in self.tagged))

    def full(self):
        if self._full is None:
            self._full = (self.cls, self.flexible, tuple(f.full() for f in self.fields),
                          tuple(f.full() for f in self.tagged))
        return self._full


def default_value(raw, kind, nullable, where):
    """The spec default of a field, as the Python value an absent field gets."""
    if kind in FIXED:
        if kind == "bool":
            if raw in (None, ""):
                return False
            if isinstance(raw, bool):
                return raw
            if raw in ("true", "false"):
                return raw == "true"
            raise SpecError(f"{where}: bad bool default {raw!r}")
        if kind == "float64":
            return float(raw) if raw not in (None, "") else 0.0
        if raw in (None, ""):
            return 0
        if isinstance(raw, bool):
            raise SpecError(f"{where}: bad numeric default {raw!r}")
        return raw if isinstance(raw, int) else int(str(raw), 0)
    if raw == "null":
        if not nullable:
            raise SpecError(f"{where}: null default for a non-nullable field")
        return None
    if kind == "string":
        return "" if raw is None else str(raw)
    if raw not in (None, ""):
        raise SpecError(f"{where}: unsupported default {raw!r} for {kind}")
    if kind == "uuid":
        return "UUID0"  # emitted as the zero UUID constant
    if kind in ("bytes", "records"):
        return b""
    if kind == "array":
        return []
    return "STRUCT"  # a struct with every field at its default, as Kafka's generated code does


class Builder:
    """Builds layouts for the versions of one spec; class names are prefixed by `top_cls`.

    `classes` maps each class name to {attr: default}: every field any version defines, with the
    value it gets when absent. Build the newest versions first so their defaults win.
    """

    def __init__(self, top_cls):
        self.top_cls = top_cls
        self.classes: dict = {top_cls: {}}

    def layout(self, spec, version):
        flexible = version in spec["flexible"]
        return self._struct(self.top_cls, spec["fields"], spec, version, flexible, spec["file"])

    def _struct(self, cls, raw_fields, spec, v, flexible, where):
        fields, tagged = [], []
        attrs = self.classes.setdefault(cls, {})
        for rf in raw_fields:
            f = self._field(rf, spec, v, flexible, f"{where}.{rf['name']}", attrs)
            if f is not None:
                (tagged if f.tag is not None else fields).append(f)
        names = [f.attr for f in fields + tagged]
        if len(set(names)) != len(names):
            raise SpecError(f"{where}: two fields with the same name at v{v}")
        tags = [f.tag for f in tagged]
        if len(set(tags)) != len(tags):
            raise SpecError(f"{where}: duplicate tags at v{v}")
        return Layout(cls, fields, tagged, flexible)

    def _field(self, rf, spec, v, flexible, where, attrs):
        t = rf["type"]
        is_array = t.startswith("[]")
        base = t[2:] if is_array else t
        if base in SCALARS or base == "records":
            if is_array and base == "records":
                raise SpecError(f"{where}: array of records")
            if rf["fields"]:
                raise SpecError(f"{where}: a {t} field with sub-fields")
            kind, elem = ("array", base) if is_array else (base, None)
            sub = None
        else:
            kind, elem = ("array", "struct") if is_array else ("struct", None)
            sub = rf["fields"]
            if sub is None:
                common = spec["common"].get(base)
                if common is None:
                    raise SpecError(f"{where}: unknown type {t!r}")
                sub = common["fields"]
        ever_nullable = not rf["nullable"].empty or rf["default"] == "null"
        # The value of a field absent from a version (a struct absent from a version is None).
        absent = None if kind == "struct" else default_value(rf["default"], kind, ever_nullable, where)
        attrs.setdefault(snake(rf["name"]), absent)
        if v not in rf["versions"]:
            return None
        if v in rf["tagged"] and not flexible:
            raise SpecError(f"{where}: tagged at non-flexible version {v}")
        tag = rf["tag"] if v in rf["tagged"] else None
        nullable = v in rf["nullable"]
        compact = flexible and (rf["flexible"] is None or v in rf["flexible"])
        struct = None
        if sub is not None:
            struct = self._struct(f"{self.top_cls}_{base}", sub, spec, v, flexible, where)
        default = default_value(rf["default"], kind, nullable or ever_nullable, where)
        return Field(rf["name"], kind, elem, nullable, compact, tag, default, struct)

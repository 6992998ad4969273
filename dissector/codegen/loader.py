"""Stage 1: strict loading of Kafka's JSON message specs.

The files are JSON with `//` line comments (which may contain URLs, so a comment only starts
outside a string). Unknown keys are errors: a new spec feature must be understood before it is
decoded. Loosely typed values ("ignorable": "true", "tag": "0", numeric defaults) are normalised
here so that later stages see one type per key.
"""
from __future__ import annotations

import json
import re
from pathlib import Path


class SpecError(Exception):
    """A spec file the generator does not understand."""


TOP_KEYS = {"apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions", "fields",
            "commonStructs", "latestVersionUnstable", "deprecatedVersions"}
FIELD_KEYS = {"name", "type", "versions", "about", "fields", "default", "entityType",
              "nullableVersions", "ignorable", "mapKey", "taggedVersions", "tag", "zeroCopy",
              "flexibleVersions"}
COMMON_STRUCT_KEYS = {"name", "versions", "fields"}
SPEC_TYPES = {"request", "response", "header", "data"}


def strip_comments(text: str) -> str:
    """Remove `//` comments that are outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            if c == '"':
                in_string = False
            out.append(c)
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


_RANGE = re.compile(r"^(\d+)(?:(\+)|-(\d+))?$")


class Versions:
    """A version range from a spec: "none", "3", "3+", "3-7". `hi` is None for open ranges."""
    __slots__ = ("lo", "hi", "empty")

    def __init__(self, text, where=""):
        if not isinstance(text, str):
            raise SpecError(f"{where}: version range must be a string, got {text!r}")
        text = text.strip()
        self.empty = text == "none"
        self.lo = self.hi = None
        if self.empty:
            return
        m = _RANGE.match(text)
        if not m:
            raise SpecError(f"{where}: bad version range {text!r}")
        self.lo = int(m.group(1))
        self.hi = None if m.group(2) else int(m.group(3) or m.group(1))
        if self.hi is not None and self.hi < self.lo:
            raise SpecError(f"{where}: empty version range {text!r}")

    def __contains__(self, v):
        return not self.empty and v >= self.lo and (self.hi is None or v <= self.hi)

    def __repr__(self):
        if self.empty:
            return "none"
        return f"{self.lo}+" if self.hi is None else f"{self.lo}-{self.hi}"


NONE = Versions("none")


def _bool(value, where):
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise SpecError(f"{where}: expected a boolean, got {value!r}")


def _check_keys(obj, allowed, where):
    if not isinstance(obj, dict):
        raise SpecError(f"{where}: expected an object")
    unknown = set(obj) - allowed
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)}")


def _field(raw, where):
    _check_keys(raw, FIELD_KEYS, where)
    for key in ("name", "type", "versions"):
        if key not in raw:
            raise SpecError(f"{where}: missing {key!r}")
    where = f"{where}.{raw['name']}"
    f = {
        "name": raw["name"],
        "type": raw["type"],
        "versions": Versions(raw["versions"], where),
        "nullable": Versions(raw.get("nullableVersions", "none"), where),
        "tagged": Versions(raw.get("taggedVersions", "none"), where),
        "tag": None,
        "default": raw.get("default"),
        "ignorable": _bool(raw.get("ignorable", False), where),
        "flexible": Versions(raw["flexibleVersions"], where) if "flexibleVersions" in raw else None,
        "fields": None,
    }
    if "tag" in raw:
        tag = raw["tag"]
        if isinstance(tag, str) and tag.isdigit():
            tag = int(tag)
        if not isinstance(tag, int) or isinstance(tag, bool) or tag < 0:
            raise SpecError(f"{where}: bad tag {raw['tag']!r}")
        f["tag"] = tag
    if (f["tag"] is None) != f["tagged"].empty:
        raise SpecError(f"{where}: 'tag' and 'taggedVersions' must come together")
    if "fields" in raw:
        f["fields"] = [_field(x, where) for x in raw["fields"]]
    for key in ("mapKey", "zeroCopy"):
        if key in raw:
            _bool(raw[key], where)
    return f


def load_spec(path: Path) -> dict:
    """Load one spec file into a normalised dict (raises SpecError on anything unexpected)."""
    where = Path(path).name
    try:
        raw = json.loads(strip_comments(Path(path).read_text(encoding="utf-8")))
    except json.JSONDecodeError as e:
        raise SpecError(f"{where}: not JSON after removing comments: {e}") from None
    _check_keys(raw, TOP_KEYS, where)
    for key in ("name", "type", "validVersions"):
        if key not in raw:
            raise SpecError(f"{where}: missing {key!r}")
    if raw["type"] not in SPEC_TYPES:
        raise SpecError(f"{where}: unknown spec type {raw['type']!r}")
    if raw["type"] in ("request", "response") and not isinstance(raw.get("apiKey"), int):
        raise SpecError(f"{where}: request/response without an integer apiKey")
    spec = {
        "file": where,
        "name": raw["name"],
        "type": raw["type"],
        "api_key": raw.get("apiKey"),
        "valid": Versions(raw["validVersions"], where),
        "flexible": Versions(raw.get("flexibleVersions", "none"), where),
        "fields": [_field(x, where) for x in raw.get("fields", [])],
        "common": {},
        "unstable_latest": _bool(raw.get("latestVersionUnstable", False), where),
    }
    for cs in raw.get("commonStructs", []):
        _check_keys(cs, COMMON_STRUCT_KEYS, f"{where}.commonStructs")
        name = cs["name"]
        if name in spec["common"]:
            raise SpecError(f"{where}: duplicate common struct {name}")
        spec["common"][name] = {
            "versions": Versions(cs["versions"], f"{where}.{name}"),
            "fields": [_field(x, f"{where}.{name}") for x in cs["fields"]],
        }
    return spec

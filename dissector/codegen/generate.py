"""Drives the three stages: the spec union -> prepared layouts -> generated module sources."""
from __future__ import annotations

from pathlib import Path

from .emit_decoders import HEADER, Module
from .errors_java import error_table
from .loader import SpecError
from .model import Builder, snake
from .union import FOLDERS, Union

# Same (spec, version) with a different wire layout in different folders. Only this one is
# expected: ReadShareGroupStateSummaryResponse v0 gained LeaderEpoch in 4.1. Up to 4.0 the API was
# `latestVersionUnstable` (brokers do not speak it unless unstable versions are enabled); from 4.1
# v0 is the stable version brokers use, so v0 decodes with the 4.1+ layout (the newest-wins rule).
KNOWN_CONFLICTS = {("response", 87, 0): "kafka-4.1"}


def check_conflicts(union: Union):
    """Fail loudly on any (spec, version) whose layout differs between folders, except the known one."""
    for ident in sorted(union.specs, key=repr):
        per = union.specs[ident]
        for v in sorted(union.owner[ident]):
            shapes = {}
            for folder in FOLDERS:
                spec = per.get(folder)
                if spec is not None and v in spec["valid"]:
                    shapes.setdefault(Builder("X").layout(spec, v).wire(), []).append(folder)
            if len(shapes) == 1:
                continue
            expected = KNOWN_CONFLICTS.get(ident + (v,))
            first_new = [folders[0] for folders in shapes.values()]
            if expected is None or len(shapes) != 2 or expected not in first_new:
                raise SpecError(f"unexpected layout conflict for {ident} v{v}: {list(shapes.values())}")
            if union.owner[ident][v] not in shapes[[s for s in shapes if expected in shapes[s]][0]]:
                raise SpecError(f"{ident} v{v}: the union does not pick the {expected} layout")


def api_name(union, key):
    return union.newest(("request", key))["name"][:-len("Request")]


def _emit_spec(module, ident, union, cls, table):
    """Add every version of one spec to `module` as `table` = {version: (reader, schema)}."""
    builder = Builder(cls)
    layouts = {}
    for v in sorted(union.owner[ident], reverse=True):  # newest first: its defaults win
        layouts[v] = builder.layout(union.spec_for(ident, v), v)
    module.add_classes(builder.classes)
    module.tables.append((table, {v: module.register(layouts[v]) for v in sorted(layouts)}))


def flexible_from(union, ident):
    versions = [v for v in sorted(union.owner[ident]) if v in union.spec_for(ident, v)["flexible"]]
    return versions[0] if versions else None


def generate(specs_dir: Path) -> dict:
    """{relative path under dissector/protocol/generated: file content}."""
    union = Union(specs_dir)
    check_conflicts(union)
    files = {}
    keys = sorted(k for t, k in union.owner if t == "request")
    apis, modules, unreleased = [], [], []
    for key in keys:
        req, resp = ("request", key), ("response", key)
        if set(union.owner[req]) != set(union.owner.get(resp, {})):
            raise SpecError(f"api {key}: request and response versions differ")
        name = api_name(union, key)
        versions = sorted(union.owner[req])
        if versions != list(range(versions[0], versions[-1] + 1)):
            raise SpecError(f"api {key}: versions are not contiguous: {versions}")
        apis.append(f"    {key}: ({name!r}, {versions[0]}, {versions[-1]}, "
                    f"{flexible_from(union, req)!r}, {flexible_from(union, resp)!r}),\n")
        mod = snake(name)
        modules.append(f"    {key}: {mod!r},\n")
        unreleased += [(key, v) for v in versions if not union.released(req, v)]
        m = Module()
        _emit_spec(m, req, union, f"{name}Request", "REQUEST")
        _emit_spec(m, resp, union, f"{name}Response", "RESPONSE")
        files[f"{mod}.py"] = m.source()
    for ident in sorted(i for i in union.owner if i[0] in ("data", "header")):
        m = Module()
        _emit_spec(m, ident, union, ident[1], "VERSIONS")
        files[f"{snake(ident[1])}.py"] = m.source()
    files["apis.py"] = (
        HEADER + '"""Every api key this build decodes, from the union of the spec folders."""\n\n'
        "APIS = {  # api_key: (name, min_version, max_version, first_flexible_request_version,\n"
        "          #           first_flexible_response_version)\n" + "".join(apis) + "}\n\n"
        "# (api_key, version) pairs defined only by trunk specs, in no released Kafka.\n"
        f"UNRELEASED = frozenset({sorted(unreleased)!r})\n\n"
        "# api_key -> module under dissector.protocol.generated\n"
        "MODULES = {\n" + "".join(modules) + "}\n")
    ref = Path(specs_dir) / "reference"
    errors = error_table([ref / "Errors.java", ref / "kafka-3.9" / "Errors.java"])
    files["errors.py"] = (
        HEADER + '"""Error codes from Errors.java (trunk and 3.9): code -> (NAME, retriable)."""\n\n'
        "ERRORS = {\n" + "".join(f"    {c}: ({n!r}, {r}),\n" for c, (n, r) in errors.items()) + "}\n")
    files["__init__.py"] = HEADER + '"""Decoders generated from Kafka\'s message specs."""\n'
    return files

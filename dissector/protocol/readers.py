"""The body readers decode.tables() hands out: the generated ones, or their compiled twin.

protocol/_reader.c interprets a generated schema table in C and builds the same objects the
generated reader of that table builds (about five times faster, most of the bodies level's
decoding); it fails where that reader fails and hands anything else to it. Where the extension
was not built (no C compiler), the generated readers run as they are.
"""
from __future__ import annotations

from .primitives import DEFAULT_STRUCT, MAX_ELEMENTS, UUIDS, Malformed, uuid_at

try:
    from ._reader import Reader, configure, sums_in_place
    configure(DEFAULT_STRUCT, UUIDS, uuid_at, Malformed, MAX_ELEMENTS)
    COMPILED = True
except ImportError:
    Reader = sums_in_place = None
    COMPILED = False


def compiled_readers(versions):
    """{version: (reader, schema)} of a generated module, with each reader compiled from its
    schema when the extension is built (compiling happens at a reader's first call)."""
    if Reader is None:
        return versions
    return {v: (Reader(schema, reader), schema) for v, (reader, schema) in versions.items()}

"""Compare a kio entity (Aiven's generated Kafka types) with one of our decoded bodies."""
from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


def plain(value):
    """kio's typed values as the raw wire values our decoders keep."""
    if isinstance(value, datetime.timedelta):
        return value // _MS
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // _MS
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value)
    return value


def differences(kio_obj, ours, path="body", renamed=None):
    """A list of human-readable differences (empty when equal); `renamed` maps kio field names
    to ours where the specs renamed a field after kio's version."""
    renamed = renamed or {}
    out = []
    if dataclasses.is_dataclass(kio_obj):
        if ours is None:
            return [f"{path}: kio has a struct, ours is None"]
        for f in dataclasses.fields(kio_obj):
            attr = renamed.get(f.name, f.name)
            if not hasattr(ours, attr) and attr.endswith("_") and hasattr(ours, attr[:-1]):
                attr = attr[:-1]  # kio appends "_" to names that shadow Python builtins (id_)
            if not hasattr(ours, attr) and hasattr(ours, attr + "_ms"):
                attr += "_ms"  # kio names time fields without their unit suffix
            if not hasattr(ours, attr):
                out.append(f"{path}.{f.name}: missing from ours")
                continue
            out += differences(getattr(kio_obj, f.name), getattr(ours, attr), f"{path}.{attr}", renamed)
        return out
    if isinstance(kio_obj, tuple):
        if not isinstance(ours, list) or len(ours) != len(kio_obj):
            return [f"{path}: kio {len(kio_obj)} items, ours {ours!r:.80}"]
        for i, (a, b) in enumerate(zip(kio_obj, ours)):
            out += differences(a, b, f"{path}[{i}]", renamed)
        return out
    a, b = plain(kio_obj), ours
    if kio_obj is None and isinstance(ours, int) and ours == -1:
        a = -1  # kio maps the "no timestamp" value -1 of datetime fields to None
    if isinstance(b, (bytes, memoryview)):
        b = bytes(b)  # raw records, or an Embedded structure's bytes
    if isinstance(a, uuid.UUID) or isinstance(b, uuid.UUID):
        a = a or uuid.UUID(int=0)
        b = b or uuid.UUID(int=0)
    if a != b or type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int)):
        out.append(f"{path}: kio {a!r:.60} != ours {b!r:.60}")
    return out

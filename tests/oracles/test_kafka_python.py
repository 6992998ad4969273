"""Differential test for the (api, version) pairs kio lacks (versions removed in Kafka 4.0,
share-group v0, trunk-only versions): kafka-python's schema engine (an implementation nobody here
wrote) builds each message from its spec file, fills it with random values from its own reading
of the spec, encodes it; our decoders must read the same values. And a coverage check: every one
of the pairs this build decodes is checked by kio, by kafka-python, or by a hand-annotated vector."""
import glob
import os
import random
from pathlib import Path

import pytest

from tests.support import require_module, require_path
from dissector.protocol.decode import decode_request_body, decode_response_body, tables
from dissector.protocol.generated.apis import APIS

from . import kafka_python as kp
from .test_kio import PAIRS as KIO_PAIRS

# Newest first: any folder that defines a version has the same layout for it (the generator
# fails on any other conflict), so the first one found is used.
FOLDERS = ("latest", "kafka-4.3", "kafka-4.2", "kafka-4.1", "kafka-4.0", "kafka-3.9", "trunk-2024-10")
ALL_PAIRS = [(k, v) for k in sorted(APIS) for v in range(APIS[k][1], APIS[k][2] + 1)]
KIO = {(k, v) for k, v, d in KIO_PAIRS if (k, v, 1 - d) in set(KIO_PAIRS)}
NOT_IN_KIO = [p for p in ALL_PAIRS if p not in KIO]
EXAMPLES = 25

# Pairs checked by hand-annotated vectors elsewhere: ControlledShutdown v0's header without a
# client id (tests/protocol/test_special_cases.py; its body is checked here as well).
VECTORS = {(7, 0): "tests/protocol/test_special_cases.py::test_controlled_shutdown_v0_header_has_no_client_id"}


def specs_root():
    env = os.environ.get("KAFKA_SPECS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "kafka-specs"


_index = {}


def spec_path(api_key, version, kind):
    """The spec file ("Request" or "Response") that defines (api_key, version)."""
    if not _index:
        from kafka.protocol.schemas.fields.base import BaseField
        for folder in FOLDERS:
            for path in sorted(glob.glob(str(specs_root() / folder / "*.json"))):
                spec = kp.load_spec(path)
                if spec.get("type") in ("request", "response"):
                    lo, hi = BaseField.parse_versions(spec["validVersions"])
                    _index.setdefault((spec["apiKey"], spec["type"]), []).append((lo, hi, path))
    for lo, hi, path in _index.get((api_key, kind.lower()), []):
        if lo <= version <= hi:
            return path
    return None


def test_pairs_kio_lacks():
    require_module("kio")
    assert len(ALL_PAIRS) == 368 and len(KIO) == 302 and len(NOT_IN_KIO) == 66


@pytest.mark.parametrize("k,v", NOT_IN_KIO, ids=[f"{APIS[k][0]}v{v}" for k, v in NOT_IN_KIO])
@pytest.mark.parametrize("kind", ["Request", "Response"])
def test_kafka_python_encoded_messages_decode_identically(k, v, kind):
    require_module("kafka")
    require_path(specs_root())
    path = spec_path(k, v, kind)
    assert path is not None, f"no spec defines {APIS[k][0]} {kind} v{v}"
    cls = kp.class_from_spec(path)
    decode = decode_request_body if kind == "Request" else decode_response_body
    rnd = random.Random(f"kafka-python/{k}/{v}/{kind}")
    for _ in range(EXAMPLES):
        values = kp.random_values(cls._struct, v, rnd)
        raw = bytes(kp.build(cls, values, v).encode())
        issues = []
        body = decode(raw, 0, k, v, issues)
        assert [i for i in issues if i.code != "kafka.bad_embedded"] == []
        assert kp.differences(cls._struct, v, values, body) == []


def test_spec_classes_leave_kafka_pythons_response_registry_as_it_was():
    """A client later in the same process must still find kafka-python's own response classes."""
    require_module("kafka")
    require_path(specs_root())
    from kafka.protocol.api_header import ResponseClassRegistry
    registry = ResponseClassRegistry._response_class_registry
    before = dict(registry)
    assert 18 in before, "kafka-python registers its ApiVersions response"
    kp.class_from_spec(spec_path(18, 0, "Response"))
    assert registry.keys() == before.keys() and all(registry[k] is before[k] for k in before)


def _old_cases():
    try:
        classes = kp.old_classes()
    except ImportError:
        return []
    # Left out where kafka-python's old classes disagree with the spec: flexible versions (some
    # written with the classic encodings, e.g. DescribeAcls v2, flexible per the spec) and
    # DescribeLogDirs v0's request (partitions as one int32; the spec has []int32).
    return sorted((k, v, d) for k, v, d in classes
                  if k in APIS and APIS[k][1] <= v <= APIS[k][2]
                  and (APIS[k][3 + d] is None or v < APIS[k][3 + d])
                  and (k, v, d) != (35, 0, 0))


OLD = _old_cases()


@pytest.mark.parametrize("k,v,d", OLD, ids=[f"{APIS[k][0]}v{v}{'req' if d == 0 else 'resp'}" for k, v, d in OLD])
def test_kafka_python_hand_written_classes(k, v, d):
    """kafka-python's hand-written classes (kafka.protocol.old, Kafka 0.8 to 2.x versions)."""
    cls = kp.old_classes()[(k, v, d)]
    entry = (tables(k)[d])[v]
    decode = (decode_request_body, decode_response_body)[d]
    rnd = random.Random(f"kafka-python-old/{k}/{v}/{d}")
    for _ in range(EXAMPLES):
        values = kp.old_random(cls.SCHEMA, rnd)
        raw = cls.SCHEMA.encode(values)
        issues = []
        body = decode(raw, 0, k, v, issues)
        assert [i for i in issues if i.code != "kafka.bad_embedded"] == []
        assert kp.old_differences(cls.SCHEMA, values, entry[1], body) == []


def test_kafka_python_old_classes_cover_removed_versions():
    require_module("kafka")
    old = {(k, v) for k, v, d in OLD if (k, v, 1 - d) in set(OLD)}
    assert {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (8, 0), (8, 1),
            (9, 0), (19, 0), (19, 1), (20, 0)} <= old


def test_every_pair_has_an_independent_check():
    require_module("kio")
    require_module("kafka")
    require_path(specs_root())
    by_kafka_python = {(k, v) for k, v in NOT_IN_KIO
                       if spec_path(k, v, "Request") and spec_path(k, v, "Response")}
    uncovered = [p for p in ALL_PAIRS if p not in KIO and p not in by_kafka_python and p not in VECTORS]
    assert uncovered == []

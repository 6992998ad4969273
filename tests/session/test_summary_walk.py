"""The compiled summary walkers (dissector.summary_walk) against the generic body walk.

Both walk the same decoded bodies and must have the same effects: error codes in the same order,
topics in first-seen order, partition entries, record sets decoded in place (same counts and
issues), topic ids learned from responses and names filled in from them. Run over a random body
of every (api, version) in both directions (generated from the schema tables, so every layout's
walker is compiled and run), with some topic ids known beforehand, and over every message of the
real captures.
"""
from __future__ import annotations

import random
from pathlib import Path
from uuid import UUID

import pytest

from dissector.decoding import BodyDecoder, Summary
from dissector.pipeline import dissect
from dissector.protocol.decode import tables
from dissector.protocol.generated.apis import APIS
from dissector.protocol.headers import parse_request_header, parse_response_header
from dissector.protocol.primitives import Body
from dissector.records import decode_record_set
from dissector.records.record_set import walk_set
from dissector.records.model import RecordSet
from dissector.summary_walk import walker
from tests.protocol.encoder import body_uuids, encode, random_body

UUID0 = UUID(int=0)

CAPTURES = sorted(p for p in (Path(__file__).resolve().parents[2] / "captures").glob("*.pcap")
                  if "mss" not in p.name)


def _shape(obj):
    """A comparable form of a walked body (record sets by their counts and issue codes)."""
    if isinstance(obj, RecordSet):
        return ("RecordSet", obj.record_count, obj.size, [i.code for i in obj.issues])
    if isinstance(obj, Body):
        return (type(obj).__name__, [(a, _shape(getattr(obj, a, None))) for a in obj.__slots__])
    if isinstance(obj, list):
        return [_shape(x) for x in obj]
    if isinstance(obj, memoryview):
        return bytes(obj)
    return obj


# The generic walk the compiled walkers replaced: one recursive visit per body object, driven by
# attribute names and runtime types; `self` is the BodyDecoder.
def _reference_walk(self, obj, s, bad_sets, learn, in_topic, in_partition):
    cls = type(obj)
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(obj)
    name_attr, has_topic_id, attrs = plan
    if name_attr is not None:
        name = getattr(obj, name_attr, None)
        topic_id = getattr(obj, "topic_id", None) if has_topic_id else None
        if topic_id is not None and topic_id != UUID0:
            if name and learn:
                self.topic_names[topic_id] = name
            elif not name and topic_id in self.topic_names:
                name = self.topic_names[topic_id]
                setattr(obj, name_attr, name)
        if in_topic and isinstance(name, str) and name not in s.topics:
            s.topics.append(name)
    elif in_topic and has_topic_id:   # id-only topics (ShareFetch, ShareAcknowledge)
        name = self.topic_names.get(getattr(obj, "topic_id", None))
        if name is not None and name not in s.topics:
            s.topics.append(name)
    if in_partition:
        s.partitions += 1
    for attr in attrs:
        value = getattr(obj, attr, None)
        if value is None:
            continue
        if attr == "error_code":
            if value:
                s.error_codes.append(value)
        elif attr == "records":
            if isinstance(value, (bytes, bytearray, memoryview)):
                rs = decode_record_set(value, records=self.full_records,
                                       budget=self._budget)
                setattr(obj, attr, rs)
                _add_record_set(s, rs)
                if rs.issues:
                    bad_sets.append((value, rs))
        elif value.__class__ is list:
            if value and isinstance(value[0], Body):
                topic_list = "topic" in attr
                partition_list = not topic_list and "partition" in attr
                for item in value:
                    _reference_walk(self, item, s, bad_sets, learn, topic_list, partition_list)
        elif isinstance(value, Body):
            _reference_walk(self, value, s, bad_sets, learn, False, False)


def _add_record_set(s, rs):
    s.records += rs.record_count
    s.records_bytes += rs.size
    for b in rs.batches:
        if s.uncompressed_bytes is None:
            break
        if b.codec == 0:
            s.uncompressed_bytes += b.size
        elif b.uncompressed_size is not None:
            s.uncompressed_bytes += b.uncompressed_size
        else:
            s.uncompressed_bytes = None


_SCALARS = (bool, int, float, str, UUID)
_PLANS = {}   # body class -> (topic name attribute, has topic_id, attributes worth visiting)


def _plan(obj):
    """What the walk needs of a body class: a field's type is fixed by the spec, so a scalar seen
    once (other than an error code) never needs a visit; None may be a null struct or array."""
    slots = type(obj).__slots__
    name_attr = "topic" if "topic" in slots else ("name" if "name" in slots else None)
    attrs = tuple(a for a in slots if a in ("error_code", "records")
                  or (a != "unknown_tags" and not isinstance(getattr(obj, a, None), _SCALARS)))
    return name_attr, "topic_id" in slots, attrs


def _walk_both(data, offset, key, version, direction, known=None, full=False):
    """(generic results, compiled results): summary fields, learned names, walked body."""
    results = []
    schema = tables(key)[direction][version][1]
    for compiled in (False, True):
        d = BodyDecoder(records=full)
        d.topic_names = dict(known or {})
        body, _ = tables(key)[direction][version][0](data, offset)
        s, bad = Summary(), []
        if compiled:
            walker(schema)(body, s, bad, bool(direction), d.topic_names, d._budget, full,
                           walk_set)
        else:
            _reference_walk(d, body, s, bad, bool(direction), False, False)
        results.append((s.error_codes, s.topics, s.partitions, s.records, s.records_bytes,
                        s.uncompressed_bytes, len(bad), d.topic_names, _shape(body)))
    return results


PAIRS = [(k, v, d) for k in sorted(APIS) if tables(k) is not None
         for d in (0, 1) for v in sorted(tables(k)[d])]


@pytest.mark.parametrize("key,version,direction", PAIRS,
                         ids=[f"{APIS[k][0]}-v{v}-{'resp' if d else 'req'}" for k, v, d in PAIRS])
def test_random_bodies(key, version, direction):
    schema = tables(key)[direction][version][1]
    rnd = random.Random(f"{key}/{version}/{direction}")
    for _ in range(4):
        body = random_body(schema, rnd, tame=True)
        # every other topic id is known by name beforehand: resolving and learning both happen
        known = {u: f"known-{i}" for i, u in enumerate(body_uuids(body)) if i % 2 and u.int}
        generic, compiled = _walk_both(encode(schema, body), 0, key, version, direction, known)
        assert compiled == generic


@pytest.mark.parametrize("full", [False, True], ids=["batch-headers", "all-records"])
@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
def test_real_captures(capture, full):
    seen = 0
    for ex in dissect(capture, auto=True):
        k, v = ex.api_key, ex.api_version
        if k is None or tables(k) is None or v not in tables(k)[0]:
            continue
        for direction, frame in ((0, ex.request), (1, ex.response)):
            if frame is None:
                continue
            data = bytes(frame.data)
            body_offset = (parse_request_header(data)[5] if direction == 0
                           else parse_response_header(data, k, v)[2])
            try:
                tables(k)[direction][v][0](data, body_offset)
            except Exception:
                continue   # a malformed body: the interpreter's, not a walker's business
            generic, compiled = _walk_both(data, body_offset, k, v, direction, full=full)
            assert compiled == generic
            seen += 1
    assert seen > 20   # every capture has more messages than this

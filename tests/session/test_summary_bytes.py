"""The summary walk on a body's bytes (protocol/_reader.c Reader.summarize, planned by
dissector.summary_plan) against decoding the body and walking the objects (summary_walk).

Both must give the same summary (error codes in order, topics, partitions, record counts and
sizes, the body's error_code and throttle time), the same issues and the same learned topic ids:
on random bodies of every (api, version) in both directions, whole, cut short, with bytes
flipped or added; on every message of the real captures; and in the read command's table. The
byte walk must fail exactly where the compiled reader fails (the body is then decoded instead).
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from dissector.decoding import BodyDecoder
from dissector.pipeline import dissect
from dissector.protocol.decode import decode_struct, tables
from dissector.protocol.embedded import SPECIAL
from dissector.protocol.generated.apis import APIS
from dissector.protocol.primitives import Body
from dissector.summary_plan import plan
from dissector.tables import exchange_row
from tests.protocol.encoder import body_uuids, encode, random_body

CAPTURES = sorted(p for p in (Path(__file__).resolve().parents[2] / "captures").glob("*.pcap")
                  if "mss" not in p.name)
PAIRS = [(k, v, d) for k in sorted(APIS) if tables(k) is not None
         for d in (0, 1) for v in sorted(tables(k)[d])]


def _compiled(entry):
    reader = entry[0]
    if not hasattr(reader, "summarize"):
        pytest.fail("the compiled body reader is not built (pip install -e . builds it)")
    return reader


def _summary(s):
    return (s.error_codes, s.topics, s.partitions, s.records, s.records_bytes,
            s.uncompressed_bytes, s.error_code, s.throttle_time_ms)


def _both(data, key, version, direction, known, full=False):
    """(decoded and walked, walked on bytes or None): summary, issues, learned names."""
    entry = tables(key)[direction][version]
    learn = bool(direction)   # responses teach topic ids
    out = []
    for keep in (True, False):
        d = BodyDecoder(records=full, keep_bodies=keep)
        d.topic_names = dict(known)
        issues = []
        if keep:
            body = decode_struct(data, 0, entry, issues)
            s = d._summary(data, body, issues, learn, key, version) if body is not None else None
        else:
            s = d._walk_bytes(data, 0, entry, issues, learn)
        out.append(None if s is None else
                   (_summary(s), [(i.code, i.stream_offset) for i in issues], d.topic_names))
    return out


def _random_bodies(entry, rnd, n=4):
    """(bytes, known topic names) of `n` random bodies of the layout: every other topic id in a
    body is known by name beforehand, so that resolving and learning both happen."""
    for _ in range(n):
        body = random_body(entry[1], rnd)
        ids = [u for u in body_uuids(body) if u.int]
        yield encode(entry[1], body), {u: f"known-{i}" for i, u in enumerate(ids) if i % 2}


def _fails(reader, data):
    try:
        reader(data, 0)
    except Exception:
        return True
    return False


def _damaged(data, rnd):
    yield data[:rnd.randrange(len(data))] if data else data
    if data:
        flipped = bytearray(data)
        flipped[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        yield bytes(flipped)
    at = rnd.randrange(len(data) + 1)
    yield data[:at] + bytes([rnd.randrange(256)]) + data[at:]


@pytest.mark.parametrize("key,version,direction", PAIRS,
                         ids=[f"{APIS[k][0]}-v{v}-{'resp' if d else 'req'}" for k, v, d in PAIRS])
def test_random_bodies(key, version, direction):
    entry = tables(key)[direction][version]
    reader = _compiled(entry)
    assert plan(entry[1]) is not None   # every layout of the specs is walked on its bytes
    rnd = random.Random(f"bytes/{key}/{version}/{direction}")
    for data, known in _random_bodies(entry, rnd):
        decoded, walked = _both(data, key, version, direction, known)
        assert walked == decoded
        for bad in _damaged(data, rnd):
            decoded, walked = _both(bad, key, version, direction, known)
            assert (walked is None) == _fails(reader, bad)
            if walked is not None:
                assert walked == decoded


@pytest.mark.parametrize("capture", CAPTURES, ids=[p.name for p in CAPTURES])
@pytest.mark.parametrize("level", ["bodies", "records"])
def test_read_table_alike(capture, level):
    """The exchange table, its issues and the learned topic ids, with and without bodies."""
    runs = []
    for keep in (True, False):
        rows, kept = [], []
        for ex in dissect(capture, auto=True, level=level, keep_bodies=keep):
            rows.append((exchange_row(ex), [(i.code, i.stream_offset) for i in ex.issues]))
            kept += [msg for msg in (ex.request_msg, ex.response_msg)
                     if msg is not None and msg.body is not None]
        runs.append((rows, kept))
    (rows, kept), (walked_rows, walked_kept) = runs
    assert walked_rows == rows
    assert len(kept) > 10
    # without bodies, only the special cases (ApiVersions, SASL, Envelope) and damaged ones keep theirs
    assert all(m.api_key in SPECIAL or m.issues for m in walked_kept)
    assert len(walked_kept) < len(kept)


def test_a_layout_whose_order_differs_is_decoded():
    class Partition(Body):
        __slots__ = ("error_code", "records", "unknown_tags")

    wire = (("records", "records", None, True, False, None, None, None),
            ("error_code", "int16", None, False, False, None, 0, None))
    assert plan((Partition, False, wire, (), ())) is None
    assert plan((Partition, False, wire[::-1], (), ())) is not None


class _Part(Body):
    __slots__ = ("error_code", "unknown_tags")


class _Top(Body):
    __slots__ = ("partitions", "replicas", "extra", "unknown_tags")


_PART = (_Part, True, (("error_code", "int16", None, False, False, None, 0, None),), (), ())
_TOP = (_Top, True, (("partitions", "array", "struct", False, True, None, [], _PART),
                     ("replicas", "array", "int32", False, True, None, [], None)),
        (("extra", "int32", None, False, False, 5, 0, None),), ())


def _synthetic():
    from dissector.protocol import readers
    if readers.Reader is None:
        pytest.fail("the compiled body reader is not built (pip install -e . builds it)")
    return readers, readers.Reader(_TOP, lambda *a: pytest.fail("fell back"))


def _walk(reader, data):
    d = BodyDecoder(keep_bodies=False)
    return d._walk_bytes(data, 0, (reader, _TOP), [], False)


def test_element_budget_counts_skipped_arrays():
    """Arrays walked and arrays skipped are charged to the element budget as read arrays are."""
    readers, reader = _synthetic()
    from dissector.protocol.primitives import DEFAULT_STRUCT, MAX_ELEMENTS, UUIDS, Malformed, uuid_at
    # 3 partitions (error 7), 3 replicas, no tags: 6 elements
    data = bytes([4]) + b"\x00\x07\x00" * 3 + bytes([4]) + b"\x00\x00\x00\x01" * 3 + b"\x00"
    assert _walk(reader, data).error_codes == [7, 7, 7]
    try:
        for budget in (2, 5, 6):
            readers.configure(DEFAULT_STRUCT, UUIDS, uuid_at, Malformed, budget)
            assert (_walk(reader, data) is None) == (budget < 6) == _fails(reader, data)
    finally:
        readers.configure(DEFAULT_STRUCT, UUIDS, uuid_at, Malformed, MAX_ELEMENTS)


@pytest.mark.parametrize("size,ok", [(4, True), (5, False), (3, False)])
def test_tagged_field_must_fill_its_size(size, ok):
    _, reader = _synthetic()
    data = bytes([1, 1]) + bytes([1, 5, size]) + b"\x00\x00\x00\x09" + b"\x00" * max(size - 4, 0)
    assert (_walk(reader, data) is not None) == ok == (not _fails(reader, data))


def _record_sets(rnd):
    """Record sets as clients send them (kafka-python's batches, plain and compressed), some
    damaged (a CRC off, cut short, a MessageSet among them), or empty."""
    from tests.records.builders import build
    items = [(1_700_000_000_000 + i, b"k", b"v" * i, []) for i in range(rnd.randrange(1, 4))]
    data = bytearray(b"".join(build(2, rnd.choice((0, 0, 1)), items, offset=10 * i)
                              for i in range(rnd.randrange(0, 3))))
    if data and rnd.random() < 0.3:
        data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    if rnd.random() < 0.1:
        data += build(1, 0, [(1, None, b"x", None)])
    if data and rnd.random() < 0.1:
        data = data[:rnd.randrange(len(data))]
    return bytes(data)


def _with_record_sets(body, rnd):
    if isinstance(body, list):
        for x in body:
            _with_record_sets(x, rnd)
    elif isinstance(body, Body):
        for attr in type(body).__slots__:
            if attr == "records":
                body.records = _record_sets(rnd)
            else:
                _with_record_sets(getattr(body, attr, None), rnd)


@pytest.mark.parametrize("key,version,direction", [(0, 3, 0), (0, 8, 0), (0, 9, 0), (1, 11, 1),
                                                   (1, 12, 1), (1, 16, 1)])
def test_record_sets_summed_in_place(key, version, direction):
    """Where set_sums is its decode_set, the byte walk does set_sums' common case itself
    (records/_batchsums.h, no view or call per set): the same walk as handing every set to
    set_sums, on bodies carrying real, compressed, damaged and empty record sets."""
    from dissector.records.record_set import set_sums
    entry = tables(key)[direction][version]
    reader, walk_plan = _compiled(entry), plan(entry[1])
    rnd = random.Random(f"in-place/{key}/{version}")
    summed = 0
    for _ in range(40):
        body = random_body(entry[1], rnd)
        _with_record_sets(body, rnd)
        data = encode(entry[1], body)
        got, handed = [
            _outcome(reader.summarize, data, 0, walk_plan, False, {}, decode_set, False,
                     [64 << 20])
            for decode_set in (set_sums, lambda *a: set_sums(*a))]
        assert got == handed
        summed += type(got) is tuple and got[4][1] > 0
    assert summed > 5   # records were summed, not only failed walks compared


def _outcome(fn, *args):
    try:
        end, codes, topics, bad, *rest = fn(*args)
    except Exception as e:   # noqa: BLE001 - both must fail alike
        return type(e)
    return end, codes, topics, [(bytes(raw), len(rs.issues)) for raw, rs in bad], rest


RECORD_PAIRS = [(k, v, d) for k, v, d in PAIRS if (k, d) in ((0, 0), (1, 1), (78, 1))]


def _sets(key, direction, body, summary):
    """records.columns.partitions of a message with `body` (None: not built) and `summary`."""
    from types import SimpleNamespace

    from dissector.records.columns import partitions
    from tests.records.test_headers_walk import _records_view
    msg = SimpleNamespace(body=body, summary=summary)
    ex = SimpleNamespace(api_key=key, request_msg=None if direction else msg,
                         response_msg=msg if direction else None)
    d, sets = partitions(ex) or (None, ())
    return [(d, t, p, _records_view(rs) if rs is not None else None) for t, p, rs in sets]


@pytest.mark.parametrize("key,version,direction", RECORD_PAIRS,
                         ids=[f"{APIS[k][0]}-v{v}" for k, v, _ in RECORD_PAIRS])
def test_record_sets_walked_on_bytes_are_the_decoded_bodies(key, version, direction):
    """At the records level the byte walk hands over each record set with its topic and
    partition (Summary.record_sets): what records.columns.partitions finds in the body decoded
    and walked, topic ids named where known (half of them) and by their text where not, on
    random and damaged bodies of every version of Produce, Fetch and ShareFetch."""
    entry = tables(key)[direction][version]
    rnd = random.Random(f"sets/{key}/{version}")
    for data, known in _random_bodies(entry, rnd):
        for bad in (data, *_damaged(data, rnd)):
            got = []
            for keep in (True, False):
                d = BodyDecoder(records=True, keep_bodies=keep)
                d.topic_names = dict(known)
                if keep:
                    decoded = decode_struct(bad, 0, entry, [])
                    s = None if decoded is None else d._summary(bad, decoded, [], bool(direction),
                                                                key, version)
                    got.append(None if s is None else _sets(key, direction, decoded, s))
                else:
                    s = d._walk_bytes(bad, 0, entry, [], bool(direction))
                    got.append(None if s is None else _sets(key, direction, None, s))
            if got[1] is not None:
                assert got[1] == got[0]

"""The body decoder's calls per message compiled (_decoding.c: BodyDecoder.request, response and
summarize) against their Python twins (py_request, py_response, py_summarize): the same
Message (header fields, tags, body as JSON or none, issues, summary), the same topic ids learned and
looked up in vain, on random bodies of every layout in both directions with their headers (whole,
cut short, with bytes flipped or added, with tagged fields in the header), and the same exchange
columns from random summaries. Whole captures, real and damaged, compiled against the twin:
tests/tcp/test_compiled_handler.py (twin "decoder")."""
from __future__ import annotations

import random
import struct

import pytest

from dissector import decoding
from dissector.decoding import BodyDecoder, Summary
from dissector.model import Exchange
from dissector.protocol.decode import tables
from dissector.protocol.generated.apis import APIS
from dissector.protocol.headers import request_header_version, response_header_version
from dissector.protocol.jsonify import to_json
from dissector.protocol.message import Message
from tests.protocol.encoder import body_uuids, encode, random_body
from tests.session.test_summary_bytes import PAIRS, _damaged
from tests.support import require_compiled


@pytest.fixture(autouse=True)
def compiled():
    require_compiled(decoding.COMPILED or None, "body decoder (_decoding.c)")


class Names(dict):
    """Topic names as dissector.parallel keeps them: the ids looked up in vain are told."""
    def __init__(self, known):
        super().__init__(known)
        self.misses = []

    def missed(self, key):
        self.misses.append(key)


def _message(m):
    s = m.summary
    return (type(m), m.api_key, m.api_version, m.correlation_id, m.client_id, m.header_tags,
            type(m.body).__name__, m.header_size,
            [(type(i), i.code, i.severity, i.detail, i.stream_offset) for i in m.issues],
            s if s is None else (type(s), s.error_codes, s.topics, s.partitions, s.records,
                                 s.records_bytes, s.uncompressed_bytes, s.error_code,
                                 s.throttle_time_ms),
            to_json(m.body))


def outcome(call, data, key, version, direction, known, keep, full, records_only=False):
    """What BodyDecoder's `call + "request"` or `call + "response"` made of `data` (None for a
    request whose header is unreadable): the Message, the topic ids known and looked up in vain,
    the message's record-set budget."""
    d = BodyDecoder(records=full, keep_bodies=keep, records_only=records_only)
    d.topic_names = Names(known)
    if direction:
        m = getattr(d, call + "response")(data, key, version)
    else:
        head = _request_head(data)
        if head is None:
            return None
        m = getattr(d, call + "request")(data, *head)
    return _message(m), dict(d.topic_names), d.topic_names.misses, d._budget


def _request_head(data):
    from dissector.protocol.headers import parse_request_header
    try:
        return parse_request_header(data)
    except ValueError:
        return None


def _framed(key, version, direction, body, rnd):
    """A request or response message around `body`, its header's tagged fields sometimes set."""
    corr = rnd.randrange(-5, 1 << 31)
    tags = b"\0" if rnd.random() < 0.8 else b"\x01\x00\x02ab"
    if direction:
        head = struct.pack(">i", corr)
        return head + (tags if response_header_version(key, version) else b"") + body
    head = struct.pack(">hhi", key, version, corr)
    if request_header_version(key, version) >= 1:
        client = rnd.choice((b"", b"client-1", None))
        head += struct.pack(">h", -1) if client is None else struct.pack(">h", len(client)) + client
    if request_header_version(key, version) == 2:
        head += tags
    return head + body


@pytest.mark.parametrize("key,version,direction", PAIRS,
                         ids=[f"{APIS[k][0]}-v{v}-{'resp' if d else 'req'}" for k, v, d in PAIRS])
def test_random_messages(key, version, direction):
    schema = tables(key)[direction][version][1]
    rnd = random.Random(f"decoder/{key}/{version}/{direction}")
    for _ in range(2):
        body = random_body(schema, rnd)
        ids = [u for u in body_uuids(body) if u.int]
        known = {u: f"known-{i}" for i, u in enumerate(ids) if i % 2}
        data = _framed(key, version, direction, encode(schema, body), rnd)
        for bad in (data, *_damaged(data, rnd)):
            keep = rnd.choice((False, False, False, True, {key}, {key + 1}))
            full = rnd.random() < 0.3
            only = rnd.random() < 0.3
            got = outcome("", bad, key, version, direction, known, keep, full, only)
            assert got == outcome("py_", bad, key, version, direction, known, keep, full, only)


def test_records_only_reads_no_recordless_side():
    """records_only: a Produce response's, a fetch request's and a group join's or sync's body
    are not read (no body, no summary, no issue, nothing learned), compiled and twin alike; every
    other message is as without it."""
    from dissector.decoding import RECORDS_UNREAD
    rnd = random.Random("records only")
    unread = groups = 0
    for key, version, direction in PAIRS:
        schema = tables(key)[direction][version][1]
        body = random_body(schema, rnd)
        known = {u: "known" for u in body_uuids(body) if u.int}
        data = _framed(key, version, direction, encode(schema, body), rnd)
        for call in ("", "py_"):
            def made(only, keep):
                return outcome(call, data, key, version, direction, dict(known), keep, True, only)
            for keep in (False, True):
                got = made(True, keep)
                if (bool(direction), key) not in RECORDS_UNREAD:
                    assert got == made(False, keep), (key, version, direction)
                elif got is not None:
                    message, names, misses, _ = got
                    assert message[6] == "NoneType" and message[8] == [] and message[9] is None
                    assert names == known and misses == []
                    unread += 1
                    groups += key in (11, 14)
    assert unread > 40 and groups >= 4 * 2   # JoinGroup v0-9 and SyncGroup v0-5, both sides


def test_bodies_kept_by_api_key():
    """keep_bodies as a set of api keys: their messages are as with every body kept, the
    others' as with none (walked on their bytes where their layout allows: same summary, no
    body)."""
    rnd = random.Random("kept by api key")
    walked = 0
    for key, version, direction in PAIRS[::5]:
        schema = tables(key)[direction][version][1]
        data = _framed(key, version, direction, encode(schema, random_body(schema, rnd)), rnd)
        for call in ("", "py_"):
            def made(keep):
                return outcome(call, data, key, version, direction, {}, keep, False)
            assert made({key, 999}) == made(True)
            other = made({key + 1})
            assert other == made(False)
            walked += other is not None and other[0][6] == "NoneType"
    assert walked > 50


def test_kept_bodies_are_decoded_without_the_twin(monkeypatch):
    """A kept body the reader reads to its end is decoded and walked by the compiled path, the
    same as the twin's (test_random_messages): the twin's _decoded is not asked, so a test of
    the two together cannot pass on the twin alone."""
    rnd = random.Random("kept in C")
    cases = []
    for key, version, direction in PAIRS[::7]:
        schema = tables(key)[direction][version][1]
        body = random_body(schema, rnd)
        cases.append((key, version, direction, _framed(key, version, direction,
                                                       encode(schema, body), rnd)))
    want = [outcome("py_", data, k, v, d, {}, True, True) for k, v, d, data in cases]

    def twin(*_):
        raise AssertionError("handed to the twin")
    monkeypatch.setattr(BodyDecoder, "_decoded", twin)
    compiled = 0
    for (key, version, direction, data), expected in zip(cases, want):
        try:
            got = outcome("", data, key, version, direction, {}, True, True)
        except AssertionError:   # the general path's (embedded structures, tagged headers)
            continue
        assert got == expected
        compiled += 1
    assert compiled > len(cases) * 3 // 4, (compiled, len(cases))


@pytest.mark.parametrize("call", ["", "py_"])
def test_api_versions_request_walked(call):
    """An ApiVersions request has nothing special (its response has: error 35 is read with
    the v0 layout), so without bodies kept it is walked on its bytes."""
    schema = tables(18)[0][3][1]
    data = _framed(18, 3, 0, encode(schema, random_body(schema, random.Random(3))),
                   random.Random(3))
    walked = outcome(call, data, 18, 3, 0, {}, False, False)
    assert walked[0][6] == "NoneType" and not walked[0][8]
    assert walked[0][9] == outcome(call, data, 18, 3, 0, {}, True, False)[0][9]


@pytest.mark.parametrize("call", ["", "py_"])
def test_api_versions_replies(call):
    """An ApiVersions reply is walked on its bytes, but one above v0 carrying error 35 is read
    with the v0 layout (protocol/embedded.py), by both twins, bodies kept or not."""
    from tests.protocol.test_special_cases import V0_SHAPED_35
    v3 = struct.pack(">hb", 0, 2) + struct.pack(">hhhb", 0, 0, 9, 0) + struct.pack(">ib", 0, 0)
    for keep in (False, True):
        for version in (1, 3, 4):
            m = getattr(BodyDecoder(keep_bodies=keep), call + "response")(
                struct.pack(">i", 7) + V0_SHAPED_35, 18, version)
            assert not m.issues and m.summary.error_code == 35
            assert [(k.api_key, k.max_version) for k in m.body.api_keys] == [(18, 3)]
        m = getattr(BodyDecoder(keep_bodies=keep), call + "response")(
            struct.pack(">i", 7) + v3, 18, 3)
        assert not m.issues and m.summary.error_code == 0 and (m.body is None) is not keep


@pytest.mark.parametrize("key,version", [(3, 12), (1, 16), (0, 11), (999, 0), (3, 999), (-1, 0)])
def test_odd_arguments(key, version):
    """Unknown api keys and versions, buffers that are not bytes, a short response."""
    for data in (b"", b"\0\0\0", b"\0\0\0\7\0\0\0\0\0", memoryview(b"\0\0\0\7\0\0\0\0\0"),
                 bytearray(b"\0\0\0\7\0\0\0\0\0\0\0\0\0")):
        got = [_message(getattr(BodyDecoder(keep_bodies=False), c + "response")(data, key,
                                                                                 version))
               for c in ("", "py_")]
        assert got[0] == got[1]
        got = [_message(getattr(BodyDecoder(keep_bodies=False), c + "request")(
            data, key, version, 7, None, {}, min(len(data), 2))) for c in ("", "py_")]
        assert got[0] == got[1]


_VALUES = (None, 0, 3, 7, [], [5], [0, 9], ["t"], 2.5)


def _summary(rnd):
    s = Summary()
    for name in Summary.__slots__:
        setattr(s, name, rnd.choice(_VALUES[:4]) if name in ("records", "records_bytes",
                                                             "uncompressed_bytes", "partitions")
                else rnd.choice(_VALUES))
    return s


def test_summarize_random():
    rnd = random.Random("summarize")
    for _ in range(3000):
        msgs = []
        for _ in (0, 1):
            m = None
            if rnd.random() < 0.8:
                m = Message(0, 1, 2)
                m.summary = _summary(rnd) if rnd.random() < 0.8 else None
            msgs.append(m)
        seen = []
        api_key = rnd.choice((0, 1, 3, 78, None))
        for call in ("summarize", "py_summarize"):
            ex = Exchange(None, None, None, api_key, 1, 1, None, "ok", *msgs)
            try:
                getattr(BodyDecoder(), call)(ex)
                seen.append([getattr(ex, n) for n in Exchange.__slots__])
            except TypeError as e:   # None + int: both fail alike
                seen.append(type(e))
        assert seen[0] == seen[1]

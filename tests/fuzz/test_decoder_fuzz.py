"""Every generated decoder (368 pairs, request and response) on mutated valid messages.

Properties: nothing escapes decode_request / decode_response / the session's BodyDecoder / the
tree view; issues carry stable codes at offsets inside the message; the fast generated reader
and the field-by-field interpreter agree on every input the fast reader accepts; the summary
walked on a body's bytes (BodyDecoder keep_bodies=False) is the decoded body's, issues alike."""
import json
import random

import pytest
from hypothesis import given, strategies as st

from dissector.decoding import BodyDecoder
from dissector.protocol import tree
from dissector.protocol.decode import decode_request, decode_response, tables
from dissector.protocol.headers import parse_request_header, parse_response_header
from dissector.protocol.jsonify import to_json
from dissector.protocol.message import Message

from .support import BUG_CODES, PAIRS, bounded, examples, fuzz_settings, mutate, request_message, \
    response_message

PER_PAIR = examples(3)


def check_message(m, raw):
    assert isinstance(m, Message)
    for i in m.issues:
        assert i.code not in BUG_CODES, (i, raw.hex())
        assert i.code.startswith(("kafka.", "records.")), i
        assert i.stream_offset is None or 0 <= i.stream_offset <= len(raw), (i, len(raw))
    json.dumps(to_json(m))  # the --bodies output of whatever was decoded


def check_agreement(raw, k, v, direction):
    """Where the fast reader takes the whole body, the interpreter reads the same object."""
    try:
        if direction == 0:
            *_, offset = parse_request_header(raw)
        else:
            _, _, offset = parse_response_header(raw, k, v)
    except ValueError:
        return
    reader, schema = tables(k)[direction][v]
    try:
        fast, end = reader(raw, offset)
    except Exception:
        return  # the fallback path is what check_message covers
    if end > len(raw):
        return  # overran: decode_struct's final bounds check sends it to the fallback too
    slow, slow_end, _, fault = tree.decode(raw, offset, schema)
    # (a float64 field may hold a NaN, unequal to itself: then the two must print alike)
    same = slow == fast or repr(slow) == repr(fast)
    assert fault is None and slow_end == end and same, (k, v, direction, raw.hex())


def _table_view(m):
    """What the exchange table takes of a message: its summary and issues."""
    s = m.summary
    summary = None if s is None else (s.error_codes, s.topics, s.partitions, s.records,
                                      s.records_bytes, s.uncompressed_bytes, s.error_code,
                                      s.throttle_time_ms)
    return summary, [(i.code, i.stream_offset) for i in m.issues]


def run_both(raw, k, v):
    req = decode_request(raw)
    check_message(req, raw)
    resp = decode_response(raw, k, v)
    check_message(resp, raw)
    return req, resp


@pytest.mark.parametrize("k,v", PAIRS, ids=[f"{k}v{v}" for k, v in PAIRS])
def test_every_pair_survives_mutations(k, v):
    rnd = random.Random(f"fuzz/{k}/{v}")
    decoder = BodyDecoder(records=True)
    walker = BodyDecoder(records=True, keep_bodies=False)   # summaries walked on the bytes
    for _ in range(PER_PAIR):
        req = request_message(k, v, rnd)
        resp = response_message(k, v, rnd)
        m = decode_request(req)
        assert m.issues == [] and (m.api_key, m.api_version) == (k, v)
        assert decode_response(resp, k, v).issues == []
        for raw, direction in ((req, 0), (resp, 1)):
            for _ in range(4):
                bad = mutate(raw, rnd, 3)
                if direction == 0:
                    check_message(decode_request(bad), bad)
                    try:
                        head = parse_request_header(bad)
                    except ValueError:
                        head = None
                    if head is not None:
                        m = decoder.request(bad, *head)
                        check_message(m, bad)
                        assert _table_view(walker.request(bad, *head)) == _table_view(m)
                    tree.request_tree(bad)
                else:
                    check_message(decode_response(bad, k, v), bad)
                    m = decoder.response(bad, k, v)
                    check_message(m, bad)
                    assert _table_view(walker.response(bad, k, v)) == _table_view(m)
                    tree.response_tree(bad, k, v)
                check_agreement(bad, k, v, direction)


@fuzz_settings(300)
@given(pair=st.sampled_from(PAIRS), seed=st.integers(0, 2**32), direction=st.integers(0, 1),
       edits=st.integers(1, 8))
@bounded(30)
def test_mutated_messages_any_pair(pair, seed, direction, edits):
    k, v = pair
    rnd = random.Random(seed)
    raw = (request_message if direction == 0 else response_message)(k, v, rnd)
    bad = mutate(raw, rnd, edits)
    run_both(bad, k, v)
    check_agreement(bad, k, v, direction)


@fuzz_settings(200)
@given(pair=st.sampled_from(PAIRS), data=st.binary(max_size=300))
@bounded(30)
def test_random_bytes_any_pair(pair, data):
    k, v = pair
    run_both(data, k, v)
    # the same bytes behind a valid header of the pair
    run_both(bytes.fromhex(f"{k & 0xFFFF:04x}{v:04x}00000001ffff") + data, k, v)

"""The compiled body reader (dissector/protocol/_reader.c) builds what the generated reader of the
same schema builds, and fails where it fails: on every (api, version, direction), with random
bodies encoded from the schema, the same bytes cut short, with bytes flipped, and with element
budgets around what the body needs."""
import math
import random
import struct

import pytest

from dissector.protocol import readers
from dissector.protocol.decode import tables
from dissector.protocol.primitives import MAX_ELEMENTS, Body, Malformed
from tests.support import _missing

from .conftest import entry
from .encoder import encode, random_body


@pytest.fixture(scope="module")
def compiled():
    if not readers.COMPILED:
        _missing("the compiled body reader (dissector/protocol/_reader.c; pip install -e . "
                 "builds it, which needs a C compiler)")


def _outcome(reader, raw, p, k):
    """(body, end), or the fact that it failed as decode_struct sees it: an exception (the
    generated readers let IndexError or struct.error out where a length runs past the end) or an
    end past the message (where they slice past it, which Python allows)."""
    try:
        body, end = reader(raw, p, k)
    except Exception:
        return "failed"
    return (_canon(body), end) if end <= len(raw) else "failed"


def _canon(x):
    """A value comparable with ==: a NaN read from damaged bytes equals itself, views their bytes."""
    if isinstance(x, Body):
        return type(x).__name__, [(a, _canon(v)) for a, v in x._items()]
    if isinstance(x, list):
        return [_canon(v) for v in x]
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in x.items()}
    if isinstance(x, memoryview):
        return "view", x.tobytes()
    if isinstance(x, float) and math.isnan(x):
        return "nan", struct.pack(">d", x)
    return type(x).__name__, x


def _damaged(raw, rnd):
    """The same bytes cut short, with one to three bytes changed, or with bytes inserted."""
    yield raw[:rnd.randrange(3, len(raw))] if len(raw) > 3 else raw[:3]
    for _ in range(6):
        b = bytearray(raw)
        for _ in range(rnd.randrange(1, 4)):
            if len(b) > 3:
                b[rnd.randrange(3, len(b))] = rnd.choice([0, 1, 0x7F, 0x80, 0xFF, rnd.getrandbits(8)])
        yield bytes(b)
    at = rnd.randrange(3, len(raw) + 1)
    yield raw[:at] + bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 5))) + raw[at:]


def test_every_decoder_reads_like_its_generated_reader(decoder, compiled):
    k, v, d = decoder
    fast, schema = entry(k, v, d)
    assert isinstance(fast, readers.Reader) and fast.compiled, "schema not compiled: all Python"
    slow = fast.fallback
    rnd = random.Random(f"compiled {k}/{v}/{d}")
    for _ in range(6):
        body = random_body(schema, rnd)
        raw = b"\x00\x01\x02" + encode(schema, body)
        got = fast(raw, 3, MAX_ELEMENTS)
        assert got == slow(raw, 3, MAX_ELEMENTS) and got[0] == body and got[1] == len(raw)
        assert type(got[0]) is type(body)
        for bad in _damaged(raw, rnd):
            assert _outcome(fast, bad, 3, MAX_ELEMENTS) == _outcome(slow, bad, 3, MAX_ELEMENTS)
        for budget in (0, 1, 2, 5):
            assert _outcome(fast, raw, 3, budget) == _outcome(slow, raw, 3, budget)


def test_views_keep_pointing_into_the_message(compiled):
    """A `records` field is a view of the message (no copy) in both."""
    fast, schema = tables(0)[0][3]   # Produce v3 request
    rnd = random.Random(7)
    body = random_body(schema, rnd)
    while not any(p.records for t in body.topic_data for p in t.partition_data):
        body = random_body(schema, rnd)
    raw = encode(schema, body)
    got, _ = fast(raw, 0, MAX_ELEMENTS)
    views = [p.records for t in got.topic_data for p in t.partition_data if p.records is not None]
    assert views and all(type(r) is memoryview and r.obj is raw for r in views)


def test_other_calls_go_to_the_generated_reader(compiled):
    """Bytes of another type or keyword arguments are read by the generated reader; without a
    budget, the default one is charged, as there."""
    fast, schema = tables(3)[1][12]   # Metadata v12 response
    body = random_body(schema, random.Random(3))
    raw = encode(schema, body)
    class Other(bytes):
        pass
    assert fast(Other(raw), 0, MAX_ELEMENTS)[0] == body
    assert fast(raw, 0, k=MAX_ELEMENTS)[0] == body
    assert fast(raw, 0) == (body, len(raw))
    calls = []
    def slow(*args, **kwargs):
        calls.append(args)
        return fast.fallback(*args, **kwargs)
    wrapped = readers.Reader(schema, slow)
    wrapped(raw, 0)
    wrapped(raw, 0, MAX_ELEMENTS)
    assert calls == []
    wrapped(Other(raw), 0)
    wrapped(raw, 0, k=MAX_ELEMENTS)
    assert len(calls) == 2
    with pytest.raises(Malformed):
        fast(raw[:-1] + b"\x05", 0, MAX_ELEMENTS)   # a tagged section claiming 5 fields
    with pytest.raises(Malformed):
        fast(raw, len(raw) + 1, MAX_ELEMENTS)

"""The compiled request header (dissector/protocol/_reqhead.c) against its Python twin
(headers.py_request_head), and the twin against the full parse (parse_request_header): on
random bytes, on headers built from the api table (every header version, client ids absent,
empty, UTF-8 or not, tagged fields or none), the same cut short or with bytes changed, and on the
requests of real clients' captures."""
import random
import struct

import pytest
from hypothesis import given, settings, strategies as st

from dissector.protocol import headers
from dissector.protocol.generated.apis import APIS
from tests.support import CAPTURES, _missing, feed_packets


@pytest.fixture(scope="module")
def compiled():
    if not headers.COMPILED:
        _missing("the compiled request header (dissector/protocol/_reqhead.c; pip install -e . "
                 "builds it, which needs a C compiler)")
    from dissector.protocol._reqhead import request_head
    return request_head


def _full(raw):
    try:
        return headers.parse_request_header(raw)
    except ValueError:
        return "ValueError"


def _check(request_head, raw):
    """The compiled and Python common cases agree, and where they answer, the full parse does."""
    twin = headers.py_request_head(raw)
    assert request_head(raw) == twin
    assert request_head(memoryview(raw)) == twin
    if twin is not None:
        assert twin == _full(raw)


client_ids = st.one_of(st.none(), st.binary(max_size=12), st.text(max_size=8).map(str.encode),
                       st.just(b"\xc3"), st.just(b"\xff\xfeid"))
tag_sections = st.one_of(st.just(b"\x00"), st.just(b""), st.just(b"\x01\x00\x02ab"),
                         st.binary(max_size=4))


def _header(api_key, api_version, corr, client_id, tags, body):
    out = struct.pack(">hhi", api_key, api_version, corr)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        out += struct.pack(">h", len(client_id)) + client_id
    return out + tags + body


headers_st = st.builds(
    _header,
    st.one_of(st.sampled_from(sorted(APIS)), st.integers(-2, 1100), st.integers(-32768, 32767)),
    st.one_of(st.integers(0, 20), st.integers(-32768, 32767)),
    st.integers(-(1 << 31), (1 << 31) - 1), client_ids, tag_sections, st.binary(max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_random_bytes_alike(compiled, raw):
    _check(compiled, raw)


@settings(max_examples=500, deadline=None)
@given(headers_st, st.data())
def test_built_headers_alike_whole_cut_and_changed(compiled, raw, data):
    _check(compiled, raw)
    _check(compiled, raw[:data.draw(st.integers(0, len(raw)))])
    if raw:
        changed = bytearray(raw)
        changed[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        _check(compiled, bytes(changed))


def test_other_negative_client_id_lengths_and_controlled_shutdown_v0(compiled):
    for raw in (struct.pack(">hhih", 3, 9, 1, -2) + b"\x00",
                struct.pack(">hhi", 7, 0, 5),                      # header v0: no client id
                struct.pack(">hhih", 7, 1, 5, 2) + b"id"):
        _check(compiled, raw)
    assert compiled(struct.pack(">hhi", 7, 0, 5)) == (7, 0, 5, None, {}, 8)


@pytest.mark.parametrize("capture", ["kafka_python.pcap", "librdkafka_produce_consume.pcap",
                                     "transactions.pcap"])
def test_real_requests_alike_and_as_the_full_parse(compiled, capture):
    """Real clients' requests take the common case, and their damaged copies agree too."""
    _, exchanges = feed_packets(CAPTURES / capture, level="bodies")
    raws = [bytes(ex.request.data) for ex in exchanges if ex.request is not None]
    assert len(raws) > 10
    common = 0
    rnd = random.Random(20)
    for raw in raws:
        _check(compiled, raw)
        common += compiled(raw) is not None
        for _ in range(3):
            b = bytearray(raw[:rnd.randrange(len(raw) + 1)])
            if b:
                b[rnd.randrange(len(b))] = rnd.getrandbits(8)
            _check(compiled, bytes(b))
    assert common >= 0.9 * len(raws)   # the compiled path is the one taken

"""A resync that meets a plausible-looking false header inside a request's leftover bytes must
not take it: a client id that is not UTF-8 (or holds control bytes), or an api version outside
what the connection's ApiVersions answer allowed, rules the candidate out, and the real request
after it pairs with its response instead of the response coming out as an orphan."""
import struct

import pytest

from dissector.pipeline import dissect
from tests.analysis.build import Capture, ms, request_bytes, response_bytes

METADATA_ALL = struct.pack(">i", -1)             # Metadata v1: topics null (all)
METADATA_EMPTY = struct.pack(">iii", 0, -1, 0)   # no brokers, controller -1, no topics


def _false_start(real: bytes, client_id: bytes, version: int) -> bytes:
    """A Produce header whose size runs exactly over the real request that follows it (so the
    frame after it, the next real request, confirms it), then payload-like bytes."""
    head = struct.pack(">hhih", 0, version, 0, len(client_id)) + client_id + b"A" * 20
    return struct.pack(">i", len(head) + len(real)) + head


def _api_versions(corr):
    req = request_bytes(18, 0, corr)
    ranges = [(0, 3, 9), (3, 0, 12), (18, 0, 3)]   # Produce 3-9, Metadata 0-12, ApiVersions
    body = struct.pack(">hi", 0, len(ranges)) + b"".join(struct.pack(">hhh", *r) for r in ranges)
    return req, response_bytes(corr, body)


@pytest.mark.parametrize("client_id, version, handshake", [
    (b"\xff\xfe\xfd\xfc", 0, False),        # capture starts mid-request; client id not UTF-8
    (b"ab\x1bc", 0, False),                 # ... a control byte in it
    (b"fake", 0, True),                     # a hole; Produce v0 where ApiVersions said 3-9
])
def test_false_header_is_not_taken(tmp_path, client_id, version, handshake):
    a = request_bytes(3, 1, 7, METADATA_ALL)
    b = request_bytes(3, 1, 8, METADATA_ALL)
    cap = Capture()
    conn = cap.connection(ts=ms(0))
    expect = ["Metadata", "Metadata"]
    if handshake:
        req, resp = _api_versions(1)
        conn.request(ms(1), req)
        conn.response(ms(2), resp)
        expect.insert(0, "ApiVersions")
        conn.seq[0] += 40   # a lost segment: the start of a request
    else:
        cap.packets.clear()   # no handshake: the capture starts inside a request
    conn.request(ms(10), _false_start(a, client_id, version) + a + b)
    conn.response(ms(12), response_bytes(7, METADATA_EMPTY))
    conn.response(ms(13), response_bytes(8, METADATA_EMPTY))
    path = cap.write(tmp_path / "resync.pcap")
    for level in ("headers", "bodies"):
        exchanges = list(dissect([str(path)], level=level))
        got = [(e.api_key, e.correlation_id, e.status) for e in exchanges]
        want = [(18, 1, "ok")] * handshake + [(3, 7, "ok"), (3, 8, "ok")]
        assert got == want, level
        assert [i.code for e in exchanges for i in e.issues] == []

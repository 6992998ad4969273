"""Adversarial length and count claims, decompression bombs, deep nesting and pathological TCP:
the run ends, findings are Issues, and memory stays bounded (tracemalloc peaks in process, peak
RSS of a fresh interpreter for the bombs)."""
import random
import struct
import time
import tracemalloc

import pytest

from dissector.capture.files import read_packets
from dissector.capture.layers import ACK, PSH, SYN, tcp_segment
from dissector.model import ERROR
from dissector.pipeline import Dissector
from dissector.session import MAX_IN_FLIGHT
from dissector.protocol import tree
from dissector.protocol.decode import decode_request, decode_response, tables
from dissector.protocol.headers import parse_request_header, parse_response_header
from dissector.records import decode_record_set
from tests.records.builders import build, fix_crc32, with_body
from tests.support import require_module

from .bombs import BOMBS, CODEC_OF
from .support import PAIRS, request_message, response_message, run_isolated


def peak(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- size and count claims in every decoder --------------------------------------------------

def _prefixes(node, schema, out):
    """(offset, kind, compact) of every length/count prefix under a tree-mode struct node."""
    fields = {f[0]: f for f in schema[2]}
    tagged = {f[0]: f for f in schema[3]}
    for child in node.children:
        if child.name == "tagged_fields":
            for t in child.children:
                if t.name in tagged:
                    _field(t, tagged[t.name], out)
        elif child.name in fields:
            _field(child, fields[child.name], out)


def _field(node, f, out):
    kind, elem, compact, child = f[1], f[2], f[4], f[7]
    if kind in ("array", "string", "bytes", "records"):
        out.append((node.offset, kind, compact))
    if kind == "struct" and child is not None:
        _prefixes(node, child, out)
    elif kind == "array" and elem == "struct":
        for element in node.children:
            _prefixes(element, child, out)


def _claim(raw, at, kind, compact):
    """raw with the prefix at `at` replaced by the largest claim its encoding can make."""
    if compact:
        end = at
        while raw[end] & 0x80:
            end += 1
        return raw[:at] + b"\xff\xff\xff\xff\x0f" + raw[end + 1:]  # 2^32-1: 2^32-2 items
    if kind == "string":
        return raw[:at] + b"\x7f\xff" + raw[at + 2:]
    return raw[:at] + b"\x7f\xff\xff\xff" + raw[at + 4:]


def _rich(make, k, v, rnd):
    return max((make(k, v, rnd) for _ in range(4)), key=len)


@pytest.mark.parametrize("k,v", PAIRS, ids=[f"{k}v{v}" for k, v in PAIRS])
def test_huge_claims_in_every_decoder(k, v):
    """Every array count, string and bytes length of a valid request and response of the pair,
    one at a time, set to 2^31-1 (2^32-2 in compact form): an error Issue, no allocation."""
    rnd = random.Random(f"claims/{k}/{v}")
    for direction, make in ((0, request_message), (1, response_message)):
        raw = _rich(make, k, v, rnd)
        if direction == 0:
            offset = parse_request_header(raw)[-1]
        else:
            offset = parse_response_header(raw, k, v)[-1]
        schema = tables(k)[direction][v][1]
        _, _, root, fault = tree.decode(raw, offset, schema, tree=True)
        assert fault is None
        spots = []
        _prefixes(root, schema, spots)
        for at, kind, compact in spots[:12]:
            bad = _claim(raw, at, kind, compact)
            decode = (lambda: decode_request(bad)) if direction == 0 else \
                (lambda: decode_response(bad, k, v))
            m, top = peak(decode)
            errors = [i for i in m.issues if i.severity == ERROR]
            assert errors, (k, v, direction, at, kind)
            assert top < 256 * 1024 + 64 * len(bad), (k, v, direction, at, kind, top)


def test_huge_frame_size_claims_in_a_stream():
    """Size prefixes of 2^31-1, -1 and just over the frame cap in one connection: Issues and a
    resync, no buffer of the claimed size; the requests after them still come out."""
    good = struct.pack(">hhih", 18, 0, 7, 0)  # ApiVersions v0, client id ""
    frame = struct.pack(">i", len(good)) + good
    stream = frame * 3
    for claim in (0x7FFFFFFF, -1, (100 << 20) + 1):
        stream += struct.pack(">i", claim) + b"\x00\x12\x00\x00" + bytes(40)
    stream += frame * 3
    c, b = b"\x7f\0\0\1", b"\x7f\0\0\2"

    def run():
        d = Dissector((9092,))
        d.feed_segment(1, 0, c, b, 5000, 9092, 999, 0, SYN, b"")
        d.feed_segment(2, 1, b, c, 9092, 5000, 7000, 1000, SYN | ACK, b"")
        for i in range(0, len(stream), 50):
            d.feed_segment(3 + i, 10 + i, c, b, 5000, 9092, 1000 + i, 7001, ACK | PSH,
                           stream[i:i + 50])
        d.finish()
        return d
    d, top = peak(run)
    assert top < 2 << 20, top
    assert len(d.output) == 6, d.output
    assert d.issue_count >= 1


@pytest.mark.parametrize("where", ["pcap-record", "pcapng-block", "pcapng-packet"])
def test_huge_claims_in_capture_files(tmp_path, where):
    from .support import SMALL_REAL, packets, write_pcap, write_pcapng
    pkts = packets(SMALL_REAL)[:10]
    if where == "pcap-record":
        raw = bytearray(write_pcap(pkts))
        pos = 24 + sum(16 + len(p[2]) for p in pkts[:5])
        struct.pack_into("<I", raw, pos + 8, 0x7FFFFFFF)
    else:
        raw = bytearray(write_pcapng(pkts))
        pos = 28 + 32 + sum(32 + len(p[2]) + (-len(p[2]) & 3) for p in pkts[:5])
        struct.pack_into("<I", raw, pos + (4 if where == "pcapng-block" else 20), 0x7FFFFFFF)
    path = tmp_path / "claim.cap"
    path.write_bytes(bytes(raw))

    def read():
        got = []
        try:
            for pkt in read_packets(path):
                got.append(pkt)
        except Exception as e:  # noqa: BLE001 - the type is checked below
            return got, e
        return got, None
    (got, err), top = peak(read)
    assert [g[3] for g in got] == [p[2] for p in pkts[:5]]
    assert err is not None and type(err).__name__ == "CaptureError", err
    assert top < (5 << 20) + (1 << 20), top  # the reader's 5 MiB buffer, nothing claimed


# -- decompression bombs ---------------------------------------------------------------------

LIBRARY = {1: None, 2: "snappy", 3: "lz4", 4: "zstandard"}  # codec -> optional package
BOMB_SIZE = 256 << 20  # 4 times the default 64 MiB cap


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_decompression_bombs_are_capped(name):
    """Each codec form inflating to 256 MiB, in a RecordBatch v2 and (where the codec existed
    then) a MessageSet v1 wrapper, decoded in a fresh interpreter with the default cap: a
    `records.decompression_limit` Issue, and peak RSS grows by at most the cap plus slack (one
    inflate step, zstd's last blocks, the interpreter), well under the bomb."""
    if LIBRARY[CODEC_OF[name]]:
        require_module(LIBRARY[CODEC_OF[name]])
    result = run_isolated(f"""
        import json, struct, time
        from tests.fuzz.bombs import BOMBS, CODEC_OF
        from tests.records.builders import build, with_body, fix_crc32
        from dissector.records import decode_record_set
        name = {name!r}
        payload = BOMBS[name]({BOMB_SIZE})
        codec = CODEC_OF[name]
        sets = [with_body(build(2, 0, [(1, None, b"v", [])]), payload, codec=codec, count=1)]
        if codec != 4:
            head = build(1, 0, [(1, None, b"v", None)])[:26]
            msg = (bytearray(head) + b"\\xff\\xff\\xff\\xff" + struct.pack(">i", len(payload))
                   + payload)
            msg[17] = codec
            struct.pack_into(">i", msg, 8, len(msg) - 12)
            sets.append(fix_crc32(bytes(msg)))
        out = []
        for data in sets:
            base = rss()
            t = time.process_time()
            rs = decode_record_set(data, records=True)
            out.append({{"issues": [i.code for i in rs.issues], "grow": rss() - base,
                         "cpu": time.process_time() - t}})
        print(json.dumps(out))
    """)
    for r in result:
        assert r["issues"] == ["records.decompression_limit"], r
        assert r["grow"] < (64 << 20) + (16 << 20), r
        assert r["cpu"] < 20, r


def test_a_small_cap_is_kept_whatever_the_codec():
    """The cap is honoured in proportion: 1 MiB cap, 64 MiB bombs, traced allocations."""
    for name, make in sorted(BOMBS.items()):
        if LIBRARY[CODEC_OF[name]]:
            require_module(LIBRARY[CODEC_OF[name]])
        batch = with_body(build(2, 0, [(1, None, b"v", [])]), make(64 << 20),
                          codec=CODEC_OF[name], count=1)
        rs, top = peak(lambda: decode_record_set(batch, max_uncompressed=1 << 20))
        assert [i.code for i in rs.issues] == ["records.decompression_limit"], name
        assert top < 2 * len(batch) + (8 << 20), (name, top)


# -- deep nesting ----------------------------------------------------------------------------

def test_deep_vlan_stacks_and_ipv6_extension_chains():
    ip_tcp = bytes.fromhex("45000028000100004006 0000 7f000001 7f000002".replace(" ", "")) + \
        struct.pack(">HHIIBBHHH", 5000, 9092, 1, 0, 0x50, 0x18, 1024, 0, 0)
    # 20000 stacked 802.1Q tags (TPID 0x8100, TCI 1), then the IPv4 ethertype
    deep_vlan = bytes(12) + (b"\x81\x00" + b"\x00\x01") * 20000 + b"\x08\x00" + ip_tcp
    t = time.process_time()
    seg = tcp_segment(1, deep_vlan)
    assert seg is not None and not isinstance(seg, str) and seg[2:4] == (5000, 9092)
    # IPv6 with 5000 destination-options headers (8 bytes each) before TCP
    n = 5000
    tcp = struct.pack(">HHIIBBHHH", 5000, 9092, 1, 0, 0x50, 0x18, 1024, 0, 0)
    ext = b"".join(bytes((60 if i < n - 1 else 6, 0)) + bytes(6) for i in range(n))
    ip6 = struct.pack(">IHBB", 6 << 28, len(ext) + len(tcp), 60, 64) + bytes(15) + b"\1" + \
        bytes(15) + b"\2"
    seg = tcp_segment(229, ip6 + ext + tcp)
    assert seg is not None and not isinstance(seg, str) and seg[2:4] == (5000, 9092)
    assert time.process_time() - t < 5


def test_nested_compressed_message_sets():
    """A gzip wrapper whose inner set is another gzip wrapper, 40 levels deep: one level is
    decoded, the nesting is an Issue (Kafka never nests compression), nothing recurses."""
    import gzip
    inner = build(1, 0, [(1, b"k", b"v", None)])
    for _ in range(40):
        head = bytearray(inner[:26])
        value = gzip.compress(inner)
        msg = head + b"\xff\xff\xff\xff" + struct.pack(">i", len(value)) + value
        msg[17] = 1
        struct.pack_into(">i", msg, 8, len(msg) - 12)
        inner = fix_crc32(bytes(msg))
    rs = decode_record_set(inner)
    assert [i.code for i in rs.issues] == ["records.nested_compression"]


# -- pathological TCP ------------------------------------------------------------------------

def test_conflicting_retransmissions_flood():
    """100k retransmissions of one request's bytes, each conflicting with the first copy: a
    bounded number of Issues kept, the first copy wins, the run stays small and linear."""
    req = struct.pack(">hhih", 18, 0, 1, 0)
    frame = struct.pack(">i", len(req)) + req
    c, b = b"\x7f\0\0\1", b"\x7f\0\0\2"

    def run():
        d = Dissector((9092,))
        d.feed_segment(1, 0, c, b, 5000, 9092, 999, 0, SYN, b"")
        d.feed_segment(2, 1, b, c, 9092, 5000, 7000, 1000, SYN | ACK, b"")
        d.feed_segment(3, 2, c, b, 5000, 9092, 1000 + 14, 7001, ACK | PSH, frame)  # out of order
        for i in range(100_000):
            d.feed_segment(4 + i, 3 + i, c, b, 5000, 9092, 1000 + 14 + i % 7, 7001, ACK | PSH,
                           bytes([i & 0xFF]) * (14 - i % 7))
        d.feed_segment(200_000, 10**6, c, b, 5000, 9092, 1000, 7001, ACK | PSH, frame)
        d.finish()
        return d
    t = time.process_time()
    d, top = peak(run)
    assert time.process_time() - t < 60
    assert [ex.correlation_id for ex in d.output] == [1, 1]
    assert d.issue_count >= 1000 and len(d.issues) <= 100_000
    assert top < 64 << 20, top


def test_envelopes_nested_deeply():
    """Envelope requests wrapped in Envelope requests 2000 deep (each level a whole request in
    `request_data`): decoding ends, without recursion errors, in bounded memory."""
    from dissector.protocol.tree import new_body
    from tests.protocol.encoder import encode
    schema = tables(58)[0][0][1]
    msg = struct.pack(">hhih", 18, 3, 1, 0) + b"\x00" + b"\x02x\x021\x00"  # ApiVersions v3
    for corr in range(2000):
        body = new_body(schema)
        body.request_data = msg
        body.request_principal = b""
        body.client_host_address = b"\x7f\x00\x00\x01"
        msg = struct.pack(">hhih", 58, 0, corr, 5) + b"admin" + b"\x00" + encode(schema, body)
    t = time.process_time()
    m, top = peak(lambda: decode_request(msg))
    assert m.api_key == 58 and m.correlation_id == 1999
    assert time.process_time() - t < 10
    assert top < 64 * len(msg) + (1 << 20), top


def test_arrays_of_tiny_elements_are_budgeted():
    """A 9 MB Metadata v0 request of 4.5M empty topic names (2 bytes each on the wire, ~72 bytes
    each as objects: 345 MB before the element budget), decoded in a fresh interpreter: one
    `kafka.too_many_elements` error at the array count, and peak RSS under 150 MB."""
    result = run_isolated("""
        import struct
        from dissector.protocol.decode import decode_request
        n = 4_500_000
        raw = struct.pack(">hhih", 3, 0, 1, 1) + b"c" + struct.pack(">i", n) + bytes(2 * n)
        m = decode_request(raw)
        print(json.dumps({"issues": [(i.code, i.severity, i.stream_offset) for i in m.issues],
                          "peak": rss(), "topics": len(m.body.topics)}))
    """)
    assert result["issues"] == [["kafka.too_many_elements", ERROR, 11]], result
    assert result["topics"] == 0
    assert result["peak"] < 150 << 20, result


@pytest.mark.parametrize("api_key, api_version, flagged_as_given_up", [
    (3, 0, True),     # Metadata: an answer was expected
    (0, 3, False),    # Produce with acks=0 (its body is zeros): none expected, nothing to flag
])
def test_a_capture_of_one_direction_stays_bounded(api_key, api_version, flagged_as_given_up):
    """Only the client's side captured (asymmetric routing, a lost mirror port): 20k requests of
    1 kB that are never answered. Memory must not grow with every request until the end: past the
    in-flight cap the oldest come out unanswered, flagged, as they go (the consumer drains them)."""
    c, b = b"\x0a\0\0\1", b"\x0a\0\0\2"

    def run():
        d = Dissector((9092,))
        d.feed_segment(0, 0, c, b, 40000, 9092, 999, 0, SYN, b"")
        seq = 1000
        for i in range(20_000):
            msg = struct.pack(">hhih", api_key, api_version, i, 1) + b"c" + bytes(1000)
            frame = struct.pack(">i", len(msg)) + msg
            d.feed_segment(i + 1, i + 1, c, b, 40000, 9092, seq, 1, ACK | PSH, frame)
            seq += len(frame)
            while d.output:
                out.append(_given_up(d.output.popleft()))
        d.finish()
        out.extend(map(_given_up, d.output))
        return d
    out = []
    _, top = peak(run)
    assert top < 8 << 20, top   # 20 MB of requests fed
    assert len(out) == 20_000
    flagged = [i for i, flag in enumerate(out) if flag]
    given_up = list(range(20_000 - MAX_IN_FLIGHT)) if flagged_as_given_up else []
    assert flagged == given_up, flagged[:3]


def _given_up(exchange):
    return any(i.code == "kafka.in_flight_limit" for i in exchange.issues)

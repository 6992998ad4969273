"""Every problem the fuzz campaign found, kept as a test (newest last). Each says what the input
was, what went wrong before the fix, and checks the fixed behaviour."""
import struct
import time
import tracemalloc

from dissector.decoding import BodyDecoder
from dissector.protocol.decode import tables
from dissector.protocol.tree import new_body
from dissector.records import decode_record_set
from tests.protocol.encoder import encode
from tests.records.builders import build, with_body
from tests.support import require_module

# A minimal v2 record, from the format: length 6 (zigzag 12), attributes 0, timestamp delta 0,
# offset delta 0, key -1 (zigzag 1), value -1, no headers: 7 bytes on the wire.
MINIMAL_RECORD = bytes.fromhex("0c000000010100")


def zstd_minimal_records(n):
    """A v2 batch whose zstd payload holds n minimal records and claims 2^31-1 of them."""
    zstandard = require_module("zstandard")
    c = zstandard.ZstdCompressor().compressobj()
    chunk = MINIMAL_RECORD * 65536
    payload = b"".join(c.compress(chunk) for _ in range(n // 65536)) + c.flush()
    return with_body(build(2, 0, [(1, None, b"v", [])]), payload, codec=4, count=2**31 - 1)


def peak_of(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_compressed_minimal_records_stay_within_the_budget():
    """Found: a 2.6 kB zstd batch of 4M 7-byte records decoded into 4M Record objects (670 MB
    RSS, 8 s): the decompression cap counted bytes, not the ~160-byte objects each record
    becomes. Now records are charged to the same budget."""
    batch = zstd_minimal_records(1 << 20)
    assert len(batch) < 2000
    rs, peak = peak_of(lambda: decode_record_set(batch, max_uncompressed=8 << 20))
    assert [i.code for i in rs.issues] == ["records.decode_limit"]
    decompressed = 7 << 20
    assert 0 < rs.record_count <= ((8 << 20) - decompressed) // 160 + 1
    assert peak < 24 << 20, peak


def _fetch_response(record_sets):
    """A Fetch v12 response body carrying one partition per record set (test encoder)."""
    schema = tables(1)[1][12][1]
    topic_schema = next(f for f in schema[2] if f[0] == "responses")[7]
    part_schema = next(f for f in topic_schema[2] if f[0] == "partitions")[7]
    body = new_body(schema)
    topic = new_body(topic_schema)
    topic.topic = "t"
    for i, rs in enumerate(record_sets):
        p = new_body(part_schema)
        p.partition_index = i
        p.records = rs
        topic.partitions.append(p)
    body.responses = [topic]
    return b"\x00\x00\x00\x07\x00" + encode(schema, body)


def test_record_sets_of_one_message_share_one_budget():
    """Found: each partition's record set had its own 64 MiB budget, so one Fetch response
    with thousands of small bombs was unbounded. Now the sets of one message share it."""
    bomb = zstd_minimal_records(1 << 17)  # 128k records, 896 kB decompressed, ~200 B on the wire
    msg = _fetch_response([bomb] * 40)
    decoder = BodyDecoder(records=True, max_uncompressed=4 << 20)
    m, peak = peak_of(lambda: decoder.response(msg, 1, 12))
    sets = [p.records for p in m.body.responses[0].partitions]
    total = sum(len(b.records or ()) for rs in sets for b in rs.batches)
    assert 0 < total <= (4 << 20) // 160
    assert any(i.code in ("records.decode_limit", "records.decompression_limit") for i in m.issues)
    assert peak < 16 << 20, peak


def test_flood_of_tiny_out_of_order_segments():
    """Found: 400k one-byte segments arriving last-first (held out of order, under the 4 MiB
    byte cap) took 123 s (a list insert at the front per segment: quadratic) and ~300 bytes of
    bookkeeping each. Now held segments are capped by count too: the run is linear and small."""
    from dissector.capture.layers import ACK, PSH, SYN
    from dissector.pipeline import Dissector

    n = 200_000
    req = struct.pack(">hhih", 18, 0, 1, 0)          # ApiVersions v0, client id ""
    stream = (struct.pack(">i", len(req)) + req) * (n // 14 + 1)
    d = Dissector((9092,))
    c, b = b"\x7f\0\0\1", b"\x7f\0\0\2"
    d.feed_segment(1, 0, c, b, 5000, 9092, 999, 0, SYN, b"")
    d.feed_segment(2, 1, b, c, 9092, 5000, 7000, 1000, SYN | ACK, b"")

    def flood():
        for i in range(n - 1, -1, -1):
            d.feed_segment(3 + i, 10 + i, c, b, 5000, 9092, 1000 + i, 7001, ACK | PSH,
                           stream[i:i + 1])
            d.output.clear()
        d.finish()

    start = time.process_time()
    _, peak = peak_of(flood)
    assert time.process_time() - start < 30
    assert peak < 24 << 20, peak
    assert any(i.code == "tcp.gap" for i in d.issues)


def test_read_out_into_a_missing_directory_is_a_usage_error(tmp_path):
    """Found: `read --out missing/dir/file` ended in `internal error: FileNotFoundError`
    (exit 3); now it is a one-line error naming the file, exit 2."""
    import subprocess
    import sys
    from tests.support import CAPTURES
    out = tmp_path / "missing" / "x.csv"
    proc = subprocess.run([sys.executable, "-m", "dissector", "read", "--out", str(out),
                           str(CAPTURES / "kafka_python.pcap")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"kafka-dissect: error: --out {out}: No such file or directory"


def _splice_busiest(direction, seed):
    """librdkafka_produce_consume.pcap with the payload of one packet in the middle of its
    busiest connection (client->broker if direction 0) replaced by garbage."""
    import socket
    from dissector.pipeline import dissect
    from tests.support import CAPTURES
    from .splice import splice_garbage, tcp_layout
    from .support import REAL_PORTS, packets
    path = CAPTURES / "librdkafka_produce_consume.pcap"
    full = list(dissect(path, REAL_PORTS))
    conn = max({e.connection for e in full},
               key=lambda c: sum(e.connection is c for e in full))
    flow = (socket.inet_aton(conn.client_ip), socket.inet_aton(conn.broker_ip),
            conn.client_port, conn.broker_port)
    if direction:
        flow = (flow[1], flow[0], flow[3], flow[2])
    pkts = packets(path)
    carrying = sum(1 for _, _, d in pkts if tcp_layout(d)[:4] == flow
                   and tcp_layout(d)[5] > tcp_layout(d)[4])
    raw, damaged = splice_garbage(pkts, flow, {carrying // 2}, seed)
    return full, conn, raw, damaged


def _after_damage_survives(tmp_path, direction, seed):
    from dissector.pipeline import dissect
    from .support import REAL_PORTS, exchange_key
    full, conn, raw, damaged = _splice_busiest(direction, seed)
    path = tmp_path / "spliced.pcap"
    path.write_bytes(raw)
    got = {exchange_key(e) for e in dissect(path, REAL_PORTS)}
    after = [e for e in full if e.connection.connection_id == conn.connection_id
             and e.request.first_packet > damaged[-1]]
    assert len(after) >= 2
    assert [e for e in after if exchange_key(e) not in got] == []


def test_garbage_request_size_under_the_cap_does_not_swallow_the_stream(tmp_path):
    """Found: garbage whose first 4 bytes read as a 17 MB request size (under the 100 MiB cap)
    made the framer wait for 17 MB: every later request of the connection was lost and their
    responses became orphans. Large frames spanning segments must now start like a request."""
    _after_damage_survives(tmp_path, 0, 36838)


def test_garbage_response_size_under_the_cap_does_not_swallow_the_stream(tmp_path):
    """Found: the same in the broker's stream (a 94 MB size): every later response was lost
    and their requests became `unanswered`. A large spanning response must now answer a
    request in flight."""
    _after_damage_survives(tmp_path, 1, 7345)


def test_stopping_early_is_clean():
    """Found by the files-written-only-where-told test on a work-in-progress pipeline (a
    `yield` in the `finally` of Dissector.feed_file): `kafka-dissect tree`, which stops reading
    after the exchange it shows, printed "Exception ignored ... RuntimeError: generator ignored
    GeneratorExit" with a traceback. A consumer may stop iterating a dissection at any point."""
    import gc
    import sys
    from dissector.pipeline import dissect
    from tests.support import CAPTURES
    caught = []
    old = sys.unraisablehook
    sys.unraisablehook = caught.append
    try:
        for stop in (1, 5):
            it = iter(dissect(CAPTURES / "kafka_python.pcap"))
            for _ in range(stop):
                next(it)
            it.close()
            del it
            gc.collect()
    finally:
        sys.unraisablehook = old
    assert [repr(u.exc_value) for u in caught] == []


def test_timestamps_beyond_the_calendar(tmp_path):
    """Found: a pcapng interface with if_tsresol 10^0 (seconds per tick) and ticks near 2^63
    (or a huge if_tsoffset) gave timestamps past year 9999: `read --format jsonl|csv` ended in
    `internal error: OverflowError`. Such timestamps are now written as null."""
    import json
    import subprocess
    import sys
    from tests.capture import build
    from tests.support import CAPTURES
    from .support import packets
    pkts = packets(CAPTURES / "kafka_python.pcap")[:12]
    raw = build.shb("<") + build.idb("<", 1, tsresol=0) + b"".join(
        build.epb("<", 0, (1 << 63) + i, data) for i, (_, _, data) in enumerate(pkts))
    path = tmp_path / "future.pcapng"
    path.write_bytes(raw)
    for fmt in ("jsonl", "csv"):
        proc = subprocess.run([sys.executable, "-m", "dissector", "read", "--format", fmt,
                               str(path)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.strip()
        if fmt == "jsonl":
            rows = [json.loads(line) for line in proc.stdout.splitlines()]
            assert rows and all(r["request_ts"] is None for r in rows)


# -- found by the sanitizer runs (make fuzz-asan) and the review of the C extensions' API -------

def test_framebuf_fill_writes_only_buffers_frame_buffer_made():
    """Found: _framebuf.fill wrote into any exact bytes object it was handed (it changed the
    interpreter's cached b"a"), and copied with memcpy where source and destination overlap
    (ASan memcpy-param-overlap). It now writes only into a FrameBuffer from frame_buffer (or a
    bytearray), with memmove; finished() makes it plain bytes, after which fill refuses it."""
    import pytest
    from dissector import framebuf
    if not framebuf.COMPILED:
        pytest.skip("_framebuf not built")   # the twin takes bytearrays only by construction
    a = b"a"
    with pytest.raises(TypeError):
        framebuf.fill(a, 0, b"z", 0, 1)
    assert a == b"a" and bytes([97]) == b"a"
    buf = framebuf.frame_buffer(6)
    framebuf.fill(buf, 0, b"abcdef", 0, 6)
    framebuf.fill(buf, 2, buf, 0, 4)        # overlapping, forwards
    framebuf.fill(buf, 0, buf, 1, 4)        # overlapping, backwards
    twin = bytearray(b"abcdef")
    twin[2:6] = bytes(twin[0:4])
    twin[0:3] = bytes(twin[1:4])
    done = framebuf.finished(buf)
    assert done == bytes(twin) and type(done) is bytes
    with pytest.raises(TypeError):
        framebuf.fill(done, 0, b"z", 0, 1)
    empty = framebuf.frame_buffer(0)
    shared_empty = bytes()   # the interpreter's one empty bytes object, which must stay empty
    assert framebuf.finished(empty) == b"" and empty is not shared_empty


def test_reader_budget_near_the_lowest_int64():
    """Hardened: the compiled reader subtracted an array's count from a caller-supplied budget
    (signed overflow, undefined, for a budget near -2**63); it now compares first. Both readers
    refuse the array."""
    import random
    fast, schema = tables(3)[1][12]   # Metadata v12 response: arrays
    body = new_body(schema)
    raw = encode(schema, body)
    rnd = random.Random(5)
    from tests.protocol.encoder import random_body
    while True:
        body = random_body(schema, rnd)
        if body.topics:
            break
    raw = encode(schema, body)
    for budget in (-(1 << 63), -(1 << 63) + 1, -1):
        outcomes = []
        for reader in (fast, fast.fallback):
            try:
                outcomes.append(("ok", reader(raw, 0, budget)))
            except Exception as exc:   # Malformed
                outcomes.append(("fault", type(exc).__name__))
        assert outcomes[0] == outcomes[1] and outcomes[0][0] == "fault"


def test_reader_empty_array_with_an_exhausted_budget():
    """Found by the atheris reader target: with a caller's budget below zero, the compiled
    reader refused an empty array, which the generated reader (its twin) charges nothing and
    never refuses. Both now read the body (a ListOffsets v9 request with no topics)."""
    fast, _schema = tables(2)[0][9]
    raw = bytes.fromhex("4e000100000100")   # replica id, isolation level, 0 topics, no tags
    for budget in (-(1 << 63), -1, 0):
        body, end = fast(raw, 0, budget)
        twin, twin_end = fast.fallback(raw, 0, budget)
        assert (body, end) == (twin, twin_end) and end == len(raw) and body.topics == []


def test_reader_summarize_plan_naming_no_field():
    """Hardened: _reader.c's name_topic dereferenced a plan's name without a NULL check; a plan
    whose struct has a topic-id default but no name (only a caller could make one) crashed."""
    from dissector.decoding import walk_set
    from dissector.summary_plan import M_NAME, M_TOPIC, plan
    fast, schema = tables(3)[1][12]   # Metadata v12 response
    real = plan(schema)
    node = real[0]
    cluster_id = 2   # a nullable string field: its default is None
    odd = ((M_NAME | M_TOPIC, -1, cluster_id, node[3]), real[1], real[2])
    raw = encode(schema, new_body(schema))
    out = fast.summarize(raw, 0, odd, False, {}, walk_set, False, [1 << 20])
    assert out[0] == len(raw) and out[2] == []


def test_walker_link_shapes_are_checked():
    """Hardened: _walk.c checked only the first entry of a link's tag table for type and none
    for range (tag_at past the bytes it reads); every entry is now checked."""
    import pytest
    from dissector.capture import fast
    from dissector.pipeline import dissect
    from tests.support import CAPTURES
    saved = fast.LINKS[1]
    try:
        for shape in ((14, 12, (b"\x08\x00", 5)), (14, 12, (b"\x08\x00", b"\x08")),
                      (14, 1 << 20, (b"\x08\x00",)), (-1, 12, (b"\x08\x00",))):
            fast.LINKS[1] = shape
            with pytest.raises(ValueError):
                list(dissect([str(CAPTURES / "kafka_python.pcap")], level="headers"))
    finally:
        fast.LINKS[1] = saved


def test_stats_on_rebalance_rows_left_null_by_damage(tmp_path):
    """legacy_messageset.mss1448 with packets mutated (test_cli_fuzz's seed 2574711926, pcapng,
    the file damaged too): a SyncGroup row with a null client or time made `stats` stop with
    'internal error: TypeError: boolean value of NA is ambiguous' in the rebalances table. Now
    the damaged capture ends in the one-line error for the file, exit status 2."""
    import random
    import subprocess
    import sys
    from tests.fuzz.support import REAL, mutate, packets, write_pcapng
    from tests.support import ROOT
    rnd = random.Random(2574711926)
    pkts = list(packets(next(p for p in REAL if p.name == "legacy_messageset.mss1448.pcap")))
    for _ in range(rnd.randint(1, 8)):
        i = rnd.randrange(len(pkts))
        ts, lt, data = pkts[i]
        pkts[i] = (ts, lt, mutate(data, rnd, 3))
    path = tmp_path / "fuzzed.cap"
    path.write_bytes(mutate(write_pcapng(pkts), rnd, 2))
    proc = subprocess.run([sys.executable, "-m", "dissector", "stats", str(path), "--port", "auto"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 2), proc.stderr

"""Coverage-guided fuzz targets for atheris (libFuzzer for Python), run by scripts/fuzz.sh.

    python -m tests.fuzz.atheris_targets corpus DIR          # write seed corpora under DIR/<target>
    python -m tests.fuzz.atheris_targets TARGET [libFuzzer options] [CORPUS_DIR...]

Targets: capture (a whole capture file through dissect at the records level: the packet walker
capture/_walk.c), packet (link/IP/TCP parsing), decode (every generated decoder: the first bytes
choose the pair), records (record sets and codecs), stream (a sequence of TCP segments through
reassembly, framing and pairing), tls (a key log, then the segments of a TLS connection through the
record layer, decryption and the rest; seeds in stream_seeds.py); and one per compiled entry point,
each against its Python twin (the same result or the same exception type): reader
(protocol/_reader.c's readers, any budget), summarize (its byte walk, which must agree with
decoding and walking; with analysis.load's Produce and Fetch plans, its rows taken by both
partition walks alike), walkset (records/_headers.c and _check.c through record_set.walk_set, both
levels), columns (records/_columns.c append_v2, append_sets and batch_buffers, records/_text.c
batch_texts), csvrow (_csvrow.c csv_line), framebuf (_framebuf.c fill on its own buffers), handler
(tcp/_handler.c: the stream target's segments through the compiled flow handler), pairing
(_pairing.c: the same through the compiled pairing), decoder (_decoding.c's BodyDecoder.request and
response on a message, chosen as for decode, with or without records_only, and its twins), tablerow
(_tablerow.c exchange_row on exchanges of any attribute values), partitions (_partition_walk.c
walk_side and walk_exchange on a decoded body of a partition API: the first bytes choose the pair
and the direction, as for decode). A target fails (and libFuzzer saves the input) when an exception
escapes, when an Issue says our own code failed (BUG_CODES), on a timeout (-timeout) or past
-rss_limit_mb.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.fuzz.stream_seeds import SEG

LINKTYPES = (0, 1, 12, 101, 108, 113, 228, 229, 276)
PORTS = (9092, 19093)


def _check_issues(issues):
    from tests.fuzz.support import BUG_CODES
    for i in issues:
        if i.code in BUG_CODES:
            raise AssertionError(f"our code failed: {i!r}")


def target_capture():
    from dissector.pipeline import dissect
    fd, name = tempfile.mkstemp(prefix="atheris-capture-", suffix=".cap")
    os.close(fd)

    def one(data):
        with open(name, "wb") as f:
            f.write(data)
        run = dissect(name, PORTS, level="records", auto=len(data) % 2 == 0)
        for ex in run:
            _check_issues(ex.issues)
        _check_issues(run.issues)
    return one


def target_packet():
    from dissector.capture.layers import tcp_segment

    def one(data):
        if not data:
            return
        seg = tcp_segment(LINKTYPES[data[0] % len(LINKTYPES)], data[1:])
        if seg is not None and not isinstance(seg, str):
            assert len(seg[7]) <= len(data)
    return one


def target_decode():
    from dissector.protocol import tree
    from dissector.protocol.decode import decode_request, decode_response
    from tests.fuzz.support import PAIRS

    def one(data):
        if len(data) < 3:
            return
        k, v = PAIRS[int.from_bytes(data[:2], "big") % len(PAIRS)]
        body = data[3:]
        if data[2] & 1:
            _check_issues(decode_response(body, k, v).issues)
            tree.response_tree(body, k, v)
        else:
            _check_issues(decode_request(body).issues)
            tree.request_tree(body)
    return one


def target_records():
    from dissector.records import decode_record_set

    def one(data):
        for records in (True, False):
            rs = decode_record_set(data, records=records, max_uncompressed=1 << 20)
            _check_issues(rs.issues)
            list(rs.records())
    return one


def segments(data):
    """The TCP segments `data` describes, one connection between a client (port 5000) and a
    broker (9092): (packet, time, source, destination, ports, sequence and acknowledgement
    numbers, flags, payload) each, from records of stream_seeds.SEG (the client's SYN alone
    without ACK) and the payload."""
    c, b = b"\x7f\0\0\1", b"\x7f\0\0\2"
    seq = [1000, 7000]
    pos = n = 0
    while pos + SEG.size <= len(data):
        flags, step, length = SEG.unpack_from(data, pos)
        pos += SEG.size
        payload = data[pos:pos + length]
        pos += length
        side = flags >> 7
        seq[side] = (seq[side] + step - 1024) & 0xFFFFFFFF
        n += 1
        flags &= 0x3F
        if not (side == 0 and flags & 0x02):
            flags |= 0x10
        ends = (c, b, 5000, 9092) if side == 0 else (b, c, 9092, 5000)
        yield (n, n * 1000, *ends, seq[side], seq[1 - side], flags, payload)


def _feed(d, data):
    """The segments of `data` through Dissector `d`, then its end."""
    for segment in segments(data):
        d.feed_segment(*segment)
        for ex in d.output:
            _check_issues(ex.issues)
        d.output.clear()
    d.finish()
    for ex in d.output:
        _check_issues(ex.issues)
    _check_issues(d.issues)


def target_stream():
    from dissector.pipeline import Dissector

    def one(data):
        _feed(Dissector(PORTS, level="records"), data)
    return one


def target_tls():
    from dissector.pipeline import Dissector
    from dissector.tls.keylog import KeyLog

    def one(data):
        if len(data) < 2:
            return
        end = 2 + int.from_bytes(data[:2], "big")
        keylog = KeyLog()
        keylog.add_text(data[2:end])
        _feed(Dissector(PORTS, level="records", keylog=keylog), data[end:])
    return one


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as exc:   # noqa: BLE001 - the twins must fail alike
        return "error", type(exc).__name__


def target_reader():
    from dissector.protocol.decode import tables
    from tests.fuzz.support import PAIRS
    budgets = (0, 1, 7, 1 << 20, -(1 << 63), (1 << 63) - 1)

    def one(data):
        if len(data) < 4:
            return
        k, v = PAIRS[int.from_bytes(data[:2], "big") % len(PAIRS)]
        entry = tables(k)[data[2] & 1].get(v)
        if entry is None:
            return
        fast, body = entry[0], data[4:]
        budget = budgets[data[3] % len(budgets)]
        if hasattr(fast, "fallback"):
            assert _read(fast, body, budget) == _read(fast.fallback, body, budget)
    return one


def _read(reader, body, budget):
    """What decode_struct sees (tests/protocol/test_compiled_reader.py): the body and its end,
    or a failure (an exception, or an end past the message, where a generated reader sliced
    past it)."""
    from tests.protocol.test_compiled_reader import _canon
    try:
        obj, end = reader(body, 0, budget)
    except Exception:   # noqa: BLE001
        return "failed"
    return (_canon(obj), end) if end <= len(body) else "failed"


def target_summarize():
    from analysis.load import kept_bodies
    from analysis.partition_columns import LAYOUT, SIDES
    from analysis.schema import PARTITION_COLUMNS
    from dissector import partition_walk
    from dissector.protocol.decode import tables
    from dissector.summary_plan import plan
    from dissector.records.record_set import walk_set
    from tests.fuzz.support import PAIRS
    specs = kept_bodies().rows

    def one(data):
        if len(data) < 3:
            return
        k, v = PAIRS[int.from_bytes(data[:2], "big") % len(PAIRS)]
        direction = data[2] & 1
        entry = tables(k)[direction].get(v)
        # with bit 2, analysis.load's plan for Produce and Fetch: their rows handed over too
        spec = specs[k][direction] if data[2] & 4 and k in specs else None
        if entry is None or plan(entry[1], spec) is None or not hasattr(entry[0], "summarize"):
            return
        full = data[2] & 2 == 2   # the records level: the record sets handed over too
        got = _outcome(entry[0].summarize, data[3:], 0, plan(entry[1], spec), True, {}, walk_set,
                       full, [1 << 20])
        if got[0] == "ok":   # what it walked, a decode must read too, to the same end
            assert entry[0].fallback(data[3:], 0)[1] == got[1][0]
            assert (got[1][10] is None) != full
            assert len(got[1]) == (13 if spec is not None else 11)
        if got[0] == "ok" and spec is not None:   # the groups walked by both walks alike
            side = SIDES[k][direction][1]
            walks = [(walk, [[] for _ in PARTITION_COLUMNS]) for walk in (
                partition_walk.walk_side, partition_walk.py_walk_side)]
            assert len({repr((_outcome(walk, cols, 0, got[1][11], side, LAYOUT, None, True),
                              cols)) for walk, cols in walks}) == 1
    return one


def target_walkset():
    from dissector.records.record_set import py_walk_set, walk_set
    from dissector.records import decode_record_set
    from tests.records.test_headers_walk import _records_view

    from dissector.records.record_set import py_set_sums, set_sums

    def one(data):
        got = _outcome(walk_set, data, False, [1 << 20])
        if got[0] == "ok":
            rs = decode_record_set(data, records=False, max_uncompressed=1 << 20)
            assert len(rs.batches) == len(got[1].batches)
        sums = _outcome(set_sums, data, False, [1 << 20])
        twin = _outcome(py_set_sums, data, False, [1 << 20])
        assert sums[0] == twin[0] and type(sums[1]) is type(twin[1])
        if type(twin[1]) is tuple:
            assert sums == twin
        # the records level (records/_headers.c checked_set, else the Python walk), with a
        # budget the first byte picks: what the Python walk makes, the budget paid alike
        budget = (0, 159, 160, 1000, 1 << 20)[data[0] % 5] if data else 1 << 20
        fast, slow = [budget], [budget]
        got = _outcome(walk_set, data, True, fast)
        want = _outcome(py_walk_set, data, True, slow)
        assert got[0] == want[0] and fast == slow
        if got[0] == "ok":
            assert _records_view(got[1]) == _records_view(want[1])
    return one


def target_columns():
    from dissector.records import columns, text
    from dissector.records.record_set import walk_set

    def one(data):
        if len(data) < 2 or columns.append_v2 is columns.py_append_v2:
            return
        count = data[0]
        a, b = columns.RecordColumns(), columns.RecordColumns()
        args = (data[2:], count, 1000, 1_700_000_000_000, None if data[1] & 1 else 5, 0)
        got = _outcome(columns.append_v2, a.buffers, *args)
        assert got == _outcome(columns.py_append_v2, b.buffers, *args)
        assert [bytes(x) for x in a.buffers] == [bytes(x) for x in b.buffers]
        # the set walk (append_sets) over the record set the data makes (twice, a raw set
        # between), cut after the batch that brings the rows to the second byte; then its batch
        # fields as buffers and text, with a topic of any text
        rs = _outcome(walk_set, data, True, [1 << 20])
        if rs[0] != "ok":
            return
        topic = data[2:2 + data[1] % 12].decode("latin-1")
        sets = [(topic, data[1] - 128, rs[1]), (topic, 0, b"raw"), (topic, 1, rs[1])]
        walks = []
        for walk in (columns.append_sets, columns.py_append_sets):
            cols, sources = columns.RecordColumns(), []
            at = _outcome(walk, cols.buffers, cols.batches, (1, 2, 0, 0), sets, 0, 0,
                          1 + data[1] % 4, 1 << 20, sources, 0, columns.CODEC_NAMES)
            walks.append((at, [bytes(x) for x in cols.buffers], cols.batches, sources))
        assert walks[0] == walks[1]
        heads = walks[0][2] + [tuple(topic if k == 4 else data[1] - 128 for k in range(15))]
        assert (_outcome(columns.batch_buffers, heads, columns.BATCH_KINDS)
                == _outcome(columns.py_batch_buffers, heads, columns.BATCH_KINDS))
        for csv_format in (True, False):
            texts = text.batch_texts(walks[0][2], csv_format, text._NAMES)
            if texts is not None:
                assert texts == text.py_batch_texts(walks[0][2], csv_format)
    return one


def target_csvrow():
    from dissector.output import csv_line, plain_line
    from tests.cli.test_csv_line import past_64_bits, slow_line
    values = (None, 0, -1, 1 << 62, -(1 << 63), 2.5, float("nan"), 1e300, "", "a,b", 'q"', "\n",
              "\r", True)
    stamps = (None, 0, -1, 1 << 62, (1 << 63) - 1, -(1 << 63), 253402300800 * 10**9)
    topics = (None, [], ["t"], ["a,b", "c"], ['q"'])

    def one(data):
        """A row as exchange_row makes them: ints or None at the timestamps, a list of names
        or None at the topics; anything else elsewhere."""
        if len(data) < 4:
            return
        row, ts_at, topics_at = [], [], 3   # never a timestamp's (every fifth)
        for i, x in enumerate(data[:40]):
            if i % 5 == 0:
                ts_at.append(i)
                row.append(stamps[x % len(stamps)])
            elif i == topics_at:
                row.append(topics[x % len(topics)])
            elif x < 200:
                row.append(values[x % len(values)])
            else:
                row.append(data[i:i + x % 9].decode("latin-1"))
        row, ts_at = tuple(row), tuple(ts_at)
        # the compiled line leaves a timestamp past 64 bits to the slow path (None), whose
        # text must then be the twin's line (tests/cli/test_csv_line.py)
        wide = past_64_bits(row, ts_at)
        got, want = (_outcome(csv_line, row, ts_at, topics_at),
                     _outcome(plain_line, row, ts_at, topics_at))
        if wide and got == ("ok", None) and want[0] == "ok" and want[1] is not None:
            assert slow_line(row, ts_at, topics_at) == want[1], (row, want)
        else:
            assert got == want, (row, got)
        holes = tuple(x % (len(row) + 2) - 1 for x in data[40:44])   # some out of range
        got, want = (_outcome(csv_line, row, ts_at, topics_at, holes),
                     _outcome(plain_line, row, ts_at, topics_at, holes))
        assert got == want or wide and got == ("ok", None) and want[0] == "ok", (row, holes)
    return one


def _against_twin(which):
    """The stream target's segments (every live one through its flow's handler) compiled and
    with the twin of `which` (tests.tcp.test_compiled_handler.use_twin), under a small buffer
    budget or not: the same exchanges, frames, issues and connections."""
    from tests.tcp.test_compiled_handler import segment_run, use_twin
    import pytest

    def one(data):
        level = "headers" if len(data) % 2 else "bodies"
        limit = (None, None, 200, 5000)[len(data) // 2 % 4]   # small buffer budgets too
        got = _outcome(segment_run(data, level, limit))
        with pytest.MonkeyPatch.context() as m:
            use_twin(m, which)
            want = _outcome(segment_run(data, level, limit))
        assert got == want
    return one


def target_handler():
    return _against_twin("handler")


def target_pairing():
    return _against_twin("pairing")


def target_decoder():
    from tests.fuzz.support import PAIRS
    from tests.session.test_compiled_decoder import outcome

    def one(data):
        if len(data) < 3:
            return
        k, v = PAIRS[int.from_bytes(data[:2], "big") % len(PAIRS)]
        args = (data[3:], k, v, data[2] & 1, {}, bool(data[2] & 2), bool(data[2] & 4),
                bool(data[2] & 8))
        assert outcome("", *args) == outcome("py_", *args)
    return one


_VALUES = (None, 0, 1, 3, -1, 87, 5000, 1 << 40, 1 << 63, -(1 << 70), 2.5, float("nan"), "",
           "a,b", True, False, ["t", "u"])


def exchange_of(data):
    """An Exchange (or a subclass with a latency of its own) whose connection, frames and
    attributes are values `data` picks, any of them of the wrong type or None."""
    from dissector.model import Connection, Exchange, Frame

    class Timed(Exchange):
        __slots__ = ()
        latency_ms = 1.5
    it = iter(data)

    def pick():
        return _VALUES[next(it, 0) % len(_VALUES)]
    c = Connection(*(pick() for _ in range(5)))
    frames = [Frame(c, 0, pick(), pick(), b"", pick(), pick(), pick(), pick())
              if next(it, 0) & 1 else None for _ in (0, 1)]
    ex = (Timed if next(it, 0) & 1 else Exchange)(c, *frames, *(pick() for _ in range(5)))
    for name in ("raw_sasl", "error_code", "error_count", "throttle_time_ms", "topics",
                 "partition_count", "record_count", "records_bytes",
                 "records_uncompressed_bytes", "index"):
        setattr(ex, name, pick())
    ex.issues = [None] * (next(it, 0) % 3)
    return ex


def target_tablerow():
    from dissector.tables import exchange_row, py_exchange_row

    def one(data):
        ex = exchange_of(data)
        got, want = _outcome(exchange_row, ex), _outcome(py_exchange_row, ex)
        assert repr(got) == repr(want)   # (a time computed from nan is a nan of its own)
    return one


def target_framebuf():
    from dissector import framebuf

    def one(data):
        if len(data) < 5:
            return
        n, at, start, stop, own = data[0] % 64, data[1] - 8, data[2] - 8, data[3] - 8, data[4]
        src = data[5:]
        c_buf, py_buf = framebuf.frame_buffer(n), framebuf.py_frame_buffer(n)
        framebuf.fill(c_buf, 0, bytes(n), 0, n)
        got = _outcome(framebuf.fill, c_buf, at, c_buf if own & 1 else src, start, stop)
        want = _outcome(framebuf.py_fill, py_buf, at, bytes(py_buf) if own & 1 else src,
                        start, stop)
        assert got[0] == want[0]
        assert framebuf.finished(c_buf) == framebuf.py_finished(py_buf)
    return one


def target_partitions():
    from analysis.partition_columns import SIDES
    from dissector import partition_walk
    from dissector.protocol.decode import decode_request, decode_response
    from tests.fuzz.support import PAIRS

    def one(data):
        if len(data) < 3 or partition_walk.walk_side is partition_walk.py_walk_side:
            return
        k, v = PAIRS[int.from_bytes(data[:2], "big") % len(PAIRS)]
        direction = data[2] & 1
        msg = decode_response(data[3:], k, v) if direction else decode_request(data[3:])
        k = msg.api_key
        if msg.body is not None and k in SIDES and SIDES[k][direction] is not None:
            walked = partition_walks(k, direction, msg.body)
            assert walked[0] == walked[1], (k, msg.api_version)
    return one


def partition_walks(k, direction, body):
    """(compiled, twin): each walk of a body of API k as the first body of its exchange, then
    (given its own shape) as the second, then as the exchange walk's one body: the columns,
    shape, rows or exception type each time."""
    from analysis.partition_columns import _OFFSETS, LAYOUT, SIDES
    from analysis.schema import PARTITION_COLUMNS
    from dissector import partition_walk
    topics, side = SIDES[k][direction]
    bodies = (None, body) if direction else (body, None)
    out = []
    for walk, exchange in ((partition_walk.walk_side, partition_walk.walk_exchange),
                           (partition_walk.py_walk_side, partition_walk.py_walk_exchange)):
        cols = [[] for _ in PARTITION_COLUMNS]
        first = _outcome(walk, cols, 0, topics(body), side, LAYOUT, None)
        seen = [first, [list(c) for c in cols]]
        if first[0] == "ok" and first[1]:
            seen.append(_outcome(walk, cols, 0, topics(body), side, LAYOUT, first[1]))
            seen.append(cols)
        cols = [[] for _ in PARTITION_COLUMNS]
        seen.append(_outcome(exchange, cols, 0, SIDES[k], *bodies, LAYOUT, _OFFSETS.get(k)))
        seen.append(cols)
        out.append(seen)
    return out


TARGETS = {"capture": target_capture, "packet": target_packet, "decode": target_decode,
           "records": target_records, "stream": target_stream, "reader": target_reader,
           "summarize": target_summarize, "walkset": target_walkset, "columns": target_columns,
           "csvrow": target_csvrow, "framebuf": target_framebuf, "handler": target_handler,
           "pairing": target_pairing, "decoder": target_decoder, "tablerow": target_tablerow,
           "partitions": target_partitions, "tls": target_tls}


# -- seed corpora ------------------------------------------------------------------------------

def make_corpus(root: Path):
    import random
    from tests.fuzz import stream_seeds
    from tests.fuzz.support import (PAIRS, REAL, packets, request_message, response_message,
                                    write_pcap, write_pcapng)
    root.mkdir(parents=True, exist_ok=True)
    for t in TARGETS:
        (root / t).mkdir(exist_ok=True)
    rnd = random.Random(0)
    for path in REAL:
        pkts = packets(path)
        for i in range(0, len(pkts), 40):
            (root / "capture" / f"{path.stem}-{i}").write_bytes(write_pcap(pkts[i:i + 40]))
            (root / "capture" / f"{path.stem}-{i}-ng").write_bytes(write_pcapng(pkts[i:i + 40]))
        for j, (_, lt, data) in enumerate(pkts[:30]):
            (root / "packet" / f"{path.stem}-{j}").write_bytes(
                bytes((LINKTYPES.index(lt),)) + data)
        for i, conn in enumerate(stream_seeds.connections(pkts, PORTS)[:4]):
            (root / "stream" / f"{path.stem}-{i}").write_bytes(stream_seeds.encode(conn))
    _tls_corpus(root)
    for i, (k, v) in enumerate(PAIRS):
        prefix = i.to_bytes(2, "big")
        (root / "decode" / f"{k}v{v}-req").write_bytes(prefix + b"\0" +
                                                       request_message(k, v, rnd))
        (root / "decode" / f"{k}v{v}-resp").write_bytes(prefix + b"\1" +
                                                        response_message(k, v, rnd))
        if k in (0, 1):   # Produce and Fetch walked as analysis.load walks them (their rows)
            for d in ("req", "resp"):
                seed = bytearray((root / "decode" / f"{k}v{v}-{d}").read_bytes())
                seed[2] |= 4
                (root / "summarize" / f"{k}v{v}-{d}-rows").write_bytes(bytes(seed))
    try:
        from tests.records.builders import build
        items = [(1_700_000_000_000 + i, b"k", b"v" * i, None) for i in range(4)]
        for magic in (0, 1, 2):
            for codec in (0, 1, 2, 3, 4):
                if codec == 4 and magic < 2:
                    continue
                try:
                    data = build(magic, codec, [(t, k, v, [("h", b"x")] if magic == 2 else None)
                                                for t, k, v, _ in items])
                except Exception:  # noqa: BLE001 - a codec library missing: no seed for it
                    continue
                (root / "records" / f"magic{magic}-codec{codec}").write_bytes(data)
    except ImportError:
        pass


def _tls_corpus(root: Path) -> None:
    """The TLS target's seeds (stream_seeds.tls_wires) of the kafka-python capture; two of
    them also as pcapng captures whose Decryption Secrets Block holds their key log, for the
    capture target."""
    from tests.fuzz import stream_seeds
    from tests.support import CAPTURES
    from tests.tls import tlsgen
    with tempfile.TemporaryDirectory() as d:
        wires = stream_seeds.tls_wires(CAPTURES / "kafka_python.pcap", 9092, d)
        for name, text, wire in wires:
            (root / "tls" / name).write_bytes(stream_seeds.tls_seed(text, wire))
        for name, text, wire in wires[:4:3]:   # TLS 1.3 and 1.2
            path = Path(d) / "tls.pcapng"
            tlsgen.write_pcapng(path, tlsgen.packets([wire], 9092), secrets=text)
            (root / "capture" / f"{name}-secrets").write_bytes(path.read_bytes())


def _share_seeds(root: Path) -> None:
    """The compiled entry points' targets start from the seeds of the targets that reach them."""
    import shutil
    for target, source in (("reader", "decode"), ("summarize", "decode"), ("walkset", "records"),
                           ("columns", "records"), ("csvrow", "decode"), ("framebuf", "packet"),
                           ("handler", "stream"), ("pairing", "stream"), ("decoder", "decode"),
                           ("tablerow", "packet"), ("partitions", "decode")):
        for f in (root / source).iterdir():
            shutil.copy(f, root / target / f.name)


def main(argv):
    if len(argv) >= 2 and argv[0] == "corpus":
        make_corpus(Path(argv[1]))
        _share_seeds(Path(argv[1]))
        return 0
    if not argv or argv[0] not in TARGETS:
        print(__doc__, file=sys.stderr)
        return 2
    import atheris
    import importlib
    with atheris.instrument_imports(include=["dissector"]):  # coverage feedback from our code
        for name in ("dissector.pipeline", "dissector.protocol.decode", "dissector.records"):
            importlib.import_module(name)
    one = TARGETS[argv[0]]()
    atheris.Setup([sys.argv[0]] + argv[1:], one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

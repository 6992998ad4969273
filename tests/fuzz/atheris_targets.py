"""Coverage-guided fuzz targets for atheris (libFuzzer for Python), run by scripts/fuzz.sh.

    python -m tests.fuzz.atheris_targets corpus DIR          # write seed corpora under DIR/<target>
    python -m tests.fuzz.atheris_targets TARGET [libFuzzer options] [CORPUS_DIR...]

Targets: capture (a whole capture file through dissect at the records level), packet (link/IP/
TCP parsing), decode (every generated decoder: the first bytes choose the pair), records
(record sets and codecs), stream (a sequence of TCP segments through reassembly, framing and
pairing). A target fails (and libFuzzer saves the input) when an exception escapes, when an
Issue says our own code failed (BUG_CODES), on a timeout (-timeout) or past -rss_limit_mb.
"""
from __future__ import annotations

import os
import struct
import sys
import tempfile
from pathlib import Path

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


_SEG = struct.Struct(">BHH")  # flags (bit 7: direction), sequence step, payload length


def target_stream():
    from dissector.pipeline import Dissector
    c, b = b"\x7f\0\0\1", b"\x7f\0\0\2"

    def one(data):
        d = Dissector(PORTS, level="records")
        seq = [1000, 7000]
        pos = n = 0
        while pos + _SEG.size <= len(data):
            flags, step, length = _SEG.unpack_from(data, pos)
            pos += _SEG.size
            payload = data[pos:pos + length]
            pos += length
            side = flags >> 7
            seq[side] = (seq[side] + step - 1024) & 0xFFFFFFFF
            n += 1
            src, dst, sport, dport = (c, b, 5000, 9092) if side == 0 else (b, c, 9092, 5000)
            d.feed_segment(n, n * 1000, src, dst, sport, dport, seq[side], seq[1 - side],
                           flags & 0x3F | 0x10, payload)
            for ex in d.output:
                _check_issues(ex.issues)
            d.output.clear()
        d.finish()
        _check_issues(d.issues)
    return one


TARGETS = {"capture": target_capture, "packet": target_packet, "decode": target_decode,
           "records": target_records, "stream": target_stream}


# -- seed corpora ------------------------------------------------------------------------------

def make_corpus(root: Path):
    import random
    from dissector.capture.layers import tcp_segment
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
        segs = []
        for _, lt, data in pkts[:60]:
            seg = tcp_segment(lt, data)
            if seg is None or isinstance(seg, str):
                continue
            side = 0 if seg[3] in PORTS else 1
            segs.append(_SEG.pack(side << 7 | (seg[6] & 0x3F), 1024 + len(seg[7]) % 64000,
                                  len(seg[7])) + bytes(seg[7]))
        (root / "stream" / path.stem).write_bytes(b"".join(segs))
    for i, (k, v) in enumerate(PAIRS):
        prefix = i.to_bytes(2, "big")
        (root / "decode" / f"{k}v{v}-req").write_bytes(prefix + b"\0" +
                                                       request_message(k, v, rnd))
        (root / "decode" / f"{k}v{v}-resp").write_bytes(prefix + b"\1" +
                                                        response_message(k, v, rnd))
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


def main(argv):
    if len(argv) >= 2 and argv[0] == "corpus":
        make_corpus(Path(argv[1]))
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

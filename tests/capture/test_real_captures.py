"""The project's real captures (captures/): every packet's TCP fields and payload equal tshark's
(a zero window is ZERO_WINDOW in our flags)."""
import subprocess

import pytest

from dissector.capture import format_addr, read_packets, tcp_segment
from dissector.tcp.reassembly import ZERO_WINDOW
from tests.support import CAPTURES, require_tool

FILES = sorted(p for p in CAPTURES.glob("*") if p.suffix in (".pcap", ".pcapng", ".gz"))
FIELDS = ["frame.time_epoch", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "tcp.srcport", "tcp.dstport",
          "tcp.seq_raw", "tcp.ack_raw", "tcp.flags", "tcp.window_size_value", "tcp.payload"]


def _tshark_rows(path):
    tshark = require_tool("tshark")
    cmd = [tshark, "-n", "-r", str(path), "-T", "fields", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout
    rows = []
    for line in out.splitlines():
        ts, src4, src6, dst4, dst6, sport, dport, seq, ack, flags, window, payload = \
            line.split("\t")
        sec, _, frac = ts.partition(".")
        if not sport:
            rows.append((int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]), None))
            continue
        flags = int(flags, 16) & 0xFF  # tshark adds the NS/reserved bits; we keep the classic 8
        if int(window) == 0:
            flags |= ZERO_WINDOW
        rows.append((int(sec) * 10**9 + int(frac.ljust(9, "0")[:9]),
                     (src4 or src6, dst4 or dst6, int(sport), int(dport), int(seq), int(ack), flags,
                      bytes.fromhex(payload.replace(":", "")))))
    return rows


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_capture_matches_tshark(path):
    ours = []
    for _, ts, linktype, data in read_packets(path):
        seg = tcp_segment(linktype, data)
        if isinstance(seg, tuple):
            src, dst, sport, dport, seq, ack, flags, payload = seg
            seg = (format_addr(src), format_addr(dst), sport, dport, seq, ack, flags, bytes(payload))
        ours.append((ts, seg))
    theirs = _tshark_rows(path)
    assert len(ours) == len(theirs) > 0
    for i, (a, b) in enumerate(zip(ours, theirs), 1):
        assert a == b, f"packet {i}"

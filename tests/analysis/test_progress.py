"""Progress on the analysis commands: a bar on a terminal for captures over a few MB, nothing
when stderr is not a terminal."""
import os
import pty
import subprocess
import sys

from dissector.capture.writer import PcapWriter

from .build import LINKTYPE_ETHERNET, T0

PACKETS = 20_000   # the pipeline reports progress every 16384 packets


def _big_capture(path):
    """About 5 MB of TCP packets on a port that is not Kafka's (read, then ignored)."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    pkt = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1234, dport=80)
                / (b"x" * 200))
    with PcapWriter(str(path), LINKTYPE_ETHERNET) as w:
        for i in range(PACKETS):
            w.write(T0 + i * 1000, pkt)
    assert path.stat().st_size > 4 << 20
    return path


def _run(args, tty):
    cmd = [sys.executable, "-m", "dissector", *args]
    if not tty:
        return subprocess.run(cmd, capture_output=True, timeout=120).stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:   # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=120)
    finally:
        os.close(master)
    return b"".join(chunks)


def test_progress_bar_only_on_a_terminal(tmp_path):
    cap = _big_capture(tmp_path / "big.pcap")
    args = ["export", str(cap), "--out", str(tmp_path / "out"), "--level", "headers"]
    on_tty = _run(args, tty=True)
    assert b"[#" in on_tty and b"MB/s" in on_tty and b"big.pcap" in on_tty
    piped = _run(args, tty=False)
    assert b"MB/s" not in piped
    assert b"0 exchanges" in piped

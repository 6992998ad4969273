"""Files written by the real capture tools (tcpdump, dumpcap) while real TCP traffic flows on
loopback: the reassembled payloads equal the bytes the sockets sent. Covers what synthetic files
cannot: the tools' own headers, options, statistics blocks, SLL2 from `-i any`."""
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from dissector.capture import read_packets, tcp_segment
from tests.support import require_root, require_tool

MESSAGE = bytes(range(256)) * 400  # 100 KiB each way: many segments


def _echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            got = b""
            while len(got) < len(MESSAGE):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                got += chunk
            conn.sendall(got[::-1])
        srv.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def _talk(port):
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.sendall(MESSAGE)
        back = b""
        while len(back) < len(MESSAGE):
            chunk = c.recv(65536)
            if not chunk:
                break
            back += chunk
    assert back == MESSAGE[::-1]


def _capture(cmd, ready, path):
    """Run a capture tool until it says it is listening, make traffic, stop it with SIGINT.

    Callers give the tools large buffers (-B): loopback bursts of 64 KiB packets overflow the
    default ones and the kernel drops packets, which is not what these tests are about."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        line = ""
        while ready not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{cmd[0]} did not start: {line!r}")
        time.sleep(0.3)
        yield
        time.sleep(1.5)  # the kernel hands packets over in blocks, up to a second late
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert os.path.getsize(path) > 0


def _streams(path, port):
    """Per direction, payload bytes in sequence order (duplicates dropped), and link types seen."""
    segs = {True: {}, False: {}}
    linktypes = set()
    for _, _, linktype, data in read_packets(path):
        seg = tcp_segment(linktype, data)
        assert not isinstance(seg, str), seg
        if seg is None:
            continue
        linktypes.add(linktype)
        _, _, sport, dport, seq, _, _, payload = seg
        if payload and port in (sport, dport):
            segs[dport == port].setdefault(seq, bytes(payload))
    out = {}
    for to_server, by_seq in segs.items():
        data = b""
        for seq in sorted(by_seq):
            data += by_seq[seq]
        out[to_server] = data
    return out, linktypes


@pytest.mark.parametrize("tool,linktype", [("tcpdump-lo", 1), ("tcpdump-any", 276), ("dumpcap", 1)])
def test_tool_written_capture(tmp_path, tool, linktype):
    require_root()
    port = _echo_server()
    if tool.startswith("tcpdump"):
        path = tmp_path / "t.pcap"
        iface = "any" if tool.endswith("any") else "lo"
        cmd = [require_tool("tcpdump"), "-i", iface, "-B", "65536", "--immediate-mode", "-U", "-w", str(path), "tcp", "port", str(port)]
        if iface == "any":
            cmd[1:1] = ["-y", "LINUX_SLL2"]
        ready = "listening on"
    else:
        path = tmp_path / "t.pcapng"
        cmd = [require_tool("dumpcap"), "-i", "lo", "-B", "64", "-f", f"tcp port {port}", "-w", str(path)]
        ready = "Capturing on"
    for _ in _capture(cmd, ready, path):
        _talk(port)
    streams, linktypes = _streams(path, port)
    assert linktypes == {linktype}
    assert streams[True] == MESSAGE
    assert streams[False] == MESSAGE[::-1]

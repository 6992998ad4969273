"""The live socket on loopback: each packet once, kernel timestamps, the kernel's counters."""
import socket
import time

import pytest

from dissector.live.errors import LiveError
from dissector.live.sniffer import LINKTYPE_ETHERNET, Sniffer, interface_names
from tests.support import require_module, require_root


def test_interface_names_are_the_kernels():
    assert set(interface_names()) == set(name for _, name in socket.if_nameindex())
    with pytest.raises(LiveError, match="the interfaces here are: .*lo"):
        Sniffer("no-such-if")


def test_loopback_packets_once_with_timestamps_and_counters():
    require_root()
    require_module("scapy")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    sniffer = Sniffer("lo", ports=(port,))
    try:
        assert sniffer.loopback and sniffer.linktype == LINKTYPE_ETHERNET
        before = time.time_ns()
        client = socket.create_connection(("127.0.0.1", port))
        server, _ = srv.accept()
        payloads = [b"a" * 100, b"b" * 3000, b"c" * 50000]
        for p in payloads:
            client.sendall(p)
            got = b""
            while len(got) < len(p):
                got += server.recv(65536)
        client.close()
        server.close()
        after = time.time_ns()
        time.sleep(0.2)
        packets = []
        while True:
            batch = sniffer.read(0.2)
            if not batch:
                break
            packets += batch
        sniffer.update_kernel_stats()
    finally:
        sniffer.close()
        srv.close()
    # every payload byte once: the client's data segments (TCP header length from byte 46)
    client_port = None
    data = b""
    for ts, frame, wire_len in packets:
        assert before <= ts <= after + 10**9 and wire_len == len(frame)
        sport = int.from_bytes(frame[34:36], "big")
        if int.from_bytes(frame[36:38], "big") == port:
            client_port = client_port or sport
            data += frame[14 + 20 + (frame[46] >> 4) * 4:]
    assert data == b"".join(payloads)
    assert [ts for ts, _, _ in packets] == sorted(ts for ts, _, _ in packets)
    assert sniffer.kernel_packets == len(packets) and sniffer.kernel_drops == 0

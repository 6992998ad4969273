"""The kernel filter built for --port, checked against libpcap's own compilation of the same
filter on real loopback traffic (the kernel runs both programs side by side)."""
import socket
import sys
import time

import pytest

from dissector.live import bpf
from tests.support import require_root, require_tool

ETH_P_ALL = 0x0003


def _packet_socket(kind, program):
    s = socket.socket(socket.AF_PACKET, kind, socket.htons(ETH_P_ALL))
    bpf.attach(s, program)
    s.bind(("lo", ETH_P_ALL))
    while True:   # packets queued between socket() and attach() were not filtered
        try:
            s.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return s


def _received(s):
    out = []
    while True:
        try:
            out.append(s.recv(262144, socket.MSG_DONTWAIT))
        except BlockingIOError:
            return out


def _listener(family, host):
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.bind((host, 0))
    srv.listen()
    return srv


def _talk(srv, host):
    """A TCP connection with data both ways and an orderly close."""
    c = socket.create_connection((host, srv.getsockname()[1]))
    a, _ = srv.accept()
    c.sendall(b"request" * 10)
    a.recv(1000)
    a.sendall(b"response" * 10)
    c.recv(1000)
    c.close()
    a.close()


@pytest.fixture
def servers():
    require_root()
    s4, other, s6 = (_listener(socket.AF_INET, "127.0.0.1"),
                     _listener(socket.AF_INET, "127.0.0.1"),
                     _listener(socket.AF_INET6, "::1"))
    yield s4, other, s6
    for s in (s4, other, s6):
        s.close()


def _traffic(s4, other, s6):
    _talk(s4, "127.0.0.1")
    _talk(other, "127.0.0.1")
    _talk(s6, "::1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:   # UDP to a watched port
        u.sendto(b"not tcp", ("127.0.0.1", s4.getsockname()[1]))
    time.sleep(0.2)


def test_port_filter_matches_libpcap(servers):
    s4, other, s6 = servers
    p4, p6 = s4.getsockname()[1], s6.getsockname()[1]
    ours = _packet_socket(socket.SOCK_RAW, bpf.port_filter((p4, p6), drop_outgoing=True))
    theirs = _packet_socket(socket.SOCK_RAW, bpf.compile_expression(
        f"(tcp port {p4} or tcp port {p6}) and inbound", "lo", 1))
    try:
        _traffic(s4, other, s6)
        got, want = _received(ours), _received(theirs)
    finally:
        ours.close()
        theirs.close()
    # each connection: handshake, two data segments, their acks, FIN/ACK close: at least 8 each
    assert len(want) >= 16
    assert got == want
    ipv6 = [p for p in got if p[12:14] == b"\x86\xdd"]
    assert ipv6 and len(ipv6) < len(got)


def test_loopback_without_outgoing_filter_sees_each_packet_twice(servers):
    """Why the filter drops outgoing packets on lo: without it every packet arrives twice."""
    s4, other, s6 = servers
    p4 = s4.getsockname()[1]
    both = _packet_socket(socket.SOCK_RAW, bpf.port_filter((p4,)))
    once = _packet_socket(socket.SOCK_RAW, bpf.port_filter((p4,), drop_outgoing=True))
    try:
        _talk(s4, "127.0.0.1")
        time.sleep(0.2)
        twice, single = _received(both), _received(once)
    finally:
        both.close()
        once.close()
    assert single and len(twice) == 2 * len(single)


def test_auto_accepts_all_tcp_and_nothing_else(servers):
    s4, other, s6 = servers
    ours = _packet_socket(socket.SOCK_RAW, bpf.port_filter((), drop_outgoing=True))
    theirs = _packet_socket(socket.SOCK_RAW, bpf.compile_expression("tcp and inbound", "lo", 1))
    try:
        _traffic(s4, other, s6)
        got, want = _received(ours), _received(theirs)
    finally:
        ours.close()
        theirs.close()
    ports = {s.getsockname()[1] for s in (s4, other, s6)}
    # other tests' loopback traffic may interleave: compare only our three servers' packets
    def mine(pkts):
        out = []
        for p in pkts:
            off = 14 + (40 if p[12:14] == b"\x86\xdd" else (p[14] & 15) * 4)
            if {int.from_bytes(p[off:off + 2], "big"), int.from_bytes(p[off + 2:off + 4], "big")} & ports:
                out.append(p)
        return out
    assert len(mine(want)) >= 24
    assert mine(got) == mine(want)


def test_raw_ip_variant_on_cooked_socket(servers):
    """A cooked (SOCK_DGRAM) packet socket hands the filter the packet from its IP header on,
    as a raw-IP device does: the raw_ip program must select the same packets."""
    s4, other, s6 = servers
    p4, p6 = s4.getsockname()[1], s6.getsockname()[1]
    eth = _packet_socket(socket.SOCK_RAW, bpf.port_filter((p4, p6), drop_outgoing=True))
    raw = _packet_socket(socket.SOCK_DGRAM,
                         bpf.port_filter((p4, p6), raw_ip=True, drop_outgoing=True))
    try:
        _traffic(s4, other, s6)
        got, want = _received(raw), _received(eth)
    finally:
        eth.close()
        raw.close()
    assert want and got == [p[14:] for p in want]


def test_bad_expression_is_a_filter_error():
    with pytest.raises(bpf.FilterError):
        bpf.compile_expression("tcp port port", "lo", 1)


def test_many_ports_fall_back_to_all_tcp():
    require_root()
    assert bpf.port_filter(range(1000, 1001 + bpf.MAX_PORTS)) == bpf.port_filter(())
    # the longest port program still passes the kernel's checks (jumps inside, 8-bit offsets)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)) as s:
        bpf.attach(s, bpf.port_filter(range(1000, 1000 + bpf.MAX_PORTS), drop_outgoing=True))


def test_without_libpcap_ports_still_filter_and_bpf_uses_tcpdump(monkeypatch):
    require_root()
    require_tool("tcpdump")
    from dissector.live.sniffer import Sniffer
    with_libpcap = bpf.compile_expression("tcp port 9092", "lo", 1)
    monkeypatch.setitem(sys.modules, "scapy.libs.winpcapy", None)   # libpcap cannot be loaded
    assert bpf.compile_expression("tcp port 9092", "lo", 1) == with_libpcap   # via tcpdump -ddd
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(bpf.FilterError, match="needs libpcap or tcpdump"):
        bpf.compile_expression("tcp port 9092", "lo", 1)
    Sniffer("lo", ports=(9092,)).close()    # the --port filter is built here: nothing needed

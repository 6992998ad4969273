"""Link -> IP -> TCP parsing on packets built by scapy, with scapy's and dpkt's own dissection
as oracles for the property tests."""
import struct

import pytest
from hypothesis import given, settings, strategies as st
from scapy.layers.inet import IP, TCP, UDP, IPOption_RR, IPOption_Timestamp
from scapy.layers.inet6 import (IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
                                IPv6ExtHdrRouting)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from dissector.capture import ACK, FIN, PSH, RST, SYN, URG, format_addr, tcp_segment

PAYLOAD = b"kafka!" * 50
V4 = IP(src="192.0.2.1", dst="198.51.100.7") / TCP(sport=51234, dport=9092, seq=0xFFFFFF00,
                                                   ack=12345, flags="PA") / Raw(PAYLOAD)
V6 = IPv6(src="2001:db8::1", dst="2001:db8:0:1::2") / TCP(sport=51234, dport=9092, seq=7, ack=8,
                                                          flags="A") / Raw(PAYLOAD)
V4_ADDRS = (bytes([192, 0, 2, 1]), bytes([198, 51, 100, 7]))
V6_ADDRS = (bytes.fromhex("20010db8000000000000000000000001"), bytes.fromhex("20010db8000000010000000000000002"))
EXPECT_V4 = V4_ADDRS + (51234, 9092, 0xFFFFFF00, 12345, PSH | ACK, PAYLOAD)
EXPECT_V6 = V6_ADDRS + (51234, 9092, 7, 8, ACK, PAYLOAD)


def _eth(**fields):
    """Fixed MAC addresses: left empty, scapy would resolve them (routes, ARP) for every packet."""
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", **fields)


def _seg(linktype, pkt):
    got = tcp_segment(linktype, bytes(pkt))
    if isinstance(got, tuple):
        got = got[:7] + (bytes(got[7]),)
    return got


def _bsd_family(value, order):
    return struct.pack(order + "I", value)


@pytest.mark.parametrize("linktype,frame,expected", [
    (1, _eth() / V4, EXPECT_V4),
    (1, _eth() / V6, EXPECT_V6),
    (1, _eth() / Dot1Q(vlan=10) / V4, EXPECT_V4),
    (1, _eth() / Dot1AD(vlan=20) / Dot1Q(vlan=10) / V6, EXPECT_V6),  # QinQ
    (1, _eth(type=0x9100) / Dot1Q(vlan=1, type=0x88A8) / Dot1Q(vlan=2, type=0x8100) / Dot1Q(vlan=3) / V4,
     EXPECT_V4),
    (113, CookedLinux() / V4, EXPECT_V4),
    (113, CookedLinux() / V6, EXPECT_V6),
    (276, CookedLinuxV2() / V4, EXPECT_V4),
    (276, CookedLinuxV2() / V6, EXPECT_V6),
    (101, V4, EXPECT_V4),
    (101, V6, EXPECT_V6),
    (12, V4, EXPECT_V4),
    (14, V6, EXPECT_V6),
    (228, V4, EXPECT_V4),
    (229, V6, EXPECT_V6),
], ids=["eth4", "eth6", "vlan", "qinq6", "3tags", "sll4", "sll6", "sll2_4", "sll2_6", "raw4", "raw6",
        "raw12", "raw14", "ipv4", "ipv6"])
def test_link_types(linktype, frame, expected):
    assert _seg(linktype, frame) == expected


@pytest.mark.parametrize("order", ["<", ">"], ids=["le_host", "be_host"])
@pytest.mark.parametrize("family,ip,expected", [
    (2, V4, EXPECT_V4), (24, V6, EXPECT_V6), (28, V6, EXPECT_V6), (30, V6, EXPECT_V6)])
def test_bsd_null_loopback_either_byte_order(order, family, ip, expected):
    assert _seg(0, _bsd_family(family, order) + bytes(ip)) == expected


def test_openbsd_loop_network_order():
    assert _seg(108, _bsd_family(2, ">") + bytes(V4)) == EXPECT_V4
    assert _seg(108, _bsd_family(24, ">") + bytes(V6)) == EXPECT_V6
    assert _seg(0, _bsd_family(7, "<") + bytes(V4)) is None  # not an IP family


def test_ipv4_options():
    pkt = _eth() / IP(src="192.0.2.1", dst="198.51.100.7",
                       options=[IPOption_RR(routers=["1.2.3.4", "5.6.7.8"]), IPOption_Timestamp()]) \
        / V4[TCP]
    assert IP(bytes(pkt)[14:]).ihl > 5
    assert _seg(1, pkt) == EXPECT_V4


def test_tcp_options_and_flags():
    tcp = TCP(sport=1, dport=2, seq=3, ack=4, flags="FSRPAU",
              options=[("MSS", 1448), ("SAckOK", b""), ("Timestamp", (1, 2)), ("WScale", 7)])
    got = _seg(101, IP(src="1.1.1.1", dst="2.2.2.2") / tcp / Raw(b"xyz"))
    assert got[2:] == (1, 2, 3, 4, FIN | SYN | RST | PSH | ACK | URG, b"xyz")


def test_flag_constants_match_scapy():
    flags = TCP(flags="FSRPAU").flags
    assert int(flags) == FIN | SYN | RST | PSH | ACK | URG
    assert [FIN, SYN, RST, PSH, ACK, URG] == [int(TCP(flags=f).flags) for f in "FSRPAU"]


@pytest.mark.parametrize("ext", [
    IPv6ExtHdrHopByHop(),
    IPv6ExtHdrRouting(addresses=["2001:db8::9", "2001:db8::a"]),
    IPv6ExtHdrDestOpt(),
    IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting() / IPv6ExtHdrDestOpt(),
    # scapy leaves AH's next header and length to the caller: 24 bytes = (4 + 2) * 4.
    AH(nh=6, payloadlen=4, spi=1, seq=2, icv=b"\0" * 12),
    IPv6ExtHdrHopByHop() / AH(nh=60, payloadlen=4, spi=1, seq=2, icv=b"\0" * 12) / IPv6ExtHdrDestOpt(),
], ids=["hbh", "routing", "dstopt", "chain", "ah", "hbh_ah_dst"])
def test_ipv6_extension_headers(ext):
    pkt = IPv6(src="2001:db8::1", dst="2001:db8:0:1::2") / ext / V6[TCP]
    assert _seg(101, pkt) == EXPECT_V6


def test_ipv6_fragment():
    pkt = IPv6(src="2001:db8::1", dst="2001:db8:0:1::2") / IPv6ExtHdrFragment(m=1) / V6[TCP]
    assert _seg(101, pkt) == "ip.fragment"
    first = IPv6(src="2001:db8::1", dst="2001:db8:0:1::2") / IPv6ExtHdrHopByHop() / IPv6ExtHdrFragment() / V6[TCP]
    assert _seg(101, first) == "ip.fragment"


@pytest.mark.parametrize("flags,frag", [("MF", 0), (0, 100), ("MF", 5)])
def test_ipv4_fragment(flags, frag):
    pkt = IP(src="192.0.2.1", dst="198.51.100.7", flags=flags, frag=frag) / V4[TCP]
    assert _seg(101, pkt) == "ip.fragment"


def test_ipv4_dont_fragment_is_fine():
    pkt = IP(src="192.0.2.1", dst="198.51.100.7", flags="DF") / V4[TCP]
    assert _seg(101, pkt) == EXPECT_V4


@pytest.mark.parametrize("ip", [V4, V6], ids=["v4", "v6"])
def test_trailing_padding_is_not_payload(ip):
    frame = bytes(_eth() / ip) + b"\xaa" * 18  # padding / FCS after the IP packet
    assert _seg(1, frame)[7] == PAYLOAD


def test_short_segment_padded_to_ethernet_minimum():
    pkt = _eth() / IP(src="1.1.1.1", dst="2.2.2.2") / TCP(flags="A")
    raw = bytes(pkt) + b"\0" * 6  # a 54-byte frame padded to the 60-byte minimum
    assert len(raw) == 60
    assert tcp_segment(1, raw)[7] == b""


@pytest.mark.parametrize("ip", [V4, V6], ids=["v4", "v6"])
def test_snaplen_cut_payload_bounded_by_captured_bytes(ip):
    frame = bytes(_eth() / ip)
    cut = frame[:len(frame) - 100]
    assert bytes(tcp_segment(1, cut)[7]) == PAYLOAD[:-100]


def test_tso_zero_total_length_uses_captured_bytes():
    """Linux captures of offloaded sends show IPv4 total length 0: the captured bytes are the packet."""
    raw = bytearray(bytes(V4))
    raw[2:4] = b"\0\0"
    assert _seg(101, bytes(raw)) == EXPECT_V4


def test_memoryview_input():
    got = tcp_segment(1, memoryview(bytes(_eth() / V4)))
    assert got[:7] == EXPECT_V4[:7] and bytes(got[7]) == PAYLOAD
    assert isinstance(got[0], bytes) and isinstance(got[1], bytes)


@pytest.mark.parametrize("linktype,frame", [
    (1, _eth() / ARP()),
    (1, _eth() / IP() / UDP(dport=9092) / Raw(b"x")),
    (1, _eth() / IPv6() / UDP() / Raw(b"x")),
    (1, _eth(type=0x88CC) / Raw(b"lldp" * 10)),
    (1, _eth() / Dot1Q(type=0x0806) / ARP()),
    (147, _eth() / V4),  # an unknown link type (USER0)
    (101, Raw(b"\x20" + b"\0" * 39)),  # raw: neither IPv4 nor IPv6
    (113, CookedLinux(proto=0x0806) / ARP()),
    (101, IPv6(nh=59)),  # no next header
    (101, IPv6() / IPv6ExtHdrHopByHop() / UDP()),
], ids=["arp", "udp4", "udp6", "lldp", "vlan_arp", "unknown_lt", "raw_bad_version", "sll_arp",
        "no_next", "hbh_udp"])
def test_not_tcp_is_none(linktype, frame):
    assert tcp_segment(linktype, bytes(frame)) is None


def test_unusable_ip_and_tcp():
    v4, v6 = bytes(V4), bytes(V6)
    assert tcp_segment(101, v4[:19]) == "ip.truncated"
    assert tcp_segment(229, v6[:39]) == "ip.truncated"
    assert tcp_segment(228, b"\x65" + v4[1:]) == "ip.bad_header"  # version 6 in an IPv4 link type
    assert tcp_segment(101, b"\x44" + v4[1:]) == "ip.bad_header"  # IHL 4 words < 5
    assert tcp_segment(101, v4[:2] + b"\x00\x10" + v4[4:]) == "ip.bad_header"  # total < header
    assert tcp_segment(101, b"\x4f" + v4[1:40]) == "ip.truncated"  # 60 bytes of options cut
    assert tcp_segment(101, v4[:30]) == "tcp.truncated"
    assert tcp_segment(101, v6[:50]) == "tcp.truncated"
    hbh = bytes(IPv6() / IPv6ExtHdrHopByHop() / TCP())
    assert tcp_segment(101, hbh[:44]) == "ip.truncated"  # extension header cut
    bad_doff = bytearray(v4)
    bad_doff[32] = 0x40  # TCP data offset 4 words < 5
    assert tcp_segment(101, bytes(bad_doff)) == "tcp.bad_header"
    big_doff = bytearray(bytes(IP() / TCP()))
    big_doff[32] = 0xF0  # 60-byte TCP header in a 40-byte IP packet
    assert tcp_segment(101, bytes(big_doff)) == "tcp.bad_header"
    assert tcp_segment(101, bytes(big_doff) + b"\0" * 20) == "tcp.bad_header"  # even with padding after
    short_ip = bytearray(v4)
    short_ip[2:4] = (30).to_bytes(2, "big")  # IP length 30 leaves 10 bytes for TCP's 20
    assert tcp_segment(101, bytes(short_ip)) == "tcp.bad_header"
    v6_short = bytearray(v6)
    v6_short[4:6] = (10).to_bytes(2, "big")
    assert tcp_segment(101, bytes(v6_short)) == "tcp.bad_header"
    big_doff[2:4] = b"\0\0"  # offload (length 0): the capture, not the header, is short
    assert tcp_segment(101, bytes(big_doff)) == "tcp.truncated"


def test_empty_and_tiny_inputs():
    for lt in (0, 1, 12, 14, 101, 108, 113, 228, 229, 276):
        for n in range(0, 24):
            assert tcp_segment(lt, b"\0" * n) in (None, "ip.truncated", "ip.bad_header", "tcp.truncated",
                                                   "tcp.bad_header")


def test_format_addr():
    assert format_addr(V4_ADDRS[0]) == "192.0.2.1"
    assert format_addr(V6_ADDRS[1]) == "2001:db8:0:1::2"
    assert format_addr(bytes(15) + b"\1") == "::1"


def test_format_addr_remembers_a_bounded_number_of_addresses(monkeypatch):
    from dissector.capture import layers
    monkeypatch.setattr(layers, "MAX_TEXTS", 8)
    monkeypatch.setattr(layers, "_TEXTS", {})
    for i in range(20):
        assert format_addr(bytes((10, 0, 0, i))) == f"10.0.0.{i}"
        assert 1 <= len(layers._TEXTS) <= 8
    assert format_addr(bytes((10, 0, 0, 19))) == "10.0.0.19"


@given(st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16))
def test_format_addr_is_inet_ntop(addr):
    import socket
    assert format_addr(addr) == socket.inet_ntop(
        socket.AF_INET if len(addr) == 4 else socket.AF_INET6, addr)


LINKTYPES = [0, 1, 12, 14, 101, 108, 113, 228, 229, 276]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(LINKTYPES), st.binary(max_size=120))
def test_random_bytes_never_raise(linktype, data):
    got = tcp_segment(linktype, data)
    assert got is None or isinstance(got, (str, tuple))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LINKTYPES), st.integers(0, 200))
def test_every_truncation_of_a_valid_packet_is_safe(linktype, cut):
    link = {0: _bsd_family(2, "<"), 1: bytes(_eth())[:12] + b"\x08\x00", 12: b"", 14: b"", 101: b"",
            108: _bsd_family(2, ">"), 113: bytes(CookedLinux(proto=0x0800)), 228: b"",
            229: b"", 276: bytes(CookedLinuxV2(proto=0x0800))}[linktype]
    ip = V6 if linktype == 229 else V4
    frame = link + bytes(ip)
    got = tcp_segment(linktype, frame[:cut])
    assert got is None or isinstance(got, str) or bytes(got[7]) == PAYLOAD[:max(0, cut - len(frame) + len(PAYLOAD))]


@settings(max_examples=150, deadline=None)
@given(v6=st.booleans(), vlans=st.integers(0, 3), nopts=st.integers(0, 4), payload=st.binary(max_size=300),
       pad=st.integers(0, 30), sport=st.integers(0, 65535), seq=st.integers(0, 2**32 - 1),
       flags=st.integers(0, 255))
def test_against_scapy_and_dpkt_dissection(v6, vlans, nopts, payload, pad, sport, seq, flags):
    """Random Ethernet frames: our fields equal what scapy and dpkt dissect from the same bytes."""
    dpkt = pytest.importorskip("dpkt")
    tcp = TCP(sport=sport, dport=9092, seq=seq, flags=flags, options=[("NOP", None)] * nopts)
    ip = (IPv6(src="2001:db8::5", dst="2001:db8::6") if v6 else IP(src="10.1.2.3", dst="10.3.2.1")) / tcp
    frame = _eth()
    for i in range(vlans):
        frame = frame / Dot1Q(vlan=i + 1)
    raw = bytes(frame / ip / Raw(payload)) + b"\x55" * pad
    src, dst, sp, dp, sq, ak, fl, pl = tcp_segment(1, raw)
    # scapy: dissect the bytes; padding after the IP length is a separate Padding layer.
    s = Ether(raw)
    st_tcp = s[TCP]
    assert (sp, dp, sq, ak, fl) == (st_tcp.sport, st_tcp.dport, st_tcp.seq, st_tcp.ack, int(st_tcp.flags))
    assert bytes(pl) == (bytes(st_tcp.payload.load) if st_tcp.payload and Raw in st_tcp else b"") == payload
    assert format_addr(src) == (s[IPv6].src if v6 else s[IP].src)
    # dpkt: its TCP data is bounded by the IP length too.
    d = dpkt.ethernet.Ethernet(raw)
    d_ip = d.data
    assert (src, dst) == (d_ip.src, d_ip.dst)
    assert bytes(pl) == bytes(d_ip.data.data)

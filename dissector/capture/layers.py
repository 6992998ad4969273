"""Link layer -> IPv4/IPv6 -> TCP, unpacked at offsets in one captured packet.

`tcp_segment(linktype, data)` returns
    (src_addr, dst_addr, sport, dport, seq, ack, flags, payload)
for a TCP segment (flags with ZERO_WINDOW added when its window is 0), a short issue code (str)
for an IP/TCP packet that cannot be used, or None for anything else. The payload is bounded by
the IP length (real captures carry Ethernet padding after it) and by the captured bytes
(snaplen). Issue codes: "ip.fragment" (reassembly of IP fragments is not done: Kafka's TCP
traffic does not fragment in practice), "ip.truncated" / "tcp.truncated" (headers cut by the
snapshot length), "ip.bad_header" / "tcp.bad_header" (impossible lengths). `cut_short(linktype,
data)` says whether the snapshot length cut a packet (dissector.capture_survey counts them).
"""
from __future__ import annotations

import struct

from ..tcp.reassembly import ZERO_WINDOW

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80

# pcap LINKTYPE_* numbers
LT_NULL, LT_ETHERNET, LT_RAW, LT_LOOP, LT_SLL, LT_SLL2 = 0, 1, 101, 108, 113, 276
LT_RAW_ALIASES = (12, 14)  # DLT_RAW on some BSDs, written as-is by old libpcaps
LT_IPV4, LT_IPV6 = 228, 229

ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
VLAN_TAGS = frozenset((0x8100, 0x88A8, 0x9100))
BSD_AF_INET = 2
BSD_AF_INET6 = frozenset((24, 28, 30))  # NetBSD/OpenBSD, FreeBSD/DragonFly, macOS

PROTO_TCP = 6
IPV6_EXT = frozenset((0, 43, 60))  # hop-by-hop, routing, destination options: (len + 1) * 8
IPV6_FRAGMENT, IPV6_AH = 44, 51

_u16 = struct.Struct("!H").unpack_from
_u32 = struct.Struct("!I").unpack_from
_u32le = struct.Struct("<I").unpack_from
# version/ihl, tos, total length, id, flags/fragment offset, ttl, protocol, checksum, src, dst
_ipv4 = struct.Struct("!BxHxxHxB2x4s4s").unpack_from
# payload length, next header, hop limit, src, dst (after the 4-byte version/class/flow word)
_ipv6 = struct.Struct("!4xHBx16s16s").unpack_from
# sport, dport, seq, ack, data offset, flags, window
_tcp = struct.Struct("!HHIIBBH").unpack_from
# an option-less IPv4 header and the TCP header after it, in one call (the common case)
_ipv4_tcp = struct.Struct("!BxHxxHxB2x4s4sHHIIBBH").unpack_from


def _link(linktype, data):
    """(offset of the IP header, IP version 4/6) or None if the packet is not IP."""
    if linktype == LT_ETHERNET:
        off, etype = 14, _u16(data, 12)[0] if len(data) >= 14 else 0
    elif linktype == LT_SLL:
        off, etype = 16, _u16(data, 14)[0] if len(data) >= 16 else 0
    elif linktype == LT_SLL2:
        off, etype = 20, _u16(data, 0)[0] if len(data) >= 20 else 0
    elif linktype == LT_NULL or linktype == LT_LOOP:
        if len(data) < 4:
            return None
        # NULL is in the capturing host's byte order; the family is small, so try both.
        family = _u32(data, 0)[0]
        if family > 0xFFFF:
            family = _u32le(data, 0)[0]
        if family == BSD_AF_INET:
            return 4, 4
        if family in BSD_AF_INET6:
            return 4, 6
        return None
    elif linktype == LT_RAW or linktype in LT_RAW_ALIASES:
        if not data:
            return None
        v = data[0] >> 4
        return (0, v) if v == 4 or v == 6 else None
    elif linktype == LT_IPV4:
        return 0, 4
    elif linktype == LT_IPV6:
        return 0, 6
    else:
        return None
    while etype in VLAN_TAGS:  # 802.1Q / 802.1ad tags, stacked to any depth
        if len(data) < off + 4:
            return None
        etype = _u16(data, off + 2)[0]
        off += 4
    if etype == ETH_IPV4:
        return off, 4
    if etype == ETH_IPV6:
        return off, 6
    return None


def cut_short(linktype, data) -> bool:
    """Whether the snapshot length cut this IP packet: its IP header says more bytes than
    were captured (a length of 0, what segmentation offload leaves, says nothing)."""
    link = _link(linktype, data)
    if link is None:
        return False
    off, version = link
    # IPv4's total length counts its header; IPv6's payload length does not count its 40 bytes
    at, fixed = (off + 2, 0) if version == 4 else (off + 4, 40)
    if len(data) < at + 2:
        return False
    claimed = _u16(data, at)[0]
    return claimed > 0 and off + fixed + claimed > len(data)


def tcp_segment(linktype, data):
    """The TCP segment in one captured packet, an issue code, or None (see the module doc)."""
    if linktype == LT_ETHERNET and data[12:14] == b"\x08\x00":  # untagged IPv4: skip _link
        off, version = 14, 4
    else:
        link = _link(linktype, data)
        if link is None:
            return None
        off, version = link
    caplen = len(data)
    if version == 4:
        if caplen < off + 20:
            return "ip.truncated"
        if caplen >= off + 40:
            vihl, total, frag, proto, src, dst, sport, dport, seq, ack, doff, flags, win = \
                _ipv4_tcp(data, off)
        else:
            vihl, total, frag, proto, src, dst = _ipv4(data, off)
            doff = None
        if vihl >> 4 != 4:
            return "ip.bad_header"
        if proto != PROTO_TCP:
            return None
        ihl = (vihl & 0x0F) * 4
        if ihl < 20 or (total and total < ihl):
            return "ip.bad_header"
        if frag & 0x3FFF:  # MF flag or a fragment offset
            return "ip.fragment"
        t = off + ihl
        if t > caplen:
            return "ip.truncated"
        # Total length 0 is what TCP segmentation offload leaves: the captured bytes are the packet.
        end = off + total if total else caplen
        cut = not total or end > caplen
        if ihl != 20:
            doff = None
    else:
        if caplen < off + 40:
            return "ip.truncated"
        if data[off] >> 4 != 6:
            return "ip.bad_header"
        plen, nxt, src, dst = _ipv6(data, off)
        t = off + 40
        end = t + plen if plen else caplen  # 0: jumbogram or offload
        cut = not plen or end > caplen
        while nxt != PROTO_TCP:
            if nxt in IPV6_EXT or nxt == IPV6_AH:
                if caplen < t + 8:
                    return "ip.truncated"
                hlen = (data[t + 1] + 2) * 4 if nxt == IPV6_AH else (data[t + 1] + 1) * 8
                nxt = data[t]
                t += hlen
            elif nxt == IPV6_FRAGMENT:
                return "ip.fragment"
            else:
                return None
        if t > end:
            return "ip.bad_header"
        doff = None
    if end > caplen:
        end = caplen  # cut by the snapshot length
    # A TCP header past the IP length is a bad header; past the captured bytes, a short capture.
    if t + 20 > end:
        return "tcp.truncated" if cut else "tcp.bad_header"
    if doff is None:
        sport, dport, seq, ack, doff, flags, win = _tcp(data, t)
    doff = (doff >> 4) * 4
    if doff < 20:
        return "tcp.bad_header"
    if t + doff > end:
        return "tcp.truncated" if cut else "tcp.bad_header"
    if not win:
        flags |= ZERO_WINDOW
    return src, dst, sport, dport, seq, ack, flags, data[t + doff:end]


_TEXTS = {}          # raw address -> format_addr's text: a capture has few hosts, many connections
MAX_TEXTS = 1 << 16


def format_addr(addr):
    """Dotted IPv4 or compressed IPv6 text of a raw 4- or 16-byte address."""
    text = _TEXTS.get(addr)
    if text is None:
        if len(_TEXTS) >= MAX_TEXTS:
            _TEXTS.clear()
        text = _TEXTS[addr] = _text(addr)
    return text


def _text(addr):
    if len(addr) == 4:
        return "%d.%d.%d.%d" % tuple(addr)
    import socket   # only for IPv6: socket costs 2 ms at every start
    return socket.inet_ntop(socket.AF_INET6, addr)

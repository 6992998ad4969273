"""Damage one connection of a real capture: rewrite the TCP payload of some of its packets (with
garbage of the same length, or other bytes; or cut its front, as a capture that starts inside the
segment), keeping every IP and TCP header valid (checksums recomputed by the RFC 1071 / RFC 793
rules), and write the capture back with dissector.capture.writer."""
from __future__ import annotations

import io
import random
import struct

from dissector.capture.writer import PcapWriter


def _checksum(data: bytes) -> int:
    if len(data) & 1:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def tcp_layout(data):
    """(src, dst, sport, dport, payload start, payload end) of an Ethernet/IPv4/TCP packet."""
    assert data[12:14] == b"\x08\x00"
    ip = 14
    ihl = (data[ip] & 0x0F) * 4
    total = struct.unpack_from("!H", data, ip + 2)[0]
    t = ip + ihl
    doff = (data[t + 12] >> 4) * 4
    sport, dport = struct.unpack_from("!HH", data, t)
    return data[ip + 12:ip + 16], data[ip + 16:ip + 20], sport, dport, t + doff, ip + total


def with_payload(data, payload):
    """The packet with its TCP payload replaced (the IPv4 total length follows its length) and
    both checksums recomputed."""
    return _rewritten(data, payload, 0)


def trim_front(data, n):
    """The packet without the first n bytes of its TCP payload (its sequence number advanced):
    as a capture that starts n bytes into the segment sees it."""
    _, _, _, _, start, end = tcp_layout(data)
    return _rewritten(data, data[start + n:end], n)


def _rewritten(data, payload, advance):
    """The packet carrying `payload`, its sequence number advanced by `advance`, checksums and
    IPv4 total length recomputed."""
    start = tcp_layout(data)[4]
    b = bytearray(data[:start]) + payload
    ip = 14
    ihl = (b[ip] & 0x0F) * 4
    end = len(b)
    struct.pack_into("!H", b, ip + 2, end - ip)
    struct.pack_into("!H", b, ip + 10, 0)
    struct.pack_into("!H", b, ip + 10, _checksum(bytes(b[ip:ip + ihl])))
    t = ip + ihl
    seq = struct.unpack_from("!I", b, t + 4)[0]
    struct.pack_into("!I", b, t + 4, (seq + advance) & 0xFFFFFFFF)
    struct.pack_into("!H", b, t + 16, 0)
    pseudo = bytes(b[ip + 12:ip + 20]) + struct.pack("!BBH", 0, 6, end - t)
    struct.pack_into("!H", b, t + 16, _checksum(pseudo + bytes(b[t:end])))
    return bytes(b)


def splice_garbage(pkts, flow, indexes, seed=0):
    """pkts: (ts, linktype, data); flow: (src, dst, sport, dport) of the damaged direction;
    indexes: which of that direction's payload-carrying packets to damage. Returns the capture
    bytes and the packet numbers (1-based) that were rewritten."""
    rnd = random.Random(seed)
    out = io.BytesIO()
    w = PcapWriter(out, pkts[0][1])
    seen = 0
    damaged = []
    for no, (ts, _, data) in enumerate(pkts, 1):
        src, dst, sport, dport, start, end = tcp_layout(data)
        if (src, dst, sport, dport) == flow and end > start:
            if seen in indexes:
                data = with_payload(data, bytes(rnd.getrandbits(8) for _ in range(end - start)))
                damaged.append(no)
            seen += 1
        w.write(ts, data)
    return out.getvalue(), damaged

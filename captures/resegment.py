"""Re-segment a capture's TCP payload to a real network's MSS, on an Ethernet link.

Loopback captures carry TCP segments of up to 64 KiB with unfinished checksums; a real network
carries at most one MSS per segment (1448 bytes with TCP timestamps on a 1500-byte MTU). This
rewrites every TCP packet into MSS-sized segments:

- sequence numbers advance through the original payload, acknowledgement numbers are kept (the
  byte stream is unchanged, so they stay correct); FIN and PSH ride on the last piece only;
- each packet gets an Ethernet header (locally administered MACs derived from the IP addresses),
  its original IP and TCP headers (options included) with new lengths, IPv4 ids and VALID IPv4 and
  TCP checksums; the MSS option of a SYN is lowered to match;
- all pieces of one original packet keep its timestamp, so request/response timings are unchanged.

Streaming (one packet in memory at a time) and fast: headers are packed with struct, checksums
use the identity "ones'-complement sum of 16-bit words == value mod 0xFFFF".
Non-TCP packets are dropped; the counts say how many.

    python captures/resegment.py IN.pcap OUT.pcap [--mss 1448]

From Python: `resegment_file(src, dst, mss=1448)`, or `resegment(packets, mss)` over
(ts_ns, linktype, data) tuples yielding (ts_ns, ethernet_frame) for other writers (benchmarks use
`remap` to give replicated connections new addresses and ports).
"""
from __future__ import annotations

import argparse
import struct
import sys

MSS = 1448
LT_NULL, LT_ETHERNET, LT_RAW, LT_LOOP, LT_SLL, LT_SLL2 = 0, 1, 101, 108, 113, 276
ETH_IPV4, ETH_IPV6 = 0x0800, 0x86DD
FIN, SYN, PSH = 0x01, 0x02, 0x08
SNAPLEN = 262144

_u16 = struct.Struct("!H")
_u32 = struct.Struct("!I")
_eth = struct.Struct("!6s6sH")
_pcap_hdr = struct.Struct("IHHiIII")    # native order: readers detect it from the magic
_pcap_rec = struct.Struct("IIII")
_PCAP_US, _PCAP_NS = 0xA1B2C3D4, 0xA1B23C4D


class Counts:
    """What happened to the input: packets read, TCP packets, packets written, packets dropped."""
    __slots__ = ("read", "tcp", "written", "dropped", "split")

    def __init__(self):
        self.read = self.tcp = self.written = self.dropped = self.split = 0

    def __repr__(self):
        return (f"read {self.read} packets, {self.tcp} TCP, split {self.split}, "
                f"wrote {self.written}, dropped {self.dropped} (not TCP/IP or cut short)")


# -- reading ----------------------------------------------------------------------------------


def read_pcap(path):
    """(ts_ns, linktype, data) for each record of a classic pcap file (either byte order, micro- or
    nanosecond timestamps). Raises ValueError for anything else."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError(f"{path}: not a pcap file (too short)")
        for order in "<>":
            magic = struct.unpack(order + "I", head[:4])[0]
            if magic in (_PCAP_US, _PCAP_NS):
                break
        else:
            raise ValueError(f"{path}: not a classic pcap file (pcapng is not supported here)")
        scale = 1000 if magic == _PCAP_US else 1
        linktype = struct.unpack(order + "I", head[20:24])[0] & 0x0FFFFFFF
        rec = struct.Struct(order + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, caplen, _ = rec.unpack(h)
            data = f.read(caplen)
            if len(data) < caplen:
                return  # cut mid-record: stop at the last whole packet
            yield sec * 1_000_000_000 + frac * scale, linktype, data


def _ip_offset(linktype, data):
    """Offset of the IP header in a captured packet, or -1."""
    if linktype == LT_ETHERNET:
        off, etype = 14, _u16.unpack_from(data, 12)[0] if len(data) >= 14 else 0
        while etype in (0x8100, 0x88A8) and len(data) >= off + 4:  # VLAN tags
            etype = _u16.unpack_from(data, off + 2)[0]
            off += 4
        return off if etype in (ETH_IPV4, ETH_IPV6) else -1
    if linktype == LT_SLL:
        ok = len(data) >= 16 and _u16.unpack_from(data, 14)[0] in (ETH_IPV4, ETH_IPV6)
        return 16 if ok else -1
    if linktype == LT_SLL2:
        ok = len(data) >= 20 and _u16.unpack_from(data, 0)[0] in (ETH_IPV4, ETH_IPV6)
        return 20 if ok else -1
    if linktype in (LT_NULL, LT_LOOP):
        return 4
    if linktype == LT_RAW:
        return 0
    return -1


# -- checksums --------------------------------------------------------------------------------


def _fold(total):
    """Ones'-complement checksum from a sum of big-endian integers of even-length pieces.

    2**16 == 1 (mod 0xFFFF), so a big-endian integer is congruent to the sum of its 16-bit words.
    The data summed here is never all zero (IP version, TCP protocol number), so a multiple of
    0xFFFF is ones'-complement "negative zero", 0xFFFF, and the checksum is 0."""
    return ~(total % 0xFFFF or 0xFFFF) & 0xFFFF


def _be(b):
    """Big-endian value of a piece, padded to an even length (a trailing zero byte), reduced
    mod 0xFFFF (this keeps the sums small: one bignum division per piece, no bignum additions)."""
    v = int.from_bytes(b, "big")
    return (v << 8 if len(b) & 1 else v) % 0xFFFF


# -- rewriting --------------------------------------------------------------------------------


def _mac(addr):
    """A locally administered unicast MAC derived from an IP address."""
    return b"\x02\x00" + bytes(addr[-4:])


def _lower_mss_option(tcp_hdr, mss):
    """Rewrite a SYN's MSS option so the peer's segments match ours (timestamps take 12 bytes)."""
    i, end = 20, len(tcp_hdr)
    has_ts = False
    mss_at = -1
    while i < end:
        kind = tcp_hdr[i]
        if kind == 0:
            break
        if kind == 1:
            i += 1
            continue
        if i + 1 >= end or tcp_hdr[i + 1] < 2:
            break
        if kind == 2 and tcp_hdr[i + 1] == 4 and i + 4 <= end:
            mss_at = i + 2
        elif kind == 8:
            has_ts = True
        i += tcp_hdr[i + 1]
    if mss_at >= 0:
        _u16.pack_into(tcp_hdr, mss_at, mss + 12 if has_ts else mss)


def resegment(packets, mss=MSS, counts=None, remap=None):
    """Yield (ts_ns, ethernet_frame) for each MSS-sized piece of each TCP packet.

    `packets`: (ts_ns, linktype, data). `remap(src, dst, sport, dport)` -> the same four, to move
    a flow to other addresses/ports (same address family and length).
    """
    if mss < 1 or mss > 65000:
        raise ValueError("mss must be between 1 and 65000")
    c = counts if counts is not None else Counts()
    ip_id = {}
    eth_pack = _eth.pack
    u16_into, u32_into = _u16.pack_into, _u32.pack_into
    for ts, linktype, data in packets:
        c.read += 1
        off = _ip_offset(linktype, data)
        if off < 0 or len(data) < off + 20:
            c.dropped += 1
            continue
        mv = memoryview(data)
        version = data[off] >> 4
        if version == 4:
            ihl = (data[off] & 0x0F) * 4
            total = _u16.unpack_from(data, off + 2)[0]
            proto = data[off + 9]
            frag = _u16.unpack_from(data, off + 6)[0] & 0x3FFF
            if proto != 6 or frag or ihl < 20 or total < ihl + 20 or len(data) < off + total:
                c.dropped += 1
                continue
            src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
            tcp_at = off + ihl
            end = off + total
            etype = ETH_IPV4
        elif version == 6:
            ihl = 40
            plen = _u16.unpack_from(data, off + 4)[0]
            if data[off + 6] != 6 or plen < 20 or len(data) < off + 40 + plen:
                c.dropped += 1  # extension headers are not expected on these captures
                continue
            src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
            tcp_at = off + 40
            end = tcp_at + plen
            etype = ETH_IPV6
        else:
            c.dropped += 1
            continue
        doff = (data[tcp_at + 12] >> 4) * 4
        if doff < 20 or tcp_at + doff > end:
            c.dropped += 1
            continue
        c.tcp += 1
        ip_hdr = bytearray(mv[off:off + ihl])
        tcp_hdr = bytearray(mv[tcp_at:tcp_at + doff])
        payload = mv[tcp_at + doff:end]
        sport, dport, seq = struct.unpack_from("!HHI", tcp_hdr, 0)
        if remap is not None:
            src, dst, sport, dport = remap(bytes(src), bytes(dst), sport, dport)
            u16_into(tcp_hdr, 0, sport)
            u16_into(tcp_hdr, 2, dport)
            if version == 4:
                ip_hdr[12:16], ip_hdr[16:20] = src, dst
            else:
                ip_hdr[8:24], ip_hdr[24:40] = src, dst
        flags = tcp_hdr[13]
        if flags & SYN:
            _lower_mss_option(tcp_hdr, mss)
        eth = eth_pack(_mac(dst), _mac(src), etype)
        pseudo_base = _be(src) + _be(dst) + 6
        n = len(payload)
        # a SYN carrying data (TCP Fast Open) is passed whole: its sequence space starts after it
        step = n if (flags & SYN or n <= mss) else mss
        pieces = max(1, -(-n // step)) if n else 1
        if pieces > 1:
            c.split += 1
        key = (bytes(src), bytes(dst))
        for k in range(pieces):
            piece = payload[k * step:(k + 1) * step] if pieces > 1 else payload
            last = k == pieces - 1
            tcp_hdr[13] = flags if last else flags & ~(FIN | PSH)
            u32_into(tcp_hdr, 4, (seq + k * step) & 0xFFFFFFFF)
            u16_into(tcp_hdr, 16, 0)
            seg_len = doff + len(piece)
            u16_into(tcp_hdr, 16, _fold(pseudo_base + seg_len + _be(tcp_hdr) + _be(piece)))
            if version == 4:
                ident = ip_id.get(key, 0)
                ip_id[key] = (ident + 1) & 0xFFFF
                u16_into(ip_hdr, 2, ihl + seg_len)
                u16_into(ip_hdr, 4, ident)
                u16_into(ip_hdr, 10, 0)
                u16_into(ip_hdr, 10, _fold(_be(ip_hdr)))
            else:
                u16_into(ip_hdr, 4, seg_len)
            c.written += 1
            yield ts, b"".join((eth, ip_hdr, tcp_hdr, piece))


# -- writing ----------------------------------------------------------------------------------


class PcapWriter:
    """Classic pcap, Ethernet link type, nanosecond or microsecond timestamps."""

    def __init__(self, f, nanos=False):
        self._f = f
        self._ns = nanos
        f.write(_pcap_hdr.pack(_PCAP_NS if nanos else _PCAP_US, 2, 4, 0, 0, SNAPLEN, LT_ETHERNET))

    def write(self, ts_ns, frame):
        sec, frac = divmod(ts_ns, 1_000_000_000)
        if not self._ns:
            frac //= 1000
        self._f.write(_pcap_rec.pack(sec, frac, len(frame), len(frame)))
        self._f.write(frame)


def _is_nanos(path):
    with open(path, "rb") as f:
        head = f.read(4)
    return len(head) == 4 and _PCAP_NS in struct.unpack("<I", head) + struct.unpack(">I", head)


def resegment_file(src, dst, mss=MSS):
    """Rewrite capture `src` into `dst` (classic pcap, Ethernet); returns Counts."""
    counts = Counts()
    nanos = _is_nanos(src)
    with open(dst, "wb") as out:
        w = PcapWriter(out, nanos=nanos)
        for ts, frame in resegment(read_pcap(src), mss, counts):
            w.write(ts, frame)
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="classic pcap file")
    ap.add_argument("output", help="pcap file to write (Ethernet link type)")
    ap.add_argument("--mss", type=int, default=MSS, help="largest TCP payload per segment (1448)")
    args = ap.parse_args(argv)
    try:
        counts = resegment_file(args.input, args.output, args.mss)
    except (OSError, ValueError) as exc:
        print(f"resegment: {exc}", file=sys.stderr)
        return 2
    print(f"{args.output}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

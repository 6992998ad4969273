"""Test-only capture builders: pcap and pcapng packed by hand with struct, in either byte order.

Independent of dissector.capture.writer (which only writes little-endian, nanosecond files), so
the readers can be checked against every variant the formats allow.
"""
import struct

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D


def tcp_packet(i=0, size=100):
    """An Ethernet/IPv4/TCP packet whose payload identifies it."""
    payload = (b"%06d" % i) * (size // 6 + 1)
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
                 / IP(src="10.0.0.1", dst="10.0.0.2")
                 / TCP(sport=40000 + i % 1000, dport=9092, seq=1000 + i, flags="PA")
                 / Raw(payload[:size]))


def pcap(records, order="<", nano=False, linktype=1, snaplen=262144):
    """records: (seconds, fraction, data[, orig_len]); fraction in us or ns per `nano`."""
    out = [struct.pack(order + "IHHiIII", PCAP_MAGIC_NS if nano else PCAP_MAGIC_US,
                       2, 4, 0, 0, snaplen, linktype)]
    for rec in records:
        sec, frac, data = rec[:3]
        orig = rec[3] if len(rec) > 3 else len(data)
        out.append(struct.pack(order + "IIII", sec, frac, len(data), orig) + data)
    return b"".join(out)


def _pad(b):
    return b + b"\0" * (-len(b) & 3)


def option(order, code, value):
    return struct.pack(order + "HH", code, len(value)) + _pad(value)


def options(order, *opts):
    """Encoded options followed by opt_endofopt (nothing at all when there are none)."""
    if not opts:
        return b""
    return b"".join(option(order, c, v) for c, v in opts) + struct.pack(order + "HH", 0, 0)


def block(order, btype, body):
    body = _pad(body)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def shb(order="<", opts=b""):
    return block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1) + opts)


def idb(order, linktype, snaplen=0, tsresol=None, tsoffset=None):
    opts = []
    if tsresol is not None:
        opts.append((9, bytes([tsresol])))
    if tsoffset is not None:
        opts.append((14, struct.pack(order + "q", tsoffset)))
    return block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + options(order, *opts))


def epb(order, iid, ticks, data, orig_len=None, opts=b""):
    return block(order, 6, struct.pack(order + "IIIII", iid, ticks >> 32, ticks & 0xFFFFFFFF, len(data),
                                       len(data) if orig_len is None else orig_len) + _pad(data) + opts)


def spb(order, data, orig_len=None):
    return block(order, 3, struct.pack(order + "I", len(data) if orig_len is None else orig_len) + data)


def pb(order, iid, ticks, data):
    """The obsolete Packet Block (type 2)."""
    return block(order, 2, struct.pack(order + "HHIIII", iid, 0, ticks >> 32, ticks & 0xFFFFFFFF,
                                       len(data), len(data)) + data)

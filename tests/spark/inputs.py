"""Inputs for the Spark tests: the project's real captures split into rotated files, and damaged
files of each kind."""
from __future__ import annotations

import struct
from pathlib import Path

from dissector.capture.files import read_packets
from dissector.capture.writer import PcapWriter

from .rotate import rotate

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
PORTS = (9092, 19093)   # aiokafka.pcap has its broker on 19093 (captures/README.md)


def first_ts(path):
    """Timestamp of a file's first packet, None when it has none or is not a capture."""
    try:
        for _no, ts, _lt, _data in read_packets(path):
            return ts
    except Exception:
        return None
    return None


def reading_order(paths):
    """The order the job documents: first packet's timestamp, then name; files without a
    packet last."""
    return sorted(paths, key=lambda p: (first_ts(p) is None, first_ts(p) or 0, str(p)))


def rotated_tree(root: Path):
    """Three captures split into rotated files in three folders (pcap and pcapng)."""
    return {
        "dir": rotate(CAPTURES / "librdkafka_produce_consume.mss1448.pcap", root / "a", 4),
        "glob": rotate(CAPTURES / "codecs.pcap", root / "b", 3, pcapng=True),
        "files": rotate(CAPTURES / "aiokafka.pcap", root / "c", 2),
    }


def damaged_files(root: Path):
    """A file that is not a capture, a capture cut in the middle of a record, and a capture of
    packets that are IP but not usable TCP (fragments, a cut TCP header)."""
    root.mkdir(parents=True, exist_ok=True)
    text = root / "notes.txt"
    text.write_text("not a capture\n")
    cut = root / "cut.pcap"
    data = (CAPTURES / "transactions.pcap").read_bytes()
    cut.write_bytes(data[:len(data) * 3 // 5])
    bad = root / "bad.pcap"
    with PcapWriter(bad, 1) as w:
        for i, (frag_flags, tcp_len) in enumerate([(0x2000, 20), (0x0010, 20), (0, 8)]):
            w.write(1_800_000_000_000_000_000 + i * 1000, _ipv4_tcp(frag_flags, tcp_len))
    return [text, cut, bad]


def _ipv4_tcp(frag: int, tcp_len: int) -> bytes:
    """Ethernet + IPv4 (given flags/fragment offset) + `tcp_len` bytes of a TCP header to 9092."""
    tcp = struct.pack("!HHIIBBHHH", 40000, 9092, 1, 0, 5 << 4, 0x18, 1024, 0, 0)[:tcp_len]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, frag, 64, 6, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + tcp


def mixed_shapes(capture, path: Path, pcapng=False) -> Path:
    """`capture` (Ethernet, IPv4) rewritten packet by packet into every shape the extract stage
    must read: plain, VLAN-tagged, IPv4 options, (one connection in three) IPv6, and (pcapng)
    the other link types, plus packets that are IP but not usable TCP between them."""
    from dissector.capture.layers import LT_ETHERNET, LT_NULL, LT_RAW, LT_SLL, LT_SLL2
    from dissector.capture.writer import PcapngWriter

    def vlan(eth):
        return eth[:12] + b"\x81\x00\x00\x05" + eth[12:]

    def options(eth):
        ip = eth[14:]
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack("!H", ip[2:4])[0] + 4
        ip = bytes([ip[0] + 1]) + ip[1:2] + struct.pack("!H", total) + ip[4:ihl] + \
            b"\x01\x01\x01\x00" + ip[ihl:]
        return eth[:14] + ip

    def ipv6(eth):
        ip = eth[14:]
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:total]
        v6 = struct.pack("!IHBB", 6 << 28, len(tcp), 6, 64) + b"\x20\x01\x0d\xb8" + \
            b"\0" * 8 + ip[12:16] + b"\x20\x01\x0d\xb8" + b"\0" * 8 + ip[16:20]
        return eth[:12] + b"\x86\xdd" + v6 + tcp

    links = [
        (LT_ETHERNET, lambda eth: eth),
        (LT_RAW, lambda eth: eth[14:]),
        (LT_SLL, lambda eth: b"\0\0\0\x01\0\x06" + eth[6:12] + b"\0\0" + eth[12:]),
        (LT_SLL2, lambda eth: eth[12:14] + b"\0\0\0\0\0\x02\0\x01\0\x06" + eth[6:12] + b"\0\0"
         + eth[14:]),
        (LT_NULL, lambda eth: b"\x02\0\0\0" + eth[14:]),
    ]
    shapes = [lambda eth: eth, vlan, options, lambda eth: eth]
    writer = PcapngWriter(path, LT_ETHERNET) if pcapng else PcapWriter(path, LT_ETHERNET)
    with writer:
        for i, (_no, ts, _lt, data) in enumerate(read_packets(capture)):
            eth = bytes(data)
            ports = struct.unpack_from("!HH", eth, 14 + (eth[14] & 0x0F) * 4)
            eth = ipv6(eth) if sum(ports) % 3 == 0 else shapes[i % len(shapes)](eth)
            if i % 97 == 50:   # not usable: a fragment
                writer.write(ts, _ipv4_tcp(0x2000, 20))
            if pcapng and eth[12:14] == b"\x08\x00":
                lt, make = links[i // 3 % len(links)]
                writer.write(ts, make(eth), linktype=lt)
            else:
                writer.write(ts, eth)
    return path

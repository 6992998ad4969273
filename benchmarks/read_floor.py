"""The floor of a pure-Python reader: the least work any of our levels must do per packet.

    python benchmarks/read_floor.py CAPTURE.pcap

Walks the classic pcap records (read in 4 MB chunks, as our reader does) and, for each packet,
unpacks the record header and the Ethernet/IPv4/TCP header fields a TCP reassembler needs (one
Struct each, as the file reader's hot loop does) and keeps a view of the payload: no
reassembly, framing, Kafka or output. Run
by vs_tshark.py beside tshark and our levels, it shows which ratios to tshark an interpreted
per-packet loop can reach at all on a corpus. Prints the packet count.
"""
import struct
import sys

CHUNK = 4 << 20


def walk(path):
    buf = bytearray(CHUNK)
    mv = memoryview(buf)
    with open(path, "rb") as f:
        f.readinto(mv[:24])
        order = "<" if buf[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        rec = struct.Struct(order + "III4x").unpack_from
        # Ethernet type, IPv4 version/length/total/fragment/protocol, addresses and ports,
        # seq, ack, data offset, flags
        hdr = struct.Struct("!12x2sBxHxxHxB2x12sIIBB").unpack_from
        n = left = 0
        while True:
            got = f.readinto(mv[left:])
            if not got:
                return n
            pos, end = 0, left + got
            kept = []   # a chunk's payloads, as a reader hands them on before the next refill
            keep = kept.append
            while pos + 16 <= end:
                sec, frac, incl = rec(buf, pos)
                p = pos + 16
                if p + incl > end:
                    break
                pos = p + incl
                n += 1
                if incl >= 54:
                    tag, vihl, total, frag, proto, key, seq, ack, doff, flags = hdr(buf, p)
                    a = p + 34 + (doff >> 2 & 0x3C)
                    keep(mv[a:p + 14 + total])
            kept.clear()
            left = end - pos
            buf[:left] = buf[pos:end]


if __name__ == "__main__":
    print(walk(sys.argv[1]))

"""Classic pcap (libpcap) files: microsecond and nanosecond magic, both byte orders.

The record loop unpacks each 16-byte record header at an offset in a large chunk and copies
the packet out: no per-packet objects beyond the yielded tuple and the data.
"""
from __future__ import annotations

import struct

from .errors import CaptureError

MAX_RECORD = 256 * 1024  # libpcap's and Wireshark's largest snapshot length

# magic as it appears in the file -> (byte order, ns per timestamp fraction unit)
PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}


def pcap_header(chunks):
    """Check the file header (in the first chunk): (byte order, ns per timestamp fraction unit,
    link type)."""
    buf = chunks.buf
    if chunks.end < 24:
        raise CaptureError(f"{chunks.name}: truncated pcap file header")
    order, scale = PCAP_MAGICS[bytes(buf[:4])]
    # The upper bits of the link type field carry FCS information, not the type.
    linktype = struct.unpack_from(order + "I", buf, 20)[0] & 0xFFFF
    return order, scale, linktype


def pcap_packets(chunks):
    """Check the file header (in the first chunk) and return the packet iterator."""
    order, scale, linktype = pcap_header(chunks)
    return _records(chunks, struct.Struct(order + "IIII").unpack_from, scale, linktype)


def _records(chunks, unpack, scale, linktype):
    name = chunks.name
    buf, mv, end = chunks.buf, chunks.mv, chunks.end
    pos = 24
    n = 0
    while True:
        while pos + 16 <= end:
            sec, frac, incl, _orig = unpack(buf, pos)
            if incl > MAX_RECORD:
                raise CaptureError(f"{name}: packet record length {incl} too large at byte {chunks.base + pos}")
            stop = pos + 16 + incl
            if stop > end:
                break
            n += 1
            yield n, sec * 1_000_000_000 + frac * scale, linktype, mv[pos + 16:stop].tobytes()
            pos = stop
        if not chunks.refill(pos):
            if pos < end:
                raise CaptureError(f"{name}: truncated packet record at byte {chunks.base}")
            return
        buf, mv, end = chunks.buf, chunks.mv, chunks.end
        pos = 0

"""The file path's hot loop: capture records -> a live flow's handler, chunk by chunk.

`scan(path, packet_no, flows, other, into)` reads a capture and hands each packet on through a
packet walker (capture.walk says what it does; capture/_walk.c is the same compiled, used when
built). A handler gets its payload as a memoryview of the reused chunk buffer, not a copy:
`flows.unpin()` is called before every refill to copy out what the streams keep of them (each
stream's last segment, for the retransmission check; frames are copied as they come).

The generator yields once per chunk of the file so that the caller can hand on what completed;
`into.packets` (the last packet number) and `into.bytes` (captured bytes added) are kept current
at each yield and when it stops, by an error or otherwise; `into.walker` is the walker, whose `n`
is the packet being handed on (dissector.parallel keys what happens by it).
"""
from __future__ import annotations

import struct

from .errors import CaptureError
from .files import open_capture
from .layers import LT_ETHERNET, LT_IPV4, LT_LOOP, LT_NULL, LT_RAW, LT_RAW_ALIASES, LT_SLL, LT_SLL2
from .pcap import MAX_RECORD, pcap_header
from .pcapng import pcapng_batches
from ..tcp import batch

try:
    from ._walk import Walker
    COMPILED = True
except ImportError:   # no compiler where it was installed: the same loop in Python
    from .walk import Walker
    COMPILED = False

_IPV4 = b"\x08\x00"
# link type -> (offset of IPv4, offset of the tag saying IPv4, the tags that do); the Spark
# extract (analysis.spark.tcp_headers) reads the same shapes
LINKS = {
    LT_ETHERNET: (14, 12, (_IPV4,)),
    LT_SLL: (16, 14, (_IPV4,)),
    LT_SLL2: (20, 0, (_IPV4,)),
    # NULL is in the capturing host's byte order (AF_INET is 2 everywhere); LOOP is read alike
    LT_NULL: (4, 0, (b"\x02\0\0\0", b"\0\0\0\x02")),
    LT_LOOP: (4, 0, (b"\x02\0\0\0", b"\0\0\0\x02")),
    LT_RAW: (0, 0, (b"",)),
    LT_IPV4: (0, 0, (b"",)),
}
for _alias in LT_RAW_ALIASES:
    LINKS[_alias] = LINKS[LT_RAW]


def scan(path, packet_no, flows, other, into):
    """Feed every packet of the capture at `path`, numbered on from packet_no (see the module doc)."""
    f, chunks, kind = open_capture(path)
    try:
        if kind == "pcap":
            yield from _pcap(chunks, packet_no, flows, other, into)
        else:
            yield from _pcapng(chunks, packet_no, flows, other, into)
    finally:
        f.close()


def _walker(flows, other):
    return Walker(flows, other, batch.settle, LINKS)


def _pcap(chunks, n, flows, other, into):
    order, scale, linktype = pcap_header(chunks)
    walker = into.walker = _walker(flows, other)
    walk = walker.pcap
    big = order == ">"
    rec = struct.Struct(order + "8xI").unpack_from  # captured length
    unpin = flows.unpin
    name = chunks.name
    buf, mv, end = chunks.buf, chunks.mv, chunks.end
    pos = 24
    # captured bytes are counted per chunk: the records between `first` and pos, less their
    # 16-byte headers (no per-packet sum)
    first, n_first = pos, n
    try:
        while True:
            pos = walk(buf, mv, pos, end, n, big, scale, linktype, MAX_RECORD)
            n = walker.n
            if pos + 16 <= end and (incl := rec(buf, pos)[0]) > MAX_RECORD:
                raise CaptureError(f"{name}: packet record length {incl} too large at byte "
                                   f"{chunks.base + pos}")
            unpin()
            into.packets = n
            into.bytes += pos - first - 16 * (n - n_first)
            first, n_first = pos, n
            yield
            if not chunks.refill(pos):
                if pos < end:
                    raise CaptureError(f"{name}: truncated packet record at byte {chunks.base}")
                return
            buf, mv, end = chunks.buf, chunks.mv, chunks.end
            pos = first = 0
    finally:   # the walker knows how far it got, an error inside it included
        n, pos = walker.n, walker.pos
        unpin()
        into.packets = n
        into.bytes += pos - first - 16 * (n - n_first)


def _pcapng(chunks, n, flows, other, into):
    """The same over pcapng's batches (several interfaces, any link types); the compiled walker
    reads the Enhanced Packet Blocks itself."""
    walker = into.walker = _walker(flows, other)
    walker.n = n
    unpin = flows.unpin
    epbs = None
    if walker.epbs is not None:
        def epbs(buf, mv, pos, end, big, interfaces):
            return walker.epbs(buf, mv, pos, end, walker.n, big, interfaces, MAX_RECORD)
    counted = 0     # walker.nbytes already in into.bytes
    try:
        for batch in pcapng_batches(chunks, epbs, getattr(into, "add_secrets", None)):
            walker.batch(chunks.buf, chunks.mv, batch, walker.n)
            unpin()
            into.packets = walker.n
            into.bytes += walker.nbytes - counted
            counted = walker.nbytes
            yield
    finally:
        unpin()
        into.packets = walker.n
        into.bytes += walker.nbytes - counted

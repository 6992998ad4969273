"""The file path's hot loop: capture records -> link/IPv4/TCP -> a live flow's handler, fused.

`scan(path, packet_no, flows, other, into)` reads a capture and hands each packet on with no
per-packet generator, tuple or layer call in between. For the dominant shape (a classic pcap
record or pcapng packet on an Ethernet, SLL, SLL2, NULL/LOOP or raw link, IPv4 without options
or fragmentation, complete TCP header, IP length within the captured bytes) one precompiled
Struct reads the link tag and the IPv4 and TCP headers at the record's offset, and the segment
goes to `flows.direct[key]` (the 12 bytes from the IP source address to the TCP destination
port) when that live flow has a handler and the
segment has no SYN, FIN or RST, else to `flows.add`; the packets that right after a handler
call continue its frame in progress are appended to that frame here, without their handler
calls (a run, see tcp.batch). Every other packet goes to
`other(packet_no, ts_ns, linktype, data)` (the general layer parser: VLAN tags, IPv6, IP options,
truncation, issues). Either way a segment reaches the flows exactly as `tcp_segment` and
`FlowTable.add` would have it. A handler gets its payload as a memoryview of the reused chunk
buffer, not a copy: `flows.unpin()` is called before every refill to copy out what the streams
keep of them (pieces of frames that span segments). Other paths get bytes.

The generator yields once per chunk of the file so that the caller can
hand on what completed; `into.packets` (the last packet number) and `into.bytes` (captured bytes
added) are kept current at each yield and when it stops, by an error or otherwise.
"""
from __future__ import annotations

import struct

from .errors import CaptureError
from .files import open_capture
from .layers import LT_ETHERNET, LT_IPV4, LT_LOOP, LT_NULL, LT_RAW, LT_RAW_ALIASES, LT_SLL, LT_SLL2
from .pcap import MAX_RECORD, pcap_header
from .pcapng import pcapng_batches
from ..tcp.batch import ACK, PLAIN, run_start, settle
from ..tcp.reassembly import MASK

# tag, version/ihl, total length, flags/fragment offset, protocol, addresses and ports (the
# flow's direct key), seq, ack, data offset, flags
_IPV4_TCP = "BxHxxHxB2x12sIIBB"
_split = struct.Struct("!4s4sHH").unpack
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
NEVER_FAST = 1 << 62   # the header length "needed" on links without a fused reader


def _fused(linktype):
    """(unpack_from over link + IPv4 + TCP headers, IPv4 offset, IPv4 tags, bytes needed)."""
    link = LINKS.get(linktype)
    if link is None:
        return None, 0, (), NEVER_FAST
    off, tag_at, tags = link
    size = len(tags[0])
    fmt = f"!{tag_at}x{size}s{off - tag_at - size}x" + _IPV4_TCP
    return struct.Struct(fmt).unpack_from, off, tags, off + 40


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


def _pcap(chunks, n, flows, other, into):
    order, scale, linktype = pcap_header(chunks)
    rec = struct.Struct(order + "III4x").unpack_from  # seconds, fraction, captured length
    hdr, off, tags, need = _fused(linktype)
    get = flows.direct.get
    add = flows.add
    tick = flows.tick
    unpin = flows.unpin
    deadline = flows.deadline
    # a run of packets continuing a frame (tcp.batch; the flows tell where one starts): its
    # key, next sequence number, ack number, bytes the frame lacked at its start and lacks now,
    # its pieces' append, the time of its last packet (the one before the current), the flow,
    # the stream
    run = False
    r_key = append = r_flow = r_stream = None
    expect = r_ack = r_room = room = r_ts = 0
    name = chunks.name
    limit = MAX_RECORD
    buf, mv, end = chunks.buf, chunks.mv, chunks.end
    pos = 24
    # captured bytes are counted per chunk: the records between `first` and pos, less their
    # 16-byte headers (no per-packet sum)
    first, n_first = pos, n
    try:
        while True:
            while pos + 16 <= end:
                sec, frac, incl = rec(buf, pos)
                if incl > limit:
                    raise CaptureError(f"{name}: packet record length {incl} too large at byte "
                                       f"{chunks.base + pos}")
                p = pos + 16
                stop = p + incl
                if stop > end:
                    break
                n += 1
                ts = sec * 1_000_000_000 + frac * scale
                pos = stop
                if incl >= need:
                    tag, vihl, total, frag, proto, key, seq, ack, doff, flags = hdr(buf, p)
                    # hl: TCP header length; the IP length within the captured bytes
                    if (vihl == 0x45 and proto == 6 and tag in tags and not frag & 0x3FFF
                            and 40 <= (hl := doff >> 2 & 0x3C) + 20 <= total <= incl - off):
                        p += off
                        a = p + 20 + hl
                        p += total
                        if run:
                            # ACK only (PLAIN == 0x17, ACK == 0x10)
                            if (seq == expect and ack == r_ack and flags & 0x17 == 0x10
                                    and key == r_key and 0 < (size := p - a) < room):
                                # the middle of the frame in progress (tcp.batch)
                                append(mv[a:p])
                                expect = (seq + size) & 0xFFFFFFFF
                                room -= size
                                r_ts = ts
                                if ts > deadline:
                                    settle(flows, r_flow, r_stream, r_room - room, n, ts)
                                    run = False
                                    deadline = tick(ts)
                                continue
                            if room != r_room:   # taken up to the previous packet
                                settle(flows, r_flow, r_stream, r_room - room, n - 1, r_ts)
                            run = False
                        payload = mv[a:p]
                        handle = get(key)
                        if handle is not None and not flags & 7:  # no FIN, SYN, RST
                            handle(n, ts, seq, ack, flags, payload)
                            if flags & PLAIN == ACK and p > a:
                                started = run_start(flows, key, seq, p - a)
                                if started is not None:
                                    r_room, append, r_flow, r_stream = started
                                    room = r_room
                                    run = True
                                    r_key, expect, r_ack = key, (seq + p - a) & MASK, ack
                            if ts > deadline:
                                deadline = tick(ts)
                        else:
                            add(n, ts, *_split(key), seq, ack, flags, payload.tobytes())
                            deadline = flows.deadline
                        continue
                if run:
                    if room != r_room:
                        settle(flows, r_flow, r_stream, r_room - room, n - 1, r_ts)
                    run = False
                other(n, ts, linktype, mv[p:stop].tobytes())
                deadline = flows.deadline
            if run:
                if room != r_room:   # the last packet was the run's
                    settle(flows, r_flow, r_stream, r_room - room, n, r_ts)
                run = False
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
    finally:
        if run and room != r_room:
            settle(flows, r_flow, r_stream, r_room - room, n, r_ts)
        unpin()
        into.packets = n
        into.bytes += pos - first - 16 * (n - n_first)


def _pcapng(chunks, n, flows, other, into):
    """The same over pcapng's batches (several interfaces, any link types)."""
    get = flows.direct.get
    add = flows.add
    tick = flows.tick
    unpin = flows.unpin
    deadline = flows.deadline
    # a run of packets continuing a frame (tcp.batch; the flows tell where one starts): its
    # key, next sequence number, ack number, bytes the frame lacked at its start and lacks now,
    # its pieces' append, the time of its last packet (the one before the current), the flow,
    # the stream
    run = False
    r_key = append = r_flow = r_stream = None
    expect = r_ack = r_room = room = r_ts = 0
    linktype = None
    nb = 0
    try:
        for batch in pcapng_batches(chunks):
            buf, mv = chunks.buf, chunks.mv
            for ts, lt, p, stop in batch:
                n += 1
                incl = stop - p
                nb += incl
                if lt != linktype:
                    linktype = lt
                    hdr, off, tags, need = _fused(lt)
                if incl >= need:
                    tag, vihl, total, frag, proto, key, seq, ack, doff, flags = hdr(buf, p)
                    # hl: TCP header length; the IP length within the captured bytes
                    if (vihl == 0x45 and proto == 6 and tag in tags and not frag & 0x3FFF
                            and 40 <= (hl := doff >> 2 & 0x3C) + 20 <= total <= incl - off):
                        p += off
                        a = p + 20 + hl
                        p += total
                        if run:
                            # ACK only (PLAIN == 0x17, ACK == 0x10)
                            if (seq == expect and ack == r_ack and flags & 0x17 == 0x10
                                    and key == r_key and 0 < (size := p - a) < room):
                                # the middle of the frame in progress (tcp.batch)
                                append(mv[a:p])
                                expect = (seq + size) & 0xFFFFFFFF
                                room -= size
                                r_ts = ts
                                if ts > deadline:
                                    settle(flows, r_flow, r_stream, r_room - room, n, ts)
                                    run = False
                                    deadline = tick(ts)
                                continue
                            if room != r_room:   # taken up to the previous packet
                                settle(flows, r_flow, r_stream, r_room - room, n - 1, r_ts)
                            run = False
                        payload = mv[a:p]
                        handle = get(key)
                        if handle is not None and not flags & 7:  # no FIN, SYN, RST
                            handle(n, ts, seq, ack, flags, payload)
                            if flags & PLAIN == ACK and p > a:
                                started = run_start(flows, key, seq, p - a)
                                if started is not None:
                                    r_room, append, r_flow, r_stream = started
                                    room = r_room
                                    run = True
                                    r_key, expect, r_ack = key, (seq + p - a) & MASK, ack
                            if ts > deadline:
                                deadline = tick(ts)
                        else:
                            add(n, ts, *_split(key), seq, ack, flags, payload.tobytes())
                            deadline = flows.deadline
                        continue
                if run:
                    if room != r_room:
                        settle(flows, r_flow, r_stream, r_room - room, n - 1, r_ts)
                    run = False
                other(n, ts, lt, mv[p:stop].tobytes())
                deadline = flows.deadline
            if run:
                if room != r_room:   # the last packet was the run's
                    settle(flows, r_flow, r_stream, r_room - room, n, r_ts)
                run = False
            unpin()
            into.packets = n
            into.bytes += nb
            nb = 0
            yield
    finally:
        if run and room != r_room:
            settle(flows, r_flow, r_stream, r_room - room, n, r_ts)
        unpin()
        into.packets = n
        into.bytes += nb

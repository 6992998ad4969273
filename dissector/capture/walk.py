"""The file reader's packet loop: packets of a chunk -> link/IPv4/TCP -> a live flow's handler.

`Walker(flows, other, settle, links)` hands each packet on with no per-packet
generator, tuple or layer call in between. For the dominant shape (an Ethernet, SLL, SLL2,
NULL/LOOP or raw link, IPv4 without options or fragmentation, complete TCP header, IP length
within the captured bytes; `links` maps a link type to (IPv4 offset, tag offset, tags)) the link
tag and the IPv4 and TCP headers are read at the packet's offset, and the segment goes to
`flows.direct[key]` (the 12 bytes from the IP source address to the TCP destination port) when
that live flow has a handler and the segment has no SYN, FIN or RST and a window that is not
zero, else to `flows.add` (a
flow whose entry is False is one another process dissects, dissector.parallel: its segments are
skipped, the time kept; an entry False stays False for the rest of the capture, so the compiled
walker remembers those keys instead of looking each packet's up); the
packets that right after a handler call continue its frame in progress are written into that
frame's buffer here (or only counted, when the framer keeps just a message's first bytes),
without their handler calls (a run, see tcp.batch: the handler returns its start, `settle`
counts it); so is an ACK alone that acknowledges nothing past the data seen (tcp.batch's
`ack_alone`). Every other packet goes to `other(packet_no, ts_ns, linktype, data)` (the
general layer parser: VLAN tags, IPv6, IP options, truncation, issues). Either way a segment
reaches the flows exactly as `tcp_segment` and `FlowTable.add` would have it. A handler gets a
payload over SMALL_PAYLOAD bytes as a memoryview of the chunk buffer, not a copy (the caller
unpins before a refill), a smaller one as bytes; other paths get bytes.

Two walks, each over one chunk: `pcap(buf, mv, pos, end, n, big_endian, scale, linktype,
limit)` takes the complete pcap records from buf[pos:end] (stopping at an incomplete one or one
longer than `limit`) and returns where it stopped; `batch(buf, mv, batch, n)` takes pcapng's
packets ((ts_ns, linktype, start, stop) each; `nbytes` counts their captured bytes, all calls).
Packets are numbered from n + 1; `n` (and for pcap `pos`, the end of that packet's record) say
how far it got, after an error too. A run ends with each call.

capture/_walk.c is the same loop compiled, used when built (capture.fast picks); this one is
its reference and the fallback where it cannot be built. The tests run both over the same input.
The compiled one also reads pcapng's Enhanced Packet Blocks itself (`epbs`, see
capture.pcapng.pcapng_batches); here that is None, and capture.pcapng reads them.
"""
from __future__ import annotations

import struct

from ..framebuf import fill
from ..tcp.batch import ack_alone
from ..tcp.reassembly import MASK, ZERO_WINDOW

# version/ihl, total length, flags/fragment offset, protocol, addresses and ports (the flow's
# direct key), seq, ack, data offset, flags, window: the IPv4 and TCP headers after the link's
_IPV4_TCP = "BxHxxHxB2x12sIIBBH"
_split = struct.Struct("!4s4sHH").unpack
# a pcap record's seconds, fraction and captured length, by byte order (big-endian or not)
_RECORD = {big: struct.Struct((">" if big else "<") + "III4x").unpack_from for big in (False, True)}
_NEVER_FAST = 1 << 62   # the packet length "needed" on links without a fused reader
SMALL_PAYLOAD = 4096    # bytes: a handler's payload up to this is a copy, a larger one a view


def _payload(mv, a, e):
    """The payload at mv[a:e] for a handler: a copy when small, which (compiled) costs less than
    a view of the chunk and pins nothing (flows.unpin), else the view."""
    return mv[a:e].tobytes() if e - a <= SMALL_PAYLOAD else mv[a:e]


class Walker:
    epbs = None

    def __init__(self, flows, other, settle, links):
        self.flows, self.other, self.settle = flows, other, settle
        self.links = links
        self.n = 0
        self.pos = 0
        self.nbytes = 0
        self._shapes = {}

    def _shape(self, linktype):
        """(unpack_from over link tag + IPv4 + TCP headers, IPv4 offset, tags, bytes needed)."""
        shape = self._shapes.get(linktype)
        if shape is None:
            link = self.links.get(linktype)
            if link is None:
                shape = None, 0, (), _NEVER_FAST
            else:
                off, tag_at, tags = link
                if not tags or any(type(t) is not bytes or len(t) != len(tags[0]) for t in tags):
                    raise ValueError("link tags must be bytes of one size")
                size = len(tags[0])
                if not (0 <= off <= 1 << 16 and 0 <= tag_at <= 1 << 16 and size <= 1 << 16):
                    raise ValueError("link shape out of range")
                fmt = f"!{tag_at}x{size}s{off - tag_at - size}x" + _IPV4_TCP
                shape = struct.Struct(fmt).unpack_from, off, tags, off + 40
            self._shapes[linktype] = shape
        return shape

    def pcap(self, buf, mv, pos, end, n, big_endian, scale, linktype, limit):
        rec = _RECORD[big_endian]
        step = self._steps(buf, mv)
        next(step)
        self.n, self.pos = n, pos
        try:
            while pos + 16 <= end:
                sec, frac, incl = rec(buf, pos)
                stop = pos + 16 + incl
                if incl > limit or stop > end:
                    break
                n += 1
                self.n = n
                self.pos = stop
                step.send((n, sec * 1_000_000_000 + frac * scale, linktype, pos + 16, stop))
                pos = stop
        finally:
            step.close()
        return pos

    def batch(self, buf, mv, batch, n):
        step = self._steps(buf, mv)
        next(step)
        self.n = n
        try:
            for ts, lt, p, stop in batch:
                n += 1
                self.n = n
                self.nbytes += stop - p
                step.send((n, ts, lt, p, stop))
        finally:
            step.close()

    def _steps(self, buf, mv):
        """A coroutine taking (n, ts, linktype, start, stop) per packet; closing it settles the
        run in progress."""
        flows = self.flows
        other, settle = self.other, self.settle
        get = flows.direct.get
        add = flows.add
        tick = flows.tick
        deadline = flows.deadline
        linktype = None
        hdr = off = tags = None
        need = _NEVER_FAST
        # a run of packets continuing a frame (tcp.batch; the handlers tell where one starts): its
        # key, next sequence number, ack number, bytes the frame lacked at its start and lacks
        # now, the frame's buffer (None: counted only), its last packet and time and where that
        # packet's payload is, the flow, the stream
        run = False
        r_key = target = r_flow = r_stream = None
        expect = r_ack = r_room = room = r_n = r_ts = r_a = r_e = 0
        try:
            while True:
                n, ts, lt, p, stop = yield
                if lt != linktype:
                    linktype = lt
                    hdr, off, tags, need = self._shape(lt)
                if stop - p >= need:
                    tag, vihl, total, frag, proto, key, seq, ack, doff, flags, window = hdr(buf, p)
                    if not window:
                        flags |= ZERO_WINDOW   # then `add` takes it, and counts it
                    # hl: TCP header length; the IP length within the captured bytes
                    if (vihl == 0x45 and proto == 6 and tag in tags and not frag & 0x3FFF
                            and 40 <= (hl := doff >> 2 & 0x3C) + 20 <= total <= stop - p - off):
                        p += off
                        a = p + 20 + hl
                        p += total
                        if run:
                            # ACK only (PLAIN == 0x117, ACK == 0x10)
                            if (seq == expect and ack == r_ack and flags & 0x117 == 0x10
                                    and key == r_key and 0 < (size := p - a) < room):
                                # the middle of the frame in progress (tcp.batch)
                                if target is not None:
                                    fill(target, len(target) - room, mv, a, p)
                                expect = (seq + size) & MASK
                                room -= size
                                r_n, r_ts, r_a, r_e = n, ts, a, p
                                if ts > deadline:
                                    settle(flows, r_flow, r_stream, r_room - room, n, ts,
                                           _payload(mv, a, p))
                                    run = False
                                    deadline = tick(ts)
                                continue
                            if room != r_room:   # taken up to the previous packet
                                settle(flows, r_flow, r_stream, r_room - room, r_n, r_ts,
                                       _payload(mv, r_a, r_e))
                            run = False
                        handle = get(key)
                        if handle is False:   # a flow another process dissects
                            if ts > deadline:
                                deadline = tick(ts)
                            continue
                        if handle is not None and not flags & 0x107:  # no FIN, SYN, RST, zero window
                            if p == a and flags & 0x10 and ack_alone(flows, key, n, ts, ack):
                                started = None
                            else:
                                started = handle(n, ts, seq, ack, flags, _payload(mv, a, p))
                            if started is not None:
                                r_room, target, r_flow, r_stream = started
                                room = r_room
                                run = True
                                r_key, expect, r_ack = key, (seq + p - a) & MASK, ack
                                r_n, r_ts = n, ts
                            if ts > deadline:
                                deadline = tick(ts)
                        else:
                            add(n, ts, *_split(key), seq, ack, flags, mv[a:p].tobytes())
                            deadline = flows.deadline
                        continue
                if run:
                    if room != r_room:
                        settle(flows, r_flow, r_stream, r_room - room, r_n, r_ts,
                               _payload(mv, r_a, r_e))
                    run = False
                other(n, ts, linktype, mv[p:stop].tobytes())
                deadline = flows.deadline
        finally:   # the end of the call, or an error in it
            if run and room != r_room:
                settle(flows, r_flow, r_stream, r_room - room, r_n, r_ts,
                       _payload(mv, r_a, r_e))

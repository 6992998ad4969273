"""Segments given as columns (Dissector.feed_segments): what FlowTable.add does with each, less
the handler calls of the middle segments of a frame that spans segments.

A segment of a live flow without SYN, FIN or RST goes straight to its handler (FlowTable.direct),
as from the file reader. When that leaves its direction's frame incomplete, the next segments
that continue it exactly (same direction, in order, the same ack number, ACK without SYN, FIN or
RST, ending before the frame does) are what the handler would only append to the frame and count:
they are appended here and their counts kept in local variables (a "run"), handed to the streams
(`_settle`) before any other code runs (the next handler call, `add`, `tick`, the end of the
call). Segments are handled in the given order throughout, so nothing else changes; runs last
long when the segments come a connection at a time (the Spark job feeds them so).
"""
from __future__ import annotations

import struct

from .reassembly import MASK

_ports = struct.Struct("!HH").pack   # for FlowTable.direct's keys (flows.direct_key)
_PLAIN = 0x17                        # ACK, SYN, FIN, RST: a run's segments have ACK only
_ACK = 0x10


def feed_columns(flows, out, columns, emitted):
    """Feed the segments of `columns` (Dissector.feed_segments' columns) to `flows`; `out` is
    where exchanges appear, `emitted` (a list or None) gets the packet completing each."""
    get = flows.direct.get
    add = flows.add
    table = flows._table
    deadline = flows.deadline
    run = False
    # the run: its direction, next sequence number, ack number, bytes its frame still lacks,
    # the frame's pieces, bytes taken, the last segment taken and its packet and time, the flow
    # and the direction's reassembler
    r_src = r_dst = last = pieces = flow = stream = None
    r_sport = r_dport = expect = r_ack = room = taken = r_pkt = r_ts = 0
    for pkt, ts, src, dst, sport, dport, seq, ack, fl, payload in zip(*columns):
        if run:
            if (seq == expect and ack == r_ack and fl & _PLAIN == _ACK and sport == r_sport
                    and dport == r_dport and src == r_src and dst == r_dst
                    and 0 < (n := len(payload)) < room):
                pieces.append(payload)
                expect = (seq + n) & MASK
                room -= n
                taken += n
                last = payload
                r_pkt = pkt
                r_ts = ts
                if ts > deadline:
                    _settle(flows, flow, stream, taken, last, r_pkt, r_ts)
                    run = False
                    before = len(out)
                    deadline = flows.tick(ts)
                    if emitted is not None and len(out) != before:
                        emitted.extend([pkt] * (len(out) - before))
                continue
            if taken:
                _settle(flows, flow, stream, taken, last, r_pkt, r_ts)
            run = False
        before = len(out)
        handle = get(src + dst + _ports(sport, dport))
        if handle is not None and not fl & 7:   # no FIN, SYN, RST: what add does with it
            handle(pkt, ts, seq, ack, fl, payload)
            if fl & _PLAIN == _ACK and payload:
                flow, side = table[(src, dst, sport, dport)]
                rs = flow.rs
                stream = rs[side]
                span = stream.framer.spanning()
                base = stream.base
                n = len(payload)
                if (span is not None and not rs[1 - side].framer.waiting and base is not None
                        and not stream.held and not stream.done and stream.fin is None
                        and (seq + n - base - stream.next) & MASK == 0):
                    # it went on in order and its frame goes on past it: a run starts
                    run = True
                    room, pieces = span
                    expect = (seq + n) & MASK
                    r_ack, r_src, r_dst, r_sport, r_dport = ack, src, dst, sport, dport
                    taken = 0
            if ts > flows.deadline:
                flows.tick(ts)
        else:
            add(pkt, ts, src, dst, sport, dport, seq, ack, fl, payload)
        deadline = flows.deadline
        if emitted is not None and len(out) != before:
            emitted.extend([pkt] * (len(out) - before))
    if run and taken:
        _settle(flows, flow, stream, taken, last, r_pkt, r_ts)


def _settle(flows, flow, stream, taken, last, pkt, ts):
    """Count a run's segments as their handler calls would have: the frame's bytes and last
    packet, the stream's next offset and last segment, the flow's last packet and time."""
    stream.framer.took(taken, pkt, ts)
    stream.last_data = last
    stream.next += taken
    if last.__class__ is not bytes:
        flows.pinned.add(stream)
    flow.last_pkt = pkt
    flow.conn.last_ts = ts

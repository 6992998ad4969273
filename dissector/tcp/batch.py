"""Runs: the middle segments of a frame that spans segments, taken without their handler calls.

What a live flow's handler (FlowTable.direct) does with a segment that continues the frame in
progress of its direction and ends before it is only: append it to the frame's pieces and count
(the frame's bytes and last packet, the stream's next offset and last segment, the flow's last
packet and time). So when a handler call leaves a frame incomplete (`run_start`), the segments
that come right after it and continue it exactly (same direction, in order, the same ack number,
ACK without SYN, FIN or RST, ending before the frame does) are appended by the caller itself,
which keeps the counts in local variables and hands them to the streams (`settle`) before any
other code runs: the next other segment, `add`, `tick`, the end of a chunk or call. Segments are
handled in their order throughout, so nothing else changes. The file reader (capture.fast) takes
runs of consecutive packets; `feed_columns` (Dissector.feed_segments) of consecutive segments,
which are long when they come a connection at a time (the Spark job feeds them so).
"""
from __future__ import annotations

from .flows import pack_ports
from .reassembly import MASK

PLAIN = 0x17                         # ACK, SYN, FIN, RST: a run's segments have ACK only
ACK = 0x10


def run_start(flows, key, seq, size):
    """After the handler of direct key `key` took a segment (seq, size > 0, ACK only): (bytes
    the frame still lacks, the append of its pieces, flow, stream) if that leaves a frame in
    progress that the next segments may continue as a run, else None."""
    entry = flows.sides.get(key)
    if entry is None:   # a flow table without runs (a test's stand-in)
        return None
    flow, side = entry
    rs = flow.rs
    stream = rs[side]
    span = stream.framer.spanning()
    if span is None:
        return None
    base = stream.base
    if (rs[1 - side].framer.waiting or base is None or stream.held or stream.done
            or stream.fin is not None or (seq + size - base - stream.next) & MASK):
        return None
    return span[0], span[1].append, flow, stream


def settle(flows, flow, stream, taken, pkt, ts):
    """Count a run's segments (`taken` bytes, the last one in packet `pkt` at `ts`) as their
    handler calls would have."""
    last = stream.framer.took(taken, pkt, ts)
    stream.last_data = last
    stream.next += taken
    if last.__class__ is not bytes:
        flows.pinned.add(stream)
    flow.last_pkt = pkt
    flow.conn.last_ts = ts


def feed_columns(flows, out, columns, emitted):
    """Feed the segments of `columns` (Dissector.feed_segments' columns) to `flows` as `add`
    would, runs taken as above; `out` is where exchanges appear, `emitted` (a list or None)
    gets the packet completing each."""
    get = flows.direct.get
    add = flows.add
    deadline = flows.deadline
    run = False
    # the run: its key, next sequence number, ack number, bytes its frame lacked at its start
    # and lacks now, its pieces' append, its last packet and time, the flow, the stream
    r_key = append = flow = stream = None
    expect = r_ack = r_room = room = r_pkt = r_ts = 0
    for pkt, ts, src, dst, sport, dport, seq, ack, fl, payload in zip(*columns):
        key = src + dst + pack_ports(sport, dport)   # flows.direct_key, inlined
        if run:
            if (seq == expect and ack == r_ack and fl & PLAIN == ACK and key == r_key
                    and 0 < (n := len(payload)) < room):
                append(payload)
                expect = (seq + n) & MASK
                room -= n
                r_pkt = pkt
                r_ts = ts
                if ts > deadline:
                    settle(flows, flow, stream, r_room - room, pkt, ts)
                    run = False
                    before = len(out)
                    deadline = flows.tick(ts)
                    if emitted is not None and len(out) != before:
                        emitted.extend([pkt] * (len(out) - before))
                continue
            if room != r_room:
                settle(flows, flow, stream, r_room - room, r_pkt, r_ts)
            run = False
        before = len(out)
        handle = get(key)
        if handle is not None and not fl & 7:   # no FIN, SYN, RST: what add does with it
            handle(pkt, ts, seq, ack, fl, payload)
            if fl & PLAIN == ACK and payload:
                n = len(payload)
                started = run_start(flows, key, seq, n)
                if started is not None:
                    r_room, append, flow, stream = started
                    room = r_room
                    run = True
                    r_key, expect, r_ack = key, (seq + n) & MASK, ack
            if ts > flows.deadline:
                flows.tick(ts)
        else:
            add(pkt, ts, src, dst, sport, dport, seq, ack, fl, payload)
        deadline = flows.deadline
        if emitted is not None and len(out) != before:
            emitted.extend([pkt] * (len(out) - before))
    if run and room != r_room:
        settle(flows, flow, stream, r_room - room, r_pkt, r_ts)

"""Runs: the middle segments of a frame that spans segments, taken without their handler calls.

What a live flow's handler (FlowTable.direct) does with a segment that continues the frame in
progress of its direction and ends before it is only: write it into the frame's buffer (unless
the framer only counts them: the headers level keeps a message's first bytes) and count (the
frame's bytes and last packet, the stream's next offset and last segment, the flow's last
packet and time). So when a handler call leaves a frame incomplete (the handler returns the
run's start: tcp.flows.py_handler), the segments that come right after it and continue it
exactly (same direction, in order, the same ack number, ACK without SYN, FIN or RST, ending
before the frame does) are written by the caller itself, which keeps the counts in local
variables and hands them to the streams (`settle`) before any other code runs: the next other
segment, `add`, `tick`, the end of a chunk or call. Segments are handled in their order
throughout, so nothing else changes. The file reader (capture.fast) takes runs of consecutive
packets; `feed_columns` (Dissector.feed_segments) of consecutive segments, which are long when
they come a connection at a time (the Spark job feeds them so).

The file reader also takes an ACK alone (no data; ACK without SYN, FIN or RST) of a live flow
itself when it acknowledges nothing past the data seen (`ack_alone`): then the handler would
only note the packet and its time.
"""
from __future__ import annotations

from ..framebuf import fill
from .flows import INDIRECT, PLAIN, pack_ports
from .reassembly import ACK, MASK


def py_settle(flows, flow, stream, taken, pkt, ts, last):
    """Count a run's segments (`taken` bytes, the last one, payload `last`, in packet `pkt` at
    `ts`) as their handler calls would have. tcp/_handler.c's settle is the same compiled."""
    stream.framer.took(taken, pkt, ts)
    stream.last_data = last
    stream.next += taken
    if last.__class__ is not bytes:
        flows.pinned.add(stream)
    flow.last_pkt = pkt
    flow.conn.last_ts = ts


def ack_alone(flows, key, pkt, ts, ack):
    """An ACK alone sent on the live flow with direct key `key`, in packet `pkt` at `ts`: True
    when noted here as its handler would (the flow's last packet and time), False when the
    handler must see it (the ack is past the data seen: a loss, or the acked stream has not
    started; tcp.flows.py_handler calls `acked` for those; or a key not on `sides`: a flow
    timing its data to ACKs, tcp.ack_rtt, is on `direct` only)."""
    entry = flows.sides.get(key)
    if entry is None:
        return False
    flow, side = entry
    if flow.rs[1 - side].acks_unseen(ack):
        return False
    flow.last_pkt = pkt
    flow.conn.last_ts = ts
    return True


def feed_columns(flows, out, columns, emitted):
    """Feed the segments of `columns` (Dissector.feed_segments' columns) to `flows` as `add`
    would, runs taken as above; `out` is where exchanges appear, `emitted` (a list or None)
    gets the packet completing each."""
    get = flows.direct.get
    add = flows.add
    deadline = flows.deadline
    run = False
    # the run: its key, next sequence number, ack number, bytes its frame lacked at its start
    # and lacks now, the frame's buffer (None: counted only), its last packet, time and
    # payload, the flow, the stream
    r_key = buf = last = flow = stream = None
    expect = r_ack = r_room = room = r_pkt = r_ts = 0
    for pkt, ts, src, dst, sport, dport, seq, ack, fl, payload in zip(*columns):
        key = src + dst + pack_ports(sport, dport)   # flows.direct_key, inlined
        if run:
            if (seq == expect and ack == r_ack and fl & PLAIN == ACK and key == r_key
                    and 0 < (n := len(payload)) < room):
                if buf is not None:
                    fill(buf, len(buf) - room, payload, 0, n)
                expect = (seq + n) & MASK
                room -= n
                r_pkt = pkt
                r_ts = ts
                last = payload
                if ts > deadline:
                    settle(flows, flow, stream, r_room - room, pkt, ts, last)
                    run = False
                    before = len(out)
                    deadline = flows.tick(ts)
                    if emitted is not None and len(out) != before:
                        emitted.extend([pkt] * (len(out) - before))
                continue
            if room != r_room:
                settle(flows, flow, stream, r_room - room, r_pkt, r_ts, last)
            run = False
        before = len(out)
        handle = get(key)
        if handle is not None and not fl & INDIRECT:   # what add does with it
            started = handle(pkt, ts, seq, ack, fl, payload)
            if started is not None:
                r_room, buf, flow, stream = started
                room = r_room
                run = True
                r_key, expect, r_ack = key, (seq + len(payload)) & MASK, ack
            if ts > flows.deadline:
                flows.tick(ts)
        else:
            add(pkt, ts, src, dst, sport, dport, seq, ack, fl, payload)
        deadline = flows.deadline
        if emitted is not None and len(out) != before:
            emitted.extend([pkt] * (len(out) - before))
    if run and room != r_room:
        settle(flows, flow, stream, r_room - room, r_pkt, r_ts, last)


try:
    from ._handler import settle
except ImportError:   # no compiler where it was installed: the same in Python
    settle = py_settle

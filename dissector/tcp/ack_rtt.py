"""Round trips from data and ACK timing, for connections whose handshake was not captured.

A data segment's round trip, as seen at the capture point, is the time from the segment to the
first ACK from the other side whose number is exactly the segment's end (tshark's
tcp.analysis.ack_rtt). Segments sent again or out of order are not timed, nor those before
them still unacknowledged (Karn: their ACK is ambiguous). The client's data acknowledged by the
broker times the trip from the capture point to the broker and back; the broker's data
acknowledged by the client the trip to the client. An ACK often rides on the answer (a
response acknowledges its request), so a sample is the round trip plus however long that side
took to acknowledge: the smallest sample bounds the round trip from above.

Timing needs every segment of the flow, so while it lasts the flow's handlers start no run
(tcp.batch) and its keys stay off FlowTable.sides (ACKs alone reach them too); it lasts until
RTT_SAMPLES round trips each way are kept or RTT_PACKETS segments have gone by, then the flow
gets its plain handlers back. Connections whose handshake was captured are never timed.
"""
from __future__ import annotations

from collections import deque

from .reassembly import ACK, HALF, MASK

RTT_SAMPLES = 16      # round trips kept per direction (Connection.ack_rtts)
RTT_PACKETS = 4096    # segments a flow is timed for at most
MAX_UNACKED = 8       # timed segments awaiting their ACK per side (the oldest dropped first)


class Timing:
    """A timed flow's state (_Flow.timed), kept when its handlers are made again (a TLS front's
    decision rewires them): per side, (end sequence number, time) of its timed segments
    awaiting their ACK; the segments still to time."""
    __slots__ = ("unacked", "left")

    def __init__(self):
        self.unacked = (deque(), deque())
        self.left = RTT_PACKETS


def timed_handlers(flow, plain, done):
    """Handlers for both sides of a live flow that time segments to their ACKs into
    flow.conn.ack_rtts (per direction of the data: (the ACK's packet, ns) each) and hand every
    segment on to `plain`; `done()` is called once timing is over."""
    rs = flow.rs
    samples = flow.conn.ack_rtts
    timing = flow.timed

    def make(side):
        mine = rs[side]
        handle = plain[side]
        sent, theirs = timing.unacked[side], timing.unacked[1 - side]
        rtts = samples[rs[1 - side].direction]   # the other side's data, acked by this one

        def timed(pkt, ts, seq, ack, flags, payload):
            if flags & ACK:
                while theirs and (ack - theirs[0][0]) & MASK < HALF:   # acks that segment
                    end, sent_ts = theirs.popleft()
                    if end == ack:
                        if len(rtts) < RTT_SAMPLES:
                            rtts.append((pkt, ts - sent_ts))
                        break
            if payload:
                base = mine.base
                if base is None or ((seq - base - mine.next) & MASK == 0 and not mine.held):
                    sent.append(((seq + len(payload)) & MASK, ts))
                    if len(sent) > MAX_UNACKED:
                        sent.popleft()
                else:
                    sent.clear()
            handle(pkt, ts, seq, ack, flags, payload)
            timing.left -= 1
            if timing.left <= 0 or (len(samples[0]) >= RTT_SAMPLES
                                    and len(samples[1]) >= RTT_SAMPLES):
                done()
            return None   # no run: the next segments come here too
        return timed

    return make(0), make(1)

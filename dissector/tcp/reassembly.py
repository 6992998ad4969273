"""One direction of a TCP connection: sequence numbers -> an ordered byte stream with explicit holes.

Stream offsets are 64-bit ints counted from the first data byte (after the SYN, where the other
side's handshake ack says it is when the SYN itself was not captured, or the first byte seen when
the capture joined mid-stream: then the framer resynchronises); 32-bit sequence numbers are
unwrapped relative to the next expected offset, so wrap-around and streams over 4 GiB need no
special case. Keep-alive probes (a junk byte or nothing at the last acknowledged sequence number)
and retransmissions of delivered bytes are dropped.

In-order data goes straight to the framer. Out-of-order data is held (bounded by `max_buffered`)
until the hole before it fills. The first copy of a byte wins; a later copy that differs is a
`tcp.overlap_conflict`. A hole that will not be filled becomes a `tcp.gap` issue and a `gap()` on
the framer, never zero bytes: when the held data passes the cap, when the connection ends, and
when the receiver acknowledged bytes the capture never saw (`acked`: `owed`) and data past them
comes: the capture dropped them, no retransmission will come. Not at the acknowledgement itself:
a capture point that queues the two directions apart (a mirror port, captures of each direction
merged) shows acks before the data they acknowledge, which then comes in order; the session holds
the responses that come before their requests meanwhile (Session.owed). Held data also counts
against the dissector's shared `Budget`: when that is spent and this stream holds the most, its
holes become gaps at once (`give_up`). Data that arrives after its hole was declared cannot be
put back: it is a `tcp.late_data` issue, once a stream.
"""
from __future__ import annotations

from bisect import bisect_left

from ..budget import Budget
from ..model import MAX_TCP_EVENTS, WARNING, Issue

MASK = 0xFFFFFFFF
HALF = 1 << 31
WRAP = 1 << 32
FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
# not a TCP flag: the capture readers add it to the flags of a segment advertising a zero window
# (what tshark calls tcp.analysis.zero_window unless SYN, FIN or RST is set)
ZERO_WINDOW = 0x100

# An ack further ahead of the data seen than this is not evidence of loss (bogus or stale).
ACK_HORIZON = 1 << 30
MAX_LOST = 8   # the last holes acks gave evidence of, kept to tell late data by

# Held segments are bounded by count as well as by bytes: each costs ~300 bytes of bookkeeping
# and a list insert whatever its size, so a flood of 1-byte out-of-order segments under the
# byte cap would take gigabytes and quadratic time.
MAX_HELD_SEGMENTS = 8192

_NAMES = ("request", "response")


def _start(segment):
    return segment[0]


class Reassembler:
    """Sequence space -> stream for one direction; feeds a `Framer`."""

    __slots__ = ("framer", "sink", "connection_id", "direction", "max_buffered", "budget",
                 "base", "next", "held", "held_bytes", "fin", "syn_seq", "anchor", "done",
                 "last_data", "peer", "retransmits", "lost", "late", "owed", "__weakref__")

    def __init__(self, framer, sink, connection_id, direction, max_buffered, budget=None):
        self.framer = framer
        self.sink = sink
        self.connection_id = connection_id
        self.retransmits = []  # packet numbers of retransmissions (the flow shares its
                               # connection's: Connection.retransmits)
        self.direction = direction
        self.max_buffered = max_buffered
        self.budget = Budget() if budget is None else budget  # shared by a capture's streams
        self.base = None       # sequence number of stream offset 0; None until the first segment
        self.next = 0          # stream offset of the next byte owed to the framer
        self.held = []         # out-of-order data: sorted, disjoint [start, end, bytes, packet, ts]
        self.held_bytes = 0
        self.fin = None        # stream offset where the FIN sits
        self.syn_seq = None
        self.anchor = None     # where the stream starts, learnt from the handshake when the SYN
                               # of this direction was not captured
        self.peer = None       # the other direction
        self.done = False
        self.last_data = b""   # the last segment delivered (it ends at `next`), to check
                               # retransmissions against
        self.owed = 0          # stream offset up to which the peer acknowledged bytes
        self.lost = []         # (start, end) of the last MAX_LOST holes acks gave evidence of
        self.late = False      # whether late data was reported (once a stream)

    # -- input -----------------------------------------------------------------------------------

    def segment(self, pkt, ts, seq, flags, payload):
        """A segment sent in this direction (RST is handled by the flow)."""
        if self.done:
            return
        if flags & SYN:
            if self.base is None:
                self.base = (seq + 1) & MASK
                self.syn_seq = seq
                if self.base != self.anchor:
                    self.owed = 0   # counted from another start
            seq += 1  # the SYN takes one sequence number before the data
        elif self.base is None:
            if not payload:
                return  # a bare ACK cannot anchor the stream: it may be a keep-alive probe
            self.base = seq
            if seq != self.anchor:
                self.framer.midstream()
                self.owed = 0
        nxt = self.next
        d = (seq - self.base - nxt) & MASK
        n = len(payload)
        if d == 0 and not self.held:
            if n:  # the common case: in order, nothing held
                self.framer.feed(payload, pkt, ts)
                self.last_data = payload
                self.next = nxt + n
            if flags & FIN:
                self._fin(self.next, pkt)
            elif self.fin is not None and self.next >= self.fin:
                self._end(pkt)  # the FIN came ahead of this data
            return
        if d >= HALF:
            d -= WRAP
        off = nxt + d
        if nxt < self.owed and nxt < off:   # after a hole the peer acknowledged: a direction
            # keeps its own order, so what the capture lacks before this never came
            self._release(min(self.owed, off), pkt, self.lost)
            nxt = self.next
        if n:
            end = off + n
            if end <= nxt:
                if not (n == 1 and off == nxt - 1):  # a keep-alive probe's byte is junk
                    self._compare_delivered(off, payload, pkt)
                    self.event(self.retransmits, pkt)
                    if self.lost:
                        self._late(off, end, pkt)
            else:
                if off < nxt:
                    self._compare_delivered(off, payload, pkt)
                    self.event(self.retransmits, pkt)
                    if self.lost:
                        self._late(off, nxt, pkt)
                    payload = payload[nxt - off:]
                    off = nxt
                if off == nxt and not self.held:
                    self.framer.feed(payload, pkt, ts)
                    self.last_data = payload
                    self.next = end
                else:
                    self._hold(off, payload, pkt, ts)
                    self._drain()
                    while (self.held_bytes > self.max_buffered
                           or len(self.held) > MAX_HELD_SEGMENTS):
                        self._release(self.held[0][0], self.held[0][3])
                    if self.budget.used > self.budget.limit:
                        self.budget.over()
        if flags & FIN:
            self._fin(off + n, pkt)
        elif self.fin is not None and self.next >= self.fin:
            self._end(pkt)

    def feeds_at_once(self, seq) -> bool:
        """Would data at `seq` (without SYN) go to the framer at once, as the stream's next bytes
        (at its start when it has none yet: where the handshake's ACK put it)?"""
        if self.done:
            return False
        if self.base is None:
            return self.anchor is not None and seq == self.anchor
        return not (seq - self.base - self.next) & MASK and not self.held and self.fin is None

    def answers(self, seq, payload):
        """The correlation ids of the responses a segment of this direction starts
        (Framer.answers), when it is the stream's next data or its first, for the peer's waiting
        framer (Framer.settle); else None."""
        base = self.base
        if base is None:   # the first data: the stream's start, or joined midway
            return self.framer.answers(payload, seq != self.anchor)
        if (seq - base - self.next) & MASK or self.held:
            return None
        return self.framer.answers(payload)

    def acks_unseen(self, ack) -> bool:
        """Whether an ACK of `ack` from the other side asks anything of acked(): this stream
        not started yet, or an ack past the data seen of it (a loss). tcp.flows.py_handler
        inlines the same test on its per-packet path."""
        base = self.base
        return base is None or 0 < (ack - base - self.next) & MASK < ACK_HORIZON

    def acked(self, ack, flags, pkt):
        """The other side acknowledged everything before sequence number `ack` (in a segment
        with these flags)."""
        if self.base is None:
            peer = self.peer
            if (self.anchor is None and (flags & SYN or peer.syn_seq is not None)
                    and peer.next == 0):
                # the opener acks our SYN before either side sends data (a Kafka broker speaks
                # only when spoken to): the stream starts here even if our SYN was not captured
                self.anchor = ack
            elif self.anchor is not None:   # acked before the capture showed any of it
                d = (ack - self.anchor) & MASK
                if self.owed < d < ACK_HORIZON:
                    self.owed = d
            return
        if self.done:
            return
        d = (ack - self.base - self.next) & MASK
        if d == 0 or d >= ACK_HORIZON:
            return
        upto = self.next + d
        if self.fin is not None and upto > self.fin:
            upto = self.fin  # the FIN's own sequence number
        if upto <= self.next:
            return
        held = self.held
        if held and held[0][0] < upto:
            # data after the hole came first: a direction keeps its own order even where the
            # capture delays it, so the capture dropped what the hole lacks
            self._release(upto, pkt, self.lost)
            if self.budget.used > self.budget.limit:
                self.budget.over()  # what the framer took on while fed
            if self.fin is not None and self.next >= self.fin:
                self._end(pkt)
        elif upto > self.owed:
            self.owed = upto   # a hole once data past it comes (segment), or at the end

    def owes(self) -> bool:
        """Has the peer acknowledged bytes of this stream the capture has not shown yet?"""
        return self.owed > self.next

    def unpin(self):
        """The buffer behind payload views given to this direction is about to be reused (the
        framer copies what it keeps as it comes)."""
        if self.last_data.__class__ is not bytes:
            self.last_data = bytes(self.last_data)

    def buffered(self):
        """Bytes this stream counts against the budget: its out-of-order data."""
        return self.held_bytes

    def give_up(self):
        """The budget is spent and this stream's held data is the most: its holes become gaps
        now, the data after them goes on (Budget.over)."""
        held = self.held
        self.sink.issue(Issue("kafka.buffer_limit", WARNING,
                              f"{self.held_bytes} bytes of out-of-order data in the "
                              f"{_NAMES[self.direction]} stream delivered past their holes: the "
                              f"{self.budget.limit}-byte buffer budget of the capture's partial "
                              f"frames and out-of-order data is spent",
                              self.connection_id, held[0][3], self.next))
        while held:
            self._release(held[0][0], held[0][3])

    def finish(self, pkt):
        """The connection is over: whatever is still missing is a gap; flush the framer."""
        if self.done:
            return
        if self.owes():
            self._release(self.owed, pkt, self.lost)
        while self.held:
            self._release(self.held[0][0], self.held[0][3])
        if self.fin is not None and self.next < self.fin:
            self._gap(self.fin - self.next, pkt)
        self._end(pkt)

    # -- internals -------------------------------------------------------------------------------

    def _fin(self, at, pkt):
        if self.fin is None:
            self.fin = at
        if self.next >= self.fin:
            self._end(pkt)

    def _end(self, pkt):
        self.done = True
        b = self.budget
        b.used -= self.held_bytes
        b.big.pop(self, None)
        self.held = []
        self.held_bytes = 0
        self.last_data = b""
        self.framer.finish(pkt)

    def _hold(self, off, data, pkt, ts):
        """Keep out-of-order data; bytes already held win over the new copy."""
        if type(data) is not bytes:
            data = bytes(data)  # do not pin the capture's buffers
        end = off + len(data)
        held = self.held
        i = bisect_left(held, off, key=_start)
        if i and held[i - 1][1] > off:
            i -= 1
        pos = off
        fresh = []
        while i < len(held) and held[i][0] < end:
            s, e, old = held[i][0], held[i][1], held[i][2]
            if s > pos:
                fresh.append((pos, s))
            a = s if s > off else off
            b = e if e < end else end
            if a < b and data[a - off:b - off] != old[a - s:b - s]:
                self._conflict(a, data[a - off:b - off], old[a - s:b - s], pkt)
            if e > pos:
                pos = e
            i += 1
        if pos < end:
            fresh.append((pos, end))
        added = 0
        for a, b in fresh:
            piece = data if (a == off and b == end) else data[a - off:b - off]
            held.insert(bisect_left(held, a, key=_start), [a, b, piece, pkt, ts])
            added += b - a
        self.held_bytes += added
        b = self.budget
        b.add(added)
        if self.held_bytes >= b.big_size:
            b.big[self] = None

    def _drain(self):
        """Deliver held data that now continues the stream. The budget waits meanwhile (a give-up
        would change the stream under this loop): callers check it after."""
        held = self.held
        if not held or held[0][0] > self.next:
            return
        b = self.budget
        busy = b.busy
        b.busy = True
        before = self.held_bytes
        try:
            while held and held[0][0] <= self.next:
                s, e, data, pkt, ts = held.pop(0)
                self.held_bytes -= e - s
                if e <= self.next:
                    continue
                if s < self.next:
                    data = data[self.next - s:]
                    s = self.next
                self.framer.feed(data, pkt, ts)
                self.last_data = data
                self.next = e
        finally:
            b.busy = busy
            b.add(self.held_bytes - before)
            if self.held_bytes < b.big_size:
                b.big.pop(self, None)

    def _release(self, upto, pkt, lost=None):
        """Nothing before offset `upto` will arrive any more: declare the holes (noted in `lost`
        when given), deliver the rest."""
        held = self.held
        while self.next < upto:
            if held and held[0][0] <= self.next:
                self._drain()
                continue
            if held and held[0][0] < upto:
                end, at = held[0][0], held[0][3]
            else:
                end, at = upto, pkt
            if lost is not None:
                lost.append((self.next, end))
                del lost[:-MAX_LOST]
            self._gap(end - self.next, at)
        self._drain()

    @staticmethod
    def event(events, pkt):
        """Note packet `pkt` in a Connection's list of TCP events (bounded)."""
        if len(events) < MAX_TCP_EVENTS:
            events.append(pkt)

    def _gap(self, nbytes, pkt):
        self.sink.issue(Issue("tcp.gap", WARNING,
                              f"{nbytes} bytes missing from the {_NAMES[self.direction]} stream "
                              f"at offset {self.next}", self.connection_id, pkt, self.next))
        self.framer.gap(nbytes, pkt)
        self.next += nbytes
        self.last_data = b""

    def _late(self, off, end, pkt):
        """Bytes [off, end) came again: those in a hole an ack declared are late data."""
        hit = [(max(off, s), min(end, e)) for s, e in self.lost if s < end and off < e]
        if hit and not self.late:
            self.late = True
            self.sink.issue(Issue(
                "tcp.late_data", WARNING,
                f"{sum(e - s for s, e in hit)} bytes of the {_NAMES[self.direction]} stream from "
                f"offset {hit[0][0]} arrived after the other side had "
                f"acknowledged them, when they had been declared lost: the capture saw the two "
                f"directions out of order (a mirror port, or captures of each direction merged); "
                f"the messages in them are lost", self.connection_id, pkt, hit[0][0]))

    def _compare_delivered(self, off, data, pkt):
        """A retransmission of delivered bytes: check it against the last segment delivered."""
        last = self.last_data
        s = self.next - len(last)
        a = s if s > off else off
        e = s + len(last)
        b = off + len(data)
        if b > e:
            b = e
        if a < b and data[a - off:b - off] != last[a - s:b - s]:
            self._conflict(a, data[a - off:b - off], last[a - s:b - s], pkt)

    def _conflict(self, at, new, old, pkt):
        differ = [i for i, (x, y) in enumerate(zip(new, old)) if x != y]
        at += differ[0]
        self.sink.issue(Issue("tcp.overlap_conflict", WARNING,
                              f"{len(differ)} bytes of the {_NAMES[self.direction]} stream from "
                              f"offset {at} differ from the copy seen first (first copy kept)",
                              self.connection_id, pkt, at))

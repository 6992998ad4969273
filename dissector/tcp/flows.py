"""TCP segments -> Kafka connections: flow identity, which side is the broker, lifetime.

A flow is a 5-tuple; it becomes a `Connection` (ids 1, 2, 3... in the order flows are recognised
as Kafka) once `classify` says which side is the broker. Until then its packets are kept (bounded)
and replayed. Each direction of a connection is a `Reassembler` feeding a `Framer` (made once the
connection carries data: `_Unborn`), which hand frames and issues to the connection's sink (the
session).

A connection ends when both sides have sent a FIN, on a RST, when it idles out (`expire`) or at
the end of the capture (`flush`); its tuple then lingers as a closed flow so stray late packets are
ignored, until a SYN with a new ISN on the same tuple starts a new connection.

Hostile captures (SYN floods, floods of tiny flows) must not grow the table without bound, so by
capture time and by count, as conntrack does:
- a flow that never carried data (a SYN, maybe its SYN-ACK and ACKs) is forgotten after QUIET_NS
  without packets; such a flow stays off `direct` (its few packets go through `add`, in order), so
  forgetting it never races a batched reader;
- at most MAX_QUIET of those, MAX_UNSURE flows holding MAX_UNSURE_BYTES awaiting classification,
  MAX_LIVE connections and MAX_CLOSED lingering tuples exist at once; beyond, the oldest never-data
  flows go first, then the least recently active connections (closed as at the end of the capture).
A flow forgotten this way does not linger: its later packets start a new flow, so data that does
come later is still dissected. What the caps dropped is summed up in one `tcp.flow_limit` Issue.
"""
from __future__ import annotations

import struct
from collections import OrderedDict, deque

from ..budget import Budget
from ..capture.layers import format_addr
from ..framing import MAX_FRAME, Framer
from ..model import REQUEST, RESPONSE, WARNING, Connection, Frame, Issue
from ..tls.records import looks_like_tls
from .ack_rtt import Timing, timed_handlers
from .reassembly import ACK, ACK_HORIZON, FIN, MASK, RST, SYN, WRAP, ZERO_WINDOW, Reassembler

try:
    from ._handler import handler as compiled_handler
except ImportError:   # no compiler where it was installed: py_handler
    compiled_handler = None

PENDING_BYTES = 64 << 10      # payload kept per unrecognised flow (oldest dropped first)
PENDING_PACKETS = 1024
LINGER_NS = 120 * 10**9       # how long a closed tuple swallows late packets (about 2 MSL)
FAR = 1 << 24                 # a SYN this far from the expected sequence is a new connection
QUIET_NS = 120 * 10**9        # silence after which a flow that never carried data is forgotten
                              # (conntrack's SYN_SENT timeout)
MAX_QUIET = 1 << 12           # flows that never carried data (~7 KB each when live)
MAX_UNSURE = 1 << 12          # flows with data awaiting classification (`--port auto`)...
MAX_UNSURE_BYTES = 32 << 20   # ...and the payload they hold in all
MAX_LIVE = 1 << 15            # connections
MAX_CLOSED = 1 << 16          # closed tuples lingering

_PENDING, _LIVE, _CLOSED = 0, 1, 2
_SLOW = SYN | FIN | RST       # flags that take a live segment off the direct path...
INDIRECT = _SLOW | ZERO_WINDOW   # ...in `add` too; the readers hand these to `add`
PLAIN = INDIRECT | ACK         # a segment that may start or continue a run has ACK alone of these
NEVER = float("inf")
pack_ports = struct.Struct("!HH").pack


def direct_key(src, dst, sport, dport):
    """The key of FlowTable.direct: addresses and ports as on the wire (IPv4: the 12 bytes
    from the IP source address to the TCP destination port)."""
    return src + dst + pack_ports(sport, dport)


class ConnectionSink:
    """Where one connection's frames and issues go (implemented by the session; this class only
    says what it has: typing.Protocol costs 3 ms at every start). It may also have `head_size`
    (see Session.head_size)."""

    def frame(self, frame: Frame) -> None: ...

    def issue(self, issue: Issue) -> None: ...

    def plausible(self, direction: int, data, pos: int) -> bool:
        """Does a frame plausibly start at data[pos] (its 4-byte size prefix)?"""

    def close(self) -> None: ...

    def follow(self, requests) -> None:
        """Optional: the request stream's Reassembler, given when the connection opens."""


class _Flow:
    __slots__ = ("key", "state", "first_pkt", "first_ts", "last_pkt", "last_ts", "pending",
                 "pending_bytes", "syn", "opener", "fins", "conn", "sink", "rs", "closed_ts",
                 "handlers", "handshake", "timed")

    def __init__(self, key, pkt, ts):
        self.key = key            # (src, dst, sport, dport) of the flow's first packet: side 0
        self.state = _PENDING
        self.first_pkt = self.last_pkt = pkt
        self.first_ts = self.last_ts = ts
        self.pending = deque()    # (pkt, ts, side, seq, ack, flags, payload) until classified
        self.pending_bytes = 0
        self.syn = [None, None]   # ISN of each side's SYN
        self.opener = None        # the side that opened the connection, if the handshake was seen
        self.handshake = [None, None, None]   # times of SYN, SYN-ACK, ACK (Connection.handshake)
        self.fins = 0             # bit per side that sent a FIN
        self.conn = None
        self.sink = None
        self.rs = None            # Reassembler per side
        self.handlers = None      # per side, while live: see FlowTable.direct
        self.timed = None         # while timing data to ACKs, its ack_rtt.Timing (off `sides`)
        self.closed_ts = 0


class _Unborn:
    """A direction's front (what its reassembler feeds) until the connection carries data: a
    connection that never does (a SYN flood's, a refused or probed port's) makes no framers and
    no TLS fronts, half of what it cost (200,000 SYNs: 11.3 s -> 6.3 s). Data brings both
    directions' fronts to life first (FlowTable._heard); before it only a hole (an ACK past the
    data seen), which does the same and goes on to this direction's new front, or the stream's
    end reach a front. Ending unborn is what ending a fresh front does: nothing (tested against
    the real ones)."""
    __slots__ = ("table", "flow", "side")
    waiting = False   # asked of the peer's front before a segment's data goes on

    def __init__(self, table, flow, side):
        self.table = table
        self.flow = flow
        self.side = side

    def _born(self):
        self.table._birth(self.flow)
        return self.flow.rs[self.side].framer

    def gap(self, nbytes, pkt):
        self._born().gap(nbytes, pkt)

    def feed(self, data, pkt, ts):
        """Handlers made before data (of ACKs) hold this, but data makes them again first."""
        return self._born().feed(data, pkt, ts)

    def finish(self, pkt):
        pass

    def buffered(self):   # Budget.members
        return 0


class FlowTable:
    """Every TCP flow of a capture; feed it segments in capture order with `add`."""

    def __init__(self, classify, open_connection, *, max_buffered=4 << 20, max_frame=MAX_FRAME,
                 issue=None, first_data=None, dataless=None, budget=None, tls=None):
        """classify(src_addr, sport, dst_addr, dport, payload) -> 0 if src is the client (dst is
        the broker), 1 if src is the broker, None if not (yet) known to be Kafka. It is called for
        the SYN packets (payload usually empty) and the first payload-carrying packets of a flow
        until it returns non-None; packets of a flow whose side is unknown are buffered (bounded)
        and replayed once it is known; a flow that never classifies is dropped at close/end.
        When the handshake was captured, the side that opened the connection is the client
        whatever classify said (it only has to recognise Kafka then).
        open_connection(conn: Connection) -> ConnectionSink is called once per new connection;
        connection ids are 1, 2, 3... in the order connections are recognised (the order of their
        first packets when the ports decide).
        issue(Issue), if given, receives the `tcp.flow_limit` summary at `flush`.
        first_data(conn), if given, is called once when a connection carries its first payload
        (at its opening if it already has); dataless(conn) when one closes without ever having
        carried any, returning whether its row was left out of the connections table (counted in
        the summary): a SYN flood must not grow that table either.
        budget: the Budget of buffered bytes all its connections share (default: a new one).
        tls: the dissector.tls layer that puts each direction behind a front deciding whether it
        is TLS (then decrypted into the framer) or plaintext (then the framer itself), or None."""
        self._classify = classify
        self._open_connection = open_connection
        self.tls = tls
        self.max_buffered = max_buffered
        self.max_frame = max_frame
        self.budget = Budget() if budget is None else budget
        self.budget.members = self._streams
        self._table = {}          # (src, dst, sport, dport) -> (flow, side)
        # direct_key(src, dst, sport, dport) -> handler(packet_no, ts_ns, seq, ack, flags,
        # payload) of each live flow's side: a segment without SYN, FIN or RST of a live flow
        # may be handed straight to it (what `add` does with one), then `tick` called once its
        # ts > `deadline`
        self.direct = {}
        self.sides = {}           # the same keys -> (flow, side), but a timed flow's (ack_rtt)
        self.deadline = NEVER     # when the oldest closed tuple's linger ends
        self.pinned = set()       # reassemblers given payload views by handlers (see unpin)
        self._live = {}           # connection id -> flow, in id order
        self._closed = deque()    # closed flows, oldest first, until their tuple is forgotten
        self._ids = 0
        self._issue = issue
        self._first_data = first_data
        self._dataless = dataless
        # can a flow still unclassified become Kafka later (not when only ports decide)?
        self._auto = getattr(classify, "auto", True)
        self._quiet = OrderedDict()   # flows that never carried data, least recently active first
        self._unsure = OrderedDict()  # pending flows with data, oldest first...
        self._unsure_bytes = 0        # ...and their pending payload
        self._last_pkt = 0
        # the most quiet, live and closed flows at once since last reset: what a parallel run's
        # parent checks against their caps (dissector.parallel)
        self.peaks = [0, 0, 0]
        self.evicted = {"quiet": 0, "unsure": 0, "unsure_bytes": 0, "live": 0, "closed": 0,
                        "rows": 0}

    # -- input -----------------------------------------------------------------------------------

    def add(self, packet_no, ts_ns, src_addr, dst_addr, sport, dport, seq, ack, flags, payload):
        """One TCP segment (flags: FIN=1 SYN=2 RST=4 PSH=8 ACK=16, ZERO_WINDOW=256 when its
        window is 0); payload bytes or a view."""
        key = (src_addr, dst_addr, sport, dport)
        entry = self._table.get(key)
        if entry is None or flags & SYN:
            entry = self._flow_for(entry, packet_no, ts_ns, src_addr, dst_addr, sport, dport,
                                   seq, ack, flags)
            if entry is None:
                return
        flow, side = entry
        if flow.state == _LIVE:
            if flow in self._quiet:   # no data yet: the handshake's last ACK may be this one
                _handshake_ack(flow, side, flags, ts_ns)
                self._stir(flow, payload, side, seq)
            if flags & _SLOW:
                flow.last_pkt = packet_no
                flow.conn.last_ts = ts_ns
                rs = flow.rs
                peer = rs[1 - side]
                if flags & ACK:
                    peer.acked(ack, flags, packet_no)
                if payload and peer.framer.waiting:
                    # the peer answers: its last frame is complete
                    peer.framer.settle(rs[side].answers(seq, payload))
                if flags & (RST | FIN):
                    self._ending(flow, side, packet_no, ts_ns, seq, flags, payload)
                else:
                    rs[side].segment(packet_no, ts_ns, seq, flags, payload)
            else:
                if flags & ZERO_WINDOW:
                    Reassembler.event(flow.conn.zero_windows, packet_no)
                handlers = flow.handlers
                if handlers is not None:
                    handlers[side](packet_no, ts_ns, seq, ack, flags, payload)
                elif not payload and flow.timed is None:
                    _ack_before_data(flow, side, packet_no, ts_ns, ack, flags)
                else:   # made when first needed (_open)
                    flow.handlers = self._handlers(flow)
                    flow.handlers[side](packet_no, ts_ns, seq, ack, flags, payload)
        else:
            if flow in self._quiet:
                self._stir(flow, payload)
            flow.last_pkt = packet_no
            flow.last_ts = ts_ns
            if flow.state == _PENDING:
                _handshake_ack(flow, side, flags, ts_ns)
                self._pending(flow, side, packet_no, ts_ns, seq, ack, flags, payload)
        if ts_ns > self.deadline:
            self.tick(ts_ns)

    def sinks(self):
        """The sinks of the live connections, in the order they opened."""
        return [flow.sink for flow in self._live.values()]

    def _streams(self):
        """Every framer and reassembler of the live connections (Budget.members)."""
        return [x for flow in self._live.values() for r in flow.rs for x in (r, r.framer)]

    def unpin(self):
        """A direct handler may be given payload views of a reused buffer (the file reader's
        chunk) instead of bytes: what the streams keep of them is copied out when the reader
        calls this, before it refills the buffer."""
        for r in self.pinned:
            r.unpin()
        self.pinned.clear()

    def tick(self, ts_ns):
        """Time has passed `deadline`: forget the closed tuples whose linger is over and the
        never-data flows silent for QUIET_NS. Returns the new deadline (callers that skip `add`
        for live segments call this themselves)."""
        quiet = self._quiet
        before = ts_ns - QUIET_NS
        while quiet:
            flow = next(iter(quiet))
            if _last_ts(flow) >= before:
                break
            self._forget(flow)
        self._forget_closed(ts_ns - LINGER_NS)
        return self.deadline

    def flush(self):
        """End of capture: flush every connection (declare remaining holes as gaps, emit what can
        be framed) and call sink.close() on each."""
        for flow in list(self._live.values()):
            self._close(flow, flow.last_pkt)
        self._table.clear()
        self.direct.clear()
        self.sides.clear()
        self._closed.clear()
        self._quiet.clear()
        self._unsure.clear()
        self._unsure_bytes = 0
        self.deadline = NEVER
        e = self.evicted
        heads = getattr(self._classify, "dropped", 0)  # detect.BrokerSide's own bound
        if self._issue is not None and (any(e.values()) or heads):
            self._issue(Issue("tcp.flow_limit", WARNING,
                              f"flow table full: forgot {e['quiet']} flows that never carried data, "
                              f"{e['unsure']} unclassified flows ({e['unsure_bytes']} bytes), "
                              f"{heads} first bytes kept for port detection, closed {e['live']} "
                              f"idle connections and {e['closed']} closed tuples early; left "
                              f"{e['rows']} connections that never carried data out of the "
                              f"connections table",
                              frame=self._last_pkt))

    def expire(self, now_ns, idle_ns):
        """Close connections idle longer than idle_ns (live capture)."""
        seen = set()
        for key, (flow, _side) in list(self._table.items()):
            last = flow.conn.last_ts if flow.state == _LIVE else flow.last_ts
            if last + idle_ns >= now_ns:
                continue
            if id(flow) not in seen:
                seen.add(id(flow))
                if flow.state == _LIVE:
                    self._close(flow, flow.last_pkt)
                elif flow.state == _PENDING:
                    self._drop(flow)
            self._table.pop(key, None)

    # -- per flow --------------------------------------------------------------------------------

    def _flow_for(self, entry, pkt, ts, src, dst, sport, dport, seq, ack, flags):
        """(flow, side) for a packet of a new tuple or a SYN, or None to ignore the packet."""
        key = (src, dst, sport, dport)
        if entry is None:
            if flags & RST:
                return None
            entry = (self._new(key, pkt, ts), 0)
        elif self._reused(entry[0], entry[1], seq, ack, flags):
            self._retire(entry[0], pkt)
            entry = (self._new(key, pkt, ts), 0)
        flow, side = entry
        if flags & SYN and flow.syn[side] is None:
            flow.syn[side] = seq
            if flags & ACK or flow.handshake[1] is None:   # a SYN shown after its answer: no time
                flow.handshake[1 if flags & ACK else 0] = ts
            if flow.opener is None:
                flow.opener = 1 - side if flags & ACK else side
        return entry

    def _ending(self, flow, side, pkt, ts, seq, flags, payload):
        """A live segment with RST or FIN."""
        if flags & RST:
            peer = flow.rs[1 - side]
            if peer.owes() and not peer.done:
                # this side acknowledged data the capture has not shown yet (a capture point
                # that delays the other direction): it is still to come; closed at the end
                flow.fins |= 1 << side
                return
            self._close(flow, pkt)
            return
        flow.rs[side].segment(pkt, ts, seq, flags, payload)
        flow.fins |= 1 << side
        if flow.fins == 3:
            self._close(flow, pkt)

    def _pending(self, flow, side, pkt, ts, seq, ack, flags, payload):
        if type(payload) is not bytes:
            payload = bytes(payload)  # do not pin the capture's buffers
        flow.pending.append((pkt, ts, side, seq, ack, flags, payload))
        flow.pending_bytes += len(payload)
        unsure = flow in self._unsure
        if unsure:
            self._unsure_bytes += len(payload)
        if payload or flags & SYN:
            # a SYN lets a port rule decide at once, so ids follow the order connections open
            src, dst, sport, dport = flow.key
            if side:
                src, dst, sport, dport = dst, src, dport, sport
            who = self._classify(src, sport, dst, dport, payload)
            if who is not None:
                # Kafka clients open the connections: the handshake, when seen, names the
                # client more surely than a guess from the first bytes
                opener = flow.opener
                self._open(flow, opener if opener is not None else side if who == 0 else 1 - side)
                return
        if flags & FIN:
            flow.fins |= 1 << side
        if flags & RST or flow.fins == 3:
            self._drop(flow)
            return
        pending = flow.pending
        while flow.pending_bytes > PENDING_BYTES or len(pending) > PENDING_PACKETS:
            n = len(pending.popleft()[6])
            flow.pending_bytes -= n
            if unsure:
                self._unsure_bytes -= n
        if unsure:
            self._shed_unsure(flow)

    def _open(self, flow, client_side):
        src, dst, sport, dport = flow.key
        if client_side:
            src, dst, sport, dport = dst, src, dport, sport
        self._ids += 1
        conn = Connection(self._ids, format_addr(src), sport, format_addr(dst), dport,
                          first_ts=flow.first_ts, first_packet=flow.first_pkt)
        conn.handshake = flow.handshake   # the SYN-ACK and ACK usually come after this
        sink = self._open_connection(conn)
        rs = []
        for side in (0, 1):
            d = REQUEST if side == client_side else RESPONSE
            rs.append(Reassembler(_Unborn(self, flow, side), sink, conn.connection_id, d,
                                  self.max_buffered, self.budget))
            rs[-1].retransmits = conn.retransmits
        rs[0].peer, rs[1].peer = rs[1], rs[0]
        follow = getattr(sink, "follow", None)
        if follow is not None:   # the session asks the request stream what it still owes
            follow(rs[0] if rs[0].direction == REQUEST else rs[1])
        flow.conn = conn
        flow.sink = sink
        flow.rs = rs
        flow.state = _LIVE
        flow.fins = 0
        self._live[conn.connection_id] = flow
        pending = flow.pending
        flow.pending = None
        if self._unsure.pop(flow, 1) is None:
            self._unsure_bytes -= flow.pending_bytes
        src, dst, sport, dport = flow.key
        ends = ((src, dst, sport, dport), (dst, src, dport, sport))
        if flow.handshake[0] is None:   # no SYN: the round trip from data and ACKs
            flow.timed = Timing()
        if flow not in self._quiet:   # else once it carries data (_heard)
            self._speaks(flow)
        if len(self._live) > self.peaks[1]:
            self.peaks[1] = len(self._live)
        self._shed_live()
        for pkt, ts, side, seq, ack, flags, payload in pending:
            if flow.state != _LIVE:
                break
            self.add(pkt, ts, *ends[side], seq, ack, flags, payload)

    def _speaks(self, flow, plain=False):
        """A live connection carries data: its fronts, its handlers, the direct path (plain: as
        for _birth)."""
        self._birth(flow, plain)
        if flow.handlers is None:
            flow.handlers = self._handlers(flow)
        self._direct(flow)
        if self._first_data is not None:
            self._first_data(flow.conn)

    def _birth(self, flow, plain=False):
        """The framers (behind TLS fronts, with the TLS layer, unless `plain`: known to be
        plaintext, see _plain_start) of a live connection whose directions are still _Unborn."""
        rs = flow.rs
        if rs[0].framer.__class__ is not _Unborn:
            return
        conn, sink = flow.conn, flow.sink
        pair = None if self.tls is None or plain else self.tls.pair(conn, sink, self.budget)
        for r in rs:
            d = r.direction
            framer = Framer(conn, d, sink, max_frame=self.max_frame, budget=self.budget)
            r.framer = framer if pair is None else pair.front(d, framer)
            if pair is not None:
                pair.attach(d, r)
        if pair is not None:
            pair.rewire = lambda: self._rewire(flow)
        # handlers made before (of ACKs) hold the unborn fronts: made again when next needed
        # (a flow without data is never on `direct`)
        flow.handlers = None

    def _rewire(self, flow):
        """A direction's front put its decision in its place (tls.sniff): the handlers, which
        hold the framers, are made again (if made yet)."""
        if flow.state != _LIVE or flow.handlers is None:
            return
        flow.handlers = self._handlers(flow)
        src, dst, sport, dport = flow.key
        if direct_key(src, dst, sport, dport) in self.direct:
            self._direct(flow)

    def _handlers(self, flow):
        rs = flow.rs
        plain = (handler(flow, rs[0], rs[1], self.pinned),
                 handler(flow, rs[1], rs[0], self.pinned))
        if flow.timed is None:
            return plain
        return timed_handlers(flow, plain, lambda: self._untime(flow))

    def _untime(self, flow):
        """Timing data to ACKs is over: the flow's plain handlers, on `sides` too."""
        flow.timed = None
        self._rewire(flow)

    def _direct(self, flow):
        src, dst, sport, dport = flow.key
        for side, key in enumerate((direct_key(src, dst, sport, dport),
                                    direct_key(dst, src, dport, sport))):
            self.direct[key] = flow.handlers[side]
            if flow.timed is None:   # a timed flow's ACKs alone go to its handlers (ack_rtt)
                self.sides[key] = (flow, side)

    def _stir(self, flow, payload, side=None, seq=0):
        """A packet of a flow that never carried data (of `side`, at `seq`, where known)."""
        if payload:
            self._heard(flow, side, seq, payload)
        else:
            self._quiet.move_to_end(flow)

    def _heard(self, flow, side, seq, payload):
        """The first payload of a flow that never carried any."""
        del self._quiet[flow]
        if flow.state == _LIVE:
            self._speaks(flow, side is not None and self._plain_start(flow, side, seq, payload))
        elif flow.state == _PENDING:
            self._unsure[flow] = None
            self._unsure_bytes += flow.pending_bytes

    def _plain_start(self, flow, side, seq, payload) -> bool:
        """Is a live connection's first data, this payload, the start of its stream, in order,
        and unlike TLS? Its TLS sniff (tls.sniff) would decide plaintext at the first byte it is
        fed, this payload: the framers are put in place at once, without the sniff, and the
        handlers it would have had rebuilt are made once (8% of the headers level on
        reconnecting clients, a connection every 4 kB)."""
        return (self.tls is not None and flow.rs[side].feeds_at_once(seq)
                and not looks_like_tls(payload))

    def _forget(self, flow):
        """Close or drop a flow without letting its tuple linger."""
        if flow.state == _LIVE:
            self._close(flow, flow.last_pkt, linger=False)
        elif flow.state == _PENDING:
            self._drop(flow, linger=False)
        else:
            self._quiet.pop(flow, None)
            self._unlink(flow)

    def _shed_unsure(self, keep):
        """Keep the flows awaiting classification within MAX_UNSURE and MAX_UNSURE_BYTES."""
        unsure = self._unsure
        e = self.evicted
        while len(unsure) > MAX_UNSURE or self._unsure_bytes > MAX_UNSURE_BYTES:
            flow = next(iter(unsure))
            if flow is keep and len(unsure) == 1:
                break
            if self._auto:
                e["unsure_bytes"] += flow.pending_bytes
            self._evict(flow, "unsure")

    def _shed_live(self):
        """Keep the connections within MAX_LIVE: the never-data ones, then the least recently
        active sixteenth (one sort for many evictions)."""
        live = self._live
        if len(live) <= MAX_LIVE:
            return
        quiet = self._quiet
        n = max(len(live) - MAX_LIVE, len(live) >> 4)
        for flow in sorted(live.values(), key=lambda f: (f not in quiet, f.conn.last_ts))[:n]:
            self._evict(flow, "quiet" if flow in quiet else "live")

    def _evict(self, flow, kind):
        """Forget a flow to stay within a cap; counted for the Issue unless it could never have
        become a connection (unclassified while the classifier only knows ports)."""
        if flow.state != _PENDING or self._auto:
            self.evicted[kind] += 1
        self._forget(flow)

    def _close(self, flow, pkt, linger=True):
        src, dst, sport, dport = flow.key
        for key in (direct_key(src, dst, sport, dport), direct_key(dst, src, dport, sport)):
            self.direct.pop(key, None)
            self.sides.pop(key, None)
        flow.handlers = None
        flow.timed = None
        rs = flow.rs
        for r in rs:
            r.finish(pkt)
            self.pinned.discard(r)  # callers of add that never unpin: only live flows stay
        rs[0].peer = rs[1].peer = None  # no cycle left: freed now, not by the cyclic GC
        flow.state = _CLOSED
        flow.rs = None
        del self._live[flow.conn.connection_id]
        if flow in self._quiet:
            del self._quiet[flow]
            if self._dataless is not None and self._dataless(flow.conn):
                self.evicted["rows"] += 1
        if linger:
            self._bury(flow)
        else:
            self._unlink(flow)
        sink = flow.sink
        flow.sink = None  # a closed flow lingers: keep it small
        sink.close()

    def _drop(self, flow, linger=True):
        flow.state = _CLOSED
        flow.pending = None
        self._quiet.pop(flow, None)
        if self._unsure.pop(flow, 1) is None:
            self._unsure_bytes -= flow.pending_bytes
        if linger:
            self._bury(flow)
        else:
            self._unlink(flow)

    def _retire(self, flow, pkt):
        if flow.state == _LIVE:
            self._close(flow, pkt)
        elif flow.state == _PENDING:
            self._drop(flow)

    def _bury(self, flow):
        flow.closed_ts = _last_ts(flow)
        closed = self._closed
        closed.append(flow)
        if len(closed) > self.peaks[2]:   # before the cap: a peak past it says it was hit
            self.peaks[2] = len(closed)
        if len(closed) > MAX_CLOSED:
            self.evicted["closed"] += 1
            self._unlink(closed.popleft())
        if len(closed) == 1:   # else the oldest's linger, and so the deadline, is as before or
            self._deadline()   # later: a deadline too early costs one `tick`, which corrects it

    def _unlink(self, flow):
        """Forget the tuple of a flow that is no longer live."""
        table = self._table
        src, dst, sport, dport = flow.key
        for key in (flow.key, (dst, src, dport, sport)):
            entry = table.get(key)
            if entry is not None and entry[0] is flow:
                del table[key]

    def _forget_closed(self, before):
        closed = self._closed
        while closed and closed[0].closed_ts < before:
            self._unlink(closed.popleft())
        self._deadline()

    def _deadline(self):
        """The next capture time at which `tick` has something to do."""
        closed = self._closed
        d = closed[0].closed_ts + LINGER_NS if closed else NEVER
        if self._quiet:
            d = min(d, _last_ts(next(iter(self._quiet))) + QUIET_NS)
        self.deadline = d

    def _new(self, key, pkt, ts):
        flow = _Flow(key, pkt, ts)
        src, dst, sport, dport = key
        self._table[key] = (flow, 0)
        self._table[(dst, src, dport, sport)] = (flow, 1)
        quiet = self._quiet
        quiet[flow] = None
        if len(quiet) > self.peaks[0]:   # before the cap: a peak past it says it was hit
            self.peaks[0] = len(quiet)
        if len(quiet) == 1:
            self._deadline()
        elif len(quiet) > MAX_QUIET:
            self._evict(next(iter(quiet)), "quiet")
        self._last_pkt = pkt
        return flow

    def held(self) -> list:
        """How many quiet, live and closed flows there are (the `peaks` now)."""
        return [len(self._quiet), len(self._live), len(self._closed)]

    def _reused(self, flow, side, seq, ack, flags):
        """Does this SYN on a known tuple start a new connection?"""
        isn = flow.syn[side]
        if isn is not None:
            return isn != seq  # a retransmitted SYN repeats its ISN
        if flow.state == _CLOSED:
            return True
        # shown after the other side's packets that followed it (a capture point that delays
        # one direction): the answer to the SYN seen, or a SYN its answer acknowledged
        if flags & ACK and flow.syn[1 - side] == (ack - 1) & MASK:
            return False
        if not flags & ACK and self._answered(flow, side, seq):
            return False
        if flow.fins:
            return True
        if flags & ACK:
            return False  # the answer to a SYN seen on this flow
        expected = self._expected(flow, side)
        if expected is None:
            return True
        d = (seq + 1 - expected) & MASK
        return FAR < d < WRAP - FAR

    @staticmethod
    def _answered(flow, side, seq):
        """Did the other side's SYN-ACK on this flow acknowledge a SYN with sequence number
        `seq`?"""
        want = (seq + 1) & MASK
        if flow.state == _LIVE:
            return flow.rs[side].anchor == want
        return any(s != side and f & SYN and f & ACK and a == want
                   for _pkt, _ts, s, _seq, a, f, _payload in flow.pending)

    @staticmethod
    def _expected(flow, side):
        """The sequence number this side would send next, if it has sent anything."""
        if flow.state == _LIVE:
            r = flow.rs[side]
            return None if r.base is None else (r.base + r.next) & MASK
        for _pkt, _ts, s, seq, _ack, _flags, payload in reversed(flow.pending):
            if s == side:
                return (seq + len(payload)) & MASK
        return None


def _last_ts(flow):
    return flow.conn.last_ts if flow.conn is not None else flow.last_ts


def _handshake_ack(flow, side, flags, ts):
    """Note when the opener acknowledged the SYN-ACK (a flow not yet carrying data)."""
    hs = flow.handshake
    if hs[2] is None and hs[1] is not None and flags & ACK and not flags & SYN \
            and side == flow.opener:
        hs[2] = ts


def _ack_before_data(flow, side, pkt, ts, ack, flags):
    """What py_handler does with a segment without data, for a flow without handlers yet (the
    handshake's last ACK): making them would be in vain, the first data makes them again
    (_birth)."""
    flow.last_pkt = pkt
    flow.conn.last_ts = ts
    peer = flow.rs[1 - side]
    if flags & ACK and peer.acks_unseen(ack):
        peer.acked(ack, flags, pkt)


def handler(flow, mine, peer, pinned):
    """The handler of the segments the side whose reassembler is `mine` sends (py_handler):
    compiled (tcp/_handler.c) where it is built and that side's bytes go to a Framer (not to
    a TLS front)."""
    if compiled_handler is not None and mine.framer.__class__ is Framer:
        return compiled_handler(flow, mine, peer, pinned)
    return py_handler(flow, mine, peer, pinned)


def py_handler(flow, mine, peer, pinned):
    """What `add` does with a segment of a live flow without SYN, FIN or RST, sent by the side
    whose reassembler is `mine`, as one closure (the per-packet path of a capture), with
    Reassembler.segment's in-order case inlined. tcp/_handler.c is the same compiled, with
    Framer.feed's common cases.

    Returns a run's start (tcp.batch) when the segment (data, ACK alone) went on in order and
    left a frame in progress that the next segments may continue without their handler calls:
    (bytes the frame still lacks, its buffer or None when its bytes are only counted,
    the flow, the stream); else None. What it does with an ACK alone (no data) is done without
    it by the file reader where that is only noting the packet (tcp.batch.ack_alone, and
    capture/_walk.c): a change here must be made there too."""
    conn = flow.conn
    acked = peer.acked
    waiting = peer.framer
    feed = mine.framer.feed
    segment = mine.segment

    def handle(pkt, ts, seq, ack, flags, payload):
        flow.last_pkt = pkt
        conn.last_ts = ts
        if flags & ACK:
            base = peer.base
            # peer.acks_unseen(ack), inlined: acked() acts on an ack ahead of the data seen
            # (loss) or before the first data
            if base is None or 0 < (ack - base - peer.next) & MASK < ACK_HORIZON:
                acked(ack, flags, pkt)
        # A segment without data, SYN or FIN never changes a stream (whenever `next` reaches
        # `fin` the stream ends at once): only data goes on.
        if payload:
            if payload.__class__ is not bytes:
                pinned.add(mine)
            if waiting.waiting:
                # the peer answers: its last frame is complete
                waiting.settle(mine.answers(seq, payload))
            base = mine.base
            if base is not None and (seq - base - mine.next) & MASK == 0 and not mine.held \
                    and not mine.done and mine.fin is None:
                span = feed(payload, pkt, ts)
                mine.last_data = payload
                mine.next += len(payload)
                if span is not None and flags & PLAIN == ACK and not waiting.waiting:
                    return span[0], span[1], flow, mine
            else:
                segment(pkt, ts, seq, 0, payload)
        return None
    return handle

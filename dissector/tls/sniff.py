"""Is a direction TLS or plaintext Kafka? Decided from its first bytes, before the framer sees any.

Each direction of a new connection starts behind a `Sniff` (in the framer's place behind the TCP
reassembler). At the stream's start one byte decides: a TLS record starts with 0x14-0x18 then 3,
which as a Kafka size prefix would be over 335 MB. A direction joined mid-stream is kept
(bounded, counted in the budget) until a chain of record headers shows TLS, or enough bytes
without one, or a segment that starts with a plausible Kafka request, show plaintext (a live
capture joins every connection mid-stream: a quiet one must not wait for 18 KB); its peer's
decision decides it too. Then the Sniff puts the Kafka
framer, or a `TlsStream` in front of it, in its place, hands it what it kept, and has the flow
table rebuild the connection's per-packet handlers (`rewire`): afterwards the plaintext path is
exactly what it was without TLS support.
"""
from __future__ import annotations

from ..detect import request_start
from ..model import REQUEST
from .connection import TlsConnection
from .records import HEADER, MAX_RECORD, find_chain, looks_like_tls
from .stream import TlsStream

ENOUGH = MAX_RECORD + HEADER    # bytes without a record header chain that rule TLS out
MAX_KEPT = 4 * ENOUGH           # bytes kept while a candidate chain is incomplete


class Pair:
    """The two directions of one connection while they decide. A direction joined mid-stream is
    kept in one log with its peer's traffic, in arrival order, until the connection is decided:
    both directions then go the same way and the log is replayed, so that requests still reach
    the session ahead of their responses."""
    __slots__ = ("layer", "conn", "sink", "budget", "tc", "sniffs", "reassemblers", "rewire",
                 "plain", "log", "kept", "_since", "kafka")

    def __init__(self, layer, conn, sink, budget):
        self.layer = layer
        self.conn = conn
        self.sink = sink
        self.budget = budget
        self.tc = None
        self.sniffs = [None, None]
        self.reassemblers = [None, None]
        self.rewire = None
        self.plain = [False, False]
        self.log = []          # (direction, kind, ...) kept while undecided
        self.kept = 0          # bytes in the log (counted in the budget)
        self._since = [[], []]  # per direction, the bytes logged since its last hole
        self.kafka = False     # a logged client segment starts like a Kafka request

    def front(self, direction, framer):
        s = self.sniffs[direction] = Sniff(self, direction, framer)
        return s

    def attach(self, direction, reassembler):
        self.reassemblers[direction] = reassembler

    def tls(self):
        if self.tc is None:
            self.tc = TlsConnection(self.layer, self.conn, self.sink)
            self.layer.connections += 1
        return self.tc

    def verdict(self, final):
        """True (TLS), False (plaintext) or None (not yet), from what both directions sent."""
        if self.tc is not None:
            return True
        if self.plain[0] or self.plain[1]:
            return False
        if not (self._since[0] or self._since[1]):   # nothing to look at (a flow that never
            return False if final or self.kafka else None   # carried data): as the loop says
        wait = False
        kafka = self.kafka
        for d in (0, 1):
            data = b"".join(self._since[d])
            p, sure = find_chain(data)
            if sure:
                return True
            if kafka:
                continue
            if p >= 0 and len(data) - p < MAX_KEPT:
                wait = True
            elif len(data) >= ENOUGH and p < 0:
                return False
        if kafka:
            return False
        if final:
            return wait
        return None if wait or not any(self._since) or max(
            sum(map(len, x)) for x in self._since) < ENOUGH else False

    def decide(self, tls):
        """Put TLS streams or the framers in both undecided directions' places, hand them the
        log in order (a direction's data settles its peer, as the flow table does) and have the
        flow table rebuild its handlers."""
        targets = [None, None]
        for d in (0, 1):
            s = self.sniffs[d]
            if s is None:
                continue
            if s.target is None:
                s.target = self._target(d, tls)
            targets[d] = s.target
        log, self.log = self.log, []
        self._since = [[], []]
        self._keep(-self.kept)
        if self.rewire is not None:
            self.rewire()
        self._release()
        for e in log:
            d, kind = e[0], e[1]
            t = targets[d]
            if kind == 0:
                other = targets[1 - d]
                if other is not None and other.waiting:
                    other.settle(t.answers(e[2]))
                t.feed(e[2], e[3], e[4])
            elif kind == 1:
                t.midstream()
            else:
                t.gap(e[2], e[3])

    def _release(self):
        """Both directions are decided: let go of them (no cycle outlives the connection)."""
        if all(s is None or s.target is not None for s in self.sniffs):
            for s in self.sniffs:
                if s is not None:
                    s.pair = None
            self.sniffs = [None, None]
            self.reassemblers = [None, None]
            self.rewire = None

    def _target(self, d, tls):
        if tls:
            tc = self.tls()
            target = TlsStream(tc, d, self.sniffs[d].framer, self.budget)
            tc.attach(target)
        else:
            self.plain[d] = True
            target = self.sniffs[d].framer
        r = self.reassemblers[d]
        if r is not None:
            r.framer = target
        return target

    def _keep(self, n):
        if not n:
            return
        self.kept += n
        b = self.budget
        b.add(n)
        s = self.sniffs[0]   # the holder of the pair's bytes for the budget (see Sniff.buffered)
        if s is not None:
            if self.kept >= b.big_size:
                b.big[s] = None
            elif b.big:
                b.big.pop(s, None)


class Sniff:
    """A direction's place holder until its connection is decided (see Pair)."""
    __slots__ = ("pair", "direction", "framer", "target", "_mid", "waiting")

    def __init__(self, pair, direction, framer):
        self.pair = pair
        self.direction = direction
        self.framer = framer
        self.target = None
        self._mid = False
        self.waiting = False

    # -- the framer's interface ------------------------------------------------------------------

    def feed(self, data, pkt, ts):
        pair = self.pair
        if self.target is not None:   # decided by its peer while this call was on its way
            self.target.feed(data, pkt, ts)
            return None
        if not data:
            return None
        if not self._mid and not pair.log:
            # the stream's first byte decides the connection, both directions at once
            pair.decide(looks_like_tls(data) or pair.tc is not None)
            self.target.feed(data, pkt, ts)
            return None
        piece = bytes(data)
        pair.log.append((self.direction, 0, piece, pkt, ts))
        pair._since[self.direction].append(piece)
        pair._keep(len(piece))
        if self.direction == REQUEST and not pair.kafka and request_start(piece) is not None:
            pair.kafka = True
        if not self._mid:   # this direction's start is in view: it decides the connection
            pair.decide(looks_like_tls(piece) or pair.tc is not None)
            return None
        verdict = pair.verdict(final=False)
        if verdict is not None:
            pair.decide(verdict)
        else:
            b = pair.budget
            if b.used > b.limit:
                b.over()   # the shared budget is spent: the largest holders give up
        return None

    def midstream(self):
        self._mid = True
        self.pair.log.append((self.direction, 1))

    def gap(self, nbytes, pkt):
        if self.target is not None:
            self.target.gap(nbytes, pkt)
            return
        self._mid = True
        self.pair.log.append((self.direction, 2, nbytes, pkt))
        self.pair._since[self.direction] = []

    def settle(self, answers=None):
        pass

    def finish(self, pkt):
        if self.target is None:
            self.give_up()
        self.target.finish(pkt)
        self.framer = None

    def took(self, size, pkt, ts):
        raise AssertionError("Sniff.feed starts no run")

    def buffered(self):
        """The log the pair keeps, counted once: by its client direction's front."""
        pair = self.pair
        return pair.kept if pair is not None and self.direction == 0 else 0

    def give_up(self):
        """Decide with what is there (the end of the stream, or the shared budget is spent)."""
        if self.target is None:
            self.pair.decide(bool(self.pair.verdict(final=True)))

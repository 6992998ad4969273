"""One worker's share of a capture: a Dissector that reads every packet but dissects only the
connections it owns, and notes when (at which packet) each thing it makes happened.

Ownership is decided at a flow's first packet by the plan's `owns` (dissector.parallel.plan)
and remembered, for the first MAX_FLOWS flows; past them, a flow's worker is asked again where
its packets need it, of a rule that gives the same answer each time. The packets of a flow
another worker owns are dropped before the flow table sees them: its entries in `flows.direct`
are False, which the packet walker skips (capture.walk), and the segments that reach
`flows.add` are dropped here. The time of every packet still reaches the flow table
(`tick`), so closed tuples and silent flows are forgotten at the same packets as in one process.

What it notes, by the packet being handled (the walker's `n`; AT_END during the final flush):
the packet each exchange completed in (`emitted`), each connection opened in (`opened`), each
capture-level issue was added in (`issued`), and the topic ids looked up in vain (`misses`).
`emitted` is Dissector._emit's note and the budget's `peak` Budget's own, so that both stay on
their compiled paths (the pairing's numbering, the flow handler's reserve and release).
"""
from __future__ import annotations

from types import SimpleNamespace

from ..capture.layers import tcp_segment
from ..pipeline import Dissector
from ..tcp.flows import direct_key

AT_END = 1 << 62   # the "packet" of what the final flush makes
# flows whose owner a worker remembers (two keys each in `_mine`, and another worker's in the
# flow table's `direct` too: ~750 bytes a flow, which one process's caps do not bound). Every
# worker decides every flow, so all reach this at the same packet; past it a flow's owner
# comes from what was dealt by then and a hash of the flow or its client (plan.owns, past),
# less even than dealing by the flows each worker has. Clients that reconnect reach it (6,721
# replicas of the librdkafka capture: 304 MB, ~74,000 connections); a flood up to it peaks at
# 187 MB in a worker.
MAX_FLOWS = 1 << 17
# past MAX_FLOWS, the tuples of other workers' flows marked in `direct` (for the walker to skip
# their packets) before they are all unmarked: asking their owner again costs a Python call
MAX_SKIPPED = 1 << 16
_BEFORE, _ENDING = SimpleNamespace(n=0), SimpleNamespace(n=AT_END)   # walkers of no file


class Names(dict):
    """The decoder's topic id -> name map, noting the ids looked up in vain, with the packet
    (the compiled walker calls `missed`; the Python walker asks `in` and `get`)."""
    __slots__ = ("part", "misses")

    def __init__(self, part):
        super().__init__()
        self.part = part
        self.misses = []

    def missed(self, key):
        self.misses.append((key, self.part.now()))

    def __contains__(self, key):
        if dict.__contains__(self, key):
            return True
        self.missed(key)
        return False

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        self.missed(key)
        return default


class Part(Dissector):
    """The Dissector of worker `me`: owns(src, dst, sport, dport) says whether a new flow's
    packets are its own."""

    def __init__(self, owns, me, ports, **kwargs):
        super().__init__(ports, **kwargs)
        self.me = me
        self.walker = _BEFORE   # then each file's (capture.fast), then _ENDING
        self.ending = False
        self.emitted = []    # per exchange in `output`: the packet it completed in
        self.opened = []     # (connection, packet) per connection opened
        self.issued = []     # per issue added to `issues`: the packet
        self._owns = owns
        self._mine = {}      # (src, dst, sport, dport), both ways -> whether owned
        self._skipped = []   # past MAX_FLOWS: the `direct` keys of others' flows marked
        flows = self._flows
        self._table_add = flows.add
        flows.add = self._add            # the walker and the flow table's own replays call this
        self.budget = flows.budget   # its peak is reported per chunk (parallel.worker)
        if self._decoder is not None:
            self._decoder.topic_names = self.names = Names(self)
        else:
            self.names = {}

    def now(self) -> int:
        return self.walker.n

    # -- what is noted ---------------------------------------------------------------------------

    def _open(self, connection):
        self.opened.append((connection, self.now()))
        return super()._open(connection)

    def add_issue(self, issue) -> None:
        kept = len(self.issues)
        super().add_issue(issue)
        if len(self.issues) != kept:
            self.issued.append(self.now())

    # -- what is dropped -------------------------------------------------------------------------

    def _add(self, pkt, ts, src, dst, sport, dport, seq, ack, flags, payload):
        key = (src, dst, sport, dport)
        mine = self._mine.get(key)
        if mine is None:
            past = len(self._mine) >= 2 * MAX_FLOWS
            mine = self._owns(src, dst, sport, dport, past)
            if not past:
                self._mine[key] = self._mine[(dst, src, dport, sport)] = mine
            if not mine:
                self._skip(direct_key(src, dst, sport, dport), direct_key(dst, src, dport, sport),
                           past)
        if mine:
            self._table_add(pkt, ts, src, dst, sport, dport, seq, ack, flags, payload)
        elif ts > self._flows.deadline:
            self._flows.tick(ts)

    def _skip(self, there, back, past):
        """Have the walker skip the packets of another worker's flow (its `direct` keys both
        ways); past MAX_FLOWS, at most MAX_SKIPPED such flows at a time."""
        direct = self._flows.direct
        if past:
            if len(self._skipped) >= 2 * MAX_SKIPPED:
                for k in self._skipped:
                    if direct.get(k) is False:
                        del direct[k]
                self._skipped.clear()
            self._skipped += (there, back)
        direct[there] = direct[back] = False

    def _packet(self, packet_no, ts_ns, linktype, data):
        seg = tcp_segment(linktype, data)
        if seg is None:
            return
        if seg.__class__ is str:   # not tied to a flow: one worker reports it
            if self.me == 0:
                self.unusable(seg, packet_no)
            return
        self._flows.add(packet_no, ts_ns, *seg)

    def finish(self) -> None:
        self.ending = True
        self.walker = _ENDING
        if self.me != 0:   # what the TLS layer reports once for all connections: one worker
            self.tls.keylog.malformed = 0
        super().finish()

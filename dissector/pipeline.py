"""The driver: packets -> TCP segments -> flows -> frames -> sessions -> exchanges.

`Dissector` is the push-style engine (feed packets, collect exchanges) that the file path, the live
capture and the Spark job all drive; `dissect()` is the lazy pull-style entry point over files.
Only in-flight state is kept: exchanges are handed out as soon as they complete.
"""
from __future__ import annotations

from collections import deque

from .capture.errors import CaptureError
from .capture.fast import scan
from .capture.layers import tcp_segment
from .detect import BrokerSide
from .model import ERROR, WARNING, Issue
from .session import LEVELS, Session
from .tcp.batch import feed_columns
from .tcp.flows import FlowTable
from .tls.layer import TlsLayer

DEFAULT_PORTS = (9092,)
MAX_FRAME = 100 << 20
MAX_BUFFERED = 4 << 20
MAX_KEPT_ISSUES = 100_000   # capture-level issues kept in memory; the rest are only counted
# Rows of `connections` past which a new connection is listed only once it carries data: one row
# per attempt (~320 bytes) would let a SYN flood grow the table without bound. Those that close
# without data are counted in the `tcp.flow_limit` Issue.
MAX_ROWS = 1 << 16


class Dissector:
    """Stateful engine: feed packets in capture order, take exchanges from `output`."""

    def __init__(self, ports=DEFAULT_PORTS, *, auto=False, level="headers",
                 max_frame=MAX_FRAME, max_buffered=MAX_BUFFERED, keep_bodies=True, keylog=None,
                 records_only=False):
        """keylog: TLS key material (dissector.tls: a KeyLog, or key log file paths); TLS is
        recognised without it, and pcapng Decryption Secrets Blocks add to it. records_only:
        the bodies that carry no records of Produce and the fetches are not read
        (decoding.BodyDecoder)."""
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}")
        self.ports = frozenset(ports)
        self.auto = auto
        self.level = level
        self.output = deque()          # completed exchanges, in completion order
        self.issues = []               # issues not attached to an exchange (TCP, framing, capture)
        self.issue_count = 0
        self.connections = []          # in the order connections open (see MAX_ROWS)
        self._unlisted = set()         # open connections past MAX_ROWS that carried no data yet
        self.packets = 0
        self.bytes = 0
        self.walker = None             # the packet walker of the file being read (capture.fast)
        self.emitted = None            # a list: per exchange queued, the walker's packet then
        self._exchanges = 0
        self._decoder = None
        if level != "headers":
            from .decoding import BodyDecoder
            self._decoder = BodyDecoder(records=(level == "records"), keep_bodies=keep_bodies,
                                        records_only=records_only)
        self.tls = TlsLayer(as_keylog(keylog), self.add_issue)
        self._flows = FlowTable(BrokerSide(self.ports, auto, self.tls.keylog), self._open,
                                max_buffered=max_buffered, max_frame=max_frame,
                                issue=self.add_issue, first_data=self._first_data,
                                dataless=self._dataless, tls=self.tls)

    # -- wiring ---------------------------------------------------------------------------------

    def _open(self, connection):
        if len(self.connections) < MAX_ROWS:
            self.connections.append(connection)
        else:
            self._unlisted.add(connection)
        return Session(connection, self._emit, self.add_issue, level=self.level,
                       decoder=self._decoder)

    def _first_data(self, connection):
        if self._unlisted and connection in self._unlisted:
            self._unlisted.remove(connection)
            self.connections.append(connection)

    def _dataless(self, connection):
        """A connection closed without data: was its row left out?"""
        if connection in self._unlisted:
            self._unlisted.remove(connection)
            return True
        return False

    def _emit(self, exchange):
        """A session's exchange, numbered and queued, and the packet it completed in noted if
        `emitted` is a list (_pairing.c does the same in place)."""
        self._exchanges += 1
        exchange.index = self._exchanges
        self.output.append(exchange)
        if self.emitted is not None:
            self.emitted.append(self.walker.n)

    @property
    def exchanges(self) -> int:
        """How many exchanges have completed."""
        return self._exchanges

    def add_issue(self, issue: Issue) -> None:
        self.issue_count += 1
        if len(self.issues) < MAX_KEPT_ISSUES:
            self.issues.append(issue)

    # -- feeding --------------------------------------------------------------------------------

    def feed(self, packet_no, ts_ns, linktype, data) -> None:
        self.packets += 1
        self.bytes += len(data)
        seg = tcp_segment(linktype, data)
        if seg is None:
            return
        if seg.__class__ is str:
            self.unusable(seg, packet_no)
            return
        self._flows.add(packet_no, ts_ns, *seg)

    def feed_file(self, path, packet_no=0, progress=None):
        """Feed every packet of a capture file (numbered on from packet_no), yielding completed
        exchanges as they come (after each chunk of the file read): the fused hot loop of
        capture.fast hands segments of live flows straight to their handlers. `progress(path,
        bytes)` is called after each chunk."""
        for exchanges in self.feed_file_batches(path, packet_no, progress):
            yield from exchanges

    def feed_file_batches(self, path, packet_no=0, progress=None):
        """feed_file's exchanges as a list after each chunk (a consumer's loop per chunk, not per
        exchange)."""
        out = self.output
        try:
            for _ in scan(path, packet_no, self._flows, self._packet, self):
                if progress is not None:
                    progress(path, self.bytes)
                if out:
                    yield _drained(out)
        except CaptureError:
            if out:   # what completed before a damaged tail, ahead of the error
                yield _drained(out)
            raise

    def _packet(self, packet_no, ts_ns, linktype, data):
        """A packet off the fused path: `feed` without the counting (scan counts)."""
        seg = tcp_segment(linktype, data)
        if seg is None:
            return
        if seg.__class__ is str:
            self.unusable(seg, packet_no)
            return
        self._flows.add(packet_no, ts_ns, *seg)

    def add_secrets(self, secrets_type, data) -> None:
        """Decryption secrets found in the capture (a pcapng Decryption Secrets Block)."""
        self.tls.secrets(secrets_type, data)

    def unusable(self, code, packet_no) -> None:
        """A packet that is IP/TCP but cannot be used (a fragment, a truncated header)."""
        self.add_issue(Issue(code, WARNING, f"packet {packet_no} not usable ({code})",
                             frame=packet_no))

    def feed_segment(self, packet_no, ts_ns, src, dst, sport, dport, seq, ack, flags,
                     payload) -> None:
        """A TCP segment already taken out of its packet (the Spark job ships segments)."""
        self._flows.add(packet_no, ts_ns, src, dst, sport, dport, seq, ack, flags, payload)

    def feed_segments(self, packet_nos, ts_ns, srcs, dsts, sports, dports, seqs, acks, flags,
                      payloads, emitted=None) -> None:
        """Many TCP segments already taken out of their packets, as columns (equal-length
        sequences: packet numbers, capture times in ns, source and destination addresses (4 or 16
        bytes), ports, sequence and acknowledgement numbers, flags, payloads as bytes or views
        that stay valid until `finish`, as with `feed_segment`), of one or more connections in
        packet order. The result (exchanges in `output` and their order, issues, connections) is
        the same as calling `feed_segment` for each segment in turn, for less: a segment of a
        live flow without SYN, FIN or RST goes straight to its handler, as the file reader hands
        it, and the middle segments of a frame spanning segments that follow one another are
        only written into it (tcp.batch: fastest when the segments come a connection at a time).
        `emitted`, if a list, gets for each exchange added to `output` the packet number during
        which `feed_segment` would have handed it out."""
        feed_columns(self._flows, self.output, (packet_nos, ts_ns, srcs, dsts, sports, dports,
                                                seqs, acks, flags, payloads), emitted)

    def expire(self, now_ns, idle_ns) -> None:
        """Close connections idle for longer than idle_ns (long live captures)."""
        self._flows.expire(now_ns, idle_ns)

    def expire_requests(self, now_ns, timeout_ns) -> None:
        """Requests in flight for longer than timeout_ns become `unanswered` (live capture)."""
        before = now_ns - timeout_ns
        for session in self._flows.sinks():
            session.expire_requests(before)

    def finish(self) -> None:
        """End of input: flush every connection (open holes become gaps, in-flight requests
        become unanswered)."""
        self._flows.flush()
        self.tls.finish()


try:
    from ._pairing import number_in_place
    number_in_place(Dissector._emit)
except ImportError:   # no compiler where it was installed
    pass


class Dissection:
    """Lazy result of `dissect()`: iterate for exchanges; afterwards `issues`, `errors`,
    `connections`, `exchanges` (how many), `packets` and `bytes` describe the run."""

    def __init__(self, paths, dissector: Dissector, progress=None):
        self.paths = [str(p) for p in paths]
        self.dissector = dissector
        self.errors = []            # one-line messages about unreadable or damaged captures
        self._progress = progress

    @property
    def issues(self):
        return self.dissector.issues

    @property
    def connections(self):
        return self.dissector.connections

    @property
    def exchanges(self):
        return self.dissector.exchanges

    @property
    def packets(self):
        return self.dissector.packets

    @property
    def bytes(self):
        return self.dissector.bytes

    def __iter__(self):
        for exchanges in self.batches():
            yield from exchanges

    def batches(self):
        """The exchanges as lists, as they complete (after each chunk of a file, at the end)."""
        d = self.dissector
        for path in self.paths:
            try:
                yield from d.feed_file_batches(path, d.packets, self._progress)
            except CaptureError as exc:
                self.errors.append(str(exc))
                d.add_issue(Issue("capture.error", ERROR, str(exc), frame=d.packets))
        d.finish()
        if d.output:
            yield _drained(d.output)


def _drained(out) -> list:
    """The exchanges in `out`, which is left empty."""
    exchanges = list(out)
    out.clear()
    return exchanges


def dissect(paths, ports=DEFAULT_PORTS, *, auto=False, level="headers", max_frame=MAX_FRAME,
            max_buffered=MAX_BUFFERED, progress=None, keep_bodies=True,
            keylog=None, records_only=False) -> Dissection:
    """Dissect one or more captures (read in the given order, as one capture: rotated files of one
    capture point continue each other's connections). Packet numbers run on across files.
    keep_bodies=False: the messages keep their summaries (the table's columns; at the records
    level the record sets too, Summary.record_sets) but not their decoded bodies (body None),
    where the bytes allow it; faster, for table output. A set of api keys: only their messages
    keep their bodies (decoding.AllBut: all but theirs).
    keylog: TLS key material, as for Dissector. records_only: as for Dissector, for output made
    of the records alone."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    d = Dissector(ports, auto=auto, level=level, max_frame=max_frame, max_buffered=max_buffered,
                  keep_bodies=keep_bodies, keylog=keylog, records_only=records_only)
    return Dissection(paths, d, progress)


def as_keylog(keylog):
    """A KeyLog from what `keylog=` accepts: None, a KeyLog, a path, or paths (OSError when a
    file cannot be read)."""
    from .tls.keylog import KeyLog, load
    if keylog is None or isinstance(keylog, KeyLog):
        return keylog
    if isinstance(keylog, (str, bytes)) or hasattr(keylog, "__fspath__"):
        keylog = [keylog]
    return load(keylog)

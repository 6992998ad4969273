"""Per-connection pairing of requests and responses by correlation id.

A broker answers the requests of one connection in the order it received them, so responses are
matched against the queue of requests in flight, first match wins (correlation ids may repeat).
Requests passed over by a later response were never answered: Produce with acks=0 expects no
answer (`no_response_expected`), anything else is `unanswered`. A response whose id is not in
flight belongs to a request outside the capture (`orphan_response`), unless the broker has
acknowledged request bytes the capture has not shown yet (`follow`: a capture point that delays
the requests, such as a mirror port, shows the answer first): it waits for its request then
(`_early`, in order, bounded), and is an orphan once the request stream owes nothing more.

The session also drives response decoding (a response carries no api key) and follows the raw
SASL phase: after a successful SaslHandshake v0, tokens flow size-prefixed with no Kafka header
until the client sends a real request again.
"""
from __future__ import annotations

import struct
import sys
import weakref
from collections import deque
from itertools import islice

from .model import (ERROR, MALFORMED, NO_RESPONSE_EXPECTED, OK, ORPHAN_RESPONSE, REQUEST,
                    UNANSWERED, WARNING, Exchange, Issue)
from .protocol.generated.apis import APIS
from .protocol.headers import (parse_request_header, parse_response_header, plausible_request,
                               read_tagged_fields, request_head)

LEVELS = ("headers", "bodies", "records")

PRODUCE = 0
SASL_HANDSHAKE = 17
API_VERSIONS = 18
RESYNC_WINDOW = 16   # how many of the oldest requests in flight a resynced response may answer
# A connection whose responses are never seen (one direction captured, acks=0 producers) must not
# hold every request to its end. Clients keep far fewer in flight (Java's default is 5).
MAX_IN_FLIGHT = 1000
MAX_IN_FLIGHT_BYTES = 64 << 20
# responses held for requests the capture still owes, also within MAX_IN_FLIGHT_BYTES (a forged
# ack must not hold them all)
MAX_EARLY = 64

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _Pending:
    """A request in flight (header fields decoded, body decoded when the level asks). _pairing.c
    makes them without calling __init__, setting the members as it does."""
    __slots__ = ("frame", "api_key", "api_version", "correlation_id", "client_id", "msg",
                 "acks", "issues")

    def __init__(self, frame, api_key, api_version, correlation_id, client_id):
        self.frame = frame
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.msg = None
        self.acks = None
        self.issues = []


def produce_acks(buf, body_offset: int, api_version: int) -> int | None:
    """Acks of a Produce request, None if the message is too short to hold them."""
    try:
        return _INT16.unpack_from(buf, _acks_at(buf, body_offset, api_version))[0]
    except (struct.error, ValueError, IndexError):
        return None


def _acks_at(buf, body_offset: int, api_version: int) -> int:
    """Where a Produce request's acks are: after the transactional id from v3 (compact from
    v9). Raises ValueError, IndexError or struct.error past the end of buf."""
    pos = body_offset
    if api_version >= 9:
        n, pos = _uvarint(buf, pos)
        pos += max(n - 1, 0)
    elif api_version >= 3:
        (n,) = _INT16.unpack_from(buf, pos)
        pos += 2 + max(n, 0)
    return pos


def _uvarint(buf, pos):
    value = shift = 0
    for _ in range(5):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise ValueError("bad varint")


_KEY_VERSION = struct.Struct(">hh")
_RANGE = struct.Struct(">hhh")


# ApiVersions answers read so far, by version and body: every connection asks first, and a
# cluster's brokers answer alike (a capture of a reconnecting client spent a seventh of its
# time reading the same answer). Read-only: the sessions share them.
_RANGES_READ = {}
_RANGES_KEPT = 64
_RANGES_LARGEST = 4096   # bytes of an answer kept as a key (a real one is under 2 kB)


def _api_ranges(data, api_version) -> dict | None:
    """{api key: (min, max)} of a successful ApiVersions response (its header is always v0:
    the correlation id alone), or None when it is an error or cannot be read."""
    if len(data) > _RANGES_LARGEST:
        return _read_ranges(data, api_version)
    key = (api_version, bytes(data[4:]))
    try:
        return _RANGES_READ[key]
    except KeyError:
        pass
    if len(_RANGES_READ) >= _RANGES_KEPT:
        _RANGES_READ.clear()
    ranges = _RANGES_READ[key] = _read_ranges(data, api_version)
    return ranges


def _read_ranges(data, api_version) -> dict | None:
    try:
        if _INT16.unpack_from(data, 4)[0] != 0:
            return None
        pos = 6
        if api_version >= 3:   # a compact array: count + 1, and a tag section per entry
            n, pos = _uvarint(data, pos)
            n -= 1
        else:
            (n,) = _INT32.unpack_from(data, pos)
            pos += 4
        if not 0 < n <= 1024:
            return None
        ranges = {}
        for _ in range(n):
            key, lo, hi = _RANGE.unpack_from(data, pos)
            pos += 6
            if api_version >= 3:
                tags, pos = _uvarint(data, pos)
                if tags:
                    return None   # tagged fields in an entry (none defined yet): no limit
            ranges[key] = (lo, hi)
        return ranges
    except (struct.error, ValueError, IndexError):
        return None


class Session:
    """Implements the ConnectionSink of dissector.tcp.flows for one connection."""
    # slots: _pairing.c reads and writes them in place (_attrs.h)
    __slots__ = ("connection", "_emit", "_emit_issue", "_decoder", "_headers_only", "_parsed",
                 "_sasl", "_inflight", "_inflight_bytes", "_raw_sasl", "_raw_tokens", "_allowed",
                 "_early", "_requests", "__weakref__")

    def __init__(self, connection, emit, emit_issue, *, level="headers", decoder=None):
        self.connection = connection
        self._emit = emit
        self._emit_issue = emit_issue
        self._decoder = decoder if level != "headers" else None
        self._headers_only = level == "headers"
        self._parsed = None   # the header _head_size parsed, for the request `frame` gets next
        self._sasl = False    # a SaslHandshake v0 was asked for: raw tokens may follow
        self._inflight = deque()
        self._inflight_bytes = 0
        self._raw_sasl = False
        self._raw_tokens = deque()
        self._allowed = None   # {api key: (min, max)} from the connection's ApiVersions answer
        self._early = deque()   # responses that came before their requests, in order
        self._requests = None   # a weak reference to the request stream's Reassembler

    # -- ConnectionSink -------------------------------------------------------------------------

    def issue(self, issue: Issue) -> None:
        self._emit_issue(issue)

    def follow(self, requests) -> None:
        """The request stream's Reassembler, for `owed` (weakly: it holds this session)."""
        self._requests = weakref.ref(requests)

    def owed(self) -> bool:
        """Has the broker acknowledged request bytes the capture has not shown yet?"""
        stream = self._requests() if self._requests is not None else None
        return stream is not None and stream.owes()

    def plausible(self, direction: int, data, pos: int) -> bool:
        if len(data) < pos + 8:
            return False
        (size,) = _INT32.unpack_from(data, pos)
        if direction == REQUEST:
            if not plausible_request(data, pos + 4, size):
                return False
            if self._allowed is None:
                return True
            # a client asks only for what the broker said it serves
            api_key, api_version = _KEY_VERSION.unpack_from(data, pos + 4)
            allowed = self._allowed.get(api_key)
            return allowed is not None and allowed[0] <= api_version <= allowed[1]
        if size < 4:
            return False
        (corr,) = _INT32.unpack_from(data, pos + 4)
        # Responses come in request order, so after a gap the next one answers one of the oldest
        # requests in flight; small correlation ids are common inside payloads, so look no further.
        for i, p in enumerate(self._inflight):
            if i == RESYNC_WINDOW:
                return False
            if p.correlation_id == corr:
                return True
        return False

    @property
    def head_size(self):
        """For the framers: `_head_size` at the headers level (which reads only a message's first
        bytes: whole messages need not be kept), else None. (Not kept in an attribute: a bound
        method of itself would make every session a reference cycle.)"""
        return self._head_size if self._headers_only else None

    def py_head_size(self, direction: int, data) -> int | None:
        """How many of a message's first bytes the headers level reads (the request header, and
        a Produce request's acks; the response header and a SaslHandshake v0's error code),
        judged from `data`, the first bytes of the message, when it starts: so from those
        bytes alone, not from what is in flight then (which may change before it completes).
        None when they do not tell, once raw SASL tokens may follow (they have no header), and for
        a response that does not answer the oldest request in flight or answers one that expects
        no answer (acks=0), or while the request stream owes bytes the broker acknowledged
        (`owed`): in a damaged capture, an answer shown before its request, which may be a
        SaslHandshake that makes it a raw token. The frame of a request measured here is the
        next to reach `frame`. `_pairing.c`'s _head_size is the same compiled (it hands a
        response's tagged fields here)."""
        if self._sasl:
            return None
        n = len(data)
        try:
            if direction == REQUEST:
                head = request_head(data) or parse_request_header(data)
                end = head[5]
                if head[0] == PRODUCE:
                    end = _acks_at(data, end, head[1]) + 2
                if end > n:
                    return None
                self._parsed = head   # _request takes it rather than parse it again
                return end
            oldest = self._inflight[0] if self._inflight else None
            if (n < 6 or oldest is None or oldest.acks == 0
                    or oldest.correlation_id != _INT32.unpack_from(data, 0)[0] or self.owed()):
                return None
            # a header of either version: the correlation id, and the bytes after it read as a
            # tagged-field section (the flexible one); a first byte of 0 is an empty section
            end = 5 if data[4] == 0 else read_tagged_fields(data, 4, n)[1]
            return max(end, 6)
        except (ValueError, IndexError, struct.error):
            return None

    _head_size = py_head_size

    def py_frame(self, frame) -> None:
        """A message of the connection, in the order of its direction. `_pairing.c` is the same
        compiled for the common cases, at every level (it hands the rest to the methods here)."""
        if frame.direction == REQUEST:
            self._request(frame)
        else:
            self._response(frame)

    frame = py_frame

    def expire_requests(self, before_ns) -> None:
        """Requests sent before before_ns and still unanswered become `unanswered` (live capture:
        a request the broker never answers must not stay in memory). Only the head of the queue
        is checked: the requests behind it are newer."""
        inflight = self._inflight
        while inflight and inflight[0].frame.last_ts < before_ns:
            self._unpaired(self._pop())

    def close(self) -> None:
        self._answer_early(True)
        while self._raw_tokens:
            self._raw_exchange(self._raw_tokens.popleft(), None)
        while self._inflight:
            self._unpaired(self._pop())

    def _pop(self):
        pending = self._inflight.popleft()
        self._inflight_bytes -= len(pending.frame.data)
        return pending

    # -- requests -------------------------------------------------------------------------------

    def _request(self, frame) -> None:
        data = frame.data
        if self._raw_sasl:
            if not plausible_request(data, 0, len(data)):
                self._raw_tokens.append(frame)
                return
            self._raw_sasl = False
        head = self._parsed
        if head is not None:   # this message's, parsed by _head_size when it started
            self._parsed = None
        else:
            try:
                head = request_head(data) or parse_request_header(data)
            except ValueError as exc:
                ex = Exchange(self.connection, frame, None, None, None, None, None, MALFORMED)
                ex.issues.append(self._rebase(Issue("kafka.bad_request_header", ERROR, str(exc),
                                                    stream_offset=0), frame))
                self._emit(ex)
                return
        api_key, api_version, corr, client_id, tags, body_offset = head
        if api_key == SASL_HANDSHAKE and api_version == 0:
            self._sasl = True
        pending = _Pending(frame, api_key, api_version, corr, client_id)
        if api_key == PRODUCE:
            pending.acks = produce_acks(data, body_offset, api_version)
        if self._decoder is not None:
            pending.msg = self._decoder.request(data, api_key, api_version, corr, client_id, tags,
                                                body_offset)
            if pending.msg.issues:
                pending.issues = [self._rebase(i, frame) for i in pending.msg.issues]
        inflight = self._inflight
        inflight.append(pending)
        self._inflight_bytes += len(data)
        while len(inflight) > MAX_IN_FLIGHT or (self._inflight_bytes > MAX_IN_FLIGHT_BYTES
                                                and len(inflight) > 1):
            self._give_up(self._pop())
        if self._early:
            self._answer_early()

    def _give_up(self, pending) -> None:
        """The oldest request leaves the queue unanswered to keep memory bounded; a response to
        it arriving later will be an orphan."""
        if pending.acks != 0:
            pending.issues.append(self._rebase(Issue(
                "kafka.in_flight_limit", WARNING,
                f"over {MAX_IN_FLIGHT} requests or {MAX_IN_FLIGHT_BYTES >> 20} MiB in flight on "
                "this connection: the oldest is reported unanswered", stream_offset=0),
                pending.frame))
        self._unpaired(pending)

    # -- responses ------------------------------------------------------------------------------

    def _response(self, frame) -> None:
        if self._raw_tokens:
            self._raw_exchange(self._raw_tokens.popleft(), frame)
            return
        data = frame.data
        if len(data) < 4:
            ex = Exchange(self.connection, None, frame, None, None, None, None, MALFORMED)
            ex.issues.append(self._rebase(Issue("kafka.bad_response_header", ERROR,
                                                "response shorter than a correlation id",
                                                stream_offset=0), frame))
            self._emit(ex)
            return
        if self._early:   # behind the answers still waiting for their requests
            self._early.append(frame)
            self._answer_early()
            return
        (corr,) = _INT32.unpack_from(data, 0)
        if not self._answer(frame, corr):
            if self.owed():   # its request may be among the bytes still owed
                self._early.append(frame)
            else:
                self._orphan(frame, corr)

    def _answer(self, frame, corr) -> bool:
        """Pair the response with its request in flight (those before it were not answered);
        False when none has its correlation id."""
        inflight = self._inflight
        if not inflight or inflight[0].correlation_id != corr:  # else the usual answer
            for i, pending in enumerate(inflight):
                if pending.correlation_id == corr:
                    break
            else:
                return False
            for _ in range(i):
                self._unpaired(self._pop())
        self._paired(self._pop(), frame)
        return True

    def _answer_early(self, ending=False) -> None:
        """The responses that came before their requests, in order, as far as they can go: each
        pairs with its request once that is in flight, and is an orphan once the request stream
        owes nothing more (or the connection ends, or too many wait)."""
        early = self._early
        while early:
            frame = early[0]
            (corr,) = _INT32.unpack_from(frame.data, 0)
            # (its request, once in flight, is among the oldest: responses come in order)
            if (not ending and len(early) <= MAX_EARLY and self.owed()
                    and all(p.correlation_id != corr
                            for p in islice(self._inflight, RESYNC_WINDOW))
                    and sum(len(f.data) for f in early) <= MAX_IN_FLIGHT_BYTES):
                return
            early.popleft()
            if not self._answer(frame, corr):
                self._orphan(frame, corr)

    def _orphan(self, frame, corr) -> None:
        """A response whose request is outside the capture."""
        self._emit(Exchange(self.connection, None, frame, None, None, corr, None,
                            ORPHAN_RESPONSE))

    def _paired(self, pending, frame) -> None:
        ex = Exchange(self.connection, pending.frame, frame, pending.api_key, pending.api_version,
                      pending.correlation_id, pending.client_id, OK, pending.msg,
                      issues=pending.issues)   # the pending request's own list, handed over
        data = frame.data
        if self._decoder is not None:
            ex.response_msg = self._decoder.response(data, pending.api_key, pending.api_version,
                                                     pending.msg)
            if ex.response_msg.issues:
                ex.issues.extend([self._rebase(i, frame) for i in ex.response_msg.issues])
            self._decoder.summarize(ex)
        else:
            try:
                parse_response_header(data, pending.api_key, pending.api_version)
            except ValueError as exc:
                ex.issues.append(self._rebase(Issue("kafka.bad_response_header", ERROR, str(exc),
                                                    stream_offset=0), frame))
        if ex.issues and any(i.severity == ERROR for i in ex.issues):
            ex.status = MALFORMED
        if pending.api_key == SASL_HANDSHAKE and pending.api_version == 0 and len(data) >= 6:
            self._raw_sasl = _INT16.unpack_from(data, 4)[0] == 0
        elif pending.api_key == API_VERSIONS and ex.status == OK:
            self._allowed = _api_ranges(data, pending.api_version) or self._allowed
        self._emit(ex)

    def _unpaired(self, pending) -> None:
        status = NO_RESPONSE_EXPECTED if pending.acks == 0 else UNANSWERED
        ex = Exchange(self.connection, pending.frame, None, pending.api_key, pending.api_version,
                      pending.correlation_id, pending.client_id, status, pending.msg,
                      issues=pending.issues)
        if self._decoder is not None:
            self._decoder.summarize(ex)
        if ex.issues and any(i.severity == ERROR for i in ex.issues):
            ex.status = MALFORMED
        self._emit(ex)

    def _raw_exchange(self, request, response) -> None:
        ex = Exchange(self.connection, request, response, None, None, None, None,
                      OK if response is not None else UNANSWERED)
        ex.raw_sasl = True
        self._emit(ex)

    def _rebase(self, issue: Issue, frame) -> Issue:
        """Message-relative issue offsets become stream offsets (+4 for the size prefix)."""
        issue.connection_id = self.connection.connection_id
        issue.frame = frame.first_packet
        issue.stream_offset = frame.stream_offset + 4 + (issue.stream_offset or 0)
        return issue


def _flexible_responses() -> tuple:
    """The first flexible response version of each api key (None: never), indexed by api key."""
    return tuple(APIS[k][4] if k in APIS else None for k in range(max(APIS) + 1))


try:
    from ._pairing import configure as _configure
    Session.frame, Session._head_size = _configure(
        Session, _Pending, Exchange, request_head, _flexible_responses(), OK,
        sys.modules[__name__])
    PAIRING_COMPILED = True
except ImportError:   # no compiler where it was installed: Session.py_frame
    PAIRING_COMPILED = False

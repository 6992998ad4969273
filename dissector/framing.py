"""Size-prefixed Kafka PDUs out of one direction's reassembled byte stream.

A `Framer` is fed contiguous stream bytes in order (`feed`), told about holes (`gap`) and about
the end (`finish`). Every Kafka PDU is an int32 big-endian size followed by that many bytes.

Fast path: a segment that holds whole frames has them sliced straight out of it; only a frame
that spans segments is written into a buffer of its size as its bytes come (dissector.framebuf:
no piece per segment, no join), or, for a sink that reads only a message's first bytes
(`sink.head_size`, asked when the frame starts), only those are kept and the rest is counted:
copying the whole of every large message was a third of the headers level.

After a hole, a mid-stream start or an impossible size, the framer resynchronises: it scans for
the next offset where the size is within bounds and the session finds a plausible header there
(`sink.plausible`), and reports the bytes it skipped as one `kafka.resync` issue. A candidate is
confirmed by the frames that follow it (possible sizes chained from it, and a plausible header at
one of them) before anything is emitted: a wrong guess would swallow real frames. It is taken
unconfirmed when the stream ends or breaks, when the other side speaks (`settle`: a client waits
for the answer before it sends more), or after CONFIRM_LIMIT bytes with nothing better. When the
responses the other side's bytes start can be read (`answers`), they choose among a request
stream's candidates: the one they answer is taken, even past earlier ones (a false header in a
request's leftover bytes may span the real request after it, whose answer shows which is right),
and none while they answer none (they answer requests from before the resync). The first frames
after a resync are checked again as the session then sees them (a response's correlation id must
still be in flight); one that fails shows the guess was wrong and the scan resumes. A hole inside
a frame whose size is known needs no scan: the next frame starts where that one ends.

Bytes are never invented: a frame cut by a hole or by the end of the stream is handed on with the
bytes that were seen (so `len(frame.data) < frame.length - 4`) plus a `kafka.truncated_frame` issue,
so that its header can still be paired with its response.

A frame that spans segments counts against the dissector's shared `Budget` at its full size from
its start (counting pieces as they come would cost every packet), as do the bytes kept while
resynchronising; when the budget is spent, the largest holder gives up (`give_up`): the frame's
first bytes are handed on with a `kafka.buffer_limit` issue and the rest is skipped by its size,
without buffering (or the bytes kept for a resync are dropped, counted in its `kafka.resync`).
"""
from __future__ import annotations

import re
import struct
from collections import deque
from functools import lru_cache

from .budget import Budget
from .framebuf import fill, finished, frame_buffer
from .model import MAX_TCP_EVENTS, NOTE, WARNING, Frame, Issue
from .pieces import cut_front

MAX_FRAME = 100 << 20
CONFIRM_LIMIT = 1 << 20   # bytes a resync candidate may hold back the stream while unconfirmed
PROBATION = 4             # frames checked with sink.plausible after a resync (the first is its own)
CHAIN = 16                # frames followed past a resync candidate to confirm it
ANSWERS = 16              # response headers read ahead in the other direction (Framer.answers)
HEAD = 64 << 10           # bytes of a given-up frame handed on (its header, for pairing)

_size_at = struct.Struct(">i").unpack_from
_request_head = struct.Struct(">hhi").unpack_from
_response_head = struct.Struct(">ii").unpack_from
_corr_at = struct.Struct(">i").unpack_from

# A frame larger than this that spans segments is followed only if it starts like a Kafka message
# (see _looks_right): a garbage size under max_frame would otherwise swallow the rest of the
# stream. Smaller ones are taken on their size alone (they can swallow at most this much).
TRUST_SIZE = 64 << 10

# Smallest frame a resync accepts (requests: api key, version, correlation id; responses: a
# correlation id) and bytes needed at a candidate for sink.plausible (requests: up to the client
# id length; responses: the correlation id).
_MIN_SIZE = (8, 4)
_WINDOW = (14, 8)

_IDLE, _PREFIX, _BODY, _SKIP, _SYNC, _DONE = range(6)
_SCAN, _SETTLE, _FINAL = range(3)   # how far a resync scan may go without confirmation

_NAMES = ("request", "response")


@lru_cache(maxsize=64)
def _candidates(max_frame, direction):
    """Where a frame may start: the size's top byte is small enough for max_frame, and the size
    is not below the minimum (runs of zero bytes are common and must be skipped quickly). One
    pattern per (max_frame, direction), made when first needed: most streams never resync."""
    top = re.escape(bytes([min(max_frame >> 24, 0x7F)]))
    low = re.escape(bytes([_MIN_SIZE[direction] - 1]))
    return re.compile(b"(?=[\\x00-%s])(?!\\x00\\x00\\x00[\\x00-%s])" % (top, low))


class Framer:
    """Frames of one direction of one connection, emitted to `sink.frame` as they complete."""

    __slots__ = ("connection", "direction", "sink", "max_frame", "budget", "offset", "waiting",
                 "_head", "_buf", "_kept", "_state", "_hdr", "_room", "_need", "_start",
                 "_first_pkt", "_first_ts", "_last_pkt", "_last_ts", "_skip", "_sbuf", "_slen",
                 "_sneed", "_skipped", "_skip_from", "_sync_severity", "_replay", "_probation")

    def __init__(self, connection, direction, sink, *, max_frame=MAX_FRAME, budget=None):
        self.connection = connection
        self.direction = direction
        self.sink = sink
        self.max_frame = max_frame
        self.budget = Budget() if budget is None else budget  # shared by a capture's streams
        # the sink's head_size, when it reads only a message's first bytes (see _take)
        self._head = getattr(sink, "head_size", None)
        self.offset = 0          # stream offset of the next byte to arrive
        self.waiting = False     # a resync candidate awaits confirmation (see settle)
        self._state = _IDLE
        self._hdr = b""          # partial size prefix (_PREFIX)
        self._buf = None         # the frame's bytes after the prefix, filled as they come (_BODY;
        #                          framebuf), or None while only counting them (see _take) ...
        self._kept = None        # ... when these are the first bytes, all the sink reads
        self._room = 0           # bytes the frame in progress still lacks (0 unless _BODY)
        self._need = 0
        self._start = 0          # offset, first packet and time of the frame in progress
        self._first_pkt = 0
        self._first_ts = 0
        self._last_pkt = 0
        self._last_ts = 0
        self._skip = 0           # bytes left of a frame lost in a hole (_SKIP)
        self._sbuf = []          # (bytes, offset, packet, ts) not yet ruled out while in _SYNC
        self._slen = 0
        self._sneed = 0          # scan again once _slen reaches this
        self._skipped = 0
        self._skip_from = 0
        self._sync_severity = NOTE
        self._replay = deque()   # (data, pos, offset of data[0], packet, ts) to frame after a resync
        self._probation = 0      # frames after a resync still to be checked with sink.plausible

    # -- input -----------------------------------------------------------------------------------

    def feed(self, data, packet_no, ts):
        """The next contiguous bytes of the stream, carried by packet `packet_no` at `ts` (ns).
        Returns the frame these bytes leave in progress, as (bytes it still lacks, its buffer,
        None when they are only counted), else None (the caller may take the next pieces
        itself, writing them at the buffer's length less what the frame lacks: tcp.batch)."""
        n = len(data)
        if n < self._room:
            # the middle of a frame that spans segments
            self.offset += n
            buf = self._buf
            if buf is not None:
                fill(buf, self._need - self._room, data, 0, n)
            self._room -= n
            self._last_pkt = packet_no
            self._last_ts = ts
            return self._room, buf
        if n == 0 or self._state == _DONE:
            return None
        if data.__class__ is not bytes:
            data = bytes(data)  # frames and first bytes cut from it outlive the caller's buffer
        base = self.offset
        self.offset = base + n
        self._take(data, 0, n, base, packet_no, ts)
        if self._replay:
            self._run_replay()
        return (self._room, self._buf) if self._state == _BODY else None

    def took(self, size, packet_no, ts):
        """`size` more bytes of the frame in progress were written to its buffer, or counted
        (tcp.batch), the last of them carried by packet `packet_no` at `ts`: count them as feed
        would."""
        self.offset += size
        self._room -= size
        self._last_pkt = packet_no
        self._last_ts = ts

    def midstream(self):
        """The stream was joined after its start: find the first frame boundary by scanning."""
        if self._state == _IDLE and self.offset == 0:
            self._lose_sync(NOTE, 0)

    def settle(self, answers=None):
        """The other side sent data: take a complete resync candidate without confirmation.
        `answers`: the correlation ids of the responses those data start (see `answers`), when
        known: a candidate they answer is taken, and none while they answer none of them."""
        if self.waiting:
            self._search(_SETTLE, answers)
            self._run_replay()

    def answers(self, data, joined=False):
        """The correlation ids of the responses that start in `data`, the next bytes of this
        stream, when where they start is known: from a frame boundary, past the rest of the
        frame in progress, or, out of sync or `joined` here (the capture's first bytes of a
        stream joined midway), when their sizes cover `data` exactly, as a broker's answer after
        a pause does; else None. For the peer's settle."""
        state = self._state
        if self.direction == 0 or state == _PREFIX or state == _DONE:
            return None
        pos = self._room if state == _BODY else self._skip if state == _SKIP else 0
        n = len(data)
        ids = []
        while pos + 8 <= n and len(ids) < ANSWERS:
            size, corr = _response_head(data, pos)
            if not 4 <= size <= self.max_frame:
                return None
            ids.append(corr)
            pos += 4 + size
        if joined or state == _SYNC:   # where frames start is unknown: they must cover data
            return ids if ids and pos == n else None
        return None if pos < n < pos + 8 else ids   # or a header cut by the end of data

    def gap(self, nbytes, packet_no, exact=True):
        """`nbytes` of the stream at the current offset are missing and will not come; with
        exact=False about that many (a TLS record lost: where the next frame starts is unknown)."""
        if self._state == _DONE or nbytes <= 0:
            return
        gaps = self.connection.gaps   # for the latency anatomy: the packet of the frame it cuts
        if len(gaps) < MAX_TCP_EVENTS:
            gaps.append(self._last_pkt if self._state == _BODY else packet_no)
        if self._state == _SYNC and self._sbuf:
            self._search(_FINAL)  # nothing can confirm a candidate across the hole
            self._run_replay()
        self.offset += nbytes
        state = self._state
        if state == _BODY:
            remaining = self._room
            self._cut(f"cut by a hole after {self._need - remaining} of its {self._need} bytes")
            if not exact:
                self._lose_sync(WARNING, self.offset)
            elif nbytes < remaining:
                self._skip = remaining - nbytes
                self._state = _SKIP
            elif nbytes == remaining:
                self._state = _IDLE
            else:
                self._lose_sync(WARNING, self.offset)
        elif state == _SKIP:
            self._skip -= nbytes
            if not exact:
                self._skip = 0
                self._lose_sync(WARNING, self.offset)
            elif self._skip == 0:
                self._state = _IDLE
            elif self._skip < 0:
                self._skip = 0
                self._lose_sync(WARNING, self.offset)
        elif state == _SYNC:
            self._skipped += self._slen
            self._sbuf = []
            self._resize(0)
            self._sneed = 0
            self.waiting = False
            self._sync_severity = WARNING
        else:  # _IDLE or _PREFIX: where the next frame starts is unknown
            lost = len(self._hdr)
            self._hdr = b""
            self._lose_sync(WARNING, self._start if lost else self.offset)
            self._skipped = lost  # a partial size prefix counts as skipped

    def finish(self, packet_no):
        """End of the stream: report what is left over."""
        if self._state == _SYNC and self._sbuf:
            self._search(_FINAL)
            self._run_replay()
        state = self._state
        if state == _BODY:
            self._cut(f"cut by the end of the stream after {self._need - self._room} of its "
                      f"{self._need} bytes")
        elif state == _PREFIX:
            self._issue("kafka.truncated_frame", WARNING,
                        f"{len(self._hdr)}-byte partial size prefix at the end of the "
                        f"{_NAMES[self.direction]} stream", self._first_pkt, self._start)
        elif state == _SYNC:
            skipped = self._skipped + self._slen
            if skipped:
                self._issue("kafka.resync", self._sync_severity,
                            f"skipped {skipped} bytes of the {_NAMES[self.direction]} stream: "
                            f"no plausible frame before its end", packet_no, self._skip_from)
        self._state = _DONE
        self.waiting = False
        self._buf = self._kept = None
        self._sbuf = []
        self._resize(0)

    # -- the state machine -----------------------------------------------------------------------

    def _take(self, data, pos, n, base, pkt, ts):
        """Consume data[pos:n] (stream offset of data[0] is `base`)."""
        while pos < n:
            state = self._state
            if state == _IDLE:
                # The hot loop: whole frames sliced out of this segment.
                emit = self.sink.frame
                conn = self.connection
                d = self.direction
                maxf = self.max_frame
                probation = self._probation
                while n - pos >= 4:
                    (size,) = _size_at(data, pos)
                    if size < 0 or size > maxf:
                        self._bad_size(size, base + pos, pkt)
                        pos += 1
                        break
                    if probation and n - pos >= _WINDOW[d]:
                        # just after a resync every frame must look right, as the session
                        # now sees the stream: a wrong guess shows up here
                        probation -= 1
                        self._probation = probation
                        if not self.sink.plausible(d, data, pos):
                            self._lose_sync(WARNING, base + pos)
                            self._skipped = 1
                            pos += 1
                            break
                    end = pos + 4 + size
                    if end > n:
                        if size > TRUST_SIZE and not self._looks_right(data, pos, n):
                            self._lose_sync(WARNING, base + pos)
                            self._skipped = 1
                            pos += 1
                            break
                        self._start = base + pos
                        self._first_pkt = self._last_pkt = pkt
                        self._first_ts = self._last_ts = ts
                        self._need = size
                        head = self._head
                        k = None if head is None else head(d, data[pos + 4:n])
                        if k is None:
                            self._buf = buf = frame_buffer(size)
                            fill(buf, 0, data, pos + 4, n)
                        else:   # the sink reads no further: the rest is counted, not kept
                            self._buf = None
                            self._kept = data[pos + 4:pos + 4 + k]
                        self._room = size - (n - pos - 4)
                        self._state = _BODY
                        self.budget.reserve(self, size)
                        return
                    emit(Frame(conn, d, base + pos, size + 4, data[pos + 4:end], pkt, pkt, ts, ts))
                    pos = end
                else:
                    if pos < n:
                        self._hdr = bytes(data[pos:n])
                        self._start = base + pos
                        self._first_pkt = pkt
                        self._first_ts = ts
                        self._state = _PREFIX
                    return
            elif state == _BODY:
                want = self._room
                buf = self._buf
                if n - pos < want:
                    if buf is not None:
                        fill(buf, self._need - want, data, pos, n)
                    self._room = want - (n - pos)
                    self._last_pkt = pkt
                    self._last_ts = ts
                    return
                if buf is not None:
                    fill(buf, self._need - want, data, pos, pos + want)
                    whole = finished(buf)
                else:
                    whole = self._kept
                self._buf = self._kept = None
                self._room = 0
                self._state = _IDLE
                pos += want
                self.budget.release(self, self._need)
                self.sink.frame(Frame(self.connection, self.direction, self._start, self._need + 4,
                                      whole, self._first_pkt, pkt, self._first_ts, ts))
            elif state == _PREFIX:
                hdr = self._hdr
                k = 4 - len(hdr)
                if n - pos < k:
                    self._hdr = hdr + bytes(data[pos:n])
                    return
                hdr += bytes(data[pos:pos + k])
                pos += k
                self._hdr = b""
                (size,) = _size_at(hdr, 0)
                if size < 0 or size > self.max_frame:
                    self._bad_size(size, self._start, self._first_pkt)
                    # rescan from the byte after the bad prefix
                    self._sbuf.append((hdr[1:], self._start + 1, self._first_pkt, self._first_ts))
                    self._resize(3)
                elif size == 0:
                    self._state = _IDLE
                    self.sink.frame(Frame(self.connection, self.direction, self._start, 4, b"",
                                          self._first_pkt, pkt, self._first_ts, ts))
                else:
                    self._need = size
                    self._buf = frame_buffer(size)
                    self._room = size
                    self._last_pkt = pkt
                    self._last_ts = ts
                    self._state = _BODY
                    self.budget.reserve(self, size)
            elif state == _SKIP:
                if n - pos < self._skip:
                    self._skip -= n - pos
                    return
                pos += self._skip
                self._skip = 0
                self._state = _IDLE
            elif state == _SYNC:
                piece = data[pos:n] if pos or n != len(data) else data
                if type(piece) is not bytes:
                    piece = bytes(piece)
                self._sbuf.append((piece, base + pos, pkt, ts))
                self._resize(self._slen + n - pos)
                if self._slen >= self._sneed:
                    self._search(_SCAN)
                b = self.budget
                if b.used > b.limit:
                    b.over()
                return
            else:  # _DONE
                return

    def _run_replay(self):
        """Frame the bytes a resync handed back (a later resync may push more to the front)."""
        replay = self._replay
        while replay:
            data, pos, base, pkt, ts = replay.popleft()
            self._take(data, pos, len(data), base, pkt, ts)

    def _looks_right(self, data, pos, n):
        """Whether the frame at data[pos] starts like a Kafka message: a request's api key and
        version in range and its correlation id non-negative (loose on purpose: versions newer
        than this build's specs must pass); a response answering a request in flight (the
        session's check). A header not yet in view is given the benefit of the doubt."""
        if self.direction == 0:
            if n - pos < 12:
                return True
            api_key, api_version, corr = _request_head(data, pos + 4)
            return 0 <= api_key < 1024 and 0 <= api_version < 1024 and corr >= 0
        return n - pos < 8 or self.sink.plausible(1, data, pos)

    # -- resynchronisation -----------------------------------------------------------------------

    def _search(self, mode, answers=None):
        """Scan the bytes kept in _SYNC for a frame start; resume, wait, or drop what is ruled out."""
        pieces = self._sbuf
        buf = pieces[0][0] if len(pieces) == 1 else b"".join([p[0] for p in pieces])
        found, wait = self._find(buf, mode, answers)
        if found >= 0:
            self._skipped += found
            rest = cut_front(pieces, found)
            self._resynced(rest[0][1], rest[0][2])
            self._replay.extendleft(reversed([(d, 0, off, pkt, ts) for d, off, pkt, ts in rest]))
            return
        # keep the candidate being waited for, else the bytes that may still start one
        drop = wait if wait >= 0 else max(len(buf) - _WINDOW[self.direction] + 1, 0)
        self._skipped += drop
        self._sbuf = cut_front(pieces, drop) if drop < len(buf) else []
        self._resize(len(buf) - drop)
        self._sneed = self._sneed - drop if wait >= 0 else 0
        self.waiting = wait >= 0

    def _find(self, buf, mode, answers=None):
        """(offset of the frame start to resume at, -1), or (-1, offset of the candidate to wait
        for, with _sneed set to the length that will confirm or refute it), or (-1, -1).
        _SETTLE takes the first complete candidate; given `answers` (the correlation ids the
        other side's responses carry), the first complete one they answer, or waits on as
        _SCAN does when they answer none (they answer requests from before the resync)."""
        d = self.direction
        w = _WINDOW[d]
        end = len(buf)
        lo = _MIN_SIZE[d]
        maxf = self.max_frame
        plausible = self.sink.plausible
        wait = complete = answered = -1
        wait_need = 0
        for m in _candidates(maxf, d).finditer(buf, 0, max(end - w + 1, 0)):
            p = m.start()
            (size,) = _size_at(buf, p)
            if size < lo or size > maxf or not plausible(d, buf, p):
                continue
            # Follow the chain of sizes: every one in view must be possible, and a plausible
            # header at one of the following frames confirms the candidate.
            q = p + 4 + size
            for _ in range(CHAIN):
                if q + 4 > end:
                    break
                (nxt,) = _size_at(buf, q)
                if nxt < lo or nxt > maxf:
                    break
                if q + w <= end and plausible(d, buf, q):
                    return p, -1
                q += 4 + nxt
            else:
                return p, -1  # a long run of possible sizes: as good as a header
            if q + 4 <= end:
                continue  # refuted by an impossible size
            if p + 4 + size <= end:   # (a request's correlation id then in view)
                if complete < 0:
                    complete = p
                if answered < 0 and answers and _corr_at(buf, p + 8)[0] in answers:
                    answered = p
            if wait < 0:
                wait, wait_need = p, q + w
        if answered >= 0:
            return answered, -1
        if mode == _SCAN or (mode == _SETTLE and answers is not None):
            if wait >= 0 and end - wait >= CONFIRM_LIMIT:
                return wait, -1  # held back long enough: nothing better showed up
            wait_need = min(wait_need, wait + CONFIRM_LIMIT)
        elif complete >= 0:
            return complete, -1
        elif mode == _FINAL:
            return -1, -1
        self._sneed = wait_need
        return -1, wait

    def _lose_sync(self, severity, at):
        self._state = _SYNC
        self._sbuf = []
        self._resize(0)
        self._sneed = 0
        self._skipped = 0
        self._skip_from = at
        self._sync_severity = severity

    def _resynced(self, at, pkt):
        self._state = _IDLE
        self._probation = PROBATION
        self.waiting = False
        self._sbuf = []
        self._resize(0)
        self._sneed = 0
        if self._skipped:
            self._issue("kafka.resync", self._sync_severity,
                        f"skipped {self._skipped} bytes of the {_NAMES[self.direction]} stream "
                        f"to the next plausible frame at offset {at}", pkt, self._skip_from)
        self._skipped = 0

    # -- helpers -------------------------------------------------------------------------------

    def _bad_size(self, size, at, pkt):
        if size < 0:
            self._issue("kafka.bad_frame_size", WARNING,
                        f"negative frame size {size} in the {_NAMES[self.direction]} stream",
                        pkt, at)
        else:
            self._issue("kafka.frame_too_large", WARNING,
                        f"frame size {size} over the {self.max_frame}-byte limit in the "
                        f"{_NAMES[self.direction]} stream", pkt, at)
        self._lose_sync(WARNING, at + 1)

    def buffered(self):
        """Bytes this framer counts against the budget: the size of its frame in progress, or
        the bytes it keeps while looking for a frame start."""
        return self._need if self._state == _BODY else self._slen

    def _resize(self, slen):
        """The bytes kept while looking for a frame start are now slen."""
        b = self.budget
        b.add(slen - self._slen)
        self._slen = slen
        if slen >= b.big_size:
            b.big[self] = None
        elif b.big:
            b.big.pop(self, None)

    def give_up(self):
        """The budget is spent and this framer holds the most: hand on the first bytes of its
        frame in progress and skip the rest by its size, or drop the bytes it keeps while looking
        for a frame start (Budget.over)."""
        if self._state == _SYNC:
            dropped = self._slen
            _, at, _, _ = self._sbuf[0]
            pkt = self._sbuf[-1][2]
            self._skipped += dropped
            self._sbuf = []
            self._resize(0)
            self._sneed = 0
            self.waiting = False
            self._sync_severity = WARNING
            self._issue("kafka.buffer_limit", WARNING,
                        f"{dropped} bytes of the {_NAMES[self.direction]} stream kept while "
                        f"looking for a frame start dropped: the {self.budget.limit}-byte buffer "
                        f"budget of the capture's partial frames and out-of-order data is spent",
                        pkt, at)
            return
        have = self._need - self._room
        head = self._seen(min(have, HEAD))
        kept = len(head)
        self._skip = self._room
        self._room = 0
        self._state = _SKIP
        b = self.budget
        b.used -= self._need
        b.big.pop(self, None)
        self._issue("kafka.buffer_limit", WARNING,
                    f"{_NAMES[self.direction]} frame of {self._need + 4} bytes given up after "
                    f"{have} bytes: the {b.limit}-byte buffer budget of the capture's partial "
                    f"frames and out-of-order data is spent (its first {kept} bytes kept)",
                    self._first_pkt, self._start)
        if have:
            self.sink.frame(Frame(self.connection, self.direction, self._start, self._need + 4,
                                  head, self._first_pkt, self._last_pkt,
                                  self._first_ts, self._last_ts))

    def _seen(self, n):
        """The first n bytes seen of the frame in progress (no more than the sink reads, when
        only counting), as bytes; the frame's buffer is dropped."""
        data = bytes(self._buf[:n]) if self._buf is not None else self._kept[:n]
        self._buf = self._kept = None
        return data

    def _cut(self, why):
        """The frame in progress will not complete: hand on what was seen of it."""
        have = self._need - self._room
        seen = self._seen(have)
        self._room = 0
        self._state = _IDLE
        b = self.budget
        b.used -= self._need
        b.big.pop(self, None)
        self._issue("kafka.truncated_frame", WARNING,
                    f"{_NAMES[self.direction]} frame of {self._need + 4} bytes {why}",
                    self._first_pkt, self._start)
        if have:
            self.sink.frame(Frame(self.connection, self.direction, self._start, self._need + 4,
                                  seen, self._first_pkt, self._last_pkt,
                                  self._first_ts, self._last_ts))

    def _issue(self, code, severity, detail, pkt, offset):
        self.sink.issue(Issue(code, severity, detail, self.connection.connection_id, pkt, offset))

"""One direction of a TLS connection: the reassembled ciphertext stream -> TLS records ->
plaintext, fed to that direction's Kafka framer.

`TlsStream` takes the framer's place behind the TCP reassembler (same calls: feed, gap,
midstream, settle, finish, and the budget's buffered/give_up), so the framer, the session and
everything after see a plaintext stream. Each plaintext byte is handed on with the packet that
carried its ciphertext byte (AEAD and CBC keep byte positions), so frames name the packets a
user opens in Wireshark and their times are those packets' times.

Damage: a record that does not authenticate is a `tls.bad_record` issue and the stream goes on
with the next. A hole inside a record loses that record only (the next header is where its
length says); a hole that swallows a header loses the record boundaries: the bytes after it are
scanned for a chain of record headers (`tls.resync`), and the sequence number of the first record
found is searched for near its estimate within SEQ_WINDOW numbers, the authentication tag saying
which is right (`tls.seq_window` when none is). What is held (a record in progress, bytes kept
while resynchronising, records waiting for the keys) counts against the dissector's shared
budget.
"""
from __future__ import annotations

import struct

from ..framebuf import fill, finished, frame_buffer
from ..model import NOTE, WARNING
from ..pieces import cut_front
from .records import ALERT, APPLICATION_DATA, CCS, HANDSHAKE, HEADER, MAX_RECORD, find_chain
from .handshake import Messages

SEQ_WINDOW = 1024        # sequence numbers tried for the first record after a hole
RESYNC_SEQS = 16         # sequence numbers a lone resync candidate is tried with (_opens)...
RESYNC_TRIES = 4         # ...and how many candidates, after a loss of sync
MAX_SEARCHES = 3         # failed searches after which a direction stops decrypting
MAX_SYNC = 64 << 10      # bytes kept while looking for a record header chain
MAX_HELD = 1 << 20       # bytes of records kept per direction while its keys are not known yet
MAX_BAD_SHOWN = 16       # tls.bad_record issues per direction; the rest are counted in one
_HEADER, _BODY, _SKIP, _SYNC, _DONE = range(5)
_head = struct.Struct(">BHH").unpack_from   # content type, version, length
_pack_head = struct.Struct(">BHH").pack
_NAMES = ("client", "server")


class TlsStream:
    """The record layer of one direction; `tc` is the connection's shared TlsConnection."""

    __slots__ = ("tc", "direction", "framer", "budget", "offset", "_state", "_hdr", "_rtype",
                 "_rver", "_need", "_body", "_got", "_pieces", "_start", "_skip", "_sbuf",
                 "_slen", "_sync_from", "_sync_pkt", "_severity", "_lost_bytes", "_used",
                 "cipher", "next_cipher", "pending", "seq", "seq_known", "ccs", "msgs",
                 "held", "held_bytes", "records", "record_bytes", "bad", "searches", "probes",
                 "fed", "skipped", "secret", "joined", "_tried")

    def __init__(self, tc, direction, framer, budget):
        self.tc = tc
        self.direction = direction
        self.framer = framer
        self.budget = budget
        self.offset = 0           # ciphertext stream offset of the next byte
        self._state = _HEADER
        self._hdr = b""
        self._rtype = self._rver = self._need = self._got = 0
        self._body = None
        self._pieces = None       # (body offset, packet, ts) of each segment of the record
        self._start = 0           # stream offset of the record in progress
        self._skip = 0
        self._sbuf = []           # (bytes, stream offset, packet, ts) kept while in _SYNC
        self._slen = 0
        self._sync_from = 0
        self._sync_pkt = 0
        self._severity = WARNING
        self._lost_bytes = 0      # ciphertext lost in the last hole (for the sequence estimate)
        self._tried = [-1, 0]     # since the last loss of sync: the stream offset of the last
                                  # candidate _opens tried, and how many it tried
        self._used = 0            # bytes counted against the budget
        self.cipher = None        # the opener of the next protected record
        self.next_cipher = None   # TLS 1.3: the application opener, once the handshake is over
        self.pending = None       # TLS 1.2: the opener that ChangeCipherSpec turns on
        self.seq = 0
        self.seq_known = True
        self.ccs = False          # TLS 1.2: this direction sent ChangeCipherSpec
        self.msgs = Messages()
        self.held = []            # protected records waiting for keys
        self.held_bytes = 0
        self.records = 0
        self.record_bytes = 0
        self.bad = 0              # records that did not authenticate
        self.searches = 0         # failed sequence number searches
        self.probes = 0
        self.fed = False          # plaintext went to the framer
        self.skipped = 0          # protected records not decrypted (no keys)
        self.secret = None        # TLS 1.3: the application traffic secret (for KeyUpdate)
        self.joined = False       # the capture joined this direction after its start

    # -- the framer's interface -------------------------------------------------------------------

    # The flow table settles a waiting framer when the other side sends data (Framer.settle);
    # a TLS stream's framer is settled when the other side's plaintext comes (_deliver), so the
    # per-packet check never finds this one waiting.
    waiting = False

    def settle(self, answers=None):
        self.framer.settle(answers)

    def feed(self, data, pkt, ts):
        """Like Framer.feed: returns (bytes the record in progress still lacks, its buffer) when
        one is, so that the segments that continue it are written straight in (a run:
        tcp.batch, counted by `took`)."""
        n = len(data)
        base = self.offset
        self.offset = base + n
        pos = 0
        if self._state == _BODY:
            got = self._got
            room = self._need - got
            pieces = self._pieces
            pieces.append((got, pkt, ts))
            if n < room:   # the middle of a record that spans segments
                fill(self._body, got, data, 0, n)
                self._got = got + n
                return room - n, self._body
            # the end of one: opened here, the rest of the segment goes on below
            body = self._body
            fill(body, got, data, 0, room)
            self._body = self._pieces = None
            self._state = _HEADER
            self._used -= self._need
            self.budget.used -= self._need
            self._record(self._rtype, self._rver, finished(body), pieces)
            pos = room
        if pos < n:
            self._take(data, pos, n, base, pkt, ts)
        b = self.budget
        if b.used > b.limit:
            b.over()
        return (self._need - self._got, self._body) if self._state == _BODY else None

    def took(self, size, pkt, ts):
        """`size` more bytes of the record in progress were written to its buffer by a run, the
        last of them carried by packet `pkt` at `ts` (their bytes are put down to it)."""
        self._pieces.append((self._got, pkt, ts))
        self._got += size
        self.offset += size

    def midstream(self):
        """The capture joined this direction after its start: find a record boundary first."""
        if self._state == _HEADER and self.offset == 0 and not self._hdr:
            self._lose(NOTE, 0, 0)
            self.seq_known = False
            self.joined = True

    def gap(self, nbytes, pkt):
        if self._state == _DONE or nbytes <= 0:
            return
        self.offset += nbytes
        st = self._state
        if st == _BODY:
            remaining = self._need - self._got
            rtype, need = self._rtype, self._need
            self._drop_body()
            self._lost_record(rtype, need, pkt)
            if nbytes < remaining:
                self._skip = remaining - nbytes
                self._state = _SKIP
            elif nbytes == remaining:
                self._state = _HEADER
            else:
                self._hole(nbytes - remaining, pkt)
        elif st == _SKIP:
            if nbytes < self._skip:
                self._skip -= nbytes
            elif nbytes == self._skip:
                self._state = _HEADER
            else:
                self._hole(nbytes - self._skip, pkt)
        elif st == _HEADER:
            self._hole(nbytes + len(self._hdr), pkt)
        elif st == _SYNC:
            self._skipped_sync()
            self._lost_bytes += nbytes
            self._sync_from = self.offset

    def finish(self, pkt):
        if self._state == _DONE:
            return
        if self.held:
            self.release(final=True)
        st = self._state
        if st == _BODY:
            rtype, need = self._rtype, self._need
            self._drop_body()
            self._lost_record(rtype, need, pkt)
        elif st == _SYNC:
            self._skipped_sync(end=True)
        self._state = _DONE
        self._account(-self._used)
        self.tc.stream_done(self, pkt)
        self.framer.finish(pkt)

    def buffered(self):
        return self._used + self.framer.buffered()

    def give_up(self):
        """The shared budget is spent and this direction holds the most: drop what it holds
        (or what its framer holds, when that is more)."""
        if self.framer.buffered() > self._used:
            self.framer.give_up()
            return
        dropped = len(self.held)
        if dropped:
            self.held = []
            self._account(-self.held_bytes)
            self.held_bytes = 0
            self.seq += dropped
            self.tc.issue(self, "tls.buffer_limit", WARNING,
                          f"{dropped} {_NAMES[self.direction]} records waiting for their keys "
                          f"dropped: the buffer budget is spent", self._sync_pkt, self._start)
        if self._state == _SYNC:
            self._skipped_sync()
        elif self._state == _BODY:
            rtype, need, left = self._rtype, self._need, self._need - self._got
            self._drop_body()
            self._lost_record(rtype, need, self._sync_pkt)
            self._skip = left
            self._state = _SKIP

    # -- records ------------------------------------------------------------------------------

    def _take(self, data, pos, n, base, pkt, ts):
        while pos < n:
            st = self._state
            if st == _HEADER:
                if not self._hdr and n - pos >= HEADER:
                    rtype, rver, need = _head(data, pos)
                    pos += HEADER
                else:
                    k = min(HEADER - len(self._hdr), n - pos)
                    if not self._hdr:
                        self._start = base + pos
                    self._hdr += bytes(data[pos:pos + k])
                    pos += k
                    if len(self._hdr) < HEADER:
                        return
                    rtype, rver, need = _head(self._hdr, 0)
                    self._hdr = b""
                rv = self.tc.record_version
                if not (20 <= rtype <= 24 and need <= MAX_RECORD and (
                        rver == rv or rv is None and 0x0300 <= rver <= 0x0304)):
                    hdr = _pack_head(rtype, rver, need)
                    at = base + pos - HEADER
                    self.tc.issue(self, "tls.bad_record_header", WARNING,
                                  f"no TLS record header at offset {at} of the "
                                  f"{_NAMES[self.direction]} stream", pkt, at)
                    self._lose(WARNING, at, pkt)
                    self.seq_known = False
                    self._sbuf.append((bytes(hdr[1:]), at + 1, pkt, ts))
                    self._slen = HEADER - 1
                    self._account(HEADER - 1)
                    continue
                self.records += 1
                self.record_bytes += need + HEADER
                if n - pos >= need:
                    body = data[pos:pos + need]
                    pos += need
                    self._record(rtype, rver, body, ((0, pkt, ts),))
                    continue
                self._rtype, self._rver, self._need = rtype, rver, need
                self._got = n - pos
                self._body = frame_buffer(need)
                fill(self._body, 0, data, pos, n)
                self._pieces = [(0, pkt, ts)]
                self._state = _BODY
                self._used += need    # a record is never near the budget's big_size
                self.budget.add(need)
                return
            elif st == _BODY:
                take = min(self._need - self._got, n - pos)
                self._pieces.append((self._got, pkt, ts))
                fill(self._body, self._got, data, pos, pos + take)
                self._got += take
                pos += take
                if self._got == self._need:
                    body, pieces = finished(self._body), self._pieces
                    self._body = self._pieces = None
                    self._state = _HEADER
                    self._used -= self._need
                    self.budget.used -= self._need
                    self._record(self._rtype, self._rver, body, pieces)
            elif st == _SKIP:
                take = min(self._skip, n - pos)
                self._skip -= take
                pos += take
                if not self._skip:
                    self._state = _HEADER
            elif st == _SYNC:
                piece = bytes(data[pos:n])
                self._sbuf.append((piece, base + pos, pkt, ts))
                self._slen += n - pos
                self._account(n - pos)
                self._sync_pkt = pkt
                self._search()
                return
            else:
                return

    def _record(self, rtype, rver, body, pieces):
        c = self.cipher
        if rtype == APPLICATION_DATA and c is not None and self.seq_known \
                and self.next_cipher is None:
            # the common case, in one call: application data under known keys
            r = c.open(self.seq, rtype, rver, body)
            self.seq += 1
            if r is None:
                self._bad_record(rtype, len(body), pieces[0][1], c)
            elif r[0] == APPLICATION_DATA and r[1] and self.fed:
                self._deliver(r[1], c.prefix, pieces)
            else:
                self._content(r[0], r[1], c.prefix, pieces)
            return
        tc = self.tc
        if rtype == CCS:
            if tc.version != 0x0304:
                self.ccs = True
                self.cipher = self.pending
                self.seq = 0
            return
        if rtype != APPLICATION_DATA and not self.ccs and not self.joined:
            # the handshake in the clear (a stream joined mid-way may be past its
            # ChangeCipherSpec: its handshake and alert records are protected, not read)
            pkt, ts = pieces[0][1], pieces[0][2]
            if rtype == HANDSHAKE:
                for mtype, mbody in self.msgs.feed(body):
                    tc.message(self, mtype, mbody, pkt, ts)
            elif rtype == ALERT and len(body) == 2:
                tc.alert(self, bytes(body), pkt)
            elif rtype == ALERT:   # an alert after an unseen ChangeCipherSpec
                self._protected(rtype, rver, body, pieces)
            return
        self._protected(rtype, rver, body, pieces)

    def _protected(self, rtype, rver, body, pieces):
        c = self.cipher
        if c is None and self.pending is not None and not self.ccs and rtype == APPLICATION_DATA:
            # TLS 1.2 application data, yet no ChangeCipherSpec of this direction: a hole took
            # it (and its Finished). Its keys from here on, the record's number searched.
            self.ccs = True
            self.set_keys(self.pending, 0, known=False)
            c = self.cipher
        if c is None:
            if self.tc.awaiting_keys(self):
                self._hold(rtype, rver, body, pieces)
                return
            c = self.tc.late_keys(self, rtype, rver, body)
            if c is None:
                nc = self.next_cipher
                if nc is not None:   # TLS 1.3 without handshake secrets: find the first
                    r = nc.open(0, rtype, rver, body)    # application record
                    if r is not None:
                        self.to_app()
                        self.seq = 1
                        self._content(r[0], r[1], nc.prefix, pieces)
                        return
                self.seq += 1
                self.skipped += 1
                tc = self.tc
                tc.no_keys(self, pieces[0][1])
                if rtype == APPLICATION_DATA and tc.version == 0x0303 and tc.app_ts is None:
                    tc.app_ts = pieces[0][2]   # TLS 1.2 says which records are application data
                return
        if self.seq_known:
            r = c.open(self.seq, rtype, rver, body)
            if r is None and self.next_cipher is not None:
                # TLS 1.3: a Finished not seen (lost) still ends the handshake keys
                nc = self.next_cipher
                r = nc.open(0, rtype, rver, body)
                if r is not None:
                    self.to_app()
                    c = nc
        else:
            r = self._search_seq(c, rtype, rver, body, pieces[0][1])
            if r is None:
                return
            c = self.cipher   # the application keys, where the search moved on to them
        self.seq += 1
        if r is None:
            self._bad_record(rtype, len(body), pieces[0][1], c)
            return
        self._content(r[0], r[1], c.prefix, pieces)

    def _content(self, ctype, plain, prefix, pieces):
        tc = self.tc
        pkt, ts = pieces[0][1], pieces[0][2]
        if ctype == APPLICATION_DATA:
            if not tc.decrypted:
                tc.first_application_data(ts)
            if plain:
                self._deliver(plain, prefix, pieces)
        elif ctype == HANDSHAKE:
            for mtype, mbody in self.msgs.feed(plain):
                tc.message(self, mtype, mbody, pkt, ts)
        elif ctype == ALERT:
            tc.alert(self, bytes(plain), pkt)

    def _deliver(self, plain, prefix, pieces):
        """Hand plaintext to the framer with the packets that carried it: piece by piece where
        a frame may start or end, in one call across the middle of a frame (the framer says how
        many bytes the frame in progress still lacks)."""
        self.fed = True
        peer = self.tc.streams[1 - self.direction]
        if peer is not None and peer.framer.waiting:
            # this side speaks: the other's resync candidate is complete
            peer.framer.settle(self.framer.answers(plain))
        feed = self.framer.feed
        log = self.tc.record_log
        if log is not None:
            log[self.direction].append((self.framer.offset, len(plain), self.seq - 1,
                                        pieces[0][1], pieces[-1][1]))
        if len(pieces) == 1:
            feed(plain, pieces[0][1], pieces[0][2])
            return
        n = len(plain)
        plain = memoryview(plain)   # slices are not copied where the framer fills a frame
        bounds = [0 if off <= prefix else n if off - prefix > n else off - prefix
                  for off, _, _ in pieces]
        bounds.append(n)
        pos = j = 0
        while pos < n:
            while bounds[j + 1] <= pos:
                j += 1
            end = bounds[j + 1]
            r = feed(plain[pos:end], pieces[j][1], pieces[j][2])
            pos = end
            if r is not None and pos < n:
                stop = pos + r[0]   # where the frame in progress ends
                if stop >= n:
                    feed(plain[pos:], pieces[-1][1], pieces[-1][2])
                    return
                k = j + 1           # the piece holding the frame's last byte
                while bounds[k + 1] < stop:
                    k += 1
                if bounds[k] > pos:
                    feed(plain[pos:bounds[k]], pieces[k - 1][1], pieces[k - 1][2])
                    pos = bounds[k]

    # -- keys ------------------------------------------------------------------------------

    def to_app(self):
        """TLS 1.3: this direction's handshake is over; application keys from the next record."""
        if self.next_cipher is not None:
            self.cipher = self.next_cipher
            self.next_cipher = None
            self.seq = 0

    def set_keys(self, cipher, seq=0, known=True):
        self.cipher = cipher
        self.seq = seq
        self.seq_known = known

    def release(self, final=False):
        """The keys are known now (or will never be: final): open the records held for them."""
        held = self.held
        self.held = []
        self._account(-self.held_bytes)
        self.held_bytes = 0
        for rtype, rver, body, pieces in held:
            if final and self.cipher is None:
                self.seq += 1
                self.skipped += 1
                self.tc.no_keys(self, pieces[0][1])
                continue
            self._protected(rtype, rver, body, pieces)

    def _hold(self, rtype, rver, body, pieces):
        n = len(body)
        if self.held_bytes + n > MAX_HELD:
            self.seq += 1
            self.skipped += 1
            self.tc.issue(self, "tls.buffer_limit", WARNING,
                          f"{_NAMES[self.direction]} record dropped: over {MAX_HELD} bytes of "
                          f"records waiting for the handshake that gives their keys",
                          pieces[0][1], None)
            return
        self.held.append((rtype, rver, bytes(body), tuple(pieces)))
        self.held_bytes += n
        self._account(n)

    def _search_seq(self, c, rtype, rver, body, pkt):
        """The first record after a hole or a mid-stream start: find its sequence number."""
        lo = self.seq
        est = min(self._seq_estimate(), lo + SEQ_WINDOW - 1)
        for i in range(2 * SEQ_WINDOW):
            s = est + (i + 1) // 2 if i & 1 else est - i // 2
            if s < lo or s >= lo + SEQ_WINDOW:
                if est - i // 2 < lo and est + (i + 1) // 2 >= lo + SEQ_WINDOW:
                    break
                continue
            r = c.open(s, rtype, rver, body)
            if r is not None:
                self.seq = s
                self.seq_known = True
                self._lost_bytes = 0
                return r
        if self.next_cipher is not None:
            # TLS 1.3: the hole may have held this direction's Finished, after which the
            # application keys number the records from 0
            self.to_app()
            return self._search_seq(self.cipher, rtype, rver, body, pkt)
        self.searches += 1
        self.seq += 1
        self.tc.issue(self, "tls.seq_window", WARNING,
                      f"no sequence number from {lo} to {lo + SEQ_WINDOW - 1} opens the first "
                      f"{_NAMES[self.direction]} record after the hole"
                      + (": giving up on this direction" if self.searches >= MAX_SEARCHES
                         else ""), pkt, None)
        if self.searches >= MAX_SEARCHES:
            self.cipher = self.next_cipher = None
            self.tc.gave_up(self)
        return None

    def _bad_record(self, rtype, length, pkt, c):
        self.bad += 1
        if self.bad <= MAX_BAD_SHOWN:
            self.tc.issue(self, "tls.bad_record", WARNING,
                          f"{_NAMES[self.direction]} record {self.seq - 1} ({length} bytes) "
                          f"does not authenticate (wrong key or damaged bytes)", pkt, None)
        if self.fed:
            self.framer.gap(max(length - c.overhead, 1), pkt, exact=False)

    def _lost_record(self, rtype, length, pkt):
        """A record cut by a hole: it is gone, but it took its sequence number."""
        if rtype == APPLICATION_DATA or self.ccs:
            self.seq += 1
            if self.fed and (rtype == APPLICATION_DATA or self.tc.version == 0x0304):
                self.framer.gap(max(length - 16, 1), pkt, exact=False)
        else:
            self.msgs.reset()

    # -- resynchronisation --------------------------------------------------------------------

    def _hole(self, lost, pkt):
        """Record boundaries are lost: scan for the next header chain."""
        self._lose(WARNING, self.offset, pkt)
        self.seq_known = False
        self._lost_bytes = lost
        self.msgs.reset()
        if self.fed:
            self.framer.gap(max(lost, 1), pkt, exact=False)

    def _lose(self, severity, at, pkt):
        self._state = _SYNC
        self._tried = [-1, 0]
        self._hdr = b""
        self._sync_from = at
        self._sync_pkt = pkt
        self._severity = severity   # a mid-stream start is a note, a hole a warning

    def _search(self):
        pieces = self._sbuf
        buf = pieces[0][0] if len(pieces) == 1 else b"".join([p[0] for p in pieces])
        p, sure = find_chain(buf, 0, self.tc.record_version, chain=2)
        if p >= 0 and not sure:
            sure = self._opens(buf, p, pieces[0][1] + p)
        if p >= 0 and sure:
            skipped = p
            rest = cut_front(pieces, p)
            self._account(-self._slen)
            self._sbuf = []
            self._slen = 0
            self._state = _HEADER
            if skipped:
                self.tc.issue(self, "tls.resync", self._severity,
                              f"skipped {skipped} bytes of the {_NAMES[self.direction]} TLS "
                              f"stream to the next record header at offset {rest[0][1]}",
                              rest[0][2], self._sync_from)
            self._lost_bytes += skipped
            for data, off, pkt, ts in rest:
                self._take(data, 0, len(data), off, pkt, ts)
            return
        keep_from = p if p >= 0 else max(len(buf) - HEADER + 1, 0)
        if len(buf) - keep_from > MAX_SYNC:
            keep_from = len(buf) - HEADER + 1
        if keep_from > 0:
            self._sbuf = cut_front(pieces, keep_from)
            self._account(-keep_from)
            self._slen -= keep_from
            self._lost_bytes += keep_from

    def _seq_estimate(self, skipped=0) -> int:
        """The sequence number of the first record after a hole: the bytes lost (and `skipped`
        more) over the mean record size, past the next number."""
        avg = self.record_bytes // self.records if self.records else MAX_RECORD
        return self.seq + (self._lost_bytes + skipped) // max(avg, 1)

    def _opens(self, buf, p, at) -> bool:
        """Does the whole record at buf[p] (stream offset `at`), a resync candidate no second
        header confirms yet, authenticate under this direction's keys with a sequence number
        near the estimate? That proves the boundary at once: a lone request after a hole
        waited for the next record, at worst the stream's end, behind the response it asked
        for. Each candidate is tried once, over RESYNC_SEQS numbers, and at most RESYNC_TRIES
        of them after a loss of sync (hostile bytes could make every offset one)."""
        c = self.cipher
        tried = self._tried
        if c is None or at == tried[0] or tried[1] >= RESYNC_TRIES or len(buf) - p < HEADER:
            return False
        rtype, rver, need = _head(buf, p)
        if len(buf) - p - HEADER < need:
            return False
        self._tried = [at, tried[1] + 1]
        body = buf[p + HEADER:p + HEADER + need]
        first = max(self.seq, self._seq_estimate(p) - RESYNC_SEQS // 2)
        return any(c.open(s, rtype, rver, body) is not None
                   for s in range(first, first + RESYNC_SEQS))

    def _skipped_sync(self, end=False):
        n = self._slen
        if n:
            self._account(-n)
        self._sbuf = []
        self._slen = 0
        if end and self.offset > self._sync_from:
            self.tc.issue(self, "tls.resync", self._severity,
                          f"skipped {self.offset - self._sync_from} bytes of the "
                          f"{_NAMES[self.direction]} TLS stream: no record header chain before "
                          f"its end", self._sync_pkt, self._sync_from)

    def _drop_body(self):
        self._account(-self._need)
        self._body = self._pieces = None
        self._got = 0

    def _account(self, delta):
        if not delta:
            return
        self._used += delta
        b = self.budget
        b.add(delta)
        if self._used >= b.big_size:
            b.big[self] = None
        elif b.big:
            b.big.pop(self, None)

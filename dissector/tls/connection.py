"""What the two directions of one TLS connection share: the hellos, the negotiated version and
suite, the keys from the key log, and the connection's TLS columns.

The ClientHello travels in the client's direction and the ServerHello in the server's, so keys
are derived when the ServerHello is read and handed to both directions (`TlsStream`); a client
record that arrives before (reordering) waits for them, bounded. TLS 1.2: the key block from the
master secret, each direction's keys switched on by its ChangeCipherSpec. TLS 1.3: handshake
traffic keys at once, application keys after each direction's Finished, the next generation at a
KeyUpdate. A capture that starts after a TLS 1.3 handshake is tried against the key log's traffic
secrets no handshake in the capture named (bounded), and so is a connection whose ClientHello
the capture lacks: its TLS 1.3 traffic secrets, or its TLS 1.2 master secrets with the
ServerHello's random. A TLS 1.3 connection whose ServerHello the capture lacks is opened with its
client random's traffic secrets.
"""
from __future__ import annotations

from collections import deque

from ..model import NOTE, WARNING, Issue
from .ciphers import Aead13, record_cipher
from .crypto import CryptoUnavailable
from .handshake import (CLIENT_HELLO, ENCRYPTED_EXTENSIONS, FINISHED, KEY_UPDATE, MAX_MESSAGE,
                        SERVER_HELLO, Hello, parse_encrypted_extensions, parse_hello)
from .kdf import key_block12, next_secret13, traffic_keys13
from .keylog import CLIENT_AP, CLIENT_HS, CLIENT_RANDOM, SERVER_AP, SERVER_HS
from .stream import MAX_BAD_SHOWN
from .suites import SUITES, suite_name, version_name

TLS12, TLS13 = 0x0303, 0x0304
MAX_SECRETS = 64          # traffic secrets tried on a mid-stream TLS 1.3 start, per direction
MAX_FIRST_SEQ = 32        # sequence numbers tried with each
MIDSTREAM_RECORDS = 4     # records of a direction tried before giving up
RECORD_LOG = 4096         # records remembered per direction when the layer keeps them
_NAMES = ("client", "server")
_ALERTS = {0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac",
           40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate",
           44: "certificate_revoked", 45: "certificate_expired", 46: "certificate_unknown",
           47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied", 50: "decode_error",
           51: "decrypt_error", 70: "protocol_version", 71: "insufficient_security",
           80: "internal_error", 86: "inappropriate_fallback", 90: "user_canceled",
           109: "missing_extension", 110: "unsupported_extension", 112: "unrecognized_name",
           116: "certificate_required", 120: "no_application_protocol"}


class TlsConnection:
    """The TLS state of one connection (also `Connection.tls`: the TLS columns)."""

    __slots__ = ("layer", "connection_id", "sink", "streams", "keys", "client_random", "version",
                 "suite", "sni", "alpn", "etm", "record_version", "hello_ts", "app_ts",
                 "decrypted", "server_hello", "server_random", "_kl_version", "_open",
                 "_first_skip", "_gave_up", "_midstream_random", "_limit_noted", "record_log",
                 "_unsupported_noted", "_no_server_hello")

    def __init__(self, layer, connection, sink):
        self.layer = layer
        self.connection_id = connection.connection_id
        self.sink = sink
        self.streams = [None, None]
        self.keys = [None, None]       # per direction: (cipher, next_cipher, pending, secret)
        self.client_random = None
        self.version = None            # negotiated protocol version (0x0303, 0x0304)
        self.suite = None              # cipher suite code
        self.sni = None
        self.alpn = None
        self.etm = False
        self.record_version = None     # the record layer's version once known
        self.hello_ts = None           # the ClientHello's time
        self.app_ts = None             # the first application data's time
        self.decrypted = False
        self.server_hello = False
        self.server_random = None
        self._kl_version = -1
        self._open = 0
        self._first_skip = None        # packet of the first record not decrypted for want of keys
        self._gave_up = False
        self._midstream_random = None
        self._no_server_hello = False  # the server protected a record before any ServerHello
        self._limit_noted = False
        self._unsupported_noted = False
        # per direction, the last application data records: (plaintext offset, plaintext
        # length, sequence number, first packet, last packet), when the layer keeps them
        self.record_log = ([deque(maxlen=RECORD_LOG), deque(maxlen=RECORD_LOG)]
                           if layer.keep_records else None)
        connection.tls = self

    # What a copy keeps (a worker process hands its connections to the parent: --jobs): the
    # facts behind the columns, not the live state (layer, sink, streams, keys).
    _PICKLED = ("connection_id", "client_random", "version", "suite", "sni", "alpn", "etm",
                "record_version", "hello_ts", "app_ts", "decrypted", "server_hello",
                "server_random")

    def __getstate__(self):
        return {k: getattr(self, k) for k in self._PICKLED}

    def __setstate__(self, state):
        for k in self.__slots__:
            setattr(self, k, None)
        for k, v in state.items():
            setattr(self, k, v)

    # -- columns ---------------------------------------------------------------------------------

    @property
    def version_name(self):
        return version_name(self.version)

    @property
    def cipher_name(self):
        return suite_name(self.suite)

    @property
    def handshake_ms(self):
        """ClientHello to the first application data, when both were seen (without keys, TLS
        1.2 only: TLS 1.3 hides which records are application data)."""
        if self.hello_ts is None or self.app_ts is None:
            return None
        return (self.app_ts - self.hello_ts) / 1e6

    def records_of(self, direction, start, length):
        """The logged records that carried plaintext bytes [start, start + length) of a
        direction (see record_log), oldest first."""
        if self.record_log is None:
            return []
        end = start + length
        return [r for r in self.record_log[direction] if r[0] < end and r[0] + r[1] > start]

    # -- from the streams ------------------------------------------------------------------------

    def attach(self, stream):
        self.streams[stream.direction] = stream
        self._open += 1
        keys = self.keys[stream.direction]
        if keys is not None:
            self._apply(stream, keys)

    def issue(self, stream, code, severity, detail, pkt, offset):
        if self.sink is not None:
            self.sink.issue(Issue(code, severity, detail, self.connection_id, pkt, offset))

    def first_application_data(self, ts):
        self.decrypted = True
        if self.app_ts is None:
            self.app_ts = ts

    def message(self, stream, mtype, body, pkt, ts):
        d = stream.direction
        try:
            if mtype == CLIENT_HELLO and d == 0:
                h = parse_hello(mtype, body)
                if self.hello_ts is None:
                    self.hello_ts = ts
                self.client_random = h.random
                self.sni = h.sni
                kl = self.layer.keylog
                if kl.secrets(h.random) is not None:   # (bounded by the key log's size)
                    kl.matched.add(h.random)
            elif mtype == SERVER_HELLO and d == 1:
                h = parse_hello(mtype, body)
                self.version = h.version
                if h.retry:
                    return   # HelloRetryRequest: a second ClientHello and ServerHello follow
                self.suite = h.suite
                self.server_random = h.random
                self.etm = h.etm
                if h.alpn:
                    self.alpn = h.alpn
                self.server_hello = True
                self.record_version = TLS12 if h.version >= TLS12 else h.version
                self.derive(pkt)
            elif mtype == ENCRYPTED_EXTENSIONS and d == 1:
                h = Hello()
                parse_encrypted_extensions(body, h)
                if h.alpn:
                    self.alpn = h.alpn
            elif mtype == FINISHED and self.version == TLS13:
                stream.to_app()
            elif mtype == KEY_UPDATE and self.version == TLS13:
                self._key_update(stream)
        except ValueError:
            self.issue(stream, "tls.bad_handshake", WARNING,
                       f"malformed TLS handshake message {mtype} from the {_NAMES[d]}", pkt, None)

    def alert(self, stream, body, pkt):
        if len(body) < 2 or body[1] == 0:
            return   # close_notify: the normal end
        level = "fatal" if body[0] == 2 else "warning"
        name = _ALERTS.get(body[1], str(body[1]))
        self.issue(stream, "tls.alert", WARNING if level == "fatal" else NOTE,
                   f"{level} TLS alert {name} from the {_NAMES[stream.direction]}", pkt, None)

    def awaiting_keys(self, stream):
        """Should a protected record wait: the ClientHello was seen, the ServerHello not yet,
        and the server's direction is still open. A protected record of the server's own says
        its ServerHello will not come (the capture lost it): the client's records wait no
        more, and TLS 1.3 traffic secrets of the client random are tried on both directions
        (late_keys)."""
        if self.server_hello or self.client_random is None or self._no_server_hello:
            return False
        if stream.direction == 1:
            self._no_server_hello = True
            if self.layer.keylog.secrets(self.client_random) is not None:
                self._midstream_random = self.client_random
            client = self.streams[0]
            if client is not None and client.held:
                client.release()
            return False
        server = self.streams[1]
        return server is None or server._state != 4   # _DONE

    def late_keys(self, stream, rtype, rver, body):
        """Keys for a protected record of a direction that has none: the key log grew since
        the handshake (live), or the capture started after the handshake (TLS 1.3)."""
        kl = self.layer.keylog
        if self.client_random is not None:
            if self.server_hello:
                if kl.version != self._kl_version:
                    self.derive(None, late=True)
                    return stream.cipher
                return None
            known = True   # no ServerHello (awaiting_keys): its random's TLS 1.3 secrets
        elif self.server_hello and self.version == TLS12:
            return self._without_client_hello12(stream, rtype, rver, body)
        else:
            # past its own tries, a direction still tries the client random the other one
            # found: its first records may have been handshake records, which no traffic
            # secret opens (a capture that lost the ClientHello but saw the server's flight)
            known = stream.probes >= MIDSTREAM_RECORDS
        if (rtype != 23 or self._gave_up or stream.probes >= 2 * MIDSTREAM_RECORDS
                or known and self._midstream_random is None):
            return None
        stream.probes += 1
        return self._midstream(stream, rtype, rver, body, known)

    def no_keys(self, stream, pkt):
        """A protected record went by undecrypted for want of keys (reported at the end)."""
        if self._first_skip is None:
            self._first_skip = pkt

    def gave_up(self, stream):
        self._gave_up = True

    def stream_done(self, stream, pkt):
        self._open -= 1
        if self._open > 0:
            return
        skipped = [s for s in self.streams if s is not None and s.skipped]
        if skipped and not self.decrypted:
            self.layer.undecrypted += 1
        for s in self.streams:
            if s is None:
                continue
            if s.bad > MAX_BAD_SHOWN:
                self.issue(s, "tls.bad_record", WARNING,
                           f"{s.bad - MAX_BAD_SHOWN} more {_NAMES[s.direction]} records did not "
                           f"authenticate (only the first {MAX_BAD_SHOWN} are listed)", pkt, None)
            if s.msgs.too_large:
                self.issue(s, "tls.handshake_limit", NOTE,
                           f"{s.msgs.too_large} {_NAMES[s.direction]} handshake messages over "
                           f"{MAX_MESSAGE} bytes not read", pkt, None)
        if skipped and not self._unsupported_noted:
            cr = self.client_random.hex() if self.client_random is not None else None
            why = ("the ServerHello is not in the capture" if self._no_server_hello
                   and self._midstream_random is not None else
                   f"no key log line for client random {cr}" if cr is not None else
                   "its handshake, whose ClientHello the capture lacks, before the application "
                   "data a key log secret opened" if self.decrypted else
                   "the capture starts after the handshake and no key log secret opens it")
            dirs = " and ".join(_NAMES[s.direction] for s in skipped)
            n = sum(s.skipped for s in skipped)
            self.issue(stream, "tls.no_keys", WARNING,
                       f"{n} {dirs} TLS records not decrypted ({self.version_name or 'TLS'}, "
                       f"SNI {self.sni or '-'}, cipher {self.cipher_name or '-'}): {why}",
                       self._first_skip, None)
        # the connection is over: no cycle left (its columns stay readable)
        self.streams = [None, None]
        self.sink = None

    # -- keys ------------------------------------------------------------------------------

    def derive(self, pkt, late=False):
        """Keys from the key log, once both hellos are known."""
        kl = self.layer.keylog
        self._kl_version = kl.version
        suite = SUITES.get(self.suite)
        if self.version not in (TLS12, TLS13):
            self._unsupported(f"{self.version_name} is not decrypted (TLS 1.2 and 1.3 are)", pkt)
            return self._release()
        if suite is None or suite.tls13 != (self.version == TLS13):
            self._unsupported(f"cipher suite {self.cipher_name} is not decrypted", pkt)
            return self._release()
        secrets = kl.secrets(self.client_random) if self.client_random is not None else None
        if not secrets:
            return self._release()
        try:
            if self.version == TLS12:
                master = secrets.get(CLIENT_RANDOM)
                if master is None:
                    return self._release()
                (cm, ck, civ), (sm, sk, siv) = key_block12(suite, master, self.client_random,
                                                           self.server_random)
                keys = [(None, None, record_cipher(suite, ck, civ, cm, self.etm), None),
                        (None, None, record_cipher(suite, sk, siv, sm, self.etm), None)]
            else:
                keys = []
                for hs_label, ap_label in ((CLIENT_HS, CLIENT_AP), (SERVER_HS, SERVER_AP)):
                    hs, ap = secrets.get(hs_label), secrets.get(ap_label)
                    keys.append((_cipher13(suite, hs) if hs else None,
                                 _cipher13(suite, ap) if ap else None, None, ap))
        except CryptoUnavailable as exc:
            self.layer.crypto_missing(self, exc, pkt)
            return self._release()
        self.keys = keys
        for stream in self.streams:
            if stream is not None:
                self._apply(stream, keys[stream.direction], late)
        self._release()

    def _apply(self, stream, keys, late=False):
        cipher, next_cipher, pending, secret = keys
        if pending is not None:            # TLS 1.2
            stream.pending = pending
            if stream.ccs:
                stream.cipher = pending    # keys found after its ChangeCipherSpec: seq counted
        else:
            stream.secret = secret
            if late:
                # the handshake went by undecrypted: find where the application keys start
                stream.next_cipher = None
                stream.set_keys(next_cipher, 0, known=False)
            else:
                stream.cipher = cipher
                stream.next_cipher = next_cipher
                stream.seq = 0

    def _release(self):
        for stream in self.streams:
            if stream is not None and stream.held:
                stream.release()

    def _unsupported(self, why, pkt):
        self._unsupported_noted = True
        self.issue(self.streams[1] or self.streams[0], "tls.unsupported", WARNING,
                   f"TLS connection not decrypted: {why}", pkt, None)

    def _key_update(self, stream):
        suite = SUITES.get(self.suite)
        if stream.secret is None or suite is None:
            return
        stream.secret = next_secret13(suite, stream.secret)
        stream.set_keys(_cipher13(suite, stream.secret), 0)

    def _without_client_hello12(self, stream, rtype, rver, body):
        """Keys for a TLS 1.2 record whose connection's ClientHello the capture lacks (lost, or
        the capture started between the hellos): the master secrets no handshake named, each
        with the ServerHello's random, tried on the record (numbered from its direction's
        ChangeCipherSpec); the one that opens it names the client random, and the keys of both
        directions follow as from a ClientHello."""
        if stream.probes >= MIDSTREAM_RECORDS or not stream.ccs or self._gave_up:
            return None
        stream.probes += 1
        suite = SUITES.get(self.suite)
        if suite is None or suite.tls13:
            return None
        kl = self.layer.keylog
        try:
            for cr, master in kl.unmatched(CLIENT_RANDOM)[:MAX_SECRETS]:
                mac, key, iv = key_block12(suite, master, cr, self.server_random)[stream.direction]
                c = record_cipher(suite, key, iv, mac, self.etm)
                if c.open(stream.seq, rtype, rver, body) is not None:
                    self.client_random = cr
                    kl.matched.add(cr)
                    self.issue(stream, "tls.midstream", NOTE,
                               f"TLS 1.2 connection without its ClientHello in the capture: "
                               f"decrypted with the master secret of client random {cr.hex()}",
                               None, None)
                    self.derive(None)
                    return stream.cipher
        except CryptoUnavailable as exc:
            self.layer.crypto_missing(self, exc, None)
        return None

    def _midstream(self, stream, rtype, rver, body, known_only=False):
        """Keys for a TLS 1.3 record of a direction joined after the handshake: the traffic
        secret of the client random found on the other direction, then (unless known_only)
        the key log's secrets no handshake in the capture named."""
        kl = self.layer.keylog
        label = (CLIENT_AP, SERVER_AP)[stream.direction]
        cands = []
        if self._midstream_random is not None:
            s = kl.secrets(self._midstream_random)
            if s and label in s:
                cands.append((self._midstream_random, s[label]))
        unmatched = [] if known_only else kl.unmatched(label)
        if len(unmatched) > MAX_SECRETS and not self._limit_noted:
            self._limit_noted = True
            self.issue(stream, "tls.secrets_limit", NOTE,
                       f"{len(unmatched)} unmatched TLS 1.3 traffic secrets in the key log: "
                       f"the newest {MAX_SECRETS} tried on this mid-stream connection", None, None)
        cands += unmatched[:MAX_SECRETS]
        try:
            for cr, secret in cands:
                for code in ((0x1301, 0x1303) if len(secret) == 32 else (0x1302,)):
                    suite = SUITES[code]
                    c = _cipher13(suite, secret)
                    for seq in range(MAX_FIRST_SEQ):
                        if c.open(seq, rtype, rver, body) is not None:
                            self.version = TLS13
                            self.suite = code
                            self.record_version = TLS12
                            self._midstream_random = cr
                            kl.matched.add(cr)
                            stream.secret = secret
                            stream.set_keys(c, seq)
                            where = ("without its ServerHello in the capture"
                                     if self._no_server_hello else "joined after the handshake")
                            self.issue(stream, "tls.midstream", NOTE,
                                       f"{_NAMES[stream.direction]} TLS 1.3 stream {where}: "
                                       f"decrypted with the traffic secret of client random "
                                       f"{cr.hex()} from record {seq}", None, None)
                            return c
        except CryptoUnavailable as exc:
            self.layer.crypto_missing(self, exc, None)
        return None


def _cipher13(suite, secret):
    key, iv = traffic_keys13(suite, secret)
    return Aead13(suite.kind, key, iv)

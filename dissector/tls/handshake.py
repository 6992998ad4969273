"""Handshake messages: splitting the handshake stream into messages, and reading the hellos (RFC
5246 7.4, RFC 8446 4.1-4.2): random, version (supported_versions), cipher suite, SNI, ALPN,
encrypt_then_mac.

Only the messages the record layer needs are kept (hellos, EncryptedExtensions, Finished,
KeyUpdate); the others (certificates can be large) are skipped by their length unbuffered.
"""
from __future__ import annotations

CLIENT_HELLO, SERVER_HELLO, NEW_SESSION_TICKET = 1, 2, 4
ENCRYPTED_EXTENSIONS, FINISHED, KEY_UPDATE = 8, 20, 24
WANTED = frozenset({CLIENT_HELLO, SERVER_HELLO, ENCRYPTED_EXTENSIONS, FINISHED, KEY_UPDATE})
MAX_MESSAGE = 64 << 10   # a hello or EncryptedExtensions larger than this is not read

EXT_SNI, EXT_ALPN, EXT_ETM, EXT_VERSIONS = 0, 16, 22, 43
# ServerHello.random of a HelloRetryRequest (RFC 8446 4.1.3): SHA-256 of "HelloRetryRequest"
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


class Messages:
    """Handshake messages out of one direction's handshake-type record payloads, in order."""
    __slots__ = ("_hdr", "_type", "_need", "_body", "too_large")

    def __init__(self):
        self._hdr = b""
        self._type = None
        self._need = 0
        self._body = None    # bytearray of a wanted message in progress, else None (skipping)
        self.too_large = 0   # wanted messages over MAX_MESSAGE, skipped

    def feed(self, data):
        """[(type, body bytes)] of the wanted messages these bytes complete."""
        out = []
        pos, n = 0, len(data)
        while pos < n:
            if self._type is None:
                take = min(4 - len(self._hdr), n - pos)
                self._hdr += bytes(data[pos:pos + take])
                pos += take
                if len(self._hdr) < 4:
                    break
                self._type = self._hdr[0]
                self._need = int.from_bytes(self._hdr[1:4], "big")
                self._hdr = b""
                keep = self._type in WANTED
                if keep and self._need > MAX_MESSAGE:
                    self.too_large += 1
                    keep = False
                self._body = bytearray() if keep else None
            take = min(self._need, n - pos)
            if self._body is not None:
                self._body += data[pos:pos + take]
            self._need -= take
            pos += take
            if self._need == 0:
                if self._body is not None:
                    out.append((self._type, bytes(self._body)))
                self._type = self._body = None
        return out

    def reset(self):
        """A hole: whatever message was in progress is lost."""
        self._hdr = b""
        self._type = self._body = None
        self._need = 0


class _Reader:
    __slots__ = ("b", "p", "end")

    def __init__(self, b, p=0, end=None):
        self.b, self.p, self.end = b, p, len(b) if end is None else end

    def take(self, n):
        if self.p + n > self.end:
            raise ValueError("truncated")
        self.p += n
        return self.b[self.p - n:self.p]

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return int.from_bytes(self.take(2), "big")

    def vec(self, width):
        return self.take(int.from_bytes(self.take(width), "big"))

    def left(self):
        return self.end - self.p


class Hello:
    """What a ClientHello or ServerHello says."""
    __slots__ = ("random", "legacy_version", "version", "suites", "suite", "sni", "alpn", "etm",
                 "retry")

    def __init__(self):
        self.random = None
        self.legacy_version = None
        self.version = None      # ServerHello: the negotiated version
        self.suites = ()         # ClientHello: offered
        self.suite = None        # ServerHello: chosen
        self.sni = None
        self.alpn = None         # ClientHello: offered, comma-separated; ServerHello: chosen
        self.etm = False
        self.retry = False       # a HelloRetryRequest


def parse_hello(mtype, body) -> Hello:
    """A ClientHello or ServerHello body; ValueError if malformed."""
    r = _Reader(body)
    h = Hello()
    h.legacy_version = h.version = r.u16()
    h.random = bytes(r.take(32))
    r.vec(1)   # session id
    if mtype == CLIENT_HELLO:
        suites = r.vec(2)
        h.suites = tuple(int.from_bytes(suites[i:i + 2], "big") for i in range(0, len(suites) - 1, 2))
        r.vec(1)   # compression methods
    else:
        h.suite = r.u16()
        r.u8()     # compression method
        h.retry = h.random == HRR_RANDOM
    if r.left() >= 2:
        _extensions(r.vec(2), h, mtype)
    return h


def parse_encrypted_extensions(body, hello: Hello) -> None:
    """TLS 1.3 EncryptedExtensions: the server's ALPN choice travels here."""
    r = _Reader(body)
    _extensions(r.vec(2), hello, ENCRYPTED_EXTENSIONS)


def _extensions(data, h, mtype):
    r = _Reader(data)
    while r.left() >= 4:
        etype = r.u16()
        e = _Reader(r.vec(2))
        if etype == EXT_SNI and mtype == CLIENT_HELLO:
            names = _Reader(e.vec(2))
            while names.left() >= 3:
                kind = names.u8()
                name = names.vec(2)
                if kind == 0:
                    h.sni = bytes(name).decode("utf-8", "replace")
                    break
        elif etype == EXT_ALPN:
            protos = _Reader(e.vec(2))
            names = []
            while protos.left():
                names.append(bytes(protos.vec(1)).decode("utf-8", "replace"))
            h.alpn = ",".join(names)
        elif etype == EXT_VERSIONS and mtype == SERVER_HELLO:
            h.version = e.u16()
        elif etype == EXT_ETM:
            h.etm = True

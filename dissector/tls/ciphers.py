"""Record protection: one object per direction and key that opens a record's body with its
sequence number (RFC 5246 6.2.3, RFC 5288, RFC 7905, RFC 7366, RFC 8446 5.2-5.3).

`open(seq, rtype, version, body)` -> (content type, plaintext: bytes or a memoryview of them) or
None when the record does not
authenticate (wrong key, wrong sequence number, damaged bytes). Each record is opened with one
call into `cryptography` (whole records, never byte by byte). `prefix` is how many bytes of the
body come before the plaintext (explicit nonce or IV): plaintext byte i travelled at body byte
prefix + i, which maps it back to the TCP segment that carried it.
"""
from __future__ import annotations

import struct

from .crypto import aead, cbc_decrypt, hashes, hmac_matches, invalid_tag

_u64 = struct.Struct(">Q").pack
_aad12 = struct.Struct(">QBHH").pack     # seq, type, version, length
_hdr = struct.Struct(">BHH").pack         # type, version, length




class Aead12:
    """TLS 1.2 AES-GCM / AES-CCM (4-byte salt + 8-byte explicit nonce in the record) and
    ChaCha20-Poly1305 (12-byte IV xor the sequence number, nothing in the record)."""
    __slots__ = ("_aead", "_iv", "_explicit", "_tag", "prefix", "overhead", "_bad")

    def __init__(self, kind, key, iv):
        self._aead = aead(kind, key)
        self._explicit = kind != "chacha"
        self._iv = iv if self._explicit else int.from_bytes(iv, "big")
        self._tag = 8 if kind == "ccm8" else 16
        self.prefix = 8 if self._explicit else 0
        self.overhead = self.prefix + self._tag
        self._bad = invalid_tag()

    def open(self, seq, rtype, version, body):
        n = len(body) - self.overhead
        if n < 0:
            return None
        if self._explicit:
            nonce = self._iv + bytes(body[:8])
            data = memoryview(body)[8:]   # not a copy of the record
        else:
            nonce = (self._iv ^ seq).to_bytes(12, "big")
            data = body
        try:
            return rtype, self._aead.decrypt(nonce, data, _aad12(seq, rtype, version, n))
        except self._bad:
            return None


class Aead13:
    """TLS 1.3: the whole record is AEAD-protected, its header is the additional data, and the
    real content type ends the plaintext (after optional zero padding)."""
    __slots__ = ("_aead", "_iv", "_tag", "prefix", "overhead", "_bad")

    def __init__(self, kind, key, iv):
        self._aead = aead(kind, key)
        self._iv = int.from_bytes(iv, "big")
        self._tag = 8 if kind == "ccm8" else 16
        self.prefix = 0
        self.overhead = self._tag + 1
        self._bad = invalid_tag()

    def open(self, seq, rtype, version, body):
        if len(body) < self.overhead:
            return None
        try:
            inner = self._aead.decrypt((self._iv ^ seq).to_bytes(12, "big"), body,
                                       _hdr(rtype, version, len(body)))
        except self._bad:
            return None
        if inner and not inner[-1]:
            inner = inner.rstrip(b"\0")   # zero padding (rare)
        if not inner:
            return None   # no content type: not a valid record
        return inner[-1], memoryview(inner)[:-1]   # a view: the framer copies what it keeps


class Cbc12:
    """TLS 1.2 AES-CBC with HMAC: explicit 16-byte IV, MAC-then-encrypt, or encrypt-then-MAC
    when the encrypt_then_mac extension was negotiated."""
    __slots__ = ("_key", "_mac_key", "_mac", "_mac_len", "_etm", "prefix", "overhead")

    def __init__(self, suite, mac_key, key, etm=False):
        self._key = key
        self._mac_key = mac_key
        self._mac = suite.mac
        self._mac_len = hashes(suite.mac).digest_size
        self._etm = etm
        self.prefix = 16
        self.overhead = 16 + self._mac_len + 1

    def open(self, seq, rtype, version, body):
        m = self._mac_len
        n = len(body)
        if self._etm:
            if n < 32 + m or (n - m) % 16:
                return None
            enc = body[:n - m]
            if not hmac_matches(self._mac, self._mac_key,
                                (_aad12(seq, rtype, version, n - m), enc), body[n - m:]):
                return None
            plain = self._unpad(cbc_decrypt(self._key, bytes(body[:16]), body[16:n - m]))
            return None if plain is None else (rtype, plain)
        if n < 32 or n % 16:
            return None
        inner = self._unpad(cbc_decrypt(self._key, bytes(body[:16]), body[16:]))
        if inner is None or len(inner) < m:
            return None
        data = inner[:len(inner) - m]
        if not hmac_matches(self._mac, self._mac_key,
                            (_aad12(seq, rtype, version, len(data)), data), inner[len(data):]):
            return None
        return rtype, data

    @staticmethod
    def _unpad(p):
        pad = p[-1]
        if pad + 1 > len(p) or p[-pad - 1:] != bytes([pad]) * (pad + 1):
            return None
        return p[:-pad - 1]


def record_cipher(suite, key, iv, mac_key=b"", etm=False):
    """The opener of one direction for a suite and its key material."""
    if suite.tls13:
        return Aead13(suite.kind, key, iv)
    if suite.kind == "cbc":
        return Cbc12(suite, mac_key, key, etm)
    return Aead12(suite.kind, key, iv)

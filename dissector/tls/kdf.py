"""Key derivation: the TLS 1.2 PRF and key block (RFC 5246 section 5 and 6.3) and the TLS 1.3
HKDF-Expand-Label traffic keys (RFC 8446 section 7), on `cryptography`'s HMAC and HKDF."""
from __future__ import annotations

import struct

from .crypto import hashes, hkdf_expand, hmac_digest

KEY_EXPANSION = b"key expansion"


def prf12(hash_name, secret, label, seed, length) -> bytes:
    """TLS 1.2 PRF: P_hash(secret, label + seed) cut to `length` bytes."""
    seed = label + seed
    out = []
    a = seed
    n = 0
    while n < length:
        a = hmac_digest(hash_name, secret, a)
        block = hmac_digest(hash_name, secret, a + seed)
        out.append(block)
        n += len(block)
    return b"".join(out)[:length]


def key_block12(suite, master, client_random, server_random):
    """(client write (MAC key, key, IV), server write (MAC key, key, IV)) of a TLS 1.2 suite.
    AEAD suites have no MAC key and an implicit IV (4 bytes of salt for GCM and CCM, 12 for
    ChaCha20); CBC suites in TLS 1.2 carry their IV in each record."""
    mac_len = hashes(suite.mac).digest_size if suite.kind == "cbc" else 0
    iv_len = {"gcm": 4, "ccm": 4, "ccm8": 4, "chacha": 12}.get(suite.kind, 0)
    size = 2 * (mac_len + suite.key + iv_len)
    kb = prf12(suite.prf, master, KEY_EXPANSION, server_random + client_random, size)
    p = 0

    def take(n):
        nonlocal p
        p += n
        return kb[p - n:p]
    cmac, smac = take(mac_len), take(mac_len)
    ckey, skey = take(suite.key), take(suite.key)
    civ, siv = take(iv_len), take(iv_len)
    return (cmac, ckey, civ), (smac, skey, siv)


def expand_label(hash_name, secret, label: bytes, context: bytes, length: int) -> bytes:
    """HKDF-Expand-Label(secret, label, context, length)."""
    full = b"tls13 " + label
    info = struct.pack(">HB", length, len(full)) + full + bytes([len(context)]) + context
    return hkdf_expand(hash_name, secret, info, length)


def traffic_keys13(suite, secret):
    """(key, iv) of a TLS 1.3 traffic secret."""
    return (expand_label(suite.prf, secret, b"key", b"", suite.key),
            expand_label(suite.prf, secret, b"iv", b"", 12))


def next_secret13(suite, secret):
    """The traffic secret after a KeyUpdate."""
    return expand_label(suite.prf, secret, b"traffic upd", b"", len(secret))

"""The cryptographic primitives, all from the `cryptography` package, imported on first use:
reading plaintext captures, or recognising TLS without keys, never needs it."""
from __future__ import annotations

MISSING = ("decrypting TLS needs the 'cryptography' package: "
           "pip install 'kafka-dissector[tls]' (or pip install cryptography)")


class CryptoUnavailable(RuntimeError):
    """`cryptography` is not installed."""


_mods = None


def _m():
    global _mods
    if _mods is None:
        try:
            from cryptography.hazmat.primitives import hashes as h
            from cryptography.hazmat.primitives import hmac
            from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
            from cryptography.hazmat.primitives.ciphers.aead import (AESCCM, AESGCM,
                                                                     ChaCha20Poly1305)
            from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand
        except ImportError:
            raise CryptoUnavailable(MISSING) from None
        _mods = {"hashes": {"sha1": h.SHA1, "sha256": h.SHA256, "sha384": h.SHA384},
                 "hmac": hmac, "Cipher": Cipher, "AES": algorithms.AES, "CBC": modes.CBC,
                 "AESGCM": AESGCM, "AESCCM": AESCCM, "ChaCha20Poly1305": ChaCha20Poly1305,
                 "HKDFExpand": HKDFExpand}
    return _mods


def available() -> bool:
    try:
        _m()
        return True
    except CryptoUnavailable:
        return False


def hashes(name):
    """An instance of the hash algorithm `name` (sha1, sha256, sha384)."""
    return _m()["hashes"][name]()


def hmac_digest(name, key, data) -> bytes:
    h = _m()["hmac"].HMAC(key, hashes(name))
    h.update(data)
    return h.finalize()


def hkdf_expand(name, prk, info, length) -> bytes:
    return _m()["HKDFExpand"](hashes(name), length, info).derive(prk)


def aead(kind, key):
    """The AEAD object of a suite kind (gcm, chacha, ccm, ccm8) and key; `.decrypt(nonce, data,
    aad)` raises InvalidTag (see `invalid_tag`) when the record does not authenticate."""
    m = _m()
    if kind == "gcm":
        return m["AESGCM"](key)
    if kind == "chacha":
        return m["ChaCha20Poly1305"](key)
    return m["AESCCM"](key, tag_length=8 if kind == "ccm8" else 16)


def invalid_tag():
    from cryptography.exceptions import InvalidTag
    return InvalidTag


def cbc_decrypt(key, iv, data) -> bytes:
    m = _m()
    d = m["Cipher"](m["AES"](key), m["CBC"](iv)).decryptor()
    return d.update(data) + d.finalize()


def hmac_matches(name, key, data_parts, tag) -> bool:
    h = _m()["hmac"].HMAC(key, hashes(name))
    for part in data_parts:
        h.update(part)
    try:
        h.verify(bytes(tag))
        return True
    except Exception:   # cryptography's InvalidSignature
        return False

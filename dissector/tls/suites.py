"""Cipher suites this dissector can decrypt: what each needs (IANA registry facts, RFC 5246,
5288, 5289, 7905, 8446).

kind: "gcm" (AES-GCM), "chacha" (ChaCha20-Poly1305), "ccm" / "ccm8" (AES-CCM, 16/8-byte tag),
"cbc" (AES-CBC with HMAC); key: cipher key bytes; mac: HMAC hash of a CBC suite; prf: the hash of
the TLS 1.2 PRF (and of the TLS 1.3 key schedule).
"""
from __future__ import annotations

from collections import namedtuple

Suite = namedtuple("Suite", "code name tls13 kind key mac prf")

_TABLE = (
    # TLS 1.3
    (0x1301, "TLS_AES_128_GCM_SHA256", True, "gcm", 16, None, "sha256"),
    (0x1302, "TLS_AES_256_GCM_SHA384", True, "gcm", 32, None, "sha384"),
    (0x1303, "TLS_CHACHA20_POLY1305_SHA256", True, "chacha", 32, None, "sha256"),
    (0x1304, "TLS_AES_128_CCM_SHA256", True, "ccm", 16, None, "sha256"),
    (0x1305, "TLS_AES_128_CCM_8_SHA256", True, "ccm8", 16, None, "sha256"),
    # TLS 1.2 AES-GCM
    (0x009C, "TLS_RSA_WITH_AES_128_GCM_SHA256", False, "gcm", 16, None, "sha256"),
    (0x009D, "TLS_RSA_WITH_AES_256_GCM_SHA384", False, "gcm", 32, None, "sha384"),
    (0x009E, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", False, "gcm", 16, None, "sha256"),
    (0x009F, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", False, "gcm", 32, None, "sha384"),
    (0x00A2, "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256", False, "gcm", 16, None, "sha256"),
    (0x00A3, "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384", False, "gcm", 32, None, "sha384"),
    (0x00A8, "TLS_PSK_WITH_AES_128_GCM_SHA256", False, "gcm", 16, None, "sha256"),
    (0x00A9, "TLS_PSK_WITH_AES_256_GCM_SHA384", False, "gcm", 32, None, "sha384"),
    (0xC02B, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", False, "gcm", 16, None, "sha256"),
    (0xC02C, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", False, "gcm", 32, None, "sha384"),
    (0xC02F, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", False, "gcm", 16, None, "sha256"),
    (0xC030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", False, "gcm", 32, None, "sha384"),
    # TLS 1.2 ChaCha20-Poly1305
    (0xCCA8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    (0xCCA9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    (0xCCAA, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    (0xCCAB, "TLS_PSK_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    (0xCCAC, "TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    (0xCCAD, "TLS_DHE_PSK_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    (0xCCAE, "TLS_RSA_PSK_WITH_CHACHA20_POLY1305_SHA256", False, "chacha", 32, None, "sha256"),
    # TLS 1.2 AES-CBC with HMAC (the PRF is SHA-256 unless the suite names SHA-384)
    (0x002F, "TLS_RSA_WITH_AES_128_CBC_SHA", False, "cbc", 16, "sha1", "sha256"),
    (0x0035, "TLS_RSA_WITH_AES_256_CBC_SHA", False, "cbc", 32, "sha1", "sha256"),
    (0x003C, "TLS_RSA_WITH_AES_128_CBC_SHA256", False, "cbc", 16, "sha256", "sha256"),
    (0x003D, "TLS_RSA_WITH_AES_256_CBC_SHA256", False, "cbc", 32, "sha256", "sha256"),
    (0x0033, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA", False, "cbc", 16, "sha1", "sha256"),
    (0x0039, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA", False, "cbc", 32, "sha1", "sha256"),
    (0x0067, "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", False, "cbc", 16, "sha256", "sha256"),
    (0x006B, "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", False, "cbc", 32, "sha256", "sha256"),
    (0xC009, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", False, "cbc", 16, "sha1", "sha256"),
    (0xC00A, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", False, "cbc", 32, "sha1", "sha256"),
    (0xC013, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", False, "cbc", 16, "sha1", "sha256"),
    (0xC014, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", False, "cbc", 32, "sha1", "sha256"),
    (0xC023, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", False, "cbc", 16, "sha256", "sha256"),
    (0xC024, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", False, "cbc", 32, "sha384", "sha384"),
    (0xC027, "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", False, "cbc", 16, "sha256", "sha256"),
    (0xC028, "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", False, "cbc", 32, "sha384", "sha384"),
)

SUITES = {row[0]: Suite(*row) for row in _TABLE}

VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2",
            0x0304: "TLS 1.3"}


def suite_name(code) -> str | None:
    """The IANA name of a cipher suite (known or not), None for None."""
    if code is None:
        return None
    s = SUITES.get(code)
    return s.name if s is not None else f"0x{code:04X}"


def version_name(code) -> str | None:
    if code is None:
        return None
    return VERSIONS.get(code, f"0x{code:04X}")

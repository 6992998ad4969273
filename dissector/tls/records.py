"""TLS record headers: what a plausible one looks like, and finding one in a byte stream (a
capture that starts mid-stream, the bytes after a hole).

A header is content type (20 change_cipher_spec, 21 alert, 22 handshake, 23 application_data,
24 heartbeat), version 3.x and a length no larger than a protected record can be (2^14 + 2048).
"""
from __future__ import annotations

import re

CCS, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
MAX_RECORD = (1 << 14) + 2048     # the largest record body (RFC 5246 6.2.3)
HEADER = 5
CHAIN = 3                         # headers chained by their lengths that make a record stream sure

# a header's first three bytes; the length is checked after the match
_START = re.compile(b"[\x14-\x18]\x03[\x00-\x04]")


def plausible(data, pos, version=None) -> bool:
    """Does a record header start at data[pos] (5 bytes needed)? `version`, when known, is the
    record version the stream uses."""
    if len(data) - pos < HEADER:
        return False
    t, major, minor = data[pos], data[pos + 1], data[pos + 2]
    if not 20 <= t <= 24 or major != 3 or minor > 4:
        return False
    if version is not None and (major << 8 | minor) != version:
        return False
    return (data[pos + 3] << 8 | data[pos + 4]) <= MAX_RECORD


def looks_like_tls(head) -> bool:
    """Whether a stream's first bytes are a TLS record (as its first byte makes impossible a Kafka
    frame size: 0x14-0x18 is a size over 335 MB)."""
    if not head or not 20 <= head[0] <= 24:
        return False
    return len(head) < 2 or head[1] == 3


def find_chain(data, start=0, version=None, chain=CHAIN):
    """(offset, complete) of the first record header in data[start:] that starts a chain: `chain`
    headers each where the previous record ends, or as many as the data holds that reach its end
    exactly (complete=False: more data may refute it). (-1, False) when there is none."""
    n = len(data)
    for m in _START.finditer(data, start):
        p = m.start()
        if not plausible(data, p, version):
            continue
        q = p
        links = 0
        while links < chain and plausible(data, q, version):
            q += HEADER + (data[q + 3] << 8 | data[q + 4])
            links += 1
            if q >= n:
                break
        if links >= chain:
            return p, True
        if n - q < HEADER:   # the data ends before the chain is refuted
            return p, False
    return -1, False

"""Seeds for the fuzz targets that take a connection's TCP segments (atheris_targets.segments):
whole connections of the real captures, and the same conversations over TLS with the key log
that opens them, so that a campaign starts from streams that reach framing, pairing, decoding
and decryption rather than from damage alone.

Input of `segments`: records of SEG (flags with the direction in bit 7, the sequence step, the
payload length) each followed by its payload. A segment's sequence number is its side's previous
one plus its step minus 1024, so a whole stream steps by what the side's previous segment took.
The TLS target's input is a 2-byte length and that much key log text, then the segments.
"""
from __future__ import annotations

import struct
import tempfile
from pathlib import Path

SEG = struct.Struct(">BHH")
PIECE = 1 << 15            # payloads cut to fit the 16-bit step and length
SEED_BYTES = 60_000        # under the campaign's -max_len
SYN, FIN, ACK, PSH = 0x02, 0x01, 0x10, 0x08
# TLS variants, each a decryption path: (version, OpenSSL cipher list or None, encrypt_then_mac)
TLS_VARIANTS = (("1.3", None, True),
                ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", True),
                ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", True),
                ("1.2", "ECDHE-ECDSA-AES256-SHA384", True),
                ("1.2", "ECDHE-ECDSA-AES128-SHA", False))


def encode(segs) -> bytes:
    """The input of `segments` for one connection's (side, flags, payload) in order, whole:
    each step is what the side's previous segment took (its payload, and one for SYN or FIN).
    Stops before SEED_BYTES."""
    out = []
    size = 0
    took = [0, 0]
    for side, flags, payload in segs:
        pieces = [payload[k:k + PIECE] for k in range(0, len(payload), PIECE)] or [b""]
        for i, piece in enumerate(pieces):
            f = flags if i == len(pieces) - 1 else flags & ~FIN
            record = SEG.pack(side << 7 | (f & 0x3F), 1024 + took[side], len(piece)) + piece
            if size + len(record) > SEED_BYTES:
                return b"".join(out)
            out.append(record)
            size += len(record)
            took[side] = len(piece) + (1 if f & (SYN | FIN) else 0)
    return b"".join(out)


def connections(pkts, ports):
    """(side, flags, payload) of each TCP connection to one of `ports` among a capture's
    (ts, linktype, data) packets, per connection in the order they appear."""
    from dissector.capture.layers import tcp_segment
    conns = {}
    for _, lt, data in pkts:
        seg = tcp_segment(lt, data)
        if seg is None or isinstance(seg, str):
            continue
        side = 0 if seg[3] in ports else 1
        client = (seg[0], seg[2]) if side == 0 else (seg[1], seg[3])
        conns.setdefault(client, []).append((side, seg[6], bytes(seg[7])))
    return list(conns.values())


def tls_wires(plain, port, directory, variants=TLS_VARIANTS, first=3):
    """(name, key log text, TLS wire: tlsgen.tls_wire) of the `first` conversations of capture
    `plain` on `port` in each TLS variant, the key log being the one the client wrote. Needs
    `cryptography` and dpkt."""
    from tests.tls import tlsgen
    out = []
    convs = tlsgen.conversations(plain, port)[:first]
    for version, ciphers, etm in variants:
        keys = Path(tempfile.mkstemp(dir=directory, suffix=".keys")[1])
        client, server = tlsgen.contexts(keys, version, ciphers, directory, etm)
        wires = [tlsgen.tls_wire(c, client, server) for c in convs]
        text = keys.read_bytes()
        kind = f"tls{version}-{ciphers or 'default'}-{'etm' if etm else 'mte'}"
        out += [(f"{plain.stem}-{kind}-{i}", text, wire) for i, wire in enumerate(wires)]
    return out


def tls_seed(text, wire) -> bytes:
    """The TLS target's input: key log `text`, then a connection carrying `wire` (a TCP
    handshake, the TLS chunks in MSS-sized segments, FINs)."""
    from tests.tls.tlsgen import MSS
    segs = [(0, SYN, b""), (1, SYN | ACK, b""), (0, ACK, b"")]
    segs += [(d, PSH | ACK, data[k:k + MSS]) for d, data in wire for k in range(0, len(data), MSS)]
    segs += [(0, FIN | ACK, b""), (1, FIN | ACK, b"")]
    return len(text).to_bytes(2, "big") + text + encode(segs)

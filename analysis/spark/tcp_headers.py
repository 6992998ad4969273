"""The header fast path of the extract stage, for a chunk of packets at once (numpy).

The shape of nearly every packet, as dissector.capture reads it fast: a fixed-size link header
with its IPv4 tag, then IPv4 without options or fragmentation, a complete TCP header, the IP
length within the captured bytes. Its fields are gathered for every such packet of the chunk
in one go; the rest are left to the general parser (dissector.capture.layers.tcp_segment).
"""
from __future__ import annotations

import numpy as np

from dissector.capture.fast import LINKS as _LINKS   # (IPv4 offset, tag offset, tags)
from dissector.tcp.reassembly import ZERO_WINDOW

_EMPTY = {"packet": np.int64, "ts": np.int64, "at": np.int64, "n": np.uint32,
          "seq": np.uint32, "ack": np.uint32, "flags": np.uint16, "lo": np.uint64,
          "hi": np.uint64, "up": bool}


def _be(h, at, size):
    """Big-endian unsigned field of `size` bytes at column `at` of every row of h."""
    return np.ascontiguousarray(h[:, at:at + size]).view(">u%d" % size)[:, 0]


def fast_segments(data, starts, stops, ts, linktypes, first_packet, base):
    """(segments, rest) of the packets data[starts[i]:stops[i]] (numbered from first_packet,
    the buffer starting at file offset `base`): the fast-path segments as arrays (packet, ts,
    at: payload offset in the file, n: its length, seq, ack, flags (with ZERO_WINDOW when the
    window is 0), lo/hi: the connection's ends as address << 16 | port in order, up: from lo to
    hi) and the indices of the rest."""
    buf = np.frombuffer(data, np.uint8)
    taken = np.zeros(len(starts), bool)
    parts = []
    for lt in np.unique(linktypes).tolist():
        link = _LINKS.get(lt)
        if link is None:
            continue
        off, tag_at, tags = link
        incl = stops - starts
        cand = np.flatnonzero((linktypes == lt) & (incl >= off + 40))
        if not len(cand):
            continue
        h = buf[starts[cand, None] + np.arange(off + 40)]
        ok = np.zeros(len(cand), bool)   # raw IP: one empty tag, true of every packet
        for tag in tags:
            ok |= (h[:, tag_at:tag_at + len(tag)] == np.frombuffer(tag, np.uint8)).all(axis=1)
        total = _be(h, off + 2, 2).astype(np.int64)
        hl = (h[:, off + 32] >> 2 & 0x3C).astype(np.int64)
        ok &= ((h[:, off] == 0x45) & (h[:, off + 9] == 6) & (h[:, off + 6] & 0x3F == 0)
               & (h[:, off + 7] == 0) & (hl >= 20) & (hl + 20 <= total)
               & (total <= incl[cand] - off))
        i = cand[ok]
        h, total, hl = h[ok], total[ok], hl[ok]
        taken[i] = True
        a = _be(h, off + 12, 4).astype(np.uint64) << 16 | _be(h, off + 20, 2)
        b = _be(h, off + 16, 4).astype(np.uint64) << 16 | _be(h, off + 22, 2)
        parts.append({
            "packet": first_packet + i, "ts": ts[i], "at": base + starts[i] + off + 20 + hl,
            "n": (total - 20 - hl).astype(np.uint32), "seq": _be(h, off + 24, 4),
            "ack": _be(h, off + 28, 4),
            "flags": h[:, off + 33] | (_be(h, off + 34, 2) == 0) * np.uint16(ZERO_WINDOW),
            "lo": np.minimum(a, b),
            "hi": np.maximum(a, b), "up": a < b})
    if not parts:
        segments = {name: np.zeros(0, t) for name, t in _EMPTY.items()}
    elif len(parts) == 1:
        segments = parts[0]
    else:
        segments = {name: np.concatenate([p[name] for p in parts]) for name in _EMPTY}
    return segments, np.flatnonzero(~taken)

"""Pieces of a direction's stream held while looking for a place to resynchronise: tuples of
(bytes, stream offset, packet number, timestamp), as the framer and the TLS record layer keep them."""
from __future__ import annotations


def cut_front(pieces, k):
    """The pieces without their first k bytes (the piece cut in two keeps its packet and time)."""
    for i, (data, off, pkt, ts) in enumerate(pieces):
        n = len(data)
        if k < n:
            rest = pieces[i:]
            if k:
                rest[0] = (data[k:], off + k, pkt, ts)
            return rest
        k -= n
    return []

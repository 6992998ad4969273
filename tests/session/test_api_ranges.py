"""The api version ranges of an ApiVersions answer (session._api_ranges), read once per distinct
answer: the same ranges whatever the correlation id, each answer its own, and the answers kept
bounded however many distinct ones, and however large, a capture holds."""
from __future__ import annotations

import struct

from dissector import session


def _uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def answer(corr, ranges, version=3, error=0):
    """An ApiVersions response (header v0) with `ranges` {key: (min, max)}."""
    out = struct.pack(">ih", corr, error)
    if version >= 3:
        out += _uvarint(len(ranges) + 1)
        for key, (lo, hi) in ranges.items():
            out += struct.pack(">hhh", key, lo, hi) + b"\0"
        return out + struct.pack(">i", 0) + b"\0"   # throttle, no tags
    out += struct.pack(">i", len(ranges))
    for key, (lo, hi) in ranges.items():
        out += struct.pack(">hhh", key, lo, hi)
    return out + struct.pack(">i", 0)


def test_the_same_answer_read_alike_and_each_answer_its_own():
    a, b = {0: (0, 11), 1: (4, 17)}, {0: (3, 9)}
    for version in (0, 3):
        assert session._api_ranges(answer(1, a, version), version) == a
        assert session._api_ranges(answer(2, a, version), version) == a
        assert session._api_ranges(answer(3, b, version), version) == b
    assert session._api_ranges(answer(4, a, error=35), 3) is None
    tagged = bytearray(answer(5, a))
    tagged[4 + 2 + 1 + 6] = 1   # the first entry has tagged fields: no limits known
    assert session._api_ranges(bytes(tagged), 3) is None


def test_many_distinct_answers_are_kept_bounded():
    for n in range(5 * session._RANGES_KEPT):
        ranges = {0: (0, n % 30000), 1: (1, 2)}
        assert session._api_ranges(answer(n, ranges), 3) == ranges
        assert len(session._RANGES_READ) <= session._RANGES_KEPT
    # a large answer (a hostile one can be a frame's size) is read, not kept
    session._RANGES_READ.clear()
    many = {k: (0, k) for k in range(1000)}
    assert session._api_ranges(answer(1, many), 3) == many
    assert not session._RANGES_READ

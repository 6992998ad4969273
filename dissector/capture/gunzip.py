"""A gzip-compressed capture read as a stream that loses nothing before damage.

gzip.GzipFile raises EOFError from inside a read when the file is cut, and the bytes that
read had already decompressed (up to a whole chunk: hundreds of packets) go with it. Here
readinto returns everything that decompresses first; only the call after it raises EOFError
(Chunks turns that into "truncated gzip stream"), or the zlib error of damaged data. Concatenated members are read on, zero
padding after a member is skipped, each member's CRC and length are checked by zlib, and
output is produced at most as much as asked for at a time (a gzip bomb is never inflated at
once).
"""
from __future__ import annotations

import zlib

_GZIP = 16 + zlib.MAX_WBITS   # the gzip wrapper (header, CRC-32 and length trailer checked)
_IN = 64 << 10
_SALVAGE = 4 << 20   # at most this much output from the input a zlib error was raised in


class GunzipReader:
    def __init__(self, raw):
        self.raw = raw
        self.d = zlib.decompressobj(_GZIP)
        self.member_start = b""   # the first bytes of a member found after the previous one
        self.pending = b""        # decompressed, not yet handed out
        self.error = None         # raised by the next read: this one returned data first

    def close(self) -> None:
        self.raw.close()

    def _next_member(self) -> bool:
        """After a member: start the next one (False at the end of the file)."""
        rest = self.d.unused_data
        while True:
            rest = rest.lstrip(b"\0")
            if rest:
                break
            rest = self.raw.read(_IN)
            if not rest:
                return False
        if not rest.startswith(b"\x1f\x8b"):
            raise OSError("not a gzipped file after a gzip member")
        self.d = zlib.decompressobj(_GZIP)
        self.member_start = rest
        return True

    def _more(self, limit: int) -> bytes:
        """Up to `limit` decompressed bytes; b"" at the end; EOFError when the file ends inside
        a member (after everything decodable before the cut was returned)."""
        if self.pending:
            out, self.pending = self.pending[:limit], self.pending[limit:]
            return out
        if self.error is not None:
            raise self.error
        while True:
            if self.d.eof:
                if not self._next_member():
                    return b""
                src = self.member_start
            else:
                src = self.d.unconsumed_tail or self.raw.read(_IN)
            if not src:
                self.error = EOFError("compressed file ended before the end-of-stream marker")
                out = self.d.flush()   # what the cut stream still holds
                self.pending = out[limit:]
                return self._more(limit) if not out else out[:limit]
            before = self.d.copy()
            try:
                out = self.d.decompress(src, limit)
            except zlib.error as e:   # damaged (a bad CRC): what came before it still counts
                self.error = e
                out = _salvage(before, src)
                self.pending = out[limit:]
                return out[:limit]
            if out:
                return out

    def readinto(self, view) -> int:
        n, want = 0, len(view)
        while n < want:
            try:
                out = self._more(want - n)
            except (EOFError, OSError, zlib.error) as e:   # cut, or damaged (a bad CRC)
                if n:
                    self.error = e
                    return n   # hand these out; the next call raises
                raise
            if not out:
                break
            view[n:n + len(out)] = out
            n += len(out)
        return n


def _salvage(d, src: bytes) -> bytes:
    """What `d` decompresses from `src` before the error, fed in small pieces."""
    out = []
    size = 0
    for at in range(0, len(src), 512):
        try:
            piece = d.decompress(src[at:at + 512], _SALVAGE - size)
        except zlib.error:
            break
        out.append(piece)
        size += len(piece)
        if size >= _SALVAGE:
            break
    return b"".join(out)

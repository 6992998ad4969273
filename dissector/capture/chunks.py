"""A reused read buffer: the readers unpack records at offsets in it and copy packets out.

Reading each chunk into a fresh bytes object costs page faults on every new allocation
(measured: half the reader's time); one bytearray refilled in place keeps memory flat and warm.
The reader hands on what completed once per chunk, so a chunk's size bounds the exchanges alive
at once: at 4 MiB, a chunk of message-dense traffic kept ~60k objects alive, past the CLI's
young-generation GC threshold (a collection per chunk, ~10% of the bodies level) and out of the
CPU caches; 1 MiB measured 0.85x the CPU of 4 MiB on such traffic and no slower on bulk traffic.
Packets are copied out (`mv[a:b].tobytes()`), never yielded as views: the buffer is overwritten.
"""
from __future__ import annotations

import zlib

from .errors import CaptureError

CHUNK = 1 << 20
SPARE = 1 << 20  # room for the unread tail of a chunk (one record) next to a new chunk


class Chunks:
    """buf[0:end] holds the file from byte `base` on; refill() keeps buf[pos:end] and appends."""
    __slots__ = ("f", "name", "buf", "mv", "end", "base")

    def __init__(self, f, name):
        self.f = f
        self.name = name
        self.buf = bytearray(CHUNK + SPARE)
        self.mv = memoryview(self.buf)
        self.end = 0
        self.base = 0

    def _read(self, view):
        try:
            return self.f.readinto(view) or 0
        except EOFError:
            raise CaptureError(f"{self.name}: truncated gzip stream") from None
        except (OSError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            raise CaptureError(f"{self.name}: read error: {e}") from None

    def refill(self, pos):
        """Drop buf[:pos], read more after the rest; the number of new bytes (0 at the end)."""
        left = self.end - pos
        if left + CHUNK > len(self.buf):  # a record larger than SPARE: grow
            buf = bytearray(left + CHUNK + SPARE)
            buf[:left] = self.mv[pos:self.end]
            self.buf, self.mv = buf, memoryview(buf)
        elif left:
            self.buf[:left] = self.mv[pos:self.end].tobytes()  # the regions may overlap
        self.base += pos
        got = self._read(self.mv[left:left + CHUNK])
        self.end = left + got
        return got

    def skip(self, stop, at):
        """Discard the stream up to buffer offset `stop` (> end) without holding it in memory;
        `at` (the file offset of the skipped block) names the damage if the file ends first."""
        remaining = stop - self.end
        self.base += self.end
        self.end = 0
        while remaining:
            got = self._read(self.mv[:CHUNK])
            if not got:
                raise CaptureError(f"{self.name}: truncated block at byte {at}")
            if got > remaining:
                self.buf[:got - remaining] = self.mv[remaining:got].tobytes()
                self.end = got - remaining
                got = remaining
            remaining -= got
            self.base += got

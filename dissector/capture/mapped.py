"""A capture file read through a memory map: the Chunks interface without the copy.

read() copies every byte of the file from the page cache into the chunk buffer (a fifth of the
header level on a 400 MB capture); a map hands the walker the page cache itself. The window
moves as refill() does (offsets restart at the first byte kept), and the pages behind it are
released every RELEASE bytes, so the resident set stays bounded whatever the file's size.
Only for a plain (not gzip) regular file: files.open_capture decides. Like every reader of a
map, it assumes the file does not shrink while it is read (a capture still being written only
grows: what was there when it was opened is read).
"""
from __future__ import annotations

import mmap
import sys

from . import chunks
from .errors import CaptureError

RELEASE = 16 << 20   # pages behind the window given back this often (resident set bounded)
_ADVISE = hasattr(mmap.mmap, "madvise") and hasattr(mmap, "MADV_DONTNEED")   # Linux, BSDs
# MADV_POPULATE_READ (Linux 5.14; Python names it from 3.12 on): the next chunk's pages mapped
# in one call, not a fault every 16 pages, and before the walk asks for their memory early
# (capture/_walk.c): headers level about 1.02x
_POPULATE = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform == "linux" else None)


class MappedChunks:
    """buf[0:end] holds the file from byte `base` on; refill() keeps buf[pos:end], adds a chunk."""
    __slots__ = ("name", "buf", "mv", "end", "base", "_map", "_size", "_released", "_populate")

    def __init__(self, name, fileno, size):
        self.name = name
        self._map = mmap.mmap(fileno, size, access=mmap.ACCESS_READ)   # OSError: not mappable
        if _ADVISE:
            self._map.madvise(mmap.MADV_SEQUENTIAL)   # read-ahead for a file not yet cached
        self._size = size
        self.mv = self.buf = memoryview(self._map)
        self.base = 0
        self.end = min(chunks.CHUNK, size)
        self._released = 0
        self._populate = _ADVISE and _POPULATE is not None

    def refill(self, pos):
        """Drop buf[:pos], show the next chunk after the rest; the number of new bytes."""
        self._move(pos)
        got = min(self.end + chunks.CHUNK, len(self.mv)) - self.end
        self.end += got
        if self._populate:
            self._map_next()
        return got

    def _map_next(self):
        """Map the pages of the chunk after the window (page-aligned from its first byte)."""
        start = self.base + self.end
        start -= start % mmap.PAGESIZE
        length = min(chunks.CHUNK, self._size - start)
        if length > 0:
            try:
                self._map.madvise(_POPULATE, start, length)
            except OSError:   # an older kernel: pages are mapped as they are first touched
                self._populate = False

    def skip(self, stop, at):
        """Discard the stream up to buffer offset `stop` (> end); `at` (the file offset of the
        skipped block) names the damage if the file ends first."""
        if self.base + stop > self._size:
            raise CaptureError(f"{self.name}: truncated block at byte {at}")
        self._move(stop)
        self.end = min(chunks.CHUNK, len(self.mv))

    def _move(self, pos):
        self.base += pos
        self.end -= pos
        self.mv = self.buf = self.mv[pos:]
        behind = self.base - self._released
        if behind >= RELEASE and _ADVISE:   # whole pages only
            length = behind - behind % mmap.PAGESIZE
            self._map.madvise(mmap.MADV_DONTNEED, self._released, length)
            self._released += length

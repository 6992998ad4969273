"""Pieces the workers write into the output file themselves, each at the place the parent gives.

A parallel run's rendered pieces would otherwise all go through the parent: pickled, piped,
unpickled, joined and written by one process. For the records table that is most of the text
(680 MB of CSV from the 400 MB benchmark capture): the parent took more CPU than either worker
and `records --jobs 2` ran slower than one process. With Plan.out (a regular file), a worker's
pieces are (what the parent's `write` gets, bytes): it sends the sizes, the parent places the
chunk's pieces one after another in exchange order and sends each worker the file offsets of
its own, and the worker writes them there (os.pwritev: no copy, no seek shared between
processes) and says so. One worker writes at a time: the parent hands out the next offsets once
the last are written (driver._Parent.next_turn), since two processes writing into one file at
once wait on its lock; a worker whose pieces of worker.MAX_HELD steps wait for their turn waits
too, rather than reading on.

The parent also has the file system allocate each chunk's place in the file before it hands out
the offsets (`reserver`): two workers extending one file side by side spent each 0.27-0.30 s of
CPU writing their 341 MB of the records table, where one process writes all 680 MB in 0.18 s
(ext4 allocating the blocks as the file grows, for both at once); allocated ahead, 0.19-0.21 s.
"""
from __future__ import annotations

import os
from itertools import accumulate

IOV_MAX = 1024   # buffers per pwritev call (POSIX's minimum of the limit; Linux's)


def offsets(sizes, at) -> list:
    """The file offset of each piece of `sizes` written one after another from `at`."""
    return list(accumulate(sizes, initial=at))[:-1]


def write_at(fd, pieces, places) -> None:
    """Write each bytes of `pieces` at its file offset in `places` (ascending), adjacent ones
    in one call."""
    run, start, end = [], 0, None
    for data, at in zip(pieces, places):
        if not data:
            continue
        if at != end or len(run) == IOV_MAX:
            _write(fd, run, start)
            run, start = [], at
        run.append(data)
        end = at + len(data)
    _write(fd, run, start)


def _write(fd, run, at) -> None:
    if not run:
        return
    total = sum(map(len, run))
    done = os.pwritev(fd, run, at)
    if done < total:   # a short write: the rest from where it stopped
        rest = memoryview(b"".join(run))[done:]
        while rest:
            n = os.pwrite(fd, rest, at + done)
            rest, done = rest[n:], done + n


def reserver():
    """reserve(fd, at, size): have the file system allocate bytes [at, at + size) of the file
    (read as zeros until written). Through fallocate(2) itself: os.posix_fallocate would, on a
    file system without it, write a zero into every block (glibc's fallback). Once a call fails
    (no such call, a file system without it, a full disk: the writes then say what is wrong),
    later calls do nothing. Returns whether the bytes were reserved."""
    call = _fallocate()

    def reserve(fd, at, size) -> bool:
        nonlocal call
        if call is None or size <= 0:
            return False
        if call(fd, 0, at, size) != 0:
            call = None
        return call is not None
    return reserve


def _fallocate():
    """The C library's fallocate (its 64-bit offsets' name where it has one), or None."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
    except (ImportError, OSError):
        return None
    call = getattr(libc, "fallocate64", None) or getattr(libc, "fallocate", None)
    if call is None:
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    call.restype = ctypes.c_int
    return call

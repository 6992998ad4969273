"""A frame's message bytes, filled in place as its segments arrive (the framer's frames that
span segments, and the file reader's runs, which copy their segments straight in).

`frame_buffer(n)` a buffer of n bytes; `fill(buf, at, src, start, stop)` writes src[start:stop]
at buf[at:] (ValueError out of bounds); `finished(buf)` the message as bytes.
`keep_freed_memory()` has the C library keep freed buffers for the next ones (a process-wide
setting, which the CLI makes); whether it could.
dissector/_framebuf.c is the same compiled (its buffer is a bytes object filled in place, so
`finished` copies nothing), used when built; the functions here are its twins, a bytearray
copied once when finished.
"""
from __future__ import annotations


def py_frame_buffer(n):
    if n < 0:
        raise ValueError("negative frame size")
    return bytearray(n)


def py_fill(buf, at, src, start, stop):
    if not 0 <= start <= stop <= len(src) or not 0 <= at <= len(buf) - (stop - start):
        raise ValueError("fill: out of bounds")
    buf[at:at + stop - start] = memoryview(src)[start:stop]


def py_finished(buf):
    return bytes(buf)


def py_keep_freed_memory():
    return False


try:
    from ._framebuf import fill, finished, frame_buffer, keep_freed_memory
    COMPILED = True
except ImportError:   # no compiler where it was installed
    frame_buffer, fill, finished = py_frame_buffer, py_fill, py_finished
    keep_freed_memory = py_keep_freed_memory
    COMPILED = False

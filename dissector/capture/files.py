"""Open a capture file (plain or gzip) and read its packets, whatever the format.

`read_packets(path)` checks the file eagerly (a missing file or one that is not a capture raises
CaptureError at the call) and returns a lazy iterator of (packet_no, ts_ns, linktype, data).
The file is read in large chunks so memory stays flat on multi-GB captures.
"""
from __future__ import annotations

import os
import stat

from .chunks import CHUNK, Chunks
from .mapped import MappedChunks
from .errors import CaptureError
from .pcap import PCAP_MAGICS, pcap_packets
from .pcapng import SHB_MAGIC, pcapng_packets
from .rewound import Rewound

__all__ = ["CaptureError", "open_capture", "read_packets"]

GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"   # the capture's path for standard input (a pipe from tcpdump -w -)


def _guarded(gen, f):
    """Close the file when the packets are exhausted, fail, or the consumer stops."""
    try:
        yield from gen
    finally:
        f.close()


MAP_FROM = CHUNK   # files this large are mapped (mapped.py), smaller ones read


def _mapped(f, name):
    """MappedChunks over a regular file of MAP_FROM bytes or more, else None (also where it
    cannot be mapped: a file system without mmap, or no address space left): the file is then
    read in chunks."""
    try:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size < MAP_FROM:
            return None
        return MappedChunks(name, f.fileno(), st.st_size)
    except (OSError, ValueError, OverflowError):
        return None


def open_capture(path):
    """(file, Chunks with the first chunk read, "pcap" or "pcapng"): the file checked eagerly,
    CaptureError if it cannot be opened or is not a capture. The caller closes the file."""
    name = str(path)
    stdin = name == STDIN
    if stdin:
        name = "standard input"
    try:
        f = open(0 if stdin else path, "rb", buffering=0, closefd=not stdin)
    except OSError as e:
        raise CaptureError(f"{name}: {e.strerror or e}") from None
    try:
        try:
            magic = f.read(2) or b""
            if len(magic) == 1:   # a pipe may hand out one byte at first
                magic += f.read(1) or b""
            if f.seekable():
                f.seek(0)
            else:
                f = Rewound(f, magic)
        except OSError as e:
            raise CaptureError(f"{name}: {e.strerror or e}") from None
        if magic == GZIP_MAGIC:
            from .gunzip import GunzipReader   # here: plain captures (the usual) spare it
            f = GunzipReader(f)
            chunks = Chunks(f, name)
        else:
            chunks = _mapped(f, name) or Chunks(f, name)
        while chunks.end < 32 and chunks.refill(0):  # gzip may hand out short pieces
            pass
        magic = bytes(chunks.mv[:min(4, chunks.end)])
        if magic in PCAP_MAGICS:
            return f, chunks, "pcap"
        if magic == SHB_MAGIC:
            return f, chunks, "pcapng"
        if not chunks.end:
            raise CaptureError(f"{name}: empty file, not a pcap or pcapng file")
        raise CaptureError(f"{name}: not a pcap or pcapng file")
    except BaseException:
        f.close()
        raise


def read_packets(path):
    """Iterate over (packet_no, ts_ns, linktype, data) of a pcap or pcapng file, gzip or not.

    packet_no counts from 1; ts_ns is nanoseconds since the epoch (UTC); data is the captured
    bytes (possibly cut by the snaplen). A damaged tail yields every complete packet, then raises.
    """
    f, chunks, kind = open_capture(path)
    try:
        gen = pcap_packets(chunks) if kind == "pcap" else pcapng_packets(chunks)
    except BaseException:
        f.close()
        raise
    return _guarded(gen, f)

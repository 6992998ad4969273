"""Open a capture file (plain or gzip) and read its packets, whatever the format.

`read_packets(path)` checks the file eagerly (a missing file or one that is not a capture raises
CaptureError at the call) and returns a lazy iterator of (packet_no, ts_ns, linktype, data).
The file is read in large chunks so memory stays flat on multi-GB captures.
"""
from __future__ import annotations

import gzip
import zlib

from .errors import CaptureError
from .pcap import PCAP_MAGICS, pcap_packets
from .pcapng import SHB_MAGIC, pcapng_packets

__all__ = ["CaptureError", "read_packets"]

CHUNK = 4 << 20
GZIP_MAGIC = b"\x1f\x8b"


def _chunk_reader(f, name):
    """A read() returning the next chunk (b"" at the end) whose failures are CaptureErrors."""
    def read():
        try:
            return f.read(CHUNK)
        except EOFError:
            raise CaptureError(f"{name}: truncated gzip stream") from None
        except (OSError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            raise CaptureError(f"{name}: read error: {e}") from None
    return read


def _guarded(gen, f):
    """Close the file when the packets are exhausted, fail, or the consumer stops."""
    try:
        yield from gen
    finally:
        f.close()


def read_packets(path):
    """Iterate over (packet_no, ts_ns, linktype, data) of a pcap or pcapng file, gzip or not.

    packet_no counts from 1; ts_ns is nanoseconds since the epoch (UTC); data is the captured
    bytes (possibly cut by the snaplen). A damaged tail yields every complete packet, then raises.
    """
    name = str(path)
    try:
        f = open(path, "rb", buffering=0)
    except OSError as e:
        raise CaptureError(f"{name}: {e.strerror or e}") from None
    try:
        try:
            magic = f.read(2)
            f.seek(0)
        except OSError as e:
            raise CaptureError(f"{name}: {e.strerror or e}") from None
        if magic == GZIP_MAGIC:
            f = gzip.GzipFile(fileobj=f, mode="rb")
        read = _chunk_reader(f, name)
        head = read()
        while 0 < len(head) < 32:  # gzip may hand out short pieces
            more = read()
            if not more:
                break
            head += more
        if head[:4] in PCAP_MAGICS:
            gen = pcap_packets(read, head, name)
        elif head[:4] == SHB_MAGIC:
            gen = pcapng_packets(read, head, name)
        elif not head:
            raise CaptureError(f"{name}: empty file, not a pcap or pcapng file")
        else:
            raise CaptureError(f"{name}: not a pcap or pcapng file")
    except BaseException:
        f.close()
        raise
    return _guarded(gen, f)

"""The records of a capture file, a chunk at a time, as numpy arrays for the extract stage.

`chunk_records(chunks, kind)` yields, per chunk of the file read, (buffer, starts, stops, ts,
linktypes): the packets are buffer[starts[i]:stops[i]] until the next chunk is asked for. For
pcap, Python only steps from record to record (one length read each); the timestamps are read
for the whole chunk at once. The records before a damaged one are handed out before the
CaptureError is raised, as the core's readers do.
"""
from __future__ import annotations

import struct
from array import array

import numpy as np

from dissector.capture.errors import CaptureError
from dissector.capture.pcap import MAX_RECORD, pcap_header
from dissector.capture.pcapng import pcapng_batches

_INT64 = (-(1 << 63), (1 << 63) - 1)


def chunk_records(chunks, kind, secrets=None):
    """`secrets(secrets_type, data)`: each pcapng Decryption Secrets Block (pcapng_batches)."""
    return _pcap(chunks) if kind == "pcap" else _pcapng(chunks, secrets)


def _pcap(chunks):
    order, scale, linktype = pcap_header(chunks)
    length = struct.Struct(order + "I").unpack_from
    fields = np.dtype(order + "u4")
    name = chunks.name
    pos = 24
    while True:
        buf, end = chunks.buf, chunks.end
        heads = array("q")
        add = heads.append
        error = None
        while pos + 16 <= end:
            incl = length(buf, pos + 8)[0]
            if incl > MAX_RECORD:
                error = CaptureError(f"{name}: packet record length {incl} too large at byte "
                                     f"{chunks.base + pos}")
                break
            stop = pos + 16 + incl
            if stop > end:
                break
            add(pos)
            pos = stop
        if heads:
            at = np.frombuffer(heads, np.int64)
            data = np.frombuffer(buf, np.uint8)
            h = data[at[:, None] + np.arange(12)].view(fields)   # seconds, fraction, length
            ts = h[:, 0].astype(np.int64) * 1_000_000_000 + h[:, 1].astype(np.int64) * scale
            starts = at + 16
            yield chunks.mv, starts, starts + h[:, 2], ts, np.full(len(at), linktype, np.int64)
        if error is not None:
            raise error
        if not chunks.refill(pos):
            if pos < end:
                raise CaptureError(f"{name}: truncated packet record at byte {chunks.base}")
            return
        pos = 0


def _pcapng(chunks, secrets=None):
    for batch in pcapng_batches(chunks, secrets=secrets):
        if not batch:
            continue
        try:
            rec = np.array(batch, np.int64)
        except OverflowError:   # a timestamp past int64 (a hostile resolution): clamped
            rec = np.array([(min(max(ts, _INT64[0]), _INT64[1]), lt, a, b)
                            for ts, lt, a, b in batch], np.int64)
        yield chunks.mv, rec[:, 2], rec[:, 3], rec[:, 0], rec[:, 1]

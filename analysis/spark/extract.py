"""Extract: one capture file -> runs of TCP segments, one row per run (never one per packet).

A run is a sequence of segments of one direction of one connection whose sequence numbers
continue each other (SYN and FIN count one); the other direction's segments (pure ACKs, mostly)
may come in between. Its payloads are concatenated into one binary value; `meta` keeps, per
segment, what the dissector needs to replay it exactly (packet number, timestamp, payload length,
ack, flags), so the decode stage restores the capture's packet order across directions and runs. Packet numbers here are local to the file; the
job adds the file's offset to make them the global numbers the single-machine path uses.

Packets that are IP but not usable TCP (fragments, truncated headers) are shipped raw (rare), so
the decode stage can hand them to the core and get the very same Issue it reports. Every file
ends with one summary row: packet count, first timestamp and the capture error, if any.

Pure Python and pyarrow: no pyspark here.
"""
from __future__ import annotations

import struct

import pyarrow as pa

from dissector.capture.files import CaptureError, read_packets
from dissector.capture.layers import FIN, SYN, tcp_segment

CHUNK, RAW, SUMMARY = 0, 1, 2   # row kinds

# local packet number, ts_ns, payload length, ack, flags
SEGMENT = struct.Struct("<qqIIB")
MAX_RUN_BYTES = 1 << 20          # a run is closed past this much payload (bounded memory)
MAX_RUN_SEGMENTS = 8192
MAX_OPEN_BYTES = 64 << 20        # all open runs are closed past this much payload held in them
BATCH_BYTES = 32 << 20           # hand a record batch to Spark past this much payload

SCHEMA = pa.schema([
    ("kind", pa.int8()),
    ("file", pa.string()),
    ("key", pa.binary()),        # the connection's endpoints, the same for both directions
    ("packet", pa.int64()),      # local number of the run's first packet
    ("src", pa.binary()),
    ("dst", pa.binary()),
    ("sport", pa.int32()),
    ("dport", pa.int32()),
    ("seq", pa.int64()),         # sequence number of the run's first segment
    ("payload", pa.binary()),    # CHUNK: the payloads back to back; RAW: the packet's bytes
    ("meta", pa.binary()),       # CHUNK: SEGMENT records; RAW: none
    ("linktype", pa.int32()),    # RAW
    ("ts", pa.int64()),          # RAW: the packet's timestamp; SUMMARY: the first timestamp
    ("count", pa.int64()),       # SUMMARY: packets read
    ("error", pa.string()),      # SUMMARY: the capture error that stopped the file
])

_PORT = struct.Struct("!H")


def flow_key(src, sport, dst, dport) -> bytes:
    """The same bytes for both directions of a connection."""
    a = bytes(src) + _PORT.pack(sport)
    b = bytes(dst) + _PORT.pack(dport)
    return a + b if a <= b else b + a


class _Run:
    __slots__ = ("src", "dst", "sport", "dport", "seq", "next_seq", "first", "payload", "meta",
                 "segments")

    def __init__(self, src, dst, sport, dport, seq, first):
        self.src, self.dst, self.sport, self.dport = bytes(src), bytes(dst), sport, dport
        self.seq = self.next_seq = seq
        self.first = first
        self.payload = bytearray()
        self.meta = bytearray()
        self.segments = 0


class _Columns:
    """Column lists of the rows not yet handed out."""

    def __init__(self, file):
        self.file = file
        self.cols = {name: [] for name in SCHEMA.names}
        self.bytes = 0

    def add(self, **values):
        for name, lst in self.cols.items():
            lst.append(values.get(name))

    def batch(self) -> pa.RecordBatch:
        n = len(self.cols["kind"])
        self.cols["file"] = [self.file] * n
        batch = pa.RecordBatch.from_pydict(self.cols, schema=SCHEMA)
        self.cols = {name: [] for name in SCHEMA.names}
        self.bytes = 0
        return batch


def extract_file(path, file=None):
    """Yield record batches (SCHEMA) of the runs, raw packets and summary of one capture file."""
    file = str(path) if file is None else file
    out = _Columns(file)
    runs = {}   # (src, sport, dst, dport) -> the open run of that direction
    held = 0    # payload bytes in open runs
    count = 0
    first_ts = None
    error = None

    def close(run):
        out.add(kind=CHUNK, key=flow_key(run.src, run.sport, run.dst, run.dport),
                packet=run.first, src=run.src, dst=run.dst, sport=run.sport, dport=run.dport,
                seq=run.seq, payload=bytes(run.payload), meta=bytes(run.meta))
        out.bytes += len(run.payload) + len(run.meta)

    pack = SEGMENT.pack
    try:
        for packet_no, ts_ns, linktype, data in read_packets(path):
            count = packet_no
            if first_ts is None:
                first_ts = ts_ns
            seg = tcp_segment(linktype, data)
            if seg is None:
                continue
            if seg.__class__ is str:
                out.add(kind=RAW, packet=packet_no, payload=bytes(data), linktype=linktype,
                        ts=ts_ns)
                continue
            src, dst, sport, dport, seq, ack, flags, payload = seg
            rkey = (src, sport, dst, dport)
            run = runs.get(rkey)
            if run is not None and (run.next_seq != seq or len(run.payload) >= MAX_RUN_BYTES
                                    or run.segments >= MAX_RUN_SEGMENTS):
                close(run)
                held -= len(run.payload)
                run = None
            if run is None:
                run = runs[rkey] = _Run(src, dst, sport, dport, seq, packet_no)
            n = len(payload)
            held += n
            run.payload += payload
            run.meta += pack(packet_no, ts_ns, n, ack, flags)
            run.segments += 1
            run.next_seq = (seq + n + (1 if flags & (SYN | FIN) else 0)) & 0xFFFFFFFF
            if held >= MAX_OPEN_BYTES:
                for run in runs.values():
                    close(run)
                runs.clear()
                held = 0
            if out.bytes >= BATCH_BYTES:
                yield out.batch()
    except CaptureError as exc:
        error = str(exc)
    for run in runs.values():
        close(run)
    out.add(kind=SUMMARY, ts=first_ts, count=count, error=error)
    yield out.batch()


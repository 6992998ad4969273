"""Extract: one capture file -> an index of its TCP segments, a few rows per connection (never one
per packet, and no payload when the decode stage can read it from the file itself).

Rows hold the segments of one connection (both directions), in packet order: `meta` keeps, per
segment, what the dissector needs to replay it exactly (packet number, timestamp, where its
payload is in the file and how long, seq, ack, flags, direction), so the decode stage replays a
connection by putting its rows in packet order (they never interleave) and reads each payload
straight from the file. Packet
numbers here are local to the file; the job adds the file's offset to make them the global
numbers the single-machine path uses.

A payload is carried in the row itself (`payload`, offset -1 in `meta`) when the file cannot be
read at an offset by the decode stage (gzip, or a URI Python cannot open: hdfs://, s3a://, ...)
and for the rare packets the header fast path leaves to the general parser (VLAN tags, IPv6, IP
options, ...). Packets that are IP but not usable TCP (fragments, truncated headers) are shipped
raw, so the decode stage can hand them to the core and get the very same Issue it reports.
Every file ends with one summary row: packet count, first timestamp and the capture error, if any.

Python touches each packet only to step to the next record (records.py); the headers of a whole
chunk are read, checked and grouped by connection with numpy, and a block of chunks becomes one
row per connection. Pure Python, numpy and pyarrow: no pyspark here.
"""
from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from dissector.capture.errors import CaptureError
from dissector.capture.files import open_capture
from dissector.capture.layers import tcp_segment
from dissector.tls.layer import TLS_KEY_LOG

from .records import chunk_records
from .tcp_headers import fast_segments

SEGMENTS, RAW, SUMMARY = 0, 1, 2   # row kinds

# local packet number, ts_ns, payload offset in the file (-1: in the row), payload length, seq,
# ack, flags (with tcp.reassembly.ZERO_WINDOW), side (0: from the row's src to its dst, 1: the
# other way)
SEGMENT = struct.Struct("<qqqIIIHB")
META = np.dtype([("packet", "<i8"), ("ts", "<i8"), ("at", "<i8"), ("n", "<u4"), ("seq", "<u4"),
                 ("ack", "<u4"), ("flags", "<u2"), ("side", "u1")])   # SEGMENT as numpy reads it
assert META.itemsize == SEGMENT.size
INLINE = -1
MAX_ROW_SEGMENTS = 16384         # a row is closed past this many segments (bounded rows)
BLOCK_PACKETS = 1 << 20          # rows are made per block of this many packets...
BLOCK_BYTES = 64 << 20           # ...or of this much payload carried inline (bounded memory)
BATCH_BYTES = 16 << 20           # hand a record batch to Spark past this much
MAX_SECRETS = 64 << 20           # key log bytes kept from a file's Decryption Secrets Blocks

SCHEMA = pa.schema([
    ("kind", pa.int8()),
    ("file", pa.string()),
    ("key", pa.binary()),        # the connection's endpoints, the same for both directions
    ("packet", pa.int64()),      # local number of the row's first packet
    ("src", pa.binary()),        # the endpoints of the row's first packet
    ("dst", pa.binary()),
    ("sport", pa.int32()),
    ("dport", pa.int32()),
    ("meta", pa.binary()),       # SEGMENTS: SEGMENT records
    ("payload", pa.binary()),    # SEGMENTS: the inline payloads back to back; RAW: the packet
    ("linktype", pa.int32()),    # RAW
    ("ts", pa.int64()),          # RAW: the packet's timestamp; SUMMARY: the first timestamp
    ("count", pa.int64()),       # SUMMARY: packets read
    ("error", pa.string()),      # SUMMARY: the capture error that stopped the file
    ("secrets", pa.binary()),    # SUMMARY: the TLS key log of its Decryption Secrets Blocks
])

_PORT = struct.Struct("!H")


class _Block:
    """The segments of a block of chunks, until they become rows.

    A segment's connection is numbered by (lo, hi): its two ends (address << 16 | port) in
    order, so IPv4 connections need no Python object per packet; the rare others (IPv6) get
    lo = 2**63 + their index in `others`, hi 0. `up` says the segment goes from lo to hi."""

    def __init__(self):
        self.parts = []     # per chunk: dict of arrays (META's fields but side, lo, hi, up)
        self.inline = {}    # local packet number -> payload carried in the row
        self.others = {}    # canonical key of a non-IPv4 connection -> its index
        self.packets = 0
        self.bytes = 0      # inline payload held

    def add(self, arrays, inline=None):
        """A chunk's segments; inline: a payload per segment, carried in the row."""
        if inline is not None:
            for p, payload in zip(arrays["packet"].tolist(), inline):
                self.inline[p] = payload
                self.bytes += len(payload)
            arrays["at"] = np.full(len(arrays["packet"]), INLINE, np.int64)
        self.parts.append(arrays)
        self.packets += len(arrays["packet"])

    def add_parsed(self, segments):
        """Segments from the general parser: (packet, ts, src, dst, sport, dport, seq, ack,
        flags, payload) tuples (their payloads are carried in the row)."""
        if not segments:
            return
        ends = []
        for _packet, _ts, src, dst, sport, dport, *_rest in segments:
            a, b = bytes(src) + _PORT.pack(sport), bytes(dst) + _PORT.pack(dport)
            if len(src) == 4:
                ends.append((int.from_bytes(min(a, b), "big"), int.from_bytes(max(a, b), "big"),
                             a < b))
            else:
                index = self.others.setdefault(min(a, b) + max(a, b), len(self.others))
                ends.append(((1 << 63) + index, 0, a < b))
        lo, hi, up = zip(*ends)
        packet, ts, _s, _d, _sp, _dp, seq, ack, flags, payload = zip(*segments)
        self.add({"packet": np.array(packet, np.int64), "ts": np.array(ts, np.int64),
                  "n": np.array([len(p) for p in payload], np.uint32),
                  "seq": np.array(seq, np.uint32), "ack": np.array(ack, np.uint32),
                  "flags": np.array(flags, np.uint16), "lo": np.array(lo, np.uint64),
                  "hi": np.array(hi, np.uint64), "up": np.array(up, bool)},
                 [bytes(p) for p in payload])

    def rows(self, out):
        """Turn the block's segments into rows of `out` (one per connection, or more past
        MAX_ROW_SEGMENTS); the block is empty afterwards."""
        parts, self.parts = self.parts, []
        inline, self.inline = self.inline, {}
        others = {index: key for key, index in self.others.items()}
        self.others = {}
        self.packets = self.bytes = 0
        if not parts:
            return
        s = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
        order = np.lexsort((s["packet"], s["hi"], s["lo"]))
        s = {name: v[order] for name, v in s.items()}
        n = len(order)
        lo, hi, up = s["lo"], s["hi"], s["up"]
        new = np.r_[True, (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])]
        at = np.arange(n)
        rank = at - np.maximum.accumulate(np.where(new, at, 0))   # position in its connection
        starts = np.flatnonzero(rank % MAX_ROW_SEGMENTS == 0)
        stops = np.r_[starts[1:], n]
        meta = np.empty(n, META)
        for name in ("packet", "ts", "at", "n", "seq", "ack", "flags"):
            meta[name] = s[name]
        meta["side"] = up != np.repeat(up[starts], stops - starts)
        blob = meta.tobytes()
        size = META.itemsize
        packets = s["packet"]
        carried = (np.add.reduceat((s["at"] == INLINE).astype(np.int64), starts) if inline
                   else np.zeros(len(starts), np.int64)).tolist()
        for a, b, row_lo, row_hi, row_up, first, held in zip(
                starts.tolist(), stops.tolist(), lo[starts].tolist(), hi[starts].tolist(),
                up[starts].tolist(), packets[starts].tolist(), carried):
            if row_lo >> 63:
                key = others[row_lo - (1 << 63)]
            else:
                key = row_lo.to_bytes(6, "big") + row_hi.to_bytes(6, "big")
            half = len(key) // 2
            x, y = (key[:half], key[half:]) if row_up else (key[half:], key[:half])
            payload = b"".join(inline[p] for p in packets[a:b].tolist() if p in inline) \
                if held else b""
            out.add(kind=SEGMENTS, key=key, packet=first, src=x[:-2], dst=y[:-2],
                    sport=int.from_bytes(x[-2:], "big"), dport=int.from_bytes(y[-2:], "big"),
                    meta=blob[a * size:b * size], payload=payload)
            out.bytes += len(payload) + (b - a) * size
            if out.bytes >= BATCH_BYTES:
                out.flush()


class _Columns:
    """Column lists of the rows not yet handed out, and the record batches made of them."""

    def __init__(self, file):
        self.file = file
        self.cols = {name: [] for name in SCHEMA.names}
        self.bytes = 0
        self.batches = []

    def add(self, **values):
        for name, lst in self.cols.items():
            lst.append(values.get(name))

    def flush(self):
        n = len(self.cols["kind"])
        if n:
            self.cols["file"] = [self.file] * n
            self.batches.append(pa.RecordBatch.from_pydict(self.cols, schema=SCHEMA))
            self.cols = {name: [] for name in SCHEMA.names}
            self.bytes = 0

    def take(self):
        self.flush()
        batches, self.batches = self.batches, []
        return batches


def _is_gzip(path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"\x1f\x8b"
    except OSError:   # open_capture says what is wrong
        return False


def extract_file(path, file=None, inline=False):
    """Yield record batches (SCHEMA) of the segment index, raw packets and summary of one capture
    file. inline: carry every payload in the rows (the decode stage cannot read the file at an
    offset); a gzip file is always read so."""
    file = str(path) if file is None else file
    out = _Columns(file)
    block = _Block()
    count = 0
    first_ts = None
    error = None
    f = None
    secrets = []   # the TLS key logs of its Decryption Secrets Blocks, for the driver's KeyLog

    def keep_secrets(secrets_type, data):
        if secrets_type == TLS_KEY_LOG and sum(map(len, secrets)) + len(data) <= MAX_SECRETS:
            secrets.append(data)

    try:
        inline = inline or _is_gzip(path)
        f, chunks, kind = open_capture(path)
        for data, starts, stops, ts, lts in chunk_records(chunks, kind, keep_secrets):
            if first_ts is None and len(ts):
                first_ts = int(ts[0])
            fast, slow = fast_segments(data, starts, stops, ts, lts, count + 1, chunks.base)
            block.add(fast, [data[a:a + m].tobytes() for a, m in zip(
                (fast["at"] - chunks.base).tolist(), fast["n"].tolist())] if inline else None)
            segs = []
            for i in slow.tolist():
                packet = count + 1 + i
                raw = bytes(data[starts[i]:stops[i]])
                seg = tcp_segment(int(lts[i]), raw)
                if seg is None:
                    continue
                if seg.__class__ is str:
                    out.add(kind=RAW, packet=packet, payload=raw, linktype=int(lts[i]),
                            ts=int(ts[i]))
                    out.bytes += len(raw)
                else:
                    segs.append((packet, int(ts[i]), *seg))
            block.add_parsed(segs)
            count += len(ts)
            if block.packets >= BLOCK_PACKETS or block.bytes >= BLOCK_BYTES:
                block.rows(out)
            yield from out.take()   # the chunk's buffer is refilled after this
    except CaptureError as exc:
        error = str(exc)
    finally:
        if f is not None:
            f.close()
    block.rows(out)
    out.add(kind=SUMMARY, ts=first_ts, count=count, error=error,
            secrets=b"\n".join(secrets) if secrets else None)
    yield from out.take()

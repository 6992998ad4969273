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

Pure Python and pyarrow: no pyspark here.
"""
from __future__ import annotations

import struct

import pyarrow as pa

from dissector.capture.files import CaptureError, open_capture
from dissector.capture.layers import (LT_ETHERNET, LT_IPV4, LT_LOOP, LT_NULL, LT_RAW,
                                      LT_RAW_ALIASES, LT_SLL, LT_SLL2, tcp_segment)
from dissector.capture.pcap import MAX_RECORD, pcap_header
from dissector.capture.pcapng import pcapng_batches

SEGMENTS, RAW, SUMMARY = 0, 1, 2   # row kinds

# local packet number, ts_ns, payload offset in the file (-1: in the row), payload length, seq,
# ack, flags, side (0: from the row's src to its dst, 1: the other way)
SEGMENT = struct.Struct("<qqqIIIBB")
INLINE = -1
MAX_ROW_SEGMENTS = 16384         # a row is closed past this many segments (bounded rows)
MAX_OPEN_BYTES = 64 << 20        # all open rows are closed past this much held in them
BATCH_BYTES = 16 << 20           # hand a record batch to Spark past this much

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
])

_PORT = struct.Struct("!H")
_split = struct.Struct("!4s4sHH").unpack

# The header fast path (the shape of nearly every packet, as dissector.capture reads it fast):
# a fixed-size link header with its IPv4 tag, then IPv4 without options or fragmentation, a
# complete TCP header, the IP length within the captured bytes. Fields: tag, version/ihl, total
# length, flags/fragment offset, protocol, addresses and ports, seq, ack, data offset, flags.
_IPV4_TCP = "BxHxxHxB2x12sIIBB"
_IPV4 = b"\x08\x00"
_LINKS = {   # link type -> (format of the link header up to its tag, its length, IPv4 tags)
    LT_ETHERNET: ("12x2s", 14, (_IPV4,)),
    LT_SLL: ("14x2s", 16, (_IPV4,)),
    LT_SLL2: ("2s18x", 20, (_IPV4,)),
    LT_NULL: ("4s", 4, (b"\x02\0\0\0", b"\0\0\0\x02")),   # AF_INET in either byte order
    LT_LOOP: ("4s", 4, (b"\x02\0\0\0", b"\0\0\0\x02")),
    LT_RAW: ("0s", 0, (b"",)),
    LT_IPV4: ("0s", 0, (b"",)),
}
for _alias in LT_RAW_ALIASES:
    _LINKS[_alias] = _LINKS[LT_RAW]


def _fast(linktype):
    """(unpack_from over link + IPv4 + TCP headers, IPv4 offset, IPv4 tags, bytes needed)."""
    link = _LINKS.get(linktype)
    if link is None:
        return None, 0, (), 1 << 62
    fmt, off, tags = link
    return struct.Struct("!" + fmt + _IPV4_TCP).unpack_from, off, tags, off + 40


def flow_key(src, sport, dst, dport) -> bytes:
    """The same bytes for both directions of a connection."""
    a = bytes(src) + _PORT.pack(sport)
    b = bytes(dst) + _PORT.pack(dport)
    return a + b if a <= b else b + a


class _Row:
    __slots__ = ("src", "dst", "sport", "dport", "first", "meta", "payload", "segments", "keys")

    def __init__(self, src, dst, sport, dport, first, keys):
        self.src, self.dst, self.sport, self.dport = bytes(src), bytes(dst), sport, dport
        self.first = first
        self.keys = keys   # its two direction keys in the open rows
        self.meta = bytearray()
        self.payload = bytearray()
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


def _pcap_records(chunks):
    """(ts_ns, linktype, buffer, start, stop, file offset of start) of every record, the packet
    being buffer[start:stop] until the next one is asked for."""
    order, scale, linktype = pcap_header(chunks)
    unpack = struct.Struct(order + "III4x").unpack_from
    name = chunks.name
    buf, end = chunks.buf, chunks.end
    pos = 24
    while True:
        while pos + 16 <= end:
            sec, frac, incl = unpack(buf, pos)
            if incl > MAX_RECORD:
                raise CaptureError(f"{name}: packet record length {incl} too large at byte "
                                   f"{chunks.base + pos}")
            stop = pos + 16 + incl
            if stop > end:
                break
            yield sec * 1_000_000_000 + frac * scale, linktype, buf, pos + 16, stop, \
                chunks.base + pos + 16
            pos = stop
        if not chunks.refill(pos):
            if pos < end:
                raise CaptureError(f"{name}: truncated packet record at byte {chunks.base}")
            return
        buf, end = chunks.buf, chunks.end
        pos = 0


def _pcapng_records(chunks):
    for batch in pcapng_batches(chunks):
        buf, base = chunks.buf, chunks.base
        for ts, lt, start, stop in batch:
            yield ts, lt, buf, start, stop, base + start


def _close_all(rows, close):
    for row in {id(row): row for row, _side in rows.values()}.values():
        close(row)
    rows.clear()


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
    rows = {}   # direction key (src, dst, sport, dport) -> (its connection's open row, side)
    held = 0    # bytes held in open rows
    count = 0
    first_ts = None
    error = None

    def close(row):
        out.add(kind=SEGMENTS, key=flow_key(row.src, row.sport, row.dst, row.dport),
                packet=row.first, src=row.src, dst=row.dst, sport=row.sport, dport=row.dport,
                meta=bytes(row.meta), payload=bytes(row.payload))
        out.bytes += len(row.payload) + len(row.meta)

    pack = SEGMENT.pack
    linktype = None
    f = None
    try:
        inline = inline or _is_gzip(path)
        f, chunks, kind = open_capture(path)
        records = _pcap_records(chunks) if kind == "pcap" else _pcapng_records(chunks)
        for ts, lt, buf, p, stop, at in records:
            count += 1
            if first_ts is None:
                first_ts = ts
            if lt != linktype:
                linktype = lt
                hdr, off, tags, need = _fast(lt)
            incl = stop - p
            seg = None
            if incl >= need:
                tag, vihl, total, frag, proto, key, seq, ack, doff, flags = hdr(buf, p)
                if (vihl == 0x45 and proto == 6 and tag in tags and not frag & 0x3FFF
                        and 40 <= (hl := doff >> 2 & 0x3C) + 20 <= total <= incl - off):
                    start = off + 20 + hl
                    n = total - 20 - hl
                    payload = buf[p + start:p + start + n] if inline else None
                    seg = True
            if seg is None:
                data = bytes(buf[p:stop])
                seg = tcp_segment(lt, data)
                if seg is None:
                    continue
                if seg.__class__ is str:
                    out.add(kind=RAW, packet=count, payload=data, linktype=lt, ts=ts)
                    out.bytes += len(data)
                    continue
                src, dst, sport, dport, seq, ack, flags, payload = seg
                src, dst = bytes(src), bytes(dst)
                key = src + dst + _PORT.pack(sport) + _PORT.pack(dport)
                n = len(payload)
                inline_here = True
            else:
                inline_here = inline
            found = rows.get(key)
            if found is None:
                if seg is True:
                    src, dst, sport, dport = _split(key)
                back = dst + src + _PORT.pack(dport) + _PORT.pack(sport)
                row = _Row(src, dst, sport, dport, count, (key, back))
                rows[key] = row, 0
                rows[back] = row, 1
                side = 0
            else:
                row, side = found
            if inline_here:
                row.payload += payload
                row.meta += pack(count, ts, INLINE, n, seq, ack, flags, side)
                held += n + SEGMENT.size
            else:
                row.meta += pack(count, ts, at + start, n, seq, ack, flags, side)
                held += SEGMENT.size
            row.segments += 1
            if row.segments >= MAX_ROW_SEGMENTS:
                close(row)
                held -= len(row.payload) + len(row.meta)
                for k in row.keys:
                    rows.pop(k, None)
            if held >= MAX_OPEN_BYTES:
                _close_all(rows, close)
                held = 0
            if out.bytes >= BATCH_BYTES:
                yield out.batch()
    except CaptureError as exc:
        error = str(exc)
    finally:
        if f is not None:
            f.close()
    _close_all(rows, close)
    out.add(kind=SUMMARY, ts=first_ts, count=count, error=error)
    yield out.batch()

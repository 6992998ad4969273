"""Decode: the index rows of a bucket of connections (from all files) -> their rows of every table,
with the core unchanged.

Connection by connection, the segments are replayed in global packet order, their payloads read
from the capture files (mapped into memory) or from the rows, and fed to a `Dissector` in one
call per connection (`feed_segments`: the same result as feeding them one by one, as the
single-machine path does); the exchanges go through the analysis layer's own table builders.
The bucket's index rows are read as columns (bucket.py). A call takes a whole bucket of
connections (hash of the connection key), not one: per-call costs stay small on captures of
hundreds of thousands of short connections. Two things need the whole capture and are settled later by
the job with provisional keys that sort the same way:
- connection ids (1, 2, 3... in the order connections open): a connection's provisional id is the
  global packet number that opened it (one packet opens at most one connection);
- the `exchange` index (the order exchanges complete in): (packet number that completed it, rank
  among that packet's exchanges); exchanges flushed at the end of the capture sort after every
  packet, by connection, as the single-machine flush does.
The group without a connection holds the packets that are not usable TCP and the capture errors:
they become the same Issues the single-machine path reports.

Pure Python, numpy and pyarrow: no pyspark here.
"""
from __future__ import annotations

import copy
import gc
import mmap
from bisect import bisect_left

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dissector.model import ERROR, Issue
from dissector.pipeline import MAX_ROWS, Dissector
from dissector.tcp.reassembly import SYN

from ..load import _Collector
from .bucket import Bucket
from .extract import RAW, SUMMARY
from .schemas import EMIT_KEYS, LOCAL_EXCHANGE, PARTS, TABLES

AFTER_LAST_PACKET = 1 << 61   # emission keys of the exchanges flushed at the end start here
OPENED_AT_END = 1 << 60


class Options:
    """What the whole job decodes with (shipped to every task)."""

    def __init__(self, ports, auto, level, max_frame, capture, offsets=None, paths=None,
                 keylog=None):
        self.ports = tuple(ports)
        self.auto = auto
        self.level = level
        self.max_frame = max_frame
        self.capture = capture   # the `capture` column: the files' names in reading order
        self.offsets = offsets or {}   # file -> packets in the files read before it
        self.paths = paths or {}       # file -> local path its payloads are read from
        self.keylog = keylog           # TLS key material (dissector.tls.keylog.KeyLog) or None


class _Files:
    """The capture files a task reads payloads from, each mapped into memory once: a payload is
    a view of the page cache, not a copy (the views keep their map alive)."""

    def __init__(self, paths):
        self.paths = paths
        self.views = {}

    def view(self, file):
        v = self.views.get(file)
        if v is None:
            with open(self.paths[file], "rb") as f:
                v = self.views[file] = memoryview(mmap.mmap(f.fileno(), 0,
                                                            access=mmap.ACCESS_READ))
        return v


KEYLESS = ("kind", "file", "packet", "payload", "linktype", "ts", "count", "error")


class _Decoder:
    """One Dissector and one set of table builders for the connections of one bucket, decoded
    one connection after the other (flows are independent: each is flushed when its segments
    are done, as the single-machine path flushes it at the end of the capture)."""

    def __init__(self, opts: Options, keylog_issue=False):
        self.opts = opts
        keylog = opts.keylog
        if keylog is not None and keylog.malformed and not keylog_issue:
            # the key log's malformed lines are one issue of the capture, as the single process
            # reports them: the task of bucket 0 reports it, the others see no count
            keylog = copy.copy(keylog)
            keylog.malformed = 0
        self.d = Dissector(opts.ports, auto=opts.auto, level=opts.level,
                           max_frame=opts.max_frame, keylog=keylog)
        self.records = opts.level == "records"
        self.col = _Collector(records=self.records)
        self.files = _Files(opts.paths)
        self.opened = {}   # local connection id -> provisional id
        # per exchange, in the order they come out (the Dissector's `index` - 1): its emission
        # key, its issue rows and (records level) its record rows
        self.emit_packet, self.emit_seq, self.issue_rows, self.record_rows = [], [], [], []

    def keyless(self, rows) -> None:
        """The raw packets and capture errors (dicts of KEYLESS)."""
        _raw_packets_and_errors(rows, self.d, self.opts.offsets)
        self._finish()

    def connection(self, sizes, columns) -> None:
        """Decode the segments of one connection key (columns for feed_segments, the payloads'
        lengths)."""
        d = self.d
        conns = d.connections
        known = len(conns)
        packets = columns[0]
        if self.opts.auto or known + len(packets) >= MAX_ROWS:
            # when a connection opens depends on more than its packets: watch each one
            for s in zip(*columns):
                d.feed_segment(*s)
                if len(conns) != known:
                    for c in conns[known:]:
                        self.opened[c.connection_id] = s[0]
                    known = len(conns)
                if d.output:
                    self._drain([s[0]] * len(d.output))
        else:
            emitted = []
            d.feed_segments(*columns, emitted=emitted)
            if len(conns) != known:
                # with ports deciding, a flow opens at its first packet with SYN or payload
                flags = columns[8]
                for c in conns[known:]:
                    i = bisect_left(packets, c.first_packet)
                    while not (flags[i] & SYN or sizes[i]):
                        i += 1
                    self.opened[c.connection_id] = packets[i]
            self._drain(emitted)
        self._finish()

    def _finish(self) -> None:
        self.d.finish()
        for c in self.d.connections[len(self.opened):]:   # a connection only known at the end
            self.opened[c.connection_id] = OPENED_AT_END + c.first_packet
        self._drain(None)

    def _drain(self, emitted) -> None:
        """Take the exchanges out: emitted[i] is the packet that completed the i-th, None for
        those flushed at the end (keyed after every packet, by connection)."""
        col, out = self.col, self.d.output
        records = self.records
        seq = 0
        last = None
        for i in range(len(out)):
            ex = out.popleft()
            if records:
                before = len(col.records)
            col.add(ex)
            if emitted is not None:
                packet = emitted[i]
                seq = seq + 1 if packet == last else 0
                last = packet
            else:
                packet = AFTER_LAST_PACKET + self.opened[ex.connection.connection_id]
                seq = i
            self.emit_packet.append(packet)
            self.emit_seq.append(seq)
            self.issue_rows.append(len(ex.issues))
            if records:
                self.record_rows.append(len(col.records) - before)

    def parts(self, bucket: int, total: int, parts: int) -> pa.Table:
        """Everything decoded, as rows of schemas.PARTS: per table and part (a range of
        emission packets), the table's rows in one Arrow IPC blob."""
        self.col.finish(self.d, self.opts.capture)   # + the issues not tied to an exchange
        tables = self.col.arrow()
        ep = np.array(self.emit_packet, np.int64)
        es = np.array(self.emit_seq, np.int64)
        prov = np.zeros(len(self.d.connections) + 1, np.int64)
        for local, p in self.opened.items():
            prov[local] = p
        out = []
        for name in TABLES:
            t = tables[name]
            if t.num_rows == 0:
                continue
            if "connection_id" in t.column_names:
                i = t.column_names.index("connection_id")
                col = t.column(i).combine_chunks()
                ids = prov[col.fill_null(0).to_numpy(zero_copy_only=False)]
                t = t.set_column(i, "connection_id", pa.array(ids, pa.int64(), mask=col.is_null()
                                                              .to_numpy(zero_copy_only=False)))
            n = t.num_rows
            if name in ("exchanges", "partitions"):
                local = t.column("exchange").to_numpy() - 1
                keys = (ep[local], es[local], _ranks(local))
                t = t.append_column(LOCAL_EXCHANGE, pa.array((bucket << 32) + local, pa.int64()))
            elif name == "records":
                counts = np.array(self.record_rows, np.int64)
                keys = (np.repeat(ep, counts), np.repeat(es, counts), _ranks(
                    np.repeat(np.arange(len(counts)), counts)))
            elif name == "issues":
                counts = np.array(self.issue_rows, np.int64)
                tied = int(counts.sum())
                rest = np.full(n - tied, -1, np.int64)
                keys = (np.r_[np.repeat(ep, counts), rest], np.r_[np.repeat(es, counts), rest],
                        np.r_[_ranks(np.repeat(np.arange(len(counts)), counts)), rest])
                frames = t.column("frame").fill_null(total).to_numpy(zero_copy_only=False)
                where = np.r_[keys[0][:tied], frames[tied:]]
            else:   # connections: where they opened
                keys = (np.full(n, -1, np.int64),) * 3
                where = t.column("connection_id").to_numpy()
            if name != "issues" and name != "connections":
                where = keys[0]
            for k, values in zip(EMIT_KEYS, keys):
                t = t.append_column(k, pa.array(values, pa.int64()))
            part = np.where(where > total, parts - 1,
                            np.minimum(np.maximum(where, 0) * parts // (total + 1), parts - 1))
            for p in np.unique(part):
                sub = t.filter(pa.array(part == p))
                ids = sub.column("connection_id").to_numpy() if name == "connections" else None
                out.append((int(p), name, sub.num_rows, None if ids is None else ids.tobytes(),
                            _ipc(sub)))
        return pa.Table.from_pylist([dict(zip(PARTS.names, r)) for r in out], schema=PARTS)


def _ranks(groups):
    """Position of each element within its run of equal consecutive values."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, np.int64)
    at = np.arange(n)
    first = np.r_[True, groups[1:] != groups[:-1]]
    return at - np.maximum.accumulate(np.where(first, at, 0))


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_bucket(table: pa.Table, bucket: int, opts: Options, total: int,
                  parts: int) -> pa.Table:
    """Rows of schemas.PARTS: the tables of the connections whose index rows are in `table`
    (bucket: its number, unique in the job)."""
    keyed = pc.is_valid(table.column("key"))
    decoder = _Decoder(opts, keylog_issue=(bucket == 0))
    # The core's objects die young and seldom form cycles, but generational collections keep
    # walking everything a bucket holds: 5-8% of the decode time (measured on the benchmark
    # corpus; the peak memory of a bucket grows ~10%). One collection of the youngest
    # generation at the end instead (a full one also walks every module's objects: 0.1 s).
    collecting = gc.isenabled()
    gc.disable()
    try:
        segment_rows = table.filter(keyed)
        if segment_rows.num_rows:
            for sizes, columns in Bucket(segment_rows, opts.offsets,
                                         decoder.files).connections():
                decoder.connection(sizes, columns)
        rest = table.filter(pc.invert(keyed))
        if rest.num_rows:
            decoder.keyless(rest.select(KEYLESS).to_pylist())
        decoder.d.finish()   # bucket 0 without rows still reports the key log (see _Decoder)
        out = decoder.parts(bucket, total, parts)
        # the collection below then walks only what cycles left, not the bucket's objects
        del decoder
        return out
    finally:
        if collecting:
            gc.enable()
        gc.collect(0)   # the bucket's own objects only (all young: nothing was collected)


def _raw_packets_and_errors(rows, d: Dissector, offsets) -> None:
    for r in rows:
        r["offset"] = offsets[r["file"]]
    rows.sort(key=lambda r: (r["offset"] + (r["packet"] if r["kind"] == RAW else r["count"]),
                             r["kind"]))
    for r in rows:
        if r["kind"] == RAW:
            d.feed(r["packet"] + r["offset"], r["ts"], r["linktype"], r["payload"])
        elif r["kind"] == SUMMARY and r["error"] is not None:
            # what dissector.pipeline.Dissection does when a file stops with a CaptureError
            d.add_issue(Issue("capture.error", ERROR, r["error"], frame=r["offset"] + r["count"]))

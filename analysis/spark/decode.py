"""Decode: the runs of a bucket of connections (from all files) -> their rows of every table, with
the core unchanged.

Connection by connection, the segments are put back in global packet order and fed to a
`Dissector` one by one (`feed_segment`), exactly as the single-machine path feeds them; the
exchanges go through the analysis layer's own table builders. A call takes a whole bucket of
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

Pure Python and pyarrow: no pyspark here.
"""
from __future__ import annotations

import mmap

import pyarrow as pa

from dissector.capture.layers import FIN, SYN
from dissector.model import ERROR, Issue
from dissector.pipeline import Dissector

from ..load import _Collector
from .extract import INLINE, RAW, SEGMENT, SUMMARY
from .schemas import EXCHANGE_TABLES, TABLES, to_union

SYN_FIN = SYN | FIN
AFTER_LAST_PACKET = 1 << 61   # emission keys of the exchanges flushed at the end start here
OPENED_AT_END = 1 << 60


class Options:
    """What the whole job decodes with (shipped to every task)."""

    def __init__(self, ports, auto, level, max_frame, capture, offsets=None, paths=None):
        self.ports = tuple(ports)
        self.auto = auto
        self.level = level
        self.max_frame = max_frame
        self.capture = capture   # the `capture` column: the files' names in reading order
        self.offsets = offsets or {}   # file -> packets in the files read before it
        self.paths = paths or {}       # file -> local path its payloads are read from


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


def _segments_in_order(table: pa.Table, offsets, files=None):
    """(global packet, ts, src, dst, sport, dport, seq, ack, flags, payload) of every segment of
    the rows in `table`, in packet order."""
    cols = table.select(["file", "src", "dst", "sport", "dport", "meta", "payload"]).to_pydict()
    out = []
    add = out.append
    for file, src, dst, sport, dport, meta, payload in zip(
            cols["file"], cols["src"], cols["dst"], cols["sport"], cols["dport"],
            cols["meta"], cols["payload"]):
        offset = offsets[file]
        inline = memoryview(payload)
        data = None
        pos = 0
        for packet, ts, at, n, seq, ack, flags in SEGMENT.iter_unpack(meta):
            if at == INLINE:
                view = inline[pos:pos + n]
                pos += n
            else:
                if data is None:
                    data = files.view(file)
                view = data[at:at + n]
            add((packet + offset, ts, src, dst, sport, dport, seq, ack, flags, view))
    # packet numbers are unique, so tuples compare on them alone; each row is sorted already and
    # timsort merges them
    out.sort()
    return out


class _Decoder:
    """One Dissector and one set of table builders for the connections of one bucket, decoded
    one connection after the other (flows are independent: each is flushed when its segments
    are done, as the single-machine path flushes it at the end of the capture)."""

    def __init__(self, opts: Options):
        self.opts = opts
        self.d = Dissector(opts.ports, auto=opts.auto, level=opts.level,
                           max_frame=opts.max_frame)
        self.col = _Collector(records=(opts.level == "records"))
        self.files = _Files(opts.paths)
        self.opened = {}   # local connection id -> provisional id
        # per table fed by exchanges: the emission key of each row's exchange, its row in it
        self.keyed = {name: ([], [], []) for name in EXCHANGE_TABLES}

    def connection(self, table: pa.Table) -> None:
        """Decode the runs of one connection key (the keyless rows: raw packets, errors)."""
        d = self.d
        if table.column("key")[0].as_py() is None:
            _raw_packets_and_errors(table, d, self.opts.offsets)
        else:
            conns = d.connections
            for s in _segments_in_order(table, self.opts.offsets, self.files):
                d.feed_segment(*s)
                if len(conns) > len(self.opened):
                    for c in conns[len(self.opened):]:
                        self.opened[c.connection_id] = s[0]
                if d.output:
                    self._drain(s[0])
        d.finish()
        for c in d.connections[len(self.opened):]:   # a connection only known at the end
            self.opened[c.connection_id] = OPENED_AT_END
        self._drain(None)

    def _drain(self, packet) -> None:
        col, out = self.col, self.d.output
        seq = 0
        while out:
            ex = out.popleft()
            before = [len(getattr(col, name)) for name in EXCHANGE_TABLES]
            col.add(ex)
            key = packet if packet is not None else \
                AFTER_LAST_PACKET + self.opened[ex.connection.connection_id]
            for name, n in zip(EXCHANGE_TABLES, before):
                packets, seqs, rows = self.keyed[name]
                added = len(getattr(col, name)) - n
                packets.extend([key] * added)
                seqs.extend([seq] * added)
                rows.extend(range(added))
            seq += 1

    def rows(self) -> pa.Table:
        """The union rows of everything decoded."""
        self.col.finish(self.d, self.opts.capture)   # + the issues not tied to an exchange
        tables = self.col.arrow()
        return pa.concat_tables(
            to_union(name, _provisional_connection_ids(tables[name], self.opened),
                     *self.keyed.get(name, ()))
            for name in TABLES)


def decode_bucket(table: pa.Table, opts: Options) -> pa.Table:
    """The union rows (schemas.union_schema) of the connections whose runs are in `table`."""
    table = table.sort_by([("key", "ascending")])
    keys = table.column("key").to_pylist()
    decoder = _Decoder(opts)
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            decoder.connection(table.slice(start, i - start))
            start = i
    return decoder.rows()


def _raw_packets_and_errors(table: pa.Table, d: Dissector, offsets) -> None:
    rows = table.select(["kind", "file", "packet", "payload", "linktype", "ts", "count",
                         "error"]).to_pylist()
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


def _provisional_connection_ids(t: pa.Table, opened: dict) -> pa.Table:
    if not opened or "connection_id" not in t.column_names:
        return t
    i = t.column_names.index("connection_id")
    ids = [opened.get(v, v) if v is not None else None for v in t.column(i).to_pylist()]
    return t.set_column(i, "connection_id", pa.array(ids, pa.int64()))

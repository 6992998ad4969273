"""The index rows of a decode bucket -> the columns `Dissector.feed_segments` takes, connection
after connection.

Rows are sorted by connection key, then by their first global packet: a connection's rows never
interleave, so its segments come out in packet order without sorting them. Everything is read
as columns with numpy and turned into Python lists once for the whole bucket; a connection gets
slices of them (numpy's per-call costs would outweigh a connection's few segments). A payload is
a view of its capture file's map or of the rows' inline bytes, never a copy.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .extract import INLINE, META


def _offsets(array) -> np.ndarray:
    """The int32 value offsets of a binary Arrow array."""
    return np.frombuffer(array.buffers()[1], np.int32, len(array) + 1, array.offset * 4)


class Bucket:
    """Segment rows (extract.SCHEMA, kind SEGMENTS) of one bucket. offsets: file -> packets
    before it; files: decode._Files, the capture files' maps."""

    def __init__(self, table: pa.Table, offsets: dict, files):
        file_col = table.column("file").combine_chunks().dictionary_encode()
        self.names = file_col.dictionary.to_pylist()
        self.files = files
        before = np.array([offsets[f] for f in self.names], np.int64)[
            file_col.indices.to_numpy()]
        first = table.column("packet").to_numpy() + before
        order = pc.sort_indices(pa.table({"key": table.column("key"), "first": first}),
                                [("key", "ascending"), ("first", "ascending")])
        t = table.take(order)
        order = order.to_numpy()
        file_ids, before = file_col.indices.to_numpy()[order], before[order]

        meta = t.column("meta").combine_chunks()
        offs = _offsets(meta)
        seg = np.frombuffer(meta.buffers()[2], META, (offs[-1] - offs[0]) // META.itemsize,
                            offs[0])
        counts = np.diff(offs) // META.itemsize
        row = np.repeat(np.arange(len(t)), counts)   # each segment's row

        keys = t.column("key").combine_chunks()
        new = np.r_[True, ~pc.equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)]
        lead = np.flatnonzero(new)                    # each connection key's first row
        group = np.cumsum(new) - 1                    # each row's connection key
        src, sport = t.column("src").to_pylist(), t.column("sport").to_pylist()
        dst, dport = t.column("dst").to_pylist(), t.column("dport").to_pylist()
        # a row's sides may be the other way round from its key's first row
        head = lead[group].tolist()
        flipped = np.array([(src[i], sport[i]) != (src[j], sport[j])
                            for i, j in enumerate(head)], bool)
        side = (seg["side"].astype(bool) ^ flipped[row]).view(np.uint8)
        ends = np.empty(2 * len(lead), object)        # object: bytes kept whole
        ends[0::2] = [src[j] for j in lead.tolist()]
        ends[1::2] = [dst[j] for j in lead.tolist()]
        ports = np.array([(sport[j], dport[j]) for j in lead.tolist()], np.int64).reshape(-1)
        there = 2 * group[row] + side
        back = there ^ 1

        self.sizes = seg["n"].tolist()
        self.columns = (
            (seg["packet"] + before[row]).tolist(), seg["ts"].tolist(), ends[there].tolist(),
            ends[back].tolist(), ports[there].tolist(), ports[back].tolist(),
            seg["seq"].tolist(), seg["ack"].tolist(), seg["flags"].tolist(),
            self._payloads(t, seg, row, counts, file_ids))
        self.bounds = np.searchsorted(row, lead).tolist() + [len(row)]

    def _payloads(self, t, seg, row, counts, file_ids) -> list:
        """A view of each segment's payload: in its file's map, or (inline) in the data of the
        payload column, at the row's offset plus the inline bytes before it in the row."""
        inline = seg["at"] == INLINE
        payload = t.column("payload").combine_chunks()
        sizes = np.where(inline, seg["n"], 0).astype(np.int64)
        before = np.cumsum(sizes) - sizes
        starts = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
        at = np.where(inline, _offsets(payload)[row] + before - before[starts[row]],
                      seg["at"]).tolist()
        source = np.where(inline, 0, 1 + file_ids[row])
        used = np.unique(source).tolist()
        views = [memoryview(payload.buffers()[2] or b"")] + [
            self.files.view(name) if k + 1 in used else None for k, name in enumerate(self.names)]
        if len(used) == 1:
            v = views[used[0]]
            return [v[x:x + m] for x, m in zip(at, self.sizes)]
        return [views[k][x:x + m] for k, x, m in zip(source.tolist(), at, self.sizes)]

    def connections(self):
        """(payload lengths, columns for Dissector.feed_segments) of each connection key."""
        columns, sizes = self.columns, self.sizes
        for lo, hi in zip(self.bounds, self.bounds[1:]):
            yield sizes[lo:hi], [c[lo:hi] for c in columns]

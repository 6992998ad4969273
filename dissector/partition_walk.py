"""A decoded body's partitions into column lists, a partition at a time, with no row object: the
walk behind the partitions table's columns (analysis.partition_columns).

walk_side(cols, start, topics, side, layout, shape) walks the topic entries `topics` of one
body (a request or a response) and writes one row per partition entry into `cols` (a list of
lists, one per table column) from row `start` on: a column written at row r is first padded with
None up to r, so columns nobody writes stay short (the caller pads them at the end). It returns
the body's shape: per topic with partitions, (key, partition numbers), key its id or else its
name.

The first body with partitions makes the rows (shape None): topic (name, else id), topic id and
partition number, then its fields. A second body (shape: the first's) must list the same
partitions in the same order: it writes its own fields into those rows, and a topic name it has
replaces the first's (a request may name a topic by id only). Either way, a topic or a partition
listed twice, or a second body listing other partitions, raises Irregular: the caller then takes
the row-by-row path (analysis.partitions), which merges by key.

`side` says how the body lists its partitions: (parts, index, fields, records, listed) = the
attribute of a topic entry holding its partitions, the attribute of a partition entry holding its
number (None: the entries are the numbers), (column, attribute, required) fields read from each
entry (a required one missing raises AttributeError; an optional one missing is None), the
attribute holding the entry's record set (None: none; "?records": optional) and the column of
ListOffsets' answered offset (-1: none). `layout` = (topic, topic_id and partition columns, the
RECORD_COLUMNS' columns, topic_id(value) -> text or None: None for None and the zero UUID, for
which the compiled walk does not call it).

walk_exchange(cols, start, sides, req, resp, layout, offsets) walks an exchange's two bodies so,
and fills in the first and last offsets a Produce response gives its records.

With tupled=True, either walks what the byte walk handed over of a body instead of its topic
entries (decoding.Summary.groups: per topic entry (name, topic id, rows), a row per partition
entry (number, the side's fields..., its record set)): the topic entries they stand for
(walked_topics).

Both run compiled (_partition_walk.c) where it is built; this is their specification and the
tests compare the two.
"""
from __future__ import annotations

from .protocol.primitives import UUID0
from .records.codecs import CODEC_NAMES

# bytes of a batch around its (compressed) payload: RecordBatch v2 header; MessageSet v0/v1
# wrapper (offset, size, crc, magic, attributes, [timestamp], null key, value length)
BATCH_OVERHEAD = {0: 26, 1: 34, 2: 61}

# what a record set gives its row, in the order of layout's record columns
RECORD_COLUMNS = ("bytes", "record_count", "batch_count", "first_offset", "last_offset",
                  "compression", "producer_id", "producer_epoch", "base_sequence",
                  "is_transactional", "compressed_bytes", "uncompressed_bytes")


class Irregular(Exception):
    """A body the column walk does not take (see the module doc)."""


def pad(column, rows):
    """`column` grown with None to `rows` values."""
    if len(column) < rows:
        column.extend([None] * (rows - len(column)))


def _put(column, row, value):
    pad(column, row)
    column.append(value)


def py_walk_side(cols, start, topics, side, layout, shape, tupled=False):
    parts_attr, index_attr, fields, records_attr, listed = side
    if tupled:
        topics = walked_topics(topics or (), side)
    topic_col, tid_col, part_col, record_cols, topic_id = layout
    optional_records = records_attr is not None and records_attr.startswith("?")
    made = [] if shape is None else None
    keys = set()
    row = start
    at = 0   # the topic of `shape` next
    for t in topics or ():
        entries = getattr(t, parts_attr) or ()
        if not entries:
            continue
        name = getattr(t, "name", None) or getattr(t, "topic", None)
        tid = topic_id(getattr(t, "topic_id", None))
        key = tid or name
        numbers = ([getattr(p, index_attr) for p in entries] if index_attr is not None
                   else list(entries))
        if key in keys or len(set(numbers)) != len(numbers):
            raise Irregular("a topic or partition listed twice")
        keys.add(key)
        if made is not None:
            made.append((key, numbers))
        elif at >= len(shape) or shape[at] != (key, numbers):
            raise Irregular("the bodies list different partitions")
        at += 1
        for p, number in zip(entries, numbers):
            if made is not None:
                _put(cols[topic_col], row, name or tid)
                _put(cols[tid_col], row, tid)
                _put(cols[part_col], row, number)
            elif name:
                cols[topic_col][row] = name
            for col, attr, required in fields:
                _put(cols[col], row, getattr(p, attr) if required else getattr(p, attr, None))
            if listed >= 0:
                _put(cols[listed], row, listed_offset(p))
            if records_attr is not None:
                rs = (getattr(p, records_attr[1:], None) if optional_records
                      else getattr(p, records_attr))
                if rs is not None:
                    for col, value in zip(record_cols, record_values(rs)):
                        if value is not None:
                            _put(cols[col], row, value)
            row += 1
    if made is None and at != len(shape):
        raise Irregular("the bodies list different partitions")
    return made if made is not None else shape


def py_walk_exchange(cols, start, sides, req, resp, layout, offsets, tupled=False):
    """Both bodies of an exchange through walk_side: `sides` (the request's, the response's)
    each None or (topics(body) -> its topic entries, side); a body that is None is not walked,
    the second walked is given the first's shape. With `offsets` = the columns (base offset,
    record count, first offset, last offset), each row's first and last offset
    (produced_offsets) from its base offset and record count, every one of the four columns
    padded to the rows. Returns how many rows were written: those of layout's partition column
    from `start` on."""
    shape = None
    for sided, body in zip(sides, (req, resp)):
        if sided is not None and body is not None:
            topics, side = sided
            shape = py_walk_side(cols, start, body if tupled else topics(body), side, layout,
                                 shape, tupled) or None
    n = len(cols[layout[2]]) - start
    if offsets is not None and n:
        base, records, first, last = offsets
        stop = start + n
        for col in offsets:
            pad(cols[col], stop)
        pairs = list(map(produced_offsets, cols[base][start:stop], cols[records][start:stop]))
        cols[first][start:stop] = [f for f, _ in pairs]
        cols[last][start:stop] = [lst for _, lst in pairs]
    return n


class Entry:
    """A topic or partition entry, or a body, made of what the byte walk handed over."""


def walked_topics(groups, side) -> list:
    """The byte walk's groups (of a body walked with the RowSpec of `side`) as the topic entries
    they stand for: each with its name (as `topic`: what reading `name` then `topic` gives), its
    `topic_id`, and the side's partitions attribute listing its partition entries, each with the
    side's number, fields and record set attributes (the decoded entry's values)."""
    parts_attr, index_attr, fields, records_attr, listed = side
    if index_attr is None or listed >= 0:
        raise TypeError("walked rows have numbers and no listed offset")
    topics = []
    for group in groups:
        if not isinstance(group, tuple) or len(group) != 3:
            raise TypeError("a walked group: (name, topic id, rows)")
        name, tid, rows = group
        t = Entry()
        t.topic, t.topic_id = name, tid
        entries = []
        for row in rows:
            if not isinstance(row, tuple) or len(row) != len(fields) + 2:
                raise TypeError("a walked row: (number, fields..., record set)")
            p = Entry()
            setattr(p, index_attr, row[0])
            for (_, attr, _), value in zip(fields, row[1:]):
                setattr(p, attr, value)
            if records_attr is not None:
                setattr(p, records_attr.lstrip("?"), row[-1])
            entries.append(p)
        setattr(t, parts_attr, entries)
        topics.append(t)
    return topics


def produced_offsets(base, count):
    """(first, last) offset of `count` records the broker appended at `base` (unknown: None)."""
    first = base if isinstance(base, int) and base >= 0 and count else None
    return first, (first + count - 1 if first is not None else None)


def listed_offset(p):
    """The offset a ListOffsets response partition answers (v0: the first of its old-style
    list)."""
    offset = getattr(p, "offset", None)
    if offset is None:
        olds = getattr(p, "old_style_offsets", None)
        offset = olds[0] if olds else None
    return offset


def record_values(rs) -> tuple:
    """The RECORD_COLUMNS values of a record set (a decoded RecordSet or raw bytes): its size,
    counts, the first batch's codec and producer, the first and last offsets of its data
    batches (control batches hold no produced record; unknown where a legacy compressed wrapper
    was read headers-only), and the compressed and uncompressed payload of its compressed
    batches (None when it has none)."""
    if isinstance(rs, (bytes, bytearray, memoryview)):
        return (len(rs),) + (None,) * 11
    size = getattr(rs, "size", None)
    total = getattr(rs, "record_count", None)
    batches = getattr(rs, "batches", None)
    if batches is None:
        return (size, total) + (None,) * 10
    if total is None and all(b.record_count is not None for b in batches):
        total = sum(b.record_count for b in batches)
    first = last = None
    data = [b for b in batches if not b.is_control]
    if data and data[0].base_offset is not None:
        end = data[-1]
        if end.base_offset is not None and end.last_offset_delta is not None:
            first, last = data[0].base_offset, end.base_offset + end.last_offset_delta
    if not batches:
        return (size, total, 0, first, last) + (None,) * 7
    b = batches[0]
    coded = [c for c in batches if c.codec and c.uncompressed_size is not None]
    return (size, total, len(batches), first, last, CODEC_NAMES.get(b.codec, str(b.codec)),
            b.producer_id, b.producer_epoch, b.base_sequence,
            bool(b.is_transactional) if b.magic == 2 else None,
            sum(c.size - BATCH_OVERHEAD.get(c.magic, 0) for c in coded) if coded else None,
            sum(c.uncompressed_size for c in coded) if coded else None)


try:   # compiled (_partition_walk.c); the same, without Python calls per partition
    from ._partition_walk import configure, walk_exchange, walk_side
    configure(CODEC_NAMES, BATCH_OVERHEAD, Irregular, UUID0)
except ImportError:
    walk_side, walk_exchange = py_walk_side, py_walk_exchange

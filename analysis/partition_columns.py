"""The partitions table built in columns: an exchange's partitions go from its decoded bodies into
one list per column (dissector.partition_walk, compiled where built), with no row object; every
batch of rows becomes Arrow arrays. analysis.partitions' partition_rows, one row at a time, is the
specification: the tests compare the two on every shipped capture, and it makes the rows of the
exchanges the walk does not take (the request and the response listing different partitions or
in another order, a partition listed twice, a partial body).

The exchange's own columns (the table's first HEAD) are kept once per exchange and repeated by
index, as the records table does with its batch fields. PartitionTable cuts a batch at the
budget of analysis.columns (BATCH_ROWS rows, or BATCH_BYTES at VALUE_COST a value) and hands it
to a sink (streaming export) or keeps it for table(), as its ColumnBuilder does for the other
tables. A parallel run's workers hand theirs over as arrays (arrays(), extend():
analysis.parallel_tables).

analysis.load keeps no Produce or Fetch body: the byte walk hands over what this table reads of
them (row_specs(): decoding.Summary.groups), which the walk takes as it takes the bodies (tupled).
Where it has a body on one side and groups on the other, or the walk does not take it, the groups
stand for the body (walked_body).
"""
from __future__ import annotations

from array import array
from operator import attrgetter

import pyarrow as pa

from dissector.partition_walk import Entry, Irregular, pad, walk_exchange, walked_topics
from dissector.protocol.names import error_name
from dissector.summary_plan import RowSpec

from . import columns as _budget
from .columns import _array, kept_table, shared_nulls, table_schema
from .partitions import (
    _BASE_OFF, _COMMITTED, _ERR, _ERR_NAME, _FETCH_OFF, _FIRST, _HW, _LAST, _LEADER,
    _LEADER_EPOCH, _LISTED, _LOG_START, _LSO, _PARTITION, _RECORDS, _TOPIC, _TOPIC_ID, _TS_QUERY,
    FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, PRODUCE, RECORD_COLS,
    SHARE_ACKNOWLEDGE, SHARE_FETCH, exchange_head, head_of_row, offset_fetch_topics,
    partition_rows, topic_id)
from .schema import CATEGORICAL, PARTITION_COLUMNS, arrow_type

HEAD = _TOPIC   # the exchange's own columns come first
LAYOUT = (_TOPIC, _TOPIC_ID, _PARTITION, RECORD_COLS, topic_id)
_ERROR = (_ERR, "error_code", True)


def _side(topics, parts="partitions", index="partition_index", fields=(), records=None,
          listed=-1):
    """How a body lists its partitions: topics(body) its topic entries, then as
    dissector.partition_walk's `side`."""
    return (attrgetter(topics) if isinstance(topics, str) else topics,
            (parts, index, fields, records, listed))


SIDES = {   # api key: how its request and its response list partitions (None: no rows)
    PRODUCE: (_side("topic_data", "partition_data", "index", records="records"),
              _side("responses", "partition_responses", "index", (
                  _ERROR, (_BASE_OFF, "base_offset", True),
                  (_LOG_START, "log_start_offset", False)))),
    FETCH: (_side("topics", index="partition", fields=((_FETCH_OFF, "fetch_offset", True),)),
            _side("responses", fields=(_ERROR, (_HW, "high_watermark", True),
                                       (_LSO, "last_stable_offset", False),
                                       (_LOG_START, "log_start_offset", False)),
                  records="records")),
    LIST_OFFSETS: (_side("topics", fields=((_TS_QUERY, "timestamp", False),)),
                   _side("topics", fields=(_ERROR,), listed=_LISTED)),
    METADATA: (None, _side("topics", fields=(_ERROR, (_LEADER, "leader_id", True),
                                             (_LEADER_EPOCH, "leader_epoch", False)))),
    OFFSET_COMMIT: (_side("topics", fields=((_COMMITTED, "committed_offset", True),)),
                    _side("topics", fields=(_ERROR,))),
    OFFSET_FETCH: (_side(offset_fetch_topics, "partition_indexes", None),
                   _side(offset_fetch_topics, fields=(_ERROR,
                                                      (_COMMITTED, "committed_offset", True)))),
    SHARE_FETCH: (_side("topics"), _side("responses", fields=(_ERROR,), records="?records")),
}
SIDES[SHARE_ACKNOWLEDGE] = SIDES[SHARE_FETCH]
_OFFSETS = {PRODUCE: (_BASE_OFF, _RECORDS, _FIRST, _LAST)}   # the offsets given the records
_WIDTH = len(PARTITION_COLUMNS)
# the attribute SIDES' topics() reads, per direction, of the APIs whose bodies the byte walk
# hands over (row_specs)
WALKED = {PRODUCE: ("topic_data", "responses"), FETCH: ("topics", "responses")}


def row_specs(settings=(), nested=()) -> dict:
    """{api key: (the request's RowSpec, the response's)} of WALKED: what the byte walk hands
    over of their bodies for this table, and the request's `settings` and `nested`
    (summary_plan.RowSpec; analysis.extras' WALKED_SETTINGS)."""
    specs = {}
    for key, topics in WALKED.items():
        pair = []
        for (_, side), attr, extra in zip(SIDES[key], topics, ((settings, nested), ())):
            parts, index, fields, records, _ = side
            pair.append(RowSpec(attr, parts, index, tuple((a, req) for _, a, req in fields),
                                records, *extra))
        specs[key] = tuple(pair)
    return specs


def _bodies(ex):
    return (ex.request_msg.body if ex.request_msg is not None else None,
            ex.response_msg.body if ex.response_msg is not None else None)


def _groups(msg):
    """What the byte walk handed over of a message's body (Summary.groups), or None."""
    summary = msg.summary if msg is not None and msg.body is None else None
    return summary.groups if summary is not None else None


def _walked(ex):
    """(request, response, tupled): the exchange's bodies, or the byte walk's groups of both
    (tupled); where one side kept its body, the other's groups stand for its body."""
    req, resp = _bodies(ex)
    groups = _groups(ex.request_msg), _groups(ex.response_msg)
    if groups == (None, None):
        return req, resp, False
    if req is None and resp is None:
        return groups + (True,)
    return _standing(ex.api_key, (req, resp), groups) + (False,)


def walked_body(groups, api_key, response):
    """A body made of what the byte walk handed over of it (its `groups`; None: None): its
    WALKED attribute lists the topic entries they stand for (partition_walk.walked_topics)."""
    if groups is None:
        return None
    body = Entry()
    setattr(body, WALKED[api_key][response], walked_topics(groups, SIDES[api_key][response][1]))
    return body


def _standing(api_key, bodies, groups):
    """(request, response): each body, or the one its groups stand for."""
    return tuple(body if body is not None else walked_body(g, api_key, d)
                 for d, (body, g) in enumerate(zip(bodies, groups)))


class PartitionPiece:
    """One exchange's rows made by the specification (partition_rows): `head` (its HEAD column
    values), `rows` (how many) and `columns` {column: values} for the row columns it fills."""
    __slots__ = ("head", "rows", "columns")

    def __init__(self, head, rows, columns):
        self.head, self.rows, self.columns = head, rows, columns


def _from_rows(rows) -> PartitionPiece | None:
    """The specification's rows (tuples, of one exchange) as a piece."""
    if not rows:
        return None
    columns = list(zip(*rows))
    return PartitionPiece(rows[0][:HEAD], len(rows),
                          {i: list(columns[i]) for i in range(HEAD, _WIDTH) if i != _ERR_NAME})


_SCHEMA = table_schema(PARTITION_COLUMNS)
_TYPES = tuple(arrow_type(kind) for _, kind in PARTITION_COLUMNS)
_ENCODE = tuple(name in CATEGORICAL for name, _ in PARTITION_COLUMNS)


class PartitionTable:
    """The partitions table fed exchange by exchange (add_exchange), or with rows made in
    another table (extend). `sink(record_batch)` receives each full batch (and the last on
    finish()); without one they are kept for table(). len() counts the rows so far."""

    def __init__(self, sink=None, batch_rows=None):
        self.schema = _SCHEMA
        self._sink = sink
        self._batch_rows = batch_rows or min(
            _budget.BATCH_ROWS, _budget.BATCH_BYTES // (_budget.VALUE_COST * (_WIDTH - HEAD)))
        self._chunks = []
        self._done = 0
        self._new()

    def _new(self):
        self._heads = []
        self._head_index = array("i")
        self._cols = [[] for _ in range(_WIDTH)]   # the row columns (from HEAD on)
        self._rows = 0
        self._parts = []   # extend(): pending rows as slices of arrays, one list per part

    def __len__(self):
        return self._done + self._rows

    def add_exchange(self, ex, row=None) -> None:
        """The exchange's rows; `row`, if given, its exchanges-table row (the head's values
        are read from it)."""
        sides = SIDES.get(ex.api_key)
        if sides is None:
            return
        req, resp, tupled = _walked(ex)
        if req is None and resp is None:
            return
        start = self._rows
        try:
            n = walk_exchange(self._cols, start, sides, req, resp, LAYOUT,
                              _OFFSETS.get(ex.api_key), tupled)
        except (Irregular, AttributeError, TypeError):
            for column in self._cols:
                del column[start:]
            bodies = _standing(ex.api_key, (None, None), (req, resp)) if tupled else (req, resp)
            piece = _from_rows(partition_rows(ex, bodies))
            if piece is not None:
                self.add(piece)
            return
        if n:
            head = exchange_head(ex, None if tupled else req) if row is None else head_of_row(row)
            self._added(head, n)

    def add(self, piece: PartitionPiece) -> None:
        start = self._rows
        for i, values in piece.columns.items():
            column = self._cols[i]
            pad(column, start)
            column.extend(values)
        self._added(piece.head, piece.rows)

    def _added(self, head, n) -> None:
        self._head_index.extend([len(self._heads)] * n)
        self._heads.append(head)
        self._rows += n
        if self._rows >= self._batch_rows:
            self._cut()

    def extend(self, arrays, counts) -> None:
        """Append rows given as Arrow arrays in column order (made by `arrays()` elsewhere) of
        exchanges with `counts` rows each, in order; not mixed with the other adds."""
        start = end = 0
        for n in counts:
            end += n
            self._rows += n
            if self._rows >= self._batch_rows:   # where _added cuts
                self._parts.append([a.slice(start, end - start) for a in arrays])
                start = end
                self._cut()
        if end > start:
            self._parts.append([a.slice(start, end - start) for a in arrays])

    def arrays(self) -> list:
        """The pending rows as plain Arrow arrays, one per column, for another table's
        extend(); the table is empty after."""
        arrays = self._pending()
        self._new()
        return arrays

    def _pending(self, encode=False) -> list:
        """The pending rows as arrays, the categorical ones dictionary-encoded with `encode` (a
        batch's; not for arrays(): another table's parts must come plain, to be encoded as
        one). A categorical head column is encoded before it is repeated for its rows: the same
        dictionary and indices as encoding the rows (every exchange here has rows, taken in
        order), a fourth the work."""
        n = self._rows
        if self._parts:
            arrays = [pa.concat_arrays([part[i] for part in self._parts]) for i in range(_WIDTH)]
            return _encoded(arrays) if encode else arrays
        if not n:
            return [pa.array([], type=typ) for typ in _TYPES]
        take = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self._head_index)])
        heads = list(zip(*self._heads))
        arrays = [_array(list(heads[i]), _TYPES[i]) for i in range(HEAD)]
        arrays = [(a.dictionary_encode() if encode and enc else a).take(take)
                  for a, enc in zip(arrays, _ENCODE)]
        cols = self._cols
        for column in cols[HEAD:]:
            pad(column, n)
        cols[_ERR_NAME] = _error_names(cols[_ERR])
        rows = [_array(cols[i], _TYPES[i]) for i in range(HEAD, _WIDTH)]
        return arrays + (_encoded(rows, _ENCODE[HEAD:]) if encode else rows)

    def _cut(self) -> None:
        n = self._rows
        if not n:
            return
        arrays = self._pending(encode=True)
        self._done += n
        self._new()
        batch = pa.RecordBatch.from_arrays(shared_nulls(arrays), schema=self.schema)
        if self._sink is None:
            self._chunks.append(batch)
        else:
            self._sink(batch)

    def finish(self) -> None:
        self._cut()

    def table(self) -> pa.Table:
        """All rows as one table (no sink): columns.kept_table of the batches."""
        self._cut()
        return kept_table(self._chunks, self.schema)


def _encoded(arrays, encode=_ENCODE):
    return [a.dictionary_encode() if enc else a for a, enc in zip(arrays, encode)]


def _error_names(codes):
    """error_name of each code (None: None), named once per distinct code."""
    try:
        named = {c: error_name(c) for c in set(codes) if c is not None}
    except TypeError:   # an unhashable value from a damaged body
        return [None if c is None else error_name(c) for c in codes]
    return list(map(named.get, codes))

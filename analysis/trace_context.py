"""Trace context in record headers: `trace_id`, `span_id` and `trace_format` columns computed
from the records table's headers (list<struct<key, value>>), so records join with a tracing
system. Vectorised with pyarrow.compute over all headers of a batch at once: no Python per record.

Header keys are matched case-insensitively; per record the first valid header wins in the order
traceparent (W3C) > b3 (B3 single) > X-B3-TraceId with X-B3-SpanId (B3 multi) > uber-trace-id
(Jaeger) > sw8 (SkyWalking v3), then by position. A malformed value (wrong shape, an all-zero id,
bytes that are not ASCII text) counts as absent: with no valid header the three columns are null.

- traceparent `version-traceid(32 hex)-spanid(16 hex)-flags`, lower-case hex as the W3C spec
  demands; version ff is invalid, version 00 has exactly four fields, later versions may add more.
- b3 `traceid(16|32 hex)-spanid(16 hex)[-sampled[-parentspanid]]`; X-B3-TraceId / X-B3-SpanId
  the same ids in two headers (both needed). Hex of either case, given lower-cased.
- uber-trace-id `traceid:spanid:parentid:flags`, ids of 1-32 / 1-16 hex kept as given
  (Jaeger drops leading zeros), lower-cased.
- sw8 `sample-traceId-segmentId-spanId-service-instance-endpoint-peer`, the text fields base64:
  trace_id is the decoded traceId, span_id the decoded parent segment id, ".", the parent span
  id (SkyWalking names a span by its segment and its number there).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TRACE_COLUMNS = (("trace_id", "string"), ("span_id", "string"), ("trace_format", "string"))
# in precedence order; x-b3-spanid only completes x-b3-traceid
_KEY_NAMES = ["traceparent", "b3", "x-b3-traceid", "uber-trace-id", "sw8", "x-b3-spanid"]
_KEY_PATTERN = "^(" + "|".join(_KEY_NAMES) + ")$"   # no regex metacharacters
_SPAN_KEY = 5
_FORMAT_NAMES = ["w3c", "b3", "jaeger", "sw8"]
_FORMAT_CODE = np.array([0, 1, 1, 2, 3], np.int32)

# traceparent's first 55 bytes: version-traceid-spanid-flags, hex (lower case only) as 1, "-" 2
_W3C_CLASS = np.zeros(256, np.uint8)
_W3C_CLASS[np.frombuffer(b"0123456789abcdef", np.uint8)] = 1
_W3C_CLASS[ord("-")] = 2
_W3C_SHAPE = np.array([1] * 2 + [2] + [1] * 32 + [2] + [1] * 16 + [2] + [1] * 2, np.uint8)
_B3 = "(?i)^(?P<t>[0-9a-f]{32}|[0-9a-f]{16})-(?P<s>[0-9a-f]{16})(?:-[01d](?:-[0-9a-f]{16})?)?$"
_B3_TRACE = "(?i)^(?P<t>[0-9a-f]{32}|[0-9a-f]{16})$"
_B3_SPAN = "(?i)^(?P<s>[0-9a-f]{16})$"
_JAEGER = "(?i)^(?P<t>[0-9a-f]{1,32}):(?P<s>[0-9a-f]{1,16}):[0-9a-f]{1,16}:[0-9a-f]{1,2}$"
_SW8 = ("^[01]-(?P<t>[A-Za-z0-9+/=]+)-(?P<g>[A-Za-z0-9+/=]+)-(?P<s>[0-9]+)"
        "-[A-Za-z0-9+/=]+-[A-Za-z0-9+/=]+-[A-Za-z0-9+/=]+-[A-Za-z0-9+/=]+$")
_BASE64 = "^(?:[A-Za-z0-9+/]{4})+$|^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$"
_SIXES = np.zeros(256, np.uint32)
_SIXES[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                     np.uint8)] = np.arange(64, dtype=np.uint32)


def _strings(values) -> pa.Array:
    """A string array of `values`, from buffers (pa.array imports pandas, which the records
    command's streaming writers must not load)."""
    data = "".join(values).encode()
    offsets = np.cumsum([0] + [len(v.encode()) for v in values], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets),
                                                            pa.py_buffer(data)])


def _arrow(values, mask=None) -> pa.Array:
    """A numpy array (bool or integer) as Arrow, null where `mask`, from buffers as above."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        typ, data = pa.bool_(), np.packbits(values, bitorder="little")
    else:
        typ, data = pa.from_numpy_dtype(values.dtype), values
    validity = None if mask is None else pa.py_buffer(np.packbits(~np.asarray(mask),
                                                                  bitorder="little"))
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(data)],
                                 null_count=-1 if mask is not None else 0)



_KEYS = _strings(_KEY_NAMES)
_KEYS_BINARY = _KEYS.cast(pa.binary())
_KEY_LENGTHS = _arrow(np.array(sorted({len(k) for k in _KEY_NAMES}), np.int32))
_FORMAT_DICT = _strings(_FORMAT_NAMES)
# scalars taken from arrays: pyarrow converts a Python constant with pa.scalar, which imports pandas
_FALSE = _arrow(np.array([False]))[0]
_EMPTY, _DASH = _strings(["", "-"]).cast(pa.binary())


def _bools(arr) -> np.ndarray:
    """A boolean array without nulls as numpy (to_numpy would convert it through pandas)."""
    bits = np.frombuffer(arr.buffers()[1], np.uint8)
    return np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)


def _ints(arr) -> np.ndarray:
    """An integer array without nulls as numpy, a copy (to_numpy would load pandas)."""
    values = np.frombuffer(arr.buffers()[1], arr.type.to_pandas_dtype())
    return values[arr.offset:arr.offset + len(arr)].copy()


def _int32(value):
    return _arrow(np.array([value], np.int32))[0]

def trace_columns(headers: pa.Array) -> list[pa.Array]:
    """[trace_id, span_id, trace_format] for each row of `headers` (a list<struct<key: string,
    value: binary>> array); trace_format is dictionary-encoded (w3c, b3, jaeger, sw8)."""
    n = len(headers)
    flat = headers.flatten()
    if len(flat):
        keys = flat.field("key").view(pa.binary())   # a key's bytes need not be UTF-8
        # the lengths first: a length check is ~100x cheaper than the regex on every key
        hit = pc.is_in(pc.binary_length(keys), value_set=_KEY_LENGTHS).fill_null(_FALSE)
        at = np.flatnonzero(_bools(hit))
        rank = pc.index_in(keys.take(_arrow(at)), value_set=_KEYS_BINARY).fill_null(_int32(-1))
        rank = _ints(rank)
        other = np.flatnonzero(rank < 0)
        if len(other):   # not lower case (or no match): the case-insensitive regex decides
            sub = keys.take(_arrow(at[other]))
            match = pc.match_substring_regex(sub, _KEY_PATTERN, ignore_case=True)
            lower = pc.utf8_lower(pc.if_else(match, sub, _EMPTY).cast(pa.string()))
            rank[other] = _ints(pc.index_in(lower, value_set=_KEYS).fill_null(_int32(len(_KEYS))))
        keep = rank < len(_KEYS)
        at, rank = at[keep], rank[keep]
        if len(at):
            parent = _ints(pc.list_parent_indices(headers))[at]
            return _choose(n, parent, rank, flat.field("value").take(_arrow(at)))
    return [pa.nulls(n, pa.string()), pa.nulls(n, pa.string()),
            pa.DictionaryArray.from_arrays(pa.nulls(n, pa.int32()), _FORMAT_DICT)]


def _choose(n, parent, rank, values):
    """The columns from the candidate headers (their record, key rank and value), in header
    order: per record the valid one of the lowest rank, the first of them."""
    traces, spans, ranks, parents = [], [], [], []
    for r, parse in enumerate((_w3c, _b3, _b3_multi, _jaeger, _sw8)):
        sel = rank == r
        if sel.any():
            t, s = parse(values.filter(_arrow(sel)), parent, rank, values, sel)
            traces.append(t)
            spans.append(s)
            ranks.append(np.full(len(t), r))
            parents.append(parent[sel])
    # one entry per candidate, by rank then header order
    trace, span = pa.concat_arrays(traces), pa.concat_arrays(spans)
    rank, parent = np.concatenate(ranks), np.concatenate(parents)
    cand = np.flatnonzero(_bools(pc.and_(trace.is_valid(), span.is_valid())))
    # by record (one format's entries are in record order already), then the first of each
    order = cand if len(traces) == 1 else cand[np.argsort(parent[cand], kind="stable")]
    p = parent[order]
    order = order[np.r_[True, p[1:] != p[:-1]]] if len(p) else order
    rows = parent[order]
    pick = np.full(n, -1, np.int64)
    pick[rows] = order
    take = _arrow(pick, pick < 0)
    fmt = np.zeros(n, np.int32)
    fmt[rows] = _FORMAT_CODE[rank[order]]
    return [trace.take(take), span.take(take),
            pa.DictionaryArray.from_arrays(_arrow(fmt, pick < 0), _FORMAT_DICT)]


def _spread(sub, sel):
    """`sub` (one value per true of `sel`) at the positions of `sel`, null elsewhere."""
    idx = np.cumsum(sel) - 1
    return sub.take(_arrow(idx, ~sel))


def _id(match, group, lower=True):
    """Group `group` of an extract_regex result as strings (the patterns admit only ASCII),
    null unless a non-zero id; lower-cased unless the format demands lower case already."""
    ids = pc.struct_field(match, group).cast(pa.string())
    return _nonzero(pc.utf8_lower(ids) if lower else ids)


def _nonzero(ids):
    """Null for an all-zero id (invalid in every format)."""
    zero = pc.equal(pc.utf8_ltrim(ids, characters="0"), "")
    return pc.if_else(zero, pa.nulls(len(ids), pa.string()), ids)


def _w3c(values, *_):
    """Checked on the first 55 bytes as a fixed-width numpy matrix (a regex with groups costs
    ~3 us a value): each byte of the class its place wants (lower-case hex, dash), ids not all
    zero, version not ff, version 00 exactly 55 bytes, a later one 55 or followed by a dash."""
    size = _ints(pc.binary_length(values).fill_null(_int32(0)))
    at = np.flatnonzero(size >= 55)
    ok = np.zeros(len(values), bool)
    if len(at):
        sub = values.take(_arrow(at)) if len(at) < len(values) else values
        head = pc.binary_slice(sub, 0, 55)
        start = np.frombuffer(head.buffers()[1], np.int32)[head.offset]
        d = np.frombuffer(head.buffers()[2], np.uint8)[start:start + 55 * len(at)].reshape(-1, 55)
        good = ((_W3C_CLASS[d] == _W3C_SHAPE).all(1) & (d[:, 3:35] != 48).any(1)
                & (d[:, 36:52] != 48).any(1) & ((d[:, 0] != 102) | (d[:, 1] != 102)))
        longer = size[at] > 55
        if longer.any():
            dash = pc.equal(pc.binary_slice(sub, 55, 56), _DASH).fill_null(_FALSE)
            good &= ~longer | (((d[:, 0] != 48) | (d[:, 1] != 48))
                               & _bools(dash))
        ok[at[good]] = True
    valid = values.filter(_arrow(ok))
    t = pc.binary_slice(valid, 3, 35).cast(pa.string())
    s = pc.binary_slice(valid, 36, 52).cast(pa.string())
    return _spread(t, ok), _spread(s, ok)


def _b3(values, *_):
    m = pc.extract_regex(values, _B3)
    return _id(m, "t"), _id(m, "s")


def _b3_multi(values, parent, rank, all_values, sel):
    """X-B3-TraceId headers, each with its record's first valid X-B3-SpanId."""
    t = _id(pc.extract_regex(values, _B3_TRACE), "t")
    spans = rank == _SPAN_KEY
    s = _id(pc.extract_regex(all_values.filter(_arrow(spans)), _B3_SPAN), "s")
    where = np.flatnonzero(_bools(s.is_valid()))
    rows, first = np.unique(parent[spans][where], return_index=True)
    want = parent[sel]
    found, idx = np.zeros(len(want), bool), np.zeros(len(want), np.int64)
    if len(rows):
        pos = np.minimum(np.searchsorted(rows, want), len(rows) - 1)
        found, idx = rows[pos] == want, where[first][pos]
    return t, s.take(_arrow(idx, ~found))


def _jaeger(values, *_):
    m = pc.extract_regex(values, _JAEGER)
    return _id(m, "t"), _id(m, "s")


def _sw8(values, *_):
    m = pc.extract_regex(values, _SW8)
    trace = _base64_text(pc.struct_field(m, "t"))
    segment = _base64_text(pc.struct_field(m, "g"))
    span = pc.binary_join_element_wise(segment, pc.struct_field(m, "s").cast(pa.string()), ".")
    return trace, span


def _base64_text(arr):
    """Each value base64-decoded (numpy over all of them at once) when it is standard base64
    of printable ASCII text, else null."""
    ok = pc.match_substring_regex(arr, _BASE64).fill_null(_FALSE)
    good = arr.filter(ok)
    if not len(good):
        return pa.nulls(len(arr), pa.string())
    offsets = np.frombuffer(good.buffers()[1], np.int32)[good.offset:good.offset + len(good) + 1]
    data = np.frombuffer(good.buffers()[2], np.uint8)[offsets[0]:offsets[-1]]
    ends = offsets[1:] - offsets[0]
    pad = (data[ends - 1] == 61).astype(np.int32) + (data[ends - 2] == 61)
    six = _SIXES[data].reshape(-1, 4)
    word = (six[:, 0] << 18) | (six[:, 1] << 12) | (six[:, 2] << 6) | six[:, 3]
    out = np.stack([word >> 16, word >> 8, word], axis=1).astype(np.uint8).ravel()
    keep = np.ones(len(out), bool)
    stop = ends // 4 * 3
    keep[(stop - 1)[pad >= 1]] = False
    keep[(stop - 2)[pad == 2]] = False
    sizes = stop - np.r_[0, stop[:-1]] - pad
    new_offsets = np.r_[0, np.cumsum(sizes)].astype(np.int32)
    text = pa.Array.from_buffers(pa.binary(), len(good),
                                 [None, pa.py_buffer(new_offsets), pa.py_buffer(out[keep])])
    printable = pc.match_substring_regex(text, "^[\\x20-\\x7e]+$")
    text = text.filter(printable).cast(pa.string())
    return _spread(_spread(text, _bools(printable.fill_null(_FALSE))), _bools(ok))

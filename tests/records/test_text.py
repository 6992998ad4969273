"""The records table's CSV and JSON lines: the compiled records/_text.c against its pure-Python
twins (text.py_csv_text, py_jsonl_text: the specification) on every shipped capture and on random
rows (null and empty keys and values, header keys that are not ASCII or not UTF-8, quotes,
backslashes and control characters in them, offsets and timestamps missing); and the twins
against csv and json's own reading of what they wrote."""
import base64
import csv
import io
import json

import pytest
from hypothesis import given, settings, strategies as st

from dissector.pipeline import dissect
from dissector.records import text
from dissector.records.columns import RecordColumns, _append_record, record_chunks
from dissector.records.rows import RECORD_COLUMN_NAMES
from tests.support import CAPTURES, require_compiled

try:
    from dissector.records import _text
except ImportError:
    _text = None


@pytest.fixture(scope="module")
def compiled():
    return require_compiled(_text, "records text writer (dissector/records/_text.c)")


def chunks_of(pcap):
    port = json.loads((CAPTURES / f"{pcap.name.split('.')[0]}.truth.json").read_text())[
        "broker_port"]
    return list(record_chunks(dissect(pcap, (port,), level="records"), rows=50))


def render(cols, fmt, compiled_fn, monkeypatch):
    for name in ("csv_text", "jsonl_text"):
        monkeypatch.setattr(text, name, getattr(compiled_fn, name) if compiled_fn
                            else getattr(text, f"py_{name}"))
    return (text.csv_chunk if fmt == "csv" else text.jsonl_chunk)(cols)


@pytest.mark.parametrize("pcap", sorted(CAPTURES.glob("*[!1448].pcap")), ids=lambda p: p.stem)
def test_every_capture_is_written_alike(compiled, monkeypatch, pcap):
    for cols in chunks_of(pcap):
        for fmt in ("csv", "jsonl"):
            assert render(cols, fmt, compiled, monkeypatch) == \
                render(cols, fmt, None, monkeypatch)


KEYS = st.one_of(st.text(max_size=6), st.sampled_from(['a"b', "back\\slash", "tab\tnl\n",
                                                        "\x00\x7f\x80", "\U0001f600", "é"]))
VALUES = st.one_of(st.none(), st.binary(max_size=7))
ROWS = st.lists(st.tuples(st.integers(0, 1), st.one_of(st.none(), st.integers(-5, 1 << 62)),
                          st.one_of(st.none(), st.integers(-1, 1 << 43)), VALUES, VALUES,
                          st.lists(st.tuples(KEYS, VALUES), max_size=3)), max_size=6)
BATCH = st.tuples(st.one_of(st.none(), st.integers(0, 9)), st.integers(-3, 9),
                  st.sampled_from([0, 1, 78]), st.integers(0, 1),
                  # (a lone "\r" is left unquoted by csv.writer, as by the row writers; no
                  # surrogates: topic names are decoded as strict UTF-8, which has none)
                  st.one_of(st.none(),
                            st.text(st.characters(blacklist_categories=("Cs",),
                                                  blacklist_characters="\r"), max_size=5),
                            st.just('to,p"ic\n')),
                  st.integers(-1, 3), st.integers(0, 2), st.sampled_from(["none", "gzip"]),
                  st.one_of(st.none(), st.integers(0, 1)), st.integers(-1, 9), st.integers(-1, 2),
                  st.integers(-1, 5), st.booleans(), st.booleans(),
                  st.one_of(st.none(), st.booleans()))


def columns(batches, rows):
    cols = RecordColumns()
    cols.batches = list(batches)
    for b, offset, ts, key, value, headers in rows:
        _append_record(cols, b % len(batches), offset if offset is not None else 1 << 64, ts,
                       key, value, headers)
    return cols


@settings(max_examples=120, deadline=None)
@given(st.lists(BATCH, min_size=2, max_size=2), ROWS)
def test_random_rows_are_written_alike_and_read_back(compiled, batches, rows):
    cols = columns(batches, rows)
    runs = sum(1 for i, r in enumerate(rows) if i == 0 or r[0] % 2 != rows[i - 1][0] % 2)
    for fmt, fn in (("csv", "csv_text"), ("jsonl", "jsonl_text")):
        pre_mid_post = _pieces(cols, fmt)
        py = getattr(text, f"py_{fn}")(cols.buffers, *pre_mid_post)
        assert getattr(compiled, fn)(cols.buffers, *pre_mid_post) == py
        ends, py_ends = [], []   # where each run of one batch's rows ends
        assert getattr(compiled, fn)(cols.buffers, *pre_mid_post, ends) == py
        assert getattr(text, f"py_{fn}")(cols.buffers, *pre_mid_post, py_ends) == py
        assert ends == py_ends and len(ends) == runs and ends == sorted(ends)
        assert ends[-1:] == ([len(py)] if rows else [])
        if fmt == "jsonl":   # a line per row: the runs' line counts
            cuts = [0, *ends]
            sizes = [py[a:b].count(b"\n") for a, b in zip(cuts, cuts[1:])]
            assert sum(sizes) == len(rows) and all(sizes)
    lines = text.py_jsonl_text(cols.buffers, *_pieces(cols, "jsonl")).decode().splitlines()
    got = [json.loads(line) for line in lines]
    assert [r["key"] for r in got] == [None if k is None else base64.b64encode(k).decode()
                                       for _, _, _, k, _, _ in rows]
    assert [[h["key"] for h in r["headers"]] for r in got] == \
        [[k for k, _ in hs] for *_, hs in rows]
    written = text.py_csv_text(cols.buffers, *_pieces(cols, "csv")).decode()
    table = list(csv.reader(io.StringIO(written, newline="")))
    assert [len(r) for r in table] == [len(RECORD_COLUMN_NAMES)] * len(rows)


def test_keys_values_and_header_values_of_every_length_are_base64(compiled):
    """The compiled base64 takes six bytes at a time, then the rest: every length to 50 and long
    ones, each byte value in each place, written as the twin and base64 write them."""
    batch = (1, 2, 0, 0, "t", 3, 2, "none", 0, -1, -1, -1, False, False, True)
    data = bytes(range(256)) * 40
    rows = [(0, n, None, data[n:2 * n], data[-n - 1:], [("h", data[3 * n:4 * n])])
            for n in (*range(51), 255, 256, 257, 4097)]
    cols = columns([batch], rows)
    for fmt, fn in (("csv", "csv_text"), ("jsonl", "jsonl_text")):
        pre_mid_post = _pieces(cols, fmt)
        assert getattr(compiled, fn)(cols.buffers, *pre_mid_post) == \
            getattr(text, f"py_{fn}")(cols.buffers, *pre_mid_post)
    lines = compiled.jsonl_text(cols.buffers, *_pieces(cols, "jsonl")).decode().splitlines()
    b64 = [base64.b64encode(v).decode() for _, _, _, k, v, hs in rows for v in (k, v, hs[0][1])]
    assert [v for line in lines for r in [json.loads(line)]
            for v in (r["key"], r["value"], r["headers"][0]["value"])] == b64


def _pieces(cols, fmt):
    """The pre, mid and post lists csv_chunk / jsonl_chunk hand over."""
    seen = {}

    def grab(buffers, pre, mid, post):
        seen["args"] = (pre, mid, post)
        return b""
    name = "csv_text" if fmt == "csv" else "jsonl_text"
    saved = getattr(text, name)
    setattr(text, name, grab)
    try:
        (text.csv_chunk if fmt == "csv" else text.jsonl_chunk)(cols)
    finally:
        setattr(text, name, saved)
    return seen["args"]


def test_odd_topics_are_quoted_as_csv_writer_quotes_a_row():
    """The old row writer: csv.writer(out, lineterminator="\\n") over each row, None as "",
    bytes as base64, the headers as json.dumps gives them."""
    batch = (1, 2, 0, 0, 'a\nb,"c\r', 3, 2, "none", 0, -1, -1, -1, False, False, True)
    cols = columns([batch], [(0, 5, 1_700_000_000_000, b"k", None, [("h\u00e9", b"v")])])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(
        [1, 2, 0, 0, 'a\nb,"c\r', 3, 2, "none", 5, "2023-11-14T22:13:20.000000000Z", 0, "aw==",
         "", json.dumps([{"key": "h\u00e9", "value": "dg=="}]), -1, -1, -1, False, False, True])
    assert text.csv_chunk(cols) == out.getvalue().encode()


def test_a_json_line_is_json_dumps_of_the_row():
    batch = (1, 2, 0, 0, 'a\n"\u00e9\U0001f600', 3, 2, "none", 0, -1, -1, -1, False, False, None)
    cols = columns([batch], [(0, None, None, None, b"", [("\x7f\\", None)])])
    row = dict(zip(RECORD_COLUMN_NAMES, [1, 2, 0, 0, 'a\n"\u00e9\U0001f600', 3, 2, "none", None,
                                         None, 0, None, "", [{"key": "\x7f\\", "value": None}],
                                         -1, -1, -1, False, False, None]))
    assert text.jsonl_chunk(cols) == (json.dumps(row, separators=(",", ":")) + "\n").encode()


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(), st.booleans(), st.floats(),
                          st.text(), st.text(alphabet='ab ,"\r\n\t')), min_size=2, max_size=9))
def test_batch_fields_as_csv_writer_writes_them(values):
    """The batch fields joined directly where none needs quoting, else by csv.writer: always
    what csv.writer writes for the row."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(["" if v is None else v for v in values])
    assert text._csv_fields(values) == out.getvalue()[:-1]


ODD_VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(1 << 63, 1 << 70),
                      st.floats(allow_nan=False), st.text(max_size=6),
                      st.sampled_from(['to,p"ic\n', "\r", "\ud800", "é\U0001f600", "a\x00b",
                                       "\x7f", "back\\slash", b"bytes"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(BATCH | st.tuples(*[ODD_VALUE] * 15), max_size=4), st.booleans())
def test_batch_fields_are_rendered_as_the_twin_renders_them(compiled, batches, csv_format):
    """records/_text.c's batch_texts writes what text.py_batch_texts (csv.writer's and
    json.dumps' text of the fields) writes, or leaves the batches to it (None) where a value is
    one it does not render: text CSV would quote, ints past int64, floats, lone surrogates,
    other types. Ints, bools, None and plain text it always renders."""
    try:
        want = text.py_batch_texts(batches, csv_format)
    except (TypeError, ValueError):   # bytes in JSON, a lone surrogate: none to compare
        want = None
    got = compiled.batch_texts(batches, csv_format, text._NAMES)
    if got is not None:
        assert got == want
    plain = all(v is None or type(v) in (bool, int) and -(1 << 63) <= v < 1 << 63
                or type(v) is str and v.isascii() and v.isprintable() and not set(v) & set(',"')
                for b in batches for v in b)
    if plain:
        assert got is not None

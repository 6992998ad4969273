"""output.CsvWriter joins rows that need no quoting itself (csv_line: compiled, _csvrow.c, or its
Python twin plain_line): its text must equal what the csv module writes for the same
exchange_record values (None as empty, topics joined by ";"), on the real captures at every level
and with values that need quoting, and read back the same (test_csv_line: the two csv_line agree
on any row)."""
import csv
import io

import pytest

from dissector import output
from dissector.output import CsvWriter, exchange_record, plain_line
from dissector.pipeline import dissect
from dissector.tables import EXCHANGE_COLUMN_NAMES

from tests.fuzz.support import REAL, REAL_PORTS

from tests.cli.test_csv_line import compiled_line


@pytest.fixture(autouse=True, params=["compiled", "python"])
def line(request, monkeypatch):
    """Each test with each csv_line."""
    fn = compiled_line() if request.param == "compiled" else plain_line
    monkeypatch.setattr(output, "csv_line", fn)
    return fn


def _reference(exchanges):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(EXCHANGE_COLUMN_NAMES)
    for ex in exchanges:
        rec = exchange_record(ex)
        if rec["topics"] is not None:
            rec["topics"] = ";".join(rec["topics"])
        w.writerow(["" if v is None else v for v in rec.values()])
    return out.getvalue()


def _ours(exchanges):
    out = io.StringIO()
    w = CsvWriter(out)
    for ex in exchanges:
        w.write(ex)
    w.close()
    return out.getvalue()


@pytest.mark.parametrize("level", ["headers", "records"])
def test_real_captures(level):
    for path in REAL:
        exchanges = list(dissect(path, REAL_PORTS, level=level))
        assert exchanges
        assert _ours(exchanges) == _reference(exchanges)


@pytest.mark.parametrize("client_id", ['a,b', 'say "hi"', "two\nlines", "cr\rlf", "ünï,çødé",
                                       ",", '"', ""])
def test_values_that_need_quoting(client_id):
    exchanges = list(dissect(REAL[0], REAL_PORTS))[:5]
    for ex in exchanges:
        ex.client_id = client_id
    text = _ours(exchanges)
    assert text == _reference(exchanges)
    if "\r" in client_id:
        return  # the csv module leaves a lone CR unquoted (lineterminator is "\n"): as before
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == list(EXCHANGE_COLUMN_NAMES)
    assert [r[EXCHANGE_COLUMN_NAMES.index("client_id")] for r in rows[1:]] == [client_id] * 5


def test_timestamps_out_of_range_and_changing_seconds():
    """Times outside the years 1-9999 are empty (as iso_ns says), and the writer's cache of the
    last second formatted never leaks into another second."""
    exchanges = list(dissect(REAL[0], REAL_PORTS))[:6]
    odd = [10**30, -10**30, 0, 1, 999_999_999, 1_000_000_000]
    for ex, ts in zip(exchanges, odd):
        if ex.request is not None:
            ex.request.first_ts = ts
            ex.request.last_ts = ts + 1
    text = _ours(exchanges)
    assert text == _reference(exchanges)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    got = [r["request_ts"] for r, ex in zip(rows, exchanges) if ex.request is not None]
    want = [{10**30: "", -10**30: "", 0: "1970-01-01T00:00:00.000000000Z",
             1: "1970-01-01T00:00:00.000000001Z", 999_999_999: "1970-01-01T00:00:00.999999999Z",
             1_000_000_000: "1970-01-01T00:00:01.000000000Z"}[ts]
            for ts, ex in zip(odd, exchanges) if ex.request is not None]
    assert got == want


"""output.CsvWriter joins rows that need no quoting itself: its text must equal what the csv
module writes for the same exchange_record values (None as empty, topics joined by ";"), on the
real captures at every level and with values that need quoting, and read back the same."""
import csv
import io

import pytest

from dissector.output import CsvWriter, exchange_record
from dissector.pipeline import dissect
from dissector.tables import EXCHANGE_COLUMN_NAMES

from tests.fuzz.support import REAL, REAL_PORTS


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

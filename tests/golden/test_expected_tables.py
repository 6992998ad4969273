"""Golden tables: each capture in captures/ against its committed exchanges table.

captures/expected/<capture>.exchanges.csv was written by this project and reviewed against the
clients' truth files (tests/integration/test_captures_truth.py checks those independently); this
test keeps every column of every exchange from drifting. After an intended change, regenerate with
`UPDATE_GOLDEN=1 make test` (or pytest tests/golden) and review the diff.
"""
import csv
import io
import json
import os

import pytest

from dissector.output import CsvWriter
from dissector.pipeline import dissect
from tests.support import CAPTURES

EXPECTED = CAPTURES / "expected"
PCAPS = sorted(p.name for p in CAPTURES.glob("*.pcap"))


def broker_port(name):
    stem = name.split(".")[0]
    truth = CAPTURES / f"{stem}.truth.json"
    return json.loads(truth.read_text())["broker_port"] if truth.exists() else 9092


def table(name):
    out = io.StringIO()
    writer = CsvWriter(out)
    run = dissect(CAPTURES / name, (broker_port(name),), level="records")
    for ex in run:
        writer.write(ex)
    assert not run.errors
    return out.getvalue()


@pytest.mark.parametrize("name", PCAPS)
def test_exchanges_table_matches_the_golden_copy(name):
    path = EXPECTED / f"{name.rsplit('.pcap', 1)[0]}.exchanges.csv"
    got = table(name)
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(got)
    assert path.exists(), f"no golden table {path}: run with UPDATE_GOLDEN=1"
    want = path.read_text()
    got_rows = list(csv.DictReader(io.StringIO(got)))
    want_rows = list(csv.DictReader(io.StringIO(want)))
    assert len(got_rows) == len(want_rows)
    for i, (g, w) in enumerate(zip(got_rows, want_rows)):
        diff = {k: (w.get(k), v) for k, v in g.items() if w.get(k) != v}
        assert not diff, f"exchange {i + 1} differs (want, got): {diff}"


def test_every_capture_has_a_golden_table():
    assert len(PCAPS) >= 12
    names = {p.name.rsplit(".exchanges.csv", 1)[0] for p in EXPECTED.glob("*.exchanges.csv")}
    assert names == {n.rsplit(".pcap", 1)[0] for n in PCAPS}

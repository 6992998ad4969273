"""`kafka-dissect records` output pinned: each format of each capture against its golden copy
(captures/expected/NAME.records.FORMAT, written by the row-at-a-time writers the columnar ones
replaced; codecs.pcap's large outputs are pinned by their SHA-256). The resegmented captures hold
the same records, so they must give the same bytes."""
import hashlib
import json

import pytest

from dissector.cli import main
from tests.support import CAPTURES

EXPECTED = CAPTURES / "expected"
NAMES = ["aiokafka", "codecs", "kafka_python", "legacy_messageset", "librdkafka_produce_consume",
         "transactions"]


def records_output(tmp_path, capture, fmt):
    name = capture.split(".")[0]
    port = json.loads((CAPTURES / f"{name}.truth.json").read_text())["broker_port"]
    out = tmp_path / f"out.{fmt}"
    assert main(["records", str(CAPTURES / f"{capture}.pcap"), "--port", str(port),
                 "--format", fmt, "--out", str(out)]) == 0
    return out.read_bytes()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "text"])
@pytest.mark.parametrize("resegmented", [False, True], ids=["capture", "mss1448"])
@pytest.mark.parametrize("name", NAMES)
def test_records_output_matches_the_golden_copy(tmp_path, name, resegmented, fmt):
    got = records_output(tmp_path, f"{name}.mss1448" if resegmented else name, fmt)
    if name == "codecs":
        digests = dict(line.split()[::-1] for line in
                       (EXPECTED / "codecs.records.sha256").read_text().splitlines())
        assert hashlib.sha256(got).hexdigest() == digests[f"codecs.records.{fmt}"]
        return
    want = (EXPECTED / f"{name}.records.{fmt}").read_bytes()
    got_lines, want_lines = got.splitlines(), want.splitlines()
    for i, (g, w) in enumerate(zip(got_lines, want_lines)):
        assert g == w, f"line {i + 1} differs"
    assert len(got_lines) == len(want_lines)

"""The latency anatomy's TCP facts in the Spark job: zero windows (a constructed capture) and
round trips from data and ACK timing (a real capture with its handshakes cut off) give the same
tables as the pandas path."""
from __future__ import annotations

from analysis import load
from analysis.spark import load_output, run
from tests.analysis.build import cut_handshakes
from tests.analysis.test_anatomy import _capture
from tests.support import require_path

from .compare import assert_tables_equal
from .inputs import CAPTURES


def test_zero_windows_and_data_ack_round_trips(spark, tmp_path):
    require_path(CAPTURES / "kafka_python.pcap")
    folder = tmp_path / "in"
    folder.mkdir()
    _capture(folder / "anatomy.pcap")
    cut_handshakes(CAPTURES / "kafka_python.pcap", folder / "cut.pcap")
    result = run([folder], tmp_path / "out", ports=(9092,), spark=spark)
    assert result.errors == [] and len(result.files) == 2
    expected = load([f.removeprefix("file:") for f in result.files], port=9092)
    actual = load_output(tmp_path / "out")
    assert_tables_equal(expected, actual)
    ex = actual.exchanges
    assert ex["zero_windows"].sum() == 1
    assert (ex["rtt_source"] == "data_ack").sum() > 10 and ex["rtt_ms"].notna().sum() > 10

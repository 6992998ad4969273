"""The stats, export and report commands and `read --filter`, run through kafka-dissect's main()."""
import json

import pytest
from pandas.testing import assert_frame_equal

import analysis
from analysis.load import TABLES
from dissector.cli import main

from . import scenario


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return scenario.write(tmp_path_factory.mktemp("cmd") / "scenario.pcap")


def test_stats(capture, capsys):
    assert main(["stats", str(capture), "--width", "200"]) == 0
    out, err = capsys.readouterr()
    for title in ("Latency by api (ms)", "Slowest 10 exchanges", "Fetch long polls",
                  "Errors by name", "Consumer groups", "Consumer lag", "Producer throughput",
                  "Compression", "Acks", "Throttling"):
        assert title in out
    produce = next(line for line in out.splitlines() if line.startswith("Produce "))
    # the first table is by api: count 3, mean 5, p50 4, p90 8, p99 8.9, p99.9 8.99, max 9
    # (three significant figures; at 200 columns none is left out)
    assert produce.split() == ["Produce", "3", "5.00", "4.00", "8.00", "8.90", "8.99", "9.00"]
    assert "NOT_LEADER_OR_FOLLOWER" in out and "REBALANCE_IN_PROGRESS" in out
    assert "\r[" not in err   # no progress bar when stderr is not a terminal


def test_stats_with_filter(capture, capsys):
    assert main(["stats", str(capture), "--filter", 'api_name == "Produce"']) == 0
    out = capsys.readouterr().out
    assert "Produce" in out and "JoinGroup" not in out


def test_bad_filter_and_missing_file_are_usage_errors(capture, tmp_path, capsys):
    assert main(["stats", str(capture), "--filter", "latency_ms >"]) == 2
    assert "--filter" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "nope.pcap"), "--out", str(tmp_path)]) == 2
    assert main(["read", str(capture), "--filter", "os.system('x')"]) == 2


def test_export_reads_back_identical(capture, tmp_path):
    out = tmp_path / "parquet"
    assert main(["export", str(capture), "--out", str(out), "--level", "records"]) == 0
    back = analysis.load_parquet(out)
    direct = analysis.load(capture, records=True)
    for name in TABLES:
        assert_frame_equal(getattr(back, name), getattr(direct, name))
    assert len(back.records) == 9


def test_export_with_filter(capture, tmp_path):
    out = tmp_path / "slow"
    assert main(["export", str(capture), "--out", str(out), "--filter", "latency_ms >= 9"]) == 0
    back = analysis.load_parquet(out)
    # 9 ms Produce, 20 ms JoinGroup, 501 ms Fetch long poll
    assert sorted(back.exchanges["latency_ms"].tolist()) == [9.0, 20.0, 501.0]
    assert set(back.partitions["exchange"]) <= set(back.exchanges["exchange"])


def test_read_filter(capture, tmp_path):
    out = tmp_path / "read.jsonl"
    assert main(["read", str(capture), "--format", "jsonl", "--out", str(out),
                 "--filter", '"orders" in topics and status == "ok" and latency_ms < 5']) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # Produce 4 and 2 ms, Fetch 3 ms, OffsetCommit 1 ms
    assert sorted((r["api_name"], r["latency_ms"]) for r in rows) == \
        [("Fetch", 3.0), ("OffsetCommit", 1.0), ("Produce", 2.0), ("Produce", 4.0)]

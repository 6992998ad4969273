"""End-to-end record latency (analysis.deliveries) against what the clients of the real captures
did (captures/*.truth.json: the offsets the broker acknowledged to each producer, the records each
consumer received), at both decoding levels, across rotated files and through Parquet."""
import json

import pandas as pd
import pyarrow as pa
import pytest

import analysis
from analysis import deliveries as D
from analysis.columns import table_schema, to_pandas
from analysis.load import table_columns
from tests.spark.rotate import rotate
from tests.support import CAPTURES, require_path

NAMES = ["librdkafka_produce_consume", "kafka_python", "aiokafka", "codecs", "transactions",
         "legacy_messageset"]


def _load(name, level="bodies", paths=None):
    truth = json.loads(require_path(CAPTURES / f"{name}.truth.json").read_text())
    return truth, analysis.load(paths or CAPTURES / f"{name}.pcap", port=truth["broker_port"],
                                level=level)


@pytest.fixture(scope="module", params=NAMES)
def loaded(request):
    return request.param, *_load(request.param)


def _keys(df, *cols):
    return set(zip(*(df[c].astype("object").where(df[c].notna(), None) for c in cols)))


def test_every_acknowledged_offset_is_a_row(loaded):
    _, truth, t = loaded
    d = t.deliveries
    produced = {(r["topic"], r["partition"], r["offset"], c["client_id"])
                for c in truth["clients"] for r in c["produced"] if r["offset"] is not None}
    assert produced and produced <= _keys(d, "topic", "partition", "offset", "producer_client_id")
    # one producer per offset; no offset a producer was not given, but for acks=0 producers
    # (tansu answers them on the wire; the client does not look)
    assert not d.duplicated(["topic", "partition", "offset", "consumer_group",
                             "consumer_client_id"]).any()
    acks0 = {c["client_id"] for c in truth["clients"]
             if any(r["offset"] is None for r in c["produced"])}
    extra = {k for k in _keys(d, "topic", "partition", "offset", "producer_client_id")
             if k not in produced}
    assert {k[3] for k in extra} <= acks0


def test_every_consumed_record_is_delivered_to_its_consumer(loaded):
    _, truth, t = loaded
    d = t.deliveries
    got = _keys(d[d["consumer_client_id"].notna()], "consumer_client_id", "topic", "partition",
                "offset")
    consumed = {(c["client_id"], r["topic"], r["partition"], r["offset"])
                for c in truth["clients"] for r in c["consumed"]}
    assert consumed <= got
    # the group is the one the consumer was configured with
    groups = {c["client_id"]: c["config"]["group.id"] if "group.id" in c["config"]
              else c["config"].get("group_id") for c in truth["clients"] if c["consumed"]}
    for cid, group in _keys(d[d["consumer_client_id"].notna()], "consumer_client_id",
                            "consumer_group"):
        assert groups.get(cid) == group, cid
    delivered = d[d["delivery_ts"].notna()]
    assert (delivered["end_to_end_ms"] > 0).all()
    assert (delivered["deliveries"] >= 1).all()
    assert (delivered["delivery_ts"] > delivered["produce_request_ts"]).all()
    e2e = (delivered["delivery_ts"] - delivered["produce_request_ts"]).dt.total_seconds() * 1e3
    assert (e2e - delivered["end_to_end_ms"]).abs().max() < 1e-6


@pytest.mark.parametrize("name", ["codecs", "legacy_messageset", "transactions"])
def test_records_level_gives_the_same_table(name):
    _, bodies = _load(name)
    _, records = _load(name, level="records")
    pd.testing.assert_frame_equal(bodies.deliveries, records.deliveries)


def test_rotated_files_give_the_same_table(tmp_path):
    _, whole = _load("librdkafka_produce_consume")
    files = rotate(CAPTURES / "librdkafka_produce_consume.pcap", tmp_path, 4)
    _, split = _load("librdkafka_produce_consume", paths=files)
    assert len(whole.deliveries) == 60
    pd.testing.assert_frame_equal(whole.deliveries, split.deliveries)


def test_export_and_parquet_round_trip(tmp_path):
    from analysis.load import export
    truth, t = _load("transactions")
    export(CAPTURES / "transactions.pcap", tmp_path / "x", port=truth["broker_port"])
    back = analysis.load_parquet(tmp_path / "x")
    pd.testing.assert_frame_equal(back.deliveries, t.deliveries)
    t.write_parquet(tmp_path / "y")
    pd.testing.assert_frame_equal(analysis.load_parquet(tmp_path / "y").deliveries, t.deliveries)


class _Fake:
    def __init__(self, exchanges, partitions):
        self.exchanges, self.partitions = exchanges, partitions


def _frames(produce_last, fetch_ranges, groups=()):
    """A Produce of offsets 0..produce_last (one partition) and Fetches of [lo, hi] from
    fetch_offset lo, each by (client id, group) over its own exchange."""
    ts = pd.Timestamp("2026-01-01", tz="UTC")
    ex = [dict(exchange=1, api_key=0, client_id="p", client_ip="10.0.0.1", group_id=None,
               request_ts=ts, response_end_ts=ts + pd.Timedelta("1ms"), replica_id=None)]
    parts = [dict(exchange=1, api_key=0, topic="t", partition=0, first_offset=0,
                  last_offset=produce_last, fetch_offset=None, bytes=100)]
    for i, (lo, hi, client, replica) in enumerate(fetch_ranges, start=2):
        ex.append(dict(exchange=i, api_key=1, client_id=client, client_ip="10.0.0.2",
                       group_id=None, request_ts=ts, response_end_ts=ts + pd.Timedelta(f"{i}ms"),
                       replica_id=replica))
        parts.append(dict(exchange=i, api_key=1, topic="t", partition=0, first_offset=0,
                          last_offset=hi, fetch_offset=lo, bytes=100))
    for i, (client, group) in enumerate(groups, start=100):
        ex.append(dict(exchange=i, api_key=12, client_id=client, client_ip="10.0.0.2",
                       group_id=group, request_ts=ts, response_end_ts=ts, replica_id=None))
    def frame(rows, table):
        schema = table_schema(table_columns(table))
        schema = pa.schema([schema.field(c) for c in D.NEEDS[table]])
        return to_pandas(pa.Table.from_pylist(rows, schema=schema))
    return _Fake(frame(ex, "exchanges"), frame(parts, "partitions"))


def test_fetch_offsets_followers_groups_and_redeliveries():
    t = _frames(4, [(2, 4, "c1", None), (0, 4, "c1", None), (3, 4, "c2", None),
                    (0, 4, "follower", 1)], groups=[("c1", "g")])
    d = D.deliveries(t)
    rows = {(o, c): (f, n) for o, c, f, n in zip(d["offset"], d["consumer_client_id"],
                                                 d["fetch_exchange"], d["deliveries"])}
    # c1 (group g) got 2..4 twice, 0..1 once; c2 (no group) 3..4; the follower is no consumer
    assert rows == {(0, "c1"): (3, 1), (1, "c1"): (3, 1), (2, "c1"): (2, 2), (3, "c1"): (2, 2),
                    (4, "c1"): (2, 2), (3, "c2"): (4, 1), (4, "c2"): (4, 1)}
    assert set(d["consumer_group"].dropna()) == {"g"}


def test_a_damaged_count_allocates_nothing():
    # a Produce claiming 2**40 records in 100 bytes: at most bytes / 7 + 1 of them are rows
    d = D.deliveries(_frames(2**40, []))
    assert len(d) == 100 // 7 + 1
    assert d["consumer_client_id"].isna().all() and (d["deliveries"] == 0).all()


def test_percentiles_and_undelivered():
    t = _frames(9, [(0, 4, "c1", None)], groups=[("c1", "g")])
    d = D.deliveries(t)
    by_group = D.percentiles(d, "group")
    assert list(by_group["consumer_group"]) == ["g"] and by_group["count"].iloc[0] == 5
    assert by_group["p50"].iloc[0] == pytest.approx(2.0)
    left = D.undelivered(d)
    assert list(left[["produced", "undelivered"]].iloc[0]) == [10, 5]
    with pytest.raises(ValueError):
        D.percentiles(d, "nope")


def test_jobs_give_the_same_tables():
    """--jobs N: the workers make the exchange rows (anatomy included), the parent the
    deliveries from the merged tables."""
    from analysis.load import Tables, collect
    truth = json.loads(require_path(CAPTURES / "transactions.truth.json").read_text())
    path = [CAPTURES / "transactions.pcap"]
    one = Tables(collect(path, truth["broker_port"])[0].arrow())
    two = Tables(collect(path, truth["broker_port"], jobs=2)[0].arrow())
    pd.testing.assert_frame_equal(one.exchanges, two.exchanges)
    pd.testing.assert_frame_equal(one.deliveries, two.deliveries)
    assert one.exchanges["rtt_ms"].notna().all()

"""Rebalances (analysis.rebalances) on the real captures' consumer groups, against what their
consumers were configured with and received (captures/*.truth.json), and the decoded
subscriptions and assignments against the topics and partitions they consumed."""
import json

import pandas as pd
import pytest

import analysis
from analysis.rebalances import rebalances
from tests.support import CAPTURES, require_path

NAMES = ["librdkafka_produce_consume", "kafka_python", "aiokafka", "codecs", "transactions"]


@pytest.fixture(scope="module", params=NAMES)
def loaded(request):
    truth = json.loads(require_path(CAPTURES / f"{request.param}.truth.json").read_text())
    t = analysis.load(CAPTURES / f"{request.param}.pcap", port=truth["broker_port"])
    return truth, t, rebalances(t)


def _group(run):
    return run["config"].get("group.id") or run["config"].get("group_id")


def test_each_consumer_groups_first_generation(loaded):
    truth, t, r = loaded
    consumers = [c for c in truth["clients"] if c["consumed"] and _group(c)]
    assert consumers
    for run in consumers:
        mine = r[r["group_id"] == _group(run)]
        assert len(mine) >= 1, _group(run)
        first = mine.iloc[0]
        assert first["protocol"] == "classic" and first["trigger"] == "first join"
        assert first["trigger_client"] == run["client_id"]
        assert first["members"] == 1
        assert first["start_ts"] <= first["synced_ts"]
        assert 0 < first["sync_ms"] <= first["duration_ms"]
        if not pd.isna(first["resumed_ts"]):
            assert first["resumed_ts"] >= first["synced_ts"]
        topics = {r_["topic"] for r_ in run["consumed"]}
        partitions = {f"{r_['topic']}:{r_['partition']}" for r_ in run["consumed"]}
        (sub,) = first["subscriptions"]
        assert set(sub.split(": ", 1)[1].split(", ")) >= topics
        (assigned,) = first["assignments"]
        assert set(assigned.split(": ", 1)[1].split(", ")) >= partitions


def test_the_rebalance_ends_at_the_members_first_fetch(loaded):
    truth, t, r = loaded
    ex = t.exchanges
    for row in r.itertuples():
        if pd.isna(row.resumed_ts):
            continue
        fetch = ex[(ex["api_name"] == "Fetch") & (ex["request_ts"] == row.resumed_ts)]
        assert len(fetch) >= 1
        assert row.duration_ms == pytest.approx(
            (row.resumed_ts - row.start_ts).total_seconds() * 1e3)


def test_constructed_scenario_by_hand(tmp_path):
    """tests/analysis/scenario.py: JoinGroup at 400 ms, SyncGroup answered at 431 ms, the
    member's first Fetch at 500 ms."""
    from tests.analysis import scenario
    t = analysis.load(scenario.write(tmp_path / "scenario.pcap"))
    (row,) = rebalances(t).itertuples()
    assert (row.group_id, row.generation, row.members, row.trigger) == ("g1", 3, 1, "first join")
    assert row.sync_ms == pytest.approx(31.0) and row.duration_ms == pytest.approx(100.0)


def test_kip848_capture_is_what_its_script_makes(tmp_path):
    from tests.analysis import kip848
    shipped = require_path(kip848.SHIPPED).read_bytes()
    assert kip848.write(tmp_path / "kip848.pcap").read_bytes() == shipped


def test_kip848_rebalances_as_the_script_tells():
    """tests/analysis/kip848.py: members joining, epochs bumping, partitions moving from A to B,
    B leaving, A fenced and rejoining; each epoch's row worked out by hand there."""
    from tests.analysis import kip848 as K
    from tests.analysis.build import ms
    t = analysis.load(K.SHIPPED)
    beats = t.exchanges[t.exchanges["api_key"] == 68]
    assert len(beats) == len(K.BEATS) and (beats["status"] == "ok").all()
    assert list(beats["response_epoch"]) == [b.resp_epoch for b in K.BEATS]
    r = rebalances(t)
    assert set(r["protocol"]) == {"consumer"} and set(r["group_id"]) == {K.GROUP}
    got = [(row.generation, row.start_ts, row.synced_ts, row.resumed_ts, row.sync_ms,
            row.duration_ms, row.members, row.member_ids, row.subscriptions, row.assignments,
            row.trigger, row.trigger_client) for row in r.itertuples()]
    ts = (lambda x: pd.Timestamp(ms(x), unit="ns", tz="UTC"))  # noqa: E731
    want = [(epoch, ts(start), ts(synced), ts(resumed), float(synced - start),
             float(resumed - start), len(members), sorted(members),
             sorted(f"{m}: {K.TOPIC}" for m in members),
             sorted(f"{m}: {K.parts(p)}" for m, p in assigned.items()), trigger, client)
            for epoch, start, synced, resumed, members, assigned, trigger, client
            in K.EXPECTED]
    assert got == want


def test_kip848_group_summary_counts_joins_and_leaves():
    """The groups summary of the same script: three joins (A, B, A again after being fenced),
    B's leave, the fenced heartbeat, two members."""
    from analysis import consumers
    from tests.analysis import kip848 as K
    g = consumers.groups(analysis.load(K.SHIPPED)).set_index("group_id").loc[K.GROUP]
    assert (g["join"], g["leave"], g["heartbeat"], g["members"]) == (3, 1, 1, 2)


def test_arrow_dtypes_and_an_empty_table():
    """Arrow dtypes as documented in REBALANCE_COLUMNS, also with no group in the capture."""
    from analysis.columns import table_schema
    from analysis.rebalances import REBALANCE_COLUMNS
    from tests.analysis import kip848
    want = table_schema(REBALANCE_COLUMNS)
    for t in (analysis.load(kip848.SHIPPED), analysis.load(CAPTURES / "codecs.pcap")):
        r = rebalances(t)
        assert [str(d.pyarrow_dtype) for d in r.dtypes] == [str(f.type) for f in want]
    with pytest.warns(UserWarning, match="no TCP on port 1;"):
        empty = rebalances(analysis.load(kip848.SHIPPED, port=1))
    assert empty.empty and list(empty.columns) == want.names


def test_export_and_parquet_round_trip(tmp_path):
    """t.rebalances is the table, and the same from the tables export and Tables.write_parquet
    write and load_parquet reads back."""
    from analysis.load import export
    from tests.analysis import kip848
    t = analysis.load(kip848.SHIPPED)
    pd.testing.assert_frame_equal(t.rebalances, rebalances(t))
    export(kip848.SHIPPED, tmp_path / "x")
    pd.testing.assert_frame_equal(analysis.load_parquet(tmp_path / "x").rebalances, t.rebalances)
    t.write_parquet(tmp_path / "y")
    pd.testing.assert_frame_equal(analysis.load_parquet(tmp_path / "y").rebalances, t.rebalances)


def test_kip848_damaged_heartbeats_are_no_match():
    """Heartbeats a damaged capture left without an epoch, a member id or an answer take no
    part (no 'boolean value of NA is ambiguous'); the whole ones still make their epoch."""
    from tests.analysis.fake import NS, Run, connection, exchange, tables
    run = Run()
    c = connection(run)
    beats = [(0, "m", 0, 1, ("t:0",)), (10, None, 1, 1, None), (20, "m", None, None, None),
             (30, "m", None, 2, ("t:0",))]
    exchanges = [exchange(c, i, 68, 0, at, at + 1 if given is not None else None,
                          req=NS(group_id="g", member_id=member, member_epoch=epoch,
                                 subscribed_topic_names=["t"] if epoch == 0 else None),
                          resp=NS(error_code=0, member_epoch=given, member_id=member,
                                  assignment=None) if given is not None else None)
                 for i, (at, member, epoch, given, _) in enumerate(beats, start=1)]
    r = rebalances(tables(run, exchanges))
    assert list(r["generation"]) == [1, 2]
    assert list(r["trigger"]) == ["member joined", "epoch bump"]
    assert [list(m) for m in r["member_ids"]] == [["m"], ["m"]]

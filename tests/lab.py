"""The ground-truth lab: real clients that write down *when* they did what.

A kafka-python producer logs each record's send time (just before `send`), the offset the broker
acknowledged and the time the acknowledgement reached it; kafka-python consumers of one group log
each record's receive time (when `poll` handed it over) and, through a rebalance listener, when
their partitions were revoked and assigned, with the generation and member id the coordinator gave.
A second consumer joins the group and later leaves it (close: LeaveGroup), forcing two rebalances.
A librdkafka consumer in a group of its own receives every record too (Fetch v16, by topic id).

All times are `time.time()` on the capturing machine: the clock tcpdump stamps packets with. The
lab needs no decoder of this project; tests compare the dissector's tables against its log.
Bounded: every wait has a deadline, every client is closed.
"""
from __future__ import annotations

import threading
import time
from collections import namedtuple

from tests import traffic as T

# One acknowledged record as the producer saw it; times are seconds since the epoch.
Sent = namedtuple("Sent", "topic partition offset sent_ts acked_ts")
# One record as a consumer got it from poll().
Received = namedtuple("Received", "client_id topic partition offset received_ts")
# A rebalance listener call: kind "revoked" | "assigned", with the generation the consumer was in.
Rebalance = namedtuple("Rebalance", "client_id kind ts generation member_id partitions")
# Something a client began: "subscribe" (a consumer starts joining) or "close" (it leaves).
Step = namedtuple("Step", "client_id kind ts")

_KINDS = {"sent": Sent, "received": Received, "rebalances": Rebalance, "steps": Step}

TOPIC, GROUP, AUDIT_GROUP = "lab", "lab-group", "lab-audit"
PRODUCER, FIRST, SECOND = "lab-producer", "lab-consumer-1", "lab-consumer-2"
AUDIT = "lab-audit-consumer"   # librdkafka, its own group: every record a second time
GROUPS = {FIRST: GROUP, SECOND: GROUP, AUDIT: AUDIT_GROUP}
CONSUMER_CONFIG = dict(session_timeout_ms=6000, heartbeat_interval_ms=500, fetch_max_wait_ms=100,
                       auto_offset_reset="earliest", max_poll_records=50)


class LabLog:
    """Everything the lab's clients wrote down."""

    def __init__(self):
        self.sent, self.received, self.rebalances, self.steps = [], [], [], []
        self.notes = []
        self._lock = threading.Lock()

    def add(self, kind, item):
        with self._lock:
            getattr(self, kind).append(item)

    def to_json(self):
        return {k: [x._asdict() for x in getattr(self, k)]
                for k in _KINDS} | {"notes": self.notes}

    @classmethod
    def from_json(cls, data):
        log = cls()
        for kind, row in _KINDS.items():
            setattr(log, kind, [row(**x) for x in data[kind]])
        log.notes = list(data["notes"])
        return log


class _Consumer(threading.Thread):
    """One group member polling in its own thread until told to stop."""

    def __init__(self, bootstrap, client_id, log, deadline):
        super().__init__(daemon=True, name=client_id)
        self.bootstrap, self.client_id, self.log = bootstrap, client_id, log
        self.deadline = deadline
        self.stop = threading.Event()
        self.assigned = threading.Event()   # set at each assignment; cleared by the waiter
        self.error = None

    def _listener(self, consumer):
        import kafka
        me = self

        def generation():
            g = consumer._coordinator._generation  # the client's own view (no public accessor)
            return g.generation_id, g.member_id

        class Listener(kafka.ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                me.log.add("rebalances", Rebalance(me.client_id, "revoked", time.time(),
                                                   *generation(), _names(revoked)))

            def on_partitions_assigned(self, assigned):
                me.log.add("rebalances", Rebalance(me.client_id, "assigned", time.time(),
                                                   *generation(), _names(assigned)))
                me.assigned.set()
        return Listener()

    def run(self):
        import kafka
        c = None
        try:
            c = kafka.KafkaConsumer(bootstrap_servers=self.bootstrap, client_id=self.client_id,
                                    group_id=GROUP, **CONSUMER_CONFIG)
            self.log.add("steps", Step(self.client_id, "subscribe", time.time()))
            c.subscribe([TOPIC], listener=self._listener(c))
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                for msgs in c.poll(timeout_ms=50).values():
                    now = time.time()
                    for m in msgs:
                        self.log.add("received", Received(self.client_id, m.topic, m.partition,
                                                          m.offset, now))
        except Exception as exc:  # part of the record; the test reports it
            self.error = exc
        finally:
            if c is not None:
                self.log.add("steps", Step(self.client_id, "close", time.time()))
                c.close()  # leaves the group: LeaveGroup

    def wait_assigned(self, timeout):
        ok = self.assigned.wait(timeout)
        self.assigned.clear()
        return ok


class _Audit(threading.Thread):
    """A librdkafka consumer in a group of its own (Fetch by topic id), polling until stopped."""

    def __init__(self, bootstrap, log, deadline):
        super().__init__(daemon=True, name=AUDIT)
        self.bootstrap, self.log, self.deadline = bootstrap, log, deadline
        self.stop = threading.Event()
        self.error = None

    def run(self):
        import confluent_kafka
        c = None
        try:
            c = confluent_kafka.Consumer({
                "bootstrap.servers": self.bootstrap, "client.id": AUDIT,
                "group.id": AUDIT_GROUP, "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                "fetch.wait.max.ms": 100})
            self.log.add("steps", Step(AUDIT, "subscribe", time.time()))
            c.subscribe([TOPIC])
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                m = c.poll(0.05)
                if m is not None and m.error() is None:
                    self.log.add("received", Received(AUDIT, m.topic(), m.partition(),
                                                      m.offset(), time.time()))
        except Exception as exc:  # part of the record; the test reports it
            self.error = exc
        finally:
            if c is not None:
                self.log.add("steps", Step(AUDIT, "close", time.time()))
                c.close()

    def wait_for(self, count, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.is_alive():
            if sum(r.client_id == AUDIT for r in self.log.received) >= count:
                return True
            time.sleep(0.05)
        return False


def _names(tps):
    return sorted(f"{tp.topic}:{tp.partition}" for tp in tps)


def _produce_batches(producer, log, batches, size, gap, seed):
    """`batches` bursts of `size` records, `gap` seconds apart, each flushed (one Produce each)."""
    for b in range(batches):
        for i, rec in enumerate(T.make_records(TOPIC, size, seed=seed * 100 + b,
                                               null_header_values=False)):
            sent = time.time()

            def acked(meta, sent=sent):
                log.add("sent", Sent(meta.topic, meta.partition, meta.offset, sent, time.time()))

            fut = producer.send(TOPIC, key=rec.key or f"k{i}".encode(), value=rec.value,
                                headers=list(rec.headers) or None, partition=i % 2)
            fut.add_callback(acked)
            fut.add_errback(lambda exc: log.notes.append(f"send failed: {exc}"))
        producer.flush(10)
        time.sleep(gap)


def run(bootstrap, batches=3, size=4, gap=0.15, timeout=90.0):
    """The lab: a 2-partition topic; consumer 1 joins (and the audit consumer, in its own
    group); records; consumer 2 joins (rebalance); records; consumer 2 leaves (rebalance);
    records. Returns the LabLog."""
    import kafka
    from kafka.admin import NewTopic
    log = LabLog()
    deadline = time.monotonic() + timeout
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lab-admin")
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    finally:
        admin.close()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, client_id=PRODUCER, linger_ms=0,
                                   request_timeout_ms=5000)
    first = _Consumer(bootstrap, FIRST, log, deadline)
    second = _Consumer(bootstrap, SECOND, log, deadline)
    audit = _Audit(bootstrap, log, deadline)
    try:
        audit.start()
        first.start()
        if not first.wait_assigned(15):
            raise RuntimeError(f"{FIRST} got no assignment: {first.error}")
        _produce_batches(producer, log, batches, size, gap, seed=1)
        second.start()
        if not (second.wait_assigned(15) and first.wait_assigned(5)):
            raise RuntimeError(f"no rebalance after {SECOND} joined: {second.error}")
        _produce_batches(producer, log, batches, size, gap, seed=2)
        second.stop.set()
        second.join(10)
        if not first.wait_assigned(15):
            raise RuntimeError(f"no rebalance after {SECOND} left: {first.error}")
        _produce_batches(producer, log, batches, size, gap, seed=3)
        if not audit.wait_for(len(log.sent), 15):
            log.notes.append(f"{AUDIT} did not receive every record")
        time.sleep(0.5)  # let the last records reach the consumer
    finally:
        producer.close(timeout=5)
        for c in (first, second, audit):
            c.stop.set()
        for c in (first, second, audit):
            c.join(10)
    for c in (first, second, audit):
        if c.error is not None:
            log.notes.append(f"{c.client_id}: {type(c.error).__name__}: {c.error}")
    return log


SHIPPED = T.ROOT / "captures" / "lab"


def make(folder=SHIPPED):
    """Run the lab under tcpdump with a fresh tansu: folder/ground_truth.pcap and
    folder/ground_truth.log.json (the clients' log, the broker and the capture's counts)."""
    import datetime
    import json
    from pathlib import Path
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with T.Broker() as broker:
        with T.Capture(folder / "ground_truth.pcap", broker.port) as cap:
            log = run(broker.bootstrap)
    if cap.dropped or log.notes:
        raise RuntimeError(f"lab not clean: dropped {cap.dropped}, notes {log.notes}")
    out = {"made_utc": made, "command": "python -m tests.lab", "broker": broker.version,
           "broker_port": broker.port,
           "clients": [T.kafka_python_version(), T.librdkafka_version()],
           "tcpdump": {"packets": cap.captured, "dropped": cap.dropped}, "log": log.to_json()}
    (folder / "ground_truth.log.json").write_text(json.dumps(out, indent=1) + "\n")
    return folder


if __name__ == "__main__":
    print(make())

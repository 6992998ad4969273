"""The shipped TLS capture, captures/tls/kafka_tls.pcap, with its key log (captures/README.md).

Its TLS leg (9093) decrypted with the key log must give exactly what the clients logged and sent
(the checks every shipped capture passes), and exactly the Kafka messages of its plaintext leg
(19092, the terminator's broker side, captured at the same time), connection by connection
through the terminator's map, byte for byte; tshark 4.0 with the same key log must agree on
every message it decodes. Without the key log no TLS byte may be read as Kafka.
"""
import csv
import io
import json
import os
import subprocess
import sys

import pytest

from tests import tls_lab as L
from tests.integration import truth_checks as C
from tests.support import CAPTURES, ROOT, require_tool

FOLDER = CAPTURES / "tls"
NAME = "kafka_tls"
SUFFIXES = (".pcap", ".mss1448.pcap")


def truth():
    return json.loads((FOLDER / f"{NAME}.truth.json").read_text())


def _dissect(suffix, port, level="bodies", keylog=True):
    from dissector.pipeline import dissect
    d = dissect(FOLDER / f"{NAME}{suffix}", ports=(port,), level=level,
                keylog=FOLDER / f"{NAME}.keys.log" if keylog else None)
    return d, list(d)


def test_files_are_there_and_small():
    for suffix in SUFFIXES + (".keys.log", ".truth.json"):
        assert (FOLDER / f"{NAME}{suffix}").stat().st_size <= 1 << 20
    t = truth()
    assert t["broker_port"] == 9093 and t["tls"]["plain_port"] == 19092
    assert {(c["version"], c["cipher"]) for c in t["tls"]["connections"]} == \
        {("TLSv1.3", "TLS_AES_128_GCM_SHA256")}


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_requests_match_the_clients(suffix):
    C.check_requests(FOLDER, NAME, suffix)


def test_mss_copy_gives_the_same_exchanges():
    C.check_mss_copy(FOLDER, NAME)


def test_bodies_decode_cleanly():
    C.check_bodies(FOLDER, NAME)


def test_records_are_what_the_clients_sent_and_received():
    C.check_records(FOLDER, NAME)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_decrypted_leg_is_the_plaintext_leg(suffix):
    t = truth()
    _, tls = _dissect(suffix, t["broker_port"])
    _, plain = _dissect(suffix, t["tls"]["plain_port"], keylog=False)
    connections = {c["client_port"]: c for c in t["tls"]["connections"]}
    problems, lost = L.compare_legs(tls, plain, connections)
    assert problems == []
    _, requests = C.load_truth(FOLDER, NAME)
    assert all(L.closed_before_answer(e, plain, requests) for e in lost)
    assert len(tls) == len(plain) >= 30
    assert {(e.connection.tls.version_name, e.connection.tls.cipher_name) for e in tls} == \
        {("TLS 1.3", "TLS_AES_128_GCM_SHA256")}


def test_tshark_agrees_with_the_decryption():
    require_tool("tshark")
    t = truth()
    _, tls = _dissect(".pcap", t["broker_port"], "headers")
    messages = L.tshark_messages(FOLDER / f"{NAME}.pcap", t["broker_port"],
                                 FOLDER / f"{NAME}.keys.log")
    assert L.compare_tshark(tls, messages) == []
    assert len(messages) == sum((e.request is not None) + (e.response is not None) for e in tls)


def test_without_keys_nothing_is_read_as_kafka():
    t = truth()
    d, exchanges = _dissect(".pcap", t["broker_port"], keylog=False)
    assert exchanges == []
    no_keys = [i for i in d.issues if i.code == "tls.no_keys"]
    assert len(no_keys) == len(t["tls"]["connections"])
    assert {i.code for i in d.issues} == {"tls.no_keys"}
    env = {k: v for k, v in os.environ.items() if k != "SSLKEYLOGFILE"}
    proc = subprocess.run([sys.executable, "-m", "dissector", "read", str(FOLDER / f"{NAME}.pcap"),
                           "--port", "9093"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0 and proc.stdout == ""
    assert f"{len(no_keys)} TLS connections not decrypted: pass --keylog FILE" in proc.stderr


def _table(suffix):
    from dissector.output import CsvWriter
    out = io.StringIO()
    writer = CsvWriter(out)
    _, exchanges = _dissect(suffix, truth()["broker_port"], "records")
    for ex in exchanges:
        writer.write(ex)
    return out.getvalue()


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_exchanges_table_matches_the_golden_copy(suffix):
    """captures/tls/expected/: every column of every exchange kept from drifting (regenerate with
    UPDATE_GOLDEN=1 and review the diff, as for tests/golden)."""
    path = FOLDER / "expected" / f"{NAME}{suffix[:-len('.pcap')]}.exchanges.csv"
    got = _table(suffix)
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
    want_rows = list(csv.DictReader(io.StringIO(path.read_text())))
    got_rows = list(csv.DictReader(io.StringIO(got)))
    assert len(got_rows) == len(want_rows)
    for i, (g, w) in enumerate(zip(got_rows, want_rows)):
        diff = {k: (w.get(k), v) for k, v in g.items() if w.get(k) != v}
        assert not diff, f"exchange {i + 1} differs (want, got): {diff}"

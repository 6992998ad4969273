"""The live loop with a scripted packet source: expiry, stops, the written file, memory."""
import gc
import io
import os
import signal
import struct
import threading
import time
import tracemalloc
from collections import deque

from dissector.capture.files import read_packets
from dissector.capture.writer import PcapngWriter
from dissector.live.rolling import RollingStats
from dissector.live.runner import LiveCapture
from dissector.live.stop import StopConditions
from dissector.output import make_writer
from dissector.pipeline import Dissector
from tests.support import require_module

BROKER = 9092


def api_versions_request(corr, client_id=b"live-test"):
    """ApiVersions v0 request, laid out by hand from the spec: api_key int16 = 18, api_version
    int16 = 0, correlation_id int32, client_id int16-prefixed string; no body."""
    body = struct.pack(">hhih", 18, 0, corr, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def api_versions_response(corr):
    """ApiVersions v0 response: correlation_id, error_code int16 = 0, api_keys array of
    (api_key, min_version, max_version) int16 triples (one entry here)."""
    body = struct.pack(">ihi", corr, 0, 1) + struct.pack(">hhh", 18, 0, 3)
    return struct.pack(">i", len(body)) + body


class Packets:
    """Ethernet/IPv4/TCP packets of client connections to BROKER, built with scapy."""

    def __init__(self):
        scapy = require_module("scapy.all")
        self.Ether, self.IP, self.TCP = scapy.Ether, scapy.IP, scapy.TCP

    def segment(self, cport, to_broker, seq, ack, payload=b"", flags="PA", client="10.0.0.1"):
        ip = (self.IP(src=client, dst="10.0.0.2") if to_broker
              else self.IP(src="10.0.0.2", dst=client))
        tcp = (self.TCP(sport=cport, dport=BROKER, seq=seq, ack=ack, flags=flags) if to_broker
               else self.TCP(sport=BROKER, dport=cport, seq=seq, ack=ack, flags=flags))
        return bytes(self.Ether() / ip / tcp / payload)

    def handshake(self, cport, client="10.0.0.1"):
        return [self.segment(cport, True, 1000, 0, flags="S", client=client),
                self.segment(cport, False, 5000, 1001, flags="SA", client=client),
                self.segment(cport, True, 1001, 5001, flags="A", client=client)]


class FakeSource:
    """Hands out scripted (ts_ns, data) packets a few at a time, like the socket would."""
    linktype = 1

    def __init__(self, packets, on_read=None):
        self.queue = deque(packets)
        self.on_read = on_read
        self.kernel_packets = 0
        self.kernel_drops = 0

    def read(self, timeout):
        if self.on_read is not None:
            self.on_read()
        if not self.queue:
            time.sleep(min(timeout, 0.01))
            return []
        batch = []
        while self.queue and len(batch) < 3:
            ts, data = self.queue.popleft()
            batch.append((ts, data, len(data)))
        self.kernel_packets += len(batch)
        return batch

    def update_kernel_stats(self):
        pass


def _capture(source, stop, out=None, fmt="jsonl", **kw):
    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    cap = LiveCapture(source, Dissector((BROKER,), level="headers"), make_writer(fmt, out), out,
                      err, stop, label="test", **kw)
    return cap, out, err


def test_request_without_answer_becomes_unanswered_while_running():
    pk = Packets()
    now = time.time_ns()
    packets = [(now, p) for p in pk.handshake(40000)]
    packets.append((now, pk.segment(40000, True, 1001, 5001, api_versions_request(7))))
    stop = StopConditions(duration=20)
    seen = []

    def on_read():   # stop as soon as the unanswered exchange is out: proves it came before
        if '"status":"unanswered"' in out.getvalue():
            seen.append(stop.elapsed())
            stop.reason = "test"

    source = FakeSource(packets, on_read)
    cap, out, err = _capture(source, stop, request_timeout=0.3)
    cap.run()
    assert seen and seen[0] < 5
    assert stop.reason == "test"
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and '"correlation_id":7' in lines[0]
    assert "unanswered 1" in err.getvalue()


def test_answered_exchange_and_summary():
    pk = Packets()
    now = time.time_ns()
    packets = [(now, p) for p in pk.handshake(40001)]
    req, resp = api_versions_request(9), api_versions_response(9)
    packets.append((now + 1_000_000, pk.segment(40001, True, 1001, 5001, req)))
    packets.append((now + 3_500_000, pk.segment(40001, False, 5001, 1001 + len(req), resp)))
    cap, out, err = _capture(FakeSource(packets), StopConditions(duration=0.5), fmt="text")
    cap.run()
    text = out.getvalue()
    assert "ApiVersions v0" in text and "corr=9" in text and "2.500 ms" in text
    summary = err.getvalue()
    assert "stopped (duration)" in summary
    assert "packets: 5 captured" in summary
    assert "exchanges: 1 (ok 1)" in summary
    row = [line for line in summary.splitlines() if line.startswith("ApiVersions")][0].split()
    assert row[1] == "1" and row[3] == row[6] == "2.50"   # requests, p50, max (3 figures)


def test_count_stops_and_file_holds_exactly_what_was_fed(tmp_path):
    pk = Packets()
    now = time.time_ns()
    packets = []
    for i in range(10):
        packets += [(now + i, p) for p in pk.handshake(41000 + i)]
    path = tmp_path / "out.pcapng"
    pcap = PcapngWriter(str(path), 1)
    cap, out, err = _capture(FakeSource(packets), StopConditions(count=7), pcap=pcap,
                             pcap_path=str(path))
    cap.run()
    assert "stopped (count)" in err.getvalue()
    back = list(read_packets(str(path)))
    assert [(ts, bytes(data)) for _, ts, _, data in back] == packets[:7]


def test_sigterm_stops_cleanly_and_closes_the_file(tmp_path):
    pk = Packets()
    now = time.time_ns()
    packets = [(now, p) for p in pk.handshake(40002)]
    packets.append((now, pk.segment(40002, True, 1001, 5001, api_versions_request(3))))
    path = tmp_path / "term.pcapng"
    pcap = PcapngWriter(str(path), 1)
    stop = StopConditions(duration=30)
    cap, out, err = _capture(FakeSource(packets), stop, pcap=pcap, pcap_path=str(path))
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        cap.run()
    finally:
        timer.cancel()
    assert stop.reason == "terminated" and stop.elapsed() < 10
    # the request in flight was flushed as unanswered, and the file reads back whole
    assert '"status":"unanswered"' in out.getvalue()
    assert len(list(read_packets(str(path)))) == 4
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL or callable(
        signal.getsignal(signal.SIGTERM))


class _ClosedPipe(io.StringIO):
    def write(self, s):
        raise BrokenPipeError


def test_closed_output_stops_the_capture():
    pk = Packets()
    now = time.time_ns()
    req, resp = api_versions_request(1), api_versions_response(1)
    packets = [(now, p) for p in pk.handshake(40003)]
    packets += [(now, pk.segment(40003, True, 1001, 5001, req)),
                (now, pk.segment(40003, False, 5001, 1001 + len(req), resp))]
    stop = StopConditions(duration=30)
    cap, out, err = _capture(FakeSource(packets), stop, out=_ClosedPipe())
    cap.run()
    assert stop.reason == "output closed" and cap.output_closed


def _moved(packet, to_broker, client_ip, cport):
    """A copy of a template packet for another client address and port (checksums are not
    checked by the dissector, as loopback captures carry unfinished ones)."""
    b = bytearray(packet)
    ip_at, port_at = (26, 34) if to_broker else (30, 36)
    b[ip_at:ip_at + 4] = client_ip
    b[port_at:port_at + 2] = cport.to_bytes(2, "big")
    return bytes(b)


def test_memory_stays_flat_with_idle_connections_and_unanswered_requests():
    """Thousands of connections that never close and never get an answer, in rounds minutes
    apart: with expiry the memory held after each round stays level; the same rounds without
    expiry keep growing."""
    pk = Packets()
    template = pk.handshake(10000) + [pk.segment(10000, True, 1001, 5001,
                                                 api_versions_request(1, b"x" * 2000))]
    directions = (True, False, True, True)
    base = time.time_ns() - 2000 * 10**9     # long ago: idle and overdue by now
    rounds = []
    for r in range(4):
        batch = []
        for i in range(800):
            ip = bytes((10, 1, r, i % 250))
            batch += [(base + r * 200 * 10**9, _moved(p, d, ip, 10000 + i))
                      for p, d in zip(template, directions)]
        rounds.append(batch)

    def held(expire):
        d = Dissector((BROKER,), level="headers")
        cap = LiveCapture(FakeSource([]), d, make_writer("jsonl", io.StringIO()), io.StringIO(),
                          io.StringIO(), StopConditions(), stats=RollingStats(),
                          idle_timeout=60, request_timeout=30)
        cap.writer = make_writer("jsonl", open(os.devnull, "w"))
        sizes = []
        tracemalloc.start()
        try:
            for batch in rounds:
                for n, (ts, data) in enumerate(batch):
                    d.feed(n, ts, 1, data)
                if expire:
                    cap._housekeeping()
                else:
                    cap._write_exchanges()
                gc.collect()     # what is held, not garbage waiting for the cycle collector
                sizes.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
            cap.writer.out.close()
        return sizes, cap

    flat, cap = held(expire=True)
    assert cap.stats.statuses["unanswered"] == 4 * 800
    growing, _ = held(expire=False)
    assert growing[-1] - growing[0] > 3 * 800 * 2000       # each round pins its requests
    assert flat[-1] - flat[0] < (growing[-1] - growing[0]) / 10


def test_interface_failure_ends_with_summary_and_error(tmp_path):
    import errno

    class Failing(FakeSource):
        def read(self, timeout):
            if not self.queue:
                raise OSError(errno.ENETDOWN, os.strerror(errno.ENETDOWN))
            return super().read(timeout)

    pk = Packets()
    now = time.time_ns()
    path = tmp_path / "down.pcapng"
    cap, out, err = _capture(Failing([(now, p) for p in pk.handshake(40004)]),
                             StopConditions(duration=30), pcap=PcapngWriter(str(path), 1),
                             pcap_path=str(path))
    cap.run()
    assert cap.error == "capture failed: Network is down"
    assert "stopped (error)" in err.getvalue()
    assert len(list(read_packets(str(path)))) == 3

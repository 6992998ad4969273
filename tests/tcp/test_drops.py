"""Real captures with packets taken out, as a lossy capture point loses them.

The reference is the same capture read whole: every exchange whose request and response packets
all survive must still come out, paired with the same response, and nothing may be paired with a
response that was not its own. Captures are the project's own (captures/README.md), made with
real clients against a real broker."""
import random

import pytest

from dissector.capture.files import read_packets
from dissector.capture.layers import tcp_segment
from dissector.pipeline import Dissector

from tests.support import CAPTURES, require_path

CASES = ["librdkafka_produce_consume.mss1448.pcap", "codecs.mss1448.pcap",
         "kafka_python.mss1448.pcap"]


def dissect(packets, skip=frozenset()):
    d = Dissector(ports=(9092,))
    out = []
    for i, (no, ts, linktype, data) in enumerate(packets):
        if i not in skip:
            d.feed(no, ts, linktype, data)
            out.extend(d.output)
            d.output.clear()
    d.finish()
    out.extend(d.output)
    return out


def payload_packets(packets):
    """packet number -> (ports, carries payload)"""
    info = {}
    for no, _ts, linktype, data in packets:
        seg = tcp_segment(linktype, data)
        if isinstance(seg, tuple):
            info[no] = ((seg[2], seg[3]), bool(seg[7]))
    return info


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("rate,cut", [(0.03, 0), (0.08, 30)])
def test_every_surviving_exchange_is_paired_correctly(name, rate, cut):
    packets = list(read_packets(require_path(CAPTURES / name)))
    info = payload_packets(packets)
    reference = [e for e in dissect(packets) if e.status == "ok"]
    assert reference

    def carriers(frame, port):
        return {n for n in range(frame.first_packet, frame.last_packet + 1)
                if n in info and port in info[n][0] and info[n][1]}

    rng = random.Random(f"{name}{rate}")
    for _trial in range(4):
        start = rng.randrange(cut) if cut else 0
        skip = set(range(start)) | set(rng.sample(range(len(packets)),
                                                  int(len(packets) * rate)))
        gone = {packets[i][0] for i in skip}
        out = dissect(packets, skip)
        paired = {(e.connection.client_port, e.request.first_packet): e.response.first_packet
                  for e in out if e.request is not None and e.response is not None}
        for e in reference:
            port = e.connection.client_port
            if carriers(e.request, port) & gone or carriers(e.response, port) & gone:
                continue
            assert paired.get((port, e.request.first_packet)) == e.response.first_packet, e
        truth = {(e.connection.client_port, e.request.first_packet): e.response.first_packet
                 for e in reference}
        for key, response_packet in paired.items():
            assert truth.get(key) in (None, response_packet)

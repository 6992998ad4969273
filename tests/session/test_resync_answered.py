"""A capture that starts inside a request whose leftover bytes hold a plausible false header:
among the resync candidates, the one whose correlation id the broker's next response answers is
taken, so the real request after the false header pairs with its response (a false header taken
instead swallowed it, and its response was lost). Real bytes: kafka-python's pipelined Produce
requests from captures/, the capture cut inside the first and a false header written into its
leftover bytes."""
import struct

import pytest

from dissector.pipeline import dissect
from tests.fuzz.splice import tcp_layout, trim_front, with_payload
from tests.fuzz.support import REAL_PORTS, exchange_key, packets, write_pcap
from tests.support import CAPTURES

CAPTURE = CAPTURES / "kafka_python.mss1448.pcap"
FALSE_ID = 0x12345            # never answered
CUT = 100                     # bytes of the first request the capture misses
AT = 20                       # where the false header sits in what the capture sees of it


def _pipelined(full):
    """Two requests of one connection, the second sent before the first's answer."""
    for a, b in zip(full, full[1:]):
        if (a.connection is b.connection and a.response is not None and b.response is not None
                and b.request.last_packet < a.response.first_packet):
            return a, b
    raise AssertionError("no pipelined requests in " + CAPTURE.name)


def _false_header(length):
    """A Produce v7 request header with an ordinary client id, `length` bytes long in all."""
    head = struct.pack(">hhih", 0, 7, FALSE_ID, 10) + b"producer-1"
    return struct.pack(">i", length - 4) + head


def _ends(ex):
    c = ex.connection
    return c.client_ip, c.client_port, c.broker_ip, c.broker_port


def _cut(tmp_path, short=0, drop_last_answer=False):
    """The capture, the connection of two pipelined requests starting CUT bytes into the first
    (a false header AT bytes later whose frame ends `short` bytes before the second request
    does); with drop_last_answer, without the second's response."""
    pkts = packets(CAPTURE)
    full = list(dissect(CAPTURE, REAL_PORTS))
    a, b = _pipelined(full)
    first = a.request.first_packet - 1
    data = pkts[first][2]
    src, dst, sport, dport, start, end = tcp_layout(data)
    payload = data[start:end]
    assert payload[:4] == struct.pack(">i", a.request.length - 4)   # the request starts it
    at = CUT + AT
    length = b.request.stream_offset + b.request.length - a.request.stream_offset - at - short
    fake = _false_header(length)
    payload = payload[:at] + fake + payload[at + len(fake):]
    cut = trim_front(with_payload(data, payload), CUT)
    mine = {(src, dst, sport, dport), (dst, src, dport, sport)}
    out = []
    for i, (ts, lt, d) in enumerate(pkts):
        if tcp_layout(d)[:4] in mine:
            if i < first or (drop_last_answer and i == b.response.first_packet - 1):
                continue
            if i == first:
                d = cut
        out.append((ts, lt, d))
    path = tmp_path / "cut.pcap"
    path.write_bytes(write_pcap(out))
    return path, a, b


@pytest.mark.parametrize("short", [0, 2])   # the false frame ends with the real one, or inside it
def test_the_answered_candidate_is_taken(tmp_path, short):
    path, a, b = _cut(tmp_path, short)
    for level in ("headers", "bodies"):
        got = list(dissect(path, REAL_PORTS, level=level))
        want = list(dissect(CAPTURE, REAL_PORTS, level=level))
        mine = _ends(a)
        assert ([exchange_key(e) for e in got if _ends(e) != mine]
                == [exchange_key(e) for e in want if _ends(e) != mine])
        ours = [e for e in got if _ends(e) == mine]
        # the second request pairs with its response, as in the whole capture; nothing of the
        # false header comes out
        got_ours = [(e.api_key, e.api_version, e.correlation_id, e.client_id, e.status,
                     e.request and e.request.length, e.response and e.response.length,
                     e.response and e.response.first_ts) for e in ours]
        assert got_ours == [(b.api_key, b.api_version, b.correlation_id, b.client_id, "ok",
                             b.request.length, b.response.length, b.response.first_ts)], level
        codes = {i.code for e in ours for i in e.issues}
        assert codes <= {"kafka.resync"}, codes


def test_without_an_answer_the_first_candidate_is_taken(tmp_path):
    """No response answers any candidate (the second request's is not in the capture): the
    first complete candidate is taken at the end, as before answers were read."""
    path, a, b = _cut(tmp_path, drop_last_answer=True)
    got = [e for e in dissect(path, REAL_PORTS) if _ends(e) == _ends(a)]
    assert [(e.api_key, e.correlation_id, e.status) for e in got] == [(0, FALSE_ID, "unanswered")]

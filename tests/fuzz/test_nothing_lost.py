"""Nothing lost: garbage spliced into one connection of a real capture (payload rewritten, TCP/IP
kept valid) leaves every exchange of the other connections unchanged, and every exchange of the
damaged connection that does not touch a damaged packet comes out unchanged, before and after
the damage (the framer resynchronises)."""
import collections
import socket
import struct

from hypothesis import given, strategies as st

from dissector.pipeline import dissect
from tests.support import CAPTURES, require_module

from .splice import splice_garbage, tcp_layout
from .support import REAL_PORTS, bounded, exchange_key, fuzz_settings, packets

MULTI = [CAPTURES / n for n in ("librdkafka_produce_consume.pcap", "codecs.mss1448.pcap",
                                "kafka_python.mss1448.pcap", "transactions.pcap",
                                "codecs.pcap", "legacy_messageset.mss1448.pcap")]


def _client(ex):
    c = ex.connection
    return c.client_ip, c.client_port, c.broker_ip, c.broker_port


def _busiest(full):
    count = collections.Counter(_client(e) for e in full)
    return count.most_common(1)[0][0]


def _span(ex):
    frames = [f for f in (ex.request, ex.response) if f is not None]
    return min(f.first_packet for f in frames), max(f.last_packet for f in frames)


@fuzz_settings(12)
@given(path=st.sampled_from(MULTI), direction=st.integers(0, 1), where=st.floats(0.2, 0.8),
       count=st.integers(1, 3), seed=st.integers(0, 2**32))
@bounded(60)
def test_garbage_in_one_connection_loses_only_what_it_touches(tmp_path_factory, path, direction,
                                                              where, count, seed):
    full = list(dissect(path, REAL_PORTS, level="bodies"))
    target = _busiest(full)
    cip, cport, bip, bport = target
    flow = (socket.inet_aton(cip), socket.inet_aton(bip), cport, bport)
    if direction:
        flow = (flow[1], flow[0], flow[3], flow[2])
    pkts = packets(path)
    carrying = sum(1 for _, _, d in pkts if tcp_layout(d)[:4] == flow and
                   tcp_layout(d)[5] > tcp_layout(d)[4])
    first = int(carrying * where)
    raw, damaged = splice_garbage(pkts, flow, set(range(first, first + count)), seed)
    assert damaged
    spliced = tmp_path_factory.mktemp("splice") / "spliced.pcap"
    spliced.write_bytes(raw)
    run = dissect(spliced, REAL_PORTS, level="bodies")
    got = list(run)
    assert run.errors == []

    others_full = sorted(repr(exchange_key(e)) for e in full if _client(e) != target)
    others_got = sorted(repr(exchange_key(e)) for e in got if _client(e) != target)
    assert others_got == others_full

    got_keys = {exchange_key(e) for e in got if _client(e) == target}
    untouched = [e for e in full if _client(e) == target
                 and not any(_span(e)[0] <= d <= _span(e)[1] for d in damaged)]
    before = [e for e in untouched if _span(e)[1] < damaged[0]]
    after = [e for e in untouched if _span(e)[0] > damaged[-1]]
    missing = [e for e in untouched if exchange_key(e) not in got_keys]
    assert not missing, (damaged, missing)
    assert before or after


def test_spliced_packets_keep_valid_checksums():
    """scapy (an independent implementation) recomputes the same IPv4 and TCP checksums."""
    scapy_all = require_module("scapy.all")
    path = MULTI[0]
    full = list(dissect(path, REAL_PORTS))
    cip, cport, bip, bport = _busiest(full)
    flow = (socket.inet_aton(cip), socket.inet_aton(bip), cport, bport)
    raw, damaged = splice_garbage(packets(path), flow, {2, 3}, seed=5)
    assert len(damaged) == 2
    for no in damaged:
        data = _nth(raw, no)
        pkt = scapy_all.Ether(data)
        ip_sum, tcp_sum = pkt["IP"].chksum, pkt["TCP"].chksum
        del pkt["IP"].chksum
        del pkt["TCP"].chksum
        again = scapy_all.Ether(bytes(pkt))
        assert (again["IP"].chksum, again["TCP"].chksum) == (ip_sum, tcp_sum)


def _nth(raw, no):
    """Packet `no` (1-based) of a little-endian pcap written by PcapWriter."""
    pos = 24
    for i in range(1, no + 1):
        incl = struct.unpack_from("<I", raw, pos + 8)[0]
        if i == no:
            return raw[pos + 16:pos + 16 + incl]
        pos += 16 + incl
    raise IndexError(no)

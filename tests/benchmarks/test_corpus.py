"""The benchmark corpus is what issue 9 asks of it, read back with dpkt (a parser nobody here
wrote): replicas of a real capture with their own client addresses, sequence numbers and times,
every segment cut to a 1448-byte MSS, the broker on 9092; and each replica's connections carry
the source's Kafka exchanges unchanged."""
import bisect
from collections import defaultdict

import pytest

from benchmarks import corpus
from dissector.pipeline import dissect
from dissector.tables import EXCHANGE_COLUMN_NAMES, exchange_row
from tests.support import ROOT, require_module

SOURCE = ROOT / "captures" / "codecs.pcap"   # messages far larger than one segment
SIZE_IN_SOURCES = 10         # more replicas than one group of overlapping ones (PARALLEL)
COLUMNS = ("api_key", "api_version", "correlation_id", "client_id", "request_bytes",
           "response_bytes", "error_code", "topics", "partition_count", "record_count", "status")


def _source_port():
    return corpus.broker_port(corpus.source(str(SOURCE))[0])


def _packets(path, port=corpus.PORT):
    """(ts in ns, client (ip, port), broker (ip, port), seq, flags, payload length, to broker)."""
    import dpkt
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = ip.data
            src, dst = (bytes(ip.src), tcp.sport), (bytes(ip.dst), tcp.dport)
            to_broker = tcp.dport == port
            client, broker = (src, dst) if to_broker else (dst, src)
            yield int(ts * 10**9), client, broker, tcp.seq, tcp.flags, len(tcp.data), to_broker


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require_module("dpkt")
    path = tmp_path_factory.mktemp("corpus") / "corpus.pcap"
    built = corpus.build(path, SIZE_IN_SOURCES * SOURCE.stat().st_size, src=str(SOURCE))
    assert built.replicas > corpus.PARALLEL
    return built


def _rows(path, port):
    run = dissect(str(path), (port,), level="bodies")
    return [dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(e))) for e in run], run.issues


def test_segments_are_cut_to_the_mss_and_the_broker_moved_to_9092(built):
    packets = list(_packets(built.path))
    assert len(packets) == built.packets
    lengths = [p[5] for p in packets]
    assert max(lengths) == corpus.MSS                 # the source's large segments were cut
    assert all(p[2] == (bytes((127, 0, 0, 1)), corpus.PORT) for p in packets)


def test_replicas_have_their_own_addresses_sequence_numbers_and_times(built):
    by_ip = defaultdict(list)
    for p in _packets(built.path):
        by_ip[p[1][0]].append(p)
    assert len(by_ip) == built.replicas               # one client address per replica
    conns = {ip: {p[1][1] for p in ps} for ip, ps in by_ip.items()}
    assert len({frozenset(c) for c in conns.values()}) == 1, "the same connections in each"
    # each connection's opening sequence numbers (its SYN) differ from replica to replica
    syns = defaultdict(set)
    for ip, ps in by_ip.items():
        for ts, client, broker, seq, flags, n, to_broker in ps:
            if flags & 0x02 and to_broker:
                syns[client[1]].add(seq)
    assert syns and all(len(s) == built.replicas for s in syns.values())
    # each replica starts at its own time, and keeps the source's times relative to its start
    assert len({ps[0][0] for ps in by_ip.values()}) == built.replicas
    # (to the microsecond: the corpus is written with microsecond timestamps)
    source = sorted({p[0] for p in _packets(SOURCE, _source_port())})
    for ps in by_ip.values():
        times = sorted({p[0] for p in ps})
        shifted = [t - source[0] + times[0] for t in source]
        assert _within(times, shifted, 1000) and _within(shifted, times, 1000)


def _within(these, those, tolerance):
    """Whether each of `these` is within `tolerance` of one of `those` (sorted)."""
    return all(min(abs(t - u) for u in those[max(0, i - 1):i + 1]) <= tolerance
               for t in these for i in [bisect.bisect_left(those, t)])


def test_each_replica_carries_the_source_exchanges(built):
    source_rows, source_issues = _rows(SOURCE, _source_port())
    rows, issues = _rows(built.path, corpus.PORT)
    assert source_rows and source_issues == [] and issues == []

    def by_connection(rows):
        out = defaultdict(list)
        for r in rows:
            out[(r["client_ip"], r["client_port"])].append(tuple(repr(r[c]) for c in COLUMNS))
        return out

    want = {port: seq for (_, port), seq in by_connection(source_rows).items()}
    got = by_connection(rows)
    assert len(got) == built.replicas * len(want)
    for (ip, port), seq in got.items():
        assert seq == want[port], (ip, port)


def test_one_host_puts_every_client_on_one_address_with_its_own_ports(tmp_path):
    require_module("dpkt")
    built = corpus.build(tmp_path / "one.pcap", SIZE_IN_SOURCES * SOURCE.stat().st_size,
                         src=str(SOURCE), one_host=True)
    packets = list(_packets(built.path))
    assert {p[1][0] for p in packets} == {bytes((127, 1, 0, 1))}
    source_rows, _ = _rows(SOURCE, _source_port())
    rows, issues = _rows(built.path, corpus.PORT)
    connections = {(r["client_ip"], r["client_port"]) for r in source_rows}
    assert issues == []
    assert len({r["client_port"] for r in rows}) == built.replicas * len(connections)
    assert len(rows) == built.replicas * len(source_rows)

"""Build a large benchmark capture from real Kafka traffic, streaming.

    python benchmarks/corpus.py [--size-mb 400] [--out benchmarks/corpus/corpus.pcap]
                               [--mix bulk|dense|small] [--one-host]

The source is real traffic that tshark 4.0's Kafka dissector decodes fully: kafka-python with
api_version=(2, 5) (Produce v8, Fetch v11, Metadata v9, ApiVersions v3, group and offset APIs at
their 2.5-era versions) against a tansu broker, captured with tcpdump on loopback, in one of three
mixes: "bulk" (batching producers, gzip and plain, and a consumer fetching up to 128 kB: ~20 kB a
Kafka message), "dense" (a producer sending every record as it comes, one request in flight,
and a consumer fetching 2 kB at a time: ~1.7 kB a message, the per-message costs dominate) and
"small" (batching producers of 60-100 byte records, lz4 and plain, and a consumer with
kafka-python's default fetch sizes: ~80 bytes a record on the wire and ~29 kB a message, the
per-record costs dominate). A source is made once (needs root, tcpdump and the dev extras) and
cached as benchmarks/corpus/source.pcap (bulk) or source-MIX.pcap, with what the clients did in
<source>.json.

The corpus replicates the source's connections until it reaches the requested size. Replica r has
its own client address (127.x.y.z), its own sequence numbers (a per-replica, per-direction shift,
wrapping around 2**32 for some) and its own time (replicas run in groups of PARALLEL that overlap
in time, so many connections are in flight at once, and each group starts after the previous
one); with --one-host every client is 127.1.0.1 instead, each connection on its own port, as
a capture taken on a client host (or on loopback) shows them. Every packet is re-segmented to a
1448-byte MSS on Ethernet with valid IPv4 and TCP checksums (captures/resegment.py). The broker
is 127.0.0.1:9092 in the corpus. Only one group of replicas is held in memory at a time (a few
packets each): the output is written as it is made.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from captures.resegment import MSS, _ip_offset, read_pcap, resegment  # noqa: E402
from dissector.capture.writer import PcapWriter  # noqa: E402

CORPUS_DIR = ROOT / "benchmarks" / "corpus"
SOURCE = CORPUS_DIR / "source.pcap"
PORT = 9092                 # the broker's port in the corpus
PARALLEL = 8                # replicas whose connections overlap in time
LT_ETHERNET = 1
_seq_ack = struct.Struct("!II")
_ports = struct.Struct("!HH")


# -- the source capture: real clients at tshark-decodable versions ----------------------------


def _orders(topic, n, seed):
    """JSON-ish order events of 0.2 to 1.5 kB (realistic sizes, partly compressible)."""
    rnd = random.Random(seed)
    from tests.traffic import Record
    out = []
    for i in range(n):
        items = ",".join(str(rnd.randrange(1000)) for _ in range(rnd.randrange(5, 60)))
        note = rnd.randbytes(rnd.randrange(50, 500)).hex()
        value = (f'{{"order_id": {i}, "customer": "c-{rnd.randrange(10**6):06d}", '
                 f'"items": [{items}], "note": "{note}"}}').encode()
        out.append(Record(topic, None, b"k-%d" % rnd.randrange(5000), value,
                          (("trace", b"%016x" % rnd.getrandbits(64)),), None))
    return out


def _clicks(topic, n, seed):
    """Click events of 60 to 100 bytes, keyed by user: the small records many topics carry."""
    rnd = random.Random(seed)
    from tests.traffic import Record
    pages = ("/", "/cart", "/search", "/product", "/checkout", "/account")
    return [Record(topic, None, b"u-%d" % rnd.randrange(20000),
                   (f'{{"event": {i}, "page": "{rnd.choice(pages)}", "ms": {rnd.randrange(5000)}, '
                    f'"session": "{rnd.getrandbits(32 * rnd.randrange(1, 5)):x}"}}').encode(),
                   (), None) for i in range(n)]


def _bulk_runs(T, boot, records=2000, **client):
    """`client`: more keyword arguments for every client (TLS settings: benchmarks/tls_corpus)."""
    v = {"api_version": (2, 5), **client}
    return [
        T.kafka_python_produce(boot, _orders("orders", records, 1), client_id="orders-gzip",
                               compression_type="gzip", **v),
        T.kafka_python_produce(boot, _orders("events", records, 2), client_id="events", **v),
        # small batches: many small Produce requests, as a low-latency producer sends
        T.kafka_python_produce(boot, _orders("clicks", records // 4, 3), client_id="clicks",
                               batch_size=4096, linger_ms=0, **v),
        # small fetches: many Fetch round trips
        T.kafka_python_consume(boot, ["orders", "events", "clicks"], 2 * records + records // 4,
                               group="billing", client_id="billing",
                               max_partition_fetch_bytes=65536, fetch_max_bytes=131072,
                               timeout=60, **v),
    ]


def _dense_runs(T, boot, records=1500):
    v = {"api_version": (2, 5)}
    return [
        # a batch holds one or two records, and the next waits for the last one's answer
        T.kafka_python_produce(boot, _orders("clicks", records, 3), client_id="clicks",
                               batch_size=600, linger_ms=0,
                               max_in_flight_requests_per_connection=1, **v),
        T.kafka_python_consume(boot, ["clicks"], records, group="billing", client_id="billing",
                               max_partition_fetch_bytes=2048, fetch_max_bytes=2048, timeout=90,
                               **v),
    ]


def _small_runs(T, boot, records=12000):
    v = {"api_version": (2, 5)}
    return [
        # batching producers of small records (lz4 and plain), as most production topics see
        T.kafka_python_produce(boot, _clicks("clicks", records, 4), client_id="web-lz4",
                               compression_type="lz4", linger_ms=20, **v),
        T.kafka_python_produce(boot, _clicks("views", records, 5), client_id="web", linger_ms=20,
                               **v),
        T.kafka_python_consume(boot, ["clicks", "views"], 2 * records, group="analytics",
                               client_id="analytics", timeout=60, **v),
    ]


MIXES = {"bulk": (SOURCE, _bulk_runs), "dense": (CORPUS_DIR / "source-dense.pcap", _dense_runs),
         "small": (CORPUS_DIR / "source-small.pcap", _small_runs)}


def make_source(mix="bulk"):
    """Capture the mix's clients (kafka-python at api_version 2.5) against tansu into its source
    path (written under a temporary name, then renamed: concurrent builders never see half a
    file), with what the clients did in <path>.json. Returns that information."""
    from tests import traffic as T
    path, clients = MIXES[mix]
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    with T.Broker() as broker:
        with T.Capture(part, broker.port) as cap:
            runs = clients(T, broker.bootstrap)
    if cap.dropped:
        part.unlink()
        raise RuntimeError(f"tcpdump dropped packets: {cap.stderr.strip()}")
    info = {"port": broker.port, "broker": broker.version,
            "requests": sum(len(r.requests) for r in runs),
            "answered": sum(q.answered for r in runs for q in r.requests),
            "records_produced": sum(len(r.produced) for r in runs),
            "records_consumed": sum(len(r.consumed) for r in runs),
            "notes": [n for r in runs for n in r.notes]}
    os.replace(part, path)
    meta = path.with_name(path.name + ".json")
    meta_part = part.with_name(part.name + ".json")
    meta_part.write_text(json.dumps(info, indent=1) + "\n")
    os.replace(meta_part, meta)
    return info


def broker_port(packets):
    """The broker's port: where the first connection attempt (SYN without ACK) went."""
    for _, linktype, data in packets:
        off = _ip_offset(linktype, data)
        if off < 0 or len(data) < off + 40:
            continue
        tcp = off + ((data[off] & 0x0F) * 4 if data[off] >> 4 == 4 else 40)
        if len(data) >= tcp + 14 and data[tcp + 13] & 0x12 == 0x02:
            return _ports.unpack_from(data, tcp)[1]
    raise ValueError("no connection attempt (SYN) in the source capture")


def source(src="bulk"):
    """The packets and the broker's port of `src`: a mix's cached source capture (made on first
    use) or the path of another capture."""
    if src in MIXES:
        path = MIXES[src][0]
        if not path.is_file():
            make_source(src)
    else:
        path = Path(src)
    packets = list(read_pcap(path))   # a few MB: read once, replicated many times
    return packets, broker_port(packets)


# -- replication ------------------------------------------------------------------------------


def _shifted(packets, port, seq_shift, ts_shift):
    """The source packets with sequence and acknowledgement numbers moved by a per-direction
    shift (client->broker bytes by seq_shift[0], broker->client by seq_shift[1]) and times moved
    by ts_shift. Checksums are recomputed later by resegment()."""
    c2b, b2c = seq_shift
    for ts, linktype, data in packets:
        off = _ip_offset(linktype, data)
        if off < 0 or len(data) < off + 40:
            yield ts + ts_shift, linktype, data
            continue
        tcp = off + ((data[off] & 0x0F) * 4 if data[off] >> 4 == 4 else 40)
        mine, theirs = (c2b, b2c) if _ports.unpack_from(data, tcp)[1] == port else (b2c, c2b)
        seq, ack = _seq_ack.unpack_from(data, tcp + 4)
        buf = bytearray(data)
        has_ack = data[tcp + 13] & 0x10
        _seq_ack.pack_into(buf, tcp + 4, (seq + mine) & 0xFFFFFFFF,
                           (ack + theirs) & 0xFFFFFFFF if has_ack else ack)
        yield ts + ts_shift, linktype, bytes(buf)


def _remapper(replica, port, ports=None):
    """Move replica r's client to 127.a.b.c (distinct per replica) and the broker to port 9092;
    with `ports` (an iterator of client ports), the client to 127.1.0.1 and each of its
    connections to the next port instead: one client host."""
    n = replica + 1
    client = bytes((127, 1 + (n >> 16) % 254, (n >> 8) & 0xFF, n & 0xFF))
    broker = bytes((127, 0, 0, 1))
    moved = {}
    if ports is not None:
        client = bytes((127, 1, 0, 1))

    def client_port(p):
        if ports is None:
            return p
        if p not in moved:
            moved[p] = next(ports)
        return moved[p]

    def remap(src, dst, sport, dport):
        if dport == port:
            return client, broker, client_port(sport), PORT
        return broker, client, PORT, client_port(dport)
    return remap


def _client_ports():
    """Ephemeral ports in turn (a port comes back after 28,000 connections: a new SYN then
    starts a new connection on the tuple, as on a real host)."""
    while True:
        yield from range(32768, 60999)


class Built:
    """What build() wrote."""

    def __init__(self, path, packets, bytes_, replicas, seconds):
        self.path, self.packets, self.bytes = Path(path), packets, bytes_
        self.replicas, self.seconds = replicas, seconds

    def __repr__(self):
        return (f"{self.path}: {self.bytes / 1e6:.1f} MB, {self.packets} packets, "
                f"{self.replicas} replicas of the source, built in {self.seconds:.1f} s")


def build(out, size_bytes, src="bulk", mss=MSS, parallel=PARALLEL, one_host=False):
    """Write a corpus of at least size_bytes replicating `src` (see source()) to `out` (classic
    pcap, Ethernet); returns Built. one_host: every replica's client on one address (a capture
    taken on a client host, or on loopback), its connections on their own ports."""
    start = time.monotonic()
    packets, port = source(src)
    replica_bytes = sum(16 + len(p[2]) for p in packets)
    span = packets[-1][0] - packets[0][0] + 1_000_000_000   # one group's time, plus a second
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(9)
    written = n_packets = replica = t_base = 0
    ports = _client_ports() if one_host else None
    with open(out, "wb", buffering=1 << 20) as f:
        w = PcapWriter(f, LT_ETHERNET)
        while written < size_bytes:
            # a replica takes about the source's size: a small corpus needs a small last group
            group = max(1, min(parallel, -(-(size_bytes - written) // replica_bytes)))
            streams = []
            for k in range(group):
                r = replica + k
                shift = (rnd.getrandbits(32), rnd.getrandbits(32))
                ts_shift = t_base + k * 7_919_000  # the group's replicas overlap in time
                streams.append(resegment(_shifted(packets, port, shift, ts_shift), mss,
                                         remap=_remapper(r, port, ports)))
            t_base += span
            for ts, frame in heapq.merge(*streams, key=lambda p: p[0]):
                w.write(ts, frame)
                n_packets += 1
                written += 16 + len(frame)
            replica += group
        w.close()
    return Built(out, n_packets, written + 24, replica, time.monotonic() - start)


def count_packets(path):
    """Packets in a classic pcap file (walks the record headers only)."""
    n = 0
    with open(path, "rb") as f:
        order = "<" if f.read(4) in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        rec = struct.Struct(order + "8xI4x")
        f.seek(24)
        while True:
            h = f.read(16)
            if len(h) < 16:
                return n
            f.seek(rec.unpack(h)[0], 1)
            n += 1


def check_checksums(path):
    """tshark's verdict on the IPv4 and TCP checksums of every packet: {"good": n, "bad": n,
    "unverified": n} (tshark's checksum status 1, 0 and 2; two per packet). Kafka is not
    dissected: only the checksums are wanted."""
    out = subprocess.run(
        ["tshark", "-n", "-r", str(path), "--disable-protocol", "kafka",
         "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
         "-T", "fields", "-e", "ip.checksum.status", "-e", "tcp.checksum.status"],
        capture_output=True, text=True, check=True, timeout=1800).stdout
    names = {"1": "good", "0": "bad", "2": "unverified"}
    counts = {"good": 0, "bad": 0, "unverified": 0}
    for line in out.splitlines():
        for status in line.split("\t"):
            if status:
                counts[names[status]] += 1
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=400, help="corpus size in MB (default 400)")
    ap.add_argument("--out", type=Path, default=CORPUS_DIR / "corpus.pcap")
    ap.add_argument("--mix", choices=sorted(MIXES), default="bulk",
                    help="the source traffic (default bulk)")
    ap.add_argument("--one-host", action="store_true",
                    help="every client on one address (a client host's capture), not one each")
    ap.add_argument("--remake-source", action="store_true",
                    help="capture the source traffic again (root, tcpdump, tansu)")
    ap.add_argument("--check", action="store_true",
                    help="afterwards, have tshark verify the checksums of every packet")
    args = ap.parse_args(argv)
    if args.remake_source:
        make_source(args.mix)
    built = build(args.out, int(args.size_mb * 1e6), args.mix, one_host=args.one_host)
    print(built)
    if args.check:
        counts = check_checksums(built.path)
        print(f"tshark checksums (IPv4 and TCP, every packet): {counts}")
        return 1 if counts["bad"] or counts["unverified"] or not counts["good"] else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

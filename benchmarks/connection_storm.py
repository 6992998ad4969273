"""Connection attempts that never carry data, side by side with tshark.

    python benchmarks/connection_storm.py [--attempts 200000] [--rounds 3] [--keep FILE]

A broker that is down or refuses, a port scan, a load balancer's health checks, a SYN flood: in
such captures most connections never carry a byte of Kafka. The capture built here has
`--attempts` connection attempts on the broker's port, each from its own client address and
port, in turn a bare SYN (a flood), a SYN answered by a RST (refused) and a handshake closed at
once by both sides' FINs (a probe), one every 50 us; then a real conversation
(captures/kafka_python.pcap, after the storm), whose Kafka messages both tools must count alike.
Each round runs tshark printing the Kafka header fields and our CLI at the header level, as
vs_tshark.py does; reported: medians of CPU time and the ratio tshark / ours.
"""
from __future__ import annotations

import argparse
import heapq
import statistics
import struct
import sys
import tempfile
from pathlib import Path

import dpkt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.measure import machine, run, settle, warm_bytecode  # noqa: E402
from benchmarks.vs_tshark import (  # noqa: E402
    our_messages, ours_cmd, tshark_cmd, tshark_messages)

CONVERSATION = HERE.parent / "captures" / "kafka_python.pcap"
BROKER = bytes((127, 0, 0, 1))   # the conversation's broker
PORT = 9092
SYN, ACK, FIN, RST = 0x02, 0x10, 0x01, 0x04
STEP_NS = 50_000


def _packet(src, dst, sport, dport, seq, ack, flags):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 0, 0x4000, 64, 6, 0, src, dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
    return b"\0" * 6 + b"\0\0\0\0\0\1" + b"\x08\x00" + ip + tcp


def _attempt(i):
    """The packets of attempt `i` (a flood's SYN, a refused one, a probe): (offset ns, bytes)."""
    client = struct.pack("!I", 0x0A000000 + i)   # 10.0.0.0 and up
    port = 1024 + i % 60_000
    isn, bisn = (i * 2654435761) & 0xFFFFFFFF, (i * 40503) & 0xFFFFFFFF

    def to_broker(seq, ack, flags):
        return _packet(client, BROKER, port, PORT, seq, ack, flags)

    def to_client(seq, ack, flags):
        return _packet(BROKER, client, PORT, port, seq, ack, flags)

    syn = [(0, to_broker(isn, 0, SYN))]
    kind = i % 3
    if kind == 0:
        return syn
    if kind == 1:
        return syn + [(40_000, to_client(0, isn + 1, RST | ACK))]
    c, b = (isn + 1) & 0xFFFFFFFF, (bisn + 1) & 0xFFFFFFFF
    return syn + [(40_000, to_client(bisn, c, SYN | ACK)), (80_000, to_broker(c, b, ACK)),
                  (90_000, to_broker(c, b, FIN | ACK)), (130_000, to_client(b, c + 1, FIN | ACK)),
                  (170_000, to_broker(c + 1, b + 1, ACK))]


def build(path, attempts):
    """Write the capture (see the module doc); returns its packet count."""
    start = 1_700_000_000 * 10**9
    pending = []   # heap of (ns, attempt, its k-th packet, bytes): answers come after later SYNs
    n = 0
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=True, linktype=dpkt.pcap.DLT_EN10MB)
        for i in range(attempts + 4):   # the last attempts' answers: 170 us < 4 steps
            at = start + i * STEP_NS
            if i < attempts:
                for k, (d, data) in enumerate(_attempt(i)):
                    heapq.heappush(pending, (at + d, i, k, data))
            while pending and pending[0][0] <= at:
                ts, _, _, data = heapq.heappop(pending)
                w.writepkt(data, ts=ts / 1e9)
                n += 1
        end = (start + attempts * STEP_NS + 10**9) / 1e9
        with open(CONVERSATION, "rb") as src:
            packets = list(dpkt.pcap.Reader(src))
        first = packets[0][0]
        for ts, data in packets:
            w.writepkt(data, ts=end + (ts - first))
            n += 1
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attempts", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", help="write the capture here and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    warm_bytecode()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = Path(args.keep) if args.keep else tmp / "storm.pcap"
        packets = build(path, args.attempts)
        settle(path)
        cpu = {"tshark": [], "ours": []}
        for r in range(args.rounds):
            for tool in cpu:
                out = tmp / f"{tool}.out"
                if tool == "tshark":
                    res = run(tshark_cmd(path, PORT), stdout=out)
                    count = tshark_messages(out)
                else:
                    res = run(ours_cmd(path, PORT, "headers", out))
                    count = our_messages(out)
                if res.status != 0:
                    raise SystemExit(f"{tool} failed ({res.status})")
                cpu[tool].append((res.cpu, res.wall, res.rss_mb, count))
                print(f"round {r + 1}/{args.rounds} {tool:6} cpu {res.cpu:6.2f} s  wall "
                      f"{res.wall:6.2f} s  peak RSS {res.rss_mb:5.0f} MB  Kafka messages {count}")
        counts = {tool: {c for *_, c in runs} for tool, runs in cpu.items()}
        if counts["tshark"] != counts["ours"] or len(counts["ours"]) != 1:
            raise SystemExit(f"the tools saw different Kafka messages: {counts}")
        med = {tool: statistics.median(c for c, *_ in runs) for tool, runs in cpu.items()}
        print(f"capture: {args.attempts} attempts, {packets} packets, "
              f"{path.stat().st_size / 1e6:.1f} MB; {machine()}")
        print(f"median CPU: tshark {med['tshark']:.2f} s, ours {med['ours']:.2f} s: "
              f"{med['tshark'] / med['ours']:.2f}x tshark; Kafka messages {counts['ours'].pop()}")


if __name__ == "__main__":
    main()

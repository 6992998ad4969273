"""A quick look at a capture's first packets for what a run's results cannot say by themselves:
where its TCP servers listen (for a user whose broker ports found nothing: the next try is
`--port` one of them), and whether the snapshot length it was taken with cut the broker ports'
packets (their Kafka bytes are missing: the run shows only holes and truncated messages)."""
from __future__ import annotations

import os
import struct
from collections import Counter, namedtuple
from contextlib import closing

from .capture.errors import CaptureError
from .capture.files import open_capture, read_packets
from .capture.layers import ACK, SYN, cut_short, tcp_segment
from .capture.pcap import PCAP_MAGICS

SCANNED = 100_000   # packets looked at: a hint comes in a second whatever the capture's size
CUT_SCANNED = 10_000   # ...for the snapshot length, which cuts every long packet if any
SHOWN = 3           # server ports named
WHOLE = 65535       # a snapshot length from which IP packets are not cut

Survey = namedtuple("Survey", "packets tcp on_ports cut servers")
Survey.__doc__ = """Packets read, TCP packets, TCP packets to or from the ports, packets the
snapshot length cut (on the ports, or cut before their ports), and a Counter of server port ->
connections."""


def survey(paths, ports, limit=SCANNED) -> Survey:
    """The Survey of the first `limit` packets of `paths`. A connection's server is the end its
    SYN went to or, without a SYN in the capture, the end with the lower port."""
    conns = {}
    packets = tcp = on_ports = cut = 0
    for path in paths:
        try:
            with closing(read_packets(path)) as it:
                for _, _, linktype, data in it:
                    if packets >= limit:
                        break
                    packets += 1
                    seg = tcp_segment(linktype, data)
                    if seg in ("ip.truncated", "tcp.truncated"):
                        cut += 1
                    if seg is None or isinstance(seg, str):
                        continue
                    src, dst, sport, dport, _, _, flags, _ = seg
                    tcp += 1
                    if sport in ports or dport in ports:
                        on_ports += 1
                        cut += cut_short(linktype, data)
                    a, b = (src, sport), (dst, dport)
                    key = (a, b) if a <= b else (b, a)
                    if flags & (SYN | ACK) == SYN:
                        conns[key] = dport
                    else:
                        conns.setdefault(key, min(sport, dport))
        except (CaptureError, OSError):   # reported by the run itself
            continue
    return Survey(packets, tcp, on_ports, cut, Counter(conns.values()))


def _files(paths):
    return [p for p in paths if os.path.isfile(p)]   # standard input cannot be read again


def _where(s: Survey, limit: int) -> str:
    return f"in its first {s.packets:,} packets" if s.packets >= limit else "in the capture"


def _ports(ports) -> str:
    return ("port " if len(ports) == 1 else "ports ") + ", ".join(map(str, sorted(ports)))


def hint(paths, ports, option="--port ") -> str | None:
    """One line for a run whose broker `ports` gave no exchange: the capture's busiest TCP server
    ports, or that it holds no TCP; None where `ports` did carry TCP (an unreadable or
    undecrypted stream is told otherwise) or the capture has no packets (or is standard input,
    read already). `option`: how the caller names a port ("--port " on the command line,
    "port=" in Python)."""
    s = survey(_files(paths), frozenset(ports), SCANNED)
    if not s.packets or s.on_ports:
        return None
    if not s.tcp:
        return f"no Kafka exchange: no TCP packets {_where(s, SCANNED)}"
    named = ", ".join(f"{port} ({n} connection{'s' if n > 1 else ''})"
                      for port, n in s.servers.most_common(SHOWN))
    auto = "auto" if option.startswith("-") else '"auto"'
    return (f"no Kafka exchange: no TCP on {_ports(ports)}; TCP servers {_where(s, SCANNED)}: "
            f"{named}; pass {option}PORT (e.g. {option}{s.servers.most_common(1)[0][0]}), or "
            f"{option}{auto} to find Kafka on any port")


def hints(run, paths, ports, auto, option="--port ") -> list:
    """What a look at the capture's first packets adds to `run` (a Dissection or a parallel
    Result: its errors, exchanges and issues): `hint` where the broker `ports` gave no exchange,
    `snaplen_hint` where the snapshot length cut packets. Nothing after a capture error (told
    already) or with --port auto (no ports to look at). `option` as for `hint`."""
    if auto or run.errors:
        return []
    lines = [] if run.exchanges else [hint(paths, ports, option)]
    lines.append(snaplen_hint(paths, ports, any(i.code == "tcp.gap" for i in run.issues)))
    return [line for line in lines if line]


def declared_snaplen(path) -> int | None:
    """The snapshot length a capture file declares (pcap's file header, pcapng's first
    interface), None where it cannot be read or declares none."""
    try:
        f, chunks, kind = open_capture(path)
    except CaptureError:
        return None
    try:
        head = bytes(chunks.mv[:min(chunks.end, 4096)])
    finally:
        f.close()
    if kind == "pcap":
        order = PCAP_MAGICS[head[:4]][0]
        n = struct.unpack_from(order + "I", head, 16)[0] if len(head) >= 20 else 0
        return n or None
    # pcapng: the Section Header Block (its byte-order magic says the order), then the first
    # Interface Description Block, where writers put it
    if len(head) < 12:
        return None
    order = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    at = struct.unpack_from(order + "I", head, 4)[0]
    if len(head) < at + 16 or struct.unpack_from(order + "I", head, at)[0] != 1:
        return None
    return struct.unpack_from(order + "I", head, at + 12)[0] or None


def snaplen_hint(paths, ports, gaps=False) -> str | None:
    """One line where the snapshot length a capture was taken with cut packets of the broker
    `ports`: how many, and what to do; None where it cut none. Looked at where a file declares
    a snapshot length under WHOLE, or the run found holes (`gaps`: a file cut afterwards, by
    `editcap -s`, declares the length it had)."""
    files = _files(paths)
    lengths = [n for n in map(declared_snaplen, files) if n is not None and n < WHOLE]
    if not (lengths or gaps):
        return None
    s = survey(files, frozenset(ports), CUT_SCANNED)
    if not s.cut:
        return None
    where = _where(s, CUT_SCANNED)
    length = f" ({min(lengths)} bytes)" if lengths else ""
    return (f"{s.cut:,} packets on {_ports(ports)} {where} were cut by the snapshot length the "
            f"capture was taken with{length}: their Kafka bytes are missing (the tcp.gap issues "
            f"and truncated messages); capture with tcpdump -s 0")

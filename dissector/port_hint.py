"""Where a capture's TCP servers listen, for a user whose broker ports found nothing: the
commands name the busiest ports so that the next try is `--port` one of them."""
from __future__ import annotations

import os
from collections import Counter
from contextlib import closing

from .capture.errors import CaptureError
from .capture.files import read_packets
from .capture.layers import ACK, SYN, tcp_segment

SCANNED = 100_000   # packets looked at: the hint comes in a second whatever the capture's size
SHOWN = 3           # server ports named


def servers(paths, ports, limit=SCANNED):
    """(packets read, TCP packets, TCP packets to or from `ports`, Counter of server port ->
    connections) over the first `limit` packets of `paths`. A connection's server is the end
    its SYN went to or, without a SYN in the capture, the end with the lower port."""
    conns = {}
    packets = tcp = on_ports = 0
    for path in paths:
        try:
            with closing(read_packets(path)) as it:
                for _, _, linktype, data in it:
                    if packets >= limit:
                        break
                    packets += 1
                    seg = tcp_segment(linktype, data)
                    if seg is None or isinstance(seg, str):
                        continue
                    src, dst, sport, dport, _, _, flags, _ = seg
                    tcp += 1
                    on_ports += sport in ports or dport in ports
                    a, b = (src, sport), (dst, dport)
                    key = (a, b) if a <= b else (b, a)
                    if flags & (SYN | ACK) == SYN:
                        conns[key] = dport
                    else:
                        conns.setdefault(key, min(sport, dport))
        except (CaptureError, OSError):   # reported by the run itself
            continue
    return packets, tcp, on_ports, Counter(conns.values())


def hint(paths, ports, option="--port ") -> str | None:
    """One line for a run whose broker `ports` gave no exchange: the capture's busiest TCP server
    ports, or that it holds no TCP; None where `ports` did carry TCP (an unreadable or
    undecrypted stream is told otherwise) or the capture has no packets (or is standard input,
    read already). `option`: how the caller names a port ("--port " on the command line,
    "port=" in Python)."""
    paths = [p for p in paths if os.path.isfile(p)]   # standard input cannot be read again
    packets, tcp, on_ports, found = servers(paths, frozenset(ports), SCANNED)
    where = f"in its first {packets:,} packets" if packets >= SCANNED else "in the capture"
    if not packets or on_ports:
        return None
    if not tcp:
        return f"no Kafka exchange: no TCP packets {where}"
    named = ", ".join(f"{port} ({n} connection{'s' if n > 1 else ''})"
                      for port, n in found.most_common(SHOWN))
    wanted = ("port " if len(ports) == 1 else "ports ") + ", ".join(map(str, sorted(ports)))
    auto = "auto" if option.startswith("-") else '"auto"'
    return (f"no Kafka exchange: no TCP on {wanted}; TCP servers {where}: {named}; pass "
            f"{option}PORT (e.g. {option}{found.most_common(1)[0][0]}), or {option}{auto} to "
            f"find Kafka on any port")

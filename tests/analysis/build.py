"""Small constructed captures for the analysis tests: Kafka messages at chosen times.

Packets are built with scapy (an independent encoder of Ethernet/IPv4/TCP); message bodies with
kio (Aiven's generated Kafka types) or raw bytes for header-level tests. Every timestamp is chosen
by the test, so latencies and rates can be computed by hand. `cut_handshakes` makes a real
capture look as if it started after its connections' handshakes.
"""
from __future__ import annotations

import io
import struct

from dissector.capture import read_packets, tcp_segment
from dissector.capture.writer import PcapWriter
from dissector.tcp.reassembly import ACK, SYN

LINKTYPE_ETHERNET = 1
T0 = 1_700_000_000_000_000_000   # 2023-11-14T22:13:20Z in ns: tests add offsets in ms to it


def ms(x: float) -> int:
    """T0 + x milliseconds, in ns."""
    return T0 + int(round(x * 1_000_000))


def request_bytes(api_key, api_version, correlation_id, body=b"", client_id="client",
                  flexible=False) -> bytes:
    """A size-prefixed request: header v1 (v2 when flexible: an empty tagged section) + body."""
    cid = client_id.encode()
    head = struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid
    if flexible:
        head += b"\x00"
    msg = head + body
    return struct.pack(">i", len(msg)) + msg


def response_bytes(correlation_id, body=b"", flexible=False) -> bytes:
    msg = struct.pack(">i", correlation_id) + (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(msg)) + msg


def kio_request(obj, correlation_id, client_id="client") -> bytes:
    """A size-prefixed request encoded by kio from a kio request object."""
    from kio.serial import entity_writer
    from kio.static.primitive import i16, i32
    header_type = obj.__header_schema__
    fields = header_type.__dataclass_fields__
    kwargs = dict(request_api_key=i16(obj.__api_key__), request_api_version=i16(obj.__version__),
                  correlation_id=i32(correlation_id))
    if "client_id" in fields:
        kwargs["client_id"] = client_id
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header_type(**kwargs))
    entity_writer(type(obj))(buf, obj)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def kio_response(obj, correlation_id) -> bytes:
    from kio.serial import entity_writer
    from kio.static.primitive import i32
    header_type = obj.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
    entity_writer(type(obj))(buf, obj)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


class Capture:
    """Packets of several TCP connections, written in timestamp order to a pcap file."""

    def __init__(self):
        self.packets = []   # (ts_ns, order, bytes)

    def connection(self, client_ip="10.0.0.1", client_port=40000, broker_ip="10.0.0.2",
                   broker_port=9092, ts=T0, synack_after=1000, ack_after=2000):
        return Connection(self, client_ip, client_port, broker_ip, broker_port, ts,
                          synack_after, ack_after)

    def add(self, ts, pkt_bytes):
        self.packets.append((ts, len(self.packets), pkt_bytes))

    def write(self, path):
        with PcapWriter(str(path), LINKTYPE_ETHERNET) as w:
            for ts, _, data in sorted(self.packets):
                w.write(ts, data)
        return path


class Connection:
    """One TCP connection (handshake at `ts`: the SYN-ACK and the ACK `synack_after` and
    `ack_after` ns later, None for no handshake at all); send() adds data segments at chosen
    times."""

    def __init__(self, cap, cip, cport, bip, bport, ts, synack_after=1000, ack_after=2000):
        self.cap = cap
        self.ends = {0: (cip, cport, bip, bport), 1: (bip, bport, cip, cport)}
        self.seq = {0: 1000, 1: 5000}
        self.sent = []   # (side, seq, payload) of every data segment
        if synack_after is None:
            return
        self._pkt(ts, 0, "S", b"")
        self.seq[0] += 1
        self._pkt(ts + synack_after, 1, "SA", b"")
        self.seq[1] += 1
        self._pkt(ts + ack_after, 0, "A", b"")

    def _pkt(self, ts, side, flags, payload, seq=None, window=8192):
        from scapy.layers.inet import IP, TCP
        from scapy.layers.l2 import Ether
        src, sport, dst, dport = self.ends[side]
        p = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=src, dst=dst)
             / TCP(sport=sport, dport=dport, flags=flags, window=window,
                   seq=self.seq[side] if seq is None else seq,
                   ack=self.seq[1 - side] if "A" in flags else 0) / payload)
        self.cap.add(ts, bytes(p))

    def send(self, side, times, data, drop=()):
        """Send `data` from side 0 (client) or 1 (broker) in len(times) segments, one per time;
        the segments numbered in `drop` are not captured (a hole)."""
        n = len(times)
        step = -(-len(data) // n)
        for i, ts in enumerate(times):
            chunk = data[i * step:(i + 1) * step]
            self.sent.append((side, self.seq[side], chunk))
            if i not in drop:
                self._pkt(ts, side, "PA", chunk)
            self.seq[side] += len(chunk)

    def resend(self, ts, index=-1):
        """The data segment `index` (in sending order) sent again at `ts`: a retransmission."""
        side, seq, chunk = self.sent[index]
        self._pkt(ts, side, "PA", chunk, seq=seq)

    def zero_window(self, ts, side):
        """An ACK alone from `side` advertising a zero window (its receive buffer is full)."""
        self._pkt(ts, side, "A", b"", window=0)

    def request(self, times, data, drop=()):
        self.send(0, times if isinstance(times, (list, tuple)) else [times], data, drop)

    def response(self, times, data, drop=()):
        self.send(1, times if isinstance(times, (list, tuple)) else [times], data, drop)


def cut_handshakes(src, dst):
    """`src` without each connection's handshake (its SYN, SYN-ACK and the opener's ACK of it),
    as a capture started just after it would be."""
    opener = {}   # connection (its ends, sorted) -> the end that will ACK the SYN-ACK
    kept = []
    linktype = None
    for _n, ts, linktype, data in read_packets(src):
        seg = tcp_segment(linktype, data)
        if isinstance(seg, tuple):
            s, d, sport, dport, _seq, _ack, flags, payload = seg
            me = (s, sport)
            key = tuple(sorted((me, (d, dport))))
            if flags & SYN:
                if flags & ACK:
                    opener[key] = (d, dport)
                continue
            if opener.pop(key, None) == me and flags & ACK and not payload:
                continue
        kept.append((ts, data))
    with PcapWriter(str(dst), linktype) as w:
        for ts, data in kept:
            w.write(ts, data)
    return dst

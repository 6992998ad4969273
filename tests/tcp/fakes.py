"""Test doubles for the TCP layer: a recording ConnectionSink, Kafka-shaped frames, segment streams."""
from __future__ import annotations

import struct

from dissector.model import REQUEST
from dissector.tcp.reassembly import ACK, FIN, SYN

PSH = 0x08

CLIENT = (b"\x0a\x00\x00\x01", 40000)
BROKER = (b"\x0a\x00\x00\x02", 9092)


def request(corr, body=b"", api_key=3, version=1, client_id=b"test"):
    """A request frame (size prefix included) with header v1."""
    msg = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id + body
    return struct.pack(">i", len(msg)) + msg


def response(corr, body=b""):
    msg = struct.pack(">i", corr) + body
    return struct.pack(">i", len(msg)) + msg


class RecordingSink:
    """Records frames and issues; plausible() knows the request header shape and the correlation
    ids of the requests seen (as the real session does)."""

    def __init__(self, conn=None):
        self.conn = conn
        self.frames = []
        self.issues = []
        self.inflight = set()
        self.closed = 0

    def frame(self, frame):
        self.frames.append(frame)
        if frame.direction == REQUEST and len(frame.data) >= 8:
            self.inflight.add(struct.unpack_from(">i", frame.data, 4)[0])

    def issue(self, issue):
        self.issues.append(issue)

    def plausible(self, direction, data, pos):
        if len(data) < pos + 8:
            return False
        size, a, b = struct.unpack_from(">ihh", data, pos)
        if direction == REQUEST:
            if len(data) < pos + 14:
                return False
            corr, n = struct.unpack_from(">ih", data, pos + 8)
            return 0 <= a <= 80 and 0 <= b <= 20 and corr >= 0 and -1 <= n <= size - 10
        return struct.unpack_from(">i", data, pos + 4)[0] in self.inflight

    def close(self):
        self.closed += 1

    # helpers for assertions
    def codes(self):
        return [i.code for i in self.issues]

    def datas(self, direction):
        return [bytes(f.data) for f in self.frames if f.direction == direction]


def chop(data, size):
    """Split bytes into pieces of at most `size`."""
    return [data[i:i + size] for i in range(0, len(data), size)]


class Wire:
    """Builds the segments of one connection as (src, dst, sport, dport, seq, ack, flags, payload)
    and feeds them to a FlowTable with packet numbers and timestamps."""

    def __init__(self, table, client=CLIENT, broker=BROKER, cisn=1000, bisn=5000):
        self.table = table
        self.client = client
        self.broker = broker
        self.seq = {0: cisn, 1: bisn}
        self.isn = {0: cisn, 1: bisn}
        self.pkt = 0
        self.ts = 1_700_000_000_000_000_000

    def segment(self, side, payload=b"", flags=ACK | PSH, seq=None, ack=None):
        """A segment from side 0 (client) or 1 (broker); seq defaults to the next in order."""
        src, dst = (self.client, self.broker) if side == 0 else (self.broker, self.client)
        s = self.seq[side] if seq is None else seq
        a = self.seq[1 - side] if ack is None else ack
        if seq is None:
            self.seq[side] = (s + len(payload) + (1 if flags & (SYN | FIN) else 0)) & 0xFFFFFFFF
        return (src[0], dst[0], src[1], dst[1], s & 0xFFFFFFFF, a & 0xFFFFFFFF, flags, payload)

    def send(self, seg):
        self.pkt += 1
        self.ts += 1000
        self.table.add(self.pkt, self.ts, *seg)
        return self.pkt

    def handshake(self):
        self.send(self.segment(0, flags=SYN, ack=0))
        self.send(self.segment(1, flags=SYN | ACK))
        self.send(self.segment(0, flags=ACK))

    def close(self):
        self.send(self.segment(0, flags=FIN | ACK))
        self.send(self.segment(1, flags=FIN | ACK))
        self.send(self.segment(0, flags=ACK))

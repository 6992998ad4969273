"""Which side of a TCP flow is the Kafka broker.

With configured ports the answer is the port. With `--port auto` it comes from the traffic: the
first bytes of each direction are gathered (a request may arrive in several small segments) until
one side starts with a plausible request header. A response can look like a request too (its
correlation id reads as an api key and version), so when both sides have spoken the client is the
side whose request's correlation id the other side's first message echoes. A TLS connection is
taken when its ClientHello names a session whose keys the key log holds (the sender is the
client): its Kafka is seen once decrypted; without keys nothing tells Kafka from other TLS.

The heads of undecided flows are bounded in count and bytes (a capture may hold millions of
flows that never look like Kafka); the oldest are forgotten first and counted in `dropped`,
which the flow table's `tcp.flow_limit` Issue reports.
"""
from __future__ import annotations

import struct
from collections import OrderedDict

from .model import REQUEST, RESPONSE
from .protocol.headers import plausible_request

HEAD_BYTES = 64          # bytes gathered per direction before giving up on it
MAX_FLOWS = 1 << 14      # undecided directions remembered at once (oldest forgotten first)...
MAX_BYTES = 512 << 10    # ...and the bytes of their heads

_INT32 = struct.Struct(">i")


def request_start(head: bytes):
    """The correlation id of the request `head` starts with, or None if it does not."""
    if len(head) < 14:
        return None
    (size,) = _INT32.unpack_from(head, 0)
    if not plausible_request(head, 4, size):
        return None
    return _INT32.unpack_from(head, 8)[0]


class BrokerSide:
    """classify(src, sport, dst, dport, payload) for dissector.tcp.flows.FlowTable."""

    def __init__(self, ports, auto=False, keylog=None):
        self.ports = frozenset(ports)
        self.auto = auto
        self.keylog = keylog          # dissector.tls.keylog.KeyLog, for TLS with --port auto
        self._heads = OrderedDict()   # (src, sport, dst, dport) -> first bytes of that direction
        self._bytes = 0               # in all heads
        self.dropped = 0              # heads forgotten to stay within MAX_FLOWS / MAX_BYTES

    def __call__(self, src, sport, dst, dport, payload):
        if dport in self.ports:
            return REQUEST
        if sport in self.ports:
            return RESPONSE
        if not self.auto:
            return None
        key = (src, sport, dst, dport)
        heads = self._heads
        head = heads.pop(key, b"")
        if len(head) < HEAD_BYTES:
            more = bytes(payload[:HEAD_BYTES - len(head)])
            head += more
            self._bytes += len(more)
        heads[key] = head
        if head[:1] == b"\x16" and len(head) >= 43 and head[5] == 1 and self.keylog is not None \
                and self.keylog.secrets(head[11:43]) is not None:
            return self._decided(key, REQUEST)   # a ClientHello (record, handshake header, version)
        while len(heads) > MAX_FLOWS or self._bytes > MAX_BYTES:
            self._bytes -= len(heads.popitem(last=False)[1])
            self.dropped += 1
        other = self._heads.get((dst, dport, src, sport), b"")
        mine = request_start(head)
        theirs = request_start(other)
        if len(other) >= 8 and mine is not None:
            if _INT32.unpack_from(other, 4)[0] == mine:   # they answer my request
                return self._decided(key, REQUEST)
            if theirs is None:
                return self._decided(key, REQUEST)
        if len(other) >= 8 and theirs is not None and len(head) >= 8:
            if _INT32.unpack_from(head, 4)[0] == theirs or mine is None:
                return self._decided(key, RESPONSE)
        if mine is not None and not other and len(head) >= HEAD_BYTES:
            return self._decided(key, REQUEST)   # a long request and no answer yet
        return None

    def _decided(self, key, side):
        src, sport, dst, dport = key
        for k in (key, (dst, dport, src, sport)):
            self._bytes -= len(self._heads.pop(k, b""))
        return side

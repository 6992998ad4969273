"""The objects that flow through the pipeline: issues, connections, frames and exchanges.

They use __slots__ and plain attributes: millions of them are made on large captures.
Timestamps are integer nanoseconds since the Unix epoch (UTC) everywhere in the core.
"""
from __future__ import annotations

REQUEST = 0   # direction: client -> broker
RESPONSE = 1  # direction: broker -> client

ERROR = "error"
WARNING = "warning"
NOTE = "note"


class Issue:
    """A finding about malformed or surprising input, with a stable dotted code (e.g. `tcp.gap`).

    Decoders create issues with `stream_offset` holding the byte offset inside the message they
    decode; the session rebases it onto the TCP stream and fills `connection_id` and `frame`.
    """
    __slots__ = ("code", "severity", "detail", "connection_id", "frame", "stream_offset")

    def __init__(self, code, severity, detail, connection_id=None, frame=None, stream_offset=None):
        self.code = code
        self.severity = severity
        self.detail = detail
        self.connection_id = connection_id
        self.frame = frame
        self.stream_offset = stream_offset

    def __repr__(self):
        return (f"Issue({self.code!r}, {self.severity!r}, {self.detail!r}, conn={self.connection_id}, "
                f"frame={self.frame}, offset={self.stream_offset})")


# TCP events kept per connection for the exchanges' latency anatomy (packet numbers); past this
# many of a kind they are no longer listed (a connection that bad is told by its first ones)
MAX_TCP_EVENTS = 1 << 14


class Connection:
    """One TCP connection; the client is the side that is not the broker.

    handshake: capture times of the client's SYN, the broker's SYN-ACK and the client's ACK of
    it (None where not captured). retransmits and gaps: packet numbers of segments that carried
    bytes already delivered, and of each hole (tcp.gap: the last packet of the frame it cut, else
    where it was declared), zero_windows of segments advertising a zero window (either side,
    without SYN, FIN or RST), in capture order, at most MAX_TCP_EVENTS of each. ack_rtts: when
    the handshake was not captured, round trips from data to its ACK per direction of the data
    (REQUEST: the client's, acked by the broker), as (the ACK's packet, ns) (tcp.ack_rtt)."""
    __slots__ = ("connection_id", "client_ip", "client_port", "broker_ip", "broker_port",
                 "first_ts", "last_ts", "first_packet", "tls", "handshake", "retransmits",
                 "gaps", "zero_windows", "ack_rtts")

    def __init__(self, connection_id, client_ip, client_port, broker_ip, broker_port,
                 first_ts=0, first_packet=0):
        self.connection_id = connection_id
        self.client_ip = client_ip
        self.client_port = client_port
        self.broker_ip = broker_ip
        self.broker_port = broker_port
        self.first_ts = first_ts
        self.last_ts = first_ts
        self.first_packet = first_packet
        self.tls = None   # a TLS connection's dissector.tls.connection.TlsConnection
        self.handshake = [None, None, None]
        self.retransmits = []
        self.gaps = []
        self.zero_windows = []
        self.ack_rtts = ([], [])

    def __repr__(self):
        return (f"Connection({self.connection_id}, {self.client_ip}:{self.client_port} -> "
                f"{self.broker_ip}:{self.broker_port})")


class Frame:
    """One size-prefixed Kafka PDU as it was reassembled from one direction of a connection.

    `data` is the message after the 4-byte size prefix; `length` counts the prefix too (bytes on
    the wire). `stream_offset` is the offset of the size prefix in the direction's byte stream.
    At the headers level a message that spanned segments keeps only the first bytes its header
    takes (Session.head_size), so there `len(data)` may be less than `length - 4`.
    tcp/_handler.c makes Frames without calling __init__, setting the members as it does (its
    list of them must follow __slots__: tests/tcp/test_compiled_handler.py checks).
    """
    __slots__ = ("connection", "direction", "stream_offset", "length", "data",
                 "first_packet", "last_packet", "first_ts", "last_ts")

    def __init__(self, connection, direction, stream_offset, length, data,
                 first_packet, last_packet, first_ts, last_ts):
        self.connection = connection
        self.direction = direction
        self.stream_offset = stream_offset
        self.length = length
        self.data = data
        self.first_packet = first_packet
        self.last_packet = last_packet
        self.first_ts = first_ts
        self.last_ts = last_ts

    def __repr__(self):
        d = "req" if self.direction == REQUEST else "resp"
        return (f"Frame({d}, conn={self.connection.connection_id}, off={self.stream_offset}, "
                f"len={self.length}, packets={self.first_packet}-{self.last_packet})")


# Exchange statuses (the `status` column).
OK = "ok"
NO_RESPONSE_EXPECTED = "no_response_expected"
UNANSWERED = "unanswered"
ORPHAN_RESPONSE = "orphan_response"
MALFORMED = "malformed"


class Exchange:
    """A request paired with its response (either may be missing, see `status`).

    `request_msg`/`response_msg` are decoded `Message`s when bodies were decoded, else None
    (the header fields are always on the exchange itself). The summary attributes (error_code
    ... record_count) are filled from the decoded bodies and stay None at header level.
    _pairing.c makes Exchanges without calling __init__, setting the members as it does (its
    list of them must follow __slots__: tests/tcp/test_compiled_handler.py checks).
    """
    __slots__ = ("connection", "request", "response", "api_key", "api_version", "correlation_id",
                 "client_id", "status", "request_msg", "response_msg", "issues",
                 "error_code", "error_count", "throttle_time_ms", "topics", "partition_count",
                 "record_count", "records_bytes", "records_uncompressed_bytes", "index",
                 "raw_sasl")

    def __init__(self, connection, request, response, api_key, api_version, correlation_id,
                 client_id, status, request_msg=None, response_msg=None, issues=None):
        self.connection = connection
        self.request = request
        self.response = response
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.status = status
        self.request_msg = request_msg
        self.response_msg = response_msg
        self.issues = issues if issues is not None else []
        self.error_code = None
        self.error_count = None
        self.throttle_time_ms = None
        self.topics = None
        self.partition_count = None
        self.record_count = None
        self.records_bytes = None               # record sets carried, as on the wire
        self.records_uncompressed_bytes = None  # the same decompressed (records level)
        self.index = None  # 1-based position in the output, set by the pipeline
        self.raw_sasl = False  # a raw SASL token pair (after SaslHandshake v0): no api key

    @property
    def latency_ms(self):
        """Time from the request's last packet to the response's first packet."""
        if self.request is None or self.response is None:
            return None
        return (self.response.first_ts - self.request.last_ts) / 1e6

    @property
    def total_ms(self):
        """Time from the request's first packet to the response's last packet."""
        if self.request is None or self.response is None:
            return None
        return (self.response.last_ts - self.request.first_ts) / 1e6

    def __repr__(self):
        return (f"Exchange(conn={self.connection.connection_id}, api={self.api_key} "
                f"v{self.api_version}, corr={self.correlation_id}, {self.status})")

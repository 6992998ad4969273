"""Latency anatomy: where an exchange's time went, from the TCP layer the dissector rebuilt.

- rtt_ms: the connection's round trip from its handshake (client SYN to the client's ACK of the
  SYN-ACK, as the capture saw them); broker_rtt_ms the part of it between the capture point and
  the broker (SYN to SYN-ACK). rtt_source says "handshake".
  A connection whose handshake was not captured has them from data and ACK timing instead
  (dissector.tcp.ack_rtt; rtt_source "data_ack"): broker_rtt_ms the smallest time from a
  client segment to the broker's ACK of it, rtt_ms that plus the smallest from a broker segment
  to the client's ACK. An ACK often rides on the answer, so these bound the round trips from
  above (and broker_ms from below). Neither way: all three null.
- request_transfer_ms / response_transfer_ms: first to last packet of the request / response.
- broker_ms: request complete to the response's first byte (latency_ms) less the trip from the
  capture point to the broker and back (broker_rtt_ms): the time the broker held the request.
  Captured next to the client that is one one-way trip each way; next to the broker, nothing.
- retransmits, tcp_gaps, zero_windows: segments that carried bytes already delivered, holes
  declared (`tcp.gap`), and segments advertising a zero window (tshark's
  tcp.analysis.zero_window: window 0 without SYN, FIN or RST), on the exchange's connection from
  its request's first packet to its response's last (either direction: other exchanges in flight
  on the connection then share them).
Throttling is the exchanges table's throttle_time_ms.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

ANATOMY_COLUMNS = (
    ("rtt_ms", "float64"),
    ("broker_rtt_ms", "float64"),
    ("rtt_source", "string"),
    ("request_transfer_ms", "float64"),
    ("broker_ms", "float64"),
    ("response_transfer_ms", "float64"),
    ("retransmits", "int32"),
    ("tcp_gaps", "int32"),
    ("zero_windows", "int32"),
)
_NONE = (None,) * len(ANATOMY_COLUMNS)


def _count(events, first, last):
    if not events:
        return 0
    return bisect_right(events, last) - bisect_left(events, first)


def round_trips(conn) -> tuple:
    """(rtt_ms, broker_rtt_ms, rtt_source) of a connection (see the module doc)."""
    syn, synack, ack = conn.handshake
    if syn is not None:
        rtt = (ack - syn) / 1e6 if ack is not None and ack >= syn else None
        near = (synack - syn) / 1e6 if synack is not None and synack >= syn else None
        return rtt, near, "handshake" if rtt is not None or near is not None else None
    to_broker, to_client = (min(ns for _, ns in rtts) / 1e6 if rtts else None
                            for rtts in conn.ack_rtts)
    if to_broker is None and to_client is None:
        return None, None, None
    rtt = to_broker + to_client if to_broker is not None and to_client is not None else None
    return rtt, to_broker, "data_ack"


def exchange_anatomy(ex) -> tuple:
    """The ANATOMY_COLUMNS values of an exchange."""
    req, resp, conn = ex.request, ex.response, ex.connection
    if req is None or conn is None:
        return _NONE
    rtt, near, source = round_trips(conn)
    broker = resp_ms = None
    end = req.last_packet
    if resp is not None:
        end = resp.last_packet
        resp_ms = (resp.last_ts - resp.first_ts) / 1e6
        latency = ex.latency_ms
        if latency is not None and near is not None:
            broker = max(latency - near, 0.0)
    first = req.first_packet
    return (rtt, near, source, (req.last_ts - req.first_ts) / 1e6, broker, resp_ms,
            _count(conn.retransmits, first, end), _count(conn.gaps, first, end),
            _count(conn.zero_windows, first, end))


PARTS = ["request_transfer_ms", "broker_rtt_ms", "broker_ms", "response_transfer_ms",
         "throttle_time_ms"]
EVENTS = ["retransmits", "tcp_gaps", "zero_windows"]
DIMENSIONS = {"api": ["api_name"], "broker": ["broker"]}


def where_time_goes(ex, by: str = "api"):
    """Per api or broker (ip:port), over answered exchanges: how many, their mean total time
    (request's first packet to response's last) and the mean of each part of it (request
    transfer, network round trip to the broker, broker, response transfer; throttle time is
    part of the broker's), the broker's share of the total, the mean connection round trip, and
    retransmissions, gaps and zero windows counted on the exchanges. Fetch long polls are left
    out (their broker time is waiting for data, by request)."""
    import pandas as pd     # here: the schema imports this module on paths that must not load pandas
    from .latency import answered
    if by not in DIMENSIONS:
        raise ValueError(f"by must be one of {', '.join(DIMENSIONS)}")
    keys = DIMENSIONS[by]
    cols = keys + ["exchanges", "total_ms"] + PARTS + ["broker_share", "rtt_ms"] + EVENTS
    df = answered(ex)
    if df.empty:
        return pd.DataFrame(columns=cols)
    g = df.groupby(keys, observed=True, dropna=False)
    out = g.agg(exchanges=("total_ms", "size"), total_ms=("total_ms", "mean"),
                rtt_ms=("rtt_ms", "mean"), **{e: (e, "sum") for e in EVENTS})
    for part in PARTS:
        out[part] = g[part].mean()
    out["broker_share"] = out["broker_ms"] / out["total_ms"]
    return out.reset_index()[cols].sort_values("total_ms", ascending=False) \
        .reset_index(drop=True)

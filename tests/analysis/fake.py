"""Exchanges made by hand (no capture, no decoder) for unit tests of the table builders and
analyses: bodies are SimpleNamespaces with the specs' field names in snake_case."""
from __future__ import annotations

from types import SimpleNamespace as NS

from dissector.model import OK, Connection, Exchange, Frame, REQUEST, RESPONSE
from dissector.protocol.message import Message
from dissector.records.model import Batch, RecordSet

from analysis.load import Tables, _Collector

T0 = 1_700_000_000_000_000_000


def ms(x):
    return T0 + int(round(x * 1_000_000))


class Run:
    """Stands in for a Dissection: connections and capture-level issues."""

    def __init__(self):
        self.connections = []
        self.issues = []
        self.errors = []


def connection(run, cid=1, client=("10.0.0.1", 40000), broker=("10.0.0.2", 9092)):
    c = Connection(cid, client[0], client[1], broker[0], broker[1], first_ts=T0, first_packet=1)
    run.connections.append(c)
    return c


def exchange(conn, index, api_key, api_version, sent_ms, answered_ms=None, req=None, resp=None,
             client_id="client", status=OK, error_code=None, throttle_time_ms=None,
             record_count=None, topics=None, packet=None):
    packet = packet or index * 2
    request = Frame(conn, REQUEST, 0, 100, b"", packet, packet, ms(sent_ms), ms(sent_ms))
    response = None
    if answered_ms is not None:
        response = Frame(conn, RESPONSE, 0, 50, b"", packet + 1, packet + 1, ms(answered_ms),
                         ms(answered_ms))
    ex = Exchange(conn, request, response, api_key, api_version, index, client_id, status,
                  Message(api_key, api_version, index, client_id, body=req),
                  Message(api_key, api_version, index, body=resp) if resp is not None else None)
    ex.index = index
    ex.error_code = error_code
    ex.throttle_time_ms = throttle_time_ms
    ex.record_count = record_count
    ex.topics = topics
    return ex


def record_set(size, counts, codec=0, uncompressed=None, producer_id=-1, transactional=False):
    batches = []
    for n in counts:
        b = Batch(0, size // len(counts), 2)
        b.record_count = n
        b.codec = codec
        b.uncompressed_size = uncompressed
        b.producer_id = producer_id
        b.producer_epoch = 0 if producer_id >= 0 else -1
        b.base_sequence = 0 if producer_id >= 0 else -1
        b.is_transactional = transactional
        batches.append(b)
    return RecordSet(batches, [], False, size, sum(counts))


def tables(run, exchanges, records=False) -> Tables:
    col = _Collector(records)
    for ex in exchanges:
        col.add(ex)
    col.finish(run, "fake.pcap")
    return Tables(col.arrow(), run.errors)


__all__ = ["NS", "Run", "connection", "exchange", "record_set", "tables", "ms", "T0"]

"""Differential test against tshark's Kafka dissector (Wireshark, an implementation nobody here
wrote) on the project's real captures: for every Kafka PDU tshark decodes, we must have a message
ending in the same packet with the same direction, correlation id and, where tshark names them,
the same api key and version."""
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import require_tool
from dissector.pipeline import dissect

CAPTURES = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "captures").glob("*.pcap"))
FIELDS = ("frame.number", "kafka.request_key", "kafka.request.version", "kafka.response_key",
          "kafka.response.version", "kafka.correlation_id")


def _ints(text):
    return [int(x) for x in text.split("|") if x != ""]


def tshark_fields(path, port, fields):
    """tshark's text of `fields` (every occurrence, joined by |) for each packet it decodes as
    Kafka on `port`, one list a packet."""
    cmd = [require_tool("tshark"), "-n", "-r", path, "-d", f"tcp.port=={port},kafka", "-Y", "kafka",
           "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    return [(line.split("\t") + [""] * len(fields))[:len(fields)] for line in out.splitlines()]


def tshark_pdus(path, port):
    """{packet number: (direction, keys, versions, correlation ids)} for frames tshark decodes
    as Kafka (one entry per packet; lists hold every PDU that ends in it)."""
    pdus = {}
    for frame, rkey, rver, skey, sver, corr in tshark_fields(path, port, FIELDS):
        if not corr:
            continue
        request = rkey != ""
        pdus[int(frame)] = ("request" if request else "response",
                            _ints(rkey if request else skey), _ints(rver if request else sver),
                            _ints(corr))
    return pdus


def our_pdus(path):
    """({packet number: [(direction, api key, version, correlation id)]}, broker ports)."""
    run = dissect(path, auto=True, level="headers")
    pdus = defaultdict(list)
    for ex in run:
        if ex.raw_sasl:
            continue
        if ex.request is not None:
            pdus[ex.request.last_packet].append(("request", ex.api_key, ex.api_version,
                                                 ex.correlation_id))
        if ex.response is not None:
            corr = int.from_bytes(bytes(ex.response.data[:4]), "big", signed=True)
            pdus[ex.response.last_packet].append(("response", ex.api_key, ex.api_version, corr))
    ports = {c.broker_port for c in run.connections}
    for items in pdus.values():
        items.sort(key=lambda x: x[3])
    return pdus, ports


@pytest.mark.parametrize("path", CAPTURES, ids=[Path(p).name for p in CAPTURES])
def test_api_key_version_and_correlation_id_match_tshark(path):
    ours, ports = our_pdus(path)
    assert len(ports) == 1
    theirs = tshark_pdus(path, ports.pop())
    assert len(theirs) > 10
    checked = 0
    for frame, (direction, keys, versions, corrs) in sorted(theirs.items()):
        mine = [p for p in ours.get(frame, []) if p[0] == direction]
        assert sorted(corrs) == [p[3] for p in mine], f"packet {frame}"
        if len(keys) == len(mine):   # tshark names the api of every PDU in this packet
            by_corr = sorted(zip(corrs, keys, versions if len(versions) == len(keys) else [None] * len(keys)))
            for (corr, key, version), p in zip(by_corr, mine):
                assert (key, corr) == (p[1], p[3]), f"packet {frame}"
                if version is not None:
                    assert version == p[2], f"packet {frame}"
            checked += len(keys)
    assert checked > 10


COLUMN_FIELDS = ("frame.number", "frame.time_epoch", "kafka.correlation_id", "kafka.len",
                 "kafka.request_frame", "kafka.error", "kafka.throttle_time",
                 "kafka.unsupported_api_version", "_ws.malformed")


def tshark_packets(path, port):
    """{packet number: {field: text}} of the packets tshark decodes as Kafka."""
    rows = {}
    for line in tshark_fields(path, port, COLUMN_FIELDS):
        values = dict(zip(COLUMN_FIELDS, line))
        rows[int(values["frame.number"])] = values
    return rows


def _ns(epoch: str) -> int:
    seconds, _, fraction = epoch.partition(".")
    return int(seconds) * 1_000_000_000 + int(fraction.ljust(9, "0")[:9])


@pytest.mark.parametrize("path", CAPTURES, ids=[Path(p).name for p in CAPTURES])
def test_exchange_columns_match_tshark(path):
    """The exchange columns tshark also shows, compared on every exchange whose request and
    response each end in a packet holding only that PDU: request_bytes and response_bytes (its
    kafka.len + the 4-byte prefix); where tshark pairs the response with its request
    (kafka.request_frame), the same request packet and the request-end to response-end time;
    where tshark also decodes the body (a version tshark 4.0 knows, not malformed to it), a
    nonzero error_code exactly when the response carries a nonzero kafka.error, and
    throttle_time_ms equal to kafka.throttle_time."""
    from dissector.tables import EXCHANGE_COLUMN_NAMES, exchange_row
    run = dissect(path, auto=True, level="bodies")
    exchanges = list(run)
    (port,) = {c.broker_port for c in run.connections}
    theirs = tshark_packets(path, port)
    counts = defaultdict(int)
    for ex in exchanges:
        if ex.raw_sasl or ex.request is None or ex.response is None:
            continue
        row = dict(zip(EXCHANGE_COLUMN_NAMES, exchange_row(ex)))
        q, r = theirs.get(ex.request.last_packet), theirs.get(ex.response.last_packet)
        if q is None or r is None or "|" in q["kafka.correlation_id"] + r["kafka.correlation_id"]:
            continue
        where = f"exchange {ex.index}"
        assert row["request_bytes"] == int(q["kafka.len"]) + 4, where
        assert row["response_bytes"] == int(r["kafka.len"]) + 4, where
        counts["sizes"] += 1
        if not r["kafka.request_frame"]:
            continue   # tshark did not pair it (nor decode its body)
        assert int(r["kafka.request_frame"]) == ex.request.last_packet, where
        their_ns = _ns(r["frame.time_epoch"]) - _ns(q["frame.time_epoch"])
        assert row["response_end_ts"] - row["request_end_ts"] == their_ns, where
        counts["times"] += 1
        if r["kafka.unsupported_api_version"] or r["_ws.malformed"]:
            continue
        errors = [int(x) for x in r["kafka.error"].split("|") if x]
        assert bool(row["error_code"]) == any(errors), (where, row["error_code"], errors)
        counts["errors"] += 1
        if r["kafka.throttle_time"]:
            assert row["throttle_time_ms"] == int(r["kafka.throttle_time"]), where
            counts["throttles"] += 1
    assert counts["sizes"] >= 20 and counts["times"] >= 10 and counts["errors"] >= 3, counts

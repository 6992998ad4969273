"""Golden: the committed real captures against the clients' own record of what they did.

captures/*.truth.json come from the clients (their debug logs, delivery reports and consumed
messages; see captures/README.md), not from this project's decoders. For each capture, and for its
copy re-segmented to a 1448-byte MSS, the dissector must report exactly the requests the clients
logged, pair them, and carry exactly the records they produced and consumed.
"""
import json
from collections import Counter

import pytest

from tests.integration.checks import (all_issues, compare_requests, exchange_signature,
                                      unexplained_statuses)
from tests.support import CAPTURES
from tests.traffic import Request, record_from_json

TRUTHS = sorted(CAPTURES.glob("*.truth.json"))
NAMES = [p.name[:-len(".truth.json")] for p in TRUTHS]
PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2


def _truth(name):
    truth = json.loads((CAPTURES / f"{name}.truth.json").read_text())
    requests = [Request(**r) for c in truth["clients"] for r in c["requests"]]
    return truth, requests


def _dissect(path, port, level):
    from dissector.pipeline import dissect
    d = dissect(path, ports=(port,), level=level)
    return d, list(d)


def test_captures_are_there_and_small():
    assert len(TRUTHS) >= 6
    total = 0
    for name in NAMES:
        for suffix in (".pcap", ".mss1448.pcap"):
            size = (CAPTURES / f"{name}{suffix}").stat().st_size
            assert size <= 1 << 20, f"{name}{suffix} is over 1 MiB"
            total += size
    assert total <= 10 << 20


@pytest.mark.parametrize("suffix", [".pcap", ".mss1448.pcap"])
@pytest.mark.parametrize("name", NAMES)
def test_requests_match_the_clients(name, suffix):
    truth, requests = _truth(name)
    d, exchanges = _dissect(CAPTURES / f"{name}{suffix}", truth["broker_port"], "headers")
    missing, unexpected = compare_requests(exchanges, requests)
    assert not missing and not unexpected, (missing, unexpected)
    assert unexplained_statuses(exchanges, requests) == []
    assert all_issues(d, exchanges) == []
    assert d.errors == []


@pytest.mark.parametrize("name", NAMES)
def test_mss_copy_gives_the_same_exchanges(name):
    truth, _ = _truth(name)
    _, original = _dissect(CAPTURES / f"{name}.pcap", truth["broker_port"], "headers")
    _, cut = _dissect(CAPTURES / f"{name}.mss1448.pcap", truth["broker_port"], "headers")
    assert [exchange_signature(e) for e in cut] == [exchange_signature(e) for e in original]


def _malformed_explained(e, truth):
    """tansu's ListOffsets v0 response lacks a field: kafka-python's 0.9-mode consumer could not
    parse it either (its note in the truth file says so)."""
    notes = [n for c in truth["clients"] if c["client_id"] == e.client_id for n in c["notes"]]
    return (e.api_key, e.api_version) == (LIST_OFFSETS, 0) and \
        any("Unable to decode response" in n for n in notes)


@pytest.mark.parametrize("name", NAMES)
def test_bodies_decode_cleanly(name):
    truth, requests = _truth(name)
    d, exchanges = _dissect(CAPTURES / f"{name}.pcap", truth["broker_port"], "bodies")
    assert d.issues == []
    explained = [e for e in exchanges if e.status == "malformed" and _malformed_explained(e, truth)]
    assert [e for e in unexplained_statuses(exchanges, requests) if e not in explained] == []
    assert [(e, e.issues) for e in exchanges if e.issues and e not in explained] == []


def _rows(exchanges):
    """{(client_id, api_key): Counter of (topic, partition, key, value, headers[, offset])}."""
    from dissector.records.rows import RECORD_COLUMN_NAMES, record_rows
    col = {n: i for i, n in enumerate(RECORD_COLUMN_NAMES)}
    out = {}
    for e in exchanges:
        if e.api_key not in (PRODUCE, FETCH):
            continue
        for row in record_rows(e):
            if row[col["is_control"]]:
                continue
            headers = tuple((h["key"], h["value"]) for h in row[col["headers"]] or ())
            rec = (row[col["topic"]], row[col["partition"]], row[col["key"]], row[col["value"]],
                   headers)
            if e.api_key == FETCH:
                rec += (row[col["offset"]],)
            out.setdefault((e.client_id, e.api_key), Counter())[rec] += 1
    return out


@pytest.mark.parametrize("name", NAMES)
def test_records_are_what_the_clients_sent_and_received(name):
    truth, _ = _truth(name)
    _, exchanges = _dissect(CAPTURES / f"{name}.pcap", truth["broker_port"], "records")
    rows = _rows(exchanges)
    for client in truth["clients"]:
        cid = client["client_id"]
        sent = [record_from_json(r) for r in client["produced"] + client["failed"]]
        if sent:
            expected = Counter((r.topic, r.partition, r.key, r.value, r.headers) for r in sent)
            assert rows.get((cid, PRODUCE), Counter()) == expected, cid
        received = [record_from_json(r) for r in client["consumed"]]
        if received:
            expected = Counter((r.topic, r.partition, r.key, r.value, r.headers, r.offset)
                               for r in received)
            fetched = rows.get((cid, FETCH), Counter())
            assert not expected - fetched, f"{cid}: consumed records missing from its Fetch responses"

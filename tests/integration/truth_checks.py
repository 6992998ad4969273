"""Checks of one capture made by captures/make_captures.py against its NAME.truth.json.

Shared by the golden tests (the committed captures) and the live test (captures made afresh).
The truth files come from the clients (debug logs, delivery reports, consumed messages), not from
this project's decoders.
"""
from __future__ import annotations

import json
from collections import Counter

from tests.integration.checks import (all_issues, compare_requests, exchange_signature,
                                      unexplained_statuses)
from tests.traffic import Request, record_from_json

PRODUCE, FETCH, LIST_OFFSETS = 0, 1, 2


def load_truth(folder, name):
    truth = json.loads((folder / f"{name}.truth.json").read_text())
    requests = [Request(**r) for c in truth["clients"] for r in c["requests"]]
    return truth, requests


def keylog_of(path):
    """The key log shipped beside a TLS capture (NAME.keys.log for NAME.pcap and
    NAME.mss1448.pcap: captures/tls/), or None."""
    keys = path.with_name(path.name.split(".")[0] + ".keys.log")
    return keys if keys.exists() else None


def dissect_all(path, port, level):
    from dissector.pipeline import dissect
    d = dissect(path, ports=(port,), level=level, keylog=keylog_of(path))
    return d, list(d)


def check_requests(folder, name, suffix=".pcap"):
    """Exactly the requests the clients logged, each paired, no Issue at header level."""
    truth, requests = load_truth(folder, name)
    d, exchanges = dissect_all(folder / f"{name}{suffix}", truth["broker_port"], "headers")
    missing, unexpected = compare_requests(exchanges, requests)
    assert not missing and not unexpected, (missing, unexpected)
    assert unexplained_statuses(exchanges, requests) == []
    assert all_issues(d, exchanges) == []
    assert d.errors == []


def check_mss_copy(folder, name):
    """The 1448-byte re-segmented copy yields the same exchanges with the same timings."""
    truth, _ = load_truth(folder, name)
    _, original = dissect_all(folder / f"{name}.pcap", truth["broker_port"], "headers")
    _, cut = dissect_all(folder / f"{name}.mss1448.pcap", truth["broker_port"], "headers")
    assert [exchange_signature(e) for e in cut] == [exchange_signature(e) for e in original]


def _malformed_explained(e, truth):
    """tansu's ListOffsets v0 response lacks a field: kafka-python's 0.9-mode consumer could not
    parse it either (its note in the truth file says so)."""
    notes = [n for c in truth["clients"] if c["client_id"] == e.client_id for n in c["notes"]]
    return (e.api_key, e.api_version) == (LIST_OFFSETS, 0) and \
        any("Unable to decode response" in n for n in notes)


def check_bodies(folder, name):
    """Every body decodes without an Issue, except what the clients themselves could not parse."""
    truth, requests = load_truth(folder, name)
    d, exchanges = dissect_all(folder / f"{name}.pcap", truth["broker_port"], "bodies")
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


def check_records(folder, name):
    """Produce requests carry exactly the records each producer sent (acknowledged or refused);
    every record a consumer received is in its Fetch responses, at the offset it was given."""
    truth, _ = load_truth(folder, name)
    _, exchanges = dissect_all(folder / f"{name}.pcap", truth["broker_port"], "records")
    rows = _rows(exchanges)
    checked = 0
    for client in truth["clients"]:
        cid = client["client_id"]
        sent = [record_from_json(r) for r in client["produced"] + client["failed"]]
        if sent:
            expected = Counter((r.topic, r.partition, r.key, r.value, r.headers) for r in sent)
            assert rows.get((cid, PRODUCE), Counter()) == expected, cid
            checked += len(sent)
        received = [record_from_json(r) for r in client["consumed"]]
        if received:
            expected = Counter((r.topic, r.partition, r.key, r.value, r.headers, r.offset)
                               for r in received)
            fetched = rows.get((cid, FETCH), Counter())
            assert not expected - fetched, f"{cid}: consumed records not in its Fetch responses"
            checked += len(received)
    assert checked, "the truth holds records to compare"

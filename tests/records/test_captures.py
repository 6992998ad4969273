"""Golden check against real traffic: the records table of each project capture holds exactly
the records the clients produced (Produce requests) and every record they consumed (Fetch
responses), as the clients themselves recorded them in captures/<name>.truth.json."""
import base64
import json
from collections import Counter

import pytest

from dissector.model import REQUEST, RESPONSE
from dissector.pipeline import dissect
from dissector.records.rows import RECORD_COLUMN_NAMES, record_rows
from tests.support import CAPTURES, require_path

COL = {name: i for i, name in enumerate(RECORD_COLUMN_NAMES)}
NAMES = ["codecs", "transactions", "kafka_python", "librdkafka_produce_consume", "aiokafka",
         "legacy_messageset"]


def _unb64(s):
    return None if s is None else base64.b64decode(s)


def truth_record(d):
    return (d["topic"], d["partition"], _unb64(d["key"]), _unb64(d["value"]),
            tuple((k, _unb64(v)) for k, v in d["headers"]))


def row_record(r):
    return (r[COL["topic"]], r[COL["partition"]], r[COL["key"]], r[COL["value"]],
            tuple((h["key"], h["value"]) for h in r[COL["headers"]]))


def load(name, resegmented):
    truth = json.loads(require_path(CAPTURES / f"{name}.truth.json").read_text())
    pcap = require_path(CAPTURES / truth["resegmented" if resegmented else "capture"])
    d = dissect(pcap, ports=(truth["broker_port"],), level="records")
    rows = [row for ex in d for row in record_rows(ex)]
    return truth, rows, d


@pytest.mark.parametrize("resegmented", [False, True], ids=["capture", "mss1448"])
@pytest.mark.parametrize("name", NAMES)
def test_records_table_matches_what_clients_did(name, resegmented):
    truth, rows, d = load(name, resegmented)
    assert [i for i in d.issues if i.code.startswith("records.")] == []
    assert all(r[COL["batch_crc_ok"]] is True for r in rows)
    sent = Counter(truth_record(r) for c in truth["clients"]
                   for r in c.get("produced", []) + c.get("failed", []))
    produced = Counter(row_record(r) for r in rows if r[COL["direction"]] == REQUEST)
    # every record a client sent is on the wire; retries may repeat one, nothing else appears
    assert set(produced) == set(sent)
    assert all(produced[k] >= n for k, n in sent.items())
    fetched = {row_record(r) + (r[COL["offset"]],) for r in rows
               if r[COL["direction"]] == RESPONSE and not r[COL["is_control"]]}
    consumed = {truth_record(r) + (r["offset"],)
                for c in truth["clients"] for r in c.get("consumed", [])}
    assert consumed <= fetched


def test_every_codec_is_seen_as_the_producer_configured_it():
    truth, rows, _ = load("codecs", False)
    want = {f"codec-{c}": c for c in ("none", "gzip", "snappy", "lz4", "zstd")}
    seen = {(r[COL["topic"]], r[COL["compression"]])
            for r in rows if r[COL["direction"]] == REQUEST}
    # librdkafka sends a batch uncompressed when compressing it does not make it smaller
    assert set(want.items()) <= seen <= set(want.items()) | {(t, "none") for t in want}
    assert max(len(r[COL["value"]] or b"") for r in rows) > 100_000


def test_legacy_message_sets_are_magic_0_and_1():
    truth, rows, _ = load("legacy_messageset", False)
    magics = Counter((r[COL["magic"]], r[COL["compression"]])
                     for r in rows if r[COL["direction"]] == REQUEST)
    assert {m for m, _ in magics} >= {0, 1, 2}
    assert {c for m, c in magics if m < 2} >= {"none", "gzip", "snappy", "lz4"}
    assert all(r[COL["timestamp"]] is None for r in rows if r[COL["magic"]] == 0)


def test_transactions_and_idempotence():
    truth, rows, _ = load("transactions", False)
    produce = [r for r in rows if r[COL["direction"]] == REQUEST]
    txn = [r for r in produce if r[COL["topic"]] == "txn"]
    assert txn and all(r[COL["is_transactional"]] and r[COL["producer_id"]] >= 0 for r in txn)
    idem = [r for r in produce if r[COL["topic"]] == "txn-idempotent"]
    assert idem and all(not r[COL["is_transactional"]] and r[COL["producer_id"]] >= 0
                        and r[COL["base_sequence"]] >= 0 for r in idem)

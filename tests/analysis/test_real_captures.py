"""The analysis tables of the real captures against what their clients did (captures/*.truth.json:
the clients' own logs and delivery reports, independent of our decoders)."""
import base64
import collections
import json

import pandas as pd
import pytest

import analysis
from analysis import consumers, latency, producers
from tests.support import CAPTURES, require_path

TRUTHS = sorted(p.name for p in CAPTURES.glob("*.truth.json"))
CODECS = {"none", "gzip", "snappy", "lz4", "zstd"}


def _load(truth_name, records=True, mss=False):
    truth = json.loads(require_path(CAPTURES / truth_name).read_text())
    path = CAPTURES / (truth["resegmented"] if mss else truth["capture"])
    return truth, analysis.load(path, port=truth["broker_port"], records=records)


@pytest.fixture(scope="module", params=TRUTHS or ["missing.truth.json"])
def loaded(request):
    return _load(request.param)


def _b64(v):
    return None if v is None else base64.b64decode(v)


def test_every_request_the_clients_sent(loaded):
    truth, t = loaded
    ours = collections.Counter(zip(t.exchanges["client_id"].astype(str), t.exchanges["api_key"],
                                   t.exchanges["api_version"], t.exchanges["correlation_id"]))
    theirs = collections.Counter((r["client_id"], r["api_key"], r["api_version"],
                                  r["correlation_id"])
                                 for c in truth["clients"] for r in c["requests"])
    assert ours == theirs
    answered = {(r["client_id"], r["correlation_id"], r["api_key"])
                for c in truth["clients"] for r in c["requests"] if r["answered"]}
    ex = t.exchanges
    for cid, corr, key, status in zip(ex["client_id"].astype(str), ex["correlation_id"],
                                      ex["api_key"], ex["status"].astype(str)):
        if (cid, corr, key) in answered:   # the client saw a response: so must we
            assert status == "ok", (cid, corr, key, status)


def test_produced_records_per_partition(loaded):
    truth, t = loaded
    p = t.partitions
    produce = p[p["api_key"] == 0]
    for c in truth["clients"]:
        mine = produce[produce["client_id"] == c["client_id"]]
        ok = mine[mine["error_code"] == 0]
        expected = collections.Counter((r["topic"], r["partition"]) for r in c["produced"])
        got = ok.groupby(["topic", "partition"], observed=True)["record_count"].sum()
        assert {k: int(v) for k, v in got.items() if v} == dict(expected), c["client_id"]
        failed = mine[mine["error_code"] != 0]
        assert int(failed["record_count"].sum()) == len(c["failed"]), c["client_id"]


def test_consumed_records_were_fetched(loaded):
    truth, t = loaded
    r = t.records[t.records["api_key"] == 1]
    values = [None if v is pd.NA else v for v in r["value"]]   # null values are missing
    fetched = collections.Counter(zip(r["topic"].astype(str), r["partition"], r["offset"], values))
    for c in truth["clients"]:
        consumed = collections.Counter((x["topic"], x["partition"], x["offset"], _b64(x["value"]))
                                       for x in c["consumed"])
        assert not consumed - fetched, c["client_id"]


def test_commits_follow_consumed_offsets(loaded):
    """A consumer that read everything commits (last offset consumed + 1) per partition."""
    truth, t = loaded
    committed = consumers.committed_offsets(t)
    for c in truth["clients"]:
        if not c["consumed"]:
            continue
        mine = committed[committed["client_id"] == c["client_id"]]
        last = {}
        for x in c["consumed"]:
            key = (x["topic"], x["partition"])
            last[key] = max(last.get(key, -1), x["offset"])
        for topic, part, offset in zip(mine["topic"].astype(str), mine["partition"],
                                       mine["committed_offset"]):
            if (topic, part) in last:
                assert offset == last[(topic, part)] + 1, (c["client_id"], topic, part)


def test_fetch_long_polls_use_the_configured_wait(loaded):
    truth, t = loaded
    polls = latency.long_polls(t.exchanges)
    for c in truth["clients"]:
        cfg = c["config"]
        wait = cfg.get("fetch.wait.max.ms", cfg.get("fetch_max_wait_ms"))
        mine = polls[polls["client_id"] == c["client_id"]]
        if wait is not None and len(mine):
            assert mine["max_wait_ms"].tolist() == [wait]
            assert (mine["latency_max"] >= wait - 1).all()
    # nothing reported as slow is a long poll
    slow = latency.slowest(t.exchanges, 50)
    assert not (latency.long_poll_mask(t.exchanges)[t.exchanges["exchange"].isin(
        slow["exchange"])]).any()


def test_codecs_match_producer_configuration():
    truth, t = _load("codecs.truth.json", records=True)
    p = t.partitions
    produce = p[p["api_key"] == 0]
    for c in truth["clients"]:
        codec = c["config"].get("compression.type")
        if codec is None:
            continue
        seen = set(produce.loc[produce["client_id"] == c["client_id"], "compression"].astype(str))
        assert codec in seen and seen <= {codec, "none"}, (c["client_id"], seen)
    comp = producers.compression(t).set_index("compression")
    assert set(comp.index) <= CODECS
    for codec in CODECS - {"none"}:
        if codec in comp.index:
            assert comp.loc[codec, "ratio"] > 1.0   # the values are compressible


def test_idempotent_and_transactional_producers():
    truth, t = _load("transactions.truth.json", records=False)
    ids = producers.producer_ids(t).set_index("client_id")
    assert not bool(ids.loc["idempotent-producer", "transactional"])
    assert bool(ids.loc["txn-producer", "transactional"])
    assert isinstance(ids.loc["txn-producer", "transactional_id"], str)
    for c in truth["clients"]:
        if c["client_id"] in ids.index:
            assert ids.loc[c["client_id"], "records"] == len(c["produced"])


@pytest.mark.parametrize("truth_name", TRUTHS[:2])
def test_resegmented_copy_gives_the_same_tables(truth_name):
    _, a = _load(truth_name, records=False)
    _, b = _load(truth_name, records=False, mss=True)
    cols = ["api_name", "api_version", "correlation_id", "client_id", "latency_ms", "status",
            "error_code", "record_count"]
    assert a.exchanges[cols].equals(b.exchanges[cols])

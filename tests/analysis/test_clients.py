"""The clients table (analysis.clients) against what the clients of the real captures did and are
(captures/*.truth.json: their library and version, configuration, records produced and
consumed, requests)."""
import gzip
import json
import re
from pathlib import Path

import pandas as pd
import pytest

import analysis
from analysis.clients import CLIENT_COLUMNS, clients
from analysis.terminal import plain_values
from tests.support import CAPTURES, require_path

from . import synthetic_clients

NAMES = ["librdkafka_produce_consume", "kafka_python", "aiokafka", "transactions", "codecs"]


@pytest.fixture(scope="module", params=NAMES)
def loaded(request):
    truth = json.loads(require_path(CAPTURES / f"{request.param}.truth.json").read_text())
    t = analysis.load(CAPTURES / f"{request.param}.pcap", port=truth["broker_port"])
    return truth, t, clients(t).set_index("client_id")


def test_one_row_per_client_with_what_it_did(loaded):
    truth, t, c = loaded
    for run in truth["clients"]:
        row = c.loc[run["client_id"]]
        assert row["requests"] == len(run["requests"])
        produced = sorted({r["topic"] for r in run["produced"]})
        consumed = sorted({r["topic"] for r in run["consumed"]})
        assert list(row["topics_produced"]) == produced
        assert set(consumed) <= set(row["topics_consumed"])
        roles = set(row["role"].split("+"))
        assert ("producer" in roles) == bool(produced)
        if consumed:
            assert "consumer" in roles
            group = run["config"].get("group.id") or run["config"].get("group_id")
            assert list(row["groups"]) == [group]
        config = run["config"]
        acks = config.get("acks")
        if produced and acks is not None:
            assert list(row["acks"]) == [int(acks) if int(acks) != -1 else -1]
        if config.get("transactional.id") or config.get("transactional_id"):
            assert row["transactional"] and row["idempotent"]


def test_software_name_and_version_from_api_versions(loaded):
    truth, t, c = loaded
    ex = t.exchanges
    for run in truth["clients"]:
        mine = ex[(ex["client_id"] == run["client_id"]) & (ex["api_name"] == "ApiVersions")]
        row = c.loc[run["client_id"]]
        if (mine["api_version"] >= 3).any():
            numbers = re.findall(r"\d+\.\d+\.\d+", run["version"])
            assert numbers and all(n in row["software_version"] for n in numbers), \
                (run["version"], row["software_version"])
            assert row["software_name"].split("-")[0] in run["version"]
        else:
            assert pd.isna(row["software_name"])


def test_stale_versions_are_below_what_the_broker_offered():
    truth = json.loads(require_path(CAPTURES / "kafka_python.truth.json").read_text())
    t = analysis.load(CAPTURES / "kafka_python.pcap", port=truth["broker_port"])
    c = clients(t)
    stale = [s for row in c["stale_apis"] for s in row]
    assert stale   # kafka-python 3.0 pins old versions: tansu offers newer ones
    for s in stale:
        m = re.fullmatch(r"(\w+) v(\d+)<v(\d+)", s)
        assert m and int(m[2]) < int(m[3])


# -- the same rows as the per-client implementation it replaced -------------------------------

EXPECTED = Path(__file__).with_name("expected_clients.json.gz")


def _tables(name):
    if name.startswith("synthetic-"):
        return synthetic_clients.tables(int(name.split("-")[1]))
    truth = CAPTURES / f"{name.split('.')[0]}.truth.json"
    return analysis.load(CAPTURES / name, port=json.loads(truth.read_text())["broker_port"])


@pytest.fixture(scope="module")
def pinned():
    return json.loads(gzip.decompress(EXPECTED.read_bytes()))


def test_the_pinned_rows_cover_every_capture_and_thousands_of_clients(pinned):
    assert set(pinned) == {p.name for p in CAPTURES.glob("*.pcap")} | {"synthetic-2000"}
    synthetic = pinned["synthetic-2000"]
    assert len(synthetic) == 2000
    # the synthetic clients take every branch: roles, no client id, stale apis, groups
    assert {r["role"] for r in synthetic} >= {"producer", "consumer", "admin", "other",
                                              "producer+consumer"}
    assert any(r["client_id"] is None for r in synthetic)
    assert any(r["stale_apis"] for r in synthetic) and any(r["groups"] for r in synthetic)


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURES.glob("*.pcap"))
                         + ["synthetic-2000"])
def test_same_rows_as_the_per_client_implementation(pinned, name):
    """expected_clients.json.gz: the rows of the per-client loop this replaced (commit fce7183,
    analysis/clients.py), on the shipped captures and 2,000 synthetic clients."""
    got = plain_values(clients(_tables(name)))
    want = pinned[name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, {k: (w[k], g[k]) for k in w if w[k] != g[k]})


def test_arrow_dtypes_and_documented_columns():
    c = clients(synthetic_clients.tables(50))
    assert [n for n, _ in CLIENT_COLUMNS] == list(c.columns)
    assert all(isinstance(d, pd.ArrowDtype) for d in c.dtypes)
    empty = clients(synthetic_clients.tables(0))
    assert empty.empty and list(empty.columns) == list(c.columns)

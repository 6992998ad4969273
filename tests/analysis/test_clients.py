"""The clients table (analysis.clients) against what the clients of the real captures did and are
(captures/*.truth.json: their library and version, configuration, records produced and
consumed, requests)."""
import json
import re

import pytest

import analysis
from analysis.clients import clients
from tests.support import CAPTURES, require_path

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
            assert row["software_name"] is None


def test_stale_versions_are_below_what_the_broker_offered():
    truth = json.loads(require_path(CAPTURES / "kafka_python.truth.json").read_text())
    t = analysis.load(CAPTURES / "kafka_python.pcap", port=truth["broker_port"])
    c = clients(t)
    stale = [s for row in c["stale_apis"] for s in row]
    assert stale   # kafka-python 3.0 pins old versions: tansu offers newer ones
    for s in stale:
        m = re.fullmatch(r"(\w+) v(\d+)<v(\d+)", s)
        assert m and int(m[2]) < int(m[3])
